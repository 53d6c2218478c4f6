import type { InvocationContext, StorageQueueHandler } from '@azure/functions';
import { poisonReason, settlePoison } from '../../../shared/app/poison.js';
import { handleQueueDelivery, type QueueDeliveryVerdict } from '../../../shared/app/queue-delivery.js';
import { azureHostSchedule } from '../../../shared/app/redelivery.js';
import { canonicalJson } from '../../../shared/domain/canonical-json.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { InvalidEventError } from '../../../shared/domain/errors.js';
import { type AzureRuntime, azureRuntime, invocationBackend } from '../compose.js';
import { triggerQueueName } from './blob-event.js';

/**
 * The delivery a Storage Queue trigger hands a function: the message id (the
 * same on every redelivery: the delivery id in claim owners) and the host's
 * dequeue count (its receive count, when the host gave a usable one).
 */
export function queueTriggerDelivery(context: InvocationContext): {
  readonly deliveryId: string;
  readonly dequeueCount: number;
  readonly receiveCount: number | undefined;
} {
  const meta = context.triggerMetadata ?? {};
  const deliveryId = typeof meta.id === 'string' && meta.id !== '' ? meta.id : undefined;
  if (deliveryId === undefined) {
    throw new InvalidEventError('queue trigger metadata has no message id: is this function bound to a Storage Queue trigger?');
  }
  const dequeueCount = Number(meta.dequeueCount);
  return { deliveryId, dequeueCount, receiveCount: Number.isInteger(dequeueCount) && dequeueCount > 0 ? dequeueCount : undefined };
}

/**
 * The message text a queue trigger received. The host base64-decodes the
 * message, and the v4 library hands a JSON message over already parsed, so a
 * tile job arrives as an object: it is serialised back canonically, which
 * reproduces the text fan-out sent (toJobMessage writes canonical JSON).
 *
 * `triggerMetadata.queueTrigger` is NOT used: the library camel-cases the keys
 * of parsed metadata objects, which would turn band names such as `B04` into `b04`.
 */
export function queueMessageText(queueEntry: unknown): string {
  if (typeof queueEntry === 'string') return queueEntry;
  if (Buffer.isBuffer(queueEntry)) return queueEntry.toString('utf8');
  if (typeof queueEntry === 'object' && queueEntry !== null) {
    try {
      return canonicalJson(queueEntry);
    } catch {
      return JSON.stringify(queueEntry);
    }
  }
  // A bare number or boolean: not a tile job, and parseTileJob will say so.
  return JSON.stringify(queueEntry) ?? '';
}

/**
 * The tile worker: a Storage Queue trigger running one tile job through the
 * three gates (shared/app/deliveries.ts).
 *
 * Verdicts map onto the host's own retry machinery:
 * - `ack` (written, already-present, claim-rejected, lease-stolen) returns
 *   normally, and the host deletes the message;
 * - `retry` throws, and the host makes the message visible again after
 *   host.json's `visibilityTimeout`; the attempt that fails with
 *   dequeueCount = `maxDequeueCount` (5) sends it to `<queue>-poison`. A
 *   lease held by an earlier attempt of the same message is waited for only
 *   while the host's remaining retries reach past it; the last allowed
 *   attempt takes it over (shared/app/redelivery.ts);
 * - `poison` is settled at once (shared/app/poison.ts): the handler puts the
 *   message on `<queue>-poison` itself and returns, so the host deletes it
 *   instead of retrying it five times 330 s apart. Only if that copy fails
 *   does it throw, and the host's own count is the backstop. Nothing is ever
 *   half-written: outputs are create-only and a failed attempt gives its claim back.
 *
 * The delivery id in claim owners is the queue message id, which every
 * redelivery of the message keeps.
 */
export function makeTileHandler(rt: () => AzureRuntime = () => azureRuntime('tile')): StorageQueueHandler<unknown> {
  return async (queueEntry: unknown, context: InvocationContext): Promise<QueueDeliveryVerdict> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const { deliveryId, dequeueCount, receiveCount } = queueTriggerDelivery(context);
    // Tile jobs and fan-out chunks share the queue; the dispatch is the same on every cloud.
    const verdict = await handleQueueDelivery(backend, runtime.settings, {
      body: queueMessageText(queueEntry),
      deliveryId,
      receiveCount,
      schedule: azureHostSchedule(runtime.host.maxDequeueCount, runtime.host.retryVisibilitySec * 1000),
    });
    // The delivery's spans leave before the answer: a Consumption instance may be frozen once it is given.
    await runtime.otel?.flush();
    switch (verdict.kind) {
      case 'ack':
        return verdict;
      case 'poison': {
        const settled = await settlePoison(
          runtime.poisonQueue(triggerQueueName(context, runtime.config.tileQueue)),
          { body: queueMessageText(queueEntry), messageId: deliveryId, ...poisonReason(verdict.error) },
          backend.telemetry,
        );
        if (settled.kind === 'dead-lettered') return verdict;
        throw verdict.error;
      }
      case 'retry':
        if (dequeueCount >= runtime.host.maxDequeueCount) {
          backend.telemetry.log('ERROR', 'moving-to-poison-queue', {
            deliveryId,
            dequeueCount,
            verdict: verdict.kind,
            error: verdict.error,
          });
        }
        throw verdict.error;
      default:
        return assertNever(verdict, 'delivery verdict');
    }
  };
}
