import { makeTileJob, type TileJob } from '../../shared/app/tile-job.js';
import { type ProcessingParams, type SourceRef, sceneKey } from '../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import { type TileGrid, type Window, windowAt } from '../../shared/domain/tile-grid.js';
import type { JobMessage, JobQueue } from '../../shared/ports/job-queue.port.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { openGeoTiff } from '../../shared/raster/index.js';

/**
 * The processing every section runs: the project's default NDVI tiler,
 * `(B08 - B04) / (B08 + B04)` over 512 px windows, float32 COG tiles with
 * 256 px blocks, DEFLATE, nodata -9999. `version` keeps the job keys of one
 * measurement apart from the next where they share a store.
 */
export function benchParams(version = 'bench', overrides: Partial<ProcessingParams> = {}): ProcessingParams {
  return { ...DEFAULT_PARAMS, ...overrides, version };
}

/** `n` windows spread evenly over the grid in row-major order (every (count/n)th), the same set for every contender. */
export function spreadWindows(grid: TileGrid, n: number): Window[] {
  const take = Math.min(n, grid.count);
  const out: Window[] = [];
  for (let k = 0; k < take; k++) {
    const i = Math.floor((k * grid.count) / take);
    out.push(windowAt(grid, Math.floor(i / grid.cols), i % grid.cols));
  }
  return out;
}

/** The tile jobs of `windows` of a `grid`-sized scene, built exactly as fanOutScene builds them. */
export function jobsFor(
  source: SourceRef,
  params: ProcessingParams,
  grid: { readonly width: number; readonly height: number },
  windows: readonly Window[],
): TileJob[] {
  const scene = sceneKey(source, params);
  return windows.map((w) => makeTileJob(scene, source, params, grid, w));
}

/** The raster size of a staged scene (what fan-out reads from its header): the grid a tile job names. */
export async function sceneSize(store: ObjectStore, key: string): Promise<{ width: number; height: number }> {
  const raster = await openGeoTiff(store, key);
  return { width: raster.width, height: raster.height };
}

/** The source reference of an object already in a store, as a trigger would see it. */
export async function sourceRef(store: ObjectStore, bucket: string, key: string): Promise<SourceRef> {
  const head = await store.head(key);
  if (!head) throw new Error(`[bench] ${key} is not in ${store.name}: staging the scene failed`);
  return { bucket, key, versionToken: head.version };
}

/**
 * A JobQueue that keeps what it is sent: the duplicate-cost section captures
 * the messages of a real fan-out and then plays the trigger, delivering each
 * twice to the tile handler. Which queue carries them does not change what a
 * duplicate costs at the claim.
 */
export class CapturingQueue implements JobQueue {
  readonly name = 'capture';
  readonly messages: JobMessage[] = [];

  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    this.messages.push(...messages);
  }
}
