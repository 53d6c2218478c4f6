/**
 * `npm run parity`: start the emulators, run every parity scenario on the
 * local backend, AWS (DynamoDB Local + moto), GCP (fake-gcs-server, the
 * Firestore emulator, Google's Pub/Sub emulator) and Azure (Azurite), print
 * the matrix, and write reports/parity.json and reports/parity.md; every
 * cloud cell's requests are checked against its stack's grants (a denied
 * access fails the cell) and reports/iam.md lists, per role, each grant and
 * how many accesses it allowed (docs/iam.md).
 *
 * Exit status: 0 when no cell failed (limitation marks are shown, never
 * counted as a pass), 1 when any cell failed, 2 when the run itself broke.
 * How to read the matrix: docs/parity.md.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BackendName, PARITY_SOURCE_PREFIX } from '../test/parity/backends.js';
import { type MatrixEnvironment, renderMarkdown, renderMatrix, reportJson, runMatrix } from '../test/parity/matrix.js';
import { SCENARIOS } from '../test/parity/scenarios.js';
import type { Started } from '../test/support/emulators/process.js';
import type { EmulatorEndpoints } from '../test/support/emulators/types.js';
import { IamRun } from '../test/support/iam/run.js';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const say = (line: string) => process.stderr.write(`[parity] ${line}\n`);

type Cloud = Exclude<BackendName, 'local'>;

/** Starts each cloud's emulators with the same code the test setup uses; a cloud that fails to start is reported, not fatal. */
async function startEmulators(): Promise<{ env: MatrixEnvironment; stops: Started[] }> {
  const starters: Record<Cloud, () => Promise<{ endpoints: unknown; stops: Started[] }>> = {
    aws: () => import('../test/support/emulators/aws.js').then((m) => m.start()),
    gcp: () => import('../test/support/emulators/gcp.js').then((m) => m.start()),
    azure: () => import('../test/support/emulators/azure.js').then((m) => m.start()),
  };
  const clouds = Object.keys(starters) as Cloud[];
  const t0 = Date.now();
  const results = await Promise.allSettled(clouds.map((c) => starters[c]()));
  const endpoints: Record<string, unknown> = {};
  const startFailures: Partial<Record<BackendName, string>> = {};
  const stops: Started[] = [];
  results.forEach((r, i) => {
    const cloud = clouds[i] as Cloud;
    if (r.status === 'fulfilled') {
      if (r.value.endpoints) endpoints[cloud] = r.value.endpoints;
      stops.push(...r.value.stops);
    } else {
      startFailures[cloud] = r.reason instanceof Error ? (r.reason.message.split('\n')[0] ?? r.reason.message) : String(r.reason);
      say(`the ${cloud} emulators did not start: ${startFailures[cloud]}`);
    }
  });
  // One PostgreSQL + PostGIS that every backend's sink scenarios share; without it those scenarios fail, and say why.
  try {
    const postgres = await import('../test/support/emulators/postgres.js').then((m) => m.start());
    endpoints.postgres = postgres.endpoints;
    stops.push(...postgres.stops);
  } catch (error) {
    say(`PostgreSQL did not start: ${error instanceof Error ? (error.message.split('\n')[0] ?? error.message) : String(error)}`);
  }
  say(`emulators up in ${Date.now() - t0} ms (${Object.keys(endpoints).join(', ') || 'none'})`);
  return { env: { endpoints: endpoints as EmulatorEndpoints, startFailures }, stops };
}

async function main(): Promise<number> {
  const started = await startEmulators();
  const { stops } = started;
  // The grants of the stacks the parity scenes fit: their source prefix is the harness's.
  const iam = new IamRun({ config: { 'tessera:sourcePrefix': PARITY_SOURCE_PREFIX } });
  const env: MatrixEnvironment = { ...started.env, iam };
  try {
    const t0 = Date.now();
    const results = await runMatrix(SCENARIOS, env, (r) => {
      const marks = Object.entries(r.cells).map(([b, c]) => `${b} ${c.status}`);
      say(`${r.scenario.id} ${marks.join(', ')} (${Math.round((Date.now() - t0) / 1000)} s)`);
    });
    process.stdout.write(`${renderMatrix(results)}\n`);
    const reports = join(repo, 'reports');
    await mkdir(reports, { recursive: true });
    await writeFile(join(reports, 'parity.json'), `${JSON.stringify(reportJson(results), null, 2)}\n`);
    await writeFile(join(reports, 'parity.md'), renderMarkdown(results, new Date()));
    await writeFile(
      join(reports, 'iam.md'),
      iam.report({ command: 'npm run parity', at: new Date(), scope: 'the parity matrix (every scenario, every cloud column)' }),
    );
    for (const line of iam.summary()) say(`iam ${line}`);
    say(`matrix run in ${Math.round((Date.now() - t0) / 1000)} s; wrote reports/parity.json, reports/parity.md and reports/iam.md`);
    return results.some((r) => Object.values(r.cells).some((c) => c.status === 'fail')) ? 1 : 0;
  } finally {
    await Promise.allSettled(stops.map((s) => s.stop()));
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    say(`the parity run broke: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(2);
  },
);
