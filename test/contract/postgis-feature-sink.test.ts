import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { parsePostgresUrl } from '../../functions/postgres/connection.js';
import { PostgisFeatureSink } from '../../functions/postgres/postgis-feature-sink.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { TileFeature } from '../../shared/ports/feature-sink.port.js';
import { requireEndpoints } from '../support/global-setup.js';
import { PgFaultProxy } from '../support/pg-fault-proxy.js';
import { unconditionalSql } from './precondition-guard.js';

// The PostGIS sink against a real PostgreSQL 15 + PostGIS 3 (test/support/emulators/postgres.ts), through a TCP
// proxy that records the SQL and can cut a session right after its COMMIT reached the server.
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const proxy = await PgFaultProxy.start({ host: '127.0.0.1', port: postgres.port });
const pool = new pg.Pool({ connectionString: proxy.urlFor(postgres.url), max: 20 });
pool.on('error', () => undefined); // sessions the proxy cuts; the calls themselves already failed
const direct = new pg.Pool({ connectionString: postgres.url, max: 2 });
afterAll(async () => {
  await Promise.all([pool.end(), direct.end()]);
  await proxy.stop();
});
const sink = new PostgisFeatureSink(pool);
await sink.migrate();

/** A 256 x 256 tile of 10 m pixels at the UTM 31N false easting on the equator: its 4326 corners are known. */
function feature(overrides: Partial<TileFeature> = {}): TileFeature {
  const x0 = 500_000;
  const y0 = 2560;
  return {
    jobId: randomBytes(32).toString('hex'),
    sceneKey: `scene-${randomBytes(4).toString('hex')}`,
    tileKey: 'tiles/x/0_0.tif',
    count: 3,
    mean: 0.25,
    min: -0.5,
    max: 0.75,
    footprint: [
      [x0, y0],
      [x0 + 2560, y0],
      [x0 + 2560, 0],
      [x0, 0],
      [x0, y0],
    ],
    epsg: 32631,
    ...overrides,
  };
}

const rowsOf = async (jobId: string) =>
  (
    await direct.query<{ n: string; area: number; lon: number; lat: number; srid: number; mean: number | null }>(
      `SELECT count(*) OVER () AS n, ST_Area(footprint) AS area, ST_XMin(footprint_4326) AS lon, ST_YMin(footprint_4326) AS lat,
              ST_SRID(footprint) AS srid, ndvi_mean AS mean FROM tile_features WHERE job_id = $1`,
      [jobId],
    )
  ).rows;

describe('PostgisFeatureSink', () => {
  it('inserts one row with the footprint in the scene CRS and, through ST_Transform, in EPSG:4326', async () => {
    const f = feature();
    expect(await sink.put(f)).toEqual({ kind: 'inserted' });
    const [row] = await rowsOf(f.jobId);
    expect(row).toMatchObject({ area: 2560 * 2560, srid: 32631, mean: 0.25 });
    // Easting 500 000 is the central meridian of zone 31 (3° E); northing 0 is the equator.
    expect(row?.lon).toBeCloseTo(3, 9);
    expect(row?.lat).toBeCloseTo(0, 9);
  });

  it('a second put of the same job is already-present and changes nothing', async () => {
    const f = feature();
    await sink.put(f);
    expect(await sink.put({ ...f, mean: 0.9, count: 99 })).toEqual({ kind: 'already-present' });
    const rows = await rowsOf(f.jobId);
    expect(rows).toHaveLength(1);
    expect(rows[0]?.mean).toBe(0.25);
  });

  it('of 16 concurrent puts of one job exactly one inserts', async () => {
    const f = feature();
    const results = await Promise.all(Array.from({ length: 16 }, () => sink.put(f)));
    expect(results.filter((r) => r.kind === 'inserted')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'already-present')).toHaveLength(15);
    expect(await rowsOf(f.jobId)).toHaveLength(1);
  });

  it('an all-nodata tile is a row with count 0 and null statistics', async () => {
    const f = feature({ count: 0, mean: null, min: null, max: null });
    expect(await sink.put(f)).toEqual({ kind: 'inserted' });
    expect((await rowsOf(f.jobId))[0]?.mean).toBeNull();
  });

  it('an insert whose COMMIT answer was lost fails retryable, and its retry finds the row: already-present, one row', async () => {
    const f = feature();
    const shot = proxy.loseNextCommitAnswer(f.jobId);
    await expect(sink.put(f)).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: true });
    expect(shot.hits).toBe(1);
    expect(await sink.put(f)).toEqual({ kind: 'already-present' });
    expect(await rowsOf(f.jobId)).toHaveLength(1);
  });

  it('refuses an open ring, a non-finite corner and a bad EPSG code with typed errors; an unknown EPSG code is not retryable', async () => {
    const ring = feature().footprint;
    await expect(sink.put(feature({ footprint: ring.slice(0, 4) }))).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(sink.put(feature({ footprint: [[Number.NaN, 0], ...ring.slice(1)] }))).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(sink.put(feature({ epsg: 0 }))).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(sink.put(feature({ epsg: 999_999 }))).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: false });
  });

  it('migrate() is idempotent and safe from 8 pools at once', async () => {
    const many = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: postgres.url, max: 1 }));
    try {
      await Promise.all(many.map((p) => new PostgisFeatureSink(p).migrate()));
    } finally {
      await Promise.all(many.map((p) => p.end()));
    }
    const r = await direct.query(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'tile_features_pkey'`);
    expect(r.rows).toEqual([{ def: 'PRIMARY KEY (job_id)' }]);
  });

  it('every row write it sent was INSERT ... ON CONFLICT (job_id) DO NOTHING; none updated or deleted', () => {
    expect(proxy.statements.filter((s) => /^INSERT INTO tile_features/i.test(s)).length).toBeGreaterThan(20);
    expect(unconditionalSql(proxy.statements)).toEqual([]);
  });
});

describe('parsePostgresUrl', () => {
  it('takes postgis:// and postgres:// URLs and never shows the password', () => {
    expect(parsePostgresUrl('postgis://tessera:s3cret@db.example:5432/gis')).toEqual({
      connectionString: 'postgres://tessera:s3cret@db.example:5432/gis',
      display: 'postgres://tessera@db.example:5432/gis',
    });
  });

  it.each(['not a url', 'mysql://u@h/db', 'postgis://host-only', 'postgis:///db'])('refuses %j with a typed error', (url) => {
    expect(() => parsePostgresUrl(url)).toThrow(InvalidParamsError);
  });
});
