import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PostgisFeatureSink } from '../../functions/postgres/postgis-feature-sink.js';
import { POSTGRES_INSTALL_HINT } from '../../scripts/emulators/postgres.mjs';
import type { EmulatorEndpoints } from '../support/emulators/types.js';

/** One tile's feature row as the roll-up reads it back (geometry as WKT, so records compare as text). */
export interface FeatureRowFact {
  readonly window: string;
  readonly count: number;
  readonly mean: number | null;
  readonly min: number | null;
  readonly max: number | null;
  readonly epsg: number;
  readonly footprint: string;
}

/** A scene's rows in the sink: how many, how many distinct jobs, the area roll-ups and each row. */
export interface FeatureRollUp {
  readonly rows: number;
  readonly distinctJobs: number;
  /** SUM(ST_Area(footprint)): square units of the scene CRS (metres for UTM). */
  readonly areaSceneCrs: number;
  /** SUM(ST_Area(footprint_4326::geography)): square metres on the spheroid, rounded to 1 m². */
  readonly areaGeographyM2: number;
  readonly byWindow: readonly FeatureRowFact[];
}

/** What `tile_features_current` holds for one source object and pipeline: the roll-up users are told to write. */
export interface CurrentRollUp {
  readonly rows: number;
  readonly distinctWindows: number;
  /** The scene keys the rows come from (one, once a scene is complete; none before). */
  readonly sceneKeys: readonly string[];
  readonly areaSceneCrs: number;
  readonly areaGeographyM2: number;
  /** SUM(ST_Area(footprint_4326)): square degrees, the planar area of the 4326 footprints. */
  readonly area4326: number;
  readonly byWindow: readonly FeatureRowFact[];
}

/** A scene's state in the sink (`tile_feature_scenes`), as a record compares it. */
export interface SceneStateFact {
  readonly rows: string;
  /** `current`, `incomplete`, `complete` (neither current nor retired: cannot happen), or `retired:<reason>`. */
  readonly state: string;
  /** The scene key that replaced it (a newer complete scene); null otherwise. */
  readonly supersededBy: string | null;
}

/**
 * The PostGIS feature sink of one parity backend: a schema of its own on the
 * one real PostgreSQL + PostGIS the test setup started, a sink the scenarios
 * put in front of the tile use case, and the roll-ups they read back.
 *
 * A schema per backend and scenario, because every backend's SourceRef names
 * the same logical bucket and key (backends.ts: the keys must derive alike):
 * the sink ranks scenes per source object and pipeline, so four backends
 * running one scenario at once in one schema would rank each other's scenes.
 */
export class ParityFeatures {
  readonly sink: PostgisFeatureSink;
  readonly #pool: pg.Pool;
  readonly #admin: pg.Pool;
  readonly #schema: string;

  private constructor(url: string, admin: pg.Pool, schema: string) {
    const scoped = new URL(url);
    scoped.searchParams.set('options', `-c search_path=${schema},public`);
    this.#pool = new pg.Pool({ connectionString: scoped.toString(), max: 4 });
    this.#admin = admin;
    this.#schema = schema;
    this.sink = new PostgisFeatureSink(this.#pool, { migrateOnFirstUse: true });
  }

  /** The pool on this backend's schema: the feature batch scenarios put their sink on it (scenarios-feature-batches.ts). */
  get pool(): pg.Pool {
    return this.#pool;
  }

  static async create(url: string): Promise<ParityFeatures> {
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    const schema = `parity_${randomBytes(6).toString('hex')}`;
    await admin.query(`CREATE SCHEMA ${schema}`);
    return new ParityFeatures(url, admin, schema);
  }

  async rollUp(sceneKey: string): Promise<FeatureRollUp> {
    await this.sink.migrate();
    const totals = await this.#pool.query<{ rows: string; jobs: string; area: number | null; geo: number | null }>(
      `SELECT count(*) AS rows, count(DISTINCT job_id) AS jobs,
              sum(ST_Area(footprint)) AS area, sum(ST_Area(footprint_4326::geography)) AS geo
         FROM tile_features WHERE scene_key = $1`,
      [sceneKey],
    );
    const rows = await this.#pool.query<RowOfSql & { tile_key: string }>(
      `SELECT tile_key, pixel_count, ndvi_mean, ndvi_min, ndvi_max, epsg, ST_AsText(footprint) AS wkt
         FROM tile_features WHERE scene_key = $1 ORDER BY tile_key`,
      [sceneKey],
    );
    const t = totals.rows[0];
    return {
      rows: Number(t?.rows ?? 0),
      distinctJobs: Number(t?.jobs ?? 0),
      areaSceneCrs: t?.area ?? 0,
      areaGeographyM2: Math.round(t?.geo ?? 0),
      byWindow: rows.rows.map((r) => rowFact(/\/([^/]+)\.tif$/.exec(r.tile_key)?.[1] ?? r.tile_key, r)),
    };
  }

  /** The roll-up over `tile_features_current` of one source object and pipeline, as docs/postgis.md tells users to write it. */
  async current(source: { readonly bucket: string; readonly key: string }, pipeline: string): Promise<CurrentRollUp> {
    await this.sink.migrate();
    const where = 'source_bucket = $1 AND source_key = $2 AND pipeline = $3';
    const args = [source.bucket, source.key, pipeline];
    const totals = await this.#pool.query<{
      rows: string;
      windows: string;
      scenes: string[] | null;
      area: number | null;
      geo: number | null;
      deg: number | null;
    }>(
      `SELECT count(*) AS rows, count(DISTINCT window_id) AS windows, array_agg(DISTINCT scene_key) AS scenes,
              sum(ST_Area(footprint)) AS area, sum(ST_Area(footprint_4326::geography)) AS geo, sum(ST_Area(footprint_4326)) AS deg
         FROM tile_features_current WHERE ${where}`,
      args,
    );
    const rows = await this.#pool.query<RowOfSql & { window_id: string }>(
      `SELECT window_id, pixel_count, ndvi_mean, ndvi_min, ndvi_max, epsg, ST_AsText(footprint) AS wkt
         FROM tile_features_current WHERE ${where} ORDER BY window_id`,
      args,
    );
    const t = totals.rows[0];
    return {
      rows: Number(t?.rows ?? 0),
      distinctWindows: Number(t?.windows ?? 0),
      sceneKeys: (t?.scenes ?? []).filter((s): s is string => s !== null).sort(),
      areaSceneCrs: t?.area ?? 0,
      areaGeographyM2: Math.round(t?.geo ?? 0),
      area4326: t?.deg ?? 0,
      byWindow: rows.rows.map((r) => rowFact(r.window_id, r)),
    };
  }

  /** Rows in the raw table (the history) for these scenes. */
  async rawRows(sceneKeys: readonly string[]): Promise<number> {
    await this.sink.migrate();
    const r = await this.#pool.query<{ n: string }>('SELECT count(*) AS n FROM tile_features WHERE scene_key = ANY($1)', [sceneKeys]);
    return Number(r.rows[0]?.n ?? 0);
  }

  /** Each scene's state in `tile_feature_scenes`, by scene key (a scene the sink never saw is absent). */
  async scenes(sceneKeys: readonly string[]): Promise<Map<string, SceneStateFact>> {
    await this.sink.migrate();
    const r = await this.#pool.query<{
      scene_key: string;
      rows_present: number;
      window_count: number;
      completed: boolean;
      retired_reason: string | null;
      superseded_by: string | null;
    }>(
      `SELECT scene_key, rows_present, window_count, completed_at IS NOT NULL AS completed, retired_reason, superseded_by
         FROM tile_feature_scenes WHERE scene_key = ANY($1)`,
      [sceneKeys],
    );
    return new Map(
      r.rows.map((s) => [
        s.scene_key,
        {
          rows: `${s.rows_present}/${s.window_count}`,
          state: s.retired_reason !== null ? `retired:${s.retired_reason}` : s.completed ? 'current' : 'incomplete',
          supersededBy: s.superseded_by,
        },
      ]),
    );
  }

  async close(): Promise<void> {
    await this.#pool.end();
    try {
      await this.#admin.query(`DROP SCHEMA ${this.#schema} CASCADE`);
    } finally {
      await this.#admin.end();
    }
  }
}

interface RowOfSql {
  pixel_count: string;
  ndvi_mean: number | null;
  ndvi_min: number | null;
  ndvi_max: number | null;
  epsg: number;
  wkt: string;
}

const rowFact = (window: string, r: RowOfSql): FeatureRowFact => ({
  window,
  count: Number(r.pixel_count),
  mean: r.ndvi_mean,
  min: r.ndvi_min,
  max: r.ndvi_max,
  epsg: r.epsg,
  footprint: r.wkt,
});

/** The sink of one parity backend, or undefined when no PostgreSQL was started (a scenario that needs it then fails). */
export async function parityFeatures(endpoints: EmulatorEndpoints): Promise<ParityFeatures | undefined> {
  return endpoints.postgres ? ParityFeatures.create(endpoints.postgres.url) : undefined;
}

/** Why a scenario that needs the sink cannot run: no server, and how to get one. */
export const NO_POSTGIS = `the PostGIS scenarios need the PostgreSQL emulator: run with TESSERA_EMULATORS including postgres (the default); ${POSTGRES_INSTALL_HINT}`;
