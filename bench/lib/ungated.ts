import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { computeTilePixels, encodeTile, readTileBands, renderTile } from '../../shared/app/render-tile.js';
import type { TileJob } from '../../shared/app/tile-job.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { parseExpression } from '../../shared/raster/index.js';

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
 * A profile of renderTile's three steps (the same exported functions), timed one by one: the window read
 * by range (and its decode), the band math, the COG encode. The same calls
 * with the same options as renderTile; used only to say where a tile's time
 * goes, never as a baseline.
 */
export async function profileTile(sources: ObjectStore, job: TileJob): Promise<StageTimings> {
  const tiling = tilingParams(job.params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  const t0 = performance.now();
  const read = await readTileBands(sources, job, tiling);
  const t1 = performance.now();
  const pixels = computeTilePixels(job, tiling, expression, read);
  const t2 = performance.now();
  await encodeTile(job, tiling, read.georef, pixels);
  return { readMs: t1 - t0, mathMs: t2 - t1, encodeMs: performance.now() - t2 };
}
