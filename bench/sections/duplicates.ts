import { randomBytes } from 'node:crypto';
import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import type { Backend } from '../../shared/app/backend.js';
import { handleTileDelivery } from '../../shared/app/deliveries.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import type { SourceRef } from '../../shared/domain/job-key.js';
import { type BenchCloud, type CloudName, startCloud } from '../lib/clouds.js';
import { countedBackend, type PortSnapshot, since, snapshot } from '../lib/counting.js';
import { benchParams, CapturingQueue, sourceRef } from '../lib/jobs.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { ensureScene, freshRunDir } from '../lib/scenes.js';
import { fmt, summarize } from '../lib/stats.js';
import { WireCounter } from '../lib/wire.js';

export interface DuplicatesConfig {
  /** Side of the square scene; its 512 px windows are the messages. */
  readonly sceneSize: number;
  /** Scenes (fresh job keys) delivered twice, per backend. */
  readonly reps: number;
  readonly clouds: readonly CloudName[];
}

/** A duplicate must be at least this many times cheaper than a first delivery. */
const MIN_SPEEDUP = 20;

/** What one delivery cost. */
interface DeliveryCost extends PortSnapshot {
  readonly ms: number;
  /** Requests that left the process for the claim store / the sources bucket / the outputs bucket; undefined on the local backend. */
  readonly wire: { readonly claims: number; readonly sources: number; readonly outputs: number } | undefined;
}

interface Target {
  readonly name: string;
  readonly label: string;
  readonly backend: Backend;
  /** Wire counter labels; undefined where the stores are in-process. */
  readonly wire:
    | { readonly claims: readonly string[]; readonly sources: readonly string[]; readonly outputs: readonly string[] }
    | undefined;
  stage(scenePath: string, key: string): Promise<SourceRef>;
  stop(): Promise<void>;
}

/** Why an adapter spends more requests than the port spends calls (from the adapters' code), for a refused claim and for a commit. */
const EXTRA_REQUEST_REASONS: Readonly<Record<string, { readonly refusedClaim: string; readonly commit: string }>> = {
  firestore: {
    refusedClaim:
      'FirestoreClaimStore answers a refused create() (ALREADY_EXISTS) with a read of the document: Firestore returns no document with the refusal',
    commit:
      'FirestoreClaimStore commits by a read, then an update preconditioned on the lastUpdateTime it read: Firestore has no precondition on a field (owner)',
  },
  'azure-table': {
    refusedClaim:
      'AzureTableClaimStore answers a refused insert (409) with a read of the entity: Table Storage returns no entity with the 409',
    commit:
      'AzureTableClaimStore commits by a read, then an update with If-Match on the ETag it read: Table Storage has no condition on a property (owner)',
  },
};
const UNEXPLAINED = {
  refusedClaim: 'see the per-call counts in reports/bench.json',
  commit: 'see the per-call counts in reports/bench.json',
};

function localTarget(): Target {
  const dir = freshRunDir('duplicates-local');
  const backend = createLocalBackend(dir);
  return {
    name: 'local',
    label: 'SQLite + filesystem',
    backend,
    wire: undefined,
    stage: async (scenePath, key) => {
      await backend.sources.importFile(key, scenePath);
      return sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, key);
    },
    stop: async () => backend.close(),
  };
}

function cloudTarget(c: BenchCloud): Target {
  return { ...c, wire: { claims: c.claimTargets, sources: c.sourceTargets, outputs: c.outputTargets } };
}

async function measure(t: Target, scenePath: string, reps: number, wire: WireCounter, runId: string) {
  const counted = countedBackend({ ...t.backend, queue: new CapturingQueue() });
  const settings = { owner: 'bench', leaseMs: 600_000, retentionMs: 7 * 86_400_000 };
  const first: DeliveryCost[] = [];
  const dup: DeliveryCost[] = [];
  const deliver = async (body: string, deliveryId: string, receiveCount: number): Promise<DeliveryCost> => {
    const before = snapshot(counted);
    const w = t.wire;
    const wireNow = () =>
      w ? { claims: wire.total(w.claims), sources: wire.total(w.sources), outputs: wire.total(w.outputs) } : undefined;
    const wireBefore = wireNow();
    const started = performance.now();
    const verdict = await handleTileDelivery(counted.backend, settings, { body, deliveryId, receiveCount });
    const ms = performance.now() - started;
    const expected = receiveCount === 1 ? 'written' : 'claim-rejected';
    if (
      verdict.kind !== 'ack' ||
      verdict.outcome.kind !== expected ||
      (receiveCount > 1 && verdict.outcome.kind === 'claim-rejected' && verdict.outcome.reason !== 'done')
    ) {
      throw new Error(
        `[bench] ${t.name}: delivery ${receiveCount} of ${deliveryId} should be acked as ${expected}, got ${JSON.stringify(verdict)}`,
      );
    }
    const wireAfter = wireNow();
    return {
      ms,
      ...since(counted, before),
      wire:
        wireAfter && wireBefore
          ? {
              claims: wireAfter.claims - wireBefore.claims,
              sources: wireAfter.sources - wireBefore.sources,
              outputs: wireAfter.outputs - wireBefore.outputs,
            }
          : undefined,
    };
  };
  for (let rep = 0; rep < reps; rep++) {
    // A new source object per scene: its first deliveries read the scene from the store, not from the block cache
    // a warm worker kept from the previous scene (the same bytes under another key are another source).
    const source = await t.stage(scenePath, `scenes/bench-${runId}-${rep}.tif`);
    const capture = new CapturingQueue();
    // The real fan-out (header read by range, manifest, one message per window), into a queue we then play back.
    await fanOutScene({ ...counted.backend, queue: capture }, { source, params: benchParams(`dup-${runId}-${rep}`) });
    const messages = capture.messages.map((m, i) => ({ body: m.body, id: `msg-${rep}-${i}` }));
    for (const m of messages) first.push(await deliver(m.body, m.id, 1));
    // The scene is complete: every message arrives again (a redelivery after a lost ack, crash point (d)).
    for (const m of messages) dup.push(await deliver(m.body, m.id, 2));
  }
  return { first, dup };
}

const all = (xs: readonly number[], v: number) => xs.every((x) => x === v);
const range = (xs: readonly number[]) => {
  const s = summarize(xs);
  return s.min === s.max ? `${fmt(s.min)}` : `${fmt(s.median)} (${fmt(s.min)}-${fmt(s.max)})`;
};

/**
 * Section 2, and the round trips of section 3: a scene fanned out and
 * processed in full, then every message delivered again, on the local
 * backend and on each cloud's emulators. Source bytes, port calls and
 * requests on the wire are counted per delivery.
 */
export async function duplicates(cfg: DuplicatesConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const scene = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const wire = new WireCounter();
  const runId = randomBytes(4).toString('hex');
  const rows: Row[] = [];
  const details: Record<string, unknown> = { sceneSize: cfg.sceneSize, reps: cfg.reps };
  // Start every cloud's emulators at once (their start-up dominates a smoke run), measure nothing while they boot.
  const t0 = performance.now();
  const starts = await Promise.allSettled(cfg.clouds.map((c) => startCloud(c, wire)));
  const targets: Target[] = [localTarget()];
  for (const s of starts) if (s.status === 'fulfilled') targets.push(cloudTarget(s.value));
  const failed = starts.flatMap((s) => (s.status === 'rejected' ? [s.reason as Error] : []));
  if (failed.length > 0) {
    await Promise.all(targets.map((t) => t.stop()));
    wire.close();
    throw new Error(`[bench] emulators did not start: ${failed.map((e) => e.message).join('\n')}`);
  }
  if (cfg.clouds.length)
    log(
      `  emulators started in ${fmt((performance.now() - t0) / 1000, 2)} s: ${targets
        .slice(1)
        .map((t) => t.label)
        .join('; ')}`,
    );
  try {
    for (const [i, target] of targets.entries()) {
      let result: Awaited<ReturnType<typeof measure>>;
      try {
        result = await measure(target, scene, cfg.reps, wire, runId);
      } finally {
        await target.stop();
        targets[i] = { ...target, stop: async () => {} };
      }
      const name = target.name;
      rows.push(...rowsFor(target, result.first, result.dup));
      details[name] = {
        label: target.label,
        claimStore: target.backend.claims.name,
        deliveries: result.first.length,
        first: costSummary(result.first),
        duplicate: costSummary(result.dup),
      };
      log(
        `  ${name}: ${result.dup.length} duplicates, first ${fmt(summarize(result.first.map((c) => c.ms)).median)} ms, duplicate ${fmt(summarize(result.dup.map((c) => c.ms)).median, 2)} ms`,
      );
    }
  } finally {
    await Promise.all(targets.map((t) => t.stop()));
    wire.close();
  }
  return { name: 'duplicates', rows, broken: [], details, durationSec: (performance.now() - started) / 1000 };
}

function costSummary(costs: readonly DeliveryCost[]) {
  const pick = (f: (c: DeliveryCost) => number | undefined) => {
    const xs = costs.map(f).filter((x): x is number => x !== undefined);
    return xs.length ? summarize(xs) : undefined;
  };
  return {
    ms: pick((c) => c.ms),
    claimCalls: pick((c) => c.claimCalls),
    claimMs: pick((c) => c.claimMs),
    outputCalls: pick((c) => c.outputCalls),
    sourceCalls: pick((c) => c.sourceCalls),
    sourceBytes: pick((c) => c.sourceBytes),
    wireClaims: pick((c) => c.wire?.claims),
    wireSources: pick((c) => c.wire?.sources),
    wireOutputs: pick((c) => c.wire?.outputs),
  };
}

function rowsFor(t: Target, first: readonly DeliveryCost[], dup: readonly DeliveryCost[]): Row[] {
  const backend = t.name;
  const reason = EXTRA_REQUEST_REASONS[t.backend.claims.name] ?? UNEXPLAINED;
  const dupBytes = dup.reduce((n, c) => n + c.sourceBytes, 0);
  const dupSourceCalls = dup.reduce((n, c) => n + c.sourceCalls, 0);
  const dupPort = dup.map((c) => c.claimCalls + c.outputCalls + c.sourceCalls);
  const jobPort = first.map((c) => c.claimCalls + c.outputCalls);
  const firstMs = summarize(first.map((c) => c.ms));
  const dupMs = summarize(dup.map((c) => c.ms));
  const speedup = firstMs.median / dupMs.median;
  const rows: Row[] = [
    {
      section: '2 duplicates',
      metric: 'source bytes read by duplicates',
      backend,
      target: '0 B',
      measured: `${dupBytes} B in ${dupSourceCalls} reads over ${dup.length} duplicates`,
      ratio: '-',
      status: dupBytes === 0 && dupSourceCalls === 0 ? 'PASS' : 'MISS',
      note: dupBytes === 0 ? undefined : 'a duplicate read the scene: the claim did not stop it before the raster work',
    },
    {
      section: '2 duplicates',
      metric: 'store round trips per duplicate (port calls)',
      backend,
      target: '1 (the claim)',
      measured: `${range(dupPort)} per duplicate, ${dup.length} duplicates`,
      ratio: '-',
      status: all(dupPort, 1) ? 'PASS' : 'MISS',
      note: all(dupPort, 1) ? undefined : 'a duplicate made store calls besides its claim',
    },
  ];
  const wireOf = (c: DeliveryCost) => c.wire ?? { claims: 0, sources: 0, outputs: 0 };
  if (t.wire) {
    const dupWire = dup.map((c) => wireOf(c).claims + wireOf(c).sources + wireOf(c).outputs);
    rows.push({
      section: '2 duplicates',
      metric: 'requests on the wire per duplicate',
      backend,
      target: '1',
      measured: `${range(dupWire)} per duplicate (claim store ${range(dup.map((c) => wireOf(c).claims))}, buckets ${range(dup.map((c) => wireOf(c).sources + wireOf(c).outputs))})`,
      ratio: '-',
      status: all(dupWire, 1) ? 'PASS' : 'MISS',
      note: all(dupWire, 1) ? undefined : `one claim call is more than one request here: ${reason.refusedClaim}`,
    });
  } else {
    rows.push({
      section: '2 duplicates',
      metric: 'requests on the wire per duplicate',
      backend,
      target: 'context',
      measured: 'none: SQLite and the filesystem are in-process',
      ratio: '-',
      status: 'INFO',
      note: 'the local claim call is one conditional upsert, then one read of the row that refused it',
    });
  }
  rows.push(
    {
      section: '2 duplicates',
      metric: 'time of a duplicate vs a first delivery',
      backend,
      target: `>= ${MIN_SPEEDUP}x cheaper`,
      measured: `${fmt(dupMs.median, 3)} ms (${fmt(dupMs.min, 2)}-${fmt(dupMs.max, 2)}) vs ${fmt(firstMs.median)} ms (${fmt(firstMs.min)}-${fmt(firstMs.max)}), n=${dup.length}`,
      ratio: times(speedup),
      status: speedup >= MIN_SPEEDUP ? 'PASS' : 'MISS',
      note:
        speedup >= MIN_SPEEDUP
          ? undefined
          : `a duplicate is its claim and nothing else: the claim store took ${fmt(summarize(dup.map((c) => c.claimMs)).median, 3)} ms of its ${fmt(dupMs.median, 3)} ms ` +
            `(${t.wire ? `${range(dup.map((c) => wireOf(c).claims))} request(s) to ${t.label}, an emulator on a shared machine` : 'in-process'}), ` +
            `against ${fmt(firstMs.median)} ms of a whole tile. The ratio is bounded by the claim store's latency, not by work the duplicate does`,
    },
    {
      section: '3 gates',
      metric: 'store round trips per job (port calls)',
      backend,
      target: '3 (claim, write, commit)',
      measured: `${range(jobPort)} per job, ${first.length} jobs (plus ${range(first.map((c) => c.sourceCalls))} source range reads)`,
      ratio: '-',
      status: all(jobPort, 3) ? 'PASS' : 'MISS',
      note: all(jobPort, 3)
        ? undefined
        : 'a first delivery made gate calls besides claim, write and commit (a heartbeat before the write means the tile took more than half its lease)',
    },
  );
  if (t.wire) {
    const jobWire = first.map((c) => wireOf(c).claims + wireOf(c).outputs);
    rows.push({
      section: '3 gates',
      metric: 'requests on the wire per job (gates only)',
      backend,
      target: '3',
      measured: `${range(jobWire)} per job (claim store ${range(first.map((c) => wireOf(c).claims))}, output writes ${range(first.map((c) => wireOf(c).outputs))}; source reads ${range(first.map((c) => wireOf(c).sources))} besides)`,
      ratio: '-',
      status: all(jobWire, 3) ? 'PASS' : 'MISS',
      note: all(jobWire, 3) ? undefined : reason.commit,
    });
  }
  return rows;
}
