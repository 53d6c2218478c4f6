import { TesseraError } from '../domain/errors.js';
import type { Backend, WorkerSettings } from './backend.js';
import { type DeliveryVerdict, handleTileDelivery, type TileDelivery } from './deliveries.js';
import { type FanOutChunkOutcome, handleFanOutChunk, isFanOutChunkBody, parseFanOutChunk } from './fan-out.js';

/** A verdict on one tile-queue message: a tile job's, or a fan-out chunk's (acked with its own outcome). */
export type QueueDeliveryVerdict = DeliveryVerdict | { readonly kind: 'ack'; readonly outcome: FanOutChunkOutcome };

/**
 * Run one message of the tile queue, whatever its kind. Never throws.
 *
 * The tile queue carries two kinds of message: tile jobs (the common case,
 * handled by {@link handleTileDelivery}) and fan-out chunks (a big scene's
 * fan-out, split so each part fits one invocation; {@link handleFanOutChunk}).
 * Every tile trigger calls this one function, so the dispatch is the same on
 * every cloud; the verdicts are the tile verdicts, so each trigger settles a
 * chunk exactly as it settles a tile job (ack, retry, poison).
 */
export async function handleQueueDelivery(
  backend: Backend,
  settings: WorkerSettings,
  delivery: TileDelivery,
): Promise<QueueDeliveryVerdict> {
  if (!isFanOutChunkBody(delivery.body)) return handleTileDelivery(backend, settings, delivery);
  const { telemetry } = backend;
  const meta = { deliveryId: delivery.deliveryId, receiveCount: delivery.receiveCount };
  try {
    return { kind: 'ack', outcome: await handleFanOutChunk(backend, parseFanOutChunk(delivery.body)) };
  } catch (error) {
    const err = error instanceof Error ? error : new Error(String(error));
    if (err instanceof TesseraError && !err.retryable) {
      telemetry.count('poison');
      telemetry.log('ERROR', 'poison-message', { ...meta, kind: 'fan-out-chunk', error: err });
      return { kind: 'poison', error: err };
    }
    telemetry.count('failed');
    telemetry.log('WARN', 'chunk-failed', { ...meta, error: err });
    return { kind: 'retry', error: err };
  }
}
