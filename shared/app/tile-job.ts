import { canonicalJson } from '../domain/canonical-json.js';
import { codeVersion } from '../domain/code-version.js';
import { CodeVersionMismatchError, InvalidEventError, TesseraError } from '../domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef, sceneKey, tileJobKey } from '../domain/job-key.js';
import { validateObjectKey } from '../domain/object-key.js';
import { type TileGrid, tileGrid, type Window, windowAt } from '../domain/tile-grid.js';
import { tilingParams } from '../domain/tiling-params.js';
import type { JobMessage } from '../ports/job-queue.port.js';
import type { ReadPin } from '../ports/object-store.port.js';

/** How a tile's output is written: create-only, or a repair under a known version. */
export type TileMode = { readonly kind: 'create' } | { readonly kind: 'overwrite'; readonly expectedVersion: string };

/** The scene's raster size: with `params.tile_px` it gives the grid, and the grid and (row, col) give the window. */
export interface JobGrid {
  readonly width: number;
  readonly height: number;
}

/** One tile job on the wire. Everything in it is derivable from (source, params, code, grid, row, col). */
export interface TileJob {
  readonly v: 1;
  /** The build of the render path whose pixels the keys promise (shared/domain/code-version.ts). */
  readonly code: string;
  readonly sceneKey: string;
  readonly jobKey: string;
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  /** The raster size fan-out read from the source's header; bound to the source version at the read (render-tile.ts). */
  readonly grid: JobGrid;
  /** Derived from `grid` and (row, col): a message whose x, y, width or height differ is poison. */
  readonly window: Window;
  readonly outputKey: string;
  readonly mode: TileMode;
  /**
   * The read pin fan-out resolved for the source version of the key. Every
   * byte the job reads comes from that version, or the read throws
   * SourceChangedError. Not part of any key (its handle is an adapter detail);
   * absent in messages from before pinning, which read pinned to the token.
   */
  readonly pin?: ReadPin | undefined;
}

/** Largest message we accept; SQS allows 256 KiB, Azure queues 64 KiB. */
export const MAX_JOB_MESSAGE_BYTES = 48 * 1024;

export function makeTileJob(
  scene: string,
  source: SourceRef,
  params: ProcessingParams,
  grid: Pick<TileGrid, 'width' | 'height'>,
  window: Window,
  mode: TileMode = { kind: 'create' },
  pin?: ReadPin | undefined,
  code: string = codeVersion(),
): TileJob {
  assertWindowOfGrid(grid, params, window);
  if (pin !== undefined && pin.version !== source.versionToken) {
    throw new InvalidEventError(`read pin names version ${pin.version}, but the job key names ${source.versionToken}`);
  }
  return {
    v: 1,
    code,
    sceneKey: scene,
    jobKey: tileJobKey(scene, window),
    source,
    params,
    grid: { width: grid.width, height: grid.height },
    window: { row: window.row, col: window.col, x: window.x, y: window.y, width: window.width, height: window.height },
    outputKey: outputKeys.tile(scene, window),
    mode,
    ...(pin === undefined
      ? {}
      : { pin: pin.handle === undefined ? { version: pin.version } : { version: pin.version, handle: pin.handle } }),
  };
}

/**
 * The window (row, col) of the grid, exactly. The job key binds only (row,
 * col) and the scene; the pixels come from x, y, width and height, so a job
 * whose geometry differs from what the grid gives would write other pixels
 * under the key. Poison: the message is wrong, no retry can mend it.
 */
function assertWindowOfGrid(grid: Pick<TileGrid, 'width' | 'height'>, params: ProcessingParams, window: Window): void {
  const tilePx = tilingParams(params).tilePx;
  const want = windowAt(tileGrid(grid.width, grid.height, tilePx), window.row, window.col);
  if (want.x !== window.x || want.y !== window.y || want.width !== window.width || want.height !== window.height) {
    throw new InvalidEventError(
      `window ${window.row}_${window.col} of the ${grid.width}x${grid.height} grid at ${tilePx} px is x=${want.x} y=${want.y} ${want.width}x${want.height}, ` +
        `but the job says x=${window.x} y=${window.y} ${window.width}x${window.height}; a window is derived from its grid, never taken from the message`,
    );
  }
}

/** The pin a job reads with: its own, or (a message from before pinning) the version token of its key. */
export function readPinOf(job: TileJob): ReadPin {
  return job.pin ?? { version: job.source.versionToken };
}

export function toJobMessage(job: TileJob): JobMessage {
  return { jobKey: job.jobKey, body: canonicalJson(job) };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * Parse and verify a tile job message. A message that does not parse, or
 * whose keys do not match what its own fields derive to, is poison: it throws
 * InvalidEventError and must end in the dead-letter queue, never be retried.
 */
export function parseTileJob(body: string): TileJob {
  if (typeof body !== 'string') throw new InvalidEventError('tile job message body is not text');
  if (body.length > MAX_JOB_MESSAGE_BYTES)
    throw new InvalidEventError(`tile job message is ${body.length} bytes, more than ${MAX_JOB_MESSAGE_BYTES}`);
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (cause) {
    throw new InvalidEventError(`tile job message is not JSON: ${JSON.stringify(body.slice(0, 80))}`, { cause });
  }
  if (!isRecord(raw) || raw.v !== 1) throw new InvalidEventError('tile job message is not a version 1 tile job object');
  const { source, params, grid, window, mode, pin } = raw;
  if (!isRecord(source) || typeof source.bucket !== 'string' || typeof source.key !== 'string' || typeof source.versionToken !== 'string') {
    throw new InvalidEventError('tile job message has no valid source {bucket, key, versionToken}');
  }
  if (!isRecord(params)) throw new InvalidEventError('tile job message has no params object');
  if (
    !isRecord(window) ||
    !isNat(window.row) ||
    !isNat(window.col) ||
    !isNat(window.x) ||
    !isNat(window.y) ||
    !isNat(window.width) ||
    !isNat(window.height) ||
    window.width === 0 ||
    window.height === 0
  ) {
    throw new InvalidEventError('tile job message has no valid window {row, col, x, y, width, height}');
  }
  // A tile job of another build (it has a source, params and a window) is refused as such before the fields
  // only this build's messages carry (older messages have no grid): the operator learns the real reason.
  const code = codeVersion();
  if (raw.code !== code) {
    throw new CodeVersionMismatchError(
      `tile job ${String(raw.jobKey).slice(0, 16)}...`,
      typeof raw.code === 'string' ? raw.code : undefined,
      code,
    );
  }
  if (!isRecord(grid) || !isNat(grid.width) || !isNat(grid.height)) {
    throw new InvalidEventError('tile job message has no valid grid {width, height} (the raster size its window is cut from)');
  }
  let parsedMode: TileMode;
  if (isRecord(mode) && mode.kind === 'create') parsedMode = { kind: 'create' };
  else if (isRecord(mode) && mode.kind === 'overwrite' && typeof mode.expectedVersion === 'string' && mode.expectedVersion !== '') {
    parsedMode = { kind: 'overwrite', expectedVersion: mode.expectedVersion };
  } else throw new InvalidEventError('tile job message has no valid mode');
  let parsedPin: ReadPin | undefined;
  if (pin !== undefined) {
    if (!isRecord(pin) || typeof pin.version !== 'string' || (pin.handle !== undefined && typeof pin.handle !== 'string')) {
      throw new InvalidEventError('tile job message has an invalid read pin {version, handle?}');
    }
    parsedPin = pin.handle === undefined ? { version: pin.version } : { version: pin.version, handle: pin.handle as string };
  }
  const src: SourceRef = { bucket: source.bucket, key: source.key, versionToken: source.versionToken };
  const win: Window = { row: window.row, col: window.col, x: window.x, y: window.y, width: window.width, height: window.height };
  let expected: TileJob;
  try {
    validateObjectKey(src.key);
    const p = params as ProcessingParams;
    expected = makeTileJob(sceneKey(src, p, code), src, p, { width: grid.width, height: grid.height }, win, parsedMode, parsedPin, code);
  } catch (cause) {
    throw new InvalidEventError(
      `tile job message does not describe a valid job: ${cause instanceof TesseraError ? cause.message : String(cause)}`,
      {
        cause,
      },
    );
  }
  // The keys must be what the fields derive to: a tampered or stale message is poison.
  if (raw.sceneKey !== expected.sceneKey || raw.jobKey !== expected.jobKey || raw.outputKey !== expected.outputKey) {
    throw new InvalidEventError(
      `tile job message keys do not match its source, params and window (jobKey ${String(raw.jobKey).slice(0, 16)}...)`,
    );
  }
  return expected;
}
