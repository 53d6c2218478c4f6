import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { openSourceCached } from '../../shared/app/raster-cache.js';
import type { TileJob } from '../../shared/app/tile-job.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { encodeCog, evaluate, parseExpression } from '../../shared/raster/index.js';

/** Where the time of one tile went. */
export interface StageTimings {
  readonly readMs: number;
  readonly mathMs: number;
  readonly encodeMs: number;
}

/**
 * The raster work of one tile job with no gate at all: the same steps, calls
 * and options as processTile's step 2 (shared/app/process-tile.ts): the
 * cached source, the window read by range, the band math with the source's
 * nodata, the COG encode with the window's geotransform.
 *
 * Kept in bench/ as the ungated baseline of the gate-cost section. Suggested
 * for shared/app: extract this as `renderTile(sources, job)` and have
 * processTile call it, so the baseline cannot drift from the real worker.
 */
export async function renderTile(sources: ObjectStore, job: TileJob): Promise<{ cog: Uint8Array; timings: StageTimings }> {
  const tiling = tilingParams(job.params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  const t0 = performance.now();
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
  const t1 = performance.now();
  const pixels = evaluate(expression, byName, job.window.width * job.window.height, {
    noData: tiling.noData,
    ...(source.noData === undefined ? {} : { sourceNoData: source.noData }),
  });
  const t2 = performance.now();
  const [a, b, c, d, e, f] = source.geoTransform;
  const { x, y } = job.window;
  const cog = encodeCog({
    width: job.window.width,
    height: job.window.height,
    data: pixels,
    geoTransform: [a + x * b + y * c, b, c, d + x * e + y * f, e, f],
    crs: source.crs,
    noData: tiling.noData,
    blockSize: tiling.blockSize,
    compression: 'DEFLATE',
  });
  const t3 = performance.now();
  return { cog, timings: { readMs: t1 - t0, mathMs: t2 - t1, encodeMs: t3 - t2 } };
}

/**
 * The ungated worker's write: a plain overwrite of the file, no claim before
 * it, no create-only check, no commit after it. What a pipeline without
 * Tessera's gates does, and what the gate-cost section compares against.
 */
export async function writeUnconditionally(path: string, bytes: Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, bytes);
}
