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

/**
 * The PostGIS feature sink every parity backend shares (the one real
 * PostgreSQL + PostGIS the test setup started): a sink the scenarios put in
 * front of the tile use case, and the roll-up they read back. Rows of one
 * backend never meet another's: job keys (and scene keys) name the source
 * version, which is backend-specific.
 */
export class ParityFeatures {
  readonly sink: PostgisFeatureSink;
  readonly #pool: pg.Pool;

  constructor(url: string) {
    this.#pool = new pg.Pool({ connectionString: url, max: 4 });
    this.sink = new PostgisFeatureSink(this.#pool, { migrateOnFirstUse: true });
  }

  async rollUp(sceneKey: string): Promise<FeatureRollUp> {
    await this.sink.migrate();
    const totals = await this.#pool.query<{ rows: string; jobs: string; area: number | null; geo: number | null }>(
      `SELECT count(*) AS rows, count(DISTINCT job_id) AS jobs,
              sum(ST_Area(footprint)) AS area, sum(ST_Area(footprint_4326::geography)) AS geo
         FROM tile_features WHERE scene_key = $1`,
      [sceneKey],
    );
    const rows = await this.#pool.query<{
      tile_key: string;
      pixel_count: string;
      ndvi_mean: number | null;
      ndvi_min: number | null;
      ndvi_max: number | null;
      epsg: number;
      wkt: string;
    }>(
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
      byWindow: rows.rows.map((r) => ({
        window: /\/([^/]+)\.tif$/.exec(r.tile_key)?.[1] ?? r.tile_key,
        count: Number(r.pixel_count),
        mean: r.ndvi_mean,
        min: r.ndvi_min,
        max: r.ndvi_max,
        epsg: r.epsg,
        footprint: r.wkt,
      })),
    };
  }

  close(): Promise<void> {
    return this.#pool.end();
  }
}

/** The shared sink of a run, or undefined when no PostgreSQL was started (a scenario that needs it then fails). */
export function parityFeatures(endpoints: EmulatorEndpoints): ParityFeatures | undefined {
  return endpoints.postgres ? new ParityFeatures(endpoints.postgres.url) : undefined;
}

/** Why a scenario that needs the sink cannot run: no server, and how to get one. */
export const NO_POSTGIS = `the PostGIS scenarios need the PostgreSQL emulator: run with TESSERA_EMULATORS including postgres (the default); ${POSTGRES_INSTALL_HINT}`;
