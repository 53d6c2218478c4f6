import { InvalidEventError } from '../domain/errors.js';
import type { TilingParams } from '../domain/tiling-params.js';
import type { ObjectStore, ReadPin } from '../ports/object-store.port.js';
import { encodeRenderedTile } from '../raster/image-encoder.js';
import { type Expression, encodeCogAsync, evaluate, type GeoTransform, type RasterCrs } from '../raster/index.js';
import { bandScaleOffset, unscaleBand } from '../raster/unscale.js';
import { openSourceCached } from './raster-cache.js';
import {
  assertJobTarget,
  jobTarget,
  openSceneBands,
  readBandOnTarget,
  type SceneTarget,
  sceneBands,
  sceneTarget,
  tileGeoTransform,
} from './scene-grid.js';
import { bandPinOf, readPinOf, type TileJob } from './tile-job.js';

/** Where a tile's scene lies: the CRS and geotransform its window is cut from (the source's own, or the target grid). */
export interface SceneGeoref {
  readonly crs: RasterCrs;
  readonly geoTransform: GeoTransform;
}

/** The bands a tile's expression reads, by name, on the tile's window of the scene grid. */
export interface TileBands {
  readonly georef: SceneGeoref;
  readonly bands: Readonly<Record<string, ArrayLike<number>>>;
  /** The source nodata the band math masks (NaN: invalid pixels are NaN), or none. */
  readonly sourceNoData?: number | undefined;
}

/**
 * Step 1: range-read the window of every band the parameters name (never the
 * whole scene), pinned to the version in the job key: bytes of any other
 * version throw SourceChangedError instead of being rendered. A scene on a
 * target grid (a CRS, a tile matrix set, band files at several resolutions)
 * reads the part of each band the window needs and resamples it onto the
 * window (shared/app/scene-grid.ts), band by band, before the band math.
 */
export async function readTileBands(sources: ObjectStore, job: TileJob, tiling: TilingParams): Promise<TileBands> {
  const target = jobTarget(job.grid);
  if (target === undefined && job.source.assets === undefined)
    return readSourceWindow(sources, job, tiling, job.source.key, readPinOf(job));
  const opened = await openSceneBands(sources, sceneBands(job.source, tiling), (band) => bandPinOf(job, band.name));
  assertJobTarget(job.jobKey, target, sceneTarget(opened, tiling));
  const grid = target as SceneTarget;
  // Every band in one object and no target: that object's own grid, as a single-file scene.
  if (target === undefined)
    return readSourceWindow(sources, job, tiling, opened[0]?.key as string, bandPinOf(job, opened[0]?.name as string));
  const arrays = await Promise.all(opened.map((band) => readBandOnTarget(band, grid, job.window, tiling.target.resampling)));
  // Resampled on the stored values (as gdalwarp of the raw band, then gdal_translate -unscale), then unscaled.
  const n = job.window.width * job.window.height;
  return {
    georef: { crs: grid.crs, geoTransform: grid.geoTransform },
    bands: Object.fromEntries(
      opened.map((band, i) => {
        const a = arrays[i] as Float64Array;
        return [band.name, tiling.unscale ? unscaleBand(a, bandScaleOffset(tiling.scaleOffset[band.name], band.raster, band.index), n) : a];
      }),
    ),
    sourceNoData: Number.NaN,
  };
}

/** One file on its own grid: the window's pixels as stored, masked by the file's nodata (and its mask, if it has one). */
async function readSourceWindow(sources: ObjectStore, job: TileJob, tiling: TilingParams, key: string, pin: ReadPin): Promise<TileBands> {
  const source = await openSourceCached(sources, key, pin);
  // The message's grid is bound to the source version here: the key binds (row, col) and the
  // version, the window derives from the grid, and the grid must be this version's raster size.
  if (source.width !== job.grid.width || source.height !== job.grid.height) {
    throw new InvalidEventError(
      `tile job ${job.jobKey.slice(0, 16)}... names a ${job.grid.width}x${job.grid.height} grid, but ${key} at its version is ${source.width}x${source.height}; the message is wrong (poison)`,
    );
  }
  const names = Object.keys(tiling.bands);
  const arrays = await source.readWindow(
    job.window,
    names.map((n) => tiling.bands[n] as number),
  );
  const georef = { crs: source.crs, geoTransform: source.geoTransform };
  const mask = await source.mask();
  const count = job.window.width * job.window.height;
  if (mask === undefined && !tiling.unscale) {
    return {
      georef,
      bands: Object.fromEntries(names.map((n, i) => [n, arrays[i] as ArrayLike<number>])),
      sourceNoData: source.noData,
    };
  }
  // A per-dataset mask (GDAL's internal mask band) alone says which pixels are valid, as GDAL's mask band does,
  // whatever the nodata value: on a lossy JPEG a valid dark pixel decodes to it. Invalid pixels become NaN.
  const [m] = mask === undefined ? [undefined] : await mask.readWindow(job.window, [1]);
  const noData = source.noData;
  const invalid =
    m !== undefined
      ? (k: number) => !(m as ArrayLike<number>)[k]
      : noData === undefined
        ? undefined
        : Number.isNaN(noData)
          ? (k: number, a: ArrayLike<number>) => Number.isNaN(a[k] as number)
          : (k: number, a: ArrayLike<number>) => a[k] === noData;
  const bands = names.map((name, i) => {
    const a = arrays[i] as ArrayLike<number>;
    const test = invalid === undefined ? undefined : (k: number) => invalid(k, a);
    if (!tiling.unscale) return maskBand(a, count, test);
    return unscaleBand(a, bandScaleOffset(tiling.scaleOffset[name], source, tiling.bands[name] as number), count, test);
  });
  return { georef, bands: Object.fromEntries(names.map((n, i) => [n, bands[i] as Float64Array])), sourceNoData: Number.NaN };
}

/** The values as float64, NaN where `invalid`. */
function maskBand(values: ArrayLike<number>, n: number, invalid: ((k: number) => boolean) | undefined): Float64Array {
  const out = new Float64Array(n);
  for (let k = 0; k < n; k++) out[k] = invalid?.(k) ? Number.NaN : (values[k] as number);
  return out;
}

/** Step 2: the band math, source nodata and division by zero giving the output nodata. */
export function computeTilePixels(job: TileJob, tiling: TilingParams, expression: Expression, read: TileBands): Float32Array {
  return evaluate(expression, read.bands, job.window.width * job.window.height, {
    noData: tiling.noData,
    ...(read.sourceNoData === undefined ? {} : { sourceNoData: read.sourceNoData }),
  });
}

/**
 * Step 3: a COG georeferenced to the window (the compression runs on libuv's thread pool, so concurrent workers
 * use every core), or for a rendered format (`output.format` PNG, WEBP, JPEG) the pixels rescaled, coloured and
 * encoded as that image, nodata transparent (shared/raster/image-encoder.ts). A rendered tile carries no
 * georeferencing: its key places it (`{tms}/{z}/{x}/{y}` on a tile matrix set, else `{row}_{col}` of the grid the
 * VRT mosaic and STAC Item describe).
 */
export function encodeTile(job: TileJob, tiling: TilingParams, georef: SceneGeoref, pixels: Float32Array): Promise<Uint8Array> {
  if (tiling.render !== undefined) return encodeRenderedTile(pixels, job.window.width, job.window.height, tiling.noData, tiling.render);
  return encodeCogAsync({
    width: job.window.width,
    height: job.window.height,
    data: pixels,
    // A tile matrix set tile past the antimeridian is georeferenced where its index puts it (scene-grid.ts).
    geoTransform: tileGeoTransform(job.grid.target, georef.geoTransform, job.window),
    crs: georef.crs,
    noData: tiling.noData,
    blockSize: tiling.blockSize,
    compression: tiling.compression,
    level: tiling.level,
  });
}

/** A rendered tile: the COG bytes, and the pixels and scene they came from (for a feature sink's statistics). */
export interface RenderedTile {
  /** The tile's bytes: the COG, or for a rendered format (`output.format` PNG, WEBP, JPEG) that image. */
  readonly cog: Uint8Array;
  readonly pixels: Float32Array;
  readonly georef: SceneGeoref;
}

/** {@link renderTile}, keeping the computed pixels: the feature sink's statistics come from exactly what was encoded. */
export async function renderTileWithPixels(
  sources: ObjectStore,
  job: TileJob,
  tiling: TilingParams,
  expression: Expression,
): Promise<RenderedTile> {
  const read = await readTileBands(sources, job, tiling);
  const pixels = computeTilePixels(job, tiling, expression, read);
  return { cog: await encodeTile(job, tiling, read.georef, pixels), pixels, georef: read.georef };
}

/**
 * The work of a tile, without any gate: the three steps above. Pure with
 * respect to its inputs, so a re-execution produces the same bytes.
 */
export async function renderTile(sources: ObjectStore, job: TileJob, tiling: TilingParams, expression: Expression): Promise<Uint8Array> {
  const read = await readTileBands(sources, job, tiling);
  return encodeTile(job, tiling, read.georef, computeTilePixels(job, tiling, expression, read));
}
