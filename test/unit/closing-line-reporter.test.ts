import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SHOWN_FAILURES, summaryLines } from '../../scripts/test-summary.mjs';

// The test command's last lines name what failed (a CI log may keep only its tail): the reporter lists each failure,
// and the summary of scripts/test.mjs repeats the list under the pass that failed.
const root = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'tessera-reporter-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** vitest on one fixture file, with the closing-line reporter alone; its stdout, exit code and failure file. */
function runFixture(name: string, source: string): { code: number | null; stdout: string; failures: string[] } {
  const sub = mkdtempSync(join(dir, `${name}-`));
  writeFileSync(join(sub, `${name}.test.ts`), source);
  writeFileSync(
    join(sub, 'vitest.config.mjs'),
    `export default { test: { globals: true, include: ['*.test.ts'], reporters: [${JSON.stringify(join(root, 'test/support/closing-line-reporter.ts'))}] } };\n`,
  );
  const failuresFile = join(sub, 'failures.json');
  const r = spawnSync(
    process.execPath,
    [join(root, 'node_modules/vitest/vitest.mjs'), 'run', '--root', sub, '--config', join(sub, 'vitest.config.mjs')],
    {
      cwd: sub,
      encoding: 'utf8',
      env: { ...process.env, TESSERA_TEST_FAILURES: failuresFile, FORCE_COLOR: '1' },
      timeout: 60_000,
    },
  );
  return { code: r.status, stdout: r.stdout, failures: JSON.parse(readFileSync(failuresFile, 'utf8')) as string[] };
}

describe('the list of what failed', () => {
  it('names a failed test by file and full name (a soak seed with it) and keeps its diff, without colour codes', () => {
    const r = runFixture(
      'soakish',
      `describe('randomized fault soak, seed 4242 (reproduce: npm run soak -- --seed 4242)', () => {
        it('passes', () => { expect(1).toBe(1); });
        it('local: every record once', () => { expect(['missing-record 13'], 'seed 4242').toEqual([]); });
      });\n`,
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('tests: 1 passed, 1 failed, 0 skipped');
    expect(r.failures).toHaveLength(1);
    const block = r.failures[0] as string;
    expect(block.split('\n')[0]).toBe(
      'soakish.test.ts > randomized fault soak, seed 4242 (reproduce: npm run soak -- --seed 4242) > local: every record once',
    );
    expect(block).toContain('seed 4242');
    expect(block).toContain('missing-record 13');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the escape that starts an ANSI colour sequence.
    expect(block).not.toMatch(/\u001b\[/);
    expect(r.stdout).toContain(`failed:\n  ${block.split('\n')[0]}`);
  });

  it('names a file that fails outside its tests, and writes an empty list when nothing failed', () => {
    const broken = runFixture('broken', `throw new Error('cannot import the emulator table');\nit('never runs', () => {});\n`);
    expect(broken.code).toBe(1);
    expect(broken.failures).toHaveLength(1);
    expect(broken.failures[0]).toMatch(/^broken\.test\.ts \(the file itself\)\n {4}.*cannot import the emulator table/);
    const fine = runFixture('fine', `it('passes', () => { expect(2).toBe(2); });\n`);
    expect(fine.code).toBe(0);
    expect(fine.failures).toEqual([]);
    expect(fine.stdout).not.toContain('failed:');
  });
});

describe('the summary of the test command', () => {
  it('repeats what failed under its pass, says so when nothing did, and caps a long list', () => {
    const ok = { label: 'pass 2/2: Node v22', code: 0, seconds: 118, failures: [] };
    const lines = summaryLines([
      { label: 'pass 1/2: Node v24', code: 1, seconds: 707, failures: ['a.test.ts > x\n    expected 1 to be 2'] },
      ok,
    ]);
    expect(lines).toEqual([
      '',
      '[test] summary',
      '[test]   FAILED pass 1/2: Node v24, 707 s, exit 1',
      '[test]     a.test.ts > x',
      '[test]         expected 1 to be 2',
      '[test]   ok     pass 2/2: Node v22, 118 s',
    ]);
    expect(summaryLines([{ label: 'p', code: 1, seconds: 1, failures: [] }]).at(-1)).toMatch(/no test failed: vitest exited non-zero/);
    expect(summaryLines([{ label: 'p', code: 1, seconds: 1, failures: undefined }]).at(-1)).toMatch(/ended before reporting/);
    const many = summaryLines([
      { label: 'p', code: 1, seconds: 1, failures: Array.from({ length: SHOWN_FAILURES + 3 }, (_, i) => `t${i}`) },
    ]);
    expect(many.filter((l) => /^\[test\] {5}t\d+$/.test(l))).toHaveLength(SHOWN_FAILURES);
    expect(many.at(-1)).toContain('and 3 more');
  });
});
