/**
 * Child process of the throughput section: Tessera's tile worker on the local
 * backend, pulling the given windows' jobs from the SQLite queue and settling
 * each delivery through handleTileDelivery (claim, window read, band math,
 * COG encode, create-only write, commit), then acking it. Timed from the
 * first receive to the last ack, after one untimed warm-up tile. With
 * `profile`, every window is then profiled, untimed by the race: renderTile's
 * three steps one by one, and the codec alone on the tile's blocks.
 */

import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import { handleTileDelivery } from '../../shared/app/deliveries.js';
import { computeTilePixels, readTileBands } from '../../shared/app/render-tile.js';
import { type TileJob, toJobMessage } from '../../shared/app/tile-job.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import type { Window } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { cogOverviewSizes, downsampleAverage, parseExpression } from '../../shared/raster/index.js';
import { compressTile, predictTile, type TiledImageSpec } from '../../shared/raster/tiff-writer.js';
import { jobsFor, sceneSize, sourceRef } from '../lib/jobs.js';
import { profileTile, type StageTimings } from '../lib/ungated.js';
import { memory, tileWorkerMain } from './common.js';

export interface TileWorkerInput {
  readonly dir: string;
  readonly scenePath: string;
  readonly params: ProcessingParams;
  readonly windows: readonly Window[];
  /** Profile every window after the timed run (see {@link CodecProfile}). */
  readonly profile?: boolean | undefined;
}

/** One tile profiled: renderTile's steps, and the compressor alone on the tile's predicted blocks. */
export interface CodecProfile extends StageTimings {
  /** CPU time of compressTile (the writer's own call, synchronous) summed over the tile's blocks, overview included. */
  readonly compressMs: number;
  readonly blocks: number;
}

/**
 * The codec's share of a tile: the blocks encodeCog compresses (full
 * resolution cut into blocks, then each overview), predicted as it predicts
 * them, then compressed one by one with the writer's compressTile, timed.
 * That time is what node:zlib (or libzstd) costs per tile whatever the rest
 * of the worker does: the floor of a tile under this profile.
 */
async function profileCodec(sources: ObjectStore, job: TileJob): Promise<CodecProfile> {
  const stages = await profileTile(sources, job);
  const tiling = tilingParams(job.params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  const pixels = computeTilePixels(job, tiling, expression, await readTileBands(sources, job, tiling));
  const size = tiling.blockSize;
  const levels: { data: Float32Array; width: number; height: number }[] = [
    { data: pixels, width: job.window.width, height: job.window.height },
  ];
  for (const o of cogOverviewSizes(job.window.width, job.window.height, size)) {
    const prev = levels[levels.length - 1] as (typeof levels)[number];
    levels.push({ data: downsampleAverage(prev.data, prev.width, prev.height, tiling.noData), ...o });
  }
  let compressMs = 0;
  let blocks = 0;
  for (const level of levels) {
    const spec: TiledImageSpec = {
      ...level,
      blockSize: size,
      dataType: 'float32',
      samplesPerPixel: 1,
      planar: false,
      compression: tiling.compression,
      predictor: tiling.compression === 'NONE' ? 1 : 3,
      level: tiling.level,
    };
    const tile = new Float32Array(size * size);
    for (let ty = 0; ty < Math.ceil(level.height / size); ty++) {
      for (let tx = 0; tx < Math.ceil(level.width / size); tx++) {
        tile.fill(tiling.noData);
        for (let r = 0; r < Math.min(size, level.height - ty * size); r++) {
          const s = (ty * size + r) * level.width + tx * size;
          tile.set(level.data.subarray(s, s + Math.min(size, level.width - tx * size)), r * size);
        }
        const predicted = predictTile(spec, tile);
        // CPU time (one synchronous call on this thread): the codec's work, whatever else the core ran.
        const t = process.cpuUsage();
        compressTile(spec, predicted);
        const used = process.cpuUsage(t);
        compressMs += (used.user + used.system) / 1000;
        blocks++;
      }
    }
  }
  return { ...stages, compressMs, blocks };
}

tileWorkerMain(async (input: TileWorkerInput) => {
  const backend = createLocalBackend(input.dir);
  try {
    const key = 'scenes/bench.tif';
    await backend.sources.importFile(key, input.scenePath);
    const source = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, key);
    const size = await sceneSize(backend.sources, key);
    const jobs = jobsFor(source, input.params, size, input.windows);
    await backend.queue.sendBatch(jobs.map(toJobMessage));
    const settings = { owner: 'bench-worker', leaseMs: 600_000, retentionMs: 7 * 86_400_000 };

    // One untimed warm-up tile: a long-lived worker has its JIT warm. The scene under another key is another
    // source with its own block cache, so the timed tiles still read and decode every window they use.
    await backend.sources.importFile('scenes/warmup.tif', input.scenePath);
    const warmSource = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, 'scenes/warmup.tif');
    const [warm] = jobsFor(warmSource, input.params, size, input.windows.slice(0, 1));
    if (warm) {
      const v = await handleTileDelivery(backend, settings, { body: toJobMessage(warm).body, deliveryId: 'warmup', receiveCount: 1 });
      if (v.kind !== 'ack') throw new Error(`warm-up tile failed: ${JSON.stringify(v)}`);
    }

    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    const perTileMs: number[] = [];
    for (;;) {
      const t = performance.now();
      const [delivery] = await backend.queue.receive(1, 600_000);
      if (!delivery) break;
      const verdict = await handleTileDelivery(backend, settings, delivery);
      if (verdict.kind !== 'ack' || verdict.outcome.kind !== 'written') {
        throw new Error(`tile ${delivery.jobKey} was not written: ${JSON.stringify(verdict)}`);
      }
      await backend.queue.ack(delivery);
      perTileMs.push(performance.now() - t);
    }
    const elapsedMs = performance.now() - started;
    // CPU time of the whole process (main thread and libuv's pool): the work, whatever else the core ran.
    const cpu = process.cpuUsage(cpuStarted);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    if (perTileMs.length !== jobs.length) throw new Error(`processed ${perTileMs.length} of ${jobs.length} tiles`);
    // Untimed by the race: the scene under a third key, so every window is read and decoded again.
    const profile: CodecProfile[] = [];
    if (input.profile) {
      await backend.sources.importFile('scenes/profile.tif', input.scenePath);
      const profileSource = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, 'scenes/profile.tif');
      for (const job of jobsFor(profileSource, input.params, size, input.windows)) profile.push(await profileCodec(backend.sources, job));
    }
    return {
      cpuMs,
      profile,
      elapsedMs,
      tiles: perTileMs.length,
      perTileMs,
      outputs: jobs.map((j) => backend.outputs.pathOf(j.outputKey)),
      memory: memory(),
    };
  } finally {
    backend.close();
  }
});
