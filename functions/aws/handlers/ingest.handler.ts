import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { handleIngestDelivery } from '../../../shared/app/ingest.js';
import { cloudIngestDeps, cloudIngestSettings } from '../../../shared/app/ingest-trigger.js';
import { type AwsRuntime, lambdaRuntime } from '../compose.js';
import { settleSqsRecords } from './sqs-batch.js';

/** The ingest dependencies of an AWS runtime: the source bucket (staging + promoted keys) and the DynamoDB manifest. */
/**
 * The ingest function: one SQS batch of ingest requests per invocation (infra/
 * maps the ingest queue with batch size 1 and ReportBatchItemFailures).
 *
 * Each record is one request (`tessera ingest --cloud aws` enqueues it; body:
 * shared/app/ingest.ts toIngestMessage) run through `handleIngestDelivery`:
 * pre-check by (source, id), fetch to `staging/{runId}/...`, validate, a
 * create-only copy to the promoted key under the scene prefix, then the
 * manifest row (a conditional put). The verdict is settled as the tile
 * function settles its own (functions/aws/handlers/tile.handler.ts):
 * - ack (published, already published, a concurrent publisher won): the
 *   record is left out of batchItemFailures and SQS deletes it; a duplicate
 *   delivery is "already published" and copies nothing;
 * - poison (a malformed message, a refused artefact, an occupied final key):
 *   settled at once into the ingest DLQ by this handler and acked; only if
 *   that send fails is it reported, visible at once, for the redrive policy;
 * - retry (network, 5xx, throttling): reported with an exponential backoff.
 *   The next attempt is a new run id, so it stages under a new key and never
 *   writes over what this one left (staging expires by the lifecycle rule).
 */
export function createIngestHandler(runtime: AwsRuntime | (() => AwsRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;
  return async (event: SQSEvent, context?: Context): Promise<SQSBatchResponse> => {
    const r = rt();
    const { backend, config } = r;
    const deps = cloudIngestDeps(r.backend, r.manifest);
    const settings = cloudIngestSettings(config);
    return settleSqsRecords(
      r,
      event.Records ?? [],
      context,
      (record, receiveCount) => handleIngestDelivery(deps, { body: record.body, deliveryId: record.messageId, receiveCount }, settings),
      (record, verdict) => {
        for (const o of verdict.outcomes)
          backend.telemetry.log('INFO', 'ingest-settled', {
            deliveryId: record.messageId,
            reason: o.reason,
            key: o.key,
            checksum: o.checksum,
          });
      },
    );
  };
}

/** The Lambda entry point (`ingest.handler.handler`). */
export const handler = createIngestHandler(lambdaRuntime);
