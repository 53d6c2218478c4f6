import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { Context, S3EventRecord, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { DeliveryVerdict } from '../../../shared/app/deliveries.js';
import { acceptBatchObject, handleBatchDelivery, requireBatchSink, streamSettings } from '../../../shared/app/feature-batch.js';
import { poisonReason } from '../../../shared/app/poison.js';
import { type RecordFailure, settleRecords } from '../../../shared/app/record-batch.js';
import { SQS_DEFAULT_MAX_RECEIVE_COUNT, sqsSchedule } from '../../../shared/app/redelivery.js';
import { InvalidEventError } from '../../../shared/domain/errors.js';
import { decodeEventKey } from '../../../shared/domain/object-key.js';
import { ENV } from '../../../shared/domain/runtime-config.js';
import { type AwsRuntime, lambdaRuntime } from '../compose.js';
import { notificationOf, versionTokenOf } from './scene.handler.js';
import { deadLetterSinkOf, queueUrlOf, receiveCountOf, requeueDelaySeconds, settleSqsRecords } from './sqs-batch.js';

/**
 * The stream function (docs/feature-batches.md): S3 -> SQS -> Lambda, one SQS record per batch object that Amazon Data
 * Firehose (or anything else) wrote under streams/. Each S3 record of the notification is one batch: its bucket,
 * URL-decoded key and version token (the versionId on the versioned source bucket) make the batch key, and
 * `handleBatchDelivery` claims it once, inserts all its records into PostGIS in one transaction and commits.
 *
 * Settling is the tile function's (tile.handler.ts): ack, retry with a backoff, or poison (an unreadable batch
 * object, a bad event) into the stream queue's DLQ at once. A message of several S3 records is settled per record
 * (shared/app/record-batch.ts), as the scene function does.
 */
export function createStreamHandler(runtime: AwsRuntime | (() => AwsRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;

  async function handleRecord(record: SQSRecord, s3Record: S3EventRecord): Promise<RecordFailure | undefined> {
    const r = rt();
    const { telemetry } = r.backend;
    const ignore = (reason: string, key?: string): undefined => {
      telemetry.count('event-ignored');
      telemetry.log(reason === 'other-bucket' ? 'WARN' : 'INFO', 'event-ignored', { reason, key, eventName: s3Record.eventName });
      return undefined;
    };
    let source: { bucket: string; key: string; versionToken: string };
    try {
      if (typeof s3Record.eventName !== 'string' || !s3Record.eventName.startsWith('ObjectCreated:')) return ignore('not-a-create');
      const bucket = s3Record.s3?.bucket?.name;
      const rawKey = s3Record.s3?.object?.key;
      if (typeof bucket !== 'string' || typeof rawKey !== 'string')
        throw new InvalidEventError('S3 notification record has no s3.bucket.name or s3.object.key');
      const key = decodeEventKey(rawKey);
      if (bucket !== r.config.sourceBucket) return ignore('other-bucket', key);
      if (!acceptBatchObject(key)) return ignore('filtered-out', key);
      source = { bucket, key, versionToken: versionTokenOf(s3Record) };
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      telemetry.count('poison');
      telemetry.log('ERROR', 'poison-message', { messageId: record.messageId, error: err });
      return { kind: 'poison', error: err };
    }
    let verdict: Awaited<ReturnType<typeof handleBatchDelivery>>;
    try {
      verdict = await handleBatchDelivery(
        { claims: r.backend.claims, sources: r.backend.sources, batches: requireBatchSink(r.batches), clock: r.backend.clock, telemetry },
        streamSettings(r.settings.owner, r.config),
        {
          source,
          deliveryId: record.messageId,
          receiveCount: receiveCountOf(record),
          schedule: sqsSchedule(r.config.maxDeliveries ?? SQS_DEFAULT_MAX_RECEIVE_COUNT),
        },
      );
    } catch (error) {
      // requireBatchSink: the stack has no PostGIS; poison, so the DLQ keeps the event until one is configured.
      const err = error instanceof Error ? error : new Error(String(error));
      telemetry.count('poison');
      telemetry.log('ERROR', 'poison-message', { messageId: record.messageId, key: source.key, error: err });
      return { kind: 'poison', error: err };
    }
    return verdict.kind === 'ack' ? undefined : verdict;
  }

  async function handleSqsRecord(record: SQSRecord): Promise<StreamVerdict> {
    const r = rt();
    const { telemetry } = r.backend;
    const fields = { messageId: record.messageId, receiveCount: receiveCountOf(record) };
    let payload: S3EventRecord[] | 'test-event';
    try {
      payload = notificationOf(parseJson(record.body));
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      telemetry.count('poison');
      telemetry.log('ERROR', 'poison-message', { ...fields, error: err });
      return { kind: 'poison', error: err };
    }
    if (payload === 'test-event') {
      telemetry.count('event-ignored');
      telemetry.log('INFO', 'event-ignored', { reason: 'test-event', messageId: record.messageId });
      return { kind: 'ack' };
    }
    const verdict = await settleRecords(
      payload,
      (s3Record) => handleRecord(record, s3Record),
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

  return async function streamHandler(event: SQSEvent, context?: Context): Promise<SQSBatchResponse> {
    // Poison is settled at once into the stream queue's DLQ (shared/app/poison.ts), then acked.
    return settleSqsRecords(rt(), event.Records ?? [], context, (record) => handleSqsRecord(record));
  };
}

type StreamVerdict = { readonly kind: 'ack' } | Exclude<DeliveryVerdict, { kind: 'ack' }>;

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch (cause) {
    throw new InvalidEventError(`SQS message body is not JSON: ${JSON.stringify(String(body).slice(0, 80))}`, { cause });
  }
}

/** The Lambda entry point (`stream.handler.handler`). */
export const handler = createStreamHandler(lambdaRuntime);
