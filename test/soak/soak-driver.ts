/**
 * The randomized fault soak (issue 13): a seeded driver that runs many scenes
 * through the real handlers and adapters of one backend (the parity kit's
 * backends: SQLite + filesystem; DynamoDB Local + moto; Firestore +
 * fake-gcs-server + Pub/Sub; Azurite) while injecting faults at every
 * boundary, then checks an oracle after the drain. docs/soak.md says what is
 * injected, how the oracle judges, and how to reproduce a seed.
 *
 * Determinism: every decision (scene sizes, copies, delays, which delivery
 * gets which fault, where a worker dies) is drawn from a PRNG seeded by the
 * run's seed, in delivery order. The local backend's queue is FIFO on the
 * FakeClock, so a local run replays exactly; an emulator may hand messages
 * out in another order, which changes which message meets which draw, never
 * the mix of faults.
 *
 * Time: leases, the transports' redelivery gaps and the clock skew run on the
 * FakeClock, scaled from each platform's real schedule to the parity lease
 * (shared/app/redelivery.ts has the schedules); nothing waits in real time for
 * a lease. A message the driver gives back is released at once on the real
 * queue and not processed again before its due time on the FakeClock.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Backend, WorkerHooks } from '../../shared/app/backend.js';
import { withClockSkewMargin } from '../../shared/app/clock-skew.js';
import type { FanOutResult } from '../../shared/app/fan-out.js';
import { claimIdOf } from '../../shared/app/process-tile.js';
import { azureHostSchedule, localSchedule, pubSubSchedule, type RedeliverySchedule, sqsSchedule } from '../../shared/app/redelivery.js';
import { isSceneSuperseded, readSceneManifest } from '../../shared/app/scene-manifest.js';
import { makeTileJob, parseTileJob, type TileJob, type TileMode, toJobMessage } from '../../shared/app/tile-job.js';
import type { BackfillPolicy } from '../../shared/domain/backfill-policy.js';
import { TesseraError } from '../../shared/domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef, tileJobKey } from '../../shared/domain/job-key.js';
import { type TileGrid, windows } from '../../shared/domain/tile-grid.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import type { ObjectStore, PutIfAbsentResult, PutIfMatchResult, PutOptions } from '../../shared/ports/object-store.port.js';
import { unconditionalWrites } from '../contract/precondition-guard.js';
import { type BackendName, createParityBackend, PARITY_MAX_RECEIVE_COUNT, type ParityBackend } from '../parity/backends.js';
import { type DeliverResult, deferred, LEASE_MS, PARITY_PARAMS, ScenarioContext } from '../parity/harness.js';
import type { FaultShot } from '../support/claim-faults.js';
import type { EmulatorEndpoints } from '../support/emulators/types.js';
import type { IamRun } from '../support/iam/run.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import type { WorkerOrder } from './local-worker.js';
import type { ReferenceAnswer, ReferenceRequest } from './reference-render.js';

const here = dirname(fileURLToPath(import.meta.url));

/** Every kind of fault the soak can inject; `--faults all` is all of them. */
export const FAULT_KINDS = [
  'duplicate',
  'duplicate-scene-event',
  'lost-claim-answer',
  'lost-commit-answer',
  'lost-write-answer',
  'throttled-claim',
  'throttled-commit',
  'throttled-write',
  'crash-before-claim',
  'crash-after-claim',
  'crash-after-write',
  'crash-after-commit',
  'slow-tile',
  'zombie',
  'clock-skew',
  'source-overwritten',
  'backfill-skip',
  'backfill-new-key',
  'backfill-overwrite',
  'poison',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface SoakOptions {
  readonly seed: number;
  /** Deliveries to make at least (the run stops fanning out new scenes once it reached them, then drains). */
  readonly deliveries: number;
  readonly faults: readonly FaultKind[];
  /** Progress lines (stderr in the CLI). */
  readonly say?: ((line: string) => void) | undefined;
  /**
   * A deliberately broken worker (the oracle's own test: it must catch it). Wraps every worker's ports.
   * Never set by `npm run soak`.
   */
  readonly mutant?: ((backend: Backend) => Backend) | undefined;
  /**
   * The enforced-IAM check (docs/iam.md): every request a cloud backend's functions make is checked against
   * that cloud's grants as the Pulumi program deploys them; each access outside them is an anomaly. The local
   * backend has no IAM and is not checked.
   */
  readonly iam?: IamRun | undefined;
}

/** One backend's row of reports/soak.json, in the issue's shape. */
export interface SoakBackendReport {
  readonly deliveries: number;
  readonly faultsByKind: Record<string, number>;
  readonly duplicatesDelivered: number;
  readonly tilesExpected: number;
  readonly tilesCorrect: number;
  readonly duplicateWrites: number;
  readonly missingTiles: number;
  readonly divergentTiles: number;
  readonly wedgedJobs: number;
  readonly falseAlarms: number;
  readonly deadLettered: number;
  readonly deadLetteredExplained: number;
  /** Accesses outside the deployed grants (each distinct role, action and key once), unclassified requests, IAM refusals. */
  readonly iamFindings: number;
  readonly seconds: number;
}

/** A backend's report and the anomalies behind its counts, one line each (empty: the oracle holds). */
export interface SoakOutcome {
  readonly report: SoakBackendReport;
  readonly anomalies: readonly string[];
  /** The IAM check's line for the report (requests, denials, grants never used); absent where none ran. */
  readonly iam?: string | undefined;
}

/** The counts that must be 0 (or equal) for a run to pass. */
export function anomalyCount(r: SoakBackendReport): number {
  return (
    r.duplicateWrites +
    r.missingTiles +
    r.divergentTiles +
    r.wedgedJobs +
    r.falseAlarms +
    (r.deadLettered - r.deadLetteredExplained) +
    (r.tilesExpected - r.tilesCorrect) +
    r.iamFindings
  );
}

/** mulberry32 over a seed mixed with a stream name: one independent, repeatable stream per purpose. */
export function prng(seed: number, stream: string): () => number {
  let a = (createHash('sha256').update(`${seed}:${stream}`).digest().readUInt32LE(0) ^ seed) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const int = (rnd: () => number, lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));
const pick = <T>(rnd: () => number, items: readonly T[]): T => items[Math.floor(rnd() * items.length)] as T;

/**
 * Each transport's schedule scaled to the parity lease (60 s on the FakeClock), with the gap after
 * which the platform brings back a message whose worker died. Real figures, scaled by
 * LEASE_MS / the cloud's real lease:
 * - SQS + Lambda (1,200 s lease): the queue's visibility, 6 x the 900 s timeout = 5,400 s; the handler sets retry gaps.
 * - Pub/Sub push (840 s lease): 10 s minimum backoff; a dead push is retried after its 600 s ack deadline.
 * - Storage Queue + Functions host (900 s lease): host.json visibilityTimeout 330 s for a failure; a dead
 *   host's dequeued message returns after its 10 min visibility.
 * - local SQLite queue (the configured timeout + 300 s): the pool sets retry gaps; a dead worker's message
 *   returns after the visibility it was received with (the lease).
 */
interface Transport {
  readonly schedule: RedeliverySchedule;
  /** The gap before a failed delivery's message comes back when the handler sets none. */
  readonly retryGapMs: number;
  /** The gap before the message of a worker that died comes back. */
  readonly crashGapMs: number;
}

const scaled = (realMs: number, realLeaseMs: number): number => Math.round((realMs * LEASE_MS) / realLeaseMs);

function transportOf(name: BackendName): Transport {
  switch (name) {
    case 'aws':
      return {
        schedule: sqsSchedule(PARITY_MAX_RECEIVE_COUNT),
        retryGapMs: scaled(5_400_000, 1_200_000),
        crashGapMs: scaled(5_400_000, 1_200_000),
      };
    case 'gcp': {
      const minBackoff = scaled(10_000, 840_000);
      return {
        schedule: pubSubSchedule(PARITY_MAX_RECEIVE_COUNT, minBackoff),
        retryGapMs: minBackoff,
        crashGapMs: scaled(600_000, 840_000),
      };
    }
    case 'azure': {
      const visibility = scaled(330_000, 900_000);
      return {
        schedule: azureHostSchedule(PARITY_MAX_RECEIVE_COUNT, visibility),
        retryGapMs: visibility,
        crashGapMs: scaled(600_000, 900_000),
      };
    }
    case 'local':
      return { schedule: localSchedule(PARITY_MAX_RECEIVE_COUNT), retryGapMs: 0, crashGapMs: LEASE_MS };
    default: {
      const never: never = name;
      throw new Error(`unknown backend ${String(never)}`);
    }
  }
}

/**
 * The clock-skew margin the cloud compose files wire (shared/app/clock-skew.ts), at a quarter of the lease
 * (its cap when unset). The local backend runs every worker on one machine's clock and wires none, so a
 * skewed worker is not a local fault.
 */
const SKEW_MARGIN_MS = LEASE_MS / 4;
/** Skews drawn within this share of the margin: the stated bound. */
const SKEW_WITHIN = 0.9;

/**
 * One worker's clock: the true (Fake) clock plus a skew, with its own timers.
 * The lease keeper's renewals are this worker's timers, so a slow tile's
 * keeper runs while it renders (`runFor`), and a worker that died (a crash)
 * or froze (a zombie) renews nothing: its timers are never run again.
 */
class WorkerClock implements Clock {
  readonly #timers = new Set<{ periodMs: number; task: () => void | Promise<void>; next: number }>();
  constructor(
    private readonly base: ScenarioContext['clock'],
    private readonly offsetMs: number,
  ) {}
  now(): number {
    return this.base.now() + this.offsetMs;
  }
  every(periodMs: number, task: () => void | Promise<void>): () => void {
    const timer = { periodMs, task, next: this.now() + periodMs };
    this.#timers.add(timer);
    return () => {
      this.#timers.delete(timer);
    };
  }
  /** Let `ms` pass with this worker running: its due timers fire in order (the true clock moves with it). */
  async runFor(ms: number): Promise<void> {
    const end = this.base.now() + ms;
    for (;;) {
      let due: { periodMs: number; task: () => void | Promise<void>; next: number } | undefined;
      for (const t of this.#timers) if (t.next - this.offsetMs <= end && (due === undefined || t.next < due.next)) due = t;
      if (due === undefined) break;
      const at = due.next - this.offsetMs;
      if (at > this.base.now()) this.base.advance(at - this.base.now());
      due.next += due.periodMs;
      await due.task();
    }
    if (end > this.base.now()) this.base.advance(end - this.base.now());
  }
}

/** What the output store answered to each tile write, in order: the oracle's "written once". */
interface WriteRecord {
  readonly key: string;
  readonly mode: 'create' | 'repair';
  readonly kind: string;
  readonly version?: string | undefined;
}

function recordingOutputs(inner: ObjectStore, log: WriteRecord[]): ObjectStore {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'putIfAbsent')
        return async (key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult> => {
          const r = await target.putIfAbsent(key, body, options);
          if (key.startsWith('tiles/'))
            log.push({ key, mode: 'create', kind: r.kind, version: r.kind === 'written' ? r.version : undefined });
          return r;
        };
      if (prop === 'putIfMatch')
        return async (key: string, body: Uint8Array, expected: string, options?: PutOptions): Promise<PutIfMatchResult> => {
          const r = await target.putIfMatch(key, body, expected, options);
          if (key.startsWith('tiles/'))
            log.push({ key, mode: 'repair', kind: r.kind, version: r.kind === 'written' ? r.version : undefined });
          return r;
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A scene version the soak made: its source bytes (for the reference render) and what became of it. */
interface SceneVersion {
  readonly label: string;
  readonly sceneKey: string;
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  readonly grid: TileGrid;
  readonly bytes: Uint8Array;
}

/** A timed action of the plan: due once `deliveries` reached `at`. */
interface Planned {
  readonly at: number;
  readonly what: string;
  run(): Promise<void>;
}

/** A zombie: a worker frozen mid-job whose message the platform handed out again; it resumes later. */
interface Zombie {
  readonly resumeAt: number;
  readonly delivery: Delivery;
  resume(): void;
  readonly done: Promise<DeliverResult>;
}

/**
 * How long a received message stays hidden: longer than any batch takes, so a message never comes back
 * on its own while it waits in a batch (real seconds on the clouds, FakeClock ms locally, where the
 * transports' gaps advance the clock). The driver settles every delivery itself: ack, dead-letter, or
 * give it back with its transport's gap (a crash, a retry, a zombie's timed-out invocation).
 */
const RECEIVE_VISIBILITY_MS = 600_000;

const POISON_KINDS = ['not-json', 'wrong-shape', 'other-build', 'tampered-key', 'bad-expression'] as const;

/**
 * Run the soak on one backend and judge it. Never throws for an anomaly (it
 * is counted and described); throws only if the run itself broke.
 */
export async function runSoak(name: BackendName, endpoints: EmulatorEndpoints, options: SoakOptions): Promise<SoakOutcome> {
  const t0 = Date.now();
  const say = options.say ?? (() => {});
  const enabled = new Set<FaultKind>(options.faults);
  const on = (k: FaultKind) => enabled.has(k);
  const faults: Record<string, number> = {};
  const count = (k: FaultKind, n = 1) => {
    faults[k] = (faults[k] ?? 0) + n;
  };
  const shots: { readonly kind: FaultKind; readonly shot: FaultShot }[] = [];
  const transport = transportOf(name);
  const skewAllowed = name !== 'local';

  // Started before the backend is made: the grants (the program under mocks) are read first, alone.
  const iamCheck = options.iam !== undefined && name !== 'local' ? await options.iam.start(name) : undefined;
  const pb: ParityBackend = await createParityBackend(name, endpoints, 'soak', { outputFaults: true });
  const ctx = new ScenarioContext(pb);
  const writes: WriteRecord[] = [];
  const plan = prng(options.seed, `plan:${name}`);
  const draw = prng(options.seed, `deliveries:${name}`);
  const scenes: SceneVersion[] = [];
  const poisonBodies = new Map<string, string>();
  const planned: Planned[] = [];
  const delayed: { at: number; bodies: string[] }[] = [];
  const zombies: Zombie[] = [];
  const zombieJobs = new Set<string>();
  const dueAt = new Map<string, number>();
  const crashesOf = new Map<string, number>();
  const deliveriesOfJob = new Map<string, number>();
  const sourceChanged = new Set<string>();
  const poisonVerdicts: { body: string; error: string }[] = [];
  const anomalies: string[] = [];
  let deliveries = 0;
  /** Messages put on the queue (fan-out, duplicates, poison) and messages settled for good (acked, dead-lettered). */
  let sent = 0;
  let finished = 0;
  let duplicatesDelivered = 0;
  let sceneSeq = 0;
  let workerSeq = 0;
  const tmp = mkdtempSync(join(tmpdir(), 'tessera-soak-'));
  // The local backend's crashes are real worker processes killed with SIGKILL (their log lines join ours).
  const childLanded = new Map<string, number>();
  const processes = pb.dataDir
    ? new WorkerProcesses(
        pb.dataDir,
        (line) => (pb.logs as string[]).push(line),
        (key) => childLanded.set(key, (childLanded.get(key) ?? 0) + 1),
      )
    : undefined;

  const ports =
    (clock: WorkerClock) =>
    (backend: Backend): Backend => {
      const worker: Backend = {
        ...backend,
        clock,
        // Every cloud compose wires the skew margin; the local one does not (one clock).
        claims: skewAllowed ? withClockSkewMargin(backend.claims, SKEW_MARGIN_MS) : backend.claims,
        outputs: recordingOutputs(backend.outputs, writes),
      };
      return options.mutant ? options.mutant(worker) : worker;
    };

  /** Stage a fresh source and fan its event out (maybe twice), with its duplicates, poison and racing events planned. */
  async function newScene(): Promise<void> {
    const r = ++sceneSeq;
    const label = `S${r}`;
    const [width, height] = pick(plan, [
      [64, 48],
      [96, 64],
      [128, 64],
    ] as const);
    const bytes = await syntheticSceneBytes({ width, height, seed: options.seed * 1000 + r });
    const key = `incoming/soak-${r}.tif`;
    const source = await ctx.stage(key, bytes);
    const fan = await sceneEvent(() => ctx.fanOut(label, { source, params: PARITY_PARAMS }));
    scenes.push({ label, sceneKey: fan.sceneKey, source, params: PARITY_PARAMS, grid: fan.grid, bytes });
    if (on('duplicate-scene-event') && plan() < 0.15) {
      // A duplicate notification of the same upload: the manifest is create-only, every tile job is sent again.
      await sceneEvent(() => ctx.fanOut(label, { source, params: PARITY_PARAMS }));
      count('duplicate-scene-event');
    }
    // The very messages fan-out sent (its read pin included), so a copy is a true duplicate.
    const { pin } = await readSceneManifest(ctx.backend.outputs, fan.sceneKey);
    const jobs = [...windows(fan.grid)].map((w) => makeTileJob(fan.sceneKey, source, PARITY_PARAMS, fan.grid, w, { kind: 'create' }, pin));
    if (on('duplicate')) {
      for (const job of jobs) {
        // 0-5 extra copies, weighted to the few, each after its own delay (in deliveries): out of order.
        const copies = pick(plan, [0, 0, 0, 1, 1, 1, 2, 2, 3, 4, 5]);
        for (let c = 0; c < copies; c++) {
          delayed.push({ at: deliveries + int(plan, 0, 40), bodies: [toJobMessage(job).body] });
          count('duplicate');
        }
      }
    }
    if (on('poison') && plan() < 0.3) {
      const body = poisonBody(pick(plan, POISON_KINDS), jobs[0] as TileJob);
      delayed.push({ at: deliveries + int(plan, 0, 20), bodies: [body] });
      count('poison');
    }
    if (on('source-overwritten') && plan() < 0.12) {
      planned.push({
        at: deliveries + int(plan, 1, 12),
        what: `overwrite ${label}`,
        run: async () => {
          const newBytes = await syntheticSceneBytes({ width, height, seed: options.seed * 1000 + r + 500_000 });
          const next = await ctx.overwriteSource(key, newBytes);
          const fan2 = await sceneEvent(() => ctx.fanOut(`${label}v2`, { source: next, params: PARITY_PARAMS }));
          scenes.push({
            label: `${label}v2`,
            sceneKey: fan2.sceneKey,
            source: next,
            params: PARITY_PARAMS,
            grid: fan2.grid,
            bytes: newBytes,
          });
          count('source-overwritten');
        },
      });
    }
    const policies: BackfillPolicy[] = [];
    if (on('backfill-skip')) policies.push('skip');
    if (on('backfill-new-key')) policies.push('new-key');
    if (on('backfill-overwrite')) policies.push('overwrite');
    if (policies.length > 0 && plan() < 0.3) {
      const policy = pick(plan, policies);
      planned.push({
        at: deliveries + int(plan, 2, 30),
        what: `backfill ${policy} ${label}`,
        run: () => backfill(policy, label, fan.sceneKey),
      });
    }
  }

  /** A backfill racing live ingest, as `tessera backfill` runs it: fan out from the manifest's pin. */
  async function backfill(policy: BackfillPolicy, label: string, scene: string, tries = 0): Promise<void> {
    const manifest = await readSceneManifest(ctx.backend.outputs, scene);
    switch (policy) {
      case 'skip':
        await sceneEvent(() => ctx.fanOut(label, { source: manifest.source, params: manifest.params, recorded: manifest }));
        break;
      case 'new-key': {
        const params = { ...manifest.params, version: `${manifest.params.version as string}-soak${sceneSeq}` };
        const fan = await sceneEvent(() => ctx.fanOut(`${label}nk`, { source: manifest.source, params, recorded: manifest }));
        const original = scenes.find((s) => s.sceneKey === scene) as SceneVersion;
        scenes.push({ ...original, label: `${label}nk`, sceneKey: fan.sceneKey, params, grid: fan.grid });
        break;
      }
      case 'overwrite': {
        // Repair the windows whose tile is there now, conditional on the version the operator saw.
        const expected = new Map<string, string>();
        for (const w of windows(manifest.grid)) {
          const head = await ctx.backend.outputs.head(outputKeys.tile(scene, w));
          if (head) expected.set(`${w.row}_${w.col}`, head.version);
        }
        if (expected.size === 0) {
          // Nothing to repair yet (the scene's jobs are still queued): the operator comes back later.
          if (tries < 40) {
            planned.push({
              at: deliveries + 25,
              what: `backfill overwrite ${label} (try ${tries + 2})`,
              run: () => backfill(policy, label, scene, tries + 1),
            });
          }
          return;
        }
        const modeFor = (row: number, col: number): TileMode | undefined => {
          const v = expected.get(`${row}_${col}`);
          return v === undefined ? undefined : { kind: 'overwrite', expectedVersion: v };
        };
        await sceneEvent(() =>
          ctx.fanOut(label, {
            source: manifest.source,
            params: manifest.params,
            recorded: manifest,
            only: (row, col) => expected.has(`${row}_${col}`),
            modeFor,
          }),
        );
        break;
      }
      default: {
        const never: never = policy;
        throw new Error(`unknown policy ${String(never)}`);
      }
    }
    count(`backfill-${policy}` as FaultKind);
  }

  /**
   * A scene event's handler, retried as its trigger retries a failed event (S3/GCS/Event Grid
   * notifications are at-least-once): a transient store error fails the attempt, never the scene.
   */
  async function sceneEvent(run: () => Promise<FanOutResult>): Promise<FanOutResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        const fan = await run();
        sent += fan.enqueued;
        return fan;
      } catch (error) {
        if (!(error instanceof TesseraError && error.retryable) || attempt >= PARITY_MAX_RECEIVE_COUNT) throw error;
      }
    }
  }

  function poisonBody(kind: (typeof POISON_KINDS)[number], job: TileJob): string {
    const raw = JSON.parse(toJobMessage(job).body) as Record<string, unknown>;
    const n = poisonBodies.size;
    let body: string;
    switch (kind) {
      case 'not-json':
        body = `{"v":1,"broken ${n}`;
        break;
      case 'wrong-shape':
        body = JSON.stringify({ v: 1, poison: n });
        break;
      case 'other-build':
        body = JSON.stringify({ ...raw, code: `0.0.0+other${n}` });
        break;
      case 'tampered-key':
        body = JSON.stringify({ ...raw, jobKey: createHash('sha256').update(`tampered ${n}`).digest('hex') });
        break;
      case 'bad-expression':
        body = JSON.stringify({ ...raw, params: { ...(raw.params as object), expression: `(B08 - B04) / ${'('.repeat((n % 3) + 1)}` } });
        break;
      default: {
        const never: never = kind;
        throw new Error(`unknown poison ${String(never)}`);
      }
    }
    poisonBodies.set(body, kind);
    ctx.nameBody(body, `poison ${kind} ${n}`);
    return body;
  }

  /** Hand one delivery to a worker with this draw's faults, and settle it as its platform would. */
  async function handle(d: Delivery): Promise<void> {
    const armedBefore = shots.length;
    try {
      await deliverOnce(d);
    } finally {
      // A fault armed for this delivery that it never reached (a duplicate stopped at its claim writes
      // nothing) is disarmed: it must not hit a later delivery, past that one's budget.
      for (const { shot } of shots.slice(armedBefore)) if (shot.hits === 0) shot.remove?.();
    }
  }

  async function deliverOnce(d: Delivery): Promise<void> {
    const due = dueAt.get(d.deliveryId);
    // The transport's gap runs on the FakeClock: the message is not seen before it.
    if (due !== undefined && due > ctx.clock.now()) ctx.clock.advance(due - ctx.clock.now());
    deliveries++;
    let jobId: string | undefined;
    try {
      jobId = claimIdOf(parseTileJob(d.body));
    } catch {
      jobId = undefined;
    }
    if (jobId !== undefined) {
      const seen = deliveriesOfJob.get(jobId) ?? 0;
      if (seen > 0) duplicatesDelivered++;
      deliveriesOfJob.set(jobId, seen + 1);
    }
    const worker = `w${++workerSeq}`;
    const roll = draw();
    // A worker dies at most once per message, on its first delivery: the soak tests survival, and a
    // message that failed on every delivery its transport allows is dead-lettered by the platform, by
    // design (a crash can cost two: the death, then a delivery that waits out the dead attempt's lease).
    const crashes = crashesOf.get(d.deliveryId) ?? 0;
    const mayCrash = jobId !== undefined && crashes === 0 && d.receiveCount <= 1;
    // A transient error fails a delivery where no SDK retries below the adapter (SQLite, the filesystem):
    // drawn only on a message's first two deliveries, so faults never use up its transport's budget.
    const mayFail = d.receiveCount <= 2;
    const offsetMs = skewAllowed && on('clock-skew') && draw() < 0.15 ? Math.round((draw() * 2 - 1) * SKEW_WITHIN * SKEW_MARGIN_MS) : 0;
    if (offsetMs !== 0) count('clock-skew');
    const clock = new WorkerClock(ctx.clock, offsetMs);
    const release = async (gapMs: number) => {
      dueAt.set(d.deliveryId, ctx.clock.now() + gapMs);
      await ctx.queue.release(d, 0);
    };
    const fault = chooseFault(roll, mayCrash, mayFail);
    if (fault !== undefined) count(fault);
    trace(
      d,
      `delivery ${deliveries} receive ${d.receiveCount} worker ${worker} fault ${fault ?? '-'} skew ${offsetMs} at ${ctx.clock.now()}`,
    );
    if (fault?.startsWith('crash')) crashesOf.set(d.deliveryId, crashes + 1);
    switch (fault) {
      case 'crash-before-claim':
        // Died on receipt: nothing ran; the message comes back after the platform's visibility.
        return release(transport.crashGapMs);
      case 'lost-claim-answer':
        shots.push({ kind: fault, shot: pb.claimFaults.loseNextAnswer('claim') });
        break;
      case 'lost-commit-answer':
        shots.push({ kind: fault, shot: pb.claimFaults.loseNextAnswer('commit') });
        break;
      case 'throttled-claim':
        shots.push({ kind: fault, shot: pb.claimFaults.failNextTransiently('claim') });
        break;
      case 'throttled-commit':
        shots.push({ kind: fault, shot: pb.claimFaults.failNextTransiently('commit') });
        break;
      case 'lost-write-answer':
        shots.push({ kind: fault, shot: pb.outputFaults.loseNextWriteAnswer() });
        break;
      case 'throttled-write':
        shots.push({ kind: fault, shot: pb.outputFaults.failNextWriteTransiently() });
        break;
      default:
        break;
    }
    const options = { schedule: transport.schedule, ports: ports(clock) };
    if (fault === 'zombie' && jobId !== undefined) {
      // Frozen mid-job past its lease (a timed-out function instance that keeps running): the platform
      // hands the message out again, a later delivery takes the lapsed lease over, and the zombie resumes.
      const gate = deferred();
      const reached = deferred<'reached'>();
      const where = draw() < 0.5 ? 'afterClaim' : 'afterWrite';
      const stall = async () => {
        reached.resolve('reached');
        await gate.promise;
      };
      const hooks: WorkerHooks = where === 'afterClaim' ? { afterClaim: stall } : { afterWrite: stall };
      const done = ctx.deliver(d, worker, { ...options, hooks });
      // It froze only if it got that far (a duplicate stops at its claim and never reaches the hook).
      const first = await Promise.race([reached.promise, done]);
      if (first !== 'reached') {
        judgeVerdict(d, first);
        return settleVerdict(first, undefined);
      }
      zombies.push({ resumeAt: deliveries + int(draw, 1, 15), delivery: d, resume: () => gate.resolve(), done });
      zombieJobs.add(jobId);
      // Its function timed out: the platform hands the message out again, and time passes past the lease.
      ctx.clock.advance(LEASE_MS + SKEW_MARGIN_MS + 1);
      return release(0);
    }
    let hooks: WorkerHooks | undefined;
    if (fault === 'slow-tile') {
      // A healthy render that outlives its lease: its keeper renews it meanwhile, so nobody takes it over.
      hooks = { afterClaim: () => clock.runFor(LEASE_MS * 2) };
    }
    const crashAfter = fault === 'crash-after-claim' ? 'claim' : fault === 'crash-after-write' ? 'write' : undefined;
    if (processes && (crashAfter !== undefined || fault === 'crash-after-commit')) {
      const killed = await processes.crash({
        body: d.body,
        deliveryId: d.deliveryId,
        receiveCount: d.receiveCount,
        owner: worker,
        nowMs: ctx.clock.now(),
        leaseMs: LEASE_MS,
        retentionMs: ctx.settings(worker).retentionMs,
        maxReceiveCount: PARITY_MAX_RECEIVE_COUNT,
        crashAt: crashAfter ?? 'commit',
      });
      if (killed) {
        count('worker-sigkilled' as FaultKind);
        return release(transport.crashGapMs);
      }
    }
    const r = await ctx.deliver(d, worker, { ...options, hooks, fault: crashAfter ? { crashAfter } : undefined });
    judgeVerdict(d, r);
    return settleVerdict(r, fault);

    /** As the platform settles the worker's answer: ack, give back after the transport's gap, dead-letter poison at once. */
    function settleVerdict(v: DeliverResult, f: FaultKind | undefined): Promise<void> {
      switch (v.kind) {
        case 'crashed':
          return release(transport.crashGapMs);
        case 'ack':
          // Died after the commit, before the ack: the message comes back and meets `done`.
          if (f === 'crash-after-commit') return release(transport.crashGapMs);
          finished++;
          return ctx.queue.ack(d);
        case 'retry':
          return release(v.delayMs ?? transport.retryGapMs);
        case 'poison':
          finished++;
          return ctx.settle(d, v, 'dead-letter');
        default: {
          const never: never = v;
          throw new Error(`unknown verdict ${JSON.stringify(never)}`);
        }
      }
    }
  }

  function chooseFault(roll: number, mayCrash: boolean, mayFail: boolean): FaultKind | undefined {
    // Cumulative probabilities: about half the deliveries get a fault.
    const table: [FaultKind, number, boolean][] = [
      ['crash-before-claim', 0.03, mayCrash],
      ['crash-after-claim', 0.04, mayCrash],
      ['crash-after-write', 0.04, mayCrash],
      ['crash-after-commit', 0.03, mayCrash],
      ['zombie', 0.03, mayCrash],
      ['slow-tile', 0.03, true],
      ['lost-claim-answer', 0.05, true],
      ['lost-commit-answer', 0.05, true],
      ['lost-write-answer', 0.05, true],
      ['throttled-claim', 0.04, mayFail],
      ['throttled-commit', 0.04, mayFail],
      ['throttled-write', 0.04, mayFail],
    ];
    let acc = 0;
    for (const [kind, p, allowed] of table) {
      acc += p;
      if (roll < acc) return allowed && on(kind) ? kind : undefined;
    }
    return undefined;
  }

  /** TESSERA_SOAK_TRACE=<job label prefix>: one line per delivery of the matching jobs (debugging a seed). */
  function trace(d: Delivery, line: string): void {
    const want = process.env.TESSERA_SOAK_TRACE;
    if (!want) return;
    const label = ctx.jobLabel(safeJobKey(d.body));
    if (label.startsWith(want)) say(`${name} ${label} ${d.deliveryId.slice(0, 8)}: ${line}`);
  }

  function judgeVerdict(d: Delivery, r: DeliverResult): void {
    trace(
      d,
      `verdict ${r.kind}${r.kind === 'ack' ? ` ${r.outcome.kind}${'reason' in r.outcome ? ` ${String(r.outcome.reason)}` : ''}` : ''}${r.kind === 'retry' || r.kind === 'poison' ? ` ${r.error.message}` : ''}`,
    );
    if (r.kind === 'poison') poisonVerdicts.push({ body: d.body, error: r.error.message });
    if (r.kind === 'ack' && r.outcome.kind === 'source-changed') {
      try {
        sourceChanged.add(claimIdOf(parseTileJob(d.body)));
      } catch {
        // A fan-out chunk has no claim.
      }
    }
  }

  async function fireDue(force: boolean): Promise<boolean> {
    let fired = false;
    const horizon = force ? Number.POSITIVE_INFINITY : deliveries;
    const nextAt = Math.min(
      ...delayed.map((x) => x.at),
      ...planned.map((x) => x.at),
      ...zombies.map((z) => z.resumeAt),
      Number.POSITIVE_INFINITY,
    );
    const limit = force ? nextAt : horizon;
    for (const x of delayed.filter((y) => y.at <= limit)) {
      delayed.splice(delayed.indexOf(x), 1);
      await ctx.queue.sendBatch(x.bodies.map((body) => ({ jobKey: bodyKey(body), body })));
      sent += x.bodies.length;
      fired = true;
    }
    for (const p of planned.filter((y) => y.at <= limit)) {
      planned.splice(planned.indexOf(p), 1);
      say(`${name}: ${p.what} at delivery ${deliveries}`);
      await p.run();
      fired = true;
    }
    for (const z of zombies.filter((y) => y.resumeAt <= limit)) {
      zombies.splice(zombies.indexOf(z), 1);
      z.resume();
      const r = await z.done;
      // Its message is no longer its own (handed out again): its answer is judged, never settled.
      judgeVerdict(z.delivery, r);
      fired = true;
    }
    return fired;
  }

  // The run: scenes keep coming until the deliveries are made, then everything drains.
  let sceneDue = 0;
  let empty = 0;
  for (;;) {
    // A new scene while the deliveries made, plus one per message still out, fall short of the size;
    // if the drain ends short of it after all (retries are extra deliveries, not extra messages), more come.
    if (deliveries >= sceneDue && deliveries + (sent - finished) < options.deliveries) {
      await newScene();
      sceneDue = deliveries + int(plan, 4, 16);
    }
    await fireDue(false);
    const batch = await ctx.queue.receive(10, RECEIVE_VISIBILITY_MS);
    if (batch.length === 0) {
      if (deliveries < options.deliveries) {
        sceneDue = deliveries;
        continue;
      }
      if (await fireDue(true)) {
        empty = 0;
        continue;
      }
      // Messages given back may take the emulator a moment to hand out again.
      if (++empty >= 8) break;
      await sleep(250);
      continue;
    }
    empty = 0;
    for (const d of batch) await handle(d);
    if (deliveries % 200 < batch.length) say(`${name}: ${deliveries} deliveries, ${scenes.length} scene versions`);
  }
  // Past every lease and skew margin: a CLAIMED row now is wedged unless explained.
  ctx.clock.advance(LEASE_MS + 2 * SKEW_MARGIN_MS + 1);

  await processes?.close();
  const judged = await judge();
  // After the oracle: its mosaics are the mosaic function's work, checked like the rest.
  const iamFindings = [
    ...(iamCheck === undefined ? [] : (options.iam as IamRun).finish(iamCheck)),
    // The IAM-enforcing emulator's refusals (aws: S3 signed per role), whether or not the recorder runs.
    ...pb.accessDenials().map((d) => `refused by the IAM-enforcing emulator: ${d}`),
  ];
  for (const f of iamFindings) anomalies.push(`iam ${f}`);
  const report: SoakBackendReport = { ...judged, iamFindings: iamFindings.length };
  rmSync(tmp, { recursive: true, force: true });
  await pb.close();
  const iam =
    iamCheck === undefined
      ? undefined
      : `${name}: ${iamCheck.tally.requests} requests checked, ${iamCheck.tally.denials().length} denied access(es), ${iamCheck.tally.unrecognised().length} unclassified`;
  return { report, anomalies, iam };

  /** The oracle, after the drain. */
  async function judge(): Promise<Omit<SoakBackendReport, 'iamFindings'>> {
    for (const { kind, shot } of shots) if (shot.hits === 0) faults[kind] = (faults[kind] ?? 1) - 1;
    const reference = referenceRender(scenes, tmp);
    let tilesExpected = 0;
    let tilesCorrect = 0;
    let missingTiles = 0;
    let divergentTiles = 0;
    let duplicateWrites = 0;
    let wedgedJobs = 0;
    let falseAlarms = 0;
    const liveJobs = new Set<string>();
    const tileJobIds = new Map<string, string>();
    for (const s of scenes) {
      const superseded = await isSceneSuperseded(ctx.backend.outputs, s.sceneKey);
      const ref = reference.get(s.sceneKey);
      let present = 0;
      for (const w of windows(s.grid)) {
        const key = outputKeys.tile(s.sceneKey, w);
        const jobId = tileJobKey(s.sceneKey, w);
        tileJobIds.set(key, jobId);
        const head = await ctx.backend.outputs.head(key);
        const id = `${s.label}/${w.row}_${w.col}`;
        if (!head) {
          if (superseded && sourceChanged.has(jobId)) continue;
          tilesExpected++;
          missingTiles++;
          anomalies.push(`${id}: tile missing${superseded ? ' (scene superseded, but its job never settled source-changed)' : ''}`);
          continue;
        }
        present++;
        tilesExpected++;
        if (!superseded) liveJobs.add(jobId);
        const bytes = await ctx.backend.outputs.get(key);
        const sha = createHash('sha256').update(bytes).digest('hex');
        const want = ref?.tiles[`${w.row}_${w.col}`];
        if (want && want.sha256 === sha && want.size === bytes.byteLength) tilesCorrect++;
        else {
          divergentTiles++;
          anomalies.push(`${id}: bytes differ from the reference render of its pinned source`);
        }
        // Written once: the store applied one create-only write, plus one per repair that asked for it
        // (judged on the wire, below every SDK retry), and the object there is the last write that landed.
        const repairs = writes.filter((x) => x.key === key && x.kind === 'written' && x.mode === 'repair');
        const landed = pb.outputFaults.landedWrites(key) + (childLanded.get(key) ?? 0);
        if (landed !== 1 + repairs.length) {
          duplicateWrites += Math.max(1, landed - 1 - repairs.length);
          const seen = pb
            .wire()
            .filter((q) => q.path.includes(key.split('/').at(-1) as string) && q.path.includes(s.sceneKey))
            .map(
              (q) =>
                `${q.method} ${q.status ?? '-'}${q.fault ? ` (${q.fault})` : ''}${q.headers['if-match'] ? ` if-match ${String(q.headers['if-match'])}` : ''}`,
            );
          anomalies.push(`${id}: the store applied ${landed} writes (1 create + ${repairs.length} repairs expected): ${seen.join(', ')}`);
        }
        const last = writes.filter((x) => x.key === key && x.kind === 'written').at(-1);
        if (last && last.version !== head.version) {
          duplicateWrites++;
          anomalies.push(`${id}: the object there (${head.version}) is not the last write answered written (${last.version})`);
        }
      }
      if (!superseded) {
        // Mosaic counts equal grid counts.
        try {
          const m = await ctx.mosaic(s.sceneKey);
          if (m.manifestCount !== m.gridCount || m.gridCount !== present) {
            missingTiles++;
            anomalies.push(`${s.label}: mosaic lists ${m.manifestCount} of ${m.gridCount} tiles (${present} present)`);
          }
        } catch (error) {
          missingTiles++;
          anomalies.push(`${s.label}: mosaic failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    }
    // Every claim COMMITTED; a CLAIMED row once every lease passed is wedged, unless its job settled
    // source-changed (the claim is given back, the scene tombstoned).
    for await (const row of ctx.backend.claims.list()) {
      if (row.state === 'COMMITTED') continue;
      if (sourceChanged.has(row.jobId)) continue;
      wedgedJobs++;
      anomalies.push(`${ctx.jobLabel(row.jobId)}: claim ${row.state}, lease ${row.leaseUntil < ctx.clock.now() ? 'lapsed' : 'live'}`);
    }
    for (const jobId of liveJobs) {
      if (!(await ctx.backend.claims.get(jobId))) {
        wedgedJobs++;
        anomalies.push(`${ctx.jobLabel(jobId)}: tile present but no claim row`);
      }
    }
    // 0 false alarms: lease-stolen only where a lease was really taken over (a zombie's: frozen past its
    // lease by construction, and another owner holds the row), version-mismatch and write-occupied never
    // (no foreign write is injected), poison only for poison inputs. (Not "a lease-taken-over line exists":
    // a takeover whose answer was lost is recognised by the SDK's resend as this caller's own claim, and
    // the previous owner is no longer known to log.)
    for (const l of ctx.logs() as {
      level?: string;
      event?: string;
      jobKey?: string;
      claimId?: string;
      owner?: string;
      holder?: string;
      message?: string;
    }[]) {
      if (l.level !== 'ERROR') continue;
      const id = l.claimId ?? l.jobKey ?? '';
      if (l.event === 'lease-stolen' && zombieJobs.has(id) && l.holder !== undefined && l.holder !== l.owner) continue;
      if (l.event === 'poison-message') continue; // judged one by one below, from the verdicts
      falseAlarms++;
      anomalies.push(`false alarm ${l.event} on ${ctx.jobLabel(id)}: ${l.message ?? ''}`);
    }
    for (const v of poisonVerdicts) {
      if (poisonBodies.has(v.body)) continue;
      falseAlarms++;
      anomalies.push(`poison verdict for a good input (${ctx.jobLabel(safeJobKey(v.body))}): ${v.error}`);
    }
    // Every dead-lettered message explained, one by one.
    const dead = await ctx.queue.deadLetters();
    let explained = 0;
    for (const m of dead) {
      if (poisonBodies.has(m.body)) explained++;
      else anomalies.push(`dead-lettered without a reason: ${ctx.jobLabel(safeJobKey(m.body))}`);
    }
    for (const body of poisonBodies.keys()) {
      if (!dead.some((m) => m.body === body)) {
        falseAlarms++;
        anomalies.push(`poison input not dead-lettered: ${poisonBodies.get(body)}`);
      }
    }
    // Every write on the wire carried its precondition, SDK retries included.
    const findings = unconditionalWrites(pb.wire());
    for (const f of findings) {
      duplicateWrites++;
      anomalies.push(`unconditional write on the wire: ${JSON.stringify(f)}`);
    }
    return {
      deliveries,
      faultsByKind: Object.fromEntries(Object.entries(faults).sort(([a], [b]) => (a < b ? -1 : 1))),
      duplicatesDelivered,
      tilesExpected,
      tilesCorrect,
      duplicateWrites,
      missingTiles,
      divergentTiles,
      wedgedJobs,
      falseAlarms,
      deadLettered: dead.length,
      deadLetteredExplained: explained,
      seconds: Math.round((Date.now() - t0) / 100) / 10,
    };
  }
}

function bodyKey(body: string): string {
  try {
    return (JSON.parse(body) as { jobKey?: string }).jobKey ?? 'poison';
  } catch {
    return 'poison';
  }
}

function safeJobKey(body: string): string {
  try {
    return claimIdOf(parseTileJob(body));
  } catch {
    return bodyKey(body);
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Local worker processes to kill (test/soak/local-worker.ts): one spare is kept warm, so a crash of
 * the local backend is a real worker process killed with SIGKILL at its crash point whenever the
 * spare is ready (starting one takes about a second of CPU; a crash that finds none is aborted in
 * process, at the same point, and counted apart).
 */
class WorkerProcesses {
  #spare: { child: ChildProcess; ready: boolean } | undefined;
  kills = 0;
  constructor(
    private readonly dir: string,
    private readonly onLog: (line: string) => void,
    private readonly onLanded: (key: string) => void,
  ) {
    this.#warm();
  }

  #warm(): void {
    const child = spawn(process.execPath, ['--import', 'tsx', resolve(here, 'local-worker.ts'), this.dir], {
      cwd: resolve(here, '..', '..'),
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const spare = { child, ready: false };
    this.#spare = spare;
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        const message = JSON.parse(line) as { ready?: boolean; at?: string; log?: string; landed?: string };
        if (message.ready) spare.ready = true;
        if (message.landed !== undefined) this.onLanded(message.landed);
        if (message.log !== undefined) this.onLog(message.log);
        if (message.at !== undefined) child.emit('crash-point', message.at);
      }
    });
  }

  /** Run `order` in the warm spare and SIGKILL it at its crash point; false (nothing ran) if no spare is ready. */
  async crash(order: WorkerOrder): Promise<boolean> {
    const spare = this.#spare;
    if (!spare?.ready) return false;
    this.#warm();
    const { child } = spare;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const reached = new Promise<void>((r) => child.once('crash-point', () => r()));
    child.stdin?.write(`${JSON.stringify(order)}\n`);
    await Promise.race([reached, exited]);
    child.kill('SIGKILL');
    await exited;
    this.kills++;
    return true;
  }

  async close(): Promise<void> {
    const spare = this.#spare;
    this.#spare = undefined;
    if (spare && spare.child.exitCode === null) {
      const exited = new Promise<void>((r) => spare.child.once('exit', () => r()));
      spare.child.kill('SIGKILL');
      await exited;
    }
  }
}

/** The reference render of every scene version, in a clean child process (test/soak/reference-render.ts). */
function referenceRender(scenes: readonly SceneVersion[], tmp: string): Map<string, ReferenceAnswer> {
  const requests: ReferenceRequest[] = scenes.map((s, i) => {
    const bytesPath = join(tmp, `source-${i}.tif`);
    writeFileSync(bytesPath, s.bytes);
    return { id: s.sceneKey, bytesPath, params: s.params, grid: s.grid };
  });
  const out = execFileSync(process.execPath, ['--import', 'tsx', resolve(here, 'reference-render.ts')], {
    input: JSON.stringify(requests),
    cwd: resolve(here, '..', '..'),
    maxBuffer: 64 * 1024 * 1024,
    // A clean process: none of the soak's environment beyond what Node needs.
    env: { PATH: process.env.PATH ?? '' },
  });
  return new Map((JSON.parse(out.toString('utf8')) as ReferenceAnswer[]).map((a) => [a.id, a]));
}
