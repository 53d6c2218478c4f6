import { assertNever } from '../domain/claim.js';
import { CodeVersionMismatchError, TesseraError, VersionMismatchError } from '../domain/errors.js';
import type { Backend, WorkerSettings } from './backend.js';
import { claimIdOf, processTile, type TileOutcome } from './process-tile.js';
import { ownLeaseAnswer, type RedeliverySchedule } from './redelivery.js';
import { parseTileJob, type TileJob } from './tile-job.js';

/** What a trigger should do with one delivery. */
export type DeliveryVerdict =
  | { readonly kind: 'ack'; readonly outcome: TileOutcome }
  /** Leave the message for a later redelivery (after `delayMs` where the queue can set it). */
  | { readonly kind: 'retry'; readonly error: Error; readonly delayMs?: number | undefined }
  /** Never retry usefully: report it so the queue's dead-letter path takes it after its count. */
  | { readonly kind: 'poison'; readonly error: Error };

export interface TileDelivery {
  readonly body: string;
  /** The queue's message id, stable across redeliveries of the same message. */
  readonly deliveryId: string;
  readonly receiveCount?: number | undefined;
  /**
   * How the transport redelivers this message (shared/app/redelivery.ts). Every
   * trigger passes its own; without one (unit tests, benchmarks) a delivery that
   * meets its own message's live lease waits for it, as on a queue that never dead-letters.
   */
  readonly schedule?: RedeliverySchedule | undefined;
}

/** A delivery with no schedule: as if its queue let the consumer set any gap and never dead-lettered. */
const NEVER_DEAD_LETTERS: RedeliverySchedule = {
  transport: 'local',
  maxDeliveries: undefined,
  minGapMs: 0,
  settableGapMs: Number.MAX_SAFE_INTEGER,
};

/** The claim owner of one delivery: redeliveries of one message share the prefix. */
export const deliveryOwner = (deliveryId: string, worker: string): string => `${deliveryId}@${worker}`;

/**
 * Run one delivery of a tile job and decide its fate. Never throws.
 *
 * A claim held by *another* message is a duplicate: ack it, the holder's own
 * message is still in the queue and completes the job (or its redelivery takes
 * the lapsed lease over). A claim held by an earlier attempt of *this* message
 * means that attempt died or is still running: acking would lose the job. The
 * transport's schedule decides (redelivery.ts): retry after the lease ends if a
 * later delivery is sure to come then, else take the stale lease over now
 * rather than let the transport dead-letter a job nobody is doing.
 */
export async function handleTileDelivery(backend: Backend, settings: WorkerSettings, delivery: TileDelivery): Promise<DeliveryVerdict> {
  const { telemetry } = backend;
  const meta = { deliveryId: delivery.deliveryId, receiveCount: delivery.receiveCount };
  let outcome: TileOutcome;
  try {
    const job = parseTileJob(delivery.body);
    outcome = await processTile(backend, settings, job, deliveryOwner(delivery.deliveryId, settings.owner));
    if (heldByEarlierAttempt(outcome, delivery)) {
      const leaseEndsInMs = (outcome.leaseUntil ?? 0) - backend.clock.now();
      const answer = ownLeaseAnswer(delivery.schedule ?? NEVER_DEAD_LETTERS, delivery.receiveCount, leaseEndsInMs);
      switch (answer.kind) {
        case 'wait': {
          const { delayMs } = answer;
          telemetry.log('INFO', 'own-attempt-holds-lease', { ...meta, jobKey: outcome.jobKey, by: outcome.by, delayMs });
          return { kind: 'retry', error: new Error(`an earlier attempt of delivery ${delivery.deliveryId} holds the lease`), delayMs };
        }
        case 'take-over':
          outcome = await takeOverOwnLease(backend, settings, job, delivery, outcome.by, leaseEndsInMs);
          // Still held by an earlier attempt (the takeover lost a race with it): never ack that, retry.
          if (heldByEarlierAttempt(outcome, delivery)) {
            return { kind: 'retry', error: new Error(`an earlier attempt of delivery ${delivery.deliveryId} still holds the lease`) };
          }
          break;
        default:
          return assertNever(answer, 'own-lease answer');
      }
    }
  } catch (error) {
    const err = error instanceof Error ? error : new Error(String(error));
    if (err instanceof CodeVersionMismatchError) {
      // Dead-lettered, not acked: nothing else will ever make this tile (its scene's source event
      // is spent), so the message is kept for the operator, who can redrive it to a worker of its
      // own build (a rollout overlap) or re-run the scene under this one. Never retried: no
      // retry on this build can succeed.
      telemetry.count('code-version-refused');
      telemetry.log('WARN', 'code-version-refused', { ...meta, found: err.found ?? '(none)', running: err.expected });
    }
    if (err instanceof TesseraError && !err.retryable) {
      telemetry.count('poison');
      telemetry.log('ERROR', 'poison-message', { ...meta, error: err });
      return { kind: 'poison', error: err };
    }
    telemetry.count('failed');
    telemetry.log('WARN', 'tile-failed', { ...meta, error: err });
    return { kind: 'retry', error: err };
  }
  switch (outcome.kind) {
    case 'written':
    case 'already-present':
    case 'lease-stolen':
    // A repair that lost its lease before overwriting: the holder's own message completes it.
    case 'lease-lost':
      return { kind: 'ack', outcome };
    case 'claim-rejected':
      // Held by another message (a duplicate: its own message completes the job), or done.
      return { kind: 'ack', outcome };
    case 'source-changed':
      // Settled once: the job can never succeed for its version, and the scene is tombstoned.
      telemetry.count('source-changed');
      telemetry.log('WARN', 'source-changed', { ...meta, jobKey: outcome.jobKey, expected: outcome.expected, current: outcome.current });
      return { kind: 'ack', outcome };
    case 'version-mismatch':
      telemetry.count('poison');
      return {
        kind: 'poison',
        error: new VersionMismatchError(backend.outputs.name, outcome.outputKey, outcome.expected, outcome.current),
      };
    default:
      return assertNever(outcome, 'tile outcome');
  }
}

/** Whether the claim was refused because an earlier attempt of this very message holds a live lease. */
function heldByEarlierAttempt(
  outcome: TileOutcome,
  delivery: TileDelivery,
): outcome is Extract<TileOutcome, { kind: 'claim-rejected' }> & { readonly by: string } {
  return outcome.kind === 'claim-rejected' && outcome.reason === 'held' && outcome.by?.startsWith(`${delivery.deliveryId}@`) === true;
}

/**
 * Take over the lease an earlier attempt of this message holds, and do the job.
 *
 * One conditional operation: a heartbeat in the holder's name, which succeeds
 * only while that same owner still holds the row, CLAIMED, with a live lease.
 * The job then runs under that owner, so an earlier attempt that is in fact
 * still running (a zombie past its timeout) commits as itself without a false
 * lease-stolen alarm, and its output write meets `already-present` (or ours
 * does): create-only writes keep one output. If the row changed meanwhile
 * (released, lapsed, taken, committed), the heartbeat is `lost` and the job
 * goes through an ordinary claim, which answers for the new state.
 */
async function takeOverOwnLease(
  backend: Backend,
  settings: WorkerSettings,
  job: TileJob,
  delivery: TileDelivery,
  holder: string,
  leaseEndsInMs: number,
): Promise<TileOutcome> {
  const { claims, clock, telemetry } = backend;
  const now = clock.now();
  const jobId = claimIdOf(job);
  let beat = await claims.heartbeat({ jobId, owner: holder, now, leaseUntil: now + settings.leaseMs });
  if (beat.kind === 'lost' && beat.current?.state === 'CLAIMED' && beat.current.owner === holder) {
    // Lapsed on this clock, yet the claim still answered `held`: it is inside the claim's clock-skew margin
    // (shared/app/clock-skew.ts). Same owner, same row: judge the lease at its own end and take it over.
    beat = await claims.heartbeat({ jobId, owner: holder, now: beat.current.leaseUntil, leaseUntil: now + settings.leaseMs });
  }
  const fields = {
    deliveryId: delivery.deliveryId,
    receiveCount: delivery.receiveCount,
    transport: delivery.schedule?.transport,
    jobKey: job.jobKey,
    holder,
    leaseEndsInMs,
  };
  switch (beat.kind) {
    case 'extended':
      telemetry.count('lease-taken-over');
      telemetry.log('WARN', 'own-lease-taken-over', {
        ...fields,
        why: 'the transport would dead-letter this message before the lease of its earlier attempt ends',
      });
      return processTile(backend, settings, job, holder, { heldUntil: beat.leaseUntil });
    case 'lost':
      telemetry.log('INFO', 'own-lease-gone', { ...fields, current: beat.current?.owner, state: beat.current?.state });
      return processTile(backend, settings, job, deliveryOwner(delivery.deliveryId, settings.owner));
    default:
      return assertNever(beat, 'heartbeat result');
  }
}
