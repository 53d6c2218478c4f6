import type { TilingParams } from '../domain/tiling-params.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { type Expression, encodeCogAsync, evaluate, windowGeoTransform } from '../raster/index.js';
import { openSourceCached } from './raster-cache.js';
import type { TileJob } from './tile-job.js';

/**
 * The work of a tile, without any gate: range-read the window's bands,
 * evaluate the band math, encode a COG georeferenced to the window. Pure
 * with respect to its inputs, so a re-execution produces the same bytes.
 * DEFLATE runs on libuv's thread pool, so concurrent workers use every core.
 */
export async function renderTile(sources: ObjectStore, job: TileJob, tiling: TilingParams, expression: Expression): Promise<Uint8Array> {
  const source = await openSourceCached(sources, job.source.key, job.source.versionToken);
  const names = Object.keys(tiling.bands);
  const arrays = await source.readWindow(
    job.window,
    names.map((n) => tiling.bands[n] as number),
  );
  const byName: Record<string, ArrayLike<number>> = {};
  names.forEach((n, i) => {
    byName[n] = arrays[i] as ArrayLike<number>;
  });
  const pixels = evaluate(expression, byName, job.window.width * job.window.height, {
    noData: tiling.noData,
    ...(source.noData === undefined ? {} : { sourceNoData: source.noData }),
  });
  return encodeCogAsync({
    width: job.window.width,
    height: job.window.height,
    data: pixels,
    geoTransform: windowGeoTransform(source.geoTransform, job.window),
    crs: source.crs,
    noData: tiling.noData,
    blockSize: tiling.blockSize,
    compression: 'DEFLATE',
  });
}
