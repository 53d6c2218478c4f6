import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { main } from '../../cli/main.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshPrefix } from '../support/ids.js';
import { validArtefact } from '../support/ingest-fixtures.js';

// `tessera ingest --manifest postgres://...`: the design note's own registry (a real PostgreSQL 15 started by the
// test setup), the objects in the local backend. Twice on one artefact publishes once; reconcile agrees both ways.
// Its own database: the manifest contract suite shares the server, and reconcile reads a whole table.
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const admin = new pg.Pool({ connectionString: postgres.url, max: 1 });
const database = `tessera_ingest_${freshPrefix('e2e').slice(4, -1)}`;
const url = new URL(postgres.url);
url.pathname = `/${database}`;
const manifestUrl = url.href;
let pool: pg.Pool;
beforeAll(async () => {
  await admin.query(`CREATE DATABASE ${database}`);
  pool = new pg.Pool({ connectionString: manifestUrl, max: 1 });
});
const dirs: string[] = [];
afterAll(async () => {
  await pool?.end();
  await admin.query(`DROP DATABASE IF EXISTS ${database}`);
  await admin.end();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function cli(cwd: string, ...argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { cwd, stdout: (s) => (out += s), stderr: (s) => (err += s) });
  return { code, out, err };
}

describe('tessera ingest --manifest postgres://', () => {
  it('registers in ingest_manifest once; the second run is "already-published"; reconcile --manifest-url is clean', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'tessera-ingest-pg-'));
    dirs.push(cwd);
    writeFileSync(join(cwd, 'scene.tif'), await validArtefact());
    const itemId = `S2B_${freshPrefix('pg').slice(0, -1)}`;
    const args = ['ingest', '--href', 'scene.tif', '--source', 'sentinel-2-l2a', '--item-id', itemId, '--manifest', manifestUrl, '--json'];
    const first = await cli(cwd, ...args);
    expect(first.code, first.err).toBe(0);
    expect(JSON.parse(first.out)).toMatchObject({ published: true, reason: 'published' });
    const second = await cli(cwd, ...args);
    expect(second.code, second.err).toBe(0);
    expect(JSON.parse(second.out)).toMatchObject({ published: false, reason: 'already-published', key: JSON.parse(first.out).key });
    const rows = await pool.query('SELECT checksum, object_key FROM ingest_manifest WHERE external_id = $1', [itemId]);
    expect(rows.rowCount).toBe(1);
    // The SQLite manifest in the backend directory was not used.
    const local = await cli(cwd, 'reconcile', '--manifest', '--json');
    expect(JSON.parse(local.out).objectsWithoutRow).toHaveLength(1);
    const reconciled = await cli(cwd, 'reconcile', '--manifest', '--manifest-url', manifestUrl, '--json');
    expect(JSON.parse(reconciled.out)).toMatchObject({ objectsWithoutRow: [], rowsWithoutObject: [] });
  });

  it('a bad URL is refused before anything is fetched', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'tessera-ingest-pg-'));
    dirs.push(cwd);
    writeFileSync(join(cwd, 'scene.tif'), await validArtefact());
    const refused = await cli(cwd, 'ingest', '--href', 'scene.tif', '--source', 's', '--item-id', 'x', '--manifest', 'mysql://db/x');
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/INVALID_PARAMS.*scheme mysql:/);
    expect(refused.out).toBe('');
  });
});
