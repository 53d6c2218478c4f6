import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { handleTileDelivery } from '../../../shared/app/deliveries.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { type AwsRuntime, lambdaRuntime } from '../compose.js';
import { outOfTime, receiveCountOf, requeueDelaySeconds, SqsBatch } from './sqs-batch.js';

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
 * - poison (a malformed or impossible job): reported and made visible at once,
 *   so after maxReceiveCount receives SQS moves it to the dead-letter queue.
 *   Poison never reaches the claim or the write, so nothing is half-written.
 *
 * Records are processed one after another: a tile is CPU-bound, and Lambda
 * scales out by running more invocations. Records not started when the
 * invocation nears its timeout are handed back rather than cut off mid-job.
 */
export function createTileHandler(runtime: AwsRuntime | (() => AwsRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;
  return async (event: SQSEvent, context?: Context): Promise<SQSBatchResponse> => {
    const { backend, settings, clients } = rt();
    const batch = new SqsBatch(clients.sqs, backend.telemetry);
    let handedBack = 0;
    for (const record of event.Records ?? []) {
      if (outOfTime(context)) {
        batch.fail(record, 0);
        handedBack++;
        continue;
      }
      const receiveCount = receiveCountOf(record);
      const verdict = await handleTileDelivery(backend, settings, { body: record.body, deliveryId: record.messageId, receiveCount });
      switch (verdict.kind) {
        case 'ack':
          break;
        case 'retry':
        case 'poison':
          batch.fail(record, requeueDelaySeconds(verdict, receiveCount));
          break;
        default:
          assertNever(verdict, 'delivery verdict');
      }
    }
    if (handedBack > 0) backend.telemetry.log('WARN', 'records-handed-back', { count: handedBack, reason: 'invocation near its timeout' });
    return batch.respond();
  };
}

/** The Lambda entry point (`tile.handler.handler`). */
export const handler = createTileHandler(lambdaRuntime);
