import { assertNever } from '../domain/claim.js';
import { TesseraError, VersionMismatchError } from '../domain/errors.js';
import type { Backend, WorkerSettings } from './backend.js';
import { processTile, type TileOutcome } from './process-tile.js';
import { parseTileJob } from './tile-job.js';

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
}

/** The claim owner of one delivery: redeliveries of one message share the prefix. */
export const deliveryOwner = (deliveryId: string, worker: string): string => `${deliveryId}@${worker}`;

/**
 * Run one delivery of a tile job and decide its fate. Never throws.
 *
 * A claim held by *another* message is a duplicate: ack it, the holder's own
 * message is still in the queue and completes the job (or its redelivery takes
 * the lapsed lease over). A claim held by an earlier attempt of *this* message
 * means that attempt died or is still running: acking would lose the job, so
 * retry after the lease ends.
 */
export async function handleTileDelivery(backend: Backend, settings: WorkerSettings, delivery: TileDelivery): Promise<DeliveryVerdict> {
  const { telemetry } = backend;
  const meta = { deliveryId: delivery.deliveryId, receiveCount: delivery.receiveCount };
  let outcome: TileOutcome;
  try {
    const job = parseTileJob(delivery.body);
    outcome = await processTile(backend, settings, job, deliveryOwner(delivery.deliveryId, settings.owner));
  } catch (error) {
    const err = error instanceof Error ? error : new Error(String(error));
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
      return { kind: 'ack', outcome };
    case 'claim-rejected':
      if (outcome.reason === 'held' && outcome.by?.startsWith(`${delivery.deliveryId}@`)) {
        const delayMs = Math.max(0, (outcome.leaseUntil ?? 0) - backend.clock.now()) + 1000;
        telemetry.log('INFO', 'own-attempt-holds-lease', { ...meta, jobKey: outcome.jobKey, by: outcome.by, delayMs });
        return { kind: 'retry', error: new Error(`an earlier attempt of delivery ${delivery.deliveryId} holds the lease`), delayMs };
      }
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
