// A tile process in miniature, for test/unit/raster/heap-tuning.test.ts: set up as a local worker process is
// (tuneHeapForTiles, from the environment), render tiles of a synthetic scene in-process, and print how many full
// (mark-compact) collections ran while it did, as one JSON line. Run with --expose-gc (the count starts from a full
// collection).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../../functions/local/compose.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { renderTile } from '../../../shared/app/render-tile.js';
import { parseTileJob } from '../../../shared/app/tile-job.js';
import { DEFAULT_PARAMS, ENV } from '../../../shared/domain/runtime-config.js';
import { tilingParams } from '../../../shared/domain/tiling-params.js';
import type { JobMessage, JobQueue } from '../../../shared/ports/job-queue.port.js';
import { tuneHeapForTiles } from '../../../shared/raster/heap-tuning.js';
import { parseExpression } from '../../../shared/raster/index.js';
import { putSyntheticScene } from '../local-scene.js';

/** The fan-out's messages, kept: the probe renders the jobs itself. */
class CapturingQueue implements JobQueue {
  readonly name = 'capture';
  readonly messages: JobMessage[] = [];
  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    this.messages.push(...messages);
  }
}

const applied = tuneHeapForTiles(process.env[ENV.tileHeapGrowingPercent]);
const rounds = Number(process.argv[2] ?? 3);
const dir = mkdtempSync(join(tmpdir(), 'tessera-heap-probe-'));
const backend = createLocalBackend(dir);
try {
  const source = await putSyntheticScene(backend.sources, LOCAL_SOURCE_BUCKET, 'scenes/probe.tif', { width: 2048, height: 2048 });
  const params = { ...DEFAULT_PARAMS, tile_px: 512 };
  const capture = new CapturingQueue();
  await fanOutScene({ ...backend, queue: capture }, { source, params });
  const jobs = capture.messages.map((m) => parseTileJob(m.body));
  const tiling = tilingParams((jobs[0] as (typeof jobs)[number]).params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  await renderTile(backend.sources, jobs[0] as (typeof jobs)[number], tiling, expression); // warm-up, uncounted
  // Count from one heap state: a full collection now sets the old generation's next limit from what is alive times
  // the growing factor, the factor under test. Without it the count depended on whether V8 had run a full collection
  // during the setup, which timing decides: with the machine busy, V8's own factor gave 0 full collections in 3 of 8
  // runs (the first limit still large) and 10-13 in the others; with it, 11-12 in 10 of 10.
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('heap-probe.ts needs --expose-gc: it counts from a full collection');
  gc();
  let major = 0;
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      if ((e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) major++;
  });
  observer.observe({ entryTypes: ['gc'] });
  let bytes = 0;
  for (let r = 0; r < rounds; r++) for (const job of jobs) bytes += (await renderTile(backend.sources, job, tiling, expression)).byteLength;
  await new Promise((resolve) => setTimeout(resolve, 20)); // the observer's last entries
  observer.disconnect();
  process.stdout.write(`${JSON.stringify({ applied, major, tiles: rounds * jobs.length, bytes })}\n`);
} finally {
  backend.close();
  rmSync(dir, { recursive: true, force: true });
}
