import { latLngToCell } from 'h3-js';
import { assertNever, type ClaimResult, type CommitResult } from '../domain/claim.js';
import { InvalidParamsError, LeaseStolenError, SourceChangedError, TesseraError } from '../domain/errors.js';
import {
  BatchUnreadableError,
  batchJobKey,
  batchOutputUri,
  DEFAULT_BATCH_PARAMS,
  type FeatureBatchParams,
  featureBatchParams,
  isReject,
  MAX_BATCH_BYTES,
  parseBatchEvent,
  type RecordReject,
  readPositionRecord,
} from '../domain/feature-batch.js';
import type { SourceRef } from '../domain/job-key.js';
import { streamKeys } from '../domain/key-layout.js';
import type { ClaimStore } from '../ports/claim-store.port.js';
import type { Clock } from '../ports/clock.port.js';
import type { BatchPutResult, CellRecord, FeatureBatchSink } from '../ports/feature-batch-sink.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { decodeBatch } from './batch-decode.js';
import type { DeliveryVerdict } from './deliveries.js';
import { deliveryOwner } from './deliveries.js';
import { keepLease } from './lease-keeper.js';
import { releaseClaim } from './process-tile.js';
import { ownLeaseAnswer, type RedeliverySchedule } from './redelivery.js';

/** What the stream function needs, wired by each compose file: the batch objects' store, claims, the PostGIS sink. */
export interface BatchBackend {
  readonly claims: ClaimStore;
  /** The source store, where streams land their batch objects (the layout's `streams/` area). */
  readonly sources: ObjectStore;
  readonly batches: FeatureBatchSink;
  readonly clock: Clock;
  readonly telemetry: Telemetry;
}

/** Test seams for crash injection: a hook that never returns is the process dying there. */
export interface BatchHooks {
  afterClaim?(batchKey: string): Promise<void>;
  /** After the batch's transaction committed in PostGIS, before the claim's commit. */
  afterInsert?(batchKey: string): Promise<void>;
}

export interface BatchSettings {
  /** This worker instance; claim owners are `${deliveryId}@${owner}`. */
  readonly owner: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly params: FeatureBatchParams;
  readonly hooks?: BatchHooks | undefined;
}

export type BatchOutcome =
  /** This attempt inserted the batch: its new records, those already in (another batch had them), its rejects. */
  | {
      readonly kind: 'inserted';
      readonly batchKey: string;
      readonly format: string;
      readonly records: number;
      readonly inserted: number;
      readonly duplicates: number;
      readonly rejects: number;
      readonly blankLines: number;
    }
  /**
   * The batch was done in PostGIS already (an earlier attempt crashed after its insert, before its claim's commit):
   * nothing inserted, the claim committed now. `doneBy` is the claim owner whose transaction inserted it.
   */
  | { readonly kind: 'already-done'; readonly batchKey: string; readonly doneBy: string }
  | {
      readonly kind: 'claim-rejected';
      readonly reason: 'held' | 'done';
      readonly by?: string | undefined;
      readonly leaseUntil?: number | undefined;
      readonly batchKey: string;
    }
  /** The insert is in (or was found in), but the claim was taken over meanwhile: the alarm of docs/architecture.md. */
  | { readonly kind: 'lease-stolen'; readonly batchKey: string }
  /** The object no longer has the event's version: nothing inserted, the claim given back, settled once. */
  | { readonly kind: 'source-changed'; readonly batchKey: string; readonly expected: string; readonly current: string | undefined };

export interface ProcessBatchOptions {
  /** The claim is held by `claimOwner` until then already (a takeover of its own message's lease): no claim step. */
  readonly heldUntil?: number | undefined;
}

/**
 * Process one batch object through the gates: one claim for all its records.
 *
 * Timeline (crash points and what each leaves behind; docs/feature-batches.md):
 * 0. before the claim: the parameters are valid and the batch key is derived from the object's bucket, decoded
 *    key and version token (poison otherwise: no claim, no read).
 * 1. claim the batch key: one conditional write. Losing (`held`/`done`) is a normal answer: nothing is read.
 *    (crash after claim: a CLAIMED row that lapses; a redelivery takes it over, as for a tile)
 * 2. a takeover (the claim answered with a previous owner, or the caller took its own message's lease over) first
 *    asks the sink whether the batch is done: an earlier attempt may have crashed between its insert and its
 *    commit. Done: commit the claim, read nothing, insert nothing (`already-done`).
 * 3. read the object, pinned to the event's version (SourceChanged: claim given back, `source-changed`, settled
 *    once), decode it (an unreadable object is poison: BatchUnreadableError, claim given back), read every record
 *    into a position or a reject, and compute each position's H3 cell. The lease is renewed every lease/3 meanwhile.
 * 4. ONE PostGIS transaction: the batch row with this claim owner (the gate: `ON CONFLICT DO NOTHING`, first, so a
 *    concurrent attempt waits and then finds it), every record `ON CONFLICT (record_id) DO NOTHING` (a record another
 *    batch carried counts once), every reject with its line. `already-done` from the gate: a zombie got there first;
 *    nothing was written. A failure rolls all of it back and gives the claim back.
 *    (crash after the insert: the batch row exists, the claim is CLAIMED; the takeover finds it at step 2)
 * 5. commit the claim, conditional on still owning it. `lease-stolen` is an alarm (ERROR): the records are in once
 *    whoever committed. A commit that throws gives the claim back first.
 *    (crash after commit, before ack: a redelivery is rejected at the claim with `done`, reading nothing)
 */
export async function processBatch(
  backend: BatchBackend,
  settings: BatchSettings,
  source: SourceRef,
  claimOwner = settings.owner,
  options: ProcessBatchOptions = {},
): Promise<BatchOutcome> {
  const { claims, clock, telemetry } = backend;
  const params = featureBatchParams(settings.params);
  const batchKey = batchJobKey(source, params);
  const fields = { batchKey, key: source.key, owner: claimOwner };

  const now = clock.now();
  const claim: ClaimResult =
    options.heldUntil === undefined
      ? await claims.claim({
          jobId: batchKey,
          owner: claimOwner,
          now,
          leaseUntil: now + settings.leaseMs,
          expiresAt: now + settings.retentionMs,
        })
      : {
          kind: 'claimed',
          row: {
            jobId: batchKey,
            state: 'CLAIMED',
            owner: claimOwner,
            leaseUntil: options.heldUntil,
            expiresAt: now + settings.retentionMs,
          },
          stolenFrom: claimOwner,
        };
  switch (claim.kind) {
    case 'claimed':
      telemetry.count('claimed');
      if (claim.stolenFrom !== undefined && options.heldUntil === undefined) {
        telemetry.count('lease-taken-over');
        telemetry.log('WARN', 'lease-taken-over', { ...fields, previousOwner: claim.stolenFrom });
      }
      break;
    case 'held':
      telemetry.count('claim-rejected');
      telemetry.log('INFO', 'claim-rejected', { ...fields, reason: 'held', by: claim.by, leaseUntil: claim.leaseUntil });
      return { kind: 'claim-rejected', reason: 'held', by: claim.by, leaseUntil: claim.leaseUntil, batchKey };
    case 'done':
      telemetry.count('claim-rejected');
      telemetry.log('INFO', 'claim-rejected', { ...fields, reason: 'done' });
      return { kind: 'claim-rejected', reason: 'done', batchKey };
    default:
      return assertNever(claim, 'claim result');
  }
  await settings.hooks?.afterClaim?.(batchKey);

  const keeper = keepLease(backend, { jobId: batchKey, owner: claimOwner }, settings.leaseMs, claim.row.leaseUntil, fields);
  let result: Extract<BatchOutcome, { kind: 'inserted' | 'already-done' }>;
  try {
    // A takeover may find the work of the attempt it replaces: an insert whose claim never committed.
    const done = claim.stolenFrom === undefined ? undefined : await backend.batches.batchDone(batchKey);
    if (done !== undefined) {
      result = { kind: 'already-done', batchKey, doneBy: done.owner };
    } else {
      const batch = await readBatch(backend, source, params);
      const put: BatchPutResult = await backend.batches.putBatch({
        batchKey,
        owner: claimOwner,
        pipeline: params.pipeline,
        source: { bucket: source.bucket, key: source.key, versionToken: source.versionToken },
        ...batch,
      });
      switch (put.kind) {
        case 'inserted':
          result = {
            kind: 'inserted',
            batchKey,
            format: batch.format,
            records: batch.records.length,
            inserted: put.inserted,
            duplicates: put.duplicates,
            rejects: put.rejects,
            blankLines: batch.blankLines,
          };
          break;
        case 'already-done':
          result = { kind: 'already-done', batchKey, doneBy: put.done.owner };
          break;
        default:
          return assertNever(put, 'batch put result');
      }
    }
    await keeper.stop();
  } catch (error) {
    await keeper.stop();
    // Nothing of this attempt is in PostGIS (its transaction rolled back or never began): give the claim back so
    // the redelivery (or, for poison, an operator's replay) claims at once.
    await releaseClaim(backend, batchKey, claimOwner);
    if (error instanceof SourceChangedError) {
      telemetry.count('source-changed');
      telemetry.log('WARN', 'batch-source-changed', { ...fields, expected: error.expectedVersion, current: error.currentVersion });
      return { kind: 'source-changed', batchKey, expected: error.expectedVersion, current: error.currentVersion };
    }
    throw error;
  }
  switch (result.kind) {
    case 'inserted':
      telemetry.count('batch-inserted');
      telemetry.count('records-inserted', result.inserted);
      telemetry.count('records-duplicate', result.duplicates);
      telemetry.count('records-rejected', result.rejects);
      telemetry.log('INFO', 'batch-inserted', {
        ...fields,
        format: result.format,
        records: result.records,
        inserted: result.inserted,
        duplicates: result.duplicates,
        rejects: result.rejects,
        blankLines: result.blankLines,
      });
      break;
    case 'already-done':
      telemetry.count('batch-already-done');
      telemetry.log('INFO', 'batch-already-done', { ...fields, doneBy: result.doneBy });
      break;
    default:
      assertNever(result, 'batch result');
  }
  await settings.hooks?.afterInsert?.(batchKey);

  let commit: CommitResult;
  try {
    commit = await claims.commit({ jobId: batchKey, owner: claimOwner, outputUri: batchOutputUri(batchKey), now: clock.now() });
  } catch (error) {
    // As for a tile (soak seed 16): give the claim back, so the redelivery claims at once; it then finds the batch done.
    await releaseClaim(backend, batchKey, claimOwner);
    throw error;
  }
  switch (commit.kind) {
    case 'committed':
      telemetry.count('committed');
      return result;
    case 'lease-stolen': {
      const err = new LeaseStolenError(claims.name, batchKey, claimOwner, commit.current?.owner);
      telemetry.count('lease-stolen');
      telemetry.log('ERROR', 'lease-stolen', {
        ...fields,
        holder: commit.current?.owner,
        state: commit.current?.state,
        message: err.message,
      });
      return { kind: 'lease-stolen', batchKey };
    }
    default:
      return assertNever(commit, 'commit result');
  }
}

/** A batch object's records, read and checked: positions with their cells, rejects with their lines. */
async function readBatch(
  backend: BatchBackend,
  source: SourceRef,
  params: FeatureBatchParams,
): Promise<{ format: string; records: CellRecord[]; rejects: RecordReject[]; blankLines: number }> {
  // One read, pinned to the event's version, one byte past the limit so a larger object is seen (and refused) whole.
  const bytes = await backend.sources.getRange(source.key, 0, MAX_BATCH_BYTES + 1, { version: source.versionToken });
  const decoded = await decodeBatch(source.key, bytes);
  const records: CellRecord[] = [];
  const rejects: RecordReject[] = [];
  for (const entry of decoded.entries) {
    if ('undecodable' in entry) {
      rejects.push({ line: entry.line, reason: 'unparsable', detail: entry.undecodable, excerpt: entry.excerpt });
      continue;
    }
    const r = readPositionRecord(entry.text, entry.line, params.pipeline);
    if (isReject(r)) rejects.push(r);
    else {
      // Every field named (no spread): this runs once per record.
      records.push({
        recordId: r.recordId,
        givenId: r.givenId,
        vessel: r.vessel,
        timeMs: r.timeMs,
        lon: r.lon,
        lat: r.lat,
        speed: r.speed,
        line: r.line,
        cell: latLngToCell(r.lat, r.lon, params.h3_resolution),
      });
    }
  }
  return { format: decoded.format, records, rejects, blankLines: decoded.blankLines };
}

/** What a trigger does with one delivery of a batch event. */
export type BatchVerdict = { readonly kind: 'ack'; readonly outcome: BatchOutcome } | Exclude<DeliveryVerdict, { kind: 'ack' }>;

export interface BatchDelivery {
  /** The batch object, as the trigger read it from its event (bucket, URL-decoded key, version token). */
  readonly source: SourceRef;
  /** The queue's message id, stable across redeliveries of one message. */
  readonly deliveryId: string;
  readonly receiveCount?: number | undefined;
  /** How the transport redelivers (redelivery.ts); without one, a delivery meeting its own lease waits for it. */
  readonly schedule?: RedeliverySchedule | undefined;
}

const NEVER_DEAD_LETTERS: RedeliverySchedule = {
  transport: 'local',
  maxDeliveries: undefined,
  minGapMs: 0,
  settableGapMs: Number.MAX_SAFE_INTEGER,
};

/** A delivery whose body is a neutral batch event (the local queue, the parity matrix): its source, or poison. */
export const batchSourceOf = (body: string): SourceRef => parseBatchEvent(body).source;

/**
 * Run one delivery of a batch and decide its fate, by the rules a tile delivery follows (deliveries.ts): held by
 * another message is a duplicate (ack); held by an earlier attempt of this message waits or takes over by the
 * transport's schedule (redelivery.ts); an unreadable object or a bad event is poison (settled at once); anything
 * else that throws is retried. Never throws.
 */
export async function handleBatchDelivery(backend: BatchBackend, settings: BatchSettings, delivery: BatchDelivery): Promise<BatchVerdict> {
  const { telemetry, clock } = backend;
  const meta = { deliveryId: delivery.deliveryId, receiveCount: delivery.receiveCount, key: delivery.source.key };
  let outcome: BatchOutcome;
  try {
    const owner = deliveryOwner(delivery.deliveryId, settings.owner);
    outcome = await processBatch(backend, settings, delivery.source, owner);
    if (outcome.kind === 'claim-rejected' && outcome.reason === 'held' && outcome.by?.startsWith(`${delivery.deliveryId}@`) === true) {
      const holder = outcome.by;
      const leaseEndsInMs = (outcome.leaseUntil ?? 0) - clock.now();
      const answer = ownLeaseAnswer(delivery.schedule ?? NEVER_DEAD_LETTERS, delivery.receiveCount, leaseEndsInMs);
      switch (answer.kind) {
        case 'wait':
          telemetry.log('INFO', 'own-attempt-holds-lease', { ...meta, batchKey: outcome.batchKey, by: holder, delayMs: answer.delayMs });
          return {
            kind: 'retry',
            error: new Error(`an earlier attempt of delivery ${delivery.deliveryId} holds the batch's lease`),
            delayMs: answer.delayMs,
          };
        case 'take-over': {
          // One conditional operation in the holder's name (deliveries.ts, takeOverOwnLease): the batch then runs as it.
          const now = clock.now();
          const beat = await backend.claims.heartbeat({ jobId: outcome.batchKey, owner: holder, now, leaseUntil: now + settings.leaseMs });
          if (beat.kind === 'extended') {
            telemetry.count('lease-taken-over');
            telemetry.log('WARN', 'own-lease-taken-over', { ...meta, batchKey: outcome.batchKey, holder, leaseEndsInMs });
            outcome = await processBatch(backend, settings, delivery.source, holder, { heldUntil: beat.leaseUntil });
          } else {
            outcome = await processBatch(backend, settings, delivery.source, owner);
          }
          if (
            outcome.kind === 'claim-rejected' &&
            outcome.reason === 'held' &&
            outcome.by?.startsWith(`${delivery.deliveryId}@`) === true
          ) {
            return {
              kind: 'retry',
              error: new Error(`an earlier attempt of delivery ${delivery.deliveryId} still holds the batch's lease`),
            };
          }
          break;
        }
        default:
          return assertNever(answer, 'own-lease answer');
      }
    }
  } catch (error) {
    const err = error instanceof Error ? error : new Error(String(error));
    if (err instanceof TesseraError && !err.retryable) {
      telemetry.count('poison');
      telemetry.log('ERROR', err instanceof BatchUnreadableError ? 'poison-batch' : 'poison-message', { ...meta, error: err });
      return { kind: 'poison', error: err };
    }
    telemetry.count('failed');
    telemetry.log('WARN', 'batch-failed', { ...meta, error: err });
    return { kind: 'retry', error: err };
  }
  return { kind: 'ack', outcome };
}

/**
 * Whether an object-created event names a batch object: under the layout's `streams/` area and not a folder marker
 * (a console's "create folder" writes a zero-byte `streams/x/`). Every cloud's stream trigger applies it: Eventarc
 * cannot filter by prefix, and an S3 or Event Grid filter changed by hand must not turn a scene into a batch.
 */
export function acceptBatchObject(key: string): boolean {
  return key.startsWith(streamKeys.root()) && key.length > streamKeys.root().length && !key.endsWith('/');
}

/** The stream function's settings on a deployed stack: the tile worker's lease and retention, the default stream. */
export function streamSettings(owner: string, config: { readonly leaseSec: number; readonly retentionSec: number }): BatchSettings {
  return { owner, leaseMs: config.leaseSec * 1000, retentionMs: config.retentionSec * 1000, params: DEFAULT_BATCH_PARAMS };
}

/** The sink a stream function writes to, or the typed refusal that says how to give it one. */
export function requireBatchSink(sink: FeatureBatchSink | undefined): FeatureBatchSink {
  if (sink !== undefined) return sink;
  throw new InvalidParamsError(
    'the stream function has no PostGIS to write batches to: set tessera:featureSinkUrl on the stack (docs/feature-batches.md), `pulumi up`, then redrive the dead-letter queue',
  );
}
