/** One tile job on the wire. `jobKey` also travels as a message attribute where the queue has them. */
export interface JobMessage {
  readonly jobKey: string;
  /** JSON text of a TileJob (see shared/app/tile-job.ts). */
  readonly body: string;
}

/** Fan-out: what a scene handler needs. Batching (10 for SQS, etc.) is the adapter's business. */
export interface JobQueue {
  readonly name: string;
  sendBatch(messages: readonly JobMessage[]): Promise<void>;
}

export interface Delivery {
  readonly deliveryId: string;
  readonly jobKey: string;
  readonly body: string;
  /** 1 on first delivery. */
  readonly receiveCount: number;
}

/**
 * A queue the process pulls from itself (the local backend, tests and the
 * parity suite). Cloud triggers do this for us in production: SQS event source
 * mappings, Pub/Sub push, the Functions queue trigger.
 */
export interface PullQueue extends JobQueue {
  /** Up to `max` visible messages, hidden for `visibilityMs`. Messages past `maxReceiveCount` go to the dead-letter queue instead. */
  receive(max: number, visibilityMs: number): Promise<Delivery[]>;
  ack(delivery: Delivery): Promise<void>;
  /** Make the message visible again after `delayMs` (a failed attempt). */
  release(delivery: Delivery, delayMs?: number): Promise<void>;
  /**
   * Poison: move this delivery to the dead-letter queue now, one entry, and
   * take it off the queue; never delivered again (shared/app/poison.ts).
   */
  deadLetter(delivery: Delivery, why: Pick<DeadLetter, 'reason' | 'error'>): Promise<void>;
  deadLetters(): Promise<JobMessage[]>;
}

/** A message a consumer gave up on (poison), as every cloud's dead-letter queue keeps it. */
export interface DeadLetter {
  /** The original message text, unchanged, so an operator can replay a fixed copy. */
  readonly body: string;
  /** The job key, where the message had one (a message attribute on SQS and Pub/Sub). */
  readonly jobKey?: string | undefined;
  /** Why it is poison: the error's code (INVALID_EVENT, NOT_A_RASTER, ...) or `undecodable`. */
  readonly reason: string;
  readonly error: string;
  /** The original message id, to find the delivery in logs. */
  readonly messageId: string;
}

/**
 * Where a trigger puts poison at once: the SQS dead-letter queue, the Pub/Sub
 * dead-letter topic, the Storage Queue's `<queue>-poison`. Send is at least
 * once: no queue has a conditional send, so a send retried after a lost
 * answer (or a delivery settled twice) can leave a second, byte-identical
 * entry; replaying both is harmless because the job key's claim stops the
 * second (docs/architecture.md, "Poison").
 */
export interface DeadLetterSink {
  readonly name: string;
  send(letter: DeadLetter): Promise<void>;
}
