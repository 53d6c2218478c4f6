import type { CloudEvent } from '@google-cloud/functions-framework';
import {
  acceptBatchObject,
  type BatchOutcome,
  handleBatchDelivery,
  requireBatchSink,
  streamSettings,
} from '../../../shared/app/feature-batch.js';
import { pubSubSchedule } from '../../../shared/app/redelivery.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { TesseraError } from '../../../shared/domain/errors.js';
import type { SourceRef } from '../../../shared/domain/job-key.js';
import type { GcpRuntime } from '../compose.js';
import { STORAGE_OBJECT_FINALIZED, type StorageObjectData, sourceOf } from './scene.handler.js';

/** What the stream function did with one storage event. */
export type StreamEventOutcome =
  | { readonly kind: 'batch'; readonly outcome: BatchOutcome }
  | { readonly kind: 'ignored'; readonly reason: 'other-event' | 'other-bucket' | 'filtered-out'; readonly key?: string | undefined }
  /** Cannot succeed on any retry (an unreadable batch object, a malformed event): dead-lettered and acknowledged. */
  | { readonly kind: 'poison'; readonly code: string; readonly message: string };

/**
 * The stream function (docs/feature-batches.md): a CloudEvent function for `google.cloud.storage.object.v1.finalized` on
 * the source bucket (Eventarc, which cannot filter by prefix: objects outside streams/ are ignored and counted). A
 * Pub/Sub Cloud Storage subscription, or any writer, lands batch objects there; the object's generation is the
 * version token, and `handleBatchDelivery` claims the batch once and inserts it into PostGIS in one transaction.
 *
 * Eventarc retries a failed event (a non-2xx answer) with Pub/Sub's backoff for 24 hours and reports no attempt
 * count, so an earlier attempt's live lease is waited out (throw, retried later); the event id is stable across
 * those retries and is the delivery id. Poison is published to the dead-letter topic and acknowledged, as the scene
 * function does, since Eventarc would otherwise retry it for a day.
 */
export function createStreamHandler(runtime: GcpRuntime | (() => GcpRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;

  return async function streamHandler(event: CloudEvent<StorageObjectData>): Promise<StreamEventOutcome> {
    const r = rt();
    const { backend, config } = r;
    const { telemetry } = backend;
    const ignore = (reason: Extract<StreamEventOutcome, { kind: 'ignored' }>['reason'], key?: string): StreamEventOutcome => {
      telemetry.count('event-ignored');
      telemetry.log(reason === 'filtered-out' ? 'INFO' : 'WARN', 'event-ignored', { reason, eventId: event.id, type: event.type, key });
      return { kind: 'ignored', reason, key };
    };
    // Settled at once (shared/app/poison.ts): into the dead-letter topic, then acknowledged. A failed publish throws
    // (retryable), so the event is retried rather than lost.
    const poison = async (error: Error, code: string): Promise<StreamEventOutcome> => {
      const { deadLetters } = r;
      if (deadLetters) {
        await deadLetters.send({
          data: Buffer.from(JSON.stringify({ id: event.id, type: event.type, subject: event.subject, data: event.data }), 'utf8'),
          reason: code,
          error: error.message,
          messageId: event.id,
        });
        telemetry.log('WARN', 'poison-dead-lettered', { eventId: event.id, reason: code, sink: deadLetters.name });
      }
      return { kind: 'poison', code, message: error.message };
    };
    let source: SourceRef;
    try {
      if (event.type !== STORAGE_OBJECT_FINALIZED) return ignore('other-event');
      source = sourceOf(event);
      if (source.bucket !== config.sourceBucket) return ignore('other-bucket', source.key);
      if (!acceptBatchObject(source.key)) return ignore('filtered-out', source.key);
      requireBatchSink(r.batches);
    } catch (error) {
      if (error instanceof TesseraError && !error.retryable) {
        telemetry.count('poison');
        telemetry.log('ERROR', 'poison-message', { eventId: event.id, subject: event.subject, code: error.code, error });
        return poison(error, error.code);
      }
      throw error;
    }
    const verdict = await handleBatchDelivery(
      { claims: backend.claims, sources: backend.sources, batches: requireBatchSink(r.batches), clock: backend.clock, telemetry },
      streamSettings(r.settings.owner, config),
      { source, deliveryId: event.id, schedule: pubSubSchedule(undefined) },
    );
    switch (verdict.kind) {
      case 'ack':
        return { kind: 'batch', outcome: verdict.outcome };
      case 'poison':
        return poison(verdict.error, verdict.error instanceof TesseraError ? verdict.error.code : 'poison');
      case 'retry':
        // A non-2xx answer: Eventarc delivers the event again after its backoff.
        throw verdict.error;
      default:
        return assertNever(verdict, 'batch verdict');
    }
  };
}
