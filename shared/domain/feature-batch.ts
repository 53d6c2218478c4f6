import { hash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import { InvalidEventError, InvalidParamsError, TesseraError } from './errors.js';
import type { SourceRef } from './job-key.js';
import { validateObjectKey } from './object-key.js';

/**
 * Feature streams landed as batch objects (docs/feature-batches.md): the design notes' high-volume case,
 * "claiming once per micro-batch and making the batch's write conditional".
 *
 * The unit of work is one batch object (an Amazon Data Firehose delivery, a Pub/Sub Cloud Storage
 * subscription's file, an Event Hubs Capture file, a local NDJSON file): one claim per object, keyed like
 * a scene, and one PostGIS transaction that inserts its records and marks it done. The identity of a record
 * is what makes a record duplicated into two batch objects count once.
 */

/** The parameters a batch is processed with: part of its job key, so a change processes every batch anew. */
export interface FeatureBatchParams {
  /** The stream's name: records of two pipelines never share an identity (a record id is namespaced by it). */
  readonly pipeline: string;
  /** The parsing rules' version: bump it when what a record means changes (a new field, a fixed rule). */
  readonly version: string;
  /** The H3 resolution of each record's cell (0-15), computed at insert; 7 is about 5 km² a cell. */
  readonly h3_resolution: number;
}

/**
 * The default stream: AIS positions. Unlike a scene key, a batch key does not carry the render path's code
 * version (code-version.ts): a new build re-reads no batch, and a change in the parsing rules is a `version` bump.
 */
export const DEFAULT_BATCH_PARAMS: FeatureBatchParams = { pipeline: 'ais-positions', version: '1', h3_resolution: 7 };

/** Largest batch object read (after decompression): Firehose buffers at most 128 MiB, a Capture window is sized by its owner. */
export const MAX_BATCH_BYTES = 256 * 1024 * 1024;

/** Records inserted per statement inside a batch's one transaction (one statement of a million rows would hold a huge array). */
export const INSERT_CHUNK = 5_000;

const PIPELINE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** The parameters, checked: a bad one is refused before any claim (poison), with what to change. */
export function featureBatchParams(raw: unknown): FeatureBatchParams {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new InvalidParamsError('feature batch parameters must be an object');
  const p = raw as Record<string, unknown>;
  const extra = Object.keys(p).filter((k) => k !== 'pipeline' && k !== 'version' && k !== 'h3_resolution');
  if (extra.length > 0) throw new InvalidParamsError(`feature batch parameters have unknown fields ${extra.join(', ')}; remove them`);
  if (typeof p.pipeline !== 'string' || !PIPELINE_NAME.test(p.pipeline)) {
    throw new InvalidParamsError(
      `feature batch pipeline ${JSON.stringify(p.pipeline)} must be 1-63 lower-case letters, digits, '.', '_' or '-' (e.g. ais-positions)`,
    );
  }
  if (typeof p.version !== 'string' || p.version === '') {
    throw new InvalidParamsError(
      'feature batch version must be a non-empty string, so that changing the parsing rules changes every batch key',
    );
  }
  if (!Number.isInteger(p.h3_resolution) || (p.h3_resolution as number) < 0 || (p.h3_resolution as number) > 15) {
    throw new InvalidParamsError(`feature batch h3_resolution must be a whole number from 0 to 15, got ${JSON.stringify(p.h3_resolution)}`);
  }
  return { pipeline: p.pipeline, version: p.version, h3_resolution: p.h3_resolution as number };
}

/** SHA-256 (hex) of UTF-8 text: node:crypto's one-shot `hash`, the same digest as createHash without a Hash object per call. */
const sha256 = (text: string): string => hash('sha256', text, 'hex');

/**
 * The batch's job key: SHA-256 over a domain tag, the bucket, the URL-decoded key, the version token and the
 * canonical parameters, exactly the scene key's material (job-key.ts) under its own tag, so one object read as
 * a batch and as a scene never shares a claim row. Two deliveries of one object version give one key.
 *
 * @example
 * batchJobKey({ bucket: 'landing', key: 'streams/ais/2025/06/01/12/part-0001.ndjson', versionToken: '3HL4kqtJ' }, DEFAULT_BATCH_PARAMS)
 */
export function batchJobKey(source: SourceRef, params: FeatureBatchParams): string {
  if (typeof source.bucket !== 'string' || source.bucket === '') throw new InvalidEventError('batch source bucket is empty');
  validateObjectKey(source.key);
  if (typeof source.versionToken !== 'string' || source.versionToken === '') {
    throw new InvalidEventError(
      `batch object ${source.bucket}/${source.key} has no version token; the batch key needs the ETag, generation or versionId of the object`,
    );
  }
  if (source.assets !== undefined) throw new InvalidEventError(`batch object ${source.key} names band assets; a batch is one object`);
  return sha256(['feature-batch', source.bucket, source.key, source.versionToken, canonicalJson(featureBatchParams(params))].join('\n'));
}

/** The claim row's output URI of a done batch: where its commit evidence lives (the batch row in PostGIS). */
export const batchOutputUri = (batchKey: string): string => `postgis:feature_batches/${batchKey}`;

/** The message a batch trigger carries on the neutral transports (the local queue, the parity matrix). */
export interface BatchEvent {
  readonly kind: 'feature-batch';
  readonly source: SourceRef;
}

/** The message body of a batch event. */
export const batchEventBody = (source: SourceRef): string =>
  JSON.stringify({ kind: 'feature-batch', source: { bucket: source.bucket, key: source.key, versionToken: source.versionToken } });

/** A batch event from a message body; anything else is poison (InvalidEventError). */
export function parseBatchEvent(body: string): BatchEvent {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (cause) {
    throw new InvalidEventError(`batch event is not JSON: ${JSON.stringify(body.slice(0, 80))}`, { cause });
  }
  const v = value as { kind?: unknown; source?: { bucket?: unknown; key?: unknown; versionToken?: unknown } } | null;
  const s = v?.source;
  if (v?.kind !== 'feature-batch' || typeof s?.bucket !== 'string' || typeof s.key !== 'string' || typeof s.versionToken !== 'string') {
    throw new InvalidEventError('message is not a feature batch event {kind: "feature-batch", source: {bucket, key, versionToken}}');
  }
  return { kind: 'feature-batch', source: { bucket: s.bucket, key: validateObjectKey(s.key), versionToken: s.versionToken } };
}

/**
 * A batch object that cannot be read as a batch at all: a broken gzip or Avro container, bytes past
 * {@link MAX_BATCH_BYTES}. Poison: no retry can read it, it is dead-lettered at its first delivery and its claim
 * given back. (A bad record inside a readable batch is never this: it is a reject, kept with its line.)
 */
export class BatchUnreadableError extends TesseraError {
  readonly key: string;
  constructor(key: string, why: string, options: { cause?: unknown } = {}) {
    super(
      'BATCH_UNREADABLE',
      `batch object ${JSON.stringify(key)} cannot be read as a batch: ${why}; fix the producer (or the object) and upload it again: a new version is a new batch`,
      options,
    );
    this.key = key;
  }
}

/** One valid position record, with its identity and its place in the batch. */
export interface PositionRecord {
  /** SHA-256 (hex) of the pipeline and the record's given id, or of its canonical JSON: UNIQUE in the sink. */
  readonly recordId: string;
  /** The record's own `id`, when it had one. */
  readonly givenId: string | undefined;
  readonly vessel: string;
  readonly timeMs: number;
  readonly lon: number;
  readonly lat: number;
  /** Speed over ground (knots), when given. */
  readonly speed: number | null;
  /** 1-based: the line of an NDJSON batch, the record's index in an Avro container. */
  readonly line: number;
}

/** Why a record is kept in the rejects table rather than inserted. */
export const REJECT_REASONS = [
  'unparsable',
  'not-an-object',
  'bad-id',
  'no-vessel',
  'bad-time',
  'no-position',
  'out-of-range',
  'bad-speed',
] as const;
export type RejectReason = (typeof REJECT_REASONS)[number];

/** A record that is not a position: kept with its batch and line, never dropped in silence. */
export interface RecordReject {
  readonly line: number;
  readonly reason: RejectReason;
  /** What is wrong with it, in words. */
  readonly detail: string;
  /** The start of the record as it came (at most {@link EXCERPT_CHARS} characters). */
  readonly excerpt: string;
}

export const EXCERPT_CHARS = 200;
const ISO_WITH_ZONE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
/** 2000 to 2100: a time outside is a unit mistake (epoch seconds read as milliseconds fall in 1970) or garbage, not a position. */
const MIN_TIME_MS = 946_684_800_000;
const MAX_TIME_MS = 4_102_444_800_000;

/** The start of a record for the rejects table; NUL (which PostgreSQL text cannot hold) spelled out. */
const excerptOf = (text: string): string =>
  (text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS)}...` : text).replaceAll('\u0000', '\\u0000');

/** A record's reject. (A function of the module, not a closure made per record: the hot path makes none.) */
const rejected = (text: string, line: number, reason: RejectReason, detail: string): RecordReject => ({
  line,
  reason,
  detail,
  excerpt: excerptOf(text),
});

/**
 * Read one record of a stream (its text, as one NDJSON line or one Avro record's body held) into a position or a reject.
 *
 * The fields (docs/feature-batches.md): `vessel` (or `mmsi`): a string or a whole number; `time`: ISO-8601 with a zone
 * (`Z` or `+hh:mm`) or epoch milliseconds; `lon` in [-180, 180] and `lat` in [-90, 90], numbers (AIS's 181 / 91
 * "not available" are out of range); `speed`: optional, a number >= 0; `id`: optional, a string or a whole number
 * naming the record. Other fields are kept in the identity (a record is the whole object) but not stored.
 *
 * The identity: with an `id`, SHA-256 of the pipeline and the id; else of the pipeline and the record's canonical
 * JSON (RFC 8785: key order, whitespace and number spelling do not matter), so a byte-identical or
 * re-serialised duplicate counts once.
 */
export function readPositionRecord(text: string, line: number, pipeline: string): PositionRecord | RecordReject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return rejected(text, line, 'unparsable', `not JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return rejected(text, line, 'not-an-object', 'a record is a JSON object');
  const r = value as Record<string, unknown>;

  let givenId: string | undefined;
  if (r.id !== undefined) {
    if (typeof r.id === 'string' && r.id !== '' && r.id.length <= 256) givenId = r.id;
    else if (Number.isSafeInteger(r.id)) givenId = String(r.id);
    else return rejected(text, line, 'bad-id', '`id` must be a non-empty string of at most 256 characters or a whole number');
  }
  // PostgreSQL text cannot hold NUL: a record naming one would fail its whole batch's insert on every retry.
  if (givenId?.includes('\u0000')) return rejected(text, line, 'bad-id', '`id` holds a NUL character');
  // Nor can it hold a lone UTF-16 surrogate (JSON's "\ud800" escape): such text would fail the batch's insert, or be
  // stored altered.
  if (givenId !== undefined && !givenId.isWellFormed())
    return rejected(text, line, 'bad-id', '`id` holds a lone UTF-16 surrogate (\\ud800-\\udfff)');
  const rawVessel = r.vessel ?? r.mmsi;
  const vessel =
    typeof rawVessel === 'string' && rawVessel !== '' ? rawVessel : Number.isSafeInteger(rawVessel) ? String(rawVessel) : undefined;
  if (vessel === undefined || vessel.length > 64 || vessel.includes('\u0000') || !vessel.isWellFormed()) {
    return rejected(
      text,
      line,
      'no-vessel',
      '`vessel` (or `mmsi`) must be a non-empty string of at most 64 characters (no NUL, no lone surrogate) or a whole number',
    );
  }

  let timeMs: number;
  if (typeof r.time === 'number') timeMs = r.time;
  else if (typeof r.time === 'string' && ISO_WITH_ZONE.test(r.time)) timeMs = Date.parse(r.time);
  else return rejected(text, line, 'bad-time', '`time` must be ISO-8601 with a zone (2025-06-01T12:00:00Z) or epoch milliseconds');
  if (!Number.isFinite(timeMs) || timeMs < MIN_TIME_MS || timeMs > MAX_TIME_MS) {
    return rejected(
      text,
      line,
      'bad-time',
      `\`time\` ${JSON.stringify(r.time)} is not a time from 2000 to 2100 (epoch milliseconds, not seconds)`,
    );
  }

  if (typeof r.lon !== 'number' || typeof r.lat !== 'number')
    return rejected(text, line, 'no-position', '`lon` and `lat` must both be numbers');
  if (r.lon < -180 || r.lon > 180 || r.lat < -90 || r.lat > 90) {
    return rejected(text, line, 'out-of-range', `lon ${r.lon}, lat ${r.lat} is not on the globe (lon -180..180, lat -90..90)`);
  }
  let speed: number | null = null;
  if (r.speed !== undefined && r.speed !== null) {
    // JSON.parse reads 1e999 as Infinity: no speed.
    if (typeof r.speed !== 'number' || !Number.isFinite(r.speed) || r.speed < 0)
      return rejected(text, line, 'bad-speed', '`speed` must be a finite number >= 0 (knots) when given');
    speed = r.speed;
  }

  let material: string;
  if (givenId !== undefined) material = `id\n${givenId}`;
  else {
    try {
      material = `record\n${canonicalRecordJson(r)}`;
    } catch (error) {
      return rejected(text, line, 'unparsable', (error as Error).message);
    }
  }
  return { recordId: sha256(`${pipeline}\n${material}`), givenId, vessel, timeMs, lon: r.lon, lat: r.lat, speed, line };
}

/**
 * {@link canonicalJson} of a parsed record, the same text, three times quicker for the common flat record: when every
 * value is a well-formed string, a finite number, a boolean or null, and no key starts with a digit or is `__proto__`,
 * a copy with the keys inserted in UTF-16 code unit order is serialised by JSON.stringify in that order, and that is RFC
 * 8785 already (numbers in ECMAScript's shortest form, -0 as `0`, strings escaped alike). A key that starts with a digit
 * may be an array index, which an object lists first whatever the insertion order; `__proto__` would set the copy's
 * prototype. Anything else (a nested value, text with a lone surrogate, a number JSON.parse made infinite) takes
 * canonicalJson, which also refuses what has no canonical form. Every stored record's identity depends on this text:
 * the unit tests pin it to canonicalJson and to record ids computed before this fast path existed.
 */
export function canonicalRecordJson(r: Readonly<Record<string, unknown>>): string {
  // Array.prototype.sort's default order compares UTF-16 code units: RFC 8785's key order.
  const keys = Object.keys(r).sort();
  const ordered: Record<string, unknown> = {};
  for (const k of keys) {
    const v = r[k];
    const first = k.charCodeAt(0);
    if (
      (first >= 0x30 && first <= 0x39) ||
      k === '__proto__' ||
      (typeof v === 'string' ? !v.isWellFormed() : typeof v === 'number' ? !Number.isFinite(v) : v !== null && typeof v !== 'boolean')
    ) {
      return canonicalJson(r);
    }
    ordered[k] = v;
  }
  return JSON.stringify(ordered);
}

/** Whether {@link readPositionRecord} gave a reject. */
export const isReject = (r: PositionRecord | RecordReject): r is RecordReject => 'reason' in r;
