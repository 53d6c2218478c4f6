/**
 * The randomized fault soak (issues 13 and 25): a seeded driver that runs many
 * scenes through the real handlers and adapters of one backend (the parity
 * kit's backends: SQLite + filesystem; DynamoDB Local + moto; Firestore +
 * fake-gcs-server + Pub/Sub; Azurite; and the PostGIS feature sink on every
 * one) while injecting faults at every boundary, then checks an oracle after
 * the drain. Every path a stack runs is under it: single-file scenes fanned
 * out directly or in chunk messages, multi-band scenes from STAC Items, the
 * feature rows, ingestion of artefacts and of remote STAC Items, feature
 * batches judged record by record (soak-feature-batches.ts), each use case
 * in its function's role. docs/soak.md says what is injected, how the oracle
 * judges, and how to reproduce a seed.
 *
 * Determinism: every decision (scene kinds and sizes, copies, delays, which
 * delivery gets which fault, where a worker dies) is drawn from a PRNG seeded
 * by the run's seed, in delivery order; the rare fault kinds are scheduled at
 * fixed points of that plan (test/soak/fault-schedule.ts). The local
 * backend's queue is FIFO on the FakeClock, so a local run replays exactly; an
 * emulator may hand messages out in another order, which changes which message
 * meets which draw, never the mix of faults.
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
import { sceneGeoref } from '../../shared/app/assemble-mosaic.js';
import type { Backend, WorkerHooks } from '../../shared/app/backend.js';
import { withClockSkewMargin } from '../../shared/app/clock-skew.js';
import { FAN_OUT_CHUNK, type FanOutResult, isFanOutChunkBody, toChunkMessage } from '../../shared/app/fan-out.js';
import { claimIdOf } from '../../shared/app/process-tile.js';
import { azureHostSchedule, localSchedule, pubSubSchedule, type RedeliverySchedule, sqsSchedule } from '../../shared/app/redelivery.js';
import {
  isSceneSuperseded,
  manifestPins,
  readSceneManifest,
  type SceneManifest,
  sceneLifecycleKeys,
} from '../../shared/app/scene-manifest.js';
import { fanOutStacSceneEvent, itemPinId } from '../../shared/app/stac-scene.js';
import { makeTileJob, parseTileJob, type TileJob, type TileMode, tileOutputKey, toJobMessage } from '../../shared/app/tile-job.js';
import type { BackfillPolicy } from '../../shared/domain/backfill-policy.js';
import { TesseraError } from '../../shared/domain/errors.js';
import { type ProcessingParams, type SourceRef, tileJobKey } from '../../shared/domain/job-key.js';
import { itemPinKeys } from '../../shared/domain/key-layout.js';
import { type TileGrid, windows } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { FeatureBatchSink } from '../../shared/ports/feature-batch-sink.port.js';
import type { Delivery, JobMessage, JobQueue } from '../../shared/ports/job-queue.port.js';
import type { ObjectStore, PutIfAbsentResult, PutIfMatchResult, PutOptions } from '../../shared/ports/object-store.port.js';
import { unconditionalWrites } from '../contract/precondition-guard.js';
import {
  type BackendName,
  createParityBackend,
  PARITY_MAX_RECEIVE_COUNT,
  PARITY_SOURCE_BUCKET,
  PARITY_SOURCE_PREFIX,
  type ParityBackend,
} from '../parity/backends.js';
import { type DeliverResult, deferred, LEASE_MS, PARITY_PARAMS, ScenarioContext } from '../parity/harness.js';
import type { FaultShot } from '../support/claim-faults.js';
import type { EmulatorEndpoints } from '../support/emulators/types.js';
import { asRole } from '../support/function-role.js';
import type { IamRun } from '../support/iam/run.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { applicableKinds, FAULT_KINDS, FAULT_SCOPE, type FaultKind, FaultSchedule, FORCE_DELIVERIES_FROM } from './fault-schedule.js';
import { compareWithGdal, type GdalSample } from './gdal-check.js';
import type { WorkerOrder } from './local-worker.js';
import type { ReferenceAnswer, ReferenceRequest } from './reference-render.js';
import { type FeatureBatchReport, SoakFeatureBatches } from './soak-feature-batches.js';
import { type FeatureSceneFact, SoakFeatures } from './soak-features.js';
import { SoakIngest } from './soak-ingest.js';

export { FAULT_KINDS, type FaultKind };

const here = dirname(fileURLToPath(import.meta.url));

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
   * A deliberately broken render shared by the workers and the reference render (the GDAL check's own test:
   * the byte oracle cannot see it, the GDAL comparison must): single-file scenes are rendered with their two
   * bands read from each other's index. Never set by `npm run soak`.
   */
  readonly sharedRenderBug?: 'swapped-bands' | undefined;
  /** A deliberately broken PostGIS batch sink (the record-level oracle's own test). Never set by `npm run soak`. */
  readonly batchSinkMutant?: ((sink: FeatureBatchSink) => FeatureBatchSink) | undefined;
  /**
   * The kinds of event the plan makes (default all): a run narrowed to one path, to reproduce a finding on it.
   * A scheduled fault kind whose event is left out never fires, and the run says so.
   */
  readonly events?: readonly SoakEvent[] | undefined;
  /**
   * The enforced-IAM check (docs/iam.md): every request a cloud backend's functions make is checked against
   * that cloud's grants as the Pulumi program deploys them; each access outside them is an anomaly. The local
   * backend has no IAM and is not checked.
   */
  readonly iam?: IamRun | undefined;
}

/**
 * The kinds of event the plan makes: a single-file scene, a chunked one, a STAC Item, an ingest, a remote STAC Item,
 * a batch event of a feature stream (a few consecutive batch objects).
 */
export const SOAK_EVENTS = ['single', 'chunked', 'stac', 'ingest', 'remote', 'batch'] as const;
export type SoakEvent = (typeof SOAK_EVENTS)[number];

/** The paths a soak runs, each with an oracle of its own beside the tile oracle (docs/soak.md). */
export const SOAK_PATHS = ['single-file', 'chunked', 'stac', 'postgis', 'ingest', 'remote-stac', 'feature-batches'] as const;
export type SoakPath = (typeof SOAK_PATHS)[number];

/** One path's share of a run: what ran, what its own oracle checked, and the anomalies it found. */
export interface SoakPathReport {
  /**
   * Scenes (single-file, chunked), item events (stac), ingest deliveries (ingest, remote-stac), scenes judged (postgis),
   * batch events (feature-batches, whose `checked` counts batch objects judged record by record).
   */
  readonly runs: number;
  readonly checked: number;
  readonly anomalies: number;
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
  /** Reference tiles compared with GDAL's own render of their window, and those outside the GDAL tests' thresholds. */
  readonly gdalCompared: number;
  readonly gdalMismatches: number;
  /** Each path's own oracle (the tile oracle's counts above cover the tiles of every path). */
  readonly paths: Readonly<Record<SoakPath, SoakPathReport>>;
  /** The feature batches and their record-level oracle (test/soak/soak-feature-batches.ts): each anomaly kind counted. */
  readonly featureBatches: FeatureBatchReport;
  /** Fault kinds scheduled for this run that never took effect: each one an anomaly. */
  readonly unfiredFaultKinds: readonly string[];
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
  /** The GDAL comparison of each sampled reference tile, one line each. */
  readonly gdal?: readonly string[] | undefined;
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
    r.gdalMismatches +
    Object.values(r.paths).reduce((n, p) => n + p.anomalies, 0) +
    r.unfiredFaultKinds.length +
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

/** A queue that counts what a worker sends (a chunk's tile jobs), so the run knows how many messages are out. */
function countingQueue(inner: JobQueue, onSent: (n: number) => void, after?: () => Promise<void>): JobQueue {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'sendBatch')
        return async (messages: readonly JobMessage[]): Promise<void> => {
          await target.sendBatch(messages);
          onSent(messages.length);
          await after?.();
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** How a scene version was made: the path its tiles came by. */
type SceneKind = 'single' | 'chunked' | 'stac' | 'ingested';

/** A scene version the soak made: the exact bytes of its objects (for the reference render) and what became of it. */
interface SceneVersion {
  readonly label: string;
  readonly kind: SceneKind;
  readonly sceneKey: string;
  /** As its manifest records it (a STAC scene's assets with the band versions its item version was resolved to). */
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  readonly grid: TileGrid;
  /** Every object the scene reads, as staged: its anchor and, for a STAC scene, each band file. */
  readonly objects: readonly { readonly key: string; readonly bytes: Uint8Array }[];
  /** Where each band of the expression really is in those objects (the data's own layout, not the parameters'): GDAL's input. */
  readonly layout: Readonly<Record<string, { readonly key: string; readonly index: number }>>;
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

const POISON_KINDS = ['not-json', 'wrong-shape', 'other-build', 'tampered-key', 'bad-expression', 'bad-chunk'] as const;

/** A chunked scene's tiling: grids of 12-24 windows, fanned out in chunk messages of 3-5 windows. */
const CHUNKED_PARAMS: ProcessingParams = { ...PARITY_PARAMS, version: 'soak-chunked-1' };
/** A STAC scene's tiling: on the band files' own grid, or reprojected onto Web Mercator. */
const STAC_PARAMS: ProcessingParams = { ...PARITY_PARAMS, version: 'soak-stac-1' };
const STAC_SELECTION = { B04: 'red', B08: 'nir' } as const;
/** The synthetic scenes' own band layout (test/support/local-scene.ts): B04 first, B08 second. */
const SYNTHETIC_LAYOUT = { B04: 1, B08: 2 } as const;
/**
 * Scene versions whose tiles the oracle compares with GDAL's render: one tile of each kind of scene the run
 * made (single-file, chunked, ingested, STAC on its bands' grid, STAC reprojected), a few per run.
 */
const GDAL_SAMPLE = 5;

/**
 * Run the soak on one backend and judge it. Never throws for an anomaly (it
 * is counted and described); throws only if the run itself broke.
 */
export async function runSoak(name: BackendName, endpoints: EmulatorEndpoints, options: SoakOptions): Promise<SoakOutcome> {
  const t0 = Date.now();
  const say = options.say ?? (() => {});
  const enabled = new Set<FaultKind>(options.faults);
  const on = (k: FaultKind) => enabled.has(k);
  const plan = prng(options.seed, `plan:${name}`);
  const draw = prng(options.seed, `deliveries:${name}`);
  const schedule = new FaultSchedule(applicableKinds(name, options.faults), prng(options.seed, `schedule:${name}`));
  const faults: Record<string, number> = {};
  const count = (k: FaultKind | 'worker-sigkilled', n = 1) => {
    faults[k] = (faults[k] ?? 0) + n;
    if (k !== 'worker-sigkilled') schedule.fired(k, n);
  };
  const transport = transportOf(name);
  const skewAllowed = name !== 'local';
  if (endpoints.postgres === undefined)
    throw new Error(
      'the soak runs every tile through the PostGIS feature sink: start the postgres emulator (TESSERA_EMULATORS including postgres)',
    );

  // Started before the backend is made: the grants (the program under mocks) are read first, alone.
  const iamCheck = options.iam !== undefined && name !== 'local' ? await options.iam.start(name) : undefined;
  const pb: ParityBackend = await createParityBackend(name, endpoints, 'soak', { outputFaults: true });
  const ctx = new ScenarioContext(pb);
  const features = await SoakFeatures.start(ctx.features, endpoints.postgres, ctx.backend.telemetry);
  const writes: WriteRecord[] = [];
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
  /** Windows (`scene\nindex`, row-major) of chunks that found their scene superseded: never enqueued, by design. */
  const chunkSuperseded = new Set<string>();
  const poisonVerdicts: { body: string; error: string }[] = [];
  const anomalies: string[] = [];
  /** The bytes of every version the soak staged, by `key\nversion`: what each scene version's reference reads. */
  const staged = new Map<string, Uint8Array>();
  /** Each chunked scene's plan: windows per chunk, and the chunk messages its scene events sent in all. */
  const chunked = new Map<string, { label: string; chunkWindows: number; windows: number; sent: number }>();
  /** Each STAC Item version's events: the scene its first fan-out made and what every later event answered. */
  const items = new Map<string, { label: string; item: SourceRef; bandKeys: string[]; sceneKey?: string; events: string[] }>();
  const pathAnomalies: Record<SoakPath, number> = {
    'single-file': 0,
    chunked: 0,
    stac: 0,
    postgis: 0,
    ingest: 0,
    'remote-stac': 0,
    'feature-batches': 0,
  };
  const pathRuns: Record<SoakPath, number> = { ...pathAnomalies };
  const flag = (path: SoakPath, line: string) => {
    pathAnomalies[path]++;
    anomalies.push(line);
  };
  let deliveries = 0;
  /** Messages put on the queue (fan-out, chunks, duplicates, poison) and messages settled for good (acked, dead-lettered). */
  let sent = 0;
  let finished = 0;
  let duplicatesDelivered = 0;
  let sceneSeq = 0;
  let eventSeq = 0;
  let workerSeq = 0;
  const tmp = mkdtempSync(join(tmpdir(), 'tessera-soak-'));
  // The local backend's crashes are real worker processes killed with SIGKILL (their log lines join ours).
  const childLanded = new Map<string, number>();
  const processes = pb.dataDir
    ? new WorkerProcesses(
        pb.dataDir,
        features.directUrl,
        (line) => (pb.logs as string[]).push(line),
        (key) => childLanded.set(key, (childLanded.get(key) ?? 0) + 1),
      )
    : undefined;
  const ingest = await SoakIngest.start(
    ctx,
    {
      published: (label, key, version, bytes) => ingestedScene(label, key, version, bytes),
      fired: (kind) => count(kind),
      anomaly: (path, line) => flag(path, line),
    },
    await syntheticSceneBytes({ width: 64, height: 48, seed: options.seed * 1000 + 999_999 }),
  );
  const batches = await SoakFeatureBatches.start({
    name,
    ctx,
    postgres: endpoints.postgres,
    transport,
    skewMarginMs: skewAllowed ? SKEW_MARGIN_MS : 0,
    schedule,
    random: (stream) => prng(options.seed, stream),
    enabled: on,
    say,
    hooks: {
      fired: (kind, n) => count(kind, n),
      sent: (n) => {
        sent += n;
      },
      finished: () => {
        finished++;
      },
      deliveries: () => deliveries,
    },
    mutant: options.batchSinkMutant,
  });

  const ports =
    (clock: WorkerClock, queueAfter?: () => Promise<void>) =>
    (backend: Backend): Backend => {
      const worker: Backend = {
        ...backend,
        clock,
        // Every cloud compose wires the skew margin; the local one does not (one clock).
        claims: skewAllowed ? withClockSkewMargin(backend.claims, SKEW_MARGIN_MS) : backend.claims,
        outputs: recordingOutputs(backend.outputs, writes),
        queue: countingQueue(
          backend.queue,
          (n) => {
            sent += n;
          },
          queueAfter,
        ),
        sink: features.sink,
      };
      return options.mutant ? options.mutant(worker) : worker;
    };

  /** A synthetic scene's parameters, with the shared render bug of the GDAL check's own test where it is asked for. */
  function withBug(params: ProcessingParams): ProcessingParams {
    return options.sharedRenderBug === 'swapped-bands'
      ? { ...params, bands: { B04: SYNTHETIC_LAYOUT.B08, B08: SYNTHETIC_LAYOUT.B04 } }
      : params;
  }

  /** Stage bytes under `key` (an upload): the version the store gave them is remembered with them. */
  async function stage(key: string, bytes: Uint8Array): Promise<SourceRef> {
    const ref = await ctx.stage(key, bytes);
    staged.set(`${key}\n${ref.versionToken}`, bytes);
    return ref;
  }

  /** Upload new bytes over `key`: the older version expired as a lifecycle rule does (`expire`), or kept where the store keeps versions. */
  async function reupload(key: string, bytes: Uint8Array, expire: boolean): Promise<SourceRef> {
    let ref: SourceRef;
    if (expire) ref = await ctx.overwriteSource(key, bytes);
    else {
      const head = await ctx.sources.head(key);
      if (!head) throw new Error(`cannot re-upload ${key}: it was never staged`);
      const put = await ctx.sources.putIfMatch(key, bytes, head.version);
      if (put.kind !== 'written') throw new Error(`could not re-upload ${key}: ${put.kind}`);
      ref = { bucket: PARITY_SOURCE_BUCKET, key, versionToken: put.version };
    }
    staged.set(`${key}\n${ref.versionToken}`, bytes);
    return ref;
  }

  const bytesOf = (key: string, version: string): Uint8Array => {
    const b = staged.get(`${key}\n${version}`);
    if (b === undefined) throw new Error(`the soak never staged ${key} at ${version}`);
    return b;
  };

  /** The scene version a fan-out made, from its manifest (the objects at the versions it pinned). */
  async function addScene(label: string, kind: SceneKind, sceneKey: string, layout: SceneVersion['layout']): Promise<SceneVersion> {
    const m = await readSceneManifest(ctx.backend.outputs, sceneKey);
    const keys = [[m.source.key, m.source.versionToken], ...Object.values(m.source.assets ?? {}).map((a) => [a.key, a.versionToken])] as [
      string,
      string,
    ][];
    const objects = [...new Map(keys.map(([k, v]) => [k, { key: k, bytes: bytesOf(k, v) }])).values()];
    const s: SceneVersion = { label, kind, sceneKey, source: m.source, params: m.params, grid: m.grid, objects, layout };
    ctx.registerScene(label, m.source, m.params, m.grid);
    scenes.push(s);
    return s;
  }

  /**
   * The next event of the plan: a single-file scene, a chunked one, a STAC Item, an ingest or a remote Item.
   * The schedule forces the rare fault kinds onto the first events, a few of one scope per event, made of the kind of event they need.
   */
  async function newEvent(): Promise<void> {
    const forced = schedule.forcedEvent(eventSeq++);
    const r = ++sceneSeq;
    const scope = forced[0] === undefined ? undefined : FAULT_SCOPE[forced[0]];
    const allowed = options.events ?? SOAK_EVENTS;
    // The kinds of event that can carry the forced kinds, weighted; or any kind, as drawn. While a batch delivery kind
    // has not fired, a batch event whenever no batch message is out, so that its deliveries can carry it.
    const weights: [SoakEvent, number][] =
      scope === undefined && allowed.includes('batch') && batches.wantsEvent()
        ? [['batch', 1]]
        : scope === 'scene'
          ? [
              ['single', 0.7],
              ['chunked', 0.3],
            ]
          : scope === 'chunked' || scope === 'stac' || scope === 'ingest' || scope === 'remote' || scope === 'batch'
            ? [[scope, 1]]
            : [
                ['single', 0.32],
                ['chunked', 0.14],
                ['stac', 0.23],
                ['ingest', 0.12],
                ['remote', 0.11],
                ['batch', 0.08],
              ];
    const roll = plan();
    const usable = weights.filter(([k]) => allowed.includes(k));
    const choices = usable.length > 0 ? usable : SOAK_EVENTS.filter((k) => allowed.includes(k)).map((k): [SoakEvent, number] => [k, 1]);
    const total = choices.reduce((n, [, w]) => n + w, 0);
    let acc = 0;
    const kind = (choices.find(([, w]) => {
      acc += w / total;
      return roll < acc;
    }) ?? (choices.at(-1) as [SoakEvent, number]))[0];
    const want = (k: FaultKind, p: number): boolean => on(k) && (forced.includes(k) || plan() < p);
    switch (kind) {
      case 'single':
      case 'chunked':
        return tileScene(kind, r, want);
      case 'stac':
        return stacScene(r, want);
      case 'ingest': {
        pathRuns.ingest++;
        const wanted = (['duplicate-ingest', 'ingest-crash', 'ingest-race', 'reconcile-race'] as const).filter((k) =>
          want(k, k === 'reconcile-race' ? 0.1 : 0.25),
        );
        const bytes = await syntheticSceneBytes({ width: 64, height: 48, seed: options.seed * 1000 + r });
        return ingest.artefact(`I${r}`, bytes, new Set(wanted));
      }
      case 'remote': {
        pathRuns['remote-stac']++;
        const wanted = (['remote-transient', 'remote-hostile-item'] as const).filter((k) => want(k, 0.25));
        const assets = {
          B04: await syntheticSceneBytes({ width: 64, height: 48, seed: options.seed * 1000 + r }),
          B08: await syntheticSceneBytes({ width: 64, height: 48, seed: options.seed * 1000 + r + 250_000 }),
        };
        return ingest.remoteItem(`R${r}`, assets, new Set(wanted));
      }
      case 'batch':
        pathRuns['feature-batches']++;
        return batches.event(`B${r}`, want);
      default: {
        const never: never = kind;
        throw new Error(`unknown event ${String(never)}`);
      }
    }
  }

  /** A single-file scene, fanned out directly, or in chunk messages through the tile queue. */
  async function tileScene(kind: 'single' | 'chunked', r: number, want: (k: FaultKind, p: number) => boolean): Promise<void> {
    pathRuns[kind === 'single' ? 'single-file' : 'chunked']++;
    const label = `${kind === 'single' ? 'S' : 'C'}${r}`;
    const [width, height] =
      kind === 'single'
        ? pick(plan, [
            [64, 48],
            [96, 64],
            [128, 64],
          ] as const)
        : pick(plan, [
            [128, 96],
            [160, 96],
            [192, 128],
          ] as const);
    const bytes = await syntheticSceneBytes({ width, height, seed: options.seed * 1000 + r });
    const key = `incoming/soak-${r}.tif`;
    const source = await stage(key, bytes);
    const params = withBug(kind === 'chunked' ? CHUNKED_PARAMS : PARITY_PARAMS);
    const chunkWindows = kind === 'chunked' ? int(plan, 3, 5) : undefined;
    const layout = syntheticLayout(key);
    const fan = await sceneEvent(() => ctx.fanOut(label, { source, params, chunkWindows }));
    const scene = await addScene(label, kind, fan.sceneKey, layout);
    if (chunkWindows !== undefined) {
      chunked.set(fan.sceneKey, { label, chunkWindows, windows: fan.grid.count, sent: fan.chunks });
      if (want('duplicate-chunk', 0.3)) {
        // A chunk message delivered again, late: its marker makes it enqueue nothing (or its windows once more, claimed).
        const n = Math.ceil(fan.grid.count / chunkWindows);
        const i = int(plan, 0, n - 1);
        const first = i * chunkWindows;
        const chunk = {
          v: 1 as const,
          kind: 'fan-out-chunk' as const,
          sceneKey: fan.sceneKey,
          first,
          count: Math.min(chunkWindows, fan.grid.count - first),
        };
        delayed.push({ at: deliveries + int(plan, 0, 30), bodies: [toChunkMessage(chunk).body] });
        count('duplicate-chunk');
      }
    }
    if (want('duplicate-scene-event', 0.15)) {
      // A duplicate notification of the same upload: the manifest is create-only, every tile job (or chunk) is sent again.
      const again = await sceneEvent(() => ctx.fanOut(label, { source, params, chunkWindows }));
      const c = chunked.get(fan.sceneKey);
      if (c) c.sent += again.chunks;
      count('duplicate-scene-event');
    }
    await decorate(scene, want);
    if (want('source-overwritten', 0.12)) {
      planned.push({
        at: deliveries + int(plan, 1, 12),
        what: `overwrite ${label}`,
        run: async () => {
          const newBytes = await syntheticSceneBytes({ width, height, seed: options.seed * 1000 + r + 500_000 });
          const next = await reupload(key, newBytes, true);
          const fan2 = await sceneEvent(() => ctx.fanOut(`${label}v2`, { source: next, params, chunkWindows }));
          await addScene(`${label}v2`, kind, fan2.sceneKey, layout);
          if (chunkWindows !== undefined)
            chunked.set(fan2.sceneKey, { label: `${label}v2`, chunkWindows, windows: fan2.grid.count, sent: fan2.chunks });
          count('source-overwritten');
        },
      });
    }
  }

  /** An object an ingest published under the source prefix: its object-created event makes a scene, as on a stack. */
  async function ingestedScene(label: string, key: string, version: string, bytes: Uint8Array): Promise<void> {
    staged.set(`${key}\n${version}`, bytes);
    const source: SourceRef = { bucket: PARITY_SOURCE_BUCKET, key, versionToken: version };
    const fan = await sceneEvent(() => ctx.fanOut(label, { source, params: withBug(PARITY_PARAMS) }));
    const scene = await addScene(label, 'ingested', fan.sceneKey, syntheticLayout(key));
    await decorate(scene, (k, p) => on(k) && plan() < p);
  }

  /**
   * A multi-band scene from a STAC Item: two one-band files and the Item naming them, whose event runs the
   * scene trigger's rule (fanOutStacSceneEvent, as the `scene` role). Then, as drawn: the Item's event again
   * (a duplicate), a band uploaded again between the deliveries (its old version kept, or expired as a
   * lifecycle rule does) followed by another duplicate of the Item's event, and the publisher's new Item
   * version, whose event makes the new scene.
   */
  async function stacScene(r: number, want: (k: FaultKind, p: number) => boolean): Promise<void> {
    const label = `T${r}`;
    const dir = `incoming/stac-${r}`;
    const [width, height] = pick(plan, [
      [64, 48],
      [96, 64],
    ] as const);
    const seed = options.seed * 1000 + r;
    // On the band files' own grid (nearest: the finest band's), or reprojected onto Web Mercator.
    const target = plan() < 0.4 ? { dst_crs: 'EPSG:3857', resampling: pick(plan, ['bilinear', 'nearest', 'cubic'] as const) } : {};
    const params: ProcessingParams = { ...STAC_PARAMS, ...target };
    const bandKey = { B04: `${dir}/B04.tif`, B08: `${dir}/B08.tif` } as const;
    await stage(bandKey.B04, await syntheticSceneBytes({ width, height, seed, bands: ['B04'] }));
    await stage(bandKey.B08, await syntheticSceneBytes({ width, height, seed, bands: ['B08'] }));
    const layout = { B04: { key: bandKey.B04, index: 1 }, B08: { key: bandKey.B08, index: 1 } };
    const itemKey = `${dir}/item.json`;
    const item = await stage(itemKey, stacItemBytes(label, 1));
    await itemEvent(label, item, params, layout);
    if (want('duplicate-item-event', 0.4)) {
      planned.push({
        at: deliveries + int(plan, 2, 30),
        what: `duplicate item event ${label}`,
        run: async () => {
          await itemEvent(label, item, params, layout);
          count('duplicate-item-event');
        },
      });
    }
    // The two re-upload kinds exclude each other on one Item: a kind the schedule forced onto this event wins over a
    // random draw of the other, or a forced kind could be crowded out and never fire (seed 948786485 on gcp).
    const keptForced = want('band-reupload', 0);
    const expire = !keptForced && want('band-reupload-expired', 0.15);
    if (expire || keptForced || want('band-reupload', 0.2)) {
      const band = pick(plan, ['B04', 'B08'] as const);
      const at = deliveries + int(plan, 1, 15);
      const newItem = expire || plan() < 0.5;
      planned.push({
        at,
        what: `re-upload ${label} ${band}${expire ? ' (old version expired)' : ''}`,
        run: async () => {
          // A band's upload sends no item event on a STAC stack; the old version is kept by a versioned store, or expired.
          await reupload(bandKey[band], await syntheticSceneBytes({ width, height, seed: seed + 700_000, bands: [band] }), expire);
          count(expire ? 'band-reupload-expired' : 'band-reupload');
          // The item's event delivered again after the re-upload: the band pins recorded for its version decide.
          await itemEvent(label, item, params, layout);
          if (newItem) {
            // The publisher's corrected Item: a new item version, whose own event makes the new scene.
            const next = await reupload(itemKey, stacItemBytes(label, 2), false);
            await itemEvent(`${label}i2`, next, params, layout);
          }
        },
      });
    }
  }

  /** One delivery of a STAC Item's event to the scene trigger's rule, retried as its trigger retries a transient failure. */
  async function itemEvent(label: string, item: SourceRef, params: ProcessingParams, layout: SceneVersion['layout']): Promise<void> {
    pathRuns.stac++;
    const id = `${item.key}\n${item.versionToken}`;
    const rec = items.get(id) ?? { label, item, bandKeys: Object.values(layout).map((l) => l.key), events: [] };
    items.set(id, rec);
    const config = {
      selection: STAC_SELECTION,
      params,
      platform: 'local',
      functionTimeoutSec: 900,
      sourcePrefix: PARITY_SOURCE_PREFIX,
    } as const;
    for (let attempt = 1; ; attempt++) {
      ctx.clock.advance(1);
      try {
        const fan = await asRole('scene', () =>
          fanOutStacSceneEvent(ctx.backend, item, config, { attempt, maxDeliveries: PARITY_MAX_RECEIVE_COUNT }),
        );
        if (fan.kind !== 'fanned-out') {
          rec.events.push(fan.kind);
          if (rec.sceneKey === undefined) flag('stac', `${label}: the first event of its item version answered ${fan.kind}`);
          return;
        }
        sent += fan.result.enqueued + fan.result.chunks;
        rec.events.push(`fanned-out:${fan.result.manifest}`);
        if (rec.sceneKey === undefined) {
          rec.sceneKey = fan.result.sceneKey;
          const scene = await addScene(label, 'stac', fan.result.sceneKey, layout);
          await decorate(scene, (k, p) => on(k) && plan() < p);
        } else if (fan.result.sceneKey !== rec.sceneKey || fan.result.manifest === 'written') {
          flag(
            'stac',
            `${label}: a later event of the same item version made ${fan.result.sceneKey === rec.sceneKey ? 'its scene again' : 'another scene'} (manifest ${fan.result.manifest})`,
          );
        }
        return;
      } catch (error) {
        if (!(error instanceof TesseraError && error.retryable) || attempt >= PARITY_MAX_RECEIVE_COUNT) throw error;
      }
    }
  }

  /** What happens around any scene once it is fanned out: duplicates of its jobs, poison beside them, backfills racing them. */
  async function decorate(scene: SceneVersion, want: (k: FaultKind, p: number) => boolean): Promise<void> {
    // The very messages fan-out sent (their read pins included), so a copy is a true duplicate.
    const manifest = await readSceneManifest(ctx.backend.outputs, scene.sceneKey);
    const jobs = [...windows(manifest.grid)].map((w) =>
      makeTileJob(scene.sceneKey, manifest.source, manifest.params, manifest.grid, w, { kind: 'create' }, manifestPins(manifest)),
    );
    if (on('duplicate')) {
      const forced = want('duplicate', 0);
      jobs.forEach((job, i) => {
        // 0-5 extra copies, weighted to the few, each after its own delay (in deliveries): out of order.
        const copies = Math.max(forced && i === 0 ? 1 : 0, pick(plan, [0, 0, 0, 1, 1, 1, 2, 2, 3, 4, 5]));
        for (let c = 0; c < copies; c++) {
          delayed.push({ at: deliveries + int(plan, 0, 40), bodies: [toJobMessage(job).body] });
          count('duplicate');
        }
      });
    }
    if (want('poison', 0.3)) {
      const body = poisonBody(pick(plan, POISON_KINDS), jobs[0] as TileJob);
      delayed.push({ at: deliveries + int(plan, 0, 20), bodies: [body] });
      count('poison');
    }
    const policies = (['skip', 'new-key', 'overwrite'] as const).filter((p) => on(`backfill-${p}`));
    const forcedPolicy = policies.find((p) => want(`backfill-${p}`, 0));
    if (policies.length > 0 && (forcedPolicy !== undefined || plan() < 0.3)) {
      const policy = forcedPolicy ?? pick(plan, policies);
      planned.push({
        at: deliveries + int(plan, 2, 30),
        what: `backfill ${policy} ${scene.label}`,
        run: () => backfill(policy, scene.label, scene.sceneKey),
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
          const head = await ctx.backend.outputs.head(tileOutputKey(scene, manifest.grid, w));
          if (head) expected.set(`${w.row}_${w.col}`, head.version);
        }
        if (expected.size === 0) {
          // A superseded scene with no tile has nothing to repair, ever: the operator repairs the newest live scene instead.
          if (await isSceneSuperseded(ctx.backend.outputs, scene)) {
            for (const other of [...scenes].reverse()) {
              if (other.sceneKey === scene || (await isSceneSuperseded(ctx.backend.outputs, other.sceneKey))) continue;
              return backfill(policy, other.label, other.sceneKey, tries + 1);
            }
          }
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
    count(`backfill-${policy}`);
  }

  /**
   * A scene event's handler, retried as its trigger retries a failed event (S3/GCS/Event Grid
   * notifications are at-least-once): a transient store error fails the attempt, never the scene.
   * Each runs a millisecond after the last on the FakeClock, so no two scenes share a fan-out time
   * (the feature sink ranks a source object's scenes by it).
   */
  async function sceneEvent(run: () => Promise<FanOutResult>): Promise<FanOutResult> {
    for (let attempt = 1; ; attempt++) {
      ctx.clock.advance(1);
      try {
        const fan = await run();
        sent += fan.enqueued + fan.chunks;
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
      case 'bad-chunk':
        // A fan-out chunk message with no valid range: the chunk path's own poison.
        body = JSON.stringify({ v: 1, kind: FAN_OUT_CHUNK, sceneKey: job.sceneKey, first: n, count: 0 });
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
    if (batches.owns(d.body)) {
      // A batch event on the backend's queue (as parity 85-89 carry it): the stream function's delivery.
      deliveries++;
      return batches.deliver(d);
    }
    const armed: { kind: FaultKind; shot: FaultShot | { readonly hits: number }; disarm: () => void }[] = [];
    try {
      await deliverOnce(d, armed);
    } finally {
      // A fault fired if it hit; one armed for this delivery that it never reached (a duplicate stopped at its
      // claim writes nothing) is disarmed: it must not hit a later delivery, past that one's budget.
      for (const a of armed) {
        if (a.shot.hits > 0) count(a.kind);
        else a.disarm();
      }
    }
  }

  async function deliverOnce(
    d: Delivery,
    armed: { kind: FaultKind; shot: { readonly hits: number }; disarm: () => void }[],
  ): Promise<void> {
    const due = dueAt.get(d.deliveryId);
    // The transport's gap runs on the FakeClock: the message is not seen before it.
    if (due !== undefined && due > ctx.clock.now()) ctx.clock.advance(due - ctx.clock.now());
    deliveries++;
    let job: TileJob | undefined;
    try {
      job = parseTileJob(d.body);
    } catch {
      job = undefined;
    }
    const jobId = job === undefined ? undefined : claimIdOf(job);
    const isChunk = job === undefined && isFanOutChunkBody(d.body);
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
    const mayCrash = (jobId !== undefined || isChunk) && crashes === 0 && d.receiveCount <= 1;
    // A transient error fails a delivery where no SDK retries below the adapter (SQLite, the filesystem):
    // drawn only on a message's first two deliveries, so faults never use up its transport's budget.
    const mayFail = d.receiveCount <= 2;
    const eligible = (k: FaultKind): boolean => {
      if (isChunk)
        return (
          ((k === 'crash-before-claim' || k === 'crash-mid-chunk' || k === 'crash-after-commit') && mayCrash) ||
          k === 'lost-write-answer' ||
          (k === 'throttled-write' && mayFail)
        );
      if (jobId === undefined || k === 'crash-mid-chunk' || k === 'clock-skew') return false;
      if (k.startsWith('crash') || k === 'zombie') return mayCrash;
      if (k.startsWith('throttled') || k === 'feature-connection-lost') return mayFail;
      return FAULT_SCOPE[k] === 'delivery';
    };
    let fault = isChunk ? chooseChunkFault(roll) : jobId !== undefined ? chooseFault(roll) : undefined;
    if (fault !== undefined && !(on(fault) && eligible(fault))) fault = undefined;
    // The schedule: a delivery the draw left without a fault takes the first kind that has not fired yet and that it can carry.
    if (fault === undefined && deliveries >= FORCE_DELIVERIES_FROM)
      fault = schedule.pendingDeliveryKinds().find((k) => k !== 'clock-skew' && eligible(k));
    const skewDrawn = skewAllowed && on('clock-skew') && jobId !== undefined && draw() < 0.15;
    const skewForced = !skewDrawn && skewAllowed && jobId !== undefined && schedule.pendingDeliveryKinds().includes('clock-skew');
    const offsetMs = skewDrawn || skewForced ? Math.round((draw() * 2 - 1) * SKEW_WITHIN * SKEW_MARGIN_MS) || 1 : 0;
    if (offsetMs !== 0) count('clock-skew');
    const clock = new WorkerClock(ctx.clock, offsetMs);
    const release = async (gapMs: number) => {
      dueAt.set(d.deliveryId, ctx.clock.now() + gapMs);
      await ctx.queue.release(d, 0);
    };
    trace(
      d,
      `delivery ${deliveries} receive ${d.receiveCount} worker ${worker} fault ${fault ?? '-'} skew ${offsetMs} at ${ctx.clock.now()}`,
    );
    if (fault?.startsWith('crash')) crashesOf.set(d.deliveryId, crashes + 1);
    const arm = (kind: FaultKind, shot: FaultShot) => armed.push({ kind, shot, disarm: () => shot.remove?.() });
    switch (fault) {
      case 'crash-before-claim':
        // Died on receipt: nothing ran; the message comes back after the platform's visibility.
        count(fault);
        return release(transport.crashGapMs);
      case 'lost-claim-answer':
        arm(fault, pb.claimFaults.loseNextAnswer('claim'));
        break;
      case 'lost-commit-answer':
        arm(fault, pb.claimFaults.loseNextAnswer('commit'));
        break;
      case 'throttled-claim':
        arm(fault, pb.claimFaults.failNextTransiently('claim'));
        break;
      case 'throttled-commit':
        arm(fault, pb.claimFaults.failNextTransiently('commit'));
        break;
      case 'lost-write-answer':
        arm(fault, pb.outputFaults.loseNextWriteAnswer());
        break;
      case 'throttled-write':
        arm(fault, pb.outputFaults.failNextWriteTransiently());
        break;
      case 'lost-feature-answer':
      case 'feature-connection-lost': {
        const shot =
          fault === 'lost-feature-answer'
            ? features.loseNextCommitAnswer((job as TileJob).jobKey)
            : features.cutBeforeNextCommit((job as TileJob).jobKey);
        armed.push({ kind: fault, shot, disarm: () => features.disarm(shot) });
        break;
      }
      default:
        break;
    }
    if (fault === 'crash-mid-chunk') {
      // The chunk's worker dies once its tile jobs are on the queue, before its marker: the redelivery enqueues them again.
      const reached = deferred<'reached'>();
      const die = async () => {
        reached.resolve('reached');
        await new Promise<never>(() => {});
      };
      const done = ctx.deliver(d, worker, { schedule: transport.schedule, ports: ports(clock, die) });
      const first = await Promise.race([reached.promise, done]);
      if (first !== 'reached') {
        judgeVerdict(d, first);
        return settleVerdict(first, undefined);
      }
      count(fault);
      return release(transport.crashGapMs);
    }
    const deliverOptions = { schedule: transport.schedule, ports: ports(clock) };
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
      const done = ctx.deliver(d, worker, { ...deliverOptions, hooks });
      // It froze only if it got that far (a duplicate stops at its claim and never reaches the hook).
      const first = await Promise.race([reached.promise, done]);
      if (first !== 'reached') {
        judgeVerdict(d, first);
        return settleVerdict(first, undefined);
      }
      count(fault);
      zombies.push({ resumeAt: deliveries + int(draw, 1, 15), delivery: d, resume: () => gate.resolve(), done });
      zombieJobs.add(jobId);
      // Its function timed out: the platform hands the message out again, and time passes past the lease.
      ctx.clock.advance(LEASE_MS + SKEW_MARGIN_MS + 1);
      return release(0);
    }
    let hooks: WorkerHooks | undefined;
    if (fault === 'slow-tile') {
      // A healthy render that outlives its lease: its keeper renews it meanwhile, so nobody takes it over.
      hooks = {
        afterClaim: async () => {
          count('slow-tile');
          await clock.runFor(LEASE_MS * 2);
        },
      };
    }
    const crashAfter =
      fault === 'crash-after-claim'
        ? 'claim'
        : fault === 'crash-after-write'
          ? 'write'
          : fault === 'crash-after-feature'
            ? 'feature'
            : undefined;
    if (processes && jobId !== undefined && (crashAfter !== undefined || fault === 'crash-after-commit')) {
      const died = await processes.crash({
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
      if (died !== undefined) {
        count('worker-sigkilled');
        // What took effect is where it died: a job that stopped early (a duplicate at its claim) died before its ack.
        count(
          died === 'claim'
            ? 'crash-after-claim'
            : died === 'write'
              ? 'crash-after-write'
              : died === 'feature'
                ? 'crash-after-feature'
                : 'crash-after-commit',
        );
        return release(transport.crashGapMs);
      }
    }
    const r = await ctx.deliver(d, worker, { ...deliverOptions, hooks, fault: crashAfter ? { crashAfter } : undefined });
    if (r.kind === 'crashed' && fault !== undefined) count(fault);
    if (r.kind === 'ack' && fault === 'crash-after-commit') count(fault);
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

  function chooseFault(roll: number): FaultKind | undefined {
    // Cumulative probabilities: about half the deliveries of a tile job get a fault.
    const table: [FaultKind, number][] = [
      ['crash-before-claim', 0.03],
      ['crash-after-claim', 0.04],
      ['crash-after-write', 0.04],
      ['crash-after-feature', 0.02],
      ['crash-after-commit', 0.03],
      ['zombie', 0.03],
      ['slow-tile', 0.03],
      ['lost-claim-answer', 0.05],
      ['lost-commit-answer', 0.05],
      ['lost-write-answer', 0.05],
      ['lost-feature-answer', 0.02],
      ['throttled-claim', 0.04],
      ['throttled-commit', 0.04],
      ['throttled-write', 0.04],
      ['feature-connection-lost', 0.02],
    ];
    return fromTable(table, roll);
  }

  function chooseChunkFault(roll: number): FaultKind | undefined {
    const table: [FaultKind, number][] = [
      ['crash-before-claim', 0.05],
      ['crash-mid-chunk', 0.1],
      ['crash-after-commit', 0.05],
      ['lost-write-answer', 0.1],
      ['throttled-write', 0.08],
    ];
    return fromTable(table, roll);
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
    if (r.kind === 'ack' && r.outcome.kind === 'source-changed') sourceChanged.add(claimIdOf(parseTileJob(d.body)));
    if (r.kind === 'ack' && r.outcome.kind === 'chunk-superseded') {
      const { sceneKey, first, count } = r.outcome;
      for (let i = first; i < first + count; i++) chunkSuperseded.add(`${sceneKey}\n${i}`);
    }
  }

  async function fireDue(force: boolean): Promise<boolean> {
    let fired = false;
    const horizon = force ? Number.POSITIVE_INFINITY : deliveries;
    const nextAt = Math.min(
      ...delayed.map((x) => x.at),
      ...planned.map((x) => x.at),
      ...zombies.map((z) => z.resumeAt),
      batches.nextAt(),
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
    if (await batches.fireDue(limit)) fired = true;
    return fired;
  }

  let judged: Omit<SoakBackendReport, 'iamFindings'>;
  let gdal: string[];
  try {
    await run();
    // Past every lease and skew margin: a CLAIMED row now is wedged unless explained.
    ctx.clock.advance(LEASE_MS + 2 * SKEW_MARGIN_MS + 1);
    await processes?.close();
    ({ report: judged, gdal } = await judge());
  } catch (error) {
    // The run itself broke: let go of what it holds (worker processes, HTTP origins, pools), or the process cannot end.
    await Promise.allSettled([processes?.close(), ingest.close(), features.close(), batches.close(), pb.close()]);
    rmSync(tmp, { recursive: true, force: true });
    throw error;
  }
  await ingest.close();
  await features.close();
  await batches.close();
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
  return { report, anomalies, iam, gdal };

  /** The run: events keep coming until the deliveries are made, then everything drains. */
  async function run(): Promise<void> {
    let sceneDue = 0;
    let empty = 0;
    let lateBatchEvents = 0;
    // Past the size, a batch event (at most 20) while a batch delivery kind has not fired and no batch message is out:
    // a short run whose batch events came late, behind the tile jobs on the queue, still fires every kind.
    const lateBatch = (): boolean =>
      (options.events ?? SOAK_EVENTS).includes('batch') &&
      schedule.forcedEvent(eventSeq).length === 0 &&
      batches.wantsEvent() &&
      lateBatchEvents < 20;
    for (;;) {
      // A new event while the deliveries made, plus one per message still out, fall short of the size;
      // if the drain ends short of it after all (retries are extra deliveries, not extra messages), more come.
      // The events that carry the schedule's kinds come close together, so that a short run has room for all of them.
      const under = deliveries + (sent - finished) < options.deliveries;
      if (deliveries >= sceneDue && (under || lateBatch())) {
        if (!under) lateBatchEvents++;
        await newEvent();
        sceneDue = deliveries + (schedule.forcedEvent(eventSeq).length > 0 ? int(plan, 1, 4) : int(plan, 4, 16));
      }
      await fireDue(false);
      const batch = await ctx.queue.receive(10, RECEIVE_VISIBILITY_MS);
      if (batch.length === 0) {
        if (deliveries < options.deliveries || lateBatch()) {
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
  }

  /** The oracle, after the drain. */
  async function judge(): Promise<{ report: Omit<SoakBackendReport, 'iamFindings'>; gdal: string[] }> {
    const sample = gdalSample(scenes, prng(options.seed, `gdal:${name}`));
    const reference = referenceRender(scenes, tmp, sample);
    let tilesExpected = 0;
    let tilesCorrect = 0;
    let missingTiles = 0;
    let divergentTiles = 0;
    let duplicateWrites = 0;
    let wedgedJobs = 0;
    let falseAlarms = 0;
    const liveJobs = new Set<string>();
    const featureFacts: FeatureSceneFact[] = [];
    for (const s of scenes) {
      const superseded = await isSceneSuperseded(ctx.backend.outputs, s.sceneKey);
      const manifest = await readSceneManifest(ctx.backend.outputs, s.sceneKey);
      const ref = reference.answers.get(s.sceneKey);
      let present = 0;
      for (const w of windows(s.grid)) {
        const key = tileOutputKey(s.sceneKey, s.grid, w);
        const jobId = tileJobKey(s.sceneKey, w);
        const head = await ctx.backend.outputs.head(key);
        const id = `${s.label}/${w.row}_${w.col}`;
        if (!head) {
          // A superseded scene may lack the tile of a job that settled source-changed, or of a window whose chunk found
          // the scene superseded and enqueued nothing.
          if (superseded && (sourceChanged.has(jobId) || chunkSuperseded.has(`${s.sceneKey}\n${w.row * s.grid.cols + w.col}`))) continue;
          tilesExpected++;
          missingTiles++;
          anomalies.push(
            `${id}: tile missing${superseded ? ' (scene superseded, but its job never settled source-changed and its chunk was enqueued)' : ''}`,
          );
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
      const gt = sceneGeoref(manifest).geoTransform;
      featureFacts.push({
        label: s.label,
        sceneKey: s.sceneKey,
        source: { bucket: manifest.source.bucket, key: manifest.source.key },
        pipeline: manifest.params.pipeline,
        createdAt: Date.parse(manifest.createdAt ?? ''),
        windowCount: s.grid.count,
        tilesPresent: present,
        superseded,
        area: Math.abs(gt[1] * gt[5] - gt[2] * gt[4]) * s.grid.width * s.grid.height,
      });
      if (s.kind === 'chunked' && !superseded) await judgeChunks(s);
    }
    await judgeItems();
    // Every claim COMMITTED; a CLAIMED row once every lease passed is wedged, unless its job settled
    // source-changed (the claim is given back, the scene tombstoned).
    for await (const row of ctx.backend.claims.list()) {
      if (row.state === 'COMMITTED') continue;
      if (sourceChanged.has(row.jobId)) continue;
      // A batch's claim row is judged by the batch oracle (a poison object's is given back, never committed).
      if (batches.ownsClaim(row.jobId)) continue;
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
    // (no foreign write is injected), poison only for poison inputs, no reconcile alarm (nothing published
    // was deleted). (Not "a lease-taken-over line exists": a takeover whose answer was lost is recognised by
    // the SDK's resend as this caller's own claim, and the previous owner is no longer known to log.)
    for (const l of ctx.logs() as {
      level?: string;
      event?: string;
      batchKey?: string;
      key?: string;
      jobKey?: string;
      claimId?: string;
      owner?: string;
      holder?: string;
      message?: string;
      kind?: string;
    }[]) {
      if (l.level !== 'ERROR') continue;
      // The batch path's alarms are judged by its own oracle (a zombie's lease-stolen, a poison object's poison-batch).
      if (batches.ownsLog(l)) continue;
      const id = l.claimId ?? l.jobKey ?? '';
      if (l.event === 'lease-stolen' && zombieJobs.has(id) && l.holder !== undefined && l.holder !== l.owner) continue;
      // Poison on the tile queue is judged one by one below, from the verdicts; a refused remote Item is the ingest oracle's.
      if (l.event === 'poison-message') continue;
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
      if (poisonBodies.has(m.body) || batches.explainsDeadLetter(m.body)) explained++;
      // A readable batch object's event dead-lettered: counted here (unexplained), named by the batch oracle.
      else if (!batches.owns(m.body)) anomalies.push(`dead-lettered without a reason: ${ctx.jobLabel(safeJobKey(m.body))}`);
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
    // The feature rows, ingestion and remote Items, each by its own oracle.
    const postgis = await features.judge(featureFacts, anomalies);
    pathRuns.postgis = postgis.checked;
    pathAnomalies.postgis += postgis.anomalies;
    await ingest.judge();
    // The feature batches, record by record.
    const fb = await batches.judge(dead);
    anomalies.push(...fb.anomalies);
    pathAnomalies['feature-batches'] += fb.anomalies.length;
    // The render itself, against GDAL's.
    const gdal: string[] = [];
    let gdalMismatches = 0;
    for (const g of reference.samples) {
      const v = await compareWithGdal(g);
      gdal.push(`${name} ${v.label}: ${v.agrees ? 'agrees with GDAL' : 'DIFFERS from GDAL'}: ${v.line}`);
      if (!v.agrees) {
        gdalMismatches++;
        anomalies.push(`${v.label}: the reference render differs from GDAL's render of the same window: ${v.line}`);
      }
    }
    // The schedule: every kind it was given fired.
    const unfiredFaultKinds = schedule.unfired();
    for (const k of unfiredFaultKinds) anomalies.push(`fault kind ${k} was scheduled and never fired`);
    const checkedOf: Record<SoakPath, number> = {
      'single-file': scenes.filter((s) => s.kind === 'single').length,
      chunked: chunked.size,
      stac: items.size,
      postgis: postgis.checked,
      ingest: ingest.checked('ingest'),
      'remote-stac': ingest.checked('remote-stac'),
      'feature-batches': fb.report.objects + fb.report.poisonObjects,
    };
    return {
      report: {
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
        gdalCompared: reference.samples.length,
        gdalMismatches,
        paths: Object.fromEntries(
          SOAK_PATHS.map((p) => [p, { runs: pathRuns[p], checked: checkedOf[p], anomalies: pathAnomalies[p] }]),
        ) as Record<SoakPath, SoakPathReport>,
        featureBatches: fb.report,
        unfiredFaultKinds,
        seconds: Math.round((Date.now() - t0) / 100) / 10,
      },
      gdal,
    };
  }

  /**
   * A live chunked scene: its scene events sent each chunk message once in all (a duplicate scene event finds
   * the fanned-out marker and sends none), and every chunk left its marker (its windows enqueued, once done).
   */
  async function judgeChunks(s: SceneVersion): Promise<void> {
    const c = chunked.get(s.sceneKey);
    if (c === undefined) return;
    const n = Math.ceil(c.windows / c.chunkWindows);
    if (c.sent !== n) flag('chunked', `${s.label}: its scene events sent ${c.sent} chunk messages for ${n} chunks`);
    for (let first = 0; first < c.windows; first += c.chunkWindows) {
      const marker = sceneLifecycleKeys.chunkDone(s.sceneKey, first, Math.min(c.chunkWindows, c.windows - first));
      if ((await ctx.backend.outputs.head(marker)) === undefined) flag('chunked', `${s.label}: chunk ${first} has no marker`);
    }
    if ((await ctx.backend.outputs.head(sceneLifecycleKeys.fannedOut(s.sceneKey))) === undefined)
      flag('chunked', `${s.label}: no fanned-out marker`);
  }

  /**
   * STAC Items: one scene per item version, whatever was re-uploaded between its deliveries and however
   * often its event came (never a second manifest for one item version and tiling), and its band pins
   * recorded once, where every later delivery found them.
   */
  async function judgeItems(): Promise<void> {
    const manifests = new Map<string, string[]>();
    for await (const h of ctx.backend.outputs.list('scenes/')) {
      if (!h.key.endsWith('/scene.json')) continue;
      const m: SceneManifest = await readSceneManifest(ctx.backend.outputs, h.key.split('/')[1] as string);
      if (m.source.assets === undefined) continue;
      const id = `${m.source.key}\n${m.source.versionToken}\n${m.params.version}`;
      manifests.set(id, [...(manifests.get(id) ?? []), m.sceneKey]);
    }
    for (const [id, keys] of manifests)
      if (keys.length > 1)
        flag(
          'stac',
          `${id.split('\n')[0]}: ${keys.length} manifests for one item version (${keys.map((k) => ctx.sceneLabel(k)).join(', ')})`,
        );
    for (const rec of items.values()) {
      if (rec.sceneKey === undefined) continue;
      const pins = itemPinKeys.record(itemPinId(rec.item, [...rec.bandKeys].sort()));
      if ((await ctx.backend.outputs.head(pins)) === undefined) flag('stac', `${rec.label}: no band pins recorded for its item version`);
      const bad = rec.events.slice(1).filter((e) => e !== 'fanned-out:already-present' && e !== 'stale' && e !== 'source-changed');
      if (bad.length > 0) flag('stac', `${rec.label}: later events of its item version answered ${bad.join(', ')}`);
    }
  }
}

/** The synthetic scene's own layout in its one file: what GDAL reads. */
function syntheticLayout(key: string): SceneVersion['layout'] {
  return { B04: { key, index: SYNTHETIC_LAYOUT.B04 }, B08: { key, index: SYNTHETIC_LAYOUT.B08 } };
}

/** A STAC 1.0 Item naming the two band files beside it; `revision` makes a new item version of the same Item. */
function stacItemBytes(id: string, revision: number): Uint8Array {
  return new TextEncoder().encode(
    JSON.stringify({
      type: 'Feature',
      stac_version: '1.0.0',
      id: `soak-${id}`,
      collection: 'sentinel-2-l2a',
      geometry: null,
      properties: { datetime: '2024-06-01T10:56:29Z', 'tessera:revision': revision },
      links: [],
      assets: {
        red: { href: './B04.tif', type: 'image/tiff; application=geotiff', 'eo:bands': [{ name: 'B04', common_name: 'red' }] },
        nir: { href: './B08.tif', type: 'image/tiff; application=geotiff', 'eo:bands': [{ name: 'B08', common_name: 'nir' }] },
      },
    }),
  );
}

function fromTable(table: readonly [FaultKind, number][], roll: number): FaultKind | undefined {
  let acc = 0;
  for (const [kind, p] of table) {
    acc += p;
    if (roll < acc) return kind;
  }
  return undefined;
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
 * process, at the same point, and counted apart). Each opens its own SQLite connections, filesystem
 * store and feature sink on the backend's data folder and PostGIS schema.
 */
class WorkerProcesses {
  #spare: { child: ChildProcess; ready: boolean } | undefined;
  constructor(
    private readonly dir: string,
    private readonly sinkUrl: string,
    private readonly onLog: (line: string) => void,
    private readonly onLanded: (key: string) => void,
  ) {
    this.#warm();
  }

  #warm(): void {
    const child = spawn(process.execPath, ['--import', 'tsx', resolve(here, 'local-worker.ts'), this.dir, this.sinkUrl], {
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

  /**
   * Run `order` in the warm spare and SIGKILL it at its crash point. Returns the point it died at (a job that
   * stops before its point, such as a duplicate at its claim, dies before its ack: `commit`), or undefined
   * when no spare was ready (nothing ran).
   */
  async crash(order: WorkerOrder): Promise<WorkerOrder['crashAt'] | undefined> {
    const spare = this.#spare;
    if (!spare?.ready) return undefined;
    this.#warm();
    const { child } = spare;
    const exited = new Promise<undefined>((r) => child.once('exit', () => r(undefined)));
    const reached = new Promise<WorkerOrder['crashAt']>((r) => child.once('crash-point', (at: WorkerOrder['crashAt']) => r(at)));
    child.stdin?.write(`${JSON.stringify(order)}\n`);
    const at = await Promise.race([reached, exited]);
    child.kill('SIGKILL');
    await exited;
    return at ?? 'commit';
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

/**
 * The sample of reference tiles the oracle compares with GDAL: one tile of each of up to GDAL_SAMPLE kinds of
 * scene version (single-file, chunked, STAC on the band files' grid, STAC reprojected, ingested), the scene
 * and its window drawn by the seed (a full-size window inside the grid where it has one).
 */
function gdalSample(scenes: readonly SceneVersion[], rnd: () => number): Map<string, string> {
  const byKind = new Map<string, SceneVersion[]>();
  for (const s of scenes) {
    const kind = `${s.kind}${s.params.dst_crs === undefined ? '' : '-reprojected'}`;
    byKind.set(kind, [...(byKind.get(kind) ?? []), s]);
  }
  const kinds = [...byKind.keys()].sort();
  const chosen = new Map<string, string>();
  while (chosen.size < GDAL_SAMPLE && kinds.length > 0) {
    const kind = kinds.splice(Math.floor(rnd() * kinds.length), 1)[0] as string;
    const s = pick(rnd, byKind.get(kind) as SceneVersion[]);
    const tilePx = tilingParams(s.params).tilePx;
    const all = [...windows(s.grid)];
    const full = all.filter((w) => w.width === tilePx && w.height === tilePx);
    // Inside the grid where it can be: a reprojected scene's edge windows are partly outside its source.
    const inner = full.filter((w) => w.row > 0 && w.col > 0 && w.row < s.grid.rows - 1 && w.col < s.grid.cols - 1);
    const w = pick(rnd, inner.length > 0 ? inner : full.length > 0 ? full : all);
    chosen.set(s.sceneKey, `${w.row}_${w.col}`);
  }
  return chosen;
}

/**
 * The reference render of every scene version, in a clean child process (test/soak/reference-render.ts), and
 * the GDAL comparisons of the sampled tiles (what GDAL reads: the same bytes, from the same files).
 */
function referenceRender(
  scenes: readonly SceneVersion[],
  tmp: string,
  sample: ReadonlyMap<string, string>,
): { answers: Map<string, ReferenceAnswer>; samples: GdalSample[] } {
  const files = new Map<string, string>();
  const fileOf = (key: string, bytes: Uint8Array): string => {
    const id = `${key}\n${createHash('sha256').update(bytes).digest('hex')}`;
    let path = files.get(id);
    if (path === undefined) {
      path = join(tmp, `object-${files.size}.tif`);
      writeFileSync(path, bytes);
      files.set(id, path);
    }
    return path;
  };
  const paths = new Map<string, Map<string, string>>();
  const requests: ReferenceRequest[] = scenes.map((s) => {
    const byKey = new Map(s.objects.map((o) => [o.key, fileOf(o.key, o.bytes)]));
    paths.set(s.sceneKey, byKey);
    const keep = sample.get(s.sceneKey);
    return {
      id: s.sceneKey,
      objects: s.objects.map((o) => ({ key: o.key, bytesPath: byKey.get(o.key) as string })),
      source: s.source,
      params: s.params,
      grid: s.grid,
      ...(keep === undefined ? {} : { keep: [keep], keepDir: tmp }),
    };
  });
  const out = execFileSync(process.execPath, ['--import', 'tsx', resolve(here, 'reference-render.ts')], {
    input: JSON.stringify(requests),
    cwd: resolve(here, '..', '..'),
    maxBuffer: 256 * 1024 * 1024,
    // A clean process: none of the soak's environment beyond what Node needs.
    env: { PATH: process.env.PATH ?? '' },
  });
  const answers = new Map((JSON.parse(out.toString('utf8')) as ReferenceAnswer[]).map((a) => [a.id, a]));
  const samples: GdalSample[] = [];
  for (const s of scenes) {
    const window = sample.get(s.sceneKey);
    const tilePath = window === undefined ? undefined : answers.get(s.sceneKey)?.kept[window];
    if (window === undefined || tilePath === undefined) continue;
    const tiling = tilingParams(s.params);
    const byKey = paths.get(s.sceneKey) as Map<string, string>;
    samples.push({
      label: `${s.label}/${window}`,
      tilePath,
      bands: Object.entries(s.layout).map(([band, l]) => `${band}=${byKey.get(l.key)}:${l.index}`),
      expression: tiling.expression,
      resampling: tiling.target.resampling,
      wholeGrid:
        s.grid.target === undefined ? undefined : { geoTransform: s.grid.target.geoTransform, width: s.grid.width, height: s.grid.height },
    });
  }
  return { answers, samples };
}
