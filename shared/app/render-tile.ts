import { InvalidEventError } from '../domain/errors.js';
import type { TilingParams } from '../domain/tiling-params.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { type Expression, encodeCogAsync, evaluate, type RasterSource, windowGeoTransform } from '../raster/index.js';
import { openSourceCached } from './raster-cache.js';
import { readPinOf, type TileJob } from './tile-job.js';

/** The bands a tile's expression reads, by name, and the source they came from. */
export interface TileBands {
  readonly source: RasterSource;
  readonly bands: Readonly<Record<string, ArrayLike<number>>>;
}

/**
 * Step 1: range-read the window of every band the parameters name (never the
 * whole scene), pinned to the version in the job key: bytes of any other
 * version throw SourceChangedError instead of being rendered.
 */
export async function readTileBands(sources: ObjectStore, job: TileJob, tiling: TilingParams): Promise<TileBands> {
  const source = await openSourceCached(sources, job.source.key, readPinOf(job));
  // The message's grid is bound to the source version here: the key binds (row, col) and the
  // version, the window derives from the grid, and the grid must be this version's raster size.
  if (source.width !== job.grid.width || source.height !== job.grid.height) {
    throw new InvalidEventError(
      `tile job ${job.jobKey.slice(0, 16)}... names a ${job.grid.width}x${job.grid.height} grid, but ${job.source.key} at its version is ${source.width}x${source.height}; the message is wrong (poison)`,
    );
  }
  const names = Object.keys(tiling.bands);
  const arrays = await source.readWindow(
    job.window,
    names.map((n) => tiling.bands[n] as number),
  );
  return { source, bands: Object.fromEntries(names.map((n, i) => [n, arrays[i] as ArrayLike<number>])) };
}

/** Step 2: the band math, source nodata and division by zero giving the output nodata. */
export function computeTilePixels(job: TileJob, tiling: TilingParams, expression: Expression, read: TileBands): Float32Array {
  return evaluate(expression, read.bands, job.window.width * job.window.height, {
    noData: tiling.noData,
    ...(read.source.noData === undefined ? {} : { sourceNoData: read.source.noData }),
  });
}

/** Step 3: a COG georeferenced to the window. The compression runs on libuv's thread pool, so concurrent workers use every core. */
export function encodeTile(job: TileJob, tiling: TilingParams, source: RasterSource, pixels: Float32Array): Promise<Uint8Array> {
  return encodeCogAsync({
    width: job.window.width,
    height: job.window.height,
    data: pixels,
    geoTransform: windowGeoTransform(source.geoTransform, job.window),
    crs: source.crs,
    noData: tiling.noData,
    blockSize: tiling.blockSize,
    compression: tiling.compression,
    level: tiling.level,
  });
}

/** A rendered tile: the COG bytes, and the pixels and scene they came from (for a feature sink's statistics). */
export interface RenderedTile {
  readonly cog: Uint8Array;
  readonly pixels: Float32Array;
  readonly source: RasterSource;
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
  return { cog: await encodeTile(job, tiling, read.source, pixels), pixels, source: read.source };
}

/**
 * The work of a tile, without any gate: the three steps above. Pure with
 * respect to its inputs, so a re-execution produces the same bytes.
 */
export async function renderTile(sources: ObjectStore, job: TileJob, tiling: TilingParams, expression: Expression): Promise<Uint8Array> {
  const read = await readTileBands(sources, job, tiling);
  return encodeTile(job, tiling, read.source, computeTilePixels(job, tiling, expression, read));
}
