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
  deadLetters(): Promise<JobMessage[]>;
}
