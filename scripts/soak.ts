/**
 * `npm run soak -- --seed N --deliveries N --backends local,aws,gcp,azure --faults all`:
 * start the emulators the backends need (as `npm run parity` does), run the
 * randomized fault soak (test/soak/soak-driver.ts) on each backend at once,
 * judge each with the oracle, and write reports/soak.json and reports/soak.md.
 *
 * Defaults: a fresh random seed (printed), 10,000 deliveries on local and
 * 2,000 on each cloud emulator (`--deliveries N` sets one figure for all, or
 * `--deliveries local=10000,aws=2000`), every backend, every fault.
 *
 * Exit status: 0 when every anomaly count is 0 on every backend, 1 when any is
 * not (the seed and the one command that reproduces it are printed), 2 when
 * the run itself broke. docs/soak.md says what is injected and judged.
 */
import { randomInt } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BACKEND_NAMES, type BackendName, PARITY_SOURCE_PREFIX } from '../test/parity/backends.js';
import { renderSoakMarkdown, reproduceCommand, type SoakReport, soakDefaults } from '../test/soak/report.js';
import {
  anomalyCount,
  FAULT_KINDS,
  type FaultKind,
  runSoak,
  SOAK_EVENTS,
  type SoakEvent,
  type SoakOutcome,
} from '../test/soak/soak-driver.js';
import type { Started } from '../test/support/emulators/process.js';
import type { EmulatorEndpoints } from '../test/support/emulators/types.js';
import { IamRun } from '../test/support/iam/run.js';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const say = (line: string) => process.stderr.write(`[soak] ${line}\n`);

type Cloud = Exclude<BackendName, 'local'>;

function parseList<T extends string>(what: string, value: string, allowed: readonly T[]): T[] {
  if (value === 'all') return [...allowed];
  const items = value.split(',').map((s) => s.trim());
  for (const item of items) {
    if (!(allowed as readonly string[]).includes(item)) {
      throw new Error(`--${what}: ${JSON.stringify(item)} is not one of ${allowed.join(', ')} (or all)`);
    }
  }
  return items as T[];
}

function parseDeliveries(value: string | undefined, backends: readonly BackendName[]): Record<BackendName, number> {
  const out = { ...soakDefaults.deliveries };
  if (value === undefined) return out;
  const number = (s: string): number => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--deliveries: ${JSON.stringify(s)} is not a positive whole number`);
    return n;
  };
  if (!value.includes('=')) {
    for (const b of backends) out[b] = number(value);
    return out;
  }
  for (const part of value.split(',')) {
    const [b, n] = part.split('=');
    if (!(BACKEND_NAMES as readonly string[]).includes(b ?? '')) throw new Error(`--deliveries: unknown backend ${JSON.stringify(b)}`);
    out[b as BackendName] = number(n ?? '');
  }
  return out;
}

/**
 * Start the emulators of the clouds asked for, and the PostgreSQL + PostGIS every backend's feature sink
 * writes to (each backend in a schema of its own), with the code the test setup uses.
 */
async function startEmulators(clouds: readonly Cloud[]): Promise<{ endpoints: EmulatorEndpoints; stops: Started[] }> {
  const starters: Record<Cloud | 'postgres', () => Promise<{ endpoints: unknown; stops: Started[] }>> = {
    aws: () => import('../test/support/emulators/aws.js').then((m) => m.start()),
    gcp: () => import('../test/support/emulators/gcp.js').then((m) => m.start()),
    azure: () => import('../test/support/emulators/azure.js').then((m) => m.start()),
    postgres: () => import('../test/support/emulators/postgres.js').then((m) => m.start()),
  };
  const wanted: (Cloud | 'postgres')[] = [...clouds, 'postgres'];
  const t0 = Date.now();
  const results = await Promise.allSettled(wanted.map((c) => starters[c]()));
  const endpoints: Record<string, unknown> = {};
  const stops: Started[] = [];
  const failed: string[] = [];
  results.forEach((r, i) => {
    const cloud = wanted[i] as Cloud | 'postgres';
    if (r.status === 'fulfilled') {
      if (r.value.endpoints) endpoints[cloud] = r.value.endpoints;
      stops.push(...r.value.stops);
    } else failed.push(`${cloud}: ${r.reason instanceof Error ? r.reason.message.split('\n')[0] : String(r.reason)}`);
  });
  if (failed.length > 0) {
    await Promise.allSettled(stops.map((s) => s.stop()));
    throw new Error(`emulators did not start (a soak never skips a backend): ${failed.join('; ')}`);
  }
  say(`emulators up in ${Date.now() - t0} ms (${wanted.join(', ')})`);
  return { endpoints: endpoints as EmulatorEndpoints, stops };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: {
      seed: { type: 'string' },
      deliveries: { type: 'string' },
      backends: { type: 'string', default: BACKEND_NAMES.join(',') },
      faults: { type: 'string', default: 'all' },
      events: { type: 'string', default: 'all' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(
      `npm run soak -- [--seed N] [--deliveries N | local=N,aws=N,...] [--backends local,aws,gcp,azure] [--faults all | ${FAULT_KINDS.join(',')}] [--events all | ${SOAK_EVENTS.join(',')}]\n`,
    );
    return 0;
  }
  const seed = values.seed === undefined ? randomInt(1, 2 ** 31 - 1) : Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a non-negative whole number, got ${values.seed}`);
  const backends = parseList('backends', values.backends, BACKEND_NAMES);
  const faults = parseList<FaultKind>('faults', values.faults, FAULT_KINDS);
  const events = parseList<SoakEvent>('events', values.events, SOAK_EVENTS);
  const deliveries = parseDeliveries(values.deliveries, backends);
  const rerun = reproduceCommand(
    seed,
    deliveries,
    backends,
    values.faults === 'all' ? 'all' : faults.join(','),
    values.events === 'all' ? undefined : events.join(','),
  );
  say(`seed ${seed}; reproduce with: ${rerun}`);
  const clouds = backends.filter((b): b is Cloud => b !== 'local');
  const { endpoints, stops } = await startEmulators(clouds);
  try {
    // Each cloud backend's requests against its stack's grants (docs/iam.md). The grants (the program under
    // mocks) are read before the backends run at once: Pulumi's mocks are process-wide, one program at a time.
    const iam = new IamRun({ config: { 'tessera:sourcePrefix': PARITY_SOURCE_PREFIX } });
    await Promise.all(clouds.map((c) => iam.grants(c)));
    const t0 = Date.now();
    const outcomes = await Promise.all(
      backends.map(async (b): Promise<[BackendName, SoakOutcome]> => {
        const outcome = await runSoak(b, endpoints, { seed, deliveries: deliveries[b], faults, events, say, iam });
        say(`${b}: ${outcome.report.deliveries} deliveries in ${outcome.report.seconds} s, ${anomalyCount(outcome.report)} anomalies`);
        const fb = outcome.report.featureBatches;
        say(
          `${b}: feature batches: ${fb.events} events, ${fb.objects} objects (+ ${fb.poisonObjects} poison), ${fb.deliveries} deliveries, ` +
            `${fb.distinctRecords} distinct records in ${fb.recordRows} rows, ${fb.badLines} bad lines in ${fb.rejectRows} rejects`,
        );
        return [b, outcome];
      }),
    );
    const report: SoakReport = { seed, backends: Object.fromEntries(outcomes.map(([b, o]) => [b, o.report])) };
    const reports = join(repo, 'reports');
    await mkdir(reports, { recursive: true });
    await writeFile(join(reports, 'soak.json'), `${JSON.stringify(report, null, 2)}\n`);
    const anomalies = Object.fromEntries(outcomes.map(([b, o]) => [b, o.anomalies]));
    const iamLines = outcomes.flatMap(([, o]) => (o.iam === undefined ? [] : [o.iam]));
    for (const line of iamLines) say(`iam ${line}`);
    const gdalLines = outcomes.flatMap(([, o]) => o.gdal ?? []);
    const md = renderSoakMarkdown(report, anomalies, {
      command: rerun,
      wallSeconds: Math.round((Date.now() - t0) / 1000),
      at: new Date(),
      iam: iamLines,
      gdal: gdalLines,
    });
    await writeFile(join(reports, 'soak.md'), md);
    process.stdout.write(md);
    const bad = outcomes.filter(([, o]) => anomalyCount(o.report) > 0 || o.anomalies.length > 0);
    if (bad.length > 0) {
      say(`FAILED on ${bad.map(([b]) => b).join(', ')} with seed ${seed}; reproduce with: ${rerun}`);
      return 1;
    }
    say(`every anomaly count is 0; wrote reports/soak.json and reports/soak.md (${Math.round((Date.now() - t0) / 1000)} s)`);
    return 0;
  } finally {
    await Promise.allSettled(stops.map((s) => s.stop()));
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    say(`the soak run broke: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(2);
  },
);
