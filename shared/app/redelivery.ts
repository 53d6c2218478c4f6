/**
 * How each transport brings a failed message back, and the one rule that
 * decides what a delivery does when an earlier attempt of its own message
 * still holds the job's lease (the attempt died right after its claim, or is
 * a zombie still running past its function timeout).
 *
 * Waiting is only right if the transport is sure to deliver the message again
 * after the lease ends. Each platform's schedule says whether it is:
 *
 * | transport | gap before the next delivery | deliveries before the dead-letter queue |
 * |---|---|---|
 * | SQS + Lambda | set by the handler (ChangeMessageVisibility, up to 12 h) | the redrive policy's maxReceiveCount |
 * | Pub/Sub push (Eventarc) | the retry policy's backoff, minimumBackoff (10 s) to maximumBackoff (600 s), not settable | the dead-letter policy's maxDeliveryAttempts (5-100) |
 * | Storage Queue + Functions host | host.json `visibilityTimeout`, fixed, not settable | host.json `maxDequeueCount` |
 * | local SQLite queue | set by the pool (`release(delayMs)`) | the queue's maxReceiveCount |
 *
 * The rule ({@link ownLeaseAnswer}): wait if the deliveries the transport
 * still allows, each at its shortest guaranteed gap, reach past the lease's
 * end; otherwise take the lease over now, before the transport runs out of
 * attempts and dead-letters a job nobody is doing. On Pub/Sub (840 s lease,
 * 5 attempts at least 10 s apart) that is the first redelivery; on SQS and
 * locally a wait of the lease's rest always fits, so only the last allowed
 * delivery takes over; on Azure the host's spacing covers the lease (compose
 * refuses a host.json that does not), so, again, only the last one does.
 *
 * Taking over is safe because every output write is create-only (or, for a
 * repair, conditional on the version): if the earlier attempt is in fact
 * alive, both compute the same deterministic bytes and one write lands. The
 * takeover itself is one conditional operation on the claim row: a heartbeat
 * in the name of the holder the claim answered with, which succeeds only
 * while that same owner still holds a live CLAIMED row (see processTile).
 */

/** The transports a tile job arrives by. */
export type Transport = 'sqs' | 'pubsub' | 'azure-queue' | 'local';

/** A transport's redelivery schedule, in the units of the core (milliseconds). */
export interface RedeliverySchedule {
  readonly transport: Transport;
  /** Deliveries before the transport dead-letters the message; `undefined`: it never does (it retries until retention). */
  readonly maxDeliveries: number | undefined;
  /** The shortest gap the transport guarantees between a failed delivery and the next one. */
  readonly minGapMs: number;
  /** Where the consumer sets the gap itself (SQS, the local queue): the longest gap it may ask for. */
  readonly settableGapMs?: number | undefined;
}

/** What a delivery does about a live lease held by an earlier attempt of its own message. */
export type OwnLeaseAnswer =
  /** Fail this delivery; a later one finds the lease lapsed. `delayMs` where the transport lets the consumer set the gap. */
  | { readonly kind: 'wait'; readonly delayMs?: number | undefined }
  /** The transport would dead-letter the message before the lease ends: take the lease over now. */
  | { readonly kind: 'take-over' };

/** Slack past the lease's end for a redelivery that is meant to find it lapsed (clock granularity, a slow poll). */
export const LEASE_END_MARGIN_MS = 1_000;

/** SQS caps a visibility timeout (the gap a consumer may set) at 12 hours. */
export const SQS_MAX_VISIBILITY_MS = 43_200_000;

/** Pub/Sub retry policy bounds infra/ deploys (and Pub/Sub's own defaults). */
export const PUBSUB_DEFAULT_MIN_BACKOFF_MS = 10_000;
export const PUBSUB_DEFAULT_MAX_BACKOFF_MS = 600_000;
/** Pub/Sub's smallest maxDeliveryAttempts (5-100 allowed), and infra/'s default. */
export const PUBSUB_DEFAULT_MAX_DELIVERY_ATTEMPTS = 5;
/**
 * The SQS maxReceiveCount assumed when TESSERA_MAX_DELIVERIES is unset (infra/ sets it: 5 by default).
 * Deliberately low: a guess below the real count only takes a stale lease over sooner, which create-only
 * writes make safe; a guess above it would wait on the last receive and let the job be dead-lettered.
 */
export const SQS_DEFAULT_MAX_RECEIVE_COUNT = 3;

/** SQS + Lambda: the handler sets each failed record's visibility; the redrive policy dead-letters after `maxReceiveCount`. */
export function sqsSchedule(maxReceiveCount: number | undefined): RedeliverySchedule {
  return { transport: 'sqs', maxDeliveries: maxReceiveCount, minGapMs: 0, settableGapMs: SQS_MAX_VISIBILITY_MS };
}

/**
 * Pub/Sub push: redeliveries follow the subscription's retry policy (exponential
 * backoff from `minimumBackoffMs` to `maximumBackoffMs`), which a handler cannot
 * change; after `maxDeliveryAttempts` the dead-letter policy forwards the message.
 * Without a dead-letter policy (`undefined`) Pub/Sub retries until retention.
 */
export function pubSubSchedule(
  maxDeliveryAttempts: number | undefined,
  minimumBackoffMs = PUBSUB_DEFAULT_MIN_BACKOFF_MS,
): RedeliverySchedule {
  return { transport: 'pubsub', maxDeliveries: maxDeliveryAttempts, minGapMs: minimumBackoffMs };
}

/** The Functions host's queue trigger: a failed message is hidden for host.json `visibilityTimeout`, and poison after `maxDequeueCount`. */
export function azureHostSchedule(maxDequeueCount: number, visibilityTimeoutMs: number): RedeliverySchedule {
  return { transport: 'azure-queue', maxDeliveries: maxDequeueCount, minGapMs: visibilityTimeoutMs };
}

/** The local SQLite queue: the pool sets the gap (`release(delayMs)`, unbounded); dead-letters after `maxReceiveCount`. */
export function localSchedule(maxReceiveCount: number): RedeliverySchedule {
  return { transport: 'local', maxDeliveries: maxReceiveCount, minGapMs: 0, settableGapMs: Number.MAX_SAFE_INTEGER };
}

/**
 * THE rule for a lease held by an earlier attempt of the same message.
 *
 * @param attempt this delivery's number (1 on the first); `undefined` when the
 *   transport does not say, which is read as "this may be the last one".
 * @param leaseEndsInMs how long the holder's lease still runs.
 *
 * @example
 * // Pub/Sub, 5 attempts, 10 s minimum backoff, second delivery, 830 s of lease left:
 * ownLeaseAnswer(pubSubSchedule(5), 2, 830_000) // { kind: 'take-over' }: 3 x 10 s cannot reach 830 s
 * // SQS, maxReceiveCount 3, second receive: a visibility of the lease's rest fits in 12 h
 * ownLeaseAnswer(sqsSchedule(3), 2, 830_000) // { kind: 'wait', delayMs: 831_000 }
 */
export function ownLeaseAnswer(schedule: RedeliverySchedule, attempt: number | undefined, leaseEndsInMs: number): OwnLeaseAnswer {
  const needed = Math.max(0, leaseEndsInMs) + LEASE_END_MARGIN_MS;
  const wait: OwnLeaseAnswer =
    schedule.settableGapMs === undefined ? { kind: 'wait' } : { kind: 'wait', delayMs: Math.min(schedule.settableGapMs, needed) };
  // No dead-letter count: the transport retries until retention, so some delivery finds the lease lapsed.
  if (schedule.maxDeliveries === undefined) return wait;
  const remaining = attempt === undefined ? 0 : Math.max(0, schedule.maxDeliveries - attempt);
  const gap = schedule.settableGapMs ?? schedule.minGapMs;
  // Each remaining delivery comes at least `gap` after the one before: do they reach past the lease's end?
  return remaining > 0 && remaining * gap >= needed ? wait : { kind: 'take-over' };
}
