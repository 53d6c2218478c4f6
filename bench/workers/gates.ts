/**
 * Child process of the gate-cost section: windows processed by the gated
 * worker (handleTileDelivery: claim, create-only write, commit) and by the
 * ungated one (the same validation and raster work, then a plain overwrite,
 * no claim), tile by tile in alternating order on one warm process, so each
 * pair sees the same JIT state and machine load.
 *
 * Each round takes windows no earlier round read, and each variant reads the
 * scene under its own key (its own decoded-block cache): every tile pays its
 * window read and decode, as a first delivery does, and neither variant warms
 * the other's blocks. The gates' own calls are also timed through counting
 * wrappers, and a last pass profiles the raster steps.
 */
import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import { handleTileDelivery } from '../../shared/app/deliveries.js';
import { parseTileJob, toJobMessage } from '../../shared/app/tile-job.js';
import type { ProcessingParams, SourceRef } from '../../shared/domain/job-key.js';
import type { Window } from '../../shared/domain/tile-grid.js';
import { countedBackend } from '../lib/counting.js';
import { jobsFor, sceneSize, sourceRef } from '../lib/jobs.js';
import { processTileUngated, profileTile, type StageTimings } from '../lib/ungated.js';
import { tileWorkerMain } from './common.js';

export interface GatesInput {
  readonly dir: string;
  readonly scenePath: string;
  readonly params: ProcessingParams;
  /** Windows to use, in order: the first `tilesPerRound` warm up, the next ones feed the rounds (cycled when too few). */
  readonly windows: readonly Window[];
  readonly tilesPerRound: number;
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
}

tileWorkerMain(async (input: GatesInput): Promise<{ pairs: GatesPair[]; stages: StageTimings[] }> => {
  const local = createLocalBackend(input.dir);
  try {
    const stage = async (key: string) => {
      await local.sources.importFile(key, input.scenePath);
      return sourceRef(local.sources, LOCAL_SOURCE_BUCKET, key);
    };
    const gatedSource = await stage('scenes/gated.tif');
    const ungatedSource = await stage('scenes/ungated.tif');
    const profileSource = await stage('scenes/profile.tif');
    const size = await sceneSize(local.sources, 'scenes/gated.tif');
    const counted = countedBackend(local);
    const settings = { owner: 'bench-worker', leaseMs: 600_000, retentionMs: 7 * 86_400_000 };
    const n = input.tilesPerRound;
    const windowsOf = (round: number) =>
      Array.from({ length: n }, (_, i) => input.windows[(round * n + i) % input.windows.length] as Window);
    const bodies = (source: SourceRef, version: string, ws: readonly Window[]) =>
      jobsFor(source, { ...input.params, version }, size, ws).map((j) => toJobMessage(j).body);

    const gated = async (body: string, deliveryId: string) => {
      const gateMsBefore = counted.claims.count.ms + counted.outputs.count.ms;
      const t = performance.now();
      const verdict = await handleTileDelivery(counted.backend, settings, { body, deliveryId, receiveCount: 1 });
      const ms = performance.now() - t;
      if (verdict.kind !== 'ack' || verdict.outcome.kind !== 'written') {
        throw new Error(`gated tile not written: ${verdict.kind === 'ack' ? verdict.outcome.kind : verdict.error.message}`);
      }
      return { ms, gateCallsMs: counted.claims.count.ms + counted.outputs.count.ms - gateMsBefore };
    };
    const ungated = async (body: string) => {
      const t = performance.now();
      const job = parseTileJob(body);
      const { writeMs } = await processTileUngated(counted.backend.sources, job, local.outputs.pathOf(job.outputKey));
      return { ms: performance.now() - t, plainWriteMs: writeMs };
    };

    // Warm-up (untimed): JIT, both sources' headers, the SQLite statements, the output folders.
    for (const [i, body] of bodies(gatedSource, 'warmup', windowsOf(0)).entries()) await gated(body, `warmup-${i}`);
    for (const body of bodies(ungatedSource, 'warmup', windowsOf(0))) await ungated(body);

    const pairs: GatesPair[] = [];
    for (let r = 1; r <= input.rounds; r++) {
      const g = bodies(gatedSource, `round-${r}`, windowsOf(r));
      const u = bodies(ungatedSource, `round-${r}`, windowsOf(r));
      for (let i = 0; i < n; i++) {
        // Alternate which goes first, so neither always inherits the other's garbage to collect.
        const gatedFirst = (r + i) % 2 === 0;
        const a = gatedFirst ? await gated(g[i] as string, `r${r}-${i}`) : undefined;
        const b = await ungated(u[i] as string);
        const c = a ?? (await gated(g[i] as string, `r${r}-${i}`));
        pairs.push({ gatedMs: c.ms, ungatedMs: b.ms, gateCallsMs: c.gateCallsMs, plainWriteMs: b.plainWriteMs });
      }
    }

    // Where a tile's time goes: the raster steps one by one, on windows of the rounds (a third cache of their own).
    const stages: StageTimings[] = [];
    for (let r = 1; r <= input.rounds; r++) {
      for (const body of bodies(profileSource, 'profile', windowsOf(r)))
        stages.push(await profileTile(counted.backend.sources, parseTileJob(body)));
    }
    return { pairs, stages };
  } finally {
    local.close();
  }
});
