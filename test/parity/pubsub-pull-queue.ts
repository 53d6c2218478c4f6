import type { v1 } from '@google-cloud/pubsub';
import type { PubSubDeadLetterTopic } from '../../functions/gcp/adapters/pubsub-dead-letter-topic.js';
import type { DeadLetter, Delivery, JobMessage, JobQueue, PullQueue } from '../../shared/ports/job-queue.port.js';

/** The attribute the GCP fan-out puts the job key in (functions/gcp/adapters/pubsub-job-queue.ts). */
const JOB_KEY_ATTRIBUTE = 'jobKey';

/** Pub/Sub accepts ack deadlines of 0 to 600 seconds. */
const MAX_ACK_DEADLINE_SEC = 600;

/** Pulls per dead-letter peek before an empty answer is believed (forwarding to the dead-letter topic is asynchronous). */
const DEAD_LETTER_PEEK_TRIES = 5;

const ackDeadline = (ms: number): number => Math.max(0, Math.min(MAX_ACK_DEADLINE_SEC, Math.ceil(ms / 1000)));

/**
 * The pull side of the GCP tile queue, for the parity suite: what Eventarc's
 * push subscription does in production (deliver, read the answer, redeliver,
 * dead-letter), done by hand against Google's Pub/Sub emulator so the suite
 * can drive GCP the way it drives SQS, Storage Queues and the local queue.
 *
 * - `sendBatch` is the GCP backend's own fan-out adapter (PubSubJobQueue), unchanged.
 * - `receive` is one synchronous Pull on the tile subscription, then a
 *   ModifyAckDeadline to the visibility asked for (the subscription's own
 *   deadline is 10 s, the minimum), so a message whose receiver dies comes back
 *   after `visibilityMs` as on the other queues.
 * - `release` is ModifyAckDeadline (0 = a nack: redeliver now).
 * - The subscription carries a dead-letter policy: after `maxDeliveryAttempts`
 *   deliveries the emulator itself forwards the message to the dead-letter
 *   topic, and `deliveryAttempt` is the receive count.
 * - `deadLetters` peeks the dead-letter topic's subscription (pulled, then nacked).
 *
 * The delivery id is the Pub/Sub message id, stable across redeliveries as
 * the claim owners need. It lives in test/ because production GCP never pulls:
 * Pub/Sub pushes to the tile function.
 */
export class PubSubPullQueue implements PullQueue {
  readonly name = 'pubsub-pull';
  /** The ack id of each delivery `receive` handed out. */
  readonly #ackIds = new WeakMap<Delivery, string>();

  /**
   * @param fanOut the GCP backend's publishing adapter for the tile topic
   * @param subscriber a SubscriberClient pointed at the emulator
   * @param subscription the tile subscription's full name (`projects/<p>/subscriptions/<s>`)
   * @param deadLetterSubscription a subscription on the dead-letter topic
   */
  constructor(
    private readonly fanOut: JobQueue,
    private readonly subscriber: v1.SubscriberClient,
    private readonly subscription: string,
    private readonly deadLetterSubscription: string,
    /** The dead-letter topic's publisher, for poison settled at once. */
    private readonly deadLetterTopic?: PubSubDeadLetterTopic,
  ) {}

  sendBatch(messages: readonly JobMessage[]): Promise<void> {
    return this.fanOut.sendBatch(messages);
  }

  async receive(max: number, visibilityMs: number): Promise<Delivery[]> {
    // returnImmediately: an empty subscription answers at once, as a short SQS poll does.
    const [response] = await this.subscriber.pull({
      subscription: this.subscription,
      maxMessages: Math.max(1, Math.floor(max)),
      returnImmediately: true,
    });
    const received = (response.receivedMessages ?? []).filter((m) => m.ackId && m.message?.messageId);
    if (received.length === 0) return [];
    await this.subscriber.modifyAckDeadline({
      subscription: this.subscription,
      ackIds: received.map((m) => m.ackId as string),
      ackDeadlineSeconds: Math.max(1, ackDeadline(visibilityMs)),
    });
    return received.map((m) => {
      const message = m.message as NonNullable<typeof m.message>;
      const delivery: Delivery = Object.freeze({
        deliveryId: message.messageId as string,
        jobKey: message.attributes?.[JOB_KEY_ATTRIBUTE] ?? '',
        body: Buffer.from(message.data ?? new Uint8Array()).toString('utf8'),
        // Present because the subscription has a dead-letter policy: 1 on the first delivery.
        receiveCount: m.deliveryAttempt ?? 1,
      });
      this.#ackIds.set(delivery, m.ackId as string);
      return delivery;
    });
  }

  async ack(delivery: Delivery): Promise<void> {
    await this.subscriber.acknowledge({ subscription: this.subscription, ackIds: [this.#ackId(delivery)] });
  }

  async release(delivery: Delivery, delayMs = 0): Promise<void> {
    await this.subscriber.modifyAckDeadline({
      subscription: this.subscription,
      ackIds: [this.#ackId(delivery)],
      ackDeadlineSeconds: ackDeadline(delayMs),
    });
  }

  /** Poison: published to the dead-letter topic now (what the tile function does), then acknowledged. */
  async deadLetter(delivery: Delivery, why: Pick<DeadLetter, 'reason' | 'error'>): Promise<void> {
    if (this.deadLetterTopic === undefined) throw new Error(`[job-queue:${this.name}] no dead-letter topic to publish poison to`);
    await this.deadLetterTopic.send({
      data: Buffer.from(delivery.body, 'utf8'),
      ...why,
      messageId: delivery.deliveryId,
      subscription: this.subscription,
      attributes: delivery.jobKey ? { [JOB_KEY_ATTRIBUTE]: delivery.jobKey } : undefined,
    });
    await this.ack(delivery);
  }

  async deadLetters(): Promise<JobMessage[]> {
    const seen = new Map<string, JobMessage>();
    const ackIds: string[] = [];
    try {
      for (let tries = 0; tries < DEAD_LETTER_PEEK_TRIES; tries++) {
        const [response] = await this.subscriber.pull({
          subscription: this.deadLetterSubscription,
          maxMessages: 100,
          returnImmediately: true,
        });
        const fresh = (response.receivedMessages ?? []).filter((m) => m.message?.messageId && !seen.has(m.message.messageId));
        for (const m of fresh) {
          const message = m.message as NonNullable<typeof m.message>;
          seen.set(message.messageId as string, {
            jobKey: message.attributes?.[JOB_KEY_ATTRIBUTE] ?? '',
            body: Buffer.from(message.data ?? new Uint8Array()).toString('utf8'),
          });
          if (m.ackId) ackIds.push(m.ackId);
        }
        if (fresh.length === 0 && seen.size > 0) break;
        if (fresh.length === 0) await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      if (ackIds.length > 0) {
        await this.subscriber
          .modifyAckDeadline({ subscription: this.deadLetterSubscription, ackIds, ackDeadlineSeconds: 0 })
          .catch(() => undefined);
      }
    }
    return [...seen.values()];
  }

  #ackId(delivery: Delivery): string {
    const ackId = this.#ackIds.get(delivery);
    if (ackId === undefined)
      throw new Error(`[job-queue:${this.name}] delivery ${delivery.deliveryId} did not come from this queue's receive`);
    return ackId;
  }
}
