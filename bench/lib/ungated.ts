import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { openSourceCached } from '../../shared/app/raster-cache.js';
import { renderTile } from '../../shared/app/render-tile.js';
import type { TileJob } from '../../shared/app/tile-job.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { encodeCogAsync, evaluate, parseExpression, windowGeoTransform } from '../../shared/raster/index.js';

/**
 * The ungated worker of the gate-cost section: what processTile does minus
 * the gates. The same validation before any work (tilingParams,
 * parseExpression), the same raster work (shared/app/render-tile.ts, the
 * function processTile calls), then a plain overwrite of the file: no claim
 * before it, no create-only check, no commit after it.
 */
export async function processTileUngated(sources: ObjectStore, job: TileJob, path: string): Promise<{ writeMs: number }> {
  const tiling = tilingParams(job.params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  const cog = await renderTile(sources, job, tiling, expression);
  const started = performance.now();
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, cog);
  return { writeMs: performance.now() - started };
}

/** Where the time of one tile went. */
export interface StageTimings {
  readonly readMs: number;
  readonly mathMs: number;
  readonly encodeMs: number;
}

/**
 * A profile of renderTile's three steps, timed one by one: the window read
 * by range (and its decode), the band math, the COG encode. The same calls
 * with the same options as renderTile; used only to say where a tile's time
 * goes, never as a baseline.
 */
export async function profileTile(sources: ObjectStore, job: TileJob): Promise<StageTimings> {
  const tiling = tilingParams(job.params);
  const names = Object.keys(tiling.bands);
  const expression = parseExpression(tiling.expression, names);
  const t0 = performance.now();
  const source = await openSourceCached(sources, job.source.key, job.source.versionToken);
  const arrays = await source.readWindow(
    job.window,
    names.map((n) => tiling.bands[n] as number),
  );
  const t1 = performance.now();
  const pixels = evaluate(
    expression,
    Object.fromEntries(names.map((n, i) => [n, arrays[i] as ArrayLike<number>])),
    job.window.width * job.window.height,
    {
      noData: tiling.noData,
      ...(source.noData === undefined ? {} : { sourceNoData: source.noData }),
    },
  );
  const t2 = performance.now();
  await encodeCogAsync({
    width: job.window.width,
    height: job.window.height,
    data: pixels,
    geoTransform: windowGeoTransform(source.geoTransform, job.window),
    crs: source.crs,
    noData: tiling.noData,
    blockSize: tiling.blockSize,
    compression: 'DEFLATE',
  });
  return { readMs: t1 - t0, mathMs: t2 - t1, encodeMs: performance.now() - t2 };
}
