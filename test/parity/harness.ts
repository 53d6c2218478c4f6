import { assembleMosaic, type MosaicResult } from '../../shared/app/assemble-mosaic.js';
import type { Backend, WorkerHooks, WorkerSettings } from '../../shared/app/backend.js';
import { type FanOutRequest, type FanOutResult, fanOutScene, isFanOutChunkBody, parseFanOutChunk } from '../../shared/app/fan-out.js';
import type { IngestDeps } from '../../shared/app/ingest.js';
import { HttpFetcher, ObjectStoreFetcher, RoutingFetcher } from '../../shared/app/ingest-fetchers.js';
import { poisonReason } from '../../shared/app/poison.js';
import { processTile } from '../../shared/app/process-tile.js';
import { levelTiles, pyramidOf, pyramidScene } from '../../shared/app/pyramid-grid.js';
import { handleQueueDelivery, type QueueDeliveryVerdict } from '../../shared/app/queue-delivery.js';
import type { RedeliverySchedule } from '../../shared/app/redelivery.js';
import { makeTileJob, parseTileJob, type TileJob, type TileMode, toJobMessage } from '../../shared/app/tile-job.js';
import { outputKeys, type ProcessingParams, repairJobKey, type SourceRef, sceneKey, tileJobKey } from '../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import { type TileGrid, tileGrid, windowAt, windows } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { Delivery, PullQueue } from '../../shared/ports/job-queue.port.js';
import type { ManifestStore } from '../../shared/ports/manifest-store.port.js';
import type { ObjectHead } from '../../shared/ports/object-store.port.js';
import type { Counter } from '../../shared/ports/telemetry.port.js';
import type { ClaimStoreFaults } from '../support/claim-faults.js';
import type { FakeClock } from '../support/fake-clock.js';
import { asOperator, asRole, bindRole } from '../support/function-role.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import type { ObjectStoreFaults } from '../support/object-faults.js';
import { type CountingObjectStore, PARITY_MAX_RECEIVE_COUNT, PARITY_SOURCE_BUCKET, type ParityBackend } from './backends.js';
import { NO_POSTGIS, type ParityFeatures } from './feature-sink.js';
import type { ClaimFact, Json, OutcomeRecord } from './outcome.js';

/** A tiny scene and tile size: a 2 x 2 grid (the bottom row half height), so the whole matrix stays fast. */
export const SCENE_SIZE = { width: 64, height: 48 } as const;
export const PARITY_PARAMS: ProcessingParams = {
  ...DEFAULT_PARAMS,
  version: 'parity-1',
  tile_px: 32,
  output: { ...(DEFAULT_PARAMS.output as Record<string, unknown>), blocksize: 16 },
};
export const PARITY_GRID: TileGrid = tileGrid(SCENE_SIZE.width, SCENE_SIZE.height, PARITY_PARAMS.tile_px as number);

/** The lease, in FakeClock milliseconds: scenarios lapse it by advancing the clock, never by waiting. */
export const LEASE_MS = 60_000;
const RETENTION_MS = 7 * 86_400_000;
/**
 * How long a message handed to a worker stays hidden. Long, so that a loaded
 * two-core machine never sees a message come back while its job still runs
 * (that would be a real duplicate, and a different outcome).
 */
export const DRAIN_VISIBILITY_MS = 30_000;
/**
 * How long a message handed to a worker that is about to die stays hidden:
 * real seconds on SQS, Storage Queues and Pub/Sub, FakeClock milliseconds on
 * the local queue. Short, because a scenario waits it out.
 */
export const CRASH_VISIBILITY_MS = 2_000;
/** Empty polls in a row after which a queue counts as drained, and the pause between them. */
const EMPTY_POLLS = 3;
const EMPTY_POLL_MS = 250;
const MAX_DRAIN_ROUNDS = 400;
/** How long to wait for a message to come (back) before the scenario fails. */
const RECEIVE_TIMEOUT_MS = 30_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Where a worker dies: right after its claim, or right after its output write. Nothing after that point runs, ever. */
export interface Fault {
  /** `feature`: after the feature sink's insert, before the commit (only where a sink is set). */
  readonly crashAfter: 'claim' | 'write' | 'feature' | 'parent';
  /** Only for these jobs (default every job the worker takes). */
  readonly when?: ((job: TileJob) => boolean) | undefined;
}

export type DeliverResult = QueueDeliveryVerdict | { readonly kind: 'crashed' };

export interface DeliverOptions {
  readonly fault?: Fault | undefined;
  /** Extra hooks (stalls): run before the fault's, if any. */
  readonly hooks?: WorkerHooks | undefined;
  /** The backend this delivery's worker sees: a fault put in front of a port (a claim store whose heartbeat fails once). */
  readonly ports?: ((backend: Backend) => Backend) | undefined;
  /**
   * The transport schedule the trigger passes (shared/app/redelivery.ts). Default none: a delivery
   * meeting its own message's live lease waits for it, as on a queue that never dead-letters.
   */
  readonly schedule?: RedeliverySchedule | undefined;
}

/** What the drain loop does with a delivery once its worker answered: the default follows the verdict. */
export type Settlement = 'ack' | 'release' | 'leave' | 'dead-letter';

export interface DrainOptions extends DeliverOptions {
  /** Override the settlement (e.g. "the ack was lost": release instead of ack). */
  readonly settle?: ((d: Delivery, r: DeliverResult) => Settlement | undefined) | undefined;
  /** Called with every answer, before it is settled. */
  readonly onResult?: ((d: Delivery, r: DeliverResult) => Promise<void> | void) | undefined;
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** The call kind a delivery's answer counts under: `ack:written`, `ack:claim-rejected:held`, `retry`, `poison`, `crashed`. */
export function resultKind(r: DeliverResult): string {
  switch (r.kind) {
    case 'ack':
      return r.outcome.kind === 'claim-rejected' ? `ack:claim-rejected:${r.outcome.reason}` : `ack:${r.outcome.kind}`;
    case 'retry':
    case 'poison':
    case 'crashed':
      return r.kind;
    default: {
      const never: never = r;
      throw new Error(`unknown delivery result ${JSON.stringify(never)}`);
    }
  }
}

let sceneBytes: Promise<Uint8Array> | undefined;
/** The synthetic scene's bytes, made once per process (every backend gets the same object). */
export function parityScene(): Promise<Uint8Array> {
  sceneBytes ??= syntheticSceneBytes({ ...SCENE_SIZE, seed: 7 });
  return sceneBytes;
}

/** `queue` with every call run as the operator (test/support/function-role.ts). */
function asPlatform(queue: PullQueue): PullQueue {
  return new Proxy(queue, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => asOperator(() => (value as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
}

/**
 * What a scenario runs against: one backend in a fresh namespace, plus the
 * bookkeeping that turns what happened into a backend-neutral OutcomeRecord.
 *
 * Labels keep records comparable: a scene is named by the scenario (`A`), a
 * job by its scene and window (`A/0_1`, `A/0_1 repair`), a message by its job
 * and the order in which distinct messages of that job were first received
 * (`A/0_1#m1`), a claim owner by its message and worker (`A/0_1#m1@w2`).
 * Raw version tokens, message ids and bucket names never reach the record.
 *
 * Scenarios must not ask which backend they run on: there is no way to.
 */
export class ScenarioContext {
  readonly backend: Backend;
  readonly clock: FakeClock;
  readonly queue: PullQueue;
  readonly sources: CountingObjectStore;
  readonly #pb: ParityBackend;
  readonly #calls = new Map<string, number>();
  readonly #facts: Record<string, Json> = {};
  #phase = '';
  readonly #scenes = new Map<string, string>();
  readonly #jobs = new Map<string, string>();
  readonly #messages = new Map<string, string>();
  readonly #messagesPerJob = new Map<string, number>();
  readonly #bodies = new Map<string, string>();
  readonly #owners = new Map<string, string>();
  readonly #checkpoint = new Map<string, ObjectHead | undefined>();
  #manifestCount: number | null = null;
  #runIds = 0;

  constructor(pb: ParityBackend) {
    this.#pb = pb;
    this.backend = pb.backend;
    this.clock = pb.clock;
    // Receiving and settling are the trigger's (the platform's), never a function's: the operator's even when a
    // worker's hook settles another delivery (scenario 08), so the access recorder does not charge them to its role.
    this.queue = asPlatform(pb.pullQueue);
    this.sources = pb.sources;
  }

  /** Worker settings: one worker (function instance) per name. */
  settings(worker: string, hooks?: WorkerHooks): WorkerSettings {
    return { owner: worker, leaseMs: LEASE_MS, retentionMs: RETENTION_MS, hooks };
  }

  /** Calls noted from now on count under `<name>:<kind>` (empty name: no prefix). */
  phase(name: string): void {
    this.#phase = name;
  }

  note(kind: string): void {
    const key = this.#phase ? `${this.#phase}:${kind}` : kind;
    this.#calls.set(key, (this.#calls.get(key) ?? 0) + 1);
  }

  fact(name: string, value: Json): void {
    this.#facts[name] = value;
  }

  /** Name a claim owner explicitly (e.g. "whichever worker won"); takes precedence over the derived label. */
  aliasOwner(owner: string, alias: string): void {
    this.#owners.set(owner, alias);
  }

  /** The structured log lines so far. */
  logs(): { readonly level?: string; readonly event?: string }[] {
    return this.#pb.logs.map((line) => JSON.parse(line) as { level?: string; event?: string });
  }

  /** Faults between the claim store and its backend (fault proxy; local: a wrapper): lose the next answer, fail the next write. */
  /** The backend's own ingest manifest (fresh per scenario). */
  get manifest(): ManifestStore {
    return this.#pb.manifest;
  }

  /**
   * Ingestion on this backend (shared/app/ingest.ts): the source store holds staging and final keys, the
   * backend's manifest registers, hrefs are `object:KEY` (the source store) or http(s) URLs. Run ids are
   * `run-1`, `run-2`, ... in the order attempts start, so sequential scenarios can name them.
   */
  ingestDeps(): IngestDeps {
    // The ingest function's work: its store and manifest requests run as its role.
    const sources = bindRole(this.backend.sources, 'ingest');
    return {
      store: sources,
      manifest: bindRole(this.#pb.manifest, 'ingest'),
      fetcher: new RoutingFetcher({ object: new ObjectStoreFetcher(sources), url: new HttpFetcher() }),
      clock: this.clock,
      telemetry: this.backend.telemetry,
      newRunId: () => `run-${++this.#runIds}`,
    };
  }

  get claimFaults(): ClaimStoreFaults {
    return this.#pb.claimFaults;
  }

  /** Faults between the output store and its backend (fault proxy; local: a wrapper): only with the scenario's `backendOptions: { outputFaults: true }`. */
  get outputFaults(): ObjectStoreFaults {
    return this.#pb.outputFaults;
  }

  /** The PostGIS feature sink every backend shares, and its roll-up; fails (never skips) when no PostgreSQL runs. */
  get features(): ParityFeatures {
    if (!this.#pb.features) throw new Error(NO_POSTGIS);
    return this.#pb.features;
  }

  /** Delete a claim row behind the ports' back: what TTL (or the Table sweep) does once its retention passed. */
  deleteClaim(jobId: string): Promise<void> {
    return this.#pb.deleteClaim(jobId);
  }

  /** Delete an output behind the ports' back (what a lifecycle rule or an operator might do). */
  deleteOutput(key: string): Promise<void> {
    return this.#pb.deleteOutput(key);
  }

  /** The label of a received message (`A/0_1#m2`). */
  messageLabel(deliveryId: string): string {
    return this.#messages.get(deliveryId) ?? `unlabelled message ${deliveryId}`;
  }

  /** Name a raw message body that is not a tile job (poison), for dead-letter listings and owner labels. */
  nameBody(body: string, label: string): void {
    this.#bodies.set(body, label);
  }

  /** Stage the synthetic scene (or `bytes`) under `key` in the source store; the SourceRef carries the backend's own version token. */
  async stage(key = 'incoming/scene.tif', bytes?: Uint8Array): Promise<SourceRef> {
    const put = await this.sources.putIfAbsent(key, bytes ?? (await parityScene()));
    const version = put.kind === 'written' ? put.version : (await this.sources.head(key))?.version;
    if (version === undefined) throw new Error(`could not stage ${key}`);
    return { bucket: PARITY_SOURCE_BUCKET, key, versionToken: version };
  }

  /**
   * Overwrite a source object with other bytes (a new upload under the same name), and let the
   * store drop the old version as a lifecycle rule would (see ParityBackend.expireSourceVersions).
   * Returns the new version's SourceRef: what the new upload's own event names.
   */
  async overwriteSource(key: string, bytes: Uint8Array): Promise<SourceRef> {
    const before = await this.sources.head(key);
    if (!before) throw new Error(`cannot overwrite ${key}: it was never staged`);
    const put = await this.sources.putIfMatch(key, bytes, before.version);
    if (put.kind !== 'written') throw new Error(`could not overwrite ${key}: ${put.kind}`);
    await this.#pb.expireSourceVersions(key);
    return { bucket: PARITY_SOURCE_BUCKET, key, versionToken: put.version };
  }

  /** Change a source object's metadata, not its bytes (no event follows): see ParityBackend.updateSourceMetadata. */
  updateSourceMetadata(key: string): Promise<void> {
    return this.#pb.updateSourceMetadata(key);
  }

  /** The label a scene was registered under (its key, shortened, if none). */
  sceneLabel(sceneKey: string): string {
    return this.#scenes.get(sceneKey) ?? sceneKey.slice(0, 12);
  }

  /** Give a scene a label and learn the labels of all its jobs. Returns the scene key. */
  registerScene(label: string, source: SourceRef, params: ProcessingParams = PARITY_PARAMS, grid: TileGrid = PARITY_GRID): string {
    const scene = sceneKey(source, params);
    this.#scenes.set(scene, label);
    const pyramid = pyramidOf(tilingParams(params));
    if (pyramid === undefined) for (const w of windows(grid)) this.#jobs.set(tileJobKey(scene, w), `${label}/${w.row}_${w.col}`);
    // A pyramid's jobs are `A/z<zoom>/<row>_<col>`, each zoom's windows counted from its own first tile.
    for (let z = pyramid?.maxZoom ?? 0; pyramid !== undefined && z >= pyramid.minZoom; z--) {
      for (const t of levelTiles(pyramidScene(scene, grid, tilingParams(params)), z)) {
        this.#jobs.set(tileJobKey(scene, t.window, z), `${label}/z${z}/${t.window.row}_${t.window.col}`);
      }
    }
    return scene;
  }

  /** The tile job of one window, as fan-out would make it. */
  jobFor(label: string, source: SourceRef, row: number, col: number, mode: TileMode = { kind: 'create' }, params = PARITY_PARAMS): TileJob {
    const scene = this.registerScene(label, source, params);
    const job = makeTileJob(scene, source, params, PARITY_GRID, windowAt(PARITY_GRID, row, col), mode);
    this.#learnRepair(job);
    return job;
  }

  /** Run fan-out (the scene handler's work) and note whether its manifest write won. */
  async fanOut(label: string, request: FanOutRequest): Promise<FanOutResult> {
    const result = await asRole('scene', () => fanOutScene(this.backend, request));
    this.registerScene(label, request.source, request.params, result.grid);
    this.note(`fan-out:${result.manifest}`);
    return result;
  }

  /** Put tile jobs on the queue directly (a replay, a duplicate notification), `copies` of each. */
  async send(jobs: readonly TileJob[], copies = 1): Promise<void> {
    await this.queue.sendBatch(jobs.flatMap((j) => Array.from({ length: copies }, () => toJobMessage(j))));
  }

  /** Wait until `count` deliveries arrived (hidden for `visibilityMs`), or fail. */
  async receive(count: number, visibilityMs = DRAIN_VISIBILITY_MS): Promise<Delivery[]> {
    const out: Delivery[] = [];
    const deadline = Date.now() + RECEIVE_TIMEOUT_MS;
    while (out.length < count) {
      const got = await this.queue.receive(count - out.length, visibilityMs);
      this.#label(got);
      out.push(...got);
      if (out.length >= count) break;
      if (Date.now() > deadline) throw new Error(`only ${out.length} of ${count} messages arrived within ${RECEIVE_TIMEOUT_MS} ms`);
      await sleep(EMPTY_POLL_MS);
    }
    return out;
  }

  /**
   * The next delivery after a worker died holding a message: moves the
   * FakeClock past the crash visibility (the local queue's timer) and waits
   * for the cloud queues' real visibility timeout to bring the message back.
   */
  async redeliver(visibilityMs = DRAIN_VISIBILITY_MS): Promise<Delivery> {
    this.clock.advance(CRASH_VISIBILITY_MS + 1);
    const [d] = await this.receive(1, visibilityMs);
    return d as Delivery;
  }

  /** Hand one delivery to a worker (`handleTileDelivery`, as every trigger does) and note its answer. */
  async deliver(d: Delivery, worker: string, options: DeliverOptions = {}): Promise<DeliverResult> {
    const crashed = deferred<{ readonly kind: 'crashed' }>();
    const settings = this.settings(
      worker,
      withFault(options, () => crashed.resolve({ kind: 'crashed' })),
    );
    const r = await Promise.race([
      // As every trigger does: tile jobs and fan-out chunks share the queue, which the tile function serves.
      asRole('tile', () =>
        handleQueueDelivery(options.ports?.(this.backend) ?? this.backend, settings, {
          body: d.body,
          deliveryId: d.deliveryId,
          receiveCount: d.receiveCount,
          schedule: options.schedule,
        }),
      ),
      crashed.promise,
    ]);
    this.note(resultKind(r));
    return r;
  }

  /** Run a tile job directly (no queue), with `owner` as the claim owner. */
  async process(job: TileJob, owner: string, options: DeliverOptions = {}): Promise<string> {
    const crashed = deferred<string>();
    const settings = this.settings(
      owner,
      withFault(options, () => crashed.resolve('crashed')),
    );
    const kind = await Promise.race([
      asRole('tile', () => processTile(this.backend, settings, job, owner)).then((o) => o.kind),
      crashed.promise,
    ]);
    this.note(kind);
    return kind;
  }

  /** Settle a delivery as the platform would after the worker's answer. */
  async settle(d: Delivery, r: DeliverResult, how?: Settlement): Promise<void> {
    const settlement = how ?? defaultSettlement(r);
    switch (settlement) {
      case 'ack':
        return this.queue.ack(d);
      case 'release':
        // At once, whatever delay the verdict asked for: leases run on the FakeClock, and a scenario
        // that needs a lease to lapse before the next attempt advances it explicitly.
        return this.queue.release(d, 0);
      case 'leave':
        // The worker died: the message stays hidden until its visibility timeout runs out.
        return;
      case 'dead-letter':
        // Poison, settled at once as every trigger does (shared/app/poison.ts).
        return this.queue.deadLetter(d, r.kind === 'poison' ? poisonReason(r.error) : { reason: 'settled-as-poison', error: r.kind });
      default: {
        const never: never = settlement;
        throw new Error(`unknown settlement ${String(never)}`);
      }
    }
  }

  /**
   * Pull and process until the queue stays empty: one worker, deliveries one
   * after another, settled by their verdicts. A message it released is
   * waited for until it comes back (or, past the dead-letter count, until the
   * queue had time to move it), so a queue that is slow to redeliver under
   * load cannot end the drain early.
   */
  async drain(worker: string, options: DrainOptions = {}): Promise<void> {
    const expectedBack = new Set<string>();
    let empty = 0;
    let lastDelivery = Date.now();
    for (let round = 0; round < MAX_DRAIN_ROUNDS; round++) {
      const batch = await this.queue.receive(10, DRAIN_VISIBILITY_MS);
      this.#label(batch);
      if (batch.length === 0) {
        empty++;
        const waiting = expectedBack.size > 0 && Date.now() - lastDelivery < RECEIVE_TIMEOUT_MS;
        if (empty >= EMPTY_POLLS && !waiting) return;
        await sleep(EMPTY_POLL_MS);
        continue;
      }
      empty = 0;
      lastDelivery = Date.now();
      for (const d of batch) {
        expectedBack.delete(d.deliveryId);
        const r = await this.deliver(d, worker, options);
        await options.onResult?.(d, r);
        const how = options.settle?.(d, r) ?? defaultSettlement(r);
        await this.settle(d, r, how);
        if (how === 'release' && d.receiveCount < PARITY_MAX_RECEIVE_COUNT) expectedBack.add(d.deliveryId);
      }
    }
    throw new Error(`the queue was still delivering after ${MAX_DRAIN_ROUNDS} rounds`);
  }

  /** Assemble the scene's mosaic and note the result and the manifest count. */
  async mosaic(scene: string): Promise<MosaicResult> {
    const m = await asRole('mosaic', () => assembleMosaic(this.backend, scene));
    this.#manifestCount = m.manifestCount;
    this.note(`mosaic:${m.result}`);
    return m;
  }

  /** Remember the current version of these outputs (default: every output); the record says whether they stayed so. */
  async checkpoint(keys?: readonly string[]): Promise<void> {
    const targets = keys ?? (await this.#listOutputs()).map((h) => h.key);
    for (const key of targets) if (!this.#checkpoint.has(key)) this.#checkpoint.set(key, await this.backend.outputs.head(key));
  }

  /** Dead-lettered messages by label, sorted. */
  async deadLetters(): Promise<string[]> {
    return (await this.queue.deadLetters()).map((m) => this.#bodyLabel(m.body)).sort();
  }

  /** An output key relative to its scene label, e.g. `A/tiles/0_1.tif`. */
  relative(key: string): string {
    const tile = /^tiles\/([0-9a-f]{64})\/(.+)$/.exec(key);
    if (tile) return `${this.#scenes.get(tile[1] as string) ?? tile[1]}/tiles/${tile[2]}`;
    const manifest = /^scenes\/([0-9a-f]{64})\/scene\.json$/.exec(key);
    if (manifest) return `${this.#scenes.get(manifest[1] as string) ?? manifest[1]}/scene.json`;
    const mosaic = /^mosaics\/([0-9a-f]{64})\.vrt$/.exec(key);
    if (mosaic) return `${this.#scenes.get(mosaic[1] as string) ?? mosaic[1]}/mosaic.vrt`;
    const item = /^mosaics\/([0-9a-f]{64})\.stac\.json$/.exec(key);
    if (item) return `${this.#scenes.get(item[1] as string) ?? item[1]}/mosaic.stac.json`;
    const cog = /^mosaics\/([0-9a-f]{64})\.tif$/.exec(key);
    if (cog) return `${this.#scenes.get(cog[1] as string) ?? cog[1]}/mosaic.tif`;
    const closed = /^mosaics\/([0-9a-f]{64})\.closed\.json$/.exec(key);
    if (closed) return `${this.#scenes.get(closed[1] as string) ?? closed[1]}/mosaic.closed.json`;
    // The web map outputs of a rendered scene (PMTiles archive, TileJSON, quicklook): `A/mosaic.pmtiles`, ...
    const web = /^mosaics\/([0-9a-f]{64})\.(pmtiles|tilejson\.json|quicklook\.png)$/.exec(key);
    if (web) return `${this.#scenes.get(web[1] as string) ?? web[1]}/mosaic.${web[2]}`;
    // The scene's lifecycle beside its manifest: tombstone, fan-out chunk markers.
    const lifecycle = /^scenes\/([0-9a-f]{64})\/(.+)$/.exec(key);
    if (lifecycle) return `${this.#scenes.get(lifecycle[1] as string) ?? lifecycle[1]}/${lifecycle[2]}`;
    return key;
  }

  jobLabel(jobId: string): string {
    return this.#jobs.get(jobId) ?? `unknown job ${jobId.slice(0, 12)}`;
  }

  /** Name a claim row that is not a tile's (a feature batch's key: test/parity/scenarios-feature-batches.ts). */
  labelJob(jobId: string, label: string): void {
    this.#jobs.set(jobId, label);
  }

  ownerLabel(owner: string): string {
    const alias = this.#owners.get(owner);
    if (alias !== undefined) return alias;
    const at = owner.lastIndexOf('@');
    const message = at < 0 ? undefined : this.#messages.get(owner.slice(0, at));
    return message === undefined ? owner : `${message}@${owner.slice(at + 1)}`;
  }

  /** Every output, relative to its scene, sorted. */
  async outputs(): Promise<string[]> {
    return (await this.#listOutputs()).map((h) => this.relative(h.key)).sort();
  }

  async claims(): Promise<ClaimFact[]> {
    const now = this.clock.now();
    const rows: ClaimFact[] = [];
    for await (const row of this.backend.claims.list()) {
      rows.push({
        job: this.jobLabel(row.jobId),
        state: row.state,
        owner: this.ownerLabel(row.owner),
        ...(row.state === 'CLAIMED' ? { lapsed: row.leaseUntil < now } : {}),
      });
    }
    return rows.sort((a, b) => (a.job < b.job ? -1 : a.job > b.job ? 1 : 0));
  }

  /** The outcome record of everything this context saw; fails if the deployed IAM policies refused any request. */
  async record(): Promise<OutcomeRecord> {
    const denied = this.#pb.accessDenials();
    if (denied.length > 0) {
      throw new Error(
        `the deployed IAM policies refused ${denied.length} request(s) of the ${this.#pb.name} functions (role: action on key): ${denied.join('; ')}`,
      );
    }
    let versionsUnchanged: boolean | null = null;
    if (this.#checkpoint.size > 0) {
      versionsUnchanged = true;
      for (const [key, before] of this.#checkpoint) {
        const now = await this.backend.outputs.head(key);
        if (before?.version !== now?.version || before?.lastModified !== now?.lastModified) versionsUnchanged = false;
      }
    }
    const counters: Partial<Record<Counter, number>> = {};
    for (const [name, n] of Object.entries(this.#pb.telemetry.counters()) as [Counter, number][]) if (n !== 0) counters[name] = n;
    const alarms: Record<string, number> = {};
    for (const entry of this.logs()) if (entry.level === 'ERROR' && entry.event) alarms[entry.event] = (alarms[entry.event] ?? 0) + 1;
    return {
      calls: Object.fromEntries([...this.#calls].sort(([a], [b]) => (a < b ? -1 : 1))),
      outputs: await this.outputs(),
      versionsUnchanged,
      counters,
      alarms,
      manifestCount: this.#manifestCount,
      claims: await this.claims(),
      facts: { ...this.#facts },
    };
  }

  async #listOutputs(): Promise<ObjectHead[]> {
    const all: ObjectHead[] = [];
    // index/ is the mosaic sweep's bookkeeping (pending index, state), not a published output;
    // scenarios about the sweep record what it did through facts.
    for await (const h of this.backend.outputs.list('')) if (!h.key.startsWith('index/')) all.push(h);
    return all;
  }

  /** Label newly seen deliveries: their job and the order in which distinct messages of that job arrived. */
  #label(deliveries: readonly Delivery[]): void {
    for (const d of deliveries) {
      if (this.#messages.has(d.deliveryId)) continue;
      const job = this.#bodyLabel(d.body);
      const n = (this.#messagesPerJob.get(job) ?? 0) + 1;
      this.#messagesPerJob.set(job, n);
      this.#messages.set(d.deliveryId, `${job}#m${n}`);
    }
  }

  #bodyLabel(body: string): string {
    const named = this.#bodies.get(body);
    if (named !== undefined) return named;
    if (isFanOutChunkBody(body)) {
      const chunk = parseFanOutChunk(body);
      return `${this.#scenes.get(chunk.sceneKey) ?? chunk.sceneKey.slice(0, 12)} chunk ${chunk.first}+${chunk.count}`;
    }
    try {
      const job = parseTileJob(body);
      this.#learnRepair(job);
      return `${this.jobLabel(job.jobKey)}${job.mode.kind === 'overwrite' ? ' repair' : ''}`;
    } catch {
      return 'unparsable message';
    }
  }

  #learnRepair(job: TileJob): void {
    if (job.mode.kind === 'overwrite')
      this.#jobs.set(repairJobKey(job.jobKey, job.mode.expectedVersion), `${this.jobLabel(job.jobKey)} repair`);
  }
}

/** What a trigger does after an answer: ack a success, dead-letter poison at once, leave a dead worker's message hidden, release the rest. */
function defaultSettlement(r: DeliverResult): Settlement {
  return r.kind === 'ack' ? 'ack' : r.kind === 'crashed' ? 'leave' : r.kind === 'poison' ? 'dead-letter' : 'release';
}

/** The worker hooks for a delivery: the caller's own, then the fault's crash (which never returns). */
function withFault(options: DeliverOptions, onCrash: () => void): WorkerHooks | undefined {
  const { fault, hooks } = options;
  if (!fault && !hooks) return undefined;
  const crashes = (point: Fault['crashAfter'], job: TileJob) => fault?.crashAfter === point && (fault.when?.(job) ?? true);
  const die = (): Promise<never> => {
    onCrash();
    // The process is gone: nothing after this point ever runs.
    return new Promise<never>(() => {});
  };
  return {
    afterClaim: async (job) => {
      await hooks?.afterClaim?.(job);
      if (crashes('claim', job)) await die();
    },
    afterWrite: async (job) => {
      await hooks?.afterWrite?.(job);
      if (crashes('write', job)) await die();
    },
    afterFeature: async (job) => {
      await hooks?.afterFeature?.(job);
      if (crashes('feature', job)) await die();
    },
    afterParentEnqueue: async (job) => {
      await hooks?.afterParentEnqueue?.(job);
      if (crashes('parent', job)) await die();
    },
  };
}

/** The output key of a window of a scene (for checkpoints and lookups). */
export const tileKey = (scene: string, row: number, col: number): string => outputKeys.tile(scene, { row, col });
