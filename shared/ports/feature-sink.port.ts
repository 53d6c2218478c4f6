/**
 * An optional feature output beside the tiles (design note 1's last answer: rows
 * in PostGIS). One row per tile job, keyed by the tile's job key: a duplicate
 * delivery, a retried insert or a takeover after a crash inserts nothing new.
 *
 * Several scenes can describe one place: a source overwritten mid-scene, a
 * new-key backfill, a re-run under a new pipeline version or a new build each
 * make a new scene key, whose rows land beside the old ones. The sink keeps
 * every row (the history) and ranks the scenes of one source object and
 * pipeline, so that a roll-up over its current rows counts each place once
 * (docs/postgis.md, "What current means").
 */

/** The scene a row belongs to: what the sink groups, ranks and completes scenes by. The same for every tile of the scene. */
export interface FeatureScene {
  readonly sceneKey: string;
  /**
   * The logical source object: its bucket and URL-decoded key (for a multi-file scene, its anchor: the STAC
   * Item's key, or the first band's). Not a version of it: every upload of one object competes for "current".
   */
  readonly source: { readonly bucket: string; readonly key: string };
  /** The source version the scene was made from (S3 versionId or ETag, GCS generation, Blob ETag, content hash). */
  readonly sourceVersion: string;
  /** `params.pipeline`. Scenes of one source object compete only within one pipeline; each pipeline has its own current scene. */
  readonly pipeline: string;
  /** `params.version` and the build (code version) of the scene key: recorded, never ranked on. */
  readonly pipelineVersion: string;
  readonly codeVersion: string;
  /** The windows of the scene's grid: the scene is complete once each has its row. */
  readonly windowCount: number;
  /**
   * When the scene's first fan-out ran (its manifest's `createdAt`, epoch ms): the newer of two complete scenes
   * is the one fanned out later. Undefined when the manifest is missing or predates `createdAt`.
   */
  readonly fannedOutAt: number | undefined;
}

/** The statistics and footprint of one tile job, and the scene it belongs to. */
export interface TileFeature {
  /** The tile's job key (UNIQUE in the sink). */
  readonly jobId: string;
  readonly scene: FeatureScene;
  /** The tile's output key; its place in the grid (`{row}_{col}`, or `{tms}/{z}/{x}/{y}` on a tile matrix set) ends it. */
  readonly tileKey: string;
  /** Valid-pixel statistics of the rendered band (e.g. NDVI). `count` 0: min/max/mean are null. */
  readonly count: number;
  readonly mean: number | null;
  readonly min: number | null;
  readonly max: number | null;
  /** The tile footprint as a closed ring in the scene CRS, and that CRS's EPSG code. */
  readonly footprint: readonly (readonly [number, number])[];
  readonly epsg: number;
}

export type FeaturePutResult = { readonly kind: 'inserted' } | { readonly kind: 'already-present' };

/** Why a scene is retired before it completed: its source no longer has the scene's version (the superseded tombstone). */
export interface SceneSupersession {
  readonly kind: 'source-changed';
  /** The version the store held instead, when it said (undefined: the object is gone). */
  readonly currentVersion: string | undefined;
}

export type SceneRetireResult =
  /** This call retired the scene: its rows never count as current, whatever arrives later. */
  | { readonly kind: 'retired' }
  /** Retired before (a duplicate, or another tile of the scene got there first). */
  | { readonly kind: 'already-retired' }
  /**
   * Every window already has its row: the rows describe tiles that exist, so the scene is left as it is
   * (current until a newer scene completes). A tile that settles source-changed after that is a late
   * repair or a replay, not a missing window.
   */
  | { readonly kind: 'complete' };

export interface FeatureSink {
  readonly name: string;
  /**
   * `INSERT ... ON CONFLICT (job_id) DO NOTHING`, and the scene's row count, in one transaction; the insert
   * that completes a scene makes it current if it is the newest complete scene of its source and pipeline
   * (retiring the one it replaces), or retires it at once if a newer one is current already.
   */
  put(feature: TileFeature): Promise<FeaturePutResult>;
  /** Retire a scene that can never complete (its source changed under it), in one transaction. Idempotent. */
  retireScene(scene: FeatureScene, why: SceneSupersession): Promise<SceneRetireResult>;
}
