/**
 * Child process of the throughput section: Tessera's tile worker on the local
 * backend, pulling the given windows' jobs from the SQLite queue and settling
 * each delivery through handleTileDelivery (claim, window read, band math,
 * COG encode, create-only write, commit), then acking it. Timed from the
 * first receive to the last ack, after one untimed warm-up tile.
 */

import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import { handleTileDelivery } from '../../shared/app/deliveries.js';
import { toJobMessage } from '../../shared/app/tile-job.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import type { Window } from '../../shared/domain/tile-grid.js';
import { jobsFor, sceneSize, sourceRef } from '../lib/jobs.js';
import { memory, workerMain } from './common.js';

export interface TileWorkerInput {
  readonly dir: string;
  readonly scenePath: string;
  readonly params: ProcessingParams;
  readonly windows: readonly Window[];
}

workerMain(async (input: TileWorkerInput) => {
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
    if (perTileMs.length !== jobs.length) throw new Error(`processed ${perTileMs.length} of ${jobs.length} tiles`);
    return {
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
