/**
 * An optional feature output beside the tiles (design note 1's last answer: rows
 * in PostGIS). One row per tile job, keyed by the tile's job key: a duplicate
 * delivery, a retried insert or a takeover after a crash inserts nothing new.
 */
export interface TileFeature {
  /** The tile's job key (UNIQUE in the sink). */
  readonly jobId: string;
  readonly sceneKey: string;
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

export interface FeatureSink {
  readonly name: string;
  /** `INSERT ... ON CONFLICT (job_id) DO NOTHING` in one transaction. */
  put(feature: TileFeature): Promise<FeaturePutResult>;
}
