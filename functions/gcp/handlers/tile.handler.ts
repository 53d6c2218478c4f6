import type { CloudEvent } from '@google-cloud/functions-framework';
import type { FanOutChunkOutcome } from '../../../shared/app/fan-out.js';
import type { TileOutcome } from '../../../shared/app/process-tile.js';
import { handleQueueDelivery, type QueueDeliveryVerdict } from '../../../shared/app/queue-delivery.js';
import { PUBSUB_DEFAULT_MAX_DELIVERY_ATTEMPTS, pubSubSchedule, type RedeliverySchedule } from '../../../shared/app/redelivery.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { InvalidEventError, TesseraError } from '../../../shared/domain/errors.js';
import type { Telemetry } from '../../../shared/ports/telemetry.port.js';
import type { PubSubDeadLetterTopic } from '../adapters/pubsub-dead-letter-topic.js';
import { JOB_KEY_ATTRIBUTE } from '../adapters/pubsub-job-queue.js';
import type { GcpRuntime } from '../compose.js';

/** The Eventarc event type of a message published to a Pub/Sub topic. */
export const PUBSUB_MESSAGE_PUBLISHED = 'google.cloud.pubsub.topic.v1.messagePublished';

/** The MessagePublishedData of the CloudEvent (Pub/Sub push payload). */
export interface MessagePublishedData {
  readonly message?: {
    /** The message bytes, base64. */
    readonly data?: string;
    readonly attributes?: Record<string, string>;
    readonly messageId?: string;
    readonly publishTime?: string;
  };
  readonly subscription?: string;
  /** Present when the subscription has a dead-letter policy: 1 on the first delivery. */
  readonly deliveryAttempt?: number;
}

/** What the tile worker did with one message (the function's return value; the HTTP answer is what Pub/Sub reads). */
export type TileEventOutcome =
  | { readonly kind: 'ack'; readonly outcome: TileOutcome | FanOutChunkOutcome }
  /** Poison: published to the dead-letter topic (or, with none configured, logged and dropped) and acknowledged. */
  | { readonly kind: 'dead-lettered'; readonly reason: string; readonly deadLetterId: string | undefined };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The text of a Pub/Sub message (a tile job; the ingest trigger's request). Throws InvalidEventError for anything that is not text. */
export function bodyOf(event: CloudEvent<MessagePublishedData>): { body: string; data: Buffer } {
  if (event.type !== PUBSUB_MESSAGE_PUBLISHED)
    throw new InvalidEventError(`event ${event.id} is a ${event.type}, not a ${PUBSUB_MESSAGE_PUBLISHED}`);
  const encoded = event.data?.message?.data;
  if (typeof encoded !== 'string' || encoded === '') throw new InvalidEventError(`Pub/Sub event ${event.id} carries no message data`);
  const data = Buffer.from(encoded, 'base64');
  try {
    return { body: utf8.decode(data), data };
  } catch (cause) {
    throw new InvalidEventError(`Pub/Sub message ${event.id} is not UTF-8 text`, { cause });
  }
}

/**
 * The tile subscription's redelivery schedule: infra/ gives it a retry policy
 * of 10-600 s backoff and a dead-letter policy of `maxDeliveries` attempts
 * (TESSERA_MAX_DELIVERIES; Pub/Sub's own minimum, 5, when unset). With an
 * 840 s lease, 5 attempts at least 10 s apart end long before the lease of an
 * attempt that died after its claim: the first redelivery takes it over.
 */
export function tileSubscriptionSchedule(maxDeliveries: number | undefined): RedeliverySchedule {
  return pubSubSchedule(maxDeliveries ?? PUBSUB_DEFAULT_MAX_DELIVERY_ATTEMPTS);
}

/**
 * The tile worker: a CloudEvent function for `google.cloud.pubsub.topic.v1.messagePublished`
 * on the tile topic (Eventarc, event-driven: 540 s ceiling, so the lease is
 * 840 s by default; docs/gcp.md).
 *
 * Each message goes through `handleTileDelivery` (claim, compute, create-only
 * write, commit). Pub/Sub reads the answer:
 * - ack verdicts (written, already-present, claim rejected, lease stolen,
 *   already alarmed at ERROR) return normally: the message is acknowledged;
 * - retry verdicts (a transient failure) throw: the function answers 500 and
 *   Pub/Sub redelivers after its retry-policy backoff (10-600 s); past the
 *   subscription's max delivery attempts its dead-letter policy moves it. A
 *   lease held by an earlier attempt of this very message is not waited for
 *   when the backoff cannot outlast it ({@link tileSubscriptionSchedule}): the
 *   delivery takes it over, so a crash after claim is never dead-lettered;
 * - poison (undecodable, not a tile job, keys that do not match its fields)
 *   is published to the dead-letter topic with the reason and acknowledged:
 *   never retried. Only if that publish fails does the handler throw, so the
 *   message is not lost.
 *
 * The delivery id is the Pub/Sub message id, the same on every redelivery.
 */
export function createTileHandler(runtime: GcpRuntime | (() => GcpRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;

  return async function tileHandler(event: CloudEvent<MessagePublishedData>): Promise<TileEventOutcome> {
    const { backend, settings, deadLetters } = rt();
    const { telemetry } = backend;
    const message = event.data?.message;
    const deliveryId = message?.messageId ?? event.id;
    let verdict: QueueDeliveryVerdict;
    let data: Buffer | undefined;
    try {
      const decoded = bodyOf(event);
      data = decoded.data;
      // Tile jobs and fan-out chunks share the topic; the dispatch is the same on every cloud (shared/app/queue-delivery.ts).
      verdict = await handleQueueDelivery(backend, settings, {
        body: decoded.body,
        deliveryId,
        receiveCount: event.data?.deliveryAttempt,
        schedule: tileSubscriptionSchedule(rt().config.maxDeliveries),
      });
    } catch (error) {
      // Only bodyOf throws here: handleQueueDelivery never does.
      const err = error instanceof Error ? error : new Error(String(error));
      telemetry.count('poison');
      telemetry.log('ERROR', 'poison-message', { deliveryId, error: err });
      verdict = { kind: 'poison', error: err };
    }
    // The delivery's spans leave before the answer: Cloud Run throttles the CPU once it is sent.
    await rt().otel?.flush();
    switch (verdict.kind) {
      case 'ack':
        return { kind: 'ack', outcome: verdict.outcome };
      case 'retry':
        // Throwing is how a CloudEvent function asks Pub/Sub for a redelivery.
        throw verdict.error;
      case 'poison':
        return deadLetterPubSub(event, data, verdict.error, deadLetters, telemetry, { jobKey: message?.attributes?.[JOB_KEY_ATTRIBUTE] });
      default:
        return assertNever(verdict, 'delivery verdict');
    }
  };
}

/**
 * Settles a poison Pub/Sub message at once, for every GCP queue function (tile,
 * ingest): published to the dead-letter topic with the reason (the original
 * bytes, even when they were not text) and acknowledged by returning; only if
 * that publish fails does this throw, so the message is redelivered, not lost.
 * With no dead-letter topic configured it is logged at ERROR and dropped.
 */
export async function deadLetterPubSub(
  event: CloudEvent<MessagePublishedData>,
  data: Buffer | undefined,
  error: Error,
  deadLetters: PubSubDeadLetterTopic | undefined,
  telemetry: Telemetry,
  fields: Readonly<Record<string, unknown>>,
): Promise<{ readonly kind: 'dead-lettered'; readonly reason: string; readonly deadLetterId: string | undefined }> {
  const message = event.data?.message;
  const deliveryId = message?.messageId ?? event.id;
  const reason = error instanceof TesseraError ? error.code : 'undecodable';
  if (!deadLetters) {
    telemetry.log('ERROR', 'poison-dropped', {
      deliveryId,
      reason,
      why: 'no dead-letter topic is configured (TESSERA_DEAD_LETTER_QUEUE); the message is acknowledged and only this log keeps it',
      data: message?.data,
    });
    return { kind: 'dead-lettered', reason, deadLetterId: undefined };
  }
  const deadLetterId = await deadLetters.send({
    data: data ?? Buffer.from(message?.data ?? '', 'base64'), // undecodable text: still the original bytes
    reason,
    error: error.message,
    messageId: deliveryId,
    subscription: event.data?.subscription,
    attributes: message?.attributes,
  });
  telemetry.log('WARN', 'poison-dead-lettered', { deliveryId, reason, deadLetterId, ...fields });
  return { kind: 'dead-lettered', reason, deadLetterId };
}
