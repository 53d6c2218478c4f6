import { ObjectNotFoundError, UnsupportedRasterError } from '../domain/errors.js';
import { tileGrid } from '../domain/tile-grid.js';
import { tilingParams } from '../domain/tiling-params.js';
import type { FeatureScene, TileFeature } from '../ports/feature-sink.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { epsgFromWkt, type GeoTransform, type RasterCrs, windowGeoTransform } from '../raster/index.js';
import { readSceneManifest } from './scene-manifest.js';
import type { TileJob } from './tile-job.js';

/** Valid-pixel statistics of one rendered tile. `count` 0: the others are null (an all-nodata tile is a real answer). */
export interface TileStatistics {
  readonly count: number;
  readonly mean: number | null;
  readonly min: number | null;
  readonly max: number | null;
}

/**
 * Count, mean, min and max of the valid pixels of a rendered band: every pixel
 * that is not the output nodata and is finite (band math gives nodata for
 * source nodata and division by zero; a NaN or an infinity is never a value).
 * Summed in float64, so the mean of a 512x512 tile does not drift with float32.
 */
export function tileStatistics(pixels: ArrayLike<number>, noData: number): TileStatistics {
  let count = 0;
  let sum = 0;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  // Compare in float32, as the pixels were stored: a nodata of -9999.5 survives; 0.1 would not compare equal in float64.
  const nodata32 = Math.fround(noData);
  for (let i = 0; i < pixels.length; i++) {
    const v = pixels[i] as number;
    if (v === nodata32 || !Number.isFinite(v)) continue;
    count++;
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return count === 0 ? { count, mean: null, min: null, max: null } : { count, mean: sum / count, min, max };
}

/**
 * The tile's footprint: a closed ring of its four corners in the scene CRS,
 * clockwise from the top-left, through the window's own geotransform (so a
 * rotated scene gives a rotated quadrilateral, not a bounding box).
 */
export function tileFootprint(sceneTransform: GeoTransform, window: TileJob['window']): readonly (readonly [number, number])[] {
  const gt = windowGeoTransform(sceneTransform, window);
  const at = (col: number, row: number): readonly [number, number] => [
    gt[0] + col * gt[1] + row * gt[2],
    gt[3] + col * gt[4] + row * gt[5],
  ];
  const w = window.width;
  const h = window.height;
  return [at(0, 0), at(w, 0), at(w, h), at(0, h), at(0, 0)];
}

/**
 * The scene of a job as the sink ranks it: the logical source object (bucket and decoded key, never a
 * version of it), the pipeline, the windows of its grid, and when it was first fanned out. The same for
 * every job of the scene: each part derives from the scene key's own material or its create-only manifest.
 */
export function featureSceneOf(job: TileJob, fannedOutAt: number | undefined): FeatureScene {
  const tiling = tilingParams(job.params);
  return {
    sceneKey: job.sceneKey,
    source: { bucket: job.source.bucket, key: job.source.key },
    sourceVersion: job.source.versionToken,
    pipeline: job.params.pipeline,
    pipelineVersion: job.params.version,
    codeVersion: job.code,
    windowCount: tileGrid(job.grid.width, job.grid.height, tiling.tilePx).count,
    fannedOutAt,
  };
}

/** Fan-out times already read, per output store: a manifest is create-only, so a time read once stays true. */
const fanOutTimes = new WeakMap<ObjectStore, Map<string, number>>();
/** Scenes remembered per store; a worker that saw more reads the oldest again (one small GET). */
const FAN_OUT_TIMES_KEPT = 1024;

/**
 * When the scene's first fan-out ran: its manifest's `createdAt`, read once per scene and process. This
 * ranks complete scenes of one source object (docs/postgis.md): a version overwritten later is fanned out
 * later, since fan-out pins the version the event names and ignores an event whose version is gone.
 * Undefined when the scene has no manifest (a job sent without a fan-out) or one from before `createdAt`:
 * the sink then ranks the scene below every scene whose time it knows. Any other failure to read it is
 * thrown (a transient store error is retried with the delivery).
 */
export async function sceneFanOutTime(outputs: ObjectStore, sceneKey: string): Promise<number | undefined> {
  let known = fanOutTimes.get(outputs);
  if (known === undefined) {
    known = new Map();
    fanOutTimes.set(outputs, known);
  }
  const cached = known.get(sceneKey);
  if (cached !== undefined) return cached;
  let createdAt: string | undefined;
  try {
    createdAt = (await readSceneManifest(outputs, sceneKey)).createdAt;
  } catch (error) {
    // Not cached: a manifest that is not there now is read again next time rather than assumed absent for good.
    if (error instanceof ObjectNotFoundError) return undefined;
    throw error;
  }
  const at = createdAt === undefined ? Number.NaN : Date.parse(createdAt);
  if (!Number.isFinite(at)) return undefined;
  if (known.size >= FAN_OUT_TIMES_KEPT) {
    const oldest = known.keys().next();
    if (!oldest.done) known.delete(oldest.value);
  }
  known.set(sceneKey, at);
  return at;
}

/**
 * The feature row of one tile job for a FeatureSink: its statistics and its
 * footprint, keyed by the tile's job key (one row per tile, whatever happens),
 * with its scene (featureSceneOf). Pure with respect to its inputs: a
 * re-execution builds the same row.
 */
export function tileFeature(
  job: TileJob,
  scene: { readonly geoTransform: GeoTransform; readonly crs: RasterCrs },
  pixels: ArrayLike<number>,
  noData: number,
  fannedOutAt: number | undefined,
): TileFeature {
  const epsg = scene.crs.epsg ?? (scene.crs.wkt === undefined ? undefined : epsgFromWkt(scene.crs.wkt));
  if (epsg === undefined) {
    throw new UnsupportedRasterError(
      `scene ${job.source.key} has a CRS without an EPSG code; the feature sink stores footprints by EPSG code: reproject the scene or drop --sink`,
    );
  }
  return {
    jobId: job.jobKey,
    scene: featureSceneOf(job, fannedOutAt),
    tileKey: job.outputKey,
    ...tileStatistics(pixels, noData),
    footprint: tileFootprint(scene.geoTransform, job.window),
    epsg,
  };
}
