import type { InvocationContext } from '@azure/functions';
import {
  acceptBatchObject,
  type BatchOutcome,
  handleBatchDelivery,
  requireBatchSink,
  streamSettings,
} from '../../../shared/app/feature-batch.js';
import { poisonReason, settlePoison } from '../../../shared/app/poison.js';
import { azureHostSchedule } from '../../../shared/app/redelivery.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { TesseraError } from '../../../shared/domain/errors.js';
import type { SourceRef } from '../../../shared/domain/job-key.js';
import { type AzureRuntime, azureRuntime, invocationBackend, STREAM_EVENT_QUEUE } from '../compose.js';
import { commitsBlob, entryText, eventOf, parseBlobCreated, triggerQueueName } from './blob-event.js';
import { queueTriggerDelivery } from './tile.handler.js';

export type StreamEventResult =
  | { readonly kind: 'batch'; readonly outcome: BatchOutcome }
  | { readonly kind: 'ignored'; readonly reason: string }
  | { readonly kind: 'poison'; readonly code: string; readonly message: string };

/**
 * The stream function (docs/feature-batches.md): BlobCreated events of batch objects under streams/ of the sources
 * container (Event Hubs Capture's Avro files, or any NDJSON writer), delivered by Event Grid through the stream
 * Storage Queue. The blob name (unencoded, as the subject gives it) and its ETag make the batch key;
 * `handleBatchDelivery` claims the batch once and inserts it into PostGIS in one transaction.
 *
 * Settling is the tile function's: `retry` throws (the host retries after host.json's visibilityTimeout; the
 * last allowed dequeue takes an earlier attempt's lease over), `poison` (an unreadable batch object) is put on
 * `tessera-streams-poison` at once and the message deleted. The queue message id is the delivery id.
 */
export function makeStreamHandler(rt: () => AzureRuntime = () => azureRuntime('stream')) {
  return async (entry: unknown, context: InvocationContext): Promise<StreamEventResult> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const { config } = runtime;
    const { telemetry } = backend;
    const { deliveryId, dequeueCount, receiveCount } = queueTriggerDelivery(context);
    const ignore = (reason: string, fields: Record<string, unknown> = {}): StreamEventResult => {
      telemetry.count('event-ignored');
      telemetry.log('INFO', 'event-ignored', { deliveryId, reason, ...fields });
      return { kind: 'ignored', reason };
    };
    const poison = async (error: Error): Promise<StreamEventResult> => {
      // Settled at once (shared/app/poison.ts): onto `<stream queue>-poison`, then success; only a failed copy throws.
      const settled = await settlePoison(
        runtime.poisonQueue(triggerQueueName(context, STREAM_EVENT_QUEUE)),
        { body: entryText(entry), messageId: deliveryId, ...poisonReason(error) },
        telemetry,
      );
      if (settled.kind !== 'dead-lettered') throw error;
      return { kind: 'poison', code: error instanceof TesseraError ? error.code : 'poison', message: error.message };
    };
    let source: SourceRef;
    try {
      const blob = parseBlobCreated(eventOf(entry));
      if (blob.container !== config.sourceBucket) return ignore('not the source container', { container: blob.container });
      if (!acceptBatchObject(blob.key)) return ignore('outside streams/', { key: blob.key });
      // Capture and other writers commit a blob with PutBlockList; an ADLS CreateFile or an SFTP part is not a batch yet.
      if (!commitsBlob(blob.api)) return ignore('not a committing API', { key: blob.key, api: blob.api ?? null });
      source = { bucket: blob.container, key: blob.key, versionToken: blob.etag };
      requireBatchSink(runtime.batches);
    } catch (error) {
      if (error instanceof TesseraError && !error.retryable) {
        telemetry.count('poison');
        telemetry.log('ERROR', 'poison-message', { deliveryId, error });
        return poison(error);
      }
      throw error;
    }
    const verdict = await handleBatchDelivery(
      { claims: backend.claims, sources: backend.sources, batches: requireBatchSink(runtime.batches), clock: backend.clock, telemetry },
      streamSettings(runtime.settings.owner, config),
      {
        source,
        deliveryId,
        receiveCount,
        schedule: azureHostSchedule(runtime.host.maxDequeueCount, runtime.host.retryVisibilitySec * 1000),
      },
    );
    switch (verdict.kind) {
      case 'ack':
        return { kind: 'batch', outcome: verdict.outcome };
      case 'poison':
        return poison(verdict.error);
      case 'retry':
        if (dequeueCount >= runtime.host.maxDequeueCount) {
          telemetry.log('ERROR', 'moving-to-poison-queue', { deliveryId, dequeueCount, verdict: verdict.kind, error: verdict.error });
        }
        throw verdict.error;
      default:
        return assertNever(verdict, 'batch verdict');
    }
  };
}
