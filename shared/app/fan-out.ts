import { createHash } from 'node:crypto';
import { canonicalJson } from '../domain/canonical-json.js';
import type { Platform } from '../domain/ceilings.js';
import { codeVersion } from '../domain/code-version.js';
import {
  CodeVersionMismatchError,
  InvalidEventError,
  InvalidParamsError,
  ObjectNotFoundError,
  SourceChangedError,
} from '../domain/errors.js';
import { sceneKey as deriveSceneKey, outputKeys, type ProcessingParams, type SourceRef } from '../domain/job-key.js';
import { MAX_STAC_ITEM_BYTES, readStacItem, type StacItemMetadata } from '../domain/stac-item.js';
import { MAX_WINDOWS, type TileGrid, tileGrid, type Window, windowAt, windows } from '../domain/tile-grid.js';
import { type TilingParams, tilingParams } from '../domain/tiling-params.js';
import type { JobMessage } from '../ports/job-queue.port.js';
import type { ReadPin } from '../ports/object-store.port.js';
import { parseExpression } from '../raster/index.js';
import type { Backend } from './backend.js';
import { assertArchiveFits } from './pmtiles-archive.js';
import { enqueueReadyParents } from './pyramid.js';
import { assertSceneTileCount, pyramidOf } from './pyramid-grid.js';
import { type OpenedBand, openSceneBands, sceneBands, sceneTarget } from './scene-grid.js';
import {
  indexHourOf,
  isSceneSuperseded,
  manifestPins,
  readSceneManifest,
  type SceneManifest,
  sceneLifecycleKeys,
} from './scene-manifest.js';
import { makeTileJob, type SceneReadPins, type TileMode, toJobMessage } from './tile-job.js';

export interface FanOutRequest {
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  /** Only these windows (backfill of gaps); default every window. */
  readonly only?: ((row: number, col: number) => boolean) | undefined;
  /** Per-window write mode (overwrite backfill); default create-only. */
  readonly modeFor?: ((row: number, col: number) => TileMode | undefined) | undefined;
  /** Called after each batch is enqueued (progress bars). */
  readonly onProgress?: ((enqueued: number, total: number) => void) | undefined;
  /**
   * Fan out in chunk messages of this many windows (see {@link fanOutPlan}):
   * a grid larger than one chunk becomes chunk messages on the tile queue,
   * each enqueuing its own windows once. Default: every tile job directly,
   * for grids one invocation can enqueue (and for backfills, whose `only` and
   * `modeFor` do not travel in a message).
   */
  readonly chunkWindows?: number | undefined;
  /** Refuse grids of more windows than this (the platform's limit, {@link fanOutPlan}). */
  readonly maxWindows?: number | undefined;
  /**
   * A scene fanned out before (a backfill: its manifest). Its pin, raster
   * size and georeferencing are used as recorded and the source is not read
   * at all, so a backfill days later never reads bytes its key does not name:
   * its tile jobs read the pinned version, or settle `source-changed` where
   * the store no longer keeps it. Default: pin the version in `source` now
   * (SourceChangedError if it is no longer current) and read the header.
   */
  readonly recorded?: SceneManifest | undefined;
}

export interface FanOutResult {
  readonly sceneKey: string;
  readonly grid: TileGrid;
  /** Tile jobs this call enqueued (0 when it sent chunks instead). */
  readonly enqueued: number;
  /** Chunk messages this call sent (0 for a direct fan-out, or when a previous attempt already sent them all). */
  readonly chunks: number;
  readonly manifest: 'written' | 'already-present';
}

/** Messages are sent in slices so 40,000 windows never sit in memory as one array. */
const ENQUEUE_SLICE = 500;

/**
 * Fan a scene out into one tile job per window. Pins the source to the
 * version in the key (`ObjectStore.pin`: SourceChangedError if it was
 * overwritten since the event), reads only the raster header (range reads,
 * pinned), validates the parameters against it, writes the scene manifest
 * (with the pin, so a backfill reads the same version) create-only, adds the
 * scene to the mosaic sweep's pending index and enqueues the jobs, every one
 * carrying the pin.
 *
 * A grid larger than `chunkWindows` is fanned out in chunk messages instead
 * (see {@link handleFanOutChunk}): a fan-out cut off by its timeout resumes
 * where it stopped, since each chunk is its own message with its own marker.
 * A duplicate scene event repeats the fan-out; every duplicate tile job then
 * stops at its claim, and once all chunk messages are out a repeat sends none.
 */
export async function fanOutScene(backend: Backend, request: FanOutRequest): Promise<FanOutResult> {
  const { source, params } = request;
  const scene = deriveSceneKey(source, params);
  const tiling = tilingParams(params);
  parseExpression(tiling.expression, Object.keys(tiling.bands));
  const { pins, raster, grid, sourceItem } = await sceneSource(backend, request, tiling);
  if (request.maxWindows !== undefined && grid.count > request.maxWindows) {
    throw new InvalidParamsError(
      `${source.key} makes ${grid.count} windows at tile_px ${tiling.tilePx}, more than the ${request.maxWindows} this platform can fan out ` +
        'within its function timeout (docs/architecture.md, fan-out limits): raise tile_px',
    );
  }
  const manifest: SceneManifest = {
    v: 1,
    sceneKey: scene,
    source,
    params,
    grid,
    raster,
    ...(pins.pin === undefined ? {} : { pin: pins.pin }),
    ...(pins.pins === undefined ? {} : { pins: pins.pins }),
    createdAt: new Date(backend.clock.now()).toISOString(),
    ...(sourceItem === undefined ? {} : { sourceItem }),
  };
  const json = { contentType: 'application/json' } as const;
  const written = await backend.outputs.putIfAbsent(
    outputKeys.sceneManifest(scene),
    new TextEncoder().encode(JSON.stringify(manifest)),
    json,
  );
  // The pending index the mosaic sweep reads instead of listing every scene ever made. Create-only: a repeat finds it.
  // Written after the manifest, so an entry always has one; a crash between the two is redone by the redelivered event.
  await backend.outputs.putIfAbsent(sceneLifecycleKeys.indexEntry(indexHourOf(backend.clock.now()), scene), new Uint8Array(0));

  const direct = request.chunkWindows === undefined || grid.count <= request.chunkWindows || request.only || request.modeFor;
  if (!direct)
    return { ...(await sendChunks(backend, scene, grid, request.chunkWindows as number)), sceneKey: scene, grid, manifest: written.kind };

  const total = request.only ? countSelected(grid, request.only) : grid.count;
  let enqueued = await enqueueWindows(backend, manifest, pins, selected(grid, request.only), request.modeFor, (n) =>
    request.onProgress?.(n, total),
  );
  // A pyramid's backfill: the missing tiles below the highest zoom whose children are all there (pyramid.ts).
  if (request.recorded !== undefined) enqueued += await enqueueReadyParents(backend, manifest);
  backend.telemetry.log('INFO', 'scene-fanned-out', {
    sceneKey: scene,
    source: `${source.bucket}/${source.key}`,
    windows: grid.count,
    enqueued,
  });
  return { sceneKey: scene, grid, enqueued, chunks: 0, manifest: written.kind };
}

/** The pins, raster facts and tile grid of the scene: as recorded (a backfill), or pinned and read from the headers now. */
async function sceneSource(
  backend: Backend,
  request: FanOutRequest,
  tiling: TilingParams,
): Promise<{ pins: SceneReadPins; raster: SceneManifest['raster']; grid: TileGrid; sourceItem?: StacItemMetadata | undefined }> {
  const { source, recorded } = request;
  if (recorded !== undefined) {
    const same =
      recorded.source.bucket === source.bucket &&
      recorded.source.key === source.key &&
      recorded.source.versionToken === source.versionToken &&
      canonicalJson(recorded.source.assets ?? null) === canonicalJson(source.assets ?? null);
    if (!same)
      throw new InvalidParamsError(`a backfill fans out the source its manifest records (${recorded.source.key}), not another one`);
    return { pins: manifestPins(recorded), raster: recorded.raster, grid: recorded.grid, sourceItem: recorded.sourceItem };
  }
  const pin = await backend.sources.pin(source.key, source.versionToken);
  const bands = sceneBands(source, tiling);
  // Each band object pinned to the version its key names (one pin per object, shared by its bands).
  let pins: Record<string, ReadPin> | undefined;
  if (source.assets !== undefined) {
    pins = {};
    const byObject = new Map<string, ReadPin>([[`${source.key}\n${source.versionToken}`, pin]]);
    for (const band of bands) {
      const id = `${band.key}\n${band.versionToken}`;
      let p = byObject.get(id);
      if (p === undefined) {
        p = await backend.sources.pin(band.key, band.versionToken);
        byObject.set(id, p);
      }
      pins[band.name] = p;
    }
  }
  const opened = await openSceneBands(backend.sources, bands, (band) => pins?.[band.name] ?? pin);
  const target = sceneTarget(opened, tiling);
  // Every zoom's tiles counted, before any grid is built or job enqueued (docs/pyramids.md).
  if (target !== undefined) assertSceneTileCount({ width: target.width, height: target.height, target }, tiling);
  // A PMTiles archive (`mosaic: pmtiles`) estimated from the same count, refused with the estimate if it would not fit one archive.
  if (target !== undefined) assertArchiveFits({ width: target.width, height: target.height, target }, tiling);
  const r = (opened[0] as OpenedBand).raster;
  const base = tileGrid(target?.width ?? r.width, target?.height ?? r.height, tiling.tilePx);
  const grid: TileGrid =
    target === undefined
      ? base
      : {
          ...base,
          target: { crs: target.crs, geoTransform: target.geoTransform, ...(target.tms === undefined ? {} : { tms: target.tms }) },
        };
  // A scene made from a STAC Item: its metadata (id, time) is the output item's, read pinned like every band.
  const sourceItem = isStacItemKey(source)
    ? readStacItem(await backend.sources.getRange(source.key, 0, MAX_STAC_ITEM_BYTES + 1, pin), source.key).metadata
    : undefined;
  return {
    sourceItem,
    pins: { pin, ...(pins === undefined ? {} : { pins }) },
    raster: { crs: r.crs, geoTransform: r.geoTransform, noData: r.noData, dataType: r.dataType, bandCount: r.bandCount },
    grid,
  };
}

/** A multi-file scene whose anchor is a STAC Item (a `.json` object) rather than one of its bands. */
const isStacItemKey = (source: SourceRef): boolean => source.assets !== undefined && source.key.toLowerCase().endsWith('.json');

/** Enqueue the tile jobs of `ws` in slices, each carrying the pin; returns how many. */
async function enqueueWindows(
  backend: Backend,
  manifest: SceneManifest,
  pin: SceneReadPins,
  ws: Iterable<Window>,
  modeFor: FanOutRequest['modeFor'],
  onProgress?: (enqueued: number) => void,
): Promise<number> {
  let batch: JobMessage[] = [];
  let enqueued = 0;
  // A pyramid's jobs name their zoom; fan-out enqueues the highest zoom's, each parent is enqueued by its children.
  const zoom = pyramidOf(tilingParams(manifest.params))?.maxZoom;
  const flush = async () => {
    if (batch.length === 0) return;
    await backend.queue.sendBatch(batch);
    enqueued += batch.length;
    backend.telemetry.count('enqueued', batch.length);
    batch = [];
    onProgress?.(enqueued);
  };
  for (const w of ws) {
    const mode = modeFor?.(w.row, w.col) ?? { kind: 'create' };
    batch.push(
      toJobMessage(makeTileJob(manifest.sceneKey, manifest.source, manifest.params, manifest.grid, w, mode, pin, undefined, zoom)),
    );
    if (batch.length >= ENQUEUE_SLICE) await flush();
  }
  await flush();
  return enqueued;
}

function* selected(grid: TileGrid, only: FanOutRequest['only']): Iterable<Window> {
  for (const w of windows(grid)) if (!only || only(w.row, w.col)) yield w;
}

function countSelected(grid: TileGrid, only: (row: number, col: number) => boolean): number {
  let n = 0;
  for (let row = 0; row < grid.rows; row++) for (let col = 0; col < grid.cols; col++) if (only(row, col)) n++;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Chunked fan-out

/**
 * A fan-out chunk on the wire: "enqueue the tile jobs of windows
 * [first, first + count) of this scene". It travels on the tile queue beside
 * tile jobs (`kind` tells them apart; a tile job has no top-level `kind`).
 * Everything else (source, params, grid, pin) is read from the scene's
 * create-only manifest, so a chunk message cannot name a version of its own.
 */
export interface FanOutChunk {
  readonly v: 1;
  readonly kind: 'fan-out-chunk';
  readonly sceneKey: string;
  /** Row-major index of the first window. */
  readonly first: number;
  readonly count: number;
}

export const FAN_OUT_CHUNK = 'fan-out-chunk';

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** The message of one chunk; its job key names the scene and the range, so duplicates share it. */
export function toChunkMessage(chunk: FanOutChunk): JobMessage {
  return { jobKey: sha256(`${chunk.sceneKey}\nchunk\n${chunk.first}+${chunk.count}`), body: canonicalJson(chunk) };
}

/** True when a queue message body is a fan-out chunk (and not a tile job): cheap enough to ask of every message. */
export function isFanOutChunkBody(body: string): boolean {
  if (typeof body !== 'string' || !body.includes(`"${FAN_OUT_CHUNK}"`)) return false;
  try {
    const raw = JSON.parse(body) as { kind?: unknown };
    return typeof raw === 'object' && raw !== null && raw.kind === FAN_OUT_CHUNK;
  } catch {
    return false;
  }
}

const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** Parse a chunk message. Anything malformed is poison (InvalidEventError). */
export function parseFanOutChunk(body: string): FanOutChunk {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (cause) {
    throw new InvalidEventError('fan-out chunk message is not JSON', { cause });
  }
  const r = raw as Record<string, unknown>;
  if (typeof raw !== 'object' || raw === null || r.v !== 1 || r.kind !== FAN_OUT_CHUNK) {
    throw new InvalidEventError('message is not a version 1 fan-out chunk');
  }
  if (typeof r.sceneKey !== 'string' || !/^[0-9a-f]{64}$/.test(r.sceneKey) || !isNat(r.first) || !isNat(r.count) || r.count === 0) {
    throw new InvalidEventError('fan-out chunk message has no valid {sceneKey, first, count}');
  }
  return { v: 1, kind: FAN_OUT_CHUNK, sceneKey: r.sceneKey, first: r.first, count: r.count };
}

/** The marker of one chunk's windows, keyed by its range (a change of chunk size never matches an old marker). */
const chunkMarker = (chunk: FanOutChunk): string => sceneLifecycleKeys.chunkDone(chunk.sceneKey, chunk.first, chunk.count);

async function sendChunks(
  backend: Backend,
  scene: string,
  grid: TileGrid,
  chunkWindows: number,
): Promise<{ readonly enqueued: number; readonly chunks: number }> {
  if (!Number.isInteger(chunkWindows) || chunkWindows < 1)
    throw new InvalidParamsError(`chunkWindows must be a positive integer, got ${chunkWindows}`);
  // A previous attempt sent every chunk message: a redelivered scene event has nothing to add.
  if ((await backend.outputs.head(sceneLifecycleKeys.fannedOut(scene))) !== undefined) {
    backend.telemetry.log('INFO', 'scene-fan-out-resumed', { sceneKey: scene, chunksSent: 0, why: 'every chunk message was sent before' });
    return { enqueued: 0, chunks: 0 };
  }
  let batch: JobMessage[] = [];
  let chunks = 0;
  for (let first = 0; first < grid.count; first += chunkWindows) {
    batch.push(toChunkMessage({ v: 1, kind: FAN_OUT_CHUNK, sceneKey: scene, first, count: Math.min(chunkWindows, grid.count - first) }));
    if (batch.length >= ENQUEUE_SLICE) {
      await backend.queue.sendBatch(batch);
      chunks += batch.length;
      batch = [];
    }
  }
  if (batch.length > 0) await backend.queue.sendBatch(batch);
  chunks += batch.length;
  await backend.outputs.putIfAbsent(
    sceneLifecycleKeys.fannedOut(scene),
    new TextEncoder().encode(JSON.stringify({ chunks, chunkWindows })),
    {
      contentType: 'application/json',
    },
  );
  backend.telemetry.log('INFO', 'scene-fanned-out', { sceneKey: scene, windows: grid.count, chunks, chunkWindows });
  return { enqueued: 0, chunks };
}

/** What one chunk delivery did. */
export type FanOutChunkOutcome = {
  readonly kind: 'chunk-enqueued' | 'chunk-already-done' | 'chunk-superseded';
  readonly sceneKey: string;
  readonly first: number;
  readonly count: number;
  readonly enqueued: number;
};

/**
 * Enqueue one chunk's tile jobs, once. The chunk's marker (create-only,
 * written after its last job is on the queue) makes a redelivery of a
 * finished chunk a no-op; a chunk cut off before its marker enqueues its
 * windows again, and those duplicates stop at their claims. A superseded
 * scene (its source changed) enqueues nothing more.
 */
export async function handleFanOutChunk(backend: Backend, chunk: FanOutChunk): Promise<FanOutChunkOutcome> {
  const base = { sceneKey: chunk.sceneKey, first: chunk.first, count: chunk.count };
  const marker = chunkMarker(chunk);
  if ((await backend.outputs.head(marker)) !== undefined) {
    backend.telemetry.log('INFO', 'chunk-already-done', base);
    return { kind: 'chunk-already-done', ...base, enqueued: 0 };
  }
  if (await isSceneSuperseded(backend.outputs, chunk.sceneKey)) {
    backend.telemetry.log('INFO', 'chunk-superseded', base);
    return { kind: 'chunk-superseded', ...base, enqueued: 0 };
  }
  const manifest = await readSceneManifest(backend.outputs, chunk.sceneKey);
  // A chunk of a scene another build fanned out: this build's tile jobs under that build's key
  // would mix two code versions in one scene (shared/domain/code-version.ts). Poison, as its tiles would be.
  if (deriveSceneKey(manifest.source, manifest.params) !== manifest.sceneKey) {
    throw new CodeVersionMismatchError(`fan-out chunk of scene ${chunk.sceneKey.slice(0, 16)}...`, undefined, codeVersion());
  }
  if (chunk.first + chunk.count > manifest.grid.count) {
    throw new InvalidEventError(
      `fan-out chunk ${chunk.first}+${chunk.count} lies outside scene ${chunk.sceneKey}'s ${manifest.grid.count} windows`,
    );
  }
  const grid = manifest.grid;
  function* range(): Iterable<Window> {
    for (let i = chunk.first; i < chunk.first + chunk.count; i++) yield windowAt(grid, Math.floor(i / grid.cols), i % grid.cols);
  }
  const enqueued = await enqueueWindows(backend, manifest, manifestPins(manifest), range(), undefined);
  await backend.outputs.putIfAbsent(marker, new TextEncoder().encode(JSON.stringify({ ...base, enqueued })), {
    contentType: 'application/json',
  });
  backend.telemetry.log('INFO', 'chunk-enqueued', { ...base, enqueued });
  return { kind: 'chunk-enqueued', ...base, enqueued };
}

// ---------------------------------------------------------------------------------------------
// Fan-out limits

/**
 * Enqueue throughput of one sender on each platform's queue, in messages per
 * second, measured on the emulators by `npm run measure:enqueue`
 * (scripts/measure-enqueue.ts; figures and the machine in docs/architecture.md).
 * The clouds' own queues are faster than their emulators (SQS SendMessageBatch
 * from one Lambda, Pub/Sub batched publish), so limits derived from these are
 * conservative.
 */
export const ENQUEUE_MESSAGES_PER_SEC: Readonly<Record<'aws' | 'gcp' | 'azure' | 'local', number>> = {
  // moto SQS: 34 and 68 messages/s in two runs (SendMessageBatch of 10, 2 cores under load 11): the lower, rounded down.
  aws: 30,
  // Google's Pub/Sub emulator with the tile topic's publish batching: 4,576 messages/s.
  gcp: 4_000,
  // Azurite Storage Queues, one call per message: 245 messages/s.
  azure: 200,
  // SQLite, one transaction per slice: 149,198 messages/s.
  local: 100_000,
};

/** Share of a function's timeout fan-out may spend enqueuing: the rest is header read, manifest, cold start, margin. */
export const FAN_OUT_TIME_SHARE = 0.5;

export interface FanOutPlan {
  /** Windows one chunk message enqueues: what a tile-function invocation can send within its share of the timeout. */
  readonly chunkWindows: number;
  /** Chunk messages one scene invocation can send within its share. */
  readonly maxChunks: number;
  /** The largest grid this platform fans out: maxChunks x chunkWindows, at most MAX_WINDOWS. */
  readonly maxWindows: number;
}

const cloudOf = (platform: Platform): keyof typeof ENQUEUE_MESSAGES_PER_SEC =>
  platform === 'aws-lambda' ? 'aws' : platform.startsWith('gcf') ? 'gcp' : platform.startsWith('azure') ? 'azure' : 'local';

/**
 * The chunk size and grid limit of a platform, from its measured enqueue
 * throughput and its function timeout: one invocation sends at most
 * rate x timeout x {@link FAN_OUT_TIME_SHARE} messages, whether they are tile
 * jobs (a chunk) or chunk messages (a scene).
 *
 * @example
 * fanOutPlan('gcf2-event', 540) // chunkWindows and maxWindows for a 540 s function
 */
export function fanOutPlan(platform: Platform, functionTimeoutSec: number, rates = ENQUEUE_MESSAGES_PER_SEC): FanOutPlan {
  const rate = rates[cloudOf(platform)];
  const perInvocation = Math.floor(rate * functionTimeoutSec * FAN_OUT_TIME_SHARE);
  if (!(perInvocation >= 1)) {
    throw new InvalidParamsError(
      `fan-out plan for ${platform}: ${rate} messages/s x ${functionTimeoutSec} s gives no message per invocation`,
    );
  }
  return { chunkWindows: perInvocation, maxChunks: perInvocation, maxWindows: Math.min(MAX_WINDOWS, perInvocation * perInvocation) };
}

// ---------------------------------------------------------------------------------------------
// The scene triggers' common path

/** What a scene event came to, before each trigger maps it onto its own answer. */
export type SceneEventFanOut =
  | { readonly kind: 'fanned-out'; readonly result: FanOutResult }
  /** The object no longer has the event's version (overwritten since): the newer version's own event makes its scene. */
  | { readonly kind: 'source-changed'; readonly current: string | undefined }
  /** The object is gone: nothing to fan out. */
  | { readonly kind: 'source-gone' }
  /**
   * The event names a version whose scene can no longer be made (a STAC Item version whose recorded band version is
   * gone): ignored and counted (`event-stale`); new bytes make a new scene through their own event or a backfill.
   */
  | { readonly kind: 'stale'; readonly reason: StaleEventReason; readonly key: string };

/** Why an event's scene can no longer be made: a STAC Item version's recorded band version is gone. */
export type StaleEventReason = 'band-version-gone';

/**
 * Fan out the scene of one storage event, the same way on every cloud: with
 * the platform's chunk size and grid limit ({@link fanOutPlan}), and with the
 * event's version checked against the stored object by the pin (S3 versionId
 * on a versioned bucket or ETag, GCS generation, Blob version), so a late
 * event for an overwritten object never pairs its key with the newer bytes.
 */
export async function fanOutSceneEvent(
  backend: Backend,
  source: SourceRef,
  params: ProcessingParams,
  platform: Platform,
  functionTimeoutSec: number,
): Promise<SceneEventFanOut> {
  const plan = fanOutPlan(platform, functionTimeoutSec);
  try {
    return {
      kind: 'fanned-out',
      result: await fanOutScene(backend, { source, params, chunkWindows: plan.chunkWindows, maxWindows: plan.maxWindows }),
    };
  } catch (error) {
    if (error instanceof SourceChangedError) return { kind: 'source-changed', current: error.currentVersion };
    if (error instanceof ObjectNotFoundError) return { kind: 'source-gone' };
    throw error;
  }
}
