import type { DequeuedMessageItem, QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { AdapterError } from '../../../shared/domain/errors.js';
import type { DeadLetter, DeadLetterSink, Delivery, JobMessage, PullQueue } from '../../../shared/ports/job-queue.port.js';
import { isFailure, storageFailure } from './rest-error.js';

/** The Functions host's default `maxDequeueCount` for Storage Queue triggers (host.json `extensions.queues`). */
export const DEFAULT_MAX_DEQUEUE_COUNT = 5;

/** Storage Queue messages are at most 64 KiB of text; base64 makes 4 characters of every 3 bytes. */
export const MAX_MESSAGE_TEXT_BYTES = 64 * 1024;

/** Messages one Get Messages call may return (service maximum). */
const RECEIVE_BATCH = 32;

/** Parallel Put Message calls in one sendBatch: the queue has no batch send, and a fan-out is hundreds of messages. */
const SEND_CONCURRENCY = 16;

/** The poison queue the Functions host uses for a queue: `<queue>-poison`. */
export const poisonQueueName = (queue: string): string => `${queue}-poison`;

/**
 * Message text as the Functions host expects it: base64 of the UTF-8 body
 * (host.json `extensions.queues.messageEncoding` defaults to `base64`; a
 * plain-text message would fail to decode in the trigger and go to poison).
 */
export const encodeMessageText = (body: string): string => Buffer.from(body, 'utf8').toString('base64');

/** The inverse of {@link encodeMessageText}. */
export const decodeMessageText = (text: string): string => Buffer.from(text, 'base64').toString('utf8');

/** A delivery with the Storage Queue metadata the Functions host passes to a queue trigger. */
export interface AzureDelivery extends Delivery {
  readonly popReceipt: string;
  readonly insertedOn: Date;
  readonly expiresOn: Date;
  readonly nextVisibleOn: Date;
}

export interface AzureQueueJobQueueOptions {
  /** Where messages go after too many dequeues: the host uses `<queue>-poison` on the same account. */
  readonly poison: QueueClient;
  /** Deliveries before a message is poison, as the host's `maxDequeueCount` (default 5). */
  readonly maxDequeueCount?: number | undefined;
}

/**
 * Tile jobs on an Azure Storage Queue.
 *
 * `sendBatch` is what the scene handler uses in production; the Functions
 * queue trigger does the receiving there. The pull side (receive, ack,
 * release, deadLetters) exists for tests and local runs and follows the host's
 * poison rules, because the queue service itself never moves a message:
 * - a message received with a dequeue count above `maxDequeueCount` (its
 *   earlier attempts died without reporting) is copied to `<queue>-poison` and
 *   deleted instead of being delivered;
 * - a failed attempt (`release`) of a message already dequeued
 *   `maxDequeueCount` times is copied to `<queue>-poison` and deleted.
 *
 * The message text is the base64 of the TileJob JSON; the job key is read back
 * from that JSON (Storage Queue messages carry no attributes). A delivery's id
 * is the message id, stable across redeliveries as the claim owners need
 * (shared/app/deliveries.ts); the pop receipt that ack and release need is
 * kept by this instance, since only the receiver that holds it may use it.
 *
 * @example
 * const queue = new AzureQueueJobQueue(QueueServiceClient.fromConnectionString(cs).getQueueClient('tiles'));
 * await queue.sendBatch(jobs.map(toJobMessage));
 */
export class AzureQueueJobQueue implements PullQueue {
  readonly name = 'azure-queue';
  readonly maxDequeueCount: number;
  private readonly poison: QueueClient;
  /** Pop receipt of the current dequeue of each message this instance received and has not settled. */
  private readonly popReceipts = new Map<string, string>();

  /**
   * The queue `name` on `service` with the host's poison queue `<name>-poison` beside it.
   *
   * @example
   * AzureQueueJobQueue.onAccount(QueueServiceClient.fromConnectionString(cs), 'tiles')
   */
  static onAccount(service: QueueServiceClient, name: string, maxDequeueCount = DEFAULT_MAX_DEQUEUE_COUNT): AzureQueueJobQueue {
    return new AzureQueueJobQueue(service.getQueueClient(name), { poison: service.getQueueClient(poisonQueueName(name)), maxDequeueCount });
  }

  /** @param queue a client for an existing queue (infra/ creates it and its poison queue). */
  constructor(
    private readonly queue: QueueClient,
    options: AzureQueueJobQueueOptions,
  ) {
    this.maxDequeueCount = options.maxDequeueCount ?? DEFAULT_MAX_DEQUEUE_COUNT;
    if (!Number.isInteger(this.maxDequeueCount) || this.maxDequeueCount < 1) {
      throw new AdapterError(`[job-queue:${this.name}] maxDequeueCount must be a positive whole number, got ${this.maxDequeueCount}`);
    }
    this.poison = options.poison;
  }

  /** The queue's name, e.g. for the trigger's `queueName`. */
  get queueName(): string {
    return this.queue.name;
  }

  /** The poison queue's name (`<queue>-poison` unless configured otherwise). */
  get poisonQueueName(): string {
    return this.poison.name;
  }

  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    const texts = messages.map((m) => {
      const text = encodeMessageText(m.body);
      if (Buffer.byteLength(text) > MAX_MESSAGE_TEXT_BYTES) {
        throw new AdapterError(
          `[job-queue:${this.name}] tile job ${m.jobKey} is ${Buffer.byteLength(text)} bytes once base64-encoded, over the ${MAX_MESSAGE_TEXT_BYTES}-byte Storage Queue limit; shrink the processing parameters`,
        );
      }
      return text;
    });
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < texts.length; i = next++) {
        try {
          await this.queue.sendMessage(texts[i] as string);
        } catch (e) {
          throw this.failed(`send of tile job ${messages[i]?.jobKey}`, e);
        }
      }
    };
    // A failed send rejects the batch; the messages already sent stay, and a redelivered scene event sends them
    // again with the same job keys, which the claim gate turns into no-ops.
    await Promise.all(Array.from({ length: Math.min(SEND_CONCURRENCY, texts.length) }, worker));
  }

  async receive(max: number, visibilityMs: number): Promise<AzureDelivery[]> {
    const numberOfMessages = Math.max(1, Math.min(RECEIVE_BATCH, Math.floor(max)));
    // The service counts visibility in whole seconds; rounding up never shortens what the caller asked for.
    const visibilityTimeout = Math.max(1, Math.ceil(visibilityMs / 1000));
    let items: DequeuedMessageItem[];
    try {
      items = (await this.queue.receiveMessages({ numberOfMessages, visibilityTimeout })).receivedMessageItems;
    } catch (e) {
      throw this.failed('receive', e);
    }
    const deliveries: AzureDelivery[] = [];
    for (const item of items) {
      if (item.dequeueCount > this.maxDequeueCount) {
        // Earlier attempts died without acking or releasing (a crash, a timeout): the host poisons these on sight.
        await this.moveToPoison(item.messageId, item.popReceipt, item.messageText);
        continue;
      }
      const body = decodeMessageText(item.messageText);
      this.popReceipts.set(item.messageId, item.popReceipt);
      deliveries.push({
        deliveryId: item.messageId,
        jobKey: jobKeyOf(body),
        body,
        receiveCount: item.dequeueCount,
        popReceipt: item.popReceipt,
        insertedOn: item.insertedOn,
        expiresOn: item.expiresOn,
        nextVisibleOn: item.nextVisibleOn,
      });
    }
    return deliveries;
  }

  async ack(delivery: Delivery): Promise<void> {
    const { messageId, popReceipt } = this.settle(delivery);
    try {
      await this.queue.deleteMessage(messageId, popReceipt);
    } catch (e) {
      // 404 MessageNotFound, or 400 PopReceiptMismatch: already deleted, or our visibility lapsed and another receiver
      // holds it now. Either way the message is not ours to delete; the other receiver's claim decides the job.
      if (lostMessage(e)) return;
      throw this.failed(`ack of message ${messageId}`, e);
    }
  }

  async release(delivery: Delivery, delayMs = 0): Promise<void> {
    const { messageId, popReceipt } = this.settle(delivery);
    if (delivery.receiveCount >= this.maxDequeueCount) {
      // The host moves a message to poison when the attempt that fails is its maxDequeueCount-th.
      await this.moveToPoison(messageId, popReceipt, encodeMessageText(delivery.body));
      return;
    }
    try {
      await this.queue.updateMessage(messageId, popReceipt, undefined, Math.max(0, Math.ceil(delayMs / 1000)));
    } catch (e) {
      if (lostMessage(e)) return; // lapsed and taken by another receiver: it is visible to someone already
      throw this.failed(`release of message ${messageId}`, e);
    }
  }

  /**
   * Poison: copied to `<queue>-poison` now (the text the host itself would
   * copy) and deleted, as the host does after its last dequeue, without the
   * retries in between.
   */
  async deadLetter(delivery: Delivery, _why: Pick<DeadLetter, 'reason' | 'error'>): Promise<void> {
    const { messageId, popReceipt } = this.settle(delivery);
    await this.moveToPoison(messageId, popReceipt, encodeMessageText(delivery.body));
  }

  async deadLetters(): Promise<JobMessage[]> {
    try {
      // Peek returns at most 32 messages and never hides them. Nothing consumes the poison queue, so fewer than
      // 32 peeked means that is all of it.
      const peeked = (await this.poison.peekMessages({ numberOfMessages: RECEIVE_BATCH })).peekedMessageItems;
      if (peeked.length < RECEIVE_BATCH) return peeked.map((m) => toJobMessage(m.messageText));
      return await this.drainPoisonNonDestructively();
    } catch (e) {
      if (e instanceof AdapterError) throw e;
      if (isFailure(e, 404)) return []; // no poison queue yet: nothing was ever poisoned
      throw this.failed('listing of the poison queue', e);
    }
  }

  /** More than 32 poison messages: receive them all (hidden briefly), then make each visible again. */
  private async drainPoisonNonDestructively(): Promise<JobMessage[]> {
    const seen = new Map<string, { popReceipt: string; text: string }>();
    for (;;) {
      const batch = (await this.poison.receiveMessages({ numberOfMessages: RECEIVE_BATCH, visibilityTimeout: 60 })).receivedMessageItems;
      if (batch.length === 0) break;
      for (const m of batch) seen.set(m.messageId, { popReceipt: m.popReceipt, text: m.messageText });
    }
    await Promise.all([...seen].map(([id, m]) => this.poison.updateMessage(id, m.popReceipt, undefined, 0)));
    return [...seen.values()].map((m) => toJobMessage(m.text));
  }

  /** The message id and pop receipt of a delivery this instance received; forgets it (it is settled now). */
  private settle(delivery: Delivery): { messageId: string; popReceipt: string } {
    const popReceipt = this.popReceipts.get(delivery.deliveryId);
    if (popReceipt === undefined) {
      throw new AdapterError(
        `[job-queue:${this.name}] delivery ${delivery.deliveryId} was not received by this queue instance, or was already acked or released; ` +
          'settle each delivery once, on the instance that received it',
      );
    }
    this.popReceipts.delete(delivery.deliveryId);
    return { messageId: delivery.deliveryId, popReceipt };
  }

  private async moveToPoison(messageId: string, popReceipt: string, text: string): Promise<void> {
    // Copy first, then delete: a crash in between leaves a duplicate in poison, never a lost message.
    try {
      await this.poison.createIfNotExists();
      await this.poison.sendMessage(text);
    } catch (e) {
      throw this.failed(`copy of message ${messageId} to ${this.poison.name}`, e);
    }
    try {
      await this.queue.deleteMessage(messageId, popReceipt);
    } catch (e) {
      if (lostMessage(e)) return; // the copy is in poison; another receiver holds the original now
      throw this.failed(`delete of poisoned message ${messageId}`, e);
    }
  }

  private failed(what: string, cause: unknown): AdapterError {
    return storageFailure(cause, what, {
      tag: `job-queue:${this.name}`,
      kind: 'queue',
      resource: this.queue.name,
      missingCode: 'QueueNotFound',
      role: 'Storage Queue Data Contributor',
    });
  }
}

/** The message is gone, or another receiver's dequeue replaced our pop receipt. */
function lostMessage(e: unknown): boolean {
  return isFailure(e, 404) || isFailure(e, 400, 'PopReceiptMismatch');
}

/** The job key from a TileJob body, or '' when the body is not one (it is poison; the worker will say so). */
export function jobKeyOf(body: string): string {
  try {
    const parsed = JSON.parse(body) as { jobKey?: unknown };
    return typeof parsed?.jobKey === 'string' ? parsed.jobKey : '';
  } catch {
    return '';
  }
}

function toJobMessage(text: string): JobMessage {
  const body = decodeMessageText(text);
  return { jobKey: jobKeyOf(body), body };
}

/**
 * The poison queue of a Storage Queue trigger as a dead-letter sink: the
 * handler puts poison there itself and returns success, so the host deletes
 * the original at once instead of retrying it `maxDequeueCount` times
 * (shared/app/poison.ts). The entry is the message text the host would have
 * copied (base64 of the body), so one replay tool reads both kinds of entry.
 *
 * Queue Storage has no conditional Put Message. A send retried after a lost
 * answer, or a delivery that dies after the send and before the host's
 * delete, leaves a second, byte-identical entry: never a lost one (the copy
 * is made before the ack) and never a doubled effect (a replayed tile job
 * stops at its claim, a replayed scene event repeats a create-only fan-out).
 * The function needs Storage Queue Data Message Sender on `<queue>-poison`.
 */
export class AzurePoisonQueue implements DeadLetterSink {
  readonly name: string;
  readonly #poison: QueueClient;

  constructor(service: QueueServiceClient, queueName: string) {
    this.#poison = service.getQueueClient(poisonQueueName(queueName));
    this.name = `azure-queue:${this.#poison.name}`;
  }

  async send(letter: DeadLetter): Promise<void> {
    try {
      await this.#poison.sendMessage(encodeMessageText(letter.body));
    } catch (e) {
      if (!isFailure(e, 404)) throw this.#failed(letter, e);
      // The poison queue does not exist until the first poison message: create it, once.
      try {
        await this.#poison.createIfNotExists();
        await this.#poison.sendMessage(encodeMessageText(letter.body));
      } catch (again) {
        throw this.#failed(letter, again);
      }
    }
  }

  #failed(letter: DeadLetter, cause: unknown): AdapterError {
    return storageFailure(cause, `copy of poison message ${letter.messageId} (${letter.reason})`, {
      tag: `dead-letter:${this.name}`,
      kind: 'queue',
      resource: this.#poison.name,
      missingCode: 'QueueNotFound',
      role: 'Storage Queue Data Message Sender',
    });
  }
}
