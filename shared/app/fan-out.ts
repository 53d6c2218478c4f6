import { InvalidParamsError } from '../domain/errors.js';
import { sceneKey as deriveSceneKey, outputKeys, type ProcessingParams, type SourceRef } from '../domain/job-key.js';
import { type TileGrid, tileGrid, windows } from '../domain/tile-grid.js';
import { tilingParams } from '../domain/tiling-params.js';
import type { JobMessage } from '../ports/job-queue.port.js';
import { parseExpression } from '../raster/index.js';
import type { Backend } from './backend.js';
import { openSourceCached } from './raster-cache.js';
import type { SceneManifest } from './scene-manifest.js';
import { makeTileJob, type TileMode, toJobMessage } from './tile-job.js';

export interface FanOutRequest {
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  /** Only these windows (backfill of gaps); default every window. */
  readonly only?: ((row: number, col: number) => boolean) | undefined;
  /** Per-window write mode (overwrite backfill); default create-only. */
  readonly modeFor?: ((row: number, col: number) => TileMode | undefined) | undefined;
  /** Called after each batch is enqueued (progress bars). */
  readonly onProgress?: ((enqueued: number, total: number) => void) | undefined;
}

export interface FanOutResult {
  readonly sceneKey: string;
  readonly grid: TileGrid;
  readonly enqueued: number;
  readonly manifest: 'written' | 'already-present';
}

/** Messages are sent in slices so 40,000 windows never sit in memory as one array. */
const ENQUEUE_SLICE = 500;

/**
 * Fan a scene out into one tile job per window. Reads only the raster header
 * (range reads), validates the parameters against it, writes the scene
 * manifest create-only and enqueues the jobs. A duplicate scene event repeats
 * the fan-out; every duplicate tile job then stops at its claim.
 */
export async function fanOutScene(backend: Backend, request: FanOutRequest): Promise<FanOutResult> {
  const { source, params } = request;
  const scene = deriveSceneKey(source, params);
  const tiling = tilingParams(params);
  parseExpression(tiling.expression, Object.keys(tiling.bands));
  const raster = await openSourceCached(backend.sources, source.key, source.versionToken);
  for (const [name, index] of Object.entries(tiling.bands)) {
    if (index > raster.bandCount) {
      throw new InvalidParamsError(`params: band ${name} is band ${index}, but ${source.key} has ${raster.bandCount} band(s)`);
    }
  }
  const grid = tileGrid(raster.width, raster.height, tiling.tilePx);
  const manifest: SceneManifest = {
    v: 1,
    sceneKey: scene,
    source,
    params,
    grid,
    raster: {
      crs: raster.crs,
      geoTransform: raster.geoTransform,
      noData: raster.noData,
      dataType: raster.dataType,
      bandCount: raster.bandCount,
    },
  };
  const written = await backend.outputs.putIfAbsent(outputKeys.sceneManifest(scene), new TextEncoder().encode(JSON.stringify(manifest)), {
    contentType: 'application/json',
  });

  const total = request.only ? countSelected(grid, request.only) : grid.count;
  let batch: JobMessage[] = [];
  let enqueued = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    await backend.queue.sendBatch(batch);
    enqueued += batch.length;
    backend.telemetry.count('enqueued', batch.length);
    batch = [];
    request.onProgress?.(enqueued, total);
  };
  for (const w of windows(grid)) {
    if (request.only && !request.only(w.row, w.col)) continue;
    batch.push(toJobMessage(makeTileJob(scene, source, params, w, request.modeFor?.(w.row, w.col) ?? { kind: 'create' })));
    if (batch.length >= ENQUEUE_SLICE) await flush();
  }
  await flush();
  backend.telemetry.log('INFO', 'scene-fanned-out', {
    sceneKey: scene,
    source: `${source.bucket}/${source.key}`,
    windows: grid.count,
    enqueued,
  });
  return { sceneKey: scene, grid, enqueued, manifest: written.kind };
}

function countSelected(grid: TileGrid, only: (row: number, col: number) => boolean): number {
  let n = 0;
  for (let row = 0; row < grid.rows; row++) for (let col = 0; col < grid.cols; col++) if (only(row, col)) n++;
  return n;
}
