/**
 * Child process of the gate-cost section: the same windows processed by the
 * gated worker (handleTileDelivery: claim, create-only write, commit) and by
 * the ungated one (the same message parsing and raster work, then a plain
 * overwrite, no claim), tile by tile in alternating order on one warm
 * process, so each pair sees the same JIT state, page cache and machine load.
 * The gates' own calls are also timed through counting wrappers.
 */
import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import { handleTileDelivery } from '../../shared/app/deliveries.js';
import { parseTileJob, toJobMessage } from '../../shared/app/tile-job.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import type { Window } from '../../shared/domain/tile-grid.js';
import { countedBackend } from '../lib/counting.js';
import { jobsFor, sourceRef } from '../lib/jobs.js';
import { renderTile, type StageTimings, writeUnconditionally } from '../lib/ungated.js';
import { workerMain } from './common.js';

export interface GatesInput {
  readonly dir: string;
  readonly scenePath: string;
  readonly params: ProcessingParams;
  readonly windows: readonly Window[];
  readonly rounds: number;
}

/** One window done both ways, back to back. */
export interface GatesPair {
  readonly gatedMs: number;
  readonly ungatedMs: number;
  /** Time inside the claim store and the output store during the gated tile: claim, create-only write, commit. */
  readonly gateCallsMs: number;
  /** The ungated tile's plain write. */
  readonly plainWriteMs: number;
  readonly stages: StageTimings;
}

workerMain(async (input: GatesInput): Promise<{ pairs: GatesPair[] }> => {
  const local = createLocalBackend(input.dir);
  try {
    const key = 'scenes/bench.tif';
    await local.sources.importFile(key, input.scenePath);
    const source = await sourceRef(local.sources, LOCAL_SOURCE_BUCKET, key);
    const counted = countedBackend(local);
    const settings = { owner: 'bench-worker', leaseMs: 600_000, retentionMs: 7 * 86_400_000 };
    // Each variant and round gets its own params version: fresh job keys and output keys.
    const bodies = (version: string) => jobsFor(source, { ...input.params, version }, input.windows).map((j) => toJobMessage(j).body);

    const gated = async (body: string, deliveryId: string) => {
      const gateMsBefore = counted.claims.count.ms + counted.outputs.count.ms;
      const t = performance.now();
      const verdict = await handleTileDelivery(counted.backend, settings, { body, deliveryId, receiveCount: 1 });
      const ms = performance.now() - t;
      if (verdict.kind !== 'ack' || verdict.outcome.kind !== 'written')
        throw new Error(`gated tile not written: ${verdict.kind === 'ack' ? verdict.outcome.kind : verdict.error.stack}`);
      return { ms, gateCallsMs: counted.claims.count.ms + counted.outputs.count.ms - gateMsBefore };
    };
    // The same sources store as the gated worker (the same cached header), with no wrapper in the way.
    const ungated = async (body: string) => {
      const t = performance.now();
      const job = parseTileJob(body);
      const { cog, timings } = await renderTile(counted.backend.sources, job);
      const w = performance.now();
      await writeUnconditionally(local.outputs.pathOf(job.outputKey), cog);
      const done = performance.now();
      return { ms: done - t, plainWriteMs: done - w, stages: timings };
    };

    // Warm-up (untimed): JIT, the source header cache, the SQLite statements, the output folders.
    for (const [i, body] of bodies('warmup-gated').entries()) await gated(body, `warmup-${i}`);
    for (const body of bodies('warmup-ungated')) await ungated(body);

    const pairs: GatesPair[] = [];
    for (let r = 0; r < input.rounds; r++) {
      const g = bodies(`gated-${r}`);
      const u = bodies(`ungated-${r}`);
      for (let i = 0; i < g.length; i++) {
        // Alternate which goes first, so neither always inherits the other's garbage to collect.
        const gatedFirst = (r + i) % 2 === 0;
        const a = gatedFirst ? await gated(g[i] as string, `r${r}-${i}`) : undefined;
        const b = await ungated(u[i] as string);
        const c = a ?? (await gated(g[i] as string, `r${r}-${i}`));
        pairs.push({ gatedMs: c.ms, ungatedMs: b.ms, gateCallsMs: c.gateCallsMs, plainWriteMs: b.plainWriteMs, stages: b.stages });
      }
    }
    return { pairs };
  } finally {
    local.close();
  }
});
