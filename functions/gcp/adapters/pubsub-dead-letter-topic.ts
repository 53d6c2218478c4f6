import { AdapterError } from '../../../shared/domain/errors.js';
import { JOB_KEY_ATTRIBUTE, type PubSubPublisher } from './pubsub-job-queue.js';

/** A message the tile worker gave up on, with why. */
export interface DeadLetter {
  /** The original message bytes, unchanged, so an operator can re-publish a fixed copy. */
  readonly data: Buffer;
  /** Why it is poison: the error's code (e.g. INVALID_EVENT) or `undecodable`. */
  readonly reason: string;
  readonly error: string;
  /** The original Pub/Sub message id and subscription, to find the delivery in logs. */
  readonly messageId: string;
  readonly subscription?: string | undefined;
  /** The original message's attributes (its jobKey, if it had one). */
  readonly attributes?: Readonly<Record<string, string>> | undefined;
}

/** Pub/Sub's limit on one attribute value. */
const MAX_ATTRIBUTE_BYTES = 1024;
const clip = (text: string): string =>
  Buffer.byteLength(text) <= MAX_ATTRIBUTE_BYTES
    ? text
    : `${Buffer.from(text)
        .subarray(0, MAX_ATTRIBUTE_BYTES - 3)
        .toString()}...`;

/**
 * The dead-letter path for poison tile messages. The tile worker publishes the
 * message here and then acknowledges it: a malformed message is kept for an
 * operator, never redelivered. (Messages that keep failing for retryable
 * reasons are moved by the subscription's own dead-letter policy instead,
 * after its max delivery attempts; infra/ sets both to the same topic.)
 */
export class PubSubDeadLetterTopic {
  constructor(private readonly topic: PubSubPublisher) {}

  /** The dead-letter topic's full name. */
  get name(): string {
    return this.topic.name;
  }

  /** Publish one dead letter; returns its message id. Throws a retryable AdapterError if Pub/Sub refuses it. */
  async send(letter: DeadLetter): Promise<string> {
    const attributes: Record<string, string> = {
      ...(letter.attributes ?? {}),
      'tessera-reason': clip(letter.reason),
      'tessera-error': clip(letter.error),
      'tessera-message-id': clip(letter.messageId),
      ...(letter.subscription ? { 'tessera-subscription': clip(letter.subscription) } : {}),
    };
    try {
      return await this.topic.publishMessage({ data: letter.data, attributes });
    } catch (error) {
      throw new AdapterError(
        `[dead-letter:pubsub] could not publish poison message ${letter.messageId}${attributes[JOB_KEY_ATTRIBUTE] ? ` (job ${attributes[JOB_KEY_ATTRIBUTE]})` : ''} ` +
          `to ${this.topic.name}: ${error instanceof Error ? error.message : String(error)}; the delivery is retried so the message is not lost`,
        { cause: error, retryable: true },
      );
    }
  }
}
