import { assertNever } from '../domain/claim.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import type { DeliveryVerdict } from './deliveries.js';

/** How one record of a multi-record message failed: a transient failure, or poison. */
export type RecordFailure = Exclude<DeliveryVerdict, { kind: 'ack' }>;

/** Where the failed records of a message go, each alone. */
export interface RecordSettler<R> {
  /** Poison: the record alone into the dead-letter queue. */
  deadLetter(record: R, failure: Extract<RecordFailure, { kind: 'poison' }>): Promise<void>;
  /** A transient failure: the record alone back onto the queue, for a later attempt of just that record. */
  requeue(record: R, failure: Extract<RecordFailure, { kind: 'retry' }>): Promise<void>;
}

/** What to do with the message that held the records. */
export type BatchVerdict =
  /** Every record done, or every failed one settled alone: acknowledge the message. */
  | { readonly kind: 'ack'; readonly done: number; readonly deadLettered: number; readonly requeued: number }
  /** The failed records could not be settled alone: fail the whole message (its good records then run again, harmlessly). */
  | { readonly kind: 'fail'; readonly failure: RecordFailure };

/**
 * THE rule for a message that carries several records (an S3 notification
 * with several `Records`, a batched Event Grid post): settle per record.
 *
 * Failing the whole message for one bad record would run its good records
 * again on every receive and, after the count, dead-letter them beside the
 * bad one. Instead every record is handled once; each failed record is
 * settled alone, as a message of its own (poison into the dead-letter queue,
 * a transient failure back onto the queue), and the original message is then
 * acknowledged: no record that succeeded is redone, only what failed is
 * dead-lettered. A message of one record is that record: its failure is the
 * message's (`fail`), and the trigger settles it as any other delivery.
 *
 * Only if settling alone fails (a send refused) is the whole message failed;
 * records already settled alone may then be settled again on its retry (a
 * duplicate dead-letter entry or requeued record: harmless, never a loss).
 */
export async function settleRecords<R>(
  records: readonly R[],
  handle: (record: R, index: number) => Promise<RecordFailure | undefined>,
  settler: RecordSettler<R>,
  telemetry: Telemetry,
  fields: Readonly<Record<string, unknown>> = {},
): Promise<BatchVerdict> {
  const failed: { readonly record: R; readonly failure: RecordFailure }[] = [];
  for (const [index, record] of records.entries()) {
    const failure = await handle(record, index);
    if (failure !== undefined) failed.push({ record, failure });
  }
  const done = records.length - failed.length;
  const [first] = failed;
  if (first === undefined) return { kind: 'ack', done, deadLettered: 0, requeued: 0 };
  if (records.length === 1) return { kind: 'fail', failure: first.failure };
  let deadLettered = 0;
  let requeued = 0;
  try {
    for (const { record, failure } of failed) {
      switch (failure.kind) {
        case 'poison':
          await settler.deadLetter(record, failure);
          deadLettered++;
          break;
        case 'retry':
          await settler.requeue(record, failure);
          requeued++;
          break;
        default:
          assertNever(failure, 'record failure');
      }
    }
  } catch (error) {
    telemetry.log('WARN', 'records-not-split', {
      ...fields,
      failed: failed.length,
      of: records.length,
      why: 'the failed records could not be settled alone; the whole message is retried and its good records run again (harmless)',
      error,
    });
    return { kind: 'fail', failure: failed.find((f) => f.failure.kind === 'retry')?.failure ?? first.failure };
  }
  telemetry.log('WARN', 'records-split', { ...fields, of: records.length, done, deadLettered, requeued });
  return { kind: 'ack', done, deadLettered, requeued };
}
