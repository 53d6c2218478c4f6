/**
 * Child process of the scale section, one phase per process so each phase's
 * peak memory is its own:
 * - `fan-out`: fanOutScene on the local backend (header read by range, the
 *   scene manifest, one message per window into the SQLite queue); then,
 *   untimed and after the peak was read, a tiny placeholder object per window
 *   written create-only, so assembly has every tile it expects;
 * - `assemble`: assembleMosaic (lists the tiles, builds the VRT from the
 *   grid's keys, writes it create-only).
 */

import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import { assembleMosaic } from '../../shared/app/assemble-mosaic.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { outputKeys, type ProcessingParams } from '../../shared/domain/job-key.js';
import { windows } from '../../shared/domain/tile-grid.js';
import { sourceRef } from '../lib/jobs.js';
import { type MemoryReading, memory, workerMain } from './common.js';

export type ScaleInput =
  | { readonly phase: 'fan-out'; readonly dir: string; readonly scenePath: string; readonly params: ProcessingParams }
  | { readonly phase: 'assemble'; readonly dir: string; readonly sceneKey: string };

export interface ScaleOutput {
  readonly ms: number;
  readonly idle: MemoryReading;
  readonly peak: MemoryReading;
  readonly windows: number;
  readonly sceneKey: string;
  /** fan-out: messages in the queue afterwards; assemble: sources in the VRT. */
  readonly count: number;
  readonly placeholderMs?: number;
}

/** What stands in for a tile: assembly only proves each expected key exists. */
const PLACEHOLDER = new TextEncoder().encode('placeholder tile: the scale benchmark does not render tiles');
const CONCURRENT_WRITES = 32;

workerMain(async (input: ScaleInput): Promise<ScaleOutput> => {
  const backend = createLocalBackend(input.dir);
  try {
    switch (input.phase) {
      case 'fan-out': {
        const key = 'scenes/bench.tif';
        await backend.sources.importFile(key, input.scenePath);
        const source = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, key);
        const idle = memory();
        const started = performance.now();
        const fan = await fanOutScene(backend, { source, params: input.params });
        const ms = performance.now() - started;
        const peak = memory();
        const queued = backend.queue.pending();
        const t = performance.now();
        const keys = [...windows(fan.grid)].map((w) => outputKeys.tile(fan.sceneKey, w));
        for (let i = 0; i < keys.length; i += CONCURRENT_WRITES) {
          const results = await Promise.all(keys.slice(i, i + CONCURRENT_WRITES).map((k) => backend.outputs.putIfAbsent(k, PLACEHOLDER)));
          if (results.some((r) => r.kind !== 'written')) throw new Error('a placeholder tile already existed in a fresh directory');
        }
        return { ms, idle, peak, windows: fan.grid.count, sceneKey: fan.sceneKey, count: queued, placeholderMs: performance.now() - t };
      }
      case 'assemble': {
        const grid = (await readSceneManifest(backend.outputs, input.sceneKey)).grid;
        const idle = memory();
        const started = performance.now();
        const mosaic = await assembleMosaic(backend, input.sceneKey);
        const ms = performance.now() - started;
        const peak = memory();
        if (mosaic.result !== 'written') throw new Error(`the mosaic of a fresh directory was ${mosaic.result}`);
        return { ms, idle, peak, windows: grid.count, sceneKey: input.sceneKey, count: mosaic.manifestCount };
      }
      default: {
        const never: never = input;
        throw new Error(`unknown phase ${JSON.stringify(never)}`);
      }
    }
  } finally {
    backend.close();
  }
});
