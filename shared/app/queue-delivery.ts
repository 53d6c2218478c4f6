import { SpanStatusCode } from '@opentelemetry/api';
import { TesseraError } from '../domain/errors.js';
import type { Backend, WorkerSettings } from './backend.js';
import { type DeliveryVerdict, handleTileDelivery, type TileDelivery } from './deliveries.js';
import { type FanOutChunkOutcome, handleFanOutChunk, isFanOutChunkBody, parseFanOutChunk } from './fan-out.js';
import { inSpan, SPAN, SPAN_ATTR } from './tracing.js';

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
export function handleQueueDelivery(backend: Backend, settings: WorkerSettings, delivery: TileDelivery): Promise<QueueDeliveryVerdict> {
  // One span per delivery (docs/telemetry.md): the tile's span and its steps are its children.
  const chunk = isFanOutChunkBody(delivery.body);
  const attributes = {
    [SPAN_ATTR.deliveryId]: delivery.deliveryId,
    [SPAN_ATTR.receiveCount]: delivery.receiveCount,
    [SPAN_ATTR.messageKind]: chunk ? 'fan-out-chunk' : 'tile-job',
  };
  return inSpan(SPAN.delivery, attributes, async (span) => {
    const verdict = chunk ? await handleChunk(backend, delivery) : await handleTileDelivery(backend, settings, delivery);
    span.setAttribute(SPAN_ATTR.verdict, verdict.kind);
    // The verdict's reason: an ack carries its outcome (tile or chunk), a retry or poison its error.
    if (verdict.kind === 'ack') {
      span.setAttribute(SPAN_ATTR.outcome, verdict.outcome.kind);
      if ('jobKey' in verdict.outcome) span.setAttribute(SPAN_ATTR.jobKey, verdict.outcome.jobKey);
    } else {
      span.setAttribute(SPAN_ATTR.error, verdict.error.message);
      // A retry is often no fault (an earlier attempt holds the lease, a transient outage); poison always is.
      if (verdict.kind === 'poison') span.setStatus({ code: SpanStatusCode.ERROR, message: verdict.error.message });
    }
    return verdict;
  });
}

async function handleChunk(backend: Backend, delivery: TileDelivery): Promise<QueueDeliveryVerdict> {
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
