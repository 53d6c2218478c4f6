import { ChangeMessageVisibilityBatchCommand } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchItemFailure, SQSRecord } from 'aws-lambda';
import type { DeliveryVerdict } from '../../../shared/app/deliveries.js';
import { type PoisonSettlement, poisonReason, settlePoison } from '../../../shared/app/poison.js';
import { assertNever } from '../../../shared/domain/claim.js';
import type { Telemetry } from '../../../shared/ports/telemetry.port.js';
import { JOB_KEY_ATTRIBUTE, SqsDeadLetterQueue, type SqsSender } from '../adapters/sqs-job-queue.js';
import type { AwsRuntime } from '../compose.js';

/**
 * How long a failed record stays hidden before SQS hands it out again.
 *
 * Without this, a record reported in batchItemFailures comes back only when
 * its visibility timeout runs out, and that timeout is sized for the slowest
 * job (6 x the function timeout, 90 minutes for a 900 s function). So:
 * - retry: the verdict's delay if it has one (an earlier attempt still holds
 *   the lease: come back when it lapses), else exponential backoff on the
 *   receive count, 10 s, 20 s, 40 s ... capped at 15 minutes;
 * - poison: at once, when it could not be put in the DLQ directly
 *   ({@link settlePoisonRecord}): retrying cannot help, and each receive
 *   brings it one step closer to maxReceiveCount, after which SQS moves it.
 */
export function requeueDelaySeconds(verdict: Exclude<DeliveryVerdict, { kind: 'ack' }>, receiveCount: number): number {
  switch (verdict.kind) {
    case 'poison':
      return 0;
    case 'retry':
      if (verdict.delayMs !== undefined) return Math.min(43_200, Math.ceil(verdict.delayMs / 1000));
      return Math.min(900, 10 * 2 ** Math.max(0, Math.min(10, receiveCount - 1)));
    default:
      return assertNever(verdict, 'delivery verdict');
  }
}

export interface FailedRecord {
  readonly record: SQSRecord;
  readonly delaySeconds: number;
}

/** The function's own trigger DLQ as a dead-letter sink (TESSERA_DEAD_LETTER_QUEUE; infra/ grants sqs:SendMessage on it). */
export function deadLetterSinkOf(rt: Pick<AwsRuntime, 'config' | 'clients'>): SqsDeadLetterQueue | undefined {
  return rt.config.deadLetterQueue ? new SqsDeadLetterQueue(rt.clients.sqs, rt.config.deadLetterQueue) : undefined;
}

/**
 * Poison settled at once (shared/app/poison.ts): the record's body, unchanged,
 * into the DLQ, and the record is then acked (left out of batchItemFailures).
 * `fall-back`: fail it at once instead, and the redrive policy moves it after
 * maxReceiveCount receives, as before.
 */
export function settlePoisonRecord(
  rt: Pick<AwsRuntime, 'config' | 'clients' | 'backend'>,
  record: SQSRecord,
  error: Error,
): Promise<PoisonSettlement> {
  const jobKey = record.messageAttributes?.[JOB_KEY_ATTRIBUTE]?.stringValue;
  return settlePoison(
    deadLetterSinkOf(rt),
    { body: record.body, jobKey, messageId: record.messageId, ...poisonReason(error) },
    rt.backend.telemetry,
  );
}

/** Receive count of a record as SQS reports it (1 on first delivery). */
export const receiveCountOf = (record: SQSRecord): number => Number(record.attributes?.ApproximateReceiveCount ?? '1') || 1;

/**
 * Builds the SQSBatchResponse of one invocation and, best effort, sets the
 * visibility of each failed record (see {@link requeueDelaySeconds}). The
 * event source mapping must have `ReportBatchItemFailures` on, or Lambda
 * ignores the response and retries the whole batch.
 */
export class SqsBatch {
  readonly #failed: FailedRecord[] = [];

  constructor(
    private readonly sqs: SqsSender,
    private readonly telemetry: Telemetry,
  ) {}

  fail(record: SQSRecord, delaySeconds: number): void {
    this.#failed.push({ record, delaySeconds });
  }

  /** Apply the visibility changes and return the response for Lambda. */
  async respond(): Promise<{ batchItemFailures: SQSBatchItemFailure[] }> {
    const byQueue = new Map<string, FailedRecord[]>();
    for (const f of this.#failed) {
      const list = byQueue.get(f.record.eventSourceARN) ?? [];
      list.push(f);
      byQueue.set(f.record.eventSourceARN, list);
    }
    await Promise.all([...byQueue].map(([arn, failed]) => this.#changeVisibility(arn, failed)));
    return { batchItemFailures: this.#failed.map((f) => ({ itemIdentifier: f.record.messageId })) };
  }

  async #changeVisibility(arn: string, failed: readonly FailedRecord[]): Promise<void> {
    try {
      const url = queueUrlOf(arn);
      for (let i = 0; i < failed.length; i += 10) {
        const out = await this.sqs.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: url,
            Entries: failed
              .slice(i, i + 10)
              .map((f, j) => ({ Id: String(i + j), ReceiptHandle: f.record.receiptHandle, VisibilityTimeout: f.delaySeconds })),
          }),
        );
        if (out.Failed?.length)
          this.telemetry.log('WARN', 'visibility-change-failed', { queue: arn, failed: out.Failed.map((e) => e.Code) });
      }
    } catch (error) {
      // Not fatal: the record still comes back, only later (after the queue's visibility timeout).
      this.telemetry.log('WARN', 'visibility-change-failed', { queue: arn, error });
    }
  }
}

/**
 * The queue URL of an event source ARN (`arn:<partition>:sqs:<region>:<account>:<name>`),
 * built rather than looked up, so the function needs no sqs:GetQueueUrl. The
 * SQS client sends to its own endpoint (regional, or the emulator's when one
 * is configured) and the service finds the queue by account and name.
 */
export function queueUrlOf(arn: string): string {
  const [prefix, partition, service, region, account, name] = arn.split(':');
  if (prefix !== 'arn' || service !== 'sqs' || !region || !account || !name) {
    throw new Error(`event source ${JSON.stringify(arn)} is not an SQS queue ARN`);
  }
  const domain = partition === 'aws-cn' ? 'amazonaws.com.cn' : 'amazonaws.com';
  return `https://sqs.${region}.${domain}/${account}/${name}`;
}

/** Time to keep in hand at the end of an invocation: records not started by then are handed back, not cut off mid-write. */
export const END_OF_INVOCATION_MARGIN_MS = 30_000;

/** True when there is no longer time to start another record in this invocation. */
export function outOfTime(context: Pick<Context, 'getRemainingTimeInMillis'> | undefined, marginMs = END_OF_INVOCATION_MARGIN_MS): boolean {
  return context !== undefined && typeof context.getRemainingTimeInMillis === 'function' && context.getRemainingTimeInMillis() < marginMs;
}

/** What a handler decided for one record: acked, retried later, or poison (any ack payload is the handler's own). */
export type RecordVerdict = { readonly kind: 'ack' } | Exclude<DeliveryVerdict, { kind: 'ack' }>;

/**
 * The one settle loop of every SQS-triggered handler (scene, tile, ingest, stream): records there is no time left
 * to start are handed back visible at once; an acked record is left out of batchItemFailures; poison is settled at
 * once into the function's DLQ ({@link settlePoisonRecord}) and failed only if that copy could not be made; a retry
 * is failed with its delay ({@link requeueDelaySeconds}). Returns Lambda's SQSBatchResponse.
 */
export async function settleSqsRecords<V extends RecordVerdict>(
  rt: Pick<AwsRuntime, 'config' | 'clients' | 'backend'>,
  records: readonly SQSRecord[],
  context: Pick<Context, 'getRemainingTimeInMillis'> | undefined,
  handle: (record: SQSRecord, receiveCount: number) => Promise<V>,
  onAck?: (record: SQSRecord, verdict: Extract<V, { kind: 'ack' }>) => void,
): Promise<{ batchItemFailures: SQSBatchItemFailure[] }> {
  const batch = new SqsBatch(rt.clients.sqs, rt.backend.telemetry);
  let handedBack = 0;
  for (const record of records) {
    if (outOfTime(context)) {
      batch.fail(record, 0);
      handedBack++;
      continue;
    }
    const receiveCount = receiveCountOf(record);
    const verdict = await handle(record, receiveCount);
    switch (verdict.kind) {
      case 'ack':
        onAck?.(record, verdict as Extract<V, { kind: 'ack' }>);
        break;
      case 'poison':
        if ((await settlePoisonRecord(rt, record, verdict.error)).kind === 'dead-lettered') break;
        batch.fail(record, requeueDelaySeconds(verdict, receiveCount));
        break;
      case 'retry':
        batch.fail(record, requeueDelaySeconds(verdict, receiveCount));
        break;
      default:
        assertNever(verdict as never, 'record verdict');
    }
  }
  if (handedBack > 0) rt.backend.telemetry.log('WARN', 'records-handed-back', { count: handedBack, reason: 'invocation near its timeout' });
  return batch.respond();
}
