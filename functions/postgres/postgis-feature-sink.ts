import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { FeaturePutResult, FeatureSink, TileFeature } from '../../shared/ports/feature-sink.port.js';
import { inTransaction, migrateOnce, type PgPool, postgresPool } from './connection.js';
import { pgFailure } from './postgres-error.js';

const TAG = 'feature-sink:postgis';
export const FEATURE_TABLE = 'tile_features';

/**
 * One row per tile job. `job_id` UNIQUE is the idempotency key (design note 1:
 * "a unique constraint on the tile's job key"). The footprint is kept in the
 * scene's own CRS (exact: the tile grid's corners) and in EPSG:4326 (for
 * queries across scenes of different UTM zones); `footprint` has no SRID
 * typmod because scenes differ, its SRID is per row (`ST_SRID`, and `epsg`).
 * Areas: `ST_Area(footprint)` in the scene's units, or
 * `ST_Area(footprint_4326::geography)` in square metres for a cross-zone roll-up.
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

/**
 * Tile features in PostGIS: `INSERT ... ON CONFLICT (job_id) DO NOTHING` in one
 * transaction, so a duplicate delivery, an insert retried after a lost answer
 * or a takeover after a crash between the insert and the claim's commit adds
 * nothing (`already-present`, which the pipeline counts as success).
 * `ST_Transform` to 4326 runs in the same statement: the row is whole or absent.
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

  /** Creates the extension, the table and its indexes if absent; safe to run from many processes at once. */
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
    if (this.options.migrateOnFirstUse) {
      // A failed migration is not cached: the next tile tries again (the database may have been starting).
      this.ready ??= this.migrate().catch((error: unknown) => {
        this.ready = undefined;
        throw error;
      });
      await this.ready;
    }
    try {
      return await inTransaction(this.pool, async (client): Promise<FeaturePutResult> => {
        const r = await client.query(
          `INSERT INTO ${FEATURE_TABLE}
             (job_id, scene_key, tile_key, pixel_count, ndvi_mean, ndvi_min, ndvi_max, epsg, footprint, footprint_4326)
           SELECT $1, $2, $3, $4, $5, $6, $7, $8, g, ST_Transform(g, 4326)
             FROM (SELECT ST_GeomFromText($9, $8) AS g) AS footprint
           ON CONFLICT (job_id) DO NOTHING`,
          [feature.jobId, feature.sceneKey, feature.tileKey, feature.count, feature.mean, feature.min, feature.max, feature.epsg, wkt],
        );
        return r.rowCount === 1 ? { kind: 'inserted' } : { kind: 'already-present' };
      });
    } catch (error) {
      throw pgFailure(TAG, FEATURE_TABLE, `insert of job ${feature.jobId.slice(0, 16)}...`, error);
    }
  }
}
