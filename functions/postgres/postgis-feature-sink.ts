import type pg from 'pg';
import { InvalidParamsError, TesseraError } from '../../shared/domain/errors.js';
import type {
  FeaturePutResult,
  FeatureScene,
  FeatureSink,
  SceneRetireResult,
  SceneSupersession,
  TileFeature,
} from '../../shared/ports/feature-sink.port.js';
import { inTransaction, migrateOnce, type PgPool, postgresPool } from './connection.js';
import { pgFailure } from './postgres-error.js';

const TAG = 'feature-sink:postgis';
/** Every row ever inserted (the history): one per tile job, never updated or deleted. */
export const FEATURE_TABLE = 'tile_features';
/** One row per scene the sink saw: its identity, how many of its windows have their row, and whether it is current or retired. */
export const FEATURE_SCENES_TABLE = 'tile_feature_scenes';
/** One row per source object, window and pipeline: the rows of the newest complete scene. What roll-ups read. */
export const FEATURES_CURRENT_VIEW = 'tile_features_current';

/** The columns issue 25 added to the table of the first schema, all added by one ALTER TABLE. */
const IDENTITY_COLUMNS = [
  'source_bucket',
  'source_key',
  'source_version',
  'pipeline',
  'pipeline_version',
  'code_version',
  'window_id',
  'inserted_at',
] as const;

/**
 * The place of a row in its scene's grid, from its tile key `<tiles>/<scene>/<place>.tif`: `{row}_{col}`, or
 * `{tms}/{z}/{x}/{y}` on a tile matrix set. Generated, so the rows of the first schema get it too (their
 * tile key was always written) and a new row cannot disagree with its own tile key.
 */
const WINDOW_ID_SQL = `CASE WHEN strpos(tile_key, scene_key || '/') > 0
  THEN regexp_replace(substr(tile_key, strpos(tile_key, scene_key || '/') + length(scene_key) + 1), '\\.tif$', '') END`;

/**
 * The schema, in order; every statement is idempotent, so a database of the first schema (one row per job,
 * nothing else) and an empty one both end here, and every cold start may run it (serialised by migrateOnce).
 *
 * - `tile_features`: one row per tile job. `job_id` UNIQUE is the idempotency key (design note 1: "a unique
 *   constraint on the tile's job key"). The footprint is kept in the scene's own CRS (exact: the tile grid's
 *   corners; no SRID typmod because scenes differ, its SRID is per row) and in EPSG:4326 (for queries across
 *   UTM zones). Since issue 25 a row also carries its scene's identity: the source object (bucket, decoded
 *   key), its version, the pipeline and its version, the build, its window, and when it landed. Rows of the
 *   first schema get NULL identity (it was never stored: the scene key is a hash of it), their window from
 *   the tile key, and `inserted_at` = the migration's time.
 * - `tile_feature_scenes`: each scene's identity, `window_count` and `rows_present` (kept in the transaction
 *   of each insert), `completed_at` once every window has its row, `retired_at` with the reason and, for a
 *   newer complete scene, which one (`superseded_by`). At most one complete, unretired scene per source object
 *   and pipeline: a unique index says so, so a mistake here fails an insert rather than double counting.
 * - `tile_features_current`: the rows of each source object's and pipeline's complete, unretired scene.
 */
export const FEATURE_MIGRATIONS: readonly string[] = [
  'CREATE EXTENSION IF NOT EXISTS postgis',
  `CREATE TABLE IF NOT EXISTS ${FEATURE_TABLE} (
     job_id         text PRIMARY KEY CHECK (job_id <> ''),
     scene_key      text NOT NULL,
     tile_key       text NOT NULL,
     pixel_count    bigint NOT NULL CHECK (pixel_count >= 0),
     ndvi_mean      double precision,
     ndvi_min       double precision,
     ndvi_max       double precision,
     epsg           integer NOT NULL,
     footprint      geometry(Polygon) NOT NULL CHECK (ST_SRID(footprint) = epsg),
     footprint_4326 geometry(Polygon, 4326) NOT NULL,
     CHECK ((pixel_count = 0) = (ndvi_mean IS NULL))
   )`,
  `CREATE INDEX IF NOT EXISTS ${FEATURE_TABLE}_footprint_4326 ON ${FEATURE_TABLE} USING gist (footprint_4326)`,
  `CREATE INDEX IF NOT EXISTS ${FEATURE_TABLE}_scene ON ${FEATURE_TABLE} (scene_key)`,
  // Nullable: rows of the first schema cannot have them (the adapter refuses a feature without them). Only when one
  // is missing: ALTER TABLE takes an ACCESS EXCLUSIVE lock even when every column exists, and every cold start
  // runs this, so inserts would queue behind any long query on the table.
  `DO $$ BEGIN
     IF (SELECT count(*) FROM pg_attribute
          WHERE attrelid = to_regclass(quote_ident(current_schema()) || '.${FEATURE_TABLE}') AND NOT attisdropped
            AND attname IN (${IDENTITY_COLUMNS.map((c) => `'${c}'`).join(', ')})) < ${IDENTITY_COLUMNS.length} THEN
       ALTER TABLE ${FEATURE_TABLE}
         ADD COLUMN IF NOT EXISTS source_bucket    text,
         ADD COLUMN IF NOT EXISTS source_key       text,
         ADD COLUMN IF NOT EXISTS source_version   text,
         ADD COLUMN IF NOT EXISTS pipeline         text,
         ADD COLUMN IF NOT EXISTS pipeline_version text,
         ADD COLUMN IF NOT EXISTS code_version     text,
         ADD COLUMN IF NOT EXISTS window_id        text GENERATED ALWAYS AS (${WINDOW_ID_SQL}) STORED,
         ADD COLUMN IF NOT EXISTS inserted_at      timestamptz NOT NULL DEFAULT now();
     END IF;
   END $$`,
  `CREATE TABLE IF NOT EXISTS ${FEATURE_SCENES_TABLE} (
     scene_key         text PRIMARY KEY CHECK (scene_key <> ''),
     source_bucket     text NOT NULL CHECK (source_bucket <> ''),
     source_key        text NOT NULL CHECK (source_key <> ''),
     source_version    text NOT NULL CHECK (source_version <> ''),
     pipeline          text NOT NULL CHECK (pipeline <> ''),
     pipeline_version  text NOT NULL,
     code_version      text NOT NULL,
     window_count      integer NOT NULL CHECK (window_count > 0),
     rows_present      integer NOT NULL CHECK (rows_present >= 0 AND rows_present <= window_count),
     fanned_out_at     timestamptz,
     first_seen_at     timestamptz NOT NULL DEFAULT now(),
     completed_at      timestamptz,
     retired_at        timestamptz,
     retired_reason    text CHECK (retired_reason IN ('source-changed', 'newer-scene')),
     superseded_by     text,
     source_changed_to text,
     CONSTRAINT ${FEATURE_SCENES_TABLE}_complete CHECK (completed_at IS NULL OR rows_present = window_count),
     CONSTRAINT ${FEATURE_SCENES_TABLE}_retired CHECK ((retired_at IS NULL) = (retired_reason IS NULL)),
     CONSTRAINT ${FEATURE_SCENES_TABLE}_successor CHECK ((superseded_by IS NOT NULL) = (retired_reason IS NOT DISTINCT FROM 'newer-scene'))
   )`,
  `CREATE UNIQUE INDEX IF NOT EXISTS ${FEATURE_SCENES_TABLE}_one_current ON ${FEATURE_SCENES_TABLE} (source_bucket, source_key, pipeline)
     WHERE completed_at IS NOT NULL AND retired_at IS NULL`,
  `CREATE INDEX IF NOT EXISTS ${FEATURE_SCENES_TABLE}_source ON ${FEATURE_SCENES_TABLE} (source_bucket, source_key, pipeline)`,
  // The identity comes from the scene row: rows of the first schema whose scene completes since count too.
  // Created once, for the lock reason above (a view being replaced waits for every query reading it). Both checks
  // look in the schema the tables are created in, not along the search path, where another schema's may come first.
  `DO $$ BEGIN
     IF to_regclass(quote_ident(current_schema()) || '.${FEATURES_CURRENT_VIEW}') IS NULL THEN
       CREATE VIEW ${FEATURES_CURRENT_VIEW} AS
         SELECT s.source_bucket, s.source_key, s.pipeline, f.window_id,
                f.job_id, f.scene_key, f.tile_key, s.source_version, s.pipeline_version, s.code_version,
                f.pixel_count, f.ndvi_mean, f.ndvi_min, f.ndvi_max, f.epsg, f.footprint, f.footprint_4326,
                s.fanned_out_at, s.completed_at
           FROM ${FEATURE_SCENES_TABLE} s
           JOIN ${FEATURE_TABLE} f ON f.scene_key = s.scene_key
          WHERE s.completed_at IS NOT NULL AND s.retired_at IS NULL;
     END IF;
   END $$`,
];

/** The ring as WKT, checked first: a PostGIS parse error would say far less about which tile was wrong. */
function polygonWkt(feature: TileFeature): string {
  const ring = feature.footprint;
  const first = ring[0];
  const last = ring.at(-1);
  if (ring.length < 4 || !first || !last || first[0] !== last[0] || first[1] !== last[1]) {
    throw new InvalidParamsError(`[${TAG}] footprint of job ${feature.jobId} is not a closed ring of at least 4 points`);
  }
  if (!ring.every(([x, y]) => Number.isFinite(x) && Number.isFinite(y))) {
    throw new InvalidParamsError(`[${TAG}] footprint of job ${feature.jobId} has a non-finite coordinate`);
  }
  // Shortest round-trip decimal of each double: the stored corners are exactly the grid's.
  return `POLYGON((${ring.map(([x, y]) => `${x} ${y}`).join(',')}))`;
}

/** A scene the sink can rank: every part present. Checked before any SQL, so the message names the field. */
function checkScene(scene: FeatureScene, what: string): void {
  const blank = (
    [
      ['sceneKey', scene.sceneKey],
      ['source.bucket', scene.source.bucket],
      ['source.key', scene.source.key],
      ['sourceVersion', scene.sourceVersion],
      ['pipeline', scene.pipeline],
      ['pipelineVersion', scene.pipelineVersion],
      ['codeVersion', scene.codeVersion],
    ] as const
  ).filter(([, v]) => typeof v !== 'string' || v === '');
  if (blank.length > 0) {
    throw new InvalidParamsError(`[${TAG}] ${what} has no ${blank.map(([k]) => k).join(', ')}; a row carries its scene's identity`);
  }
  if (!Number.isInteger(scene.windowCount) || scene.windowCount <= 0) {
    throw new InvalidParamsError(`[${TAG}] ${what} says its scene has ${scene.windowCount} windows; a positive integer is required`);
  }
  if (scene.fannedOutAt !== undefined && !Number.isFinite(scene.fannedOutAt)) {
    throw new InvalidParamsError(`[${TAG}] ${what} has a fan-out time that is not a finite epoch-milliseconds value`);
  }
}

/** A scene row as read under its group's lock. */
interface SceneRow {
  readonly source_bucket: string;
  readonly source_key: string;
  readonly source_version: string;
  readonly pipeline: string;
  readonly window_count: number;
  readonly rows_present: number;
  readonly complete: boolean;
  readonly retired: boolean;
}

/**
 * Tile features in PostGIS, and which of them are current.
 *
 * `put`, in one transaction, serialised per source object and pipeline by a transaction-scoped advisory lock:
 * `INSERT ... ON CONFLICT (job_id) DO NOTHING` (a duplicate delivery, an insert retried after a lost answer or
 * a takeover after a crash between the insert and the claim's commit adds nothing: `already-present`, which the
 * pipeline counts as success), then the scene's row count; the insert that completes its scene makes it
 * current if it is the newest complete scene of its source object and pipeline, retiring the one it replaces,
 * or retires it at once if a newer one is current. `ST_Transform` to 4326 runs in the insert: the row is whole
 * or absent. A crash anywhere before the COMMIT rolls all of it back; the redelivery does it again.
 *
 * "Newest": the later first fan-out (the manifest's `createdAt`), then the scene the sink saw first, then the
 * scene key, so two readers of one database always agree (docs/postgis.md, "What current means").
 *
 * @example
 * const sink = new PostgisFeatureSink(postgresPool('postgis://tessera@db/gis'));
 * await sink.migrate();
 * await processTile({ ...backend, sink }, settings, job);
 */
export class PostgisFeatureSink implements FeatureSink {
  readonly name = 'postgis';

  private ready: Promise<void> | undefined;

  /**
   * @param pool a `pg.Pool` on a database with PostGIS 3 (or where the role may create the extension)
   * @param options `migrateOnFirstUse`: run {@link migrate} before the first insert of this process (function
   *   instances and CLI runs); the default leaves migration to the caller
   */
  constructor(
    private readonly pool: PgPool,
    private readonly options: { readonly migrateOnFirstUse?: boolean; readonly ownsPool?: boolean } = {},
  ) {}

  /** The sink of a connection URL (`postgis://` or `postgres://`), migrating on first use: what compose and the CLI use. */
  static fromUrl(url: string): PostgisFeatureSink {
    return new PostgisFeatureSink(postgresPool(url), { migrateOnFirstUse: true, ownsPool: true });
  }

  /** Ends the pool if this sink made it ({@link fromUrl}); a pool passed in belongs to the caller. */
  async close(): Promise<void> {
    if (this.options.ownsPool) await this.pool.end();
  }

  /** Creates or upgrades the extension, the tables, their indexes and the view; safe to run from many processes at once. */
  async migrate(): Promise<void> {
    try {
      await migrateOnce(this.pool, `tessera:${FEATURE_TABLE}`, FEATURE_MIGRATIONS);
    } catch (error) {
      throw pgFailure(TAG, FEATURE_TABLE, 'migration (needs PostGIS 3: apt-get install postgresql-15-postgis-3)', error);
    }
  }

  async put(feature: TileFeature): Promise<FeaturePutResult> {
    if (!Number.isInteger(feature.epsg) || feature.epsg <= 0) {
      throw new InvalidParamsError(`[${TAG}] job ${feature.jobId} has EPSG code ${feature.epsg}; a positive integer is required`);
    }
    const wkt = polygonWkt(feature);
    const { scene } = feature;
    checkScene(scene, `job ${feature.jobId}`);
    // A COG tile, or a rendered one (.png, .webp, .jpg: shared/domain/render-params.ts).
    if (!feature.tileKey.includes(`${scene.sceneKey}/`) || !/\.(?:tif|png|webp|jpg)$/.test(feature.tileKey)) {
      throw new InvalidParamsError(
        `[${TAG}] tile key ${feature.tileKey} of job ${feature.jobId} is not <prefix>/${scene.sceneKey}/<window>.tif: its window cannot be read from it`,
      );
    }
    await this.ensureMigrated();
    try {
      return await inTransaction(this.pool, async (client): Promise<FeaturePutResult> => {
        await lockSourceObject(client, scene);
        const r = await client.query(
          `INSERT INTO ${FEATURE_TABLE}
             (job_id, scene_key, tile_key, pixel_count, ndvi_mean, ndvi_min, ndvi_max, epsg, footprint, footprint_4326,
              source_bucket, source_key, source_version, pipeline, pipeline_version, code_version)
           SELECT $1, $2, $3, $4, $5, $6, $7, $8, g, ST_Transform(g, 4326), $10, $11, $12, $13, $14, $15
             FROM (SELECT ST_GeomFromText($9, $8) AS g) AS footprint
           ON CONFLICT (job_id) DO NOTHING`,
          [
            feature.jobId,
            scene.sceneKey,
            feature.tileKey,
            feature.count,
            feature.mean,
            feature.min,
            feature.max,
            feature.epsg,
            wkt,
            scene.source.bucket,
            scene.source.key,
            scene.sourceVersion,
            scene.pipeline,
            scene.pipelineVersion,
            scene.codeVersion,
          ],
        );
        const inserted = r.rowCount === 1;
        await tally(client, scene, inserted);
        return inserted ? { kind: 'inserted' } : { kind: 'already-present' };
      });
    } catch (error) {
      if (error instanceof TesseraError) throw error;
      throw pgFailure(TAG, FEATURE_TABLE, `insert of job ${feature.jobId.slice(0, 16)}...`, error);
    }
  }

  async retireScene(scene: FeatureScene, why: SceneSupersession): Promise<SceneRetireResult> {
    checkScene(scene, `scene ${scene.sceneKey.slice(0, 16)}...`);
    await this.ensureMigrated();
    try {
      return await inTransaction(this.pool, async (client): Promise<SceneRetireResult> => {
        await lockSourceObject(client, scene);
        const state = await tally(client, scene, false);
        if (state.retired) return { kind: 'already-retired' };
        if (state.complete) return { kind: 'complete' };
        await client.query(
          `UPDATE ${FEATURE_SCENES_TABLE}
              SET retired_at = now(), retired_reason = 'source-changed', source_changed_to = $2
            WHERE scene_key = $1 AND retired_at IS NULL AND completed_at IS NULL`,
          [scene.sceneKey, why.currentVersion ?? null],
        );
        return { kind: 'retired' };
      });
    } catch (error) {
      if (error instanceof TesseraError) throw error;
      throw pgFailure(TAG, FEATURE_SCENES_TABLE, `retirement of scene ${scene.sceneKey.slice(0, 16)}...`, error);
    }
  }

  private async ensureMigrated(): Promise<void> {
    if (!this.options.migrateOnFirstUse) return;
    // A failed migration is not cached: the next tile tries again (the database may have been starting).
    this.ready ??= this.migrate().catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    });
    await this.ready;
  }
}

/**
 * Serialise every change to the scenes of one source object and pipeline until COMMIT: counting rows,
 * completing a scene and retiring another are decided on what the others committed, never on a race
 * with them. The two-key form keeps these locks apart from migrateOnce's one-key lock.
 */
async function lockSourceObject(client: pg.PoolClient, scene: FeatureScene): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock(hashtext('tessera:${FEATURE_SCENES_TABLE}'), hashtext($1))`, [
    `${scene.source.bucket}\n${scene.source.key}\n${scene.pipeline}`,
  ]);
}

/**
 * Bring the scene's row up to date after an insert (or none), under its group's lock, and complete it when
 * every window has its row. A scene seen for the first time is counted from the table (this transaction's
 * insert included, and rows a build before the scene table wrote); afterwards each insert adds one.
 */
async function tally(client: pg.PoolClient, scene: FeatureScene, inserted: boolean): Promise<{ complete: boolean; retired: boolean }> {
  const found = await client.query<SceneRow>(
    `SELECT source_bucket, source_key, source_version, pipeline, window_count, rows_present,
            completed_at IS NOT NULL AS complete, retired_at IS NOT NULL AS retired
       FROM ${FEATURE_SCENES_TABLE} WHERE scene_key = $1`,
    [scene.sceneKey],
  );
  let row = found.rows[0];
  let rows: number;
  if (row === undefined) {
    const created = await client.query<{ rows_present: number }>(
      `INSERT INTO ${FEATURE_SCENES_TABLE}
         (scene_key, source_bucket, source_key, source_version, pipeline, pipeline_version, code_version,
          window_count, rows_present, fanned_out_at)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, count(*)::integer, $9::timestamptz FROM ${FEATURE_TABLE} WHERE scene_key = $1
       RETURNING rows_present`,
      [
        scene.sceneKey,
        scene.source.bucket,
        scene.source.key,
        scene.sourceVersion,
        scene.pipeline,
        scene.pipelineVersion,
        scene.codeVersion,
        scene.windowCount,
        scene.fannedOutAt === undefined ? null : new Date(scene.fannedOutAt).toISOString(),
      ],
    );
    rows = created.rows[0]?.rows_present ?? 0;
    row = {
      source_bucket: scene.source.bucket,
      source_key: scene.source.key,
      source_version: scene.sourceVersion,
      pipeline: scene.pipeline,
      window_count: scene.windowCount,
      rows_present: rows,
      complete: false,
      retired: false,
    };
  } else {
    assertSameScene(row, scene);
    if (!inserted) return { complete: row.complete, retired: row.retired };
    const updated = await client.query<{ rows_present: number }>(
      `UPDATE ${FEATURE_SCENES_TABLE} SET rows_present = rows_present + 1 WHERE scene_key = $1 RETURNING rows_present`,
      [scene.sceneKey],
    );
    rows = updated.rows[0]?.rows_present ?? row.rows_present;
  }
  if (row.complete || rows < scene.windowCount) return { complete: row.complete, retired: row.retired };
  return { complete: true, retired: await complete(client, scene, row.retired) };
}

/**
 * The scene's last window just got its row. Returns whether the scene ends retired.
 *
 * A scene retired before (its source changed) completes retired: it never becomes current. Otherwise it is
 * ranked against the group's current scene: the newer one is current, the other retired with `superseded_by`
 * naming the newer. The current scene is retired first, since the unique index allows one at a time.
 */
async function complete(client: pg.PoolClient, scene: FeatureScene, retiredBefore: boolean): Promise<boolean> {
  const setComplete = `UPDATE ${FEATURE_SCENES_TABLE} SET completed_at = now() WHERE scene_key = $1`;
  if (retiredBefore) {
    await client.query(setComplete, [scene.sceneKey]);
    return true;
  }
  const newest = await client.query<{ scene_key: string }>(
    `SELECT scene_key FROM ${FEATURE_SCENES_TABLE}
      WHERE source_bucket = $1 AND source_key = $2 AND pipeline = $3 AND retired_at IS NULL
        AND (completed_at IS NOT NULL OR scene_key = $4)
      ORDER BY fanned_out_at DESC NULLS LAST, first_seen_at DESC, scene_key DESC
      LIMIT 1`,
    [scene.source.bucket, scene.source.key, scene.pipeline, scene.sceneKey],
  );
  const winner = newest.rows[0]?.scene_key ?? scene.sceneKey;
  if (winner === scene.sceneKey) {
    await client.query(
      `UPDATE ${FEATURE_SCENES_TABLE}
          SET retired_at = now(), retired_reason = 'newer-scene', superseded_by = $4
        WHERE source_bucket = $1 AND source_key = $2 AND pipeline = $3 AND completed_at IS NOT NULL AND retired_at IS NULL`,
      [scene.source.bucket, scene.source.key, scene.pipeline, scene.sceneKey],
    );
    await client.query(setComplete, [scene.sceneKey]);
    return false;
  }
  await client.query(
    `UPDATE ${FEATURE_SCENES_TABLE}
        SET completed_at = now(), retired_at = now(), retired_reason = 'newer-scene', superseded_by = $2
      WHERE scene_key = $1`,
    [scene.sceneKey, winner],
  );
  return true;
}

/** One scene key is one scene: a row that says otherwise was written by a caller that derived it wrongly. */
function assertSameScene(row: SceneRow, scene: FeatureScene): void {
  const differs =
    row.source_bucket !== scene.source.bucket ||
    row.source_key !== scene.source.key ||
    row.source_version !== scene.sourceVersion ||
    row.pipeline !== scene.pipeline ||
    row.window_count !== scene.windowCount;
  if (differs) {
    throw new InvalidParamsError(
      `[${TAG}] scene ${scene.sceneKey.slice(0, 16)}... is recorded as ${row.source_bucket}/${row.source_key}@${row.source_version} ` +
        `(${row.pipeline}, ${row.window_count} windows), but a row names ${scene.source.bucket}/${scene.source.key}@${scene.sourceVersion} ` +
        `(${scene.pipeline}, ${scene.windowCount} windows); a scene key is derived from these, so one of the two callers is wrong`,
    );
  }
}
