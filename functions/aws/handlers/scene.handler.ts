import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { Context, S3Event, S3EventRecord, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { DeliveryVerdict } from '../../../shared/app/deliveries.js';
import type { StaleEventReason } from '../../../shared/app/fan-out.js';
import { poisonReason } from '../../../shared/app/poison.js';
import { settleRecords } from '../../../shared/app/record-batch.js';
import { acceptSourceObject } from '../../../shared/app/scene-event.js';
import { eventTimeMs, fanOutSourceEvent, type StacEventDelivery } from '../../../shared/app/stac-scene.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { InvalidEventError, TesseraError } from '../../../shared/domain/errors.js';
import type { SourceRef } from '../../../shared/domain/job-key.js';
import { decodeEventKey } from '../../../shared/domain/object-key.js';
import { ENV } from '../../../shared/domain/runtime-config.js';
import { type AwsRuntime, lambdaRuntime } from '../compose.js';
import { deadLetterSinkOf, queueUrlOf, receiveCountOf, requeueDelaySeconds, settleSqsRecords } from './sqs-batch.js';

/** What the scene handler did with one S3 notification record. */
export type SceneRecordOutcome =
  | { readonly kind: 'fanned-out'; readonly sceneKey: string; readonly enqueued: number; readonly source: SourceRef }
  | {
      readonly kind: 'ignored';
      readonly reason:
        | 'not-a-create'
        | 'other-bucket'
        | 'filtered-out'
        | 'test-event'
        | 'source-changed'
        | 'source-gone'
        | StaleEventReason;
      readonly key?: string | undefined;
    };

/**
 * The scene trigger. Accepts S3 event notifications delivered either
 *   - directly (S3 invokes the function asynchronously with an S3Event), or
 *   - through SQS (S3 -> SQS, optionally S3 -> SNS -> SQS): each record body
 *     is the S3 notification JSON. This is the recommended wiring: the queue
 *     buffers bursts and its DLQ keeps what could not be fanned out.
 *
 * For each ObjectCreated record it URL-decodes the key (S3 form-encodes it:
 * `+` is a space), drops (and counts as `event-ignored`) objects outside the
 * configured prefix/suffix or bucket, takes the version token (the versionId
 * on a versioned bucket, else the ETag, quoted as HeadObject returns it) and
 * fans the scene out: one tile job per window. A duplicate notification
 * repeats the fan-out harmlessly: same keys, every duplicate job stops at its claim.
 *
 * On a STAC stack (`tessera:stacAssets`) the object is a STAC Item and its
 * scene is the item's band objects (shared/app/stac-scene.ts): a band not in
 * the bucket yet is a retry (the record's receive count and eventTime bound
 * it; then it is dead-lettered as SCENE_INCOMPLETE).
 *
 * EventBridge "Object Created" events are not accepted: their key encoding is
 * not the notification's, and guessing would change job keys. Use a
 * notification (direct or via SQS) as infra/ does.
 */
export function createSceneHandler(runtime: AwsRuntime | (() => AwsRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;

  async function handleS3Record(record: S3EventRecord, delivery: StacEventDelivery = {}): Promise<SceneRecordOutcome> {
    const { backend, config, filter } = rt();
    const { telemetry } = backend;
    const ignore = (reason: Extract<SceneRecordOutcome, { kind: 'ignored' }>['reason'], key?: string): SceneRecordOutcome => {
      telemetry.count('event-ignored');
      telemetry.log(reason === 'other-bucket' ? 'WARN' : 'INFO', 'event-ignored', {
        reason,
        bucket: record.s3?.bucket?.name,
        key,
        // Not `event`: that field is the log line's own name, which this would overwrite.
        eventName: record.eventName,
      });
      return { kind: 'ignored', reason, key };
    };
    if (typeof record.eventName !== 'string' || !record.eventName.startsWith('ObjectCreated:')) return ignore('not-a-create');
    const bucket = record.s3?.bucket?.name;
    const rawKey = record.s3?.object?.key;
    if (typeof bucket !== 'string' || typeof rawKey !== 'string')
      throw new InvalidEventError('S3 notification record has no s3.bucket.name or s3.object.key');
    const key = decodeEventKey(rawKey);
    if (bucket !== config.sourceBucket) return ignore('other-bucket', key);
    if (!acceptSourceObject(key, filter)) return ignore('filtered-out', key);
    const source: SourceRef = { bucket, key, versionToken: versionTokenOf(record) };
    // The pin at fan-out compares the event's token with the stored object (the versionId on a
    // versioned bucket, not the ETag): a late event for an overwritten object is stale, and the
    // newer version's own notification makes its scene.
    const fan = await fanOutSourceEvent(backend, source, config, { ...delivery, eventTimeMs: eventTimeMs(record.eventTime) });
    switch (fan.kind) {
      case 'fanned-out':
        return { kind: 'fanned-out', sceneKey: fan.result.sceneKey, enqueued: fan.result.enqueued, source };
      case 'source-changed':
        return ignore('source-changed', key);
      case 'source-gone':
        return ignore('source-gone', key);
      case 'stale':
        return ignore(fan.reason, key);
      default:
        return assertNever(fan, 'scene fan-out');
    }
  }

  /**
   * One SQS record, settled per S3 record inside it (shared/app/record-batch.ts):
   * a body of several records is never failed whole for one bad record (its
   * good records would fan out again on every receive and end in the DLQ
   * beside it). Each failed record goes alone, as a one-record notification:
   * poison into the DLQ, a transient failure back onto this queue with a
   * backoff; then the message is acked. A body of one record gets that
   * record's verdict.
   */
  async function handleSqsRecord(record: SQSRecord): Promise<SceneVerdict> {
    const r = rt();
    const { telemetry } = r.backend;
    const fields = { messageId: record.messageId, receiveCount: receiveCountOf(record) };
    let payload: S3EventRecord[] | 'test-event';
    try {
      payload = notificationOf(parseJson(record.body));
    } catch (error) {
      return verdictOf(error, r, fields);
    }
    if (payload === 'test-event') {
      telemetry.count('event-ignored');
      telemetry.log('INFO', 'event-ignored', { reason: 'test-event', messageId: record.messageId });
      return { kind: 'ack' };
    }
    const verdict = await settleRecords(
      payload,
      async (s3Record, index) => {
        try {
          await handleS3Record(s3Record, { attempt: receiveCountOf(record), maxDeliveries: r.config.maxDeliveries });
          return undefined;
        } catch (error) {
          return verdictOf(error, r, { ...fields, record: index, key: s3Record.s3?.object?.key });
        }
      },
      {
        deadLetter: async (s3Record, failure) => {
          const sink = deadLetterSinkOf(r);
          if (sink === undefined) throw new InvalidEventError(`no dead-letter queue is configured (${ENV.deadLetterQueue})`);
          await sink.send({ body: JSON.stringify({ Records: [s3Record] }), messageId: record.messageId, ...poisonReason(failure.error) });
        },
        requeue: async (s3Record, failure) => {
          await r.clients.sqs.send(
            new SendMessageCommand({
              QueueUrl: queueUrlOf(record.eventSourceARN),
              MessageBody: JSON.stringify({ Records: [s3Record] }),
              // SQS delays a message by at most 15 minutes.
              DelaySeconds: Math.min(900, requeueDelaySeconds(failure, receiveCountOf(record))),
            }),
          );
        },
      },
      telemetry,
      fields,
    );
    return verdict.kind === 'ack' ? { kind: 'ack' } : verdict.failure;
  }

  return async function sceneHandler(
    event: S3Event | SQSEvent,
    context?: Context,
  ): Promise<SQSBatchResponse | { outcomes: SceneRecordOutcome[] }> {
    const records: readonly unknown[] = Array.isArray(event?.Records) ? event.Records : [];
    if (records.length > 0 && (records[0] as { eventSource?: string }).eventSource === 'aws:sqs') {
      // Scenes there is no time left to fan out are handed back; poison is settled at once into the DLQ.
      return settleSqsRecords(rt(), records as SQSRecord[], context, (record) => handleSqsRecord(record));
    }
    // Direct invocation: Lambda retries a failed asynchronous invocation twice, then hands the
    // event to the function's on-failure destination. So every record is tried, and any failure
    // (poison too, so that it reaches the destination) is thrown once the others are done.
    const payload = notificationOf(event);
    if (payload === 'test-event') {
      rt().backend.telemetry.count('event-ignored');
      return { outcomes: [{ kind: 'ignored', reason: 'test-event' }] };
    }
    const outcomes: SceneRecordOutcome[] = [];
    const failures: Error[] = [];
    for (const record of payload) {
      try {
        outcomes.push(await handleS3Record(record));
      } catch (error) {
        failures.push(verdictOf(error, rt(), { key: record.s3?.object?.key }).error);
      }
    }
    if (failures.length > 0) {
      throw new AggregateError(
        failures,
        `${failures.length} of ${payload.length} S3 record(s) could not be fanned out: ${failures.map((e) => e.message).join('; ')}`,
      );
    }
    return { outcomes };
  };
}

/** A scene event is done (ack) or, like a tile job, to be retried or dead-lettered. */
type SceneVerdict = { readonly kind: 'ack' } | Exclude<DeliveryVerdict, { kind: 'ack' }>;

function verdictOf(error: unknown, rt: AwsRuntime, fields: Record<string, unknown>): Exclude<SceneVerdict, { kind: 'ack' }> {
  const { telemetry } = rt.backend;
  const err = error instanceof Error ? error : new Error(String(error));
  if (err instanceof TesseraError && !err.retryable) {
    telemetry.count('poison');
    telemetry.log('ERROR', 'poison-scene-event', { ...fields, error: err });
    return { kind: 'poison', error: err };
  }
  telemetry.count('failed');
  telemetry.log('WARN', 'scene-fan-out-failed', { ...fields, error: err });
  return { kind: 'retry', error: err };
}

/**
 * The version token of the notified object: the versionId when the bucket is
 * versioned (it names exactly one upload), else the ETag in the quoted form
 * HeadObject returns, so the token reads the same wherever it is compared.
 */
export function versionTokenOf(record: S3EventRecord): string {
  const versionId = record.s3?.object?.versionId;
  if (typeof versionId === 'string' && versionId !== '' && versionId !== 'null') return versionId;
  const etag = record.s3?.object?.eTag;
  if (typeof etag !== 'string' || etag === '') {
    throw new InvalidEventError(
      `S3 notification for ${record.s3?.object?.key ?? '?'} has neither versionId nor eTag; the job key needs one`,
    );
  }
  return etag.startsWith('"') ? etag : `"${etag}"`;
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch (cause) {
    throw new InvalidEventError(`SQS message body is not JSON: ${JSON.stringify(String(body).slice(0, 80))}`, { cause });
  }
}

/** The S3 records of a notification payload, unwrapping an SNS envelope; `test-event` for S3's configuration probe. */
export function notificationOf(payload: unknown): S3EventRecord[] | 'test-event' {
  if (typeof payload !== 'object' || payload === null) throw new InvalidEventError('event is not an S3 notification object');
  const p = payload as { Records?: unknown; Event?: unknown; Type?: unknown; Message?: unknown };
  if (p.Event === 's3:TestEvent') return 'test-event';
  if (p.Type === 'Notification' && typeof p.Message === 'string') return notificationOf(parseJson(p.Message));
  if (!Array.isArray(p.Records)) throw new InvalidEventError('event has no Records: not an S3 notification');
  const records = p.Records as S3EventRecord[];
  const foreign = records.find((r) => r?.eventSource !== 'aws:s3');
  if (foreign) throw new InvalidEventError(`event record from ${JSON.stringify(foreign?.eventSource)} is not an S3 notification`);
  return records;
}

/** The Lambda entry point (`scene.handler.handler`). */
export const handler = createSceneHandler(lambdaRuntime);
