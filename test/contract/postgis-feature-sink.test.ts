import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { parsePostgresUrl } from '../../functions/postgres/connection.js';
import { PostgisFeatureSink } from '../../functions/postgres/postgis-feature-sink.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { FeatureScene, TileFeature } from '../../shared/ports/feature-sink.port.js';
import { requireEndpoints } from '../support/global-setup.js';
import { PgFaultProxy } from '../support/pg-fault-proxy.js';
import { unconditionalSql } from './precondition-guard.js';

// The PostGIS sink against a real PostgreSQL 15 + PostGIS 3 (test/support/emulators/postgres.ts), through a TCP
// proxy that records the SQL and can cut a session right before or right after its COMMIT reached the server.
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

const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const PIPELINE = 'ndvi';
/** A source object of this test alone: every test ranks scenes of its own objects, whatever else the database holds. */
const newSource = () => ({ bucket: 'contract-sources', key: `scenes/${randomBytes(6).toString('hex')}/T31UDQ.tif` });
type Source = ReturnType<typeof newSource>;

/** A one-window scene of a source object of its own: the rows of the first tests never meet another's. */
function feature(overrides: Partial<TileFeature> = {}): TileFeature {
  const x0 = 500_000;
  const y0 = 2560;
  const sceneKey = sha(randomBytes(8).toString('hex'));
  return {
    jobId: randomBytes(32).toString('hex'),
    scene: {
      sceneKey,
      source: newSource(),
      sourceVersion: 'v1',
      pipeline: PIPELINE,
      pipelineVersion: '1',
      codeVersion: 'build-1',
      windowCount: 1,
      fannedOutAt: Date.UTC(2026, 11, 1),
    },
    tileKey: `tiles/${sceneKey}/0_0.tif`,
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

/** What distinguishes one run of a source object from another: the version, the pipeline's version, the build, the tiling. */
interface RunSpec {
  readonly version: string;
  readonly pipelineVersion?: string;
  readonly code?: string;
  /** Windows per side over the same 5120 m square: 2 (four 2560 m tiles) or 1 (one tile). */
  readonly side?: 1 | 2;
  /** The manifest's createdAt; null: a scene without a known fan-out time. */
  readonly fannedOutAt: number | null;
}

/** A scene of `source` and its feature rows, one per window, in UTM 31N over one 5120 m square whatever the tiling. */
function run(source: Source, spec: RunSpec): { scene: FeatureScene; features: TileFeature[] } {
  const side = spec.side ?? 2;
  const sceneKey = sha(JSON.stringify([source, spec]));
  const scene: FeatureScene = {
    sceneKey,
    source,
    sourceVersion: spec.version,
    pipeline: PIPELINE,
    pipelineVersion: spec.pipelineVersion ?? '1',
    codeVersion: spec.code ?? 'build-1',
    windowCount: side * side,
    fannedOutAt: spec.fannedOutAt ?? undefined,
  };
  const size = 5120 / side;
  const features: TileFeature[] = [];
  for (let row = 0; row < side; row++) {
    for (let col = 0; col < side; col++) {
      const x = 500_000 + col * size;
      const y = 5120 - row * size;
      features.push({
        jobId: sha(`${sceneKey}\n${row}_${col}`),
        scene,
        tileKey: `tiles/${sceneKey}/${row}_${col}.tif`,
        count: 4,
        // Statistics of the version's pixels: two versions differ, two runs of one version do not.
        mean: spec.version.length / 10,
        min: 0,
        max: 1,
        footprint: [
          [x, y],
          [x + size, y],
          [x + size, y - size],
          [x, y - size],
          [x, y],
        ],
        epsg: 32631,
      });
    }
  }
  return { scene, features };
}

const putAll = async (features: readonly TileFeature[]) => {
  for (const f of features) await sink.put(f);
};

/** The roll-up docs/postgis.md tells users to write: over the view, per source object and pipeline. */
async function current(source: Source) {
  const r = await direct.query<{ rows: string; windows: string; scenes: string[] | null; deg: number | null; m2: number | null }>(
    `SELECT count(*) AS rows, count(DISTINCT window_id) AS windows, array_agg(DISTINCT scene_key) AS scenes,
            sum(ST_Area(footprint_4326) ORDER BY window_id) AS deg, sum(ST_Area(footprint_4326::geography) ORDER BY window_id) AS m2
       FROM tile_features_current WHERE source_bucket = $1 AND source_key = $2 AND pipeline = $3`,
    [source.bucket, source.key, PIPELINE],
  );
  const t = r.rows[0];
  return { rows: Number(t?.rows), windows: Number(t?.windows), scenes: t?.scenes ?? [], area4326: t?.deg ?? 0, areaM2: t?.m2 ?? 0 };
}

/** A clean single run of the same tiling on an object of its own: the figure every roll-up must equal. */
async function cleanRun(spec: Omit<RunSpec, 'version' | 'fannedOutAt'> = {}) {
  const source = newSource();
  await putAll(run(source, { ...spec, version: 'clean', fannedOutAt: Date.UTC(2026, 0, 1) }).features);
  return current(source);
}

const rawRows = async (source: Source) =>
  Number(
    (
      await direct.query<{ n: string }>('SELECT count(*) AS n FROM tile_features WHERE source_bucket = $1 AND source_key = $2', [
        source.bucket,
        source.key,
      ])
    ).rows[0]?.n,
  );

async function stateOf(scene: FeatureScene) {
  const r = await direct.query<{ rows_present: number; complete: boolean; retired_reason: string | null; superseded_by: string | null }>(
    `SELECT rows_present, completed_at IS NOT NULL AS complete, retired_reason, superseded_by
       FROM tile_feature_scenes WHERE scene_key = $1`,
    [scene.sceneKey],
  );
  return r.rows[0];
}

const rowsOf = async (jobId: string) =>
  (
    await direct.query<{ n: string; area: number; lon: number; lat: number; srid: number; mean: number | null }>(
      `SELECT count(*) OVER () AS n, ST_Area(footprint) AS area, ST_XMin(footprint_4326) AS lon, ST_YMin(footprint_4326) AS lat,
              ST_SRID(footprint) AS srid, ndvi_mean AS mean FROM tile_features WHERE job_id = $1`,
      [jobId],
    )
  ).rows;

const T0 = Date.UTC(2026, 11, 1);
const HOUR = 3_600_000;

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

  it('a row carries its source object, version, pipeline, build and window; its tile key gives the window', async () => {
    const f = feature();
    await sink.put(f);
    const r = await direct.query(
      `SELECT source_bucket, source_key, source_version, pipeline, pipeline_version, code_version, window_id, inserted_at IS NOT NULL AS stamped
         FROM tile_features WHERE job_id = $1`,
      [f.jobId],
    );
    expect(r.rows).toEqual([
      {
        source_bucket: 'contract-sources',
        source_key: f.scene.source.key,
        source_version: 'v1',
        pipeline: PIPELINE,
        pipeline_version: '1',
        code_version: 'build-1',
        window_id: '0_0',
        stamped: true,
      },
    ]);
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

  it('refuses an open ring, a non-finite corner, a bad EPSG code, a scene without identity and a foreign tile key with typed errors', async () => {
    const ring = feature().footprint;
    await expect(sink.put(feature({ footprint: ring.slice(0, 4) }))).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(sink.put(feature({ footprint: [[Number.NaN, 0], ...ring.slice(1)] }))).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(sink.put(feature({ epsg: 0 }))).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(sink.put(feature({ epsg: 999_999 }))).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: false });
    const f = feature();
    await expect(sink.put({ ...f, scene: { ...f.scene, pipeline: '' } })).rejects.toThrow(
      /has no pipeline; a row carries its scene's identity/,
    );
    await expect(sink.put({ ...f, scene: { ...f.scene, windowCount: 0 } })).rejects.toBeInstanceOf(InvalidParamsError);
    await expect(sink.put({ ...f, tileKey: 'tiles/another-scene/0_0.tif' })).rejects.toThrow(/its window cannot be read from it/);
  });

  it('refuses a row whose scene key is recorded with another identity, and stores nothing of it', async () => {
    const f = feature();
    await sink.put(f);
    const twin = { ...f, jobId: randomBytes(32).toString('hex'), scene: { ...f.scene, windowCount: 2 } };
    await expect(sink.put(twin)).rejects.toThrow(/is recorded as .* \(ndvi, 1 windows\), but a row names .* \(ndvi, 2 windows\)/);
    expect(await rowsOf(twin.jobId)).toHaveLength(0);
  });

  it('migrate() is idempotent and safe from 8 pools at once', async () => {
    const many = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: postgres.url, max: 1 }));
    try {
      await Promise.all(many.map((p) => new PostgisFeatureSink(p).migrate()));
    } finally {
      await Promise.all(many.map((p) => p.end()));
    }
    // This test's own table (the search path's): other suites keep tables of the same name in schemas of their own.
    const r = await direct.query(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'tile_features_pkey' AND conrelid = to_regclass('tile_features')`,
    );
    expect(r.rows).toEqual([{ def: 'PRIMARY KEY (job_id)' }]);
  });
});

describe('tile_features_current: one row per source object, window and pipeline, the newest complete scene', () => {
  it('an upload replaced mid-scene never counts; the previous complete scene stays current until the newest completes', async () => {
    const source = newSource();
    const clean = await cleanRun();
    const z = run(source, { version: 'v0', fannedOutAt: T0 });
    await putAll(z.features);
    // A: the next upload, two of its four windows in, then the object is overwritten again.
    const a = run(source, { version: 'v1', fannedOutAt: T0 + HOUR });
    await putAll(a.features.slice(0, 2));
    expect(await sink.retireScene(a.scene, { kind: 'source-changed', currentVersion: 'v2' })).toEqual({ kind: 'retired' });
    expect(await sink.retireScene(a.scene, { kind: 'source-changed', currentVersion: 'v2' })).toEqual({ kind: 'already-retired' });
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [z.scene.sceneKey] });
    // A store that keeps old versions lets A's last tiles finish after all: complete, and still never current.
    await putAll(a.features.slice(2));
    expect(await stateOf(a.scene)).toEqual({ rows_present: 4, complete: true, retired_reason: 'source-changed', superseded_by: null });
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [z.scene.sceneKey] });
    // B: the last upload; half of it changes nothing (no gap, no mix), all of it replaces Z.
    const b = run(source, { version: 'v2', fannedOutAt: T0 + 2 * HOUR });
    await putAll(b.features.slice(0, 3));
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [z.scene.sceneKey] });
    await putAll(b.features.slice(3));
    const now = await current(source);
    expect(now).toMatchObject({ rows: 4, windows: 4, scenes: [b.scene.sceneKey] });
    expect(now.area4326).toBe(clean.area4326);
    expect(now.areaM2).toBe(clean.areaM2);
    expect(await stateOf(z.scene)).toEqual({
      rows_present: 4,
      complete: true,
      retired_reason: 'newer-scene',
      superseded_by: b.scene.sceneKey,
    });
    // The raw table keeps every row: Z's 4, A's 4, B's 4.
    expect(await rawRows(source)).toBe(12);
  });

  it('a new-key backfill replaces the current scene once complete; ST_Area over the view equals a clean run at every step', async () => {
    const source = newSource();
    const clean = await cleanRun();
    const v1 = run(source, { version: 'v1', fannedOutAt: T0 });
    await putAll(v1.features);
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [v1.scene.sceneKey], area4326: clean.area4326 });
    const v2 = run(source, { version: 'v1', pipelineVersion: '2', fannedOutAt: T0 + HOUR });
    await putAll(v2.features.slice(0, 2));
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [v1.scene.sceneKey], area4326: clean.area4326 });
    await putAll(v2.features.slice(2));
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [v2.scene.sceneKey], area4326: clean.area4326, areaM2: clean.areaM2 });
    expect(await rawRows(source)).toBe(8);
  });

  it('a re-run under a new pipeline version and build that tiles differently replaces the whole scene, not window by window', async () => {
    const source = newSource();
    const v1 = run(source, { version: 'v1', fannedOutAt: T0 });
    await putAll(v1.features);
    const rerun = run(source, { version: 'v1', pipelineVersion: '3', code: 'build-2', side: 1, fannedOutAt: T0 + HOUR });
    await putAll(rerun.features);
    const now = await current(source);
    // One 5120 m window: its 0_0 is not v1's 0_0, so a per-window "newest" would keep v1's 0_1, 1_0 and 1_1 too.
    expect(now).toMatchObject({ rows: 1, windows: 1, scenes: [rerun.scene.sceneKey] });
    const clean = await cleanRun({ side: 1 });
    expect(now.area4326).toBe(clean.area4326);
    expect(now.areaM2).toBe(clean.areaM2);
    expect(await rawRows(source)).toBe(5);
  });

  it('an older scene that completes after a newer one is retired at once; a scene of unknown fan-out time ranks below known ones', async () => {
    const source = newSource();
    const newer = run(source, { version: 'v2', fannedOutAt: T0 + HOUR });
    await putAll(newer.features);
    const older = run(source, { version: 'v1', fannedOutAt: T0 });
    await putAll(older.features);
    const unknown = run(source, { version: 'v0', fannedOutAt: null });
    await putAll(unknown.features);
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [newer.scene.sceneKey] });
    for (const s of [older, unknown]) {
      expect(await stateOf(s.scene)).toEqual({
        rows_present: 4,
        complete: true,
        retired_reason: 'newer-scene',
        superseded_by: newer.scene.sceneKey,
      });
    }
  });

  it('each pipeline has its own current scene of a source object', async () => {
    const source = newSource();
    const ndvi = run(source, { version: 'v1', fannedOutAt: T0 });
    await putAll(ndvi.features);
    const other = ndvi.features.map((f) => {
      const scene = { ...f.scene, sceneKey: sha(`${f.scene.sceneKey}\nevi`), pipeline: 'evi' };
      return { ...f, jobId: sha(`${f.jobId}\nevi`), scene, tileKey: f.tileKey.replace(f.scene.sceneKey, scene.sceneKey) };
    });
    await putAll(other);
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [ndvi.scene.sceneKey] });
    const evi = await direct.query('SELECT count(*)::int AS n FROM tile_features_current WHERE source_key = $1 AND pipeline = $2', [
      source.key,
      'evi',
    ]);
    expect(evi.rows).toEqual([{ n: 4 }]);
  });

  it('duplicates, a crash between insert and commit and a lost COMMIT answer still give one row per job and an exact count', async () => {
    const source = newSource();
    const { scene, features } = run(source, { version: 'v1', fannedOutAt: T0 });
    const [w0, w1, w2, w3] = features as [TileFeature, TileFeature, TileFeature, TileFeature];
    // Every window of the first two 16 times at once.
    const storm = await Promise.all([w0, w1].flatMap((f) => Array.from({ length: 16 }, () => sink.put(f))));
    expect(storm.filter((r) => r.kind === 'inserted')).toHaveLength(2);
    // The process dies after its insert, before COMMIT: the server rolls the insert and the count back.
    const cut = proxy.cutBeforeNextCommit(w2.jobId);
    await expect(sink.put(w2)).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: true });
    expect(cut.hits).toBe(1);
    expect(await rowsOf(w2.jobId)).toHaveLength(0);
    expect(await stateOf(scene)).toMatchObject({ rows_present: 2, complete: false });
    expect(await sink.put(w2)).toEqual({ kind: 'inserted' });
    // The last window commits but its answer is lost: the retry is already-present and counts nothing twice.
    const lost = proxy.loseNextCommitAnswer(w3.jobId);
    await expect(sink.put(w3)).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: true });
    expect(lost.hits).toBe(1);
    expect(await sink.put(w3)).toEqual({ kind: 'already-present' });
    await Promise.all(features.map((f) => sink.put(f)));
    expect(await stateOf(scene)).toEqual({ rows_present: 4, complete: true, retired_reason: null, superseded_by: null });
    expect(await current(source)).toMatchObject({ rows: 4, windows: 4 });
    expect(await rawRows(source)).toBe(4);
  });

  it('retiring a complete scene leaves it current; retiring one never seen keeps its later rows out of the view', async () => {
    const source = newSource();
    const done = run(source, { version: 'v1', fannedOutAt: T0 });
    await putAll(done.features);
    expect(await sink.retireScene(done.scene, { kind: 'source-changed', currentVersion: undefined })).toEqual({ kind: 'complete' });
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [done.scene.sceneKey] });
    const ghost = run(source, { version: 'v2', fannedOutAt: T0 + HOUR });
    expect(await sink.retireScene(ghost.scene, { kind: 'source-changed', currentVersion: 'v3' })).toEqual({ kind: 'retired' });
    await putAll(ghost.features);
    expect(await current(source)).toMatchObject({ rows: 4, scenes: [done.scene.sceneKey] });
    const r = await direct.query('SELECT source_changed_to FROM tile_feature_scenes WHERE scene_key = $1', [ghost.scene.sceneKey]);
    expect(r.rows).toEqual([{ source_changed_to: 'v3' }]);
  });

  it('the database itself refuses a second current scene of one source object and pipeline', async () => {
    const source = newSource();
    const old = run(source, { version: 'v1', fannedOutAt: T0 });
    await putAll(old.features);
    await putAll(run(source, { version: 'v2', fannedOutAt: T0 + HOUR }).features);
    await expect(
      direct.query(`UPDATE tile_feature_scenes SET retired_at = NULL, retired_reason = NULL, superseded_by = NULL WHERE scene_key = $1`, [
        old.scene.sceneKey,
      ]),
    ).rejects.toMatchObject({ code: '23505' });
  });

  it('every write of tile_features it sent was INSERT ... ON CONFLICT (job_id) DO NOTHING; none updated or deleted', () => {
    expect(proxy.statements.filter((s) => /^INSERT INTO tile_features\b/i.test(s)).length).toBeGreaterThan(20);
    expect(unconditionalSql(proxy.statements)).toEqual([]);
  });
});

describe('migrate() on a table of the first schema (one row per job, no identity)', () => {
  it('adds the columns, gives old rows their window, keeps them out of the view, and adopts them once their scene completes', async () => {
    const schema = `old_schema_${randomBytes(4).toString('hex')}`;
    await direct.query(`CREATE SCHEMA ${schema}`);
    const url = new URL(postgres.url);
    url.searchParams.set('options', `-c search_path=${schema},public`);
    const scoped = new pg.Pool({ connectionString: url.toString(), max: 2 });
    try {
      // The table as the first schema made it, and two rows a build of that time wrote (one on a tile matrix set).
      await scoped.query(`CREATE TABLE tile_features (
        job_id text PRIMARY KEY CHECK (job_id <> ''), scene_key text NOT NULL, tile_key text NOT NULL,
        pixel_count bigint NOT NULL CHECK (pixel_count >= 0), ndvi_mean double precision, ndvi_min double precision,
        ndvi_max double precision, epsg integer NOT NULL, footprint geometry(Polygon) NOT NULL CHECK (ST_SRID(footprint) = epsg),
        footprint_4326 geometry(Polygon, 4326) NOT NULL, CHECK ((pixel_count = 0) = (ndvi_mean IS NULL)))`);
      const source = newSource();
      const { scene, features } = run(source, { version: 'v1', fannedOutAt: T0 });
      const [w0, w1, w2, w3] = features as [TileFeature, TileFeature, TileFeature, TileFeature];
      const tms = sha('another scene, on a tile matrix set');
      const old = [
        { jobId: w0.jobId, sceneKey: scene.sceneKey, tileKey: w0.tileKey, footprint: w0.footprint },
        { jobId: w1.jobId, sceneKey: scene.sceneKey, tileKey: w1.tileKey, footprint: w1.footprint },
        { jobId: sha(`${tms}\n0_0`), sceneKey: tms, tileKey: `tiles/${tms}/WebMercatorQuad/12/2100/1400.tif`, footprint: w2.footprint },
      ];
      for (const f of old) {
        await scoped.query(
          `INSERT INTO tile_features (job_id, scene_key, tile_key, pixel_count, ndvi_mean, ndvi_min, ndvi_max, epsg, footprint, footprint_4326)
           SELECT $1, $2, $3, 4, 0.1, 0, 1, 32631, g, ST_Transform(g, 4326) FROM (SELECT ST_GeomFromText($4, 32631) AS g) AS x`,
          [f.jobId, f.sceneKey, f.tileKey, `POLYGON((${f.footprint.map(([x, y]) => `${x} ${y}`).join(',')}))`],
        );
      }
      const upgraded = new PostgisFeatureSink(scoped);
      await upgraded.migrate();
      await upgraded.migrate();
      const rows = await scoped.query(
        'SELECT window_id, source_key, inserted_at IS NOT NULL AS stamped FROM tile_features ORDER BY window_id',
      );
      expect(rows.rows).toEqual([
        { window_id: '0_0', source_key: null, stamped: true },
        { window_id: '0_1', source_key: null, stamped: true },
        { window_id: 'WebMercatorQuad/12/2100/1400', source_key: null, stamped: true },
      ]);
      expect((await scoped.query('SELECT count(*)::int AS n FROM tile_features_current')).rows).toEqual([{ n: 0 }]);
      // The scene's last two windows come after the upgrade: its first row of the new schema counts the two old
      // ones in, and the fourth completes it. The view then shows all four, with the identity of the scene row.
      expect(await upgraded.put(w2)).toEqual({ kind: 'inserted' });
      expect((await scoped.query('SELECT rows_present FROM tile_feature_scenes')).rows).toEqual([{ rows_present: 3 }]);
      expect(await upgraded.put(w3)).toEqual({ kind: 'inserted' });
      const view = await scoped.query('SELECT source_key, window_id FROM tile_features_current ORDER BY window_id');
      expect(view.rows).toEqual(['0_0', '0_1', '1_0', '1_1'].map((window_id) => ({ source_key: source.key, window_id })));
    } finally {
      await scoped.end();
      await direct.query(`DROP SCHEMA ${schema} CASCADE`);
    }
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
