import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { postgresPool } from '../../functions/postgres/connection.js';
import { PostgisFeatureSink } from '../../functions/postgres/postgis-feature-sink.js';
import { PostgresManifestStore } from '../../functions/postgres/postgres-manifest-store.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { AdapterError } from '../../shared/domain/errors.js';
import type { ManifestEntry } from '../../shared/ports/manifest-store.port.js';
import { requireEndpoints } from '../support/global-setup.js';

// The pool of functions/postgres/connection.ts against the suite's real PostgreSQL 15
// (test/support/emulators/postgres.ts), whose backends are ended under it with pg_terminate_backend: what a
// restart, a failover, idle_session_timeout or a proxy's idle cut does to a warm worker's connections.
// No pool here gets an 'error' listener from the test: the one under test must bring its own.
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

// A schema of this file's own (first on the search_path of every session the pool opens): the LOCK TABLE that
// holds operations in flight below must not stall another test file's use of the shared tables.
const schema = `pool_test_${randomBytes(4).toString('hex')}`;
const url = `${postgres.url}?options=${encodeURIComponent(`-c search_path=${schema},public`)}`;
const admin = new pg.Client({ connectionString: postgres.url });
await admin.connect();
await admin.query(`CREATE SCHEMA ${schema}`);

const lines: Record<string, unknown>[] = [];
const telemetry = new JsonTelemetry((line) => lines.push(JSON.parse(line) as Record<string, unknown>));
const pool = postgresPool(url, { max: 3, telemetry });
const manifest = new PostgresManifestStore(pool);
const sink = new PostgisFeatureSink(pool);
await manifest.migrate();
await sink.migrate();

afterAll(async () => {
  await pool.end();
  await admin.query(`DROP SCHEMA ${schema} CASCADE`);
  await admin.end();
});

/** Ends the given backends the way an operator or a failover does; returns how many the server ended. */
async function terminate(pids: readonly number[]): Promise<number> {
  const r = await admin.query<{ ended: boolean }>(
    `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
      WHERE pid = ANY($1::int[]) AND application_name = 'tessera'`,
    [pids],
  );
  return r.rows.filter((row) => row.ended).length;
}

async function until(what: string, ready: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const backendPid = async (): Promise<number> => (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
const lost = () => telemetry.counters()['postgres-connection-lost'];

function entry(): ManifestEntry {
  const source = `pool-${randomBytes(4).toString('hex')}`;
  return {
    source,
    externalId: 'S2B_T30UXB_20260612',
    checksum: randomBytes(32).toString('hex'),
    key: `scenes/${source}/B04.tif`,
    bytes: 42,
    runId: `run-${randomBytes(6).toString('hex')}`,
    publishedAt: new Date(Date.UTC(2026, 11, 1)).toISOString(),
  };
}

describe('postgresPool when the server ends its connections', () => {
  it('an idle pooled connection ended by the server is logged WARN and counted, and the next operation reconnects', async () => {
    const before = lost();
    const pid = await backendPid(); // that connection now sits idle in the pool
    expect(await terminate([pid])).toBe(1);
    await until('the pool to report the ended connection', () => lost() === before + 1);
    expect(lines.filter((l) => l.event === 'postgres-connection-lost').at(-1)).toMatchObject({
      level: 'WARN',
      code: '57P01', // admin_shutdown: "terminating connection due to administrator command"
      server: expect.stringMatching(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/tessera$/),
    });

    const e = entry();
    expect(await manifest.register(e)).toEqual({ kind: 'registered', entry: e });
    expect(await backendPid()).not.toBe(pid);
  });

  it('connections ended in use fail their operations as retryable AdapterErrors, and the retries succeed', async () => {
    // Hold a query (pool.query path), a registration and a sink insert (both in inTransaction) in flight on
    // three connections, blocked behind another session's table locks, then end those three backends.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE ingest_manifest, tile_features IN ACCESS EXCLUSIVE MODE');

    const e = entry();
    const job = randomBytes(32).toString('hex');
    const feature = {
      jobId: job,
      scene: {
        sceneKey: 'scene-pool',
        source: { bucket: 'pool-sources', key: 'scenes/pool.tif' },
        sourceVersion: 'v1',
        pipeline: 'ndvi',
        pipelineVersion: '1',
        codeVersion: 'build-1',
        windowCount: 1,
        fannedOutAt: undefined,
      },
      tileKey: 'tiles/scene-pool/0_0.tif',
      count: 1,
      mean: 0.5,
      min: 0.5,
      max: 0.5,
      footprint: [
        [500_000, 10],
        [500_010, 10],
        [500_010, 0],
        [500_000, 0],
        [500_000, 10],
      ] as const,
      epsg: 32631,
    };
    const settle = <T>(p: Promise<T>) =>
      p.then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      );
    const inFlight = [settle(manifest.find(e.source, e.externalId)), settle(manifest.register(e)), settle(sink.put(feature))];

    const blocked = async () =>
      (await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [holderPid])).rows.map(
        (r) => r.pid,
      );
    await until('three pooled sessions to wait on the lock', async () => (await blocked()).length === 3);
    expect(await terminate(await blocked())).toBe(3);

    const outcomes = await Promise.all(inFlight);
    for (const outcome of outcomes) {
      expect(outcome.ok).toBe(false);
      const error = outcome.ok ? undefined : outcome.error;
      expect(error).toBeInstanceOf(AdapterError);
      expect((error as AdapterError).retryable).toBe(true);
      expect((error as AdapterError).message).toMatch(/\((57P01|no SQLSTATE): .*\); the connection was lost .*: retry/);
    }
    await holder.query('ROLLBACK');
    await holder.end();

    // The caller's retries, on connections the pool opens anew.
    expect(await manifest.register(e)).toEqual({ kind: 'registered', entry: e });
    expect(await manifest.find(e.source, e.externalId)).toEqual([e]);
    expect(await sink.put(feature)).toEqual({ kind: 'inserted' });
  });

  it('a worker process whose idle connection the server ends keeps running and exits 0', async () => {
    // The issue's reproduction in its own process, so a crash is an exit code rather than a vitest report:
    // no telemetry passed, so the pool's own stderr line is what the operator sees.
    const script = `
      const { postgresPool } = await import('./functions/postgres/connection.ts');
      const { default: pg } = await import('pg');
      const url = process.env.TESSERA_TEST_PG_URL;
      const pool = postgresPool(url, { max: 1 });
      const pid = (await pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND application_name = 'tessera'", [pid]);
      await admin.end();
      const deadline = Date.now() + 10000;
      while (pool.totalCount > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const again = (await pool.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      await pool.end();
      console.log(JSON.stringify({ pid, again }));`;
    const run = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { ...process.env, TESSERA_TEST_PG_URL: postgres.url },
      timeout: 60_000,
    }).catch((error: { code?: number; stdout?: string; stderr?: string }) => error);
    expect('code' in run ? run.code : 0, run.stderr).toBe(0);
    const { pid, again } = JSON.parse(String(run.stdout).trim()) as { pid: number; again: number };
    expect(again).not.toBe(pid);
    const warn = String(run.stderr)
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(warn).toMatchObject([{ level: 'WARN', event: 'postgres-connection-lost', code: '57P01' }]);
  }, 90_000);
});
