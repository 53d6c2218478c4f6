import { createHash } from 'node:crypto';
import type { Platform } from '../domain/ceilings.js';
import { AdapterError, InvalidEventError, ObjectNotFoundError, SceneIncompleteError, SourceChangedError } from '../domain/errors.js';
import type { AssetRef, ProcessingParams, SourceRef } from '../domain/job-key.js';
import { itemPinKeys } from '../domain/key-layout.js';
import type { RuntimeConfig } from '../domain/runtime-config.js';
import { MAX_STAC_ITEM_BYTES, readStacItem, resolveStacAssets, withStacScaleOffsets } from '../domain/stac-item.js';
import type { Backend } from './backend.js';
import { fanOutPlan, fanOutScene, fanOutSceneEvent, type SceneEventFanOut } from './fan-out.js';
import { checkStacCrs } from './scene-grid.js';

/**
 * How long after its item's event a multi-file scene may stay incomplete
 * before it is dead-lettered (with SCENE_INCOMPLETE and the missing keys)
 * instead of retried. Eventarc retries a failed event for 24 hours and gives
 * no delivery count, and a requeued SQS record starts its count again, so the
 * event's own time bounds the wait on every cloud; a band still missing an
 * hour after its item is not late, it is not coming.
 */
export const STAC_COMPLETION_WINDOW_MS = 60 * 60_000;

/** What the trigger knows about this delivery of the item's event. */
export interface StacEventDelivery {
  /** This delivery's 1-based number, where the transport says (SQS receive count, Storage Queue dequeue count). */
  readonly attempt?: number | undefined;
  /** Deliveries the transport allows before it dead-letters the event itself. */
  readonly maxDeliveries?: number | undefined;
  /** When the item's event happened (S3 eventTime, CloudEvent time, Event Grid eventTime), ms since the epoch. */
  readonly eventTimeMs?: number | undefined;
}

/** The scene settings of a STAC stack: which asset of the item is which band (`tessera:stacAssets`). */
export interface StacSceneConfig {
  readonly selection: Readonly<Record<string, string>>;
  readonly params: ProcessingParams;
  readonly platform: Platform;
  readonly functionTimeoutSec: number;
  /**
   * The stack's source prefix (tessera:sourcePrefix): the only place the scene function may read (its grant,
   * shared/domain/key-layout.ts). A band href that resolves outside it is refused before any read.
   */
  readonly sourcePrefix?: string | undefined;
}

/**
 * The scene of one source event, the rule every cloud's scene trigger calls:
 * on a STAC stack (`tessera:stacAssets` set) the object is a STAC Item and its
 * scene is the item's band objects ({@link fanOutStacSceneEvent}); otherwise
 * the object is the scene (fanOutSceneEvent).
 */
export function fanOutSourceEvent(
  backend: Backend,
  source: SourceRef,
  config: Pick<RuntimeConfig, 'params' | 'platform' | 'functionTimeoutSec' | 'stacAssets'> & { readonly sourcePrefix?: string | undefined },
  delivery: StacEventDelivery = {},
): Promise<SceneEventFanOut> {
  const { params, platform, functionTimeoutSec, stacAssets, sourcePrefix } = config;
  if (stacAssets === undefined) return fanOutSceneEvent(backend, source, params, platform, functionTimeoutSec);
  return fanOutStacSceneEvent(backend, source, { selection: stacAssets, params, platform, functionTimeoutSec, sourcePrefix }, delivery);
}

/** An event's RFC 3339 time (S3 eventTime, CloudEvent time, Event Grid eventTime) in ms since the epoch; undefined if absent or unreadable. */
export function eventTimeMs(time: unknown): number | undefined {
  if (typeof time !== 'string') return undefined;
  const ms = Date.parse(time);
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * The multi-file scene of one STAC Item event, the same on every cloud (each
 * scene handler maps its event onto `item` and `delivery`):
 *
 * 1. pin the item to the event's version and read it through the pin
 *    (overwritten since: `source-changed`, the newer item's own event makes
 *    its scene; deleted: `source-gone`);
 * 2. parse it and resolve the configured assets (shared/domain/stac-item.ts):
 *    a malformed item or a selection it cannot satisfy is poison, thrown;
 * 3. head every asset for its current version token: the completeness check.
 *    One missing is SceneIncompleteError, retryable, so the platform's own
 *    retry lets a band that lands a little later complete the scene; final
 *    (not retryable: the trigger dead-letters it with the missing keys) on the
 *    transport's last delivery or {@link STAC_COMPLETION_WINDOW_MS} after the event;
 * 4. fan out the scene `{bucket, key: item, versionToken: item's, assets}` with
 *    `params.bands` set to each band's index inside its asset. The scene key
 *    covers every asset's key and version, so a duplicate item event makes the
 *    same scene (its manifest is already there, its tile jobs stop at their
 *    claims), and a band overwritten after fan-out leaves that scene's
 *    unfinished tiles to settle `source-changed` (their reads are pinned).
 *
 * A band that changes between its head and the fan-out's pin is retried (a
 * band's own event is not a scene trigger, so nothing else would redo it).
 */
export async function fanOutStacSceneEvent(
  backend: Backend,
  item: SourceRef,
  config: StacSceneConfig,
  delivery: StacEventDelivery = {},
): Promise<SceneEventFanOut> {
  let bytes: Uint8Array;
  try {
    const pin = await backend.sources.pin(item.key, item.versionToken);
    // One byte past the cap, so an oversized item is refused rather than cut short.
    bytes = await backend.sources.getRange(item.key, 0, MAX_STAC_ITEM_BYTES + 1, pin);
  } catch (error) {
    if (error instanceof SourceChangedError) return { kind: 'source-changed', current: error.currentVersion };
    if (error instanceof ObjectNotFoundError) return { kind: 'source-gone' };
    throw error;
  }
  const stac = readStacItem(bytes, item.key);
  const resolved = resolveStacAssets(stac, item.key, config.selection);
  // With unscale, the item's raster:bands scale and offset ride in the parameters (and so in the scene key); one
  // that cannot be used is refused here, before any band is pinned.
  const scaled = withStacScaleOffsets(config.params, resolved, item.key);

  const bandKeys = [...new Set(Object.values(resolved).map((r) => r.key))].sort();
  const prefix = config.sourcePrefix;
  if (prefix !== undefined && prefix !== '') {
    const outside = bandKeys.filter((k) => !k.startsWith(prefix));
    if (outside.length > 0)
      throw new InvalidEventError(
        `STAC item ${JSON.stringify(item.key)} names band objects outside the source prefix ${JSON.stringify(prefix)} (${outside.map((k) => JSON.stringify(k)).join(', ')}): ` +
          'the scene function may read only under it; keep the band files beside the item',
      );
  }
  const pins = await itemBandPins(backend, item, bandKeys, delivery);
  const heads = new Map(Object.entries(pins.versions));

  const assets: Record<string, AssetRef> = {};
  const bands: Record<string, number> = {};
  for (const [band, r] of Object.entries(resolved)) {
    Object.defineProperty(assets, band, { value: { key: r.key, versionToken: pins.versions[r.key] as string }, enumerable: true });
    Object.defineProperty(bands, band, { value: r.index, enumerable: true });
  }
  const source: SourceRef = { bucket: item.bucket, key: item.key, versionToken: item.versionToken, assets };
  const params: ProcessingParams = { ...scaled, bands };
  backend.telemetry.log('INFO', 'stac-scene-complete', {
    item: item.key,
    id: stac.metadata.id,
    assets: Object.fromEntries(Object.entries(resolved).map(([band, r]) => [band, `${r.asset} -> ${r.key} band ${r.index}`])),
  });

  const plan = fanOutPlan(config.platform, config.functionTimeoutSec);
  try {
    // The item's proj: CRS against each band file's own, before any claim (issue 29; scene-grid.ts).
    const unchecked = await checkStacCrs(backend.sources, item.key, resolved, (key) => pins.versions[key] as string);
    if (unchecked.length > 0) backend.telemetry.log('WARN', 'stac-crs-unchecked', { item: item.key, bands: unchecked });
    return {
      kind: 'fanned-out',
      result: await fanOutScene(backend, { source, params, chunkWindows: plan.chunkWindows, maxWindows: plan.maxWindows }),
    };
  } catch (error) {
    if (error instanceof SourceChangedError) {
      if (error.key === item.key) return { kind: 'source-changed', current: error.currentVersion };
      // The band version this item version was resolved to is no longer readable (overwritten on a store that keeps
      // no old versions, or expired): this item version's scene can never be made. New band bytes make a new scene
      // through a new item version or a backfill (docs/multi-file-scenes.md), never under this event's key.
      backend.telemetry.count('event-stale');
      backend.telemetry.log('WARN', 'stac-band-version-gone', {
        item: item.key,
        itemVersion: item.versionToken,
        band: error.key,
        pinned: pins.versions[error.key] ?? null,
        current: error.currentVersion ?? null,
      });
      return { kind: 'stale', reason: 'band-version-gone', key: error.key };
    }
    if (error instanceof ObjectNotFoundError) {
      // The item, or a band deleted since its head: only the first ends the scene.
      if ((await backend.sources.head(item.key)) === undefined) return { kind: 'source-gone' };
      const gone = await missingOf(backend, [...heads.keys()]);
      if (gone.length > 0) throw incomplete(backend, item, gone, delivery);
      throw new AdapterError(`[scene:stac] an object of STAC item ${JSON.stringify(item.key)} vanished during fan-out; retried`, {
        cause: error,
        retryable: true,
      });
    }
    throw error;
  }
}

/** The band versions one item version was resolved to, and whether this delivery recorded them or found them recorded. */
export interface ItemBandPins {
  /** Band object key -> its version token, for every band key the selection resolved to. */
  readonly versions: Readonly<Record<string, string>>;
  readonly recorded: 'written' | 'found';
}

/** The record's id: the item's identity (bucket, key, version token) and the band keys the selection resolved to. */
export function itemPinId(item: SourceRef, bandKeys: readonly string[]): string {
  return createHash('sha256')
    .update(['tessera-item-pins-v1', item.bucket, item.key, item.versionToken, ...[...bandKeys].sort()].join('\n'))
    .digest('hex');
}

/**
 * The band versions of one item version, resolved once: the first delivery that finds every band heads them and
 * records the answer create-only under {@link itemPinKeys} (the item's key and version token name it); every later
 * delivery of the same item version, however late and whatever was re-uploaded meanwhile, reads that record back.
 * So a duplicate item event always makes the same scene key (design note 1: "if two duplicate deliveries would
 * produce different keys, the key is wrong"). Two first deliveries racing: one record is written, the other
 * delivery reads the winner's and uses it.
 */
export async function itemBandPins(
  backend: Backend,
  item: SourceRef,
  bandKeys: readonly string[],
  delivery: StacEventDelivery,
): Promise<ItemBandPins> {
  const key = itemPinKeys.record(itemPinId(item, bandKeys));
  const found = await readPinRecord(backend, key, item, bandKeys);
  if (found !== undefined) return { versions: found, recorded: 'found' };
  const heads = await versionsOf(backend, bandKeys);
  const missing = [...heads].filter(([, version]) => version === undefined).map(([k]) => k);
  if (missing.length > 0) throw incomplete(backend, item, missing, delivery);
  const versions = Object.fromEntries([...heads].map(([k, v]) => [k, v as string]));
  const record: ItemPinRecord = {
    item: { bucket: item.bucket, key: item.key, versionToken: item.versionToken },
    bands: versions,
    resolvedAt: new Date(backend.clock.now()).toISOString(),
  };
  const put = await backend.outputs.putIfAbsent(key, new TextEncoder().encode(JSON.stringify(record)), {
    contentType: 'application/json',
  });
  if (put.kind === 'written') {
    backend.telemetry.log('INFO', 'item-pins-recorded', { item: item.key, itemVersion: item.versionToken, bands: versions });
    return { versions, recorded: 'written' };
  }
  // Another delivery of this item version recorded first (or our own write's answer was lost): its answer stands.
  const theirs = await readPinRecord(backend, key, item, bandKeys);
  if (theirs === undefined)
    throw new AdapterError(`[scene:stac] the band pins of ${JSON.stringify(item.key)} at ${key} are present but unreadable; retried`, {
      retryable: true,
    });
  return { versions: theirs, recorded: 'found' };
}

interface ItemPinRecord {
  readonly item: { readonly bucket: string; readonly key: string; readonly versionToken: string };
  readonly bands: Readonly<Record<string, string>>;
  readonly resolvedAt: string;
}

/** The recorded band versions, checked against what this delivery needs; undefined when there is no record. */
async function readPinRecord(
  backend: Backend,
  key: string,
  item: SourceRef,
  bandKeys: readonly string[],
): Promise<Record<string, string> | undefined> {
  let bytes: Uint8Array;
  try {
    bytes = await backend.outputs.get(key);
  } catch (error) {
    if (error instanceof ObjectNotFoundError) return undefined;
    throw error;
  }
  let record: ItemPinRecord;
  try {
    record = JSON.parse(new TextDecoder().decode(bytes)) as ItemPinRecord;
  } catch (cause) {
    throw new AdapterError(
      `[scene:stac] the band pins record ${key} is not JSON; it was written create-only, so it was changed behind Tessera's back`,
      {
        cause,
      },
    );
  }
  const out: Record<string, string> = {};
  for (const k of bandKeys) {
    const v = record.bands?.[k];
    if (typeof v !== 'string' || record.item?.key !== item.key || record.item?.versionToken !== item.versionToken)
      throw new AdapterError(
        `[scene:stac] the band pins record ${key} does not match item ${JSON.stringify(item.key)} (band ${k}); it was changed behind Tessera's back`,
      );
    out[k] = v;
  }
  return out;
}

/** The current version of each distinct key (undefined: not in the store). */
async function versionsOf(backend: Backend, keys: readonly string[]): Promise<Map<string, string | undefined>> {
  const heads = new Map<string, string | undefined>();
  for (const key of keys) if (!heads.has(key)) heads.set(key, (await backend.sources.head(key))?.version);
  return heads;
}

async function missingOf(backend: Backend, keys: readonly string[]): Promise<string[]> {
  return [...(await versionsOf(backend, keys))].filter(([, version]) => version === undefined).map(([key]) => key);
}

/** The incomplete-scene error of this delivery: retryable, or final once the item has waited long enough. */
function incomplete(backend: Backend, item: SourceRef, missing: readonly string[], delivery: StacEventDelivery): SceneIncompleteError {
  const { attempt, maxDeliveries, eventTimeMs } = delivery;
  const ageMs = eventTimeMs === undefined ? undefined : backend.clock.now() - eventTimeMs;
  const final =
    attempt !== undefined && maxDeliveries !== undefined && attempt >= maxDeliveries
      ? `still missing at delivery ${attempt} of ${maxDeliveries}`
      : ageMs !== undefined && ageMs >= STAC_COMPLETION_WINDOW_MS
        ? `still missing ${Math.round(ageMs / 60_000)} min after the item's event (the completion window is ${STAC_COMPLETION_WINDOW_MS / 60_000} min)`
        : undefined;
  backend.telemetry.count('scene-incomplete');
  backend.telemetry.log('WARN', 'scene-incomplete', {
    item: item.key,
    missing,
    attempt: attempt ?? null,
    maxDeliveries: maxDeliveries ?? null,
    ageMs: ageMs ?? null,
    final: final !== undefined,
  });
  return new SceneIncompleteError(item.key, missing, final);
}
