import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { handleQueueDelivery } from '../../../shared/app/queue-delivery.js';
import { SQS_DEFAULT_MAX_RECEIVE_COUNT, sqsSchedule } from '../../../shared/app/redelivery.js';
import { type AwsRuntime, lambdaTileRuntime } from '../compose.js';
import { settleSqsRecords } from './sqs-batch.js';

/**
 * The tile worker: one SQS batch of tile jobs per invocation.
 *
 * Every record goes through `handleTileDelivery` (claim, compute, create-only
 * write, commit). The answer to Lambda lists only the records to deliver
 * again (`batchItemFailures`, with ReportBatchItemFailures on the mapping):
 * - ack (written, already-present, claim rejected as done or held by another
 *   message, lease stolen — already alarmed at ERROR): success, SQS deletes it;
 * - retry (a transient failure, or an earlier attempt of this very message
 *   still holds the lease): reported, and hidden for a backoff;
 * - poison (a malformed or impossible job): settled at once: sent to the
 *   dead-letter queue by the handler and acked (shared/app/poison.ts); only
 *   if that send fails is it reported, visible at once, for the redrive
 *   policy to move. Poison never reaches the write, so nothing is half-written.
 *
 * Records are processed one after another: a tile is CPU-bound, and Lambda
 * scales out by running more invocations. Records not started when the
 * invocation nears its timeout are handed back rather than cut off mid-job.
 */
export function createTileHandler(runtime: AwsRuntime | (() => AwsRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;
  return async (event: SQSEvent, context?: Context): Promise<SQSBatchResponse> => {
    const { backend, settings, config } = rt();
    // The redrive policy's count (infra/ sets it); SQS lets the handler set each record's gap (sqs-batch.ts).
    const schedule = sqsSchedule(config.maxDeliveries ?? SQS_DEFAULT_MAX_RECEIVE_COUNT);
    // Tile jobs and fan-out chunks share the queue; the dispatch is the same on every cloud (shared/app/queue-delivery.ts).
    const response = await settleSqsRecords(rt(), event.Records ?? [], context, (record, receiveCount) =>
      handleQueueDelivery(backend, settings, { body: record.body, deliveryId: record.messageId, receiveCount, schedule }),
    );
    // Lambda freezes the environment once the handler returns: the batch's spans must leave first.
    await rt().otel?.flush();
    return response;
  };
}

/** The Lambda entry point (`tile.handler.handler`). */
export const handler = createTileHandler(lambdaTileRuntime);
