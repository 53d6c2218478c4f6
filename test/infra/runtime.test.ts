import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from '../../infra/common/packaging.js';
import { EXAMPLE_STACK_FILES } from './stack-files.js';

interface ProjectFile {
  name: string;
  main: string;
  runtime: { name: string; options: { typescript: boolean; nodeargs: string; packagemanager: string } };
}

const project = parse(readFileSync(join(REPO_ROOT, 'Pulumi.yaml'), 'utf8')) as ProjectFile;

describe('the Pulumi project (Pulumi.yaml)', () => {
  it('is the tessera project, on Node.js, with the program in infra/', () => {
    expect(project.name).toBe('tessera');
    expect(project.runtime.name).toBe('nodejs');
    expect(project.main).toBe('infra/');
    expect(existsSync(join(REPO_ROOT, project.main, 'index.ts'))).toBe(true);
  });

  it('runs the TypeScript ES module with tsx instead of the built-in ts-node', () => {
    expect(project.runtime.options).toEqual({ typescript: false, nodeargs: '--import tsx', packagemanager: 'npm' });
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      type: string;
      devDependencies: Record<string, string>;
    };
    expect(pkg.type).toBe('module');
    // `--import tsx` resolves from the project: tsx must be installed by npm ci.
    expect(pkg.devDependencies.tsx).toBeDefined();
  });

  it.each(EXAMPLE_STACK_FILES)('loads the program for %s in plain Node started with the nodeargs of Pulumi.yaml', (file) => {
    const args = project.runtime.options.nodeargs.split(/\s+/).filter(Boolean);
    const r = spawnSync(process.execPath, [...args, 'test/infra/tsx-entry.ts', file], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}') as { cloud: string; resources: number };
    expect(summary.cloud).toBe(file.split('.')[1]?.split('-')[0]);
    expect(summary.resources).toBeGreaterThan(20);
  });
});
