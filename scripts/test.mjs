#!/usr/bin/env node
// `node scripts/test.mjs` (the vitest part of `npm test`): test every cloud on
// the Node major it deploys (shared/domain/runtimes.ts, DEPLOYED_NODE_MAJORS).
//
// Pass 1, on the main Node (the newest deployed major, 24): the whole suite
// with every emulator; it is the run for the clouds that deploy that major
// (AWS, GCP) and for the local backend. Then one pass per older major (22:
// Azure), on that Node: the suites of its clouds again, their handlers,
// contracts and parity column, with only their emulators (Azurite is started
// from process.execPath, so it runs on that Node too). Both passes run even
// when the first fails, so one report covers every cloud; the exit code is
// non-zero if any pass failed. Plain JavaScript, like scripts/node.mjs, which
// it calls to pick each Node.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { nodeFor } from './node.mjs';
import { summaryLines } from './test-summary.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// The table decides the passes; tsx loads it without a build step.
register();
const { DEPLOYED_NODE_MAJORS, MAIN_NODE_MAJOR, PROJECT_NODE_MAJORS, RUNTIME_CLOUDS } = await import('../shared/domain/runtimes.ts');

/** A cloud's own suites (vitest path filters): handlers and adapters, then its contract files. */
const CLOUD_SUITES = {
  aws: ['test/aws/', 'test/contract/aws'],
  gcp: ['test/gcp/', 'test/contract/gcp'],
  azure: ['test/azure/', 'test/contract/azure'],
};
/**
 * Run in every pass: the parity matrix (restricted to the pass's clouds), the fault soak (its backends are
 * the pass's TESSERA_TEST_CLOUDS, so each cloud soaks on its own Node) and the check of the Node itself.
 */
const EVERY_PASS = ['test/parity/parity.test.ts', 'test/soak/soak.test.ts', 'test/unit/node-runtime.test.ts'];

const cloudsOn = (major) => RUNTIME_CLOUDS.filter((c) => DEPLOYED_NODE_MAJORS[c] === major);
const mainClouds = [...cloudsOn(MAIN_NODE_MAJOR), 'local'];
const { TESSERA_PARITY_BACKENDS: _all, ...inherited } = process.env;
const passes = [
  {
    major: MAIN_NODE_MAJOR,
    what: `every suite, emulators: ${process.env.TESSERA_EMULATORS ?? 'aws,gcp,azure,postgres'}; deployed major of ${mainClouds.join(', ')}`,
    env: { ...inherited, TESSERA_TEST_CLOUDS: mainClouds.join(',') },
    files: [],
  },
  ...PROJECT_NODE_MAJORS.filter((m) => m !== MAIN_NODE_MAJOR).map((major) => {
    const clouds = cloudsOn(major);
    const files = [...clouds.flatMap((c) => CLOUD_SUITES[c]), ...EVERY_PASS];
    return {
      major,
      what: `${files.join(' ')}, emulators and parity column: ${clouds.join(',')}; deployed major of ${clouds.join(', ')}`,
      env: {
        ...inherited,
        TESSERA_TEST_CLOUDS: clouds.join(','),
        // PostgreSQL too: the parity column's PostGIS sink scenarios run on every backend.
        TESSERA_EMULATORS: [...clouds, 'postgres'].join(','),
        TESSERA_PARITY_BACKENDS: clouds.join(','),
      },
      files,
    };
  }),
];

// Each pass's reporter (test/support/closing-line-reporter.ts) writes what failed to a file of its own here, and the
// summary prints it again as the last lines: a CI log that keeps only its tail still names every failed test.
const failuresDir = mkdtempSync(join(tmpdir(), 'tessera-test-failures-'));

function run(pass, failuresFile) {
  return new Promise((resolveRun) => {
    const child = spawn(
      process.execPath,
      [join(ROOT, 'scripts', 'node.mjs'), '--major', String(pass.major), 'vitest', 'run', ...pass.files],
      {
        cwd: ROOT,
        stdio: 'inherit',
        env: { ...pass.env, TESSERA_TEST_FAILURES: failuresFile },
      },
    );
    const forward = (signal) => child.kill(signal);
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, forward);
    child.on('exit', (code, signal) => {
      for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.off(s, forward);
      resolveRun(signal ? 128 : (code ?? 1));
    });
  });
}

const results = [];
for (const [i, pass] of passes.entries()) {
  let node;
  try {
    node = nodeFor(pass.major);
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  const where = node.startsWith(ROOT) ? relative(ROOT, node) : node;
  const label = `pass ${i + 1}/${passes.length}: Node ${version} (${where})`;
  console.log(`\n[test] ${label} runs ${pass.what}\n`);
  const t0 = Date.now();
  const failuresFile = join(failuresDir, `pass-${i + 1}.json`);
  const code = await run(pass, failuresFile);
  // No file: vitest ended before its reporters did (a config or global-setup failure); its own output says why.
  const failures = existsSync(failuresFile) ? JSON.parse(readFileSync(failuresFile, 'utf8')) : undefined;
  results.push({ label, code, seconds: Math.round((Date.now() - t0) / 1000), failures });
}
rmSync(failuresDir, { recursive: true, force: true });
for (const line of summaryLines(results)) console.log(line);
process.exit(results.every((r) => r.code === 0) ? 0 : 1);
