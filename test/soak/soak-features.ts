import { postgresPool } from '../../functions/postgres/connection.js';
import { PostgisFeatureSink } from '../../functions/postgres/postgis-feature-sink.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import type { ParityFeatures } from '../parity/feature-sink.js';
import type { PostgresEndpoints } from '../support/emulators/types.js';
import { PgFaultProxy } from '../support/pg-fault-proxy.js';

/**
 * The PostGIS feature sink of one soak backend (docs/postgis.md): every tile delivery inserts its feature row
 * through a wire fault proxy in front of PostgreSQL (test/support/pg-fault-proxy.ts), which can lose the
 * answer to a feature insert's COMMIT (the row is in) or cut the connection before it (the row is not); the
 * local backend's worker processes insert straight into the same schema. The schema is the parity backend's
 * own (test/parity/feature-sink.ts: one per backend, since every backend's scenes name the same logical
 * bucket and keys), and the oracle below reads it back directly.
 */
export class SoakFeatures {
  readonly sink: PostgisFeatureSink;
  /** The schema's connection URL without the proxy: the local worker processes' own sink. */
  readonly directUrl: string;
  readonly #proxy: PgFaultProxy;
  readonly #pool: ReturnType<typeof postgresPool>;
  readonly #features: ParityFeatures;

  private constructor(features: ParityFeatures, proxy: PgFaultProxy, directUrl: string, telemetry: Telemetry) {
    this.#features = features;
    this.#proxy = proxy;
    this.directUrl = directUrl;
    // The pool a deployed worker makes (its error listener included): a connection the proxy cut is a WARN, never a crash.
    this.#pool = postgresPool(proxy.urlFor(directUrl), { telemetry });
    this.sink = new PostgisFeatureSink(this.#pool, { migrateOnFirstUse: true });
  }

  static async start(features: ParityFeatures, postgres: PostgresEndpoints, telemetry: Telemetry): Promise<SoakFeatures> {
    const directUrl = features.pool.options.connectionString;
    if (directUrl === undefined) throw new Error('the parity feature pool has no connection string');
    const proxy = await PgFaultProxy.start({ host: '127.0.0.1', port: postgres.port });
    const f = new SoakFeatures(features, proxy, directUrl, telemetry);
    await f.sink.migrate();
    return f;
  }

  /** The next COMMIT of the transaction inserting job `jobKey`'s row reaches the server, and its answer is lost. */
  loseNextCommitAnswer(jobKey: string): { readonly hits: number } {
    return this.#proxy.loseNextCommitAnswer(jobKey);
  }

  /** The connection of the transaction inserting job `jobKey`'s row is cut instead of its COMMIT: it rolls back. */
  cutBeforeNextCommit(jobKey: string): { readonly hits: number } {
    return this.#proxy.cutBeforeNextCommit(jobKey);
  }

  disarm(shot: { readonly hits: number }): void {
    this.#proxy.disarm(shot);
  }

  async close(): Promise<void> {
    await this.#pool.end();
    await this.#proxy.stop();
  }

  /**
   * The sink's oracle, after the drain (docs/soak.md). For each source object and pipeline:
   * - the view `tile_features_current` holds one row per window of one scene, the newest (latest fan-out)
   *   of its complete scenes, and `ST_Area` over it equals the area of that scene's grid (what a clean run of
   *   that scene alone rolls up to: its windows' footprints tile the grid exactly once);
   * - rows of any other scene are history, kept only for a scene that was superseded: retired in
   *   `tile_feature_scenes` (by a newer complete scene, or because its source changed);
   * and for each scene, a row only for a tile that was written, every tile of a live scene with its row, the
   * scene row's count equal to its rows. A scene is complete when every window has its tile and it was not
   * superseded; a superseded one whose every row landed before its source changed may complete too (the sink
   * keeps it only if it is newer than every live complete scene), so it is accepted as current then.
   */
  async judge(scenes: readonly FeatureSceneFact[], anomalies: string[]): Promise<{ readonly checked: number; readonly anomalies: number }> {
    const before = anomalies.length;
    const pool = this.#features.pool;
    const raw = new Map<string, number>();
    for (const r of (
      await pool.query<{ scene_key: string; n: string }>('SELECT scene_key, count(*) AS n FROM tile_features GROUP BY scene_key')
    ).rows)
      raw.set(r.scene_key, Number(r.n));
    const states = new Map<string, { rows: number; complete: boolean; reason: string | null; by: string | null }>();
    for (const s of (
      await pool.query<{
        scene_key: string;
        rows_present: number;
        complete: boolean;
        retired_reason: string | null;
        superseded_by: string | null;
      }>('SELECT scene_key, rows_present, completed_at IS NOT NULL AS complete, retired_reason, superseded_by FROM tile_feature_scenes')
    ).rows)
      states.set(s.scene_key, { rows: s.rows_present, complete: s.complete, reason: s.retired_reason, by: s.superseded_by });
    const current = new Map<string, { rows: number; windows: number; scenes: string[]; area: number }>();
    for (const c of (
      await pool.query<{ g: string; rows: string; windows: string; scenes: string[]; area: number }>(
        `SELECT source_bucket || E'\\n' || source_key || E'\\n' || pipeline AS g, count(*) AS rows, count(DISTINCT window_id) AS windows,
                array_agg(DISTINCT scene_key) AS scenes, sum(ST_Area(footprint)) AS area
           FROM tile_features_current GROUP BY source_bucket, source_key, pipeline`,
      )
    ).rows)
      current.set(c.g, { rows: Number(c.rows), windows: Number(c.windows), scenes: c.scenes, area: c.area });

    const known = new Map(scenes.map((s) => [s.sceneKey, s]));
    for (const key of new Set([...raw.keys(), ...states.keys()]))
      if (!known.has(key)) anomalies.push(`postgis: rows of scene ${key.slice(0, 12)}, which the soak never made`);

    const groups = new Map<string, FeatureSceneFact[]>();
    for (const s of scenes) {
      const g = `${s.source.bucket}\n${s.source.key}\n${s.pipeline}`;
      groups.set(g, [...(groups.get(g) ?? []), s]);
    }
    for (const [g, members] of groups) {
      const name = g.split('\n').slice(1).join(' ');
      const byAge = [...members].sort((a, b) => a.createdAt - b.createdAt);
      const live = byAge.filter((s) => !s.superseded && s.tilesPresent === s.windowCount);
      const newestLive = live.at(-1);
      // A superseded scene whose every row landed before its source changed, newer than every live complete one.
      const lateComplete = byAge.filter(
        (s) =>
          s.superseded && (raw.get(s.sceneKey) ?? 0) === s.windowCount && (newestLive === undefined || s.createdAt > newestLive.createdAt),
      );
      const view = current.get(g);
      const shown = view?.scenes ?? [];
      const x = shown.length === 1 ? known.get(shown[0] as string) : undefined;
      const acceptable = x !== undefined && (x === newestLive || lateComplete.includes(x));
      if (newestLive === undefined && lateComplete.length === 0) {
        if (view !== undefined) anomalies.push(`postgis ${name}: no scene is complete, yet the view holds ${view.rows} rows`);
      } else if (!acceptable) {
        anomalies.push(
          `postgis ${name}: the view holds rows of ${shown.length === 0 ? 'no scene' : shown.map((k) => known.get(k)?.label ?? k.slice(0, 12)).join(', ')}, ` +
            `not the newest complete scene ${newestLive?.label ?? lateComplete.map((s) => s.label).join(' or ')}`,
        );
      } else if (view !== undefined && x !== undefined) {
        if (view.rows !== x.windowCount || view.windows !== x.windowCount)
          anomalies.push(
            `postgis ${name}: ${view.rows} current rows over ${view.windows} windows, not one per each of ${x.label}'s ${x.windowCount}`,
          );
        if (!(Math.abs(view.area - x.area) <= 1e-9 * Math.max(Math.abs(view.area), Math.abs(x.area))))
          anomalies.push(`postgis ${name}: ST_Area over the view is ${view.area}, not ${x.area} (a clean run of ${x.label})`);
        const st = states.get(x.sceneKey);
        if (!st?.complete || st.reason !== null)
          anomalies.push(`postgis ${name}: ${x.label} is in the view but its scene row says ${JSON.stringify(st)}`);
      }
      for (const s of members) {
        const rows = raw.get(s.sceneKey) ?? 0;
        const st = states.get(s.sceneKey);
        if (rows > s.tilesPresent) anomalies.push(`postgis ${s.label}: ${rows} rows for ${s.tilesPresent} tiles written`);
        if (!s.superseded && rows !== s.tilesPresent)
          anomalies.push(`postgis ${s.label}: ${rows} rows for ${s.tilesPresent} tiles committed`);
        if (rows > 0 && st?.rows !== rows)
          anomalies.push(`postgis ${s.label}: its scene row counts ${st?.rows ?? 'nothing'}, the table holds ${rows}`);
        if (rows === 0 || s === x) continue;
        // History: kept only for a superseded scene, and retired for a reason that holds.
        if (st?.reason === 'newer-scene') {
          const by = st.by === null ? undefined : known.get(st.by);
          if (by === undefined || by.createdAt <= s.createdAt)
            anomalies.push(`postgis ${s.label}: retired for a newer scene, but ${by?.label ?? st.by ?? 'none'} is not newer`);
        } else if (st?.reason === 'source-changed') {
          if (!s.superseded) anomalies.push(`postgis ${s.label}: retired as source-changed, but its source never changed under it`);
        } else {
          anomalies.push(`postgis ${s.label}: ${rows} rows kept beside the current scene, and it is not retired (${JSON.stringify(st)})`);
        }
      }
    }
    return { checked: scenes.length, anomalies: anomalies.length - before };
  }
}

/** What the oracle knows of one scene version (from the soak's store, never from the sink). */
export interface FeatureSceneFact {
  readonly label: string;
  readonly sceneKey: string;
  readonly source: { readonly bucket: string; readonly key: string };
  readonly pipeline: string;
  /** Its manifest's `createdAt` (epoch ms): the first fan-out, which the sink ranks scenes by. */
  readonly createdAt: number;
  readonly windowCount: number;
  readonly tilesPresent: number;
  /** Tombstoned: a read of its source met another version. */
  readonly superseded: boolean;
  /** The area of its grid in its CRS: pixels x pixel area. */
  readonly area: number;
}
