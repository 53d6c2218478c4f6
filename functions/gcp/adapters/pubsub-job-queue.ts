import type { BatchPublishOptions } from '@google-cloud/pubsub';
import { AdapterError } from '../../../shared/domain/errors.js';
import type { JobMessage, JobQueue } from '../../../shared/ports/job-queue.port.js';

/** The one Topic method the queue uses; `@google-cloud/pubsub`'s Topic has it (tests may pass their own). */
export interface PubSubPublisher {
  /** The topic's full name, `projects/<p>/topics/<t>`. */
  readonly name: string;
  publishMessage(message: { data: Buffer; attributes?: Record<string, string> }): Promise<string>;
}

/** The attribute every tile message carries its job key in (push subscriptions and filters can read it without the body). */
export const JOB_KEY_ATTRIBUTE = 'jobKey';

/**
 * Client-side batching for the tile topic: up to 1,000 messages (Pub/Sub's
 * per-request maximum) or 9 MB (under the 10 MB request limit) per Publish
 * call, held at most 50 ms. Pass it as `pubsub.topic(name, { batching: TILE_TOPIC_BATCHING })`.
 */
export const TILE_TOPIC_BATCHING: BatchPublishOptions = { maxMessages: 1000, maxBytes: 9 * 1024 * 1024, maxMilliseconds: 50 };

/**
 * Fan-out onto a Pub/Sub topic. Each tile job is one message: the body is the
 * TileJob JSON, the job key rides as the `jobKey` attribute. The SDK's Topic
 * batches concurrent publishes into few Publish requests (see
 * {@link TILE_TOPIC_BATCHING}) and retries the retryable gRPC codes itself.
 *
 * A batch is all-or-error: if any message could not be published, the whole
 * call throws a retryable AdapterError and the scene event is retried. The
 * messages that did go out are then sent again, which is harmless: their
 * duplicates stop at the claim.
 *
 * @example
 * const queue = new PubSubJobQueue(pubsub.topic('tessera-tiles', { batching: TILE_TOPIC_BATCHING }));
 * await queue.sendBatch([{ jobKey, body }]);
 */
export class PubSubJobQueue implements JobQueue {
  readonly name = 'pubsub';

  /** @param topic the tile topic (a `Topic` from @google-cloud/pubsub, built with batching settings). */
  constructor(private readonly topic: PubSubPublisher) {}

  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    for (const m of messages) {
      if (typeof m.jobKey !== 'string' || m.jobKey.length === 0) {
        throw new AdapterError(
          `[job-queue:pubsub] a tile message has no job key; every message must carry one in its ${JOB_KEY_ATTRIBUTE} attribute`,
        );
      }
    }
    const results = await Promise.allSettled(
      messages.map((m) => this.topic.publishMessage({ data: Buffer.from(m.body, 'utf8'), attributes: { [JOB_KEY_ATTRIBUTE]: m.jobKey } })),
    );
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    if (failed.length > 0) {
      const first = failed[0];
      throw new AdapterError(
        `[job-queue:pubsub] ${failed.length} of ${messages.length} tile messages could not be published to ${this.topic.name}: ` +
          `${first instanceof Error ? first.message : String(first)}; the scene event will be retried (duplicates stop at the claim). ` +
          'If this persists, check that the topic exists and the function service account has roles/pubsub.publisher on it',
        { cause: first, retryable: true },
      );
    }
  }
}
