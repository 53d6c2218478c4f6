/**
 * Child process of the memory section: one tile worker process handling one
 * 512 px tile of a scene (claim, window read by range, band math, COG encode,
 * create-only write, commit), then reporting its own peak resident memory.
 * One process per measurement: a peak is a property of a whole process.
 */

import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import { handleTileDelivery } from '../../shared/app/deliveries.js';
import { openSourceCached } from '../../shared/app/raster-cache.js';
import { toJobMessage } from '../../shared/app/tile-job.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import { tileGrid, windowAt } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { jobsFor, sourceRef } from '../lib/jobs.js';
import { type MemoryReading, memory, tileWorkerMain } from './common.js';

export interface MemoryInput {
  readonly dir: string;
  readonly scenePath: string;
  readonly size: number;
  readonly params: ProcessingParams;
}

export interface MemoryOutput {
  /** After the modules are loaded and the backend is open, before the tile. */
  readonly idle: MemoryReading;
  /** After the tile. */
  readonly peak: MemoryReading;
  readonly window: string;
  readonly sourceBytesRead: number;
  readonly rangeReads: number;
  readonly tileMs: number;
}

tileWorkerMain(async (input: MemoryInput): Promise<MemoryOutput> => {
  const backend = createLocalBackend(input.dir);
  try {
    const key = 'scenes/bench.tif';
    await backend.sources.importFile(key, input.scenePath);
    const source = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, key);
    // The middle window: the same position in every scene size, far from any edge.
    const grid = tileGrid(input.size, input.size, tilingParams(input.params).tilePx);
    const window = windowAt(grid, Math.floor(grid.rows / 2), Math.floor(grid.cols / 2));
    const [job] = jobsFor(source, input.params, grid, [window]);
    if (!job) throw new Error('no job');
    const idle = memory();
    const started = performance.now();
    const verdict = await handleTileDelivery(
      backend,
      { owner: 'bench', leaseMs: 600_000, retentionMs: 86_400_000 },
      {
        body: toJobMessage(job).body,
        deliveryId: 'memory',
        receiveCount: 1,
      },
    );
    const tileMs = performance.now() - started;
    if (verdict.kind !== 'ack' || verdict.outcome.kind !== 'written')
      throw new Error(`the tile was not written: ${JSON.stringify(verdict)}`);
    const peak = memory();
    // The same cached source processTile used: what it read.
    const stats = (await openSourceCached(backend.sources, key, { version: source.versionToken })).stats();
    return { idle, peak, window: `${window.row}_${window.col}`, sourceBytesRead: stats.bytesRead, rangeReads: stats.rangeReads, tileMs };
  } finally {
    backend.close();
  }
});
