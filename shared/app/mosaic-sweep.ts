import { InvalidEventError, MissingTilesError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import { parseKeys, SWEEP_STATE_KEY } from '../domain/key-layout.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { assembleMosaic, type MosaicResult } from './assemble-mosaic.js';
import type { Backend } from './backend.js';
import { INDEX_HOUR_MS, indexHourOf, indexHourStart, isSceneSuperseded, sceneLifecycleKeys } from './scene-manifest.js';

/** What one sweep did. */
export interface MosaicSweepResult {
  readonly assembled: readonly { readonly sceneKey: string; readonly mosaicKey: string; readonly result: MosaicResult['result'] }[];
  /** Scenes whose tiles are not all there yet; tried again on a later run (after their backoff). */
  readonly pending: readonly { readonly sceneKey: string; readonly missing: number }[];
  /** Scenes given up on: superseded (source overwritten) or still incomplete past `closeAfterMs`; each has a report. */
  readonly closed: readonly {
    readonly sceneKey: string;
    readonly reason: CloseReason;
    readonly missing: number;
    readonly reportKey: string;
  }[];
  readonly failed: readonly { readonly sceneKey: string; readonly error: string }[];
  /** Scenes due but left for the next run: over the per-run limit, or out of time. */
  readonly deferred: number;
}

export type CloseReason = 'superseded' | 'incomplete';

export interface MosaicSweepOptions {
  /** Assemble exactly these scenes (an operator's request), without the sweep's index or state. */
  readonly scenes?: readonly string[] | undefined;
  /** Most scenes one sweep tries (each costs a listing of its tiles). Default 50. */
  readonly maxScenes?: number | undefined;
  /** Asked before each scene: true when the invocation is running out of time. */
  readonly shouldStop?: (() => boolean) | undefined;
  /** Runs a pending scene is retried every time before its backoff starts. Default 3. */
  readonly freeRetries?: number | undefined;
  /** First backoff after the free retries, doubled per attempt. Default 5 minutes (one schedule period). */
  readonly backoffMs?: number | undefined;
  /** Longest backoff. Default 6 hours. */
  readonly maxBackoffMs?: number | undefined;
  /** A scene still incomplete this long after its fan-out is closed out with a report. Default 48 hours. */
  readonly closeAfterMs?: number | undefined;
  /** Most index hours one run reads (a sweep that was off for long catches up over several runs). Default 168. */
  readonly maxIndexHours?: number | undefined;
}

/** Where the sweep keeps its cursor and its pending scenes (create-only, then compare-and-swap on the version). */
export { SWEEP_STATE_KEY };

/** The sweep's state between runs. Bounded: only scenes not yet assembled or closed, and at most `closeAfterMs` old. */
export interface SweepState {
  readonly v: 1;
  /** Index hours before this one are read into `scenes`; `null` before the first run. */
  readonly cursor: string | null;
  readonly scenes: Readonly<Record<string, SweepEntry>>;
}

export interface SweepEntry {
  /** When the scene was fanned out (its index hour), or first seen. */
  readonly since: number;
  readonly attempts: number;
  readonly nextTryAt: number;
}

/** The report a closed-out scene leaves beside where its mosaic would be: which windows never came, and why. */
export interface ClosedOutReport {
  readonly v: 1;
  readonly sceneKey: string;
  readonly reason: CloseReason;
  readonly gridCount: number;
  /** Missing windows as `row_col`, every one. */
  readonly missingWindows: readonly string[];
  readonly attempts: number;
  readonly since: number;
  readonly closedAt: number;
}

const TILE_WINDOW = /\/(\d+_\d+)\.(?:tif|png|webp|jpg)$/;

/**
 * The scheduled mosaic trigger of every cloud: assemble the scenes whose
 * tiles are all written, fairly and at a bounded cost per run.
 *
 * - Bounded: fan-out adds each scene to a pending index under the hour it
 *   ran (`index/scenes/<YYYYMMDDHH>/<scene>`); a run reads only the index
 *   hours since its cursor, never every scene and mosaic ever written, and
 *   keeps the scenes it has not finished in its state object.
 * - Fair: due scenes are tried fewest attempts first, then oldest first, at
 *   most `maxScenes` per run. A scene that stays pending (dead-lettered tiles,
 *   a superseded source, poison) backs off exponentially after a few free
 *   retries and goes to the back, so it can never keep a newer scene from
 *   being tried.
 * - Closed: a superseded scene (its source changed: tombstone) that is not
 *   complete, or a scene still incomplete `closeAfterMs` after its fan-out,
 *   is closed out with a create-only report naming every missing window
 *   (`mosaics/<scene>.closed.json`), counted `mosaic-closed-out` and logged
 *   (WARN for superseded, ERROR for incomplete). An operator's backfill and
 *   an explicit `{ sceneKey }` request still assemble it later.
 *
 * Why a schedule and not an event per tile write: an event per tile would
 * list the scene's tiles once per tile (quadratic in the grid), and the last
 * tile's event is not special, since events arrive in any order. Every write
 * is create-only or conditional on the state's version, so overlapping runs
 * are harmless: the loser's state update is dropped and the next run redoes it.
 */
export async function sweepMosaics(backend: Backend, options: MosaicSweepOptions = {}): Promise<MosaicSweepResult> {
  if (options.scenes !== undefined) return tryScenes(backend, options.scenes, options);
  const now = backend.clock.now();
  const loaded = await loadState(backend.outputs);
  const scenes = new Map(Object.entries(loaded.state.scenes));
  const cursor = await readIndex(backend, loaded.state.cursor, scenes, now, options.maxIndexHours ?? 168);

  const due = [...scenes.entries()]
    .filter(([, e]) => e.nextTryAt <= now)
    .sort(([ak, a], [bk, b]) => a.attempts - b.attempts || a.since - b.since || (ak < bk ? -1 : 1))
    .map(([k]) => k);
  const result = await tryScenes(backend, due, options, scenes);
  const state: SweepState = { v: 1, cursor, scenes: Object.fromEntries([...scenes].sort(([a], [b]) => (a < b ? -1 : 1))) };
  await saveState(backend, loaded.version, state);
  backend.telemetry.log('INFO', 'mosaic-sweep', {
    assembled: result.assembled.length,
    pending: result.pending.length,
    closed: result.closed.length,
    failed: result.failed.length,
    deferred: result.deferred,
    waiting: scenes.size,
    cursor,
  });
  return result;
}

/** Try `keys` in order; with `entries` (a sweep), resolved scenes leave it and the rest get their next try. */
async function tryScenes(
  backend: Backend,
  keys: readonly string[],
  options: MosaicSweepOptions,
  entries?: Map<string, SweepEntry>,
): Promise<MosaicSweepResult> {
  const now = backend.clock.now();
  const maxScenes = options.maxScenes ?? 50;
  const assembled: { sceneKey: string; mosaicKey: string; result: MosaicResult['result'] }[] = [];
  const pending: { sceneKey: string; missing: number }[] = [];
  const closed: { sceneKey: string; reason: CloseReason; missing: number; reportKey: string }[] = [];
  const failed: { sceneKey: string; error: string }[] = [];
  let tried = 0;
  let skipped = 0;
  for (const sceneKey of keys) {
    if (tried >= maxScenes || options.shouldStop?.()) break;
    const entry = entries?.get(sceneKey);
    if (entries && entry && (await isResolved(backend.outputs, sceneKey))) {
      // Assembled or closed by an overlapping run or an operator (or an index entry read again): two heads, not a try.
      entries.delete(sceneKey);
      skipped++;
      continue;
    }
    tried++;
    const retryLater = () => {
      if (!entries || !entry) return;
      const attempts = entry.attempts + 1;
      entries.set(sceneKey, { ...entry, attempts, nextTryAt: now + backoff(attempts, options) });
    };
    try {
      const r = await assembleMosaic(backend, sceneKey);
      assembled.push({ sceneKey, mosaicKey: r.mosaicKey, result: r.result });
      entries?.delete(sceneKey);
    } catch (error) {
      if (error instanceof MissingTilesError) {
        const superseded = await isSceneSuperseded(backend.outputs, sceneKey);
        const since = entry?.since ?? now;
        if (entries && entry && (superseded || now - since >= (options.closeAfterMs ?? 48 * 3_600_000))) {
          const reason: CloseReason = superseded ? 'superseded' : 'incomplete';
          const reportKey = await closeOut(backend, sceneKey, reason, error, entry, now);
          closed.push({ sceneKey, reason, missing: error.missing.length, reportKey });
          entries.delete(sceneKey);
        } else {
          pending.push({ sceneKey, missing: error.missing.length });
          retryLater();
        }
      } else {
        const err = error instanceof Error ? error : new Error(String(error));
        backend.telemetry.log('ERROR', 'mosaic-failed', { sceneKey, error: err });
        failed.push({ sceneKey, error: err.message });
        retryLater();
      }
    }
  }
  return { assembled, pending, closed, failed, deferred: keys.length - tried - skipped };
}

function backoff(attempts: number, options: MosaicSweepOptions): number {
  const free = options.freeRetries ?? 3;
  if (attempts <= free) return 0;
  const base = options.backoffMs ?? 5 * 60_000;
  return Math.min(options.maxBackoffMs ?? 6 * 3_600_000, base * 2 ** (attempts - free - 1));
}

async function isResolved(outputs: ObjectStore, sceneKey: string): Promise<boolean> {
  return (
    (await outputs.head(outputKeys.mosaic(sceneKey))) !== undefined ||
    (await outputs.head(sceneLifecycleKeys.closedOut(sceneKey))) !== undefined
  );
}

async function closeOut(
  backend: Backend,
  sceneKey: string,
  reason: CloseReason,
  error: MissingTilesError,
  entry: SweepEntry,
  now: number,
): Promise<string> {
  const report: ClosedOutReport = {
    v: 1,
    sceneKey,
    reason,
    gridCount: error.gridCount,
    missingWindows: error.missing.map((key) => TILE_WINDOW.exec(key)?.[1] ?? key),
    attempts: entry.attempts + 1,
    since: entry.since,
    closedAt: now,
  };
  const reportKey = sceneLifecycleKeys.closedOut(sceneKey);
  const put = await backend.outputs.putIfAbsent(reportKey, new TextEncoder().encode(JSON.stringify(report)), {
    contentType: 'application/json',
  });
  backend.telemetry.count('mosaic-closed-out');
  backend.telemetry.log(reason === 'superseded' ? 'WARN' : 'ERROR', 'mosaic-closed-out', {
    sceneKey,
    reason,
    missing: report.missingWindows.length,
    first: report.missingWindows.slice(0, 10),
    reportKey,
    result: put.kind,
    what: 'backfill the missing windows (tessera backfill --policy skip) and request { sceneKey } to assemble it',
  });
  return reportKey;
}

async function loadState(outputs: ObjectStore): Promise<{ state: SweepState; version: string | undefined }> {
  const head = await outputs.head(SWEEP_STATE_KEY);
  if (!head) return { state: { v: 1, cursor: null, scenes: {} }, version: undefined };
  let state: SweepState;
  try {
    state = JSON.parse(new TextDecoder().decode(await outputs.get(SWEEP_STATE_KEY))) as SweepState;
    if (state.v !== 1 || typeof state.scenes !== 'object' || state.scenes === null) throw new Error('not a version 1 sweep state');
  } catch (cause) {
    throw new InvalidEventError(
      `${SWEEP_STATE_KEY} is unreadable; delete it and the next sweep rebuilds it from the scene manifests (nothing is lost: every mosaic is create-only)`,
      { cause },
    );
  }
  return { state, version: head.version };
}

async function saveState(backend: Backend, version: string | undefined, state: SweepState): Promise<void> {
  const body = new TextEncoder().encode(JSON.stringify(state));
  const options = { contentType: 'application/json' } as const;
  const put =
    version === undefined
      ? await backend.outputs.putIfAbsent(SWEEP_STATE_KEY, body, options)
      : await backend.outputs.putIfMatch(SWEEP_STATE_KEY, body, version, options);
  if (put.kind !== 'written') {
    // An overlapping run saved first. Everything this run wrote is create-only, so dropping
    // its bookkeeping only means the next run reads those index hours and tries those scenes again.
    backend.telemetry.log('INFO', 'mosaic-sweep-state-raced', { result: put.kind });
  }
}

/**
 * Read the pending index from the cursor's hour up to now into `scenes`, and
 * return the new cursor. The cursor stays an hour behind now, so an entry a
 * writer with a slightly slow clock adds to the previous hour is still read.
 * The first run (no cursor) lists the scene manifests once, which also takes
 * in scenes fanned out before the index existed.
 */
async function readIndex(
  backend: Backend,
  cursor: string | null,
  scenes: Map<string, SweepEntry>,
  now: number,
  maxHours: number,
): Promise<string> {
  const add = (sceneKey: string, since: number) => {
    if (!scenes.has(sceneKey)) scenes.set(sceneKey, { since, attempts: 0, nextTryAt: 0 });
  };
  const behind = indexHourOf(now - INDEX_HOUR_MS);
  if (cursor === null) {
    // `since` is when the sweep first saw the scene, on its own clock (object times are the store's).
    for (const key of await scenesWithoutMosaic(backend.outputs)) add(key.sceneKey, now);
    return behind;
  }
  let hour = indexHourStart(cursor);
  const last = Math.min(now, hour + (maxHours - 1) * INDEX_HOUR_MS);
  for (; hour <= last; hour += INDEX_HOUR_MS) {
    for await (const head of backend.outputs.list(sceneLifecycleKeys.indexHour(indexHourOf(hour)))) {
      const m = parseKeys.indexEntry(head.key);
      // An entry re-read within the last hour or two may name a scene already resolved: tryScenes drops it at two heads.
      if (m) add(m.scene, indexHourStart(m.hour));
    }
  }
  // Next run starts at the first hour not fully read, never later than an hour behind now.
  const next = indexHourOf(Math.min(hour, indexHourStart(behind)));
  return next < cursor ? cursor : next;
}

/** Scene keys with a manifest and neither a mosaic nor a close-out report, oldest manifest first (the first run's bootstrap). */
export async function scenesWithoutMosaic(outputs: ObjectStore): Promise<{ sceneKey: string; at: number }[]> {
  const done = new Set<string>();
  for await (const head of outputs.list(outputKeys.allMosaics())) {
    const key = parseKeys.mosaicOrClosedOut(head.key);
    if (key) done.add(key);
  }
  const waiting: { sceneKey: string; at: number }[] = [];
  for await (const head of outputs.list(outputKeys.allScenes())) {
    const key = parseKeys.sceneManifest(head.key);
    if (key && !done.has(key) && head.key === outputKeys.sceneManifest(key)) waiting.push({ sceneKey: key, at: head.lastModified });
  }
  return waiting.sort((a, b) => a.at - b.at);
}
