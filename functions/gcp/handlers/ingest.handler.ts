import type { CloudEvent } from '@google-cloud/functions-framework';
import { handleIngestDelivery, type IngestOutcome, type IngestVerdict } from '../../../shared/app/ingest.js';
import { cloudIngestDeps, cloudIngestSettings } from '../../../shared/app/ingest-trigger.js';
import { assertNever } from '../../../shared/domain/claim.js';
import type { GcpRuntime } from '../compose.js';
import { bodyOf, deadLetterPubSub, type MessagePublishedData } from './tile.handler.js';

/** What the ingest function did with one message (its return value; the HTTP answer is what Pub/Sub reads). */
export type IngestEventOutcome =
  | { readonly kind: 'ack'; readonly outcomes: readonly IngestOutcome[] }
  /** Poison: published to the ingest dead-letter topic (or, with none configured, logged and dropped) and acknowledged. */
  | { readonly kind: 'dead-lettered'; readonly reason: string; readonly deadLetterId: string | undefined };

/**
 * The ingest function: a CloudEvent function for `messagePublished` on the
 * ingest topic, which infra/ pushes to it through a subscription of its own
 * (retry policy 10-600 s, dead-letter policy into the ingest dead-letter topic
 * after tessera:maxReceiveCount attempts).
 *
 * Each message is one request (`tessera ingest --cloud gcp` publishes it) run
 * through `handleIngestDelivery`; the verdict is settled as the tile function
 * settles its own (tile.handler.ts):
 * - ack (published, already published, a concurrent publisher won) returns
 *   normally: the push is acknowledged; a duplicate delivery copies nothing;
 * - retry throws: the function answers 500 and Pub/Sub redelivers after its
 *   backoff (each attempt stages under a fresh run id);
 * - poison (not text, a malformed request, a refused artefact, an occupied
 *   final key) is published to the ingest dead-letter topic with the reason
 *   and acknowledged, never retried; only if that publish fails does it throw,
 *   so the message is not lost.
 */
export function createIngestHandler(runtime: GcpRuntime | (() => GcpRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;

  return async function ingestHandler(event: CloudEvent<MessagePublishedData>): Promise<IngestEventOutcome> {
    const r = rt();
    const { telemetry } = r.backend;
    const deps = cloudIngestDeps(r.backend, r.manifest);
    const message = event.data?.message;
    const deliveryId = message?.messageId ?? event.id;
    let verdict: IngestVerdict;
    let data: Buffer | undefined;
    try {
      const decoded = bodyOf(event);
      data = decoded.data;
      verdict = await handleIngestDelivery(
        deps,
        { body: decoded.body, deliveryId, receiveCount: event.data?.deliveryAttempt },
        cloudIngestSettings(r.config),
      );
    } catch (error) {
      // Only bodyOf throws here: handleIngestDelivery never does.
      const err = error instanceof Error ? error : new Error(String(error));
      telemetry.count('poison');
      telemetry.log('ERROR', 'poison-message', { deliveryId, kind: 'ingest', error: err });
      verdict = { kind: 'poison', error: err };
    }
    switch (verdict.kind) {
      case 'ack':
        return { kind: 'ack', outcomes: verdict.outcomes };
      case 'retry':
        // Throwing is how a CloudEvent function asks Pub/Sub for a redelivery.
        throw verdict.error;
      case 'poison':
        return deadLetterPubSub(event, data, verdict.error, r.deadLetters, telemetry, { kind: 'ingest' });
      default:
        return assertNever(verdict, 'ingest verdict');
    }
  };
}
