import { UnsupportedRasterError } from '../domain/errors.js';
import type { TileFeature } from '../ports/feature-sink.port.js';
import { epsgFromWkt, type GeoTransform, type RasterCrs, windowGeoTransform } from '../raster/index.js';
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
 * The feature row of one tile job for a FeatureSink: its statistics and its
 * footprint, keyed by the tile's job key (one row per tile, whatever happens).
 * Pure with respect to its inputs: a re-execution builds the same row.
 */
export function tileFeature(
  job: TileJob,
  scene: { readonly geoTransform: GeoTransform; readonly crs: RasterCrs },
  pixels: ArrayLike<number>,
  noData: number,
): TileFeature {
  const epsg = scene.crs.epsg ?? (scene.crs.wkt === undefined ? undefined : epsgFromWkt(scene.crs.wkt));
  if (epsg === undefined) {
    throw new UnsupportedRasterError(
      `scene ${job.source.key} has a CRS without an EPSG code; the feature sink stores footprints by EPSG code: reproject the scene or drop --sink`,
    );
  }
  return {
    jobId: job.jobKey,
    sceneKey: job.sceneKey,
    tileKey: job.outputKey,
    ...tileStatistics(pixels, noData),
    footprint: tileFootprint(scene.geoTransform, job.window),
    epsg,
  };
}
