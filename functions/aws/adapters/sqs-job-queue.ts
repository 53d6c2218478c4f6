import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { AdapterError } from '../../../shared/domain/errors.js';
import type { DeadLetter, DeadLetterSink, Delivery, JobMessage, PullQueue } from '../../../shared/ports/job-queue.port.js';
import { backoffDelayMs, describeAwsFailure, isAwsFailure, isRetryableAws, sleep } from './aws-error.js';

/** The only part of an `SQSClient` this adapter uses. */
export type SqsSender = Pick<SQSClient, 'send'>;

/** The message attribute that carries the job key, so consumers and operators can see it without parsing the body. */
export const JOB_KEY_ATTRIBUTE = 'jobKey';

/** SQS limits: 10 entries per SendMessageBatch, 256 KiB for the whole batch payload (bodies plus attributes). */
export const SQS_MAX_BATCH_ENTRIES = 10;
export const SQS_MAX_BATCH_BYTES = 256 * 1024;
/** SQS caps a visibility timeout at 12 hours. */
const MAX_VISIBILITY_SEC = 43_200;

export interface SqsJobQueueOptions {
  /** The dead-letter queue URL; when absent it is found from the queue's RedrivePolicy on first use. */
  readonly deadLetterQueueUrl?: string | undefined;
  /** Attempts for entries SQS reports as failed on its side (SenderFault false). Default 5. */
  readonly sendAttempts?: number;
  /** Batches in flight at once during a fan-out. Default 4. */
  readonly sendConcurrency?: number;
  /** Long-poll wait for `receive`, seconds (0-20). Default 0: the pull side is for tests and the parity suite. */
  readonly receiveWaitSeconds?: number;
  readonly random?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/**
 * Tile jobs on an SQS standard queue.
 *
 * Fan-out (`sendBatch`) sends SendMessageBatch requests of at most 10 entries
 * and 256 KiB, a few in parallel, with the job key as a message attribute.
 * SendMessageBatch can succeed as a call while failing single entries: those
 * are sent again with full-jitter backoff when SQS says the fault is its own,
 * and refused at once when the entry itself is bad (SenderFault). A duplicate
 * send after an ambiguous failure is harmless: the claim stops the second copy.
 *
 * In production the Lambda event source mapping pulls and deletes messages.
 * The `PullQueue` side (receive, ack, release, deadLetters) lets tests and the
 * parity suite drive a real queue with the same redrive policy: a message
 * received more than `maxReceiveCount` times is moved to the dead-letter queue
 * by SQS itself.
 *
 * @example
 * const queue = new SqsJobQueue(new SQSClient({}), process.env.TESSERA_TILE_QUEUE);
 * await queue.sendBatch(jobs.map(toJobMessage));
 */
export class SqsJobQueue implements PullQueue {
  readonly name: string;
  readonly #attempts: number;
  readonly #concurrency: number;
  readonly #wait: number;
  readonly #random: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  #deadLetterUrl: string | undefined;
  /** The receipt handle of each delivery `receive` handed out: ack and release need the latest one. */
  readonly #receipts = new WeakMap<Delivery, string>();

  /**
   * @param client an SQSClient (or anything with its `send`)
   * @param queueUrl the tile queue's URL (TESSERA_TILE_QUEUE)
   */
  constructor(
    private readonly client: SqsSender,
    readonly queueUrl: string,
    options: SqsJobQueueOptions = {},
  ) {
    if (!queueUrl) throw new AdapterError('[job-queue:sqs] no queue URL given; set TESSERA_TILE_QUEUE to the tile queue URL');
    if (queueUrl.endsWith('.fifo')) {
      throw new AdapterError(
        `[job-queue:sqs] ${queueUrl} is a FIFO queue; use a standard queue: FIFO's 5-minute deduplication does not cover a tile job, the claim does`,
      );
    }
    this.name = `sqs:${queueUrl.slice(queueUrl.lastIndexOf('/') + 1)}`;
    this.#attempts = options.sendAttempts ?? 5;
    this.#concurrency = options.sendConcurrency ?? 4;
    this.#wait = options.receiveWaitSeconds ?? 0;
    this.#random = options.random ?? Math.random;
    this.#sleep = options.sleep ?? sleep;
    this.#deadLetterUrl = options.deadLetterQueueUrl;
  }

  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    const batches = chunk(messages, this.name);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < batches.length) {
        const batch = batches[next++] as JobMessage[];
        await this.#sendOne(batch);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, batches.length) }, worker));
  }

  async receive(max: number, visibilityMs: number): Promise<Delivery[]> {
    let out: { Messages?: Message[] | undefined };
    try {
      out = await this.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.queueUrl,
          MaxNumberOfMessages: Math.max(1, Math.min(SQS_MAX_BATCH_ENTRIES, Math.floor(max))),
          VisibilityTimeout: visibilitySeconds(visibilityMs),
          WaitTimeSeconds: this.#wait,
          MessageAttributeNames: [JOB_KEY_ATTRIBUTE],
          MessageSystemAttributeNames: ['ApproximateReceiveCount'],
        }),
      );
    } catch (e) {
      throw this.#failed('receive', e);
    }
    return (out.Messages ?? []).flatMap((m) => {
      if (m.MessageId === undefined || m.ReceiptHandle === undefined) return [];
      const delivery: Delivery = Object.freeze({
        deliveryId: m.MessageId,
        jobKey: jobKeyOf(m),
        body: m.Body ?? '',
        receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? '1'),
      });
      this.#receipts.set(delivery, m.ReceiptHandle);
      return [delivery];
    });
  }

  /** Deletes the message. A stale receipt (the message was received again since) is ignored, as SQS itself does. */
  async ack(delivery: Delivery): Promise<void> {
    try {
      await this.client.send(new DeleteMessageCommand({ QueueUrl: this.queueUrl, ReceiptHandle: this.#receipt(delivery) }));
    } catch (e) {
      if (isAwsFailure(e, 400, 'ReceiptHandleIsInvalid')) return;
      throw this.#failed(`ack of ${delivery.deliveryId}`, e);
    }
  }

  /** Makes the message visible again after `delayMs` (rounded up to whole seconds, as SQS counts). */
  async release(delivery: Delivery, delayMs = 0): Promise<void> {
    try {
      await this.client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: this.queueUrl,
          ReceiptHandle: this.#receipt(delivery),
          VisibilityTimeout: visibilitySeconds(delayMs),
        }),
      );
    } catch (e) {
      // The visibility already ran out (or the message was received again): it is visible or someone else's now.
      if (isAwsFailure(e, 400, 'MessageNotInflight', 'ReceiptHandleIsInvalid', 'InvalidParameterValue')) return;
      throw this.#failed(`release of ${delivery.deliveryId}`, e);
    }
  }

  /**
   * The messages in the dead-letter queue, without removing them: each is
   * received (which hides it for a short while) and made visible again at once.
   * For operators and tests; it costs one receive per ten messages.
   */
  async deadLetters(): Promise<JobMessage[]> {
    const url = await this.#resolveDeadLetterUrl();
    const seen = new Map<string, JobMessage>();
    const receipts: string[] = [];
    try {
      for (;;) {
        const out = await this.client.send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: SQS_MAX_BATCH_ENTRIES,
            VisibilityTimeout: 30,
            // A long poll asks every SQS server, so an empty answer means the queue is empty (short polls sample).
            WaitTimeSeconds: 1,
            MessageAttributeNames: [JOB_KEY_ATTRIBUTE],
          }),
        );
        const fresh = (out.Messages ?? []).filter((m) => m.MessageId !== undefined && !seen.has(m.MessageId));
        if (fresh.length === 0) break;
        for (const m of fresh) {
          seen.set(m.MessageId as string, { jobKey: jobKeyOf(m), body: m.Body ?? '' });
          if (m.ReceiptHandle) receipts.push(m.ReceiptHandle);
        }
      }
    } catch (e) {
      throw this.#failed(`peek of the dead-letter queue ${url}`, e);
    } finally {
      await Promise.all(
        receipts.map((ReceiptHandle) =>
          this.client
            .send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle, VisibilityTimeout: 0 }))
            .catch(() => undefined),
        ),
      );
    }
    return [...seen.values()];
  }

  /** Poison: sent to the dead-letter queue now, then deleted; never received again (shared/app/poison.ts). */
  async deadLetter(delivery: Delivery, why: Pick<DeadLetter, 'reason' | 'error'>): Promise<void> {
    const sink = new SqsDeadLetterQueue(this.client, await this.#resolveDeadLetterUrl());
    await sink.send({ body: delivery.body, jobKey: delivery.jobKey, messageId: delivery.deliveryId, ...why });
    await this.ack(delivery);
  }

  async #sendOne(batch: readonly JobMessage[]): Promise<void> {
    let pending = batch.map((m, i) => ({ id: String(i), message: m }));
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) await this.#sleep(backoffDelayMs(attempt - 1, 100, 5000, this.#random));
      const entries: SendMessageBatchRequestEntry[] = pending.map(({ id, message }) => ({
        Id: id,
        MessageBody: message.body,
        MessageAttributes: { [JOB_KEY_ATTRIBUTE]: { DataType: 'String', StringValue: message.jobKey } },
      }));
      let failed: { Id?: string | undefined; SenderFault?: boolean | undefined; Code?: string | undefined; Message?: string | undefined }[];
      try {
        const out = await this.client.send(new SendMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: entries }));
        failed = out.Failed ?? [];
      } catch (e) {
        if (!isRetryableAws(e) || attempt + 1 >= this.#attempts) throw this.#failed(`send of ${pending.length} job(s)`, e);
        continue;
      }
      if (failed.length === 0) return;
      const senderFault = failed.find((f) => f.SenderFault);
      if (senderFault) {
        const job = pending.find((p) => p.id === senderFault.Id)?.message.jobKey ?? '?';
        throw new AdapterError(
          `[job-queue:${this.name}] SQS refused job ${job}: ${senderFault.Code ?? 'error'} ${senderFault.Message ?? ''}; the message itself is invalid, fix the job before sending it again`.trim(),
        );
      }
      const failedIds = new Set(failed.map((f) => f.Id));
      pending = pending.filter((p) => failedIds.has(p.id));
      if (attempt + 1 >= this.#attempts) {
        throw new AdapterError(
          `[job-queue:${this.name}] ${pending.length} job(s) were still not accepted after ${this.#attempts} attempts (${failed[0]?.Code ?? 'unknown'}); retry the fan-out, duplicates are harmless`,
          { retryable: true },
        );
      }
    }
  }

  #receipt(delivery: Delivery): string {
    const handle = this.#receipts.get(delivery);
    if (handle === undefined) {
      throw new AdapterError(
        `[job-queue:${this.name}] delivery ${delivery.deliveryId} did not come from this queue's receive; pass the object receive returned`,
      );
    }
    return handle;
  }

  async #resolveDeadLetterUrl(): Promise<string> {
    if (this.#deadLetterUrl !== undefined) return this.#deadLetterUrl;
    let policy: string | undefined;
    try {
      const out = await this.client.send(new GetQueueAttributesCommand({ QueueUrl: this.queueUrl, AttributeNames: ['RedrivePolicy'] }));
      policy = out.Attributes?.RedrivePolicy;
    } catch (e) {
      throw this.#failed('reading the redrive policy', e);
    }
    const arn = policy ? (JSON.parse(policy) as { deadLetterTargetArn?: string }).deadLetterTargetArn : undefined;
    if (!arn) {
      throw new AdapterError(
        `[job-queue:${this.name}] the queue has no RedrivePolicy, so poison jobs would be retried forever; give it a dead-letter queue`,
      );
    }
    // arn:aws:sqs:<region>:<account>:<name>
    const [, , , , account, queueName] = arn.split(':');
    try {
      const out = await this.client.send(new GetQueueUrlCommand({ QueueName: queueName, QueueOwnerAWSAccountId: account }));
      if (!out.QueueUrl) throw new Error('no QueueUrl in the answer');
      this.#deadLetterUrl = out.QueueUrl;
      return out.QueueUrl;
    } catch (e) {
      throw this.#failed(`looking up the dead-letter queue ${arn}`, e);
    }
  }

  #failed(what: string, error: unknown): AdapterError {
    const hint = isAwsFailure(error, 400, 'AWS.SimpleQueueService.NonExistentQueue', 'QueueDoesNotExist')
      ? `queue ${this.queueUrl} does not exist: deploy the stack or fix TESSERA_TILE_QUEUE`
      : isAwsFailure(error, 403)
        ? 'the function role may not use the queue: grant sqs:SendMessage (scene function) or the event source mapping permissions (tile function)'
        : 'retry; if it persists check the queue and the network';
    return new AdapterError(`[job-queue:${this.name}] ${what} failed (${describeAwsFailure(error)}); ${hint}`, {
      cause: error,
      retryable: isRetryableAws(error),
    });
  }
}

/** SQS's limit on one message attribute value we set (the reason text is clipped to it). */
const MAX_REASON_CHARS = 1024;

/**
 * A dead-letter queue a handler writes poison to itself (SendMessage), so the
 * poison record is acknowledged at once instead of being received
 * maxReceiveCount times before the redrive policy moves it. The entry is the
 * original body with the reason and the original message id as attributes.
 * SendMessage has no condition: an SDK retry after a lost answer can leave a
 * second, identical entry, which a redrive replays harmlessly (the claim, or
 * a create-only fan-out, stops the second). Needs sqs:SendMessage on the DLQ.
 */
export class SqsDeadLetterQueue implements DeadLetterSink {
  readonly name: string;

  constructor(
    private readonly client: SqsSender,
    readonly queueUrl: string,
  ) {
    this.name = `sqs:${queueUrl.split('/').pop() ?? queueUrl}`;
  }

  async send(letter: DeadLetter): Promise<void> {
    const text = (v: string) => ({ DataType: 'String', StringValue: v.slice(0, MAX_REASON_CHARS) || '-' });
    try {
      await this.client.send(
        new SendMessageCommand({
          QueueUrl: this.queueUrl,
          MessageBody: letter.body,
          MessageAttributes: {
            ...(letter.jobKey ? { [JOB_KEY_ATTRIBUTE]: text(letter.jobKey) } : {}),
            'tessera-reason': text(letter.reason),
            'tessera-error': text(letter.error),
            'tessera-message-id': text(letter.messageId),
          },
        }),
      );
    } catch (e) {
      const hint = isAwsFailure(e, 403)
        ? 'grant the function sqs:SendMessage on its dead-letter queue'
        : 'the delivery falls back to the redrive policy, so the message is not lost';
      throw new AdapterError(
        `[dead-letter:${this.name}] poison message ${letter.messageId} (${letter.reason}) could not be sent (${describeAwsFailure(e)}); ${hint}`,
        {
          cause: e,
          retryable: isRetryableAws(e),
        },
      );
    }
  }
}

/** SQS counts visibility in whole seconds; round up so a job is never hidden for less than asked. */
function visibilitySeconds(ms: number): number {
  return Math.max(0, Math.min(MAX_VISIBILITY_SEC, Math.ceil(ms / 1000)));
}

function jobKeyOf(m: Message): string {
  return m.MessageAttributes?.[JOB_KEY_ATTRIBUTE]?.StringValue ?? '';
}

const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8');

/** Split into SendMessageBatch-sized groups: at most 10 entries and 256 KiB of bodies and attributes each. */
export function chunk(messages: readonly JobMessage[], queueName = 'sqs'): JobMessage[][] {
  const out: JobMessage[][] = [];
  let current: JobMessage[] = [];
  let bytes = 0;
  for (const m of messages) {
    // The attribute counts towards the limit: its name, type ("String") and value.
    const size = utf8(m.body) + utf8(JOB_KEY_ATTRIBUTE) + 6 + utf8(m.jobKey);
    if (size > SQS_MAX_BATCH_BYTES) {
      throw new AdapterError(
        `[job-queue:${queueName}] job ${m.jobKey} is ${size} bytes, over the SQS message limit of ${SQS_MAX_BATCH_BYTES}`,
      );
    }
    if (current.length === SQS_MAX_BATCH_ENTRIES || bytes + size > SQS_MAX_BATCH_BYTES) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(m);
    bytes += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}
