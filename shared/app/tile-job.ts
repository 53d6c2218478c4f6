import { canonicalJson } from '../domain/canonical-json.js';
import { InvalidEventError, TesseraError } from '../domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef, sceneKey, tileJobKey } from '../domain/job-key.js';
import { validateObjectKey } from '../domain/object-key.js';
import type { Window } from '../domain/tile-grid.js';
import type { JobMessage } from '../ports/job-queue.port.js';

/** How a tile's output is written: create-only, or a repair under a known version. */
export type TileMode = { readonly kind: 'create' } | { readonly kind: 'overwrite'; readonly expectedVersion: string };

/** One tile job on the wire. Everything in it is derivable from (source, params, window). */
export interface TileJob {
  readonly v: 1;
  readonly sceneKey: string;
  readonly jobKey: string;
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  readonly window: Window;
  readonly outputKey: string;
  readonly mode: TileMode;
}

/** Largest message we accept; SQS allows 256 KiB, Azure queues 64 KiB. */
export const MAX_JOB_MESSAGE_BYTES = 48 * 1024;

export function makeTileJob(
  scene: string,
  source: SourceRef,
  params: ProcessingParams,
  window: Window,
  mode: TileMode = { kind: 'create' },
): TileJob {
  return {
    v: 1,
    sceneKey: scene,
    jobKey: tileJobKey(scene, window),
    source,
    params,
    window,
    outputKey: outputKeys.tile(scene, window),
    mode,
  };
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
  const { source, params, window, mode } = raw;
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
  let parsedMode: TileMode;
  if (isRecord(mode) && mode.kind === 'create') parsedMode = { kind: 'create' };
  else if (isRecord(mode) && mode.kind === 'overwrite' && typeof mode.expectedVersion === 'string' && mode.expectedVersion !== '') {
    parsedMode = { kind: 'overwrite', expectedVersion: mode.expectedVersion };
  } else throw new InvalidEventError('tile job message has no valid mode');
  const src: SourceRef = { bucket: source.bucket, key: source.key, versionToken: source.versionToken };
  const win: Window = { row: window.row, col: window.col, x: window.x, y: window.y, width: window.width, height: window.height };
  let expected: TileJob;
  try {
    validateObjectKey(src.key);
    expected = makeTileJob(sceneKey(src, params as ProcessingParams), src, params as ProcessingParams, win, parsedMode);
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
