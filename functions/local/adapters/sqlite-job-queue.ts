import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { AdapterError } from '../../../shared/domain/errors.js';
import type { Clock } from '../../../shared/ports/clock.port.js';
import type { DeadLetter, Delivery, JobMessage, PullQueue } from '../../../shared/ports/job-queue.port.js';
import { immediateTransaction, openSqlite } from './sqlite-database.js';

interface MessageRow {
  id: number;
  job_key: string;
  body: string;
  receive_count: number;
}

export interface SqliteJobQueueOptions {
  readonly clock: Clock;
  /** Receives after which a message goes to the dead-letter table (SQS maxReceiveCount). */
  readonly maxReceiveCount?: number;
  readonly queueName?: string;
}

/**
 * A durable at-least-once queue in SQLite with SQS semantics: a received
 * message is hidden for its visibility timeout and comes back if not acked;
 * after `maxReceiveCount` receives it moves to the dead-letter table instead
 * of being delivered again. Deliberately as unreliable as the cloud queues
 * (redelivery, no ordering guarantee), so the local backend exercises the
 * same gates.
 */
export class SqliteJobQueue implements PullQueue {
  readonly name: string;
  readonly maxReceiveCount: number;
  readonly #db: DatabaseSync;
  readonly #clock: Clock;
  readonly #insert: StatementSync;

  constructor(file: string, options: SqliteJobQueueOptions) {
    this.name = `sqlite:${options.queueName ?? 'tiles'}`;
    this.maxReceiveCount = options.maxReceiveCount ?? 3;
    if (!Number.isInteger(this.maxReceiveCount) || this.maxReceiveCount < 1) {
      throw new AdapterError(`[job-queue:sqlite] maxReceiveCount must be a positive integer, got ${this.maxReceiveCount}`);
    }
    this.#clock = options.clock;
    this.#db = openSqlite(file, 10_000);
    this.#db.exec(`CREATE TABLE IF NOT EXISTS messages (
      id            INTEGER PRIMARY KEY AUTOINCREMENT,
      queue         TEXT NOT NULL,
      job_key       TEXT NOT NULL,
      body          TEXT NOT NULL,
      visible_at    INTEGER NOT NULL,
      receive_count INTEGER NOT NULL DEFAULT 0,
      dead          INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, dead, visible_at);`);
    this.#insert = this.#db.prepare('INSERT INTO messages (queue, job_key, body, visible_at) VALUES (?, ?, ?, ?)');
  }

  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    const now = this.#clock.now();
    immediateTransaction(this.#db, () => {
      for (const m of messages) this.#insert.run(this.name, m.jobKey, m.body, now);
    });
  }

  async receive(max: number, visibilityMs: number): Promise<Delivery[]> {
    const now = this.#clock.now();
    return immediateTransaction(this.#db, (): Delivery[] => {
      const rows = this.#db
        .prepare(
          'SELECT id, job_key, body, receive_count FROM messages WHERE queue = ? AND dead = 0 AND visible_at <= ? ORDER BY visible_at, id LIMIT ?',
        )
        .all(this.name, now, max) as unknown as MessageRow[];
      const out: Delivery[] = [];
      for (const row of rows) {
        if (row.receive_count >= this.maxReceiveCount) {
          // Redrive: the message failed maxReceiveCount times; it goes to the dead-letter table.
          this.#db.prepare('UPDATE messages SET dead = 1 WHERE id = ?').run(row.id);
          continue;
        }
        this.#db
          .prepare('UPDATE messages SET receive_count = receive_count + 1, visible_at = ? WHERE id = ?')
          .run(now + visibilityMs, row.id);
        out.push({ deliveryId: `m-${row.id}`, jobKey: row.job_key, body: row.body, receiveCount: row.receive_count + 1 });
      }
      return out;
    });
  }

  /** Deletes the message if this delivery is still its latest receive (a stale ack, like an old SQS receipt handle, does nothing). */
  async ack(delivery: Delivery): Promise<void> {
    this.#db.prepare('DELETE FROM messages WHERE id = ? AND receive_count = ?').run(idOf(delivery), delivery.receiveCount);
  }

  async release(delivery: Delivery, delayMs = 0): Promise<void> {
    this.#db
      .prepare('UPDATE messages SET visible_at = ? WHERE id = ? AND receive_count = ? AND dead = 0')
      .run(this.#clock.now() + delayMs, idOf(delivery), delivery.receiveCount);
  }

  /** Poison: dead-lettered now, if this delivery is still the message's latest receive (a repeat does nothing). */
  async deadLetter(delivery: Delivery, _why: Pick<DeadLetter, 'reason' | 'error'>): Promise<void> {
    this.#db
      .prepare('UPDATE messages SET dead = 1 WHERE id = ? AND receive_count = ? AND dead = 0')
      .run(idOf(delivery), delivery.receiveCount);
  }

  async deadLetters(): Promise<JobMessage[]> {
    // Messages past their count that no receive has swept yet are dead too.
    this.#db
      .prepare('UPDATE messages SET dead = 1 WHERE queue = ? AND dead = 0 AND receive_count >= ? AND visible_at <= ?')
      .run(this.name, this.maxReceiveCount, this.#clock.now());
    return (
      this.#db
        .prepare('SELECT job_key, body FROM messages WHERE queue = ? AND dead = 1 ORDER BY id')
        .all(this.name) as unknown as MessageRow[]
    ).map((r) => ({ jobKey: r.job_key, body: r.body }));
  }

  /** Messages not yet acked or dead-lettered (visible or in flight). */
  pending(): number {
    return (this.#db.prepare('SELECT count(*) AS n FROM messages WHERE queue = ? AND dead = 0').get(this.name) as unknown as { n: number })
      .n;
  }

  close(): void {
    this.#db.close();
  }
}

function idOf(delivery: Delivery): number {
  const id = Number(delivery.deliveryId.slice(2));
  if (!delivery.deliveryId.startsWith('m-') || !Number.isInteger(id)) {
    throw new AdapterError(`[job-queue:sqlite] ${delivery.deliveryId} is not a delivery of this queue`);
  }
  return id;
}
