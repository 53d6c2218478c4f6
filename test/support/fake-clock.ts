import type { Clock } from '../../shared/ports/clock.port.js';

interface Timer {
  readonly periodMs: number;
  readonly task: () => void | Promise<void>;
  next: number;
}

/**
 * A clock tests move by hand.
 *
 * Two ways to move it: `advance(ms)` moves time with every process frozen
 * (a paused VM, a frozen Lambda sandbox, a stalled event loop): no timer
 * fires, so a stalled worker's lease lapses as it would. `advanceRunning(ms)`
 * moves time with the processes running: each due timer fires at its due
 * time, in order, and its task is awaited before time moves on.
 */
export class FakeClock implements Clock {
  #now: number;
  readonly #timers = new Set<Timer>();
  constructor(start = Date.UTC(2026, 11, 1)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
  every(periodMs: number, task: () => void | Promise<void>): () => void {
    if (!(periodMs > 0)) throw new Error(`FakeClock.every: period must be positive, got ${periodMs}`);
    const timer: Timer = { periodMs, task, next: this.#now + periodMs };
    this.#timers.add(timer);
    return () => {
      this.#timers.delete(timer);
    };
  }
  /** Timers not cancelled yet. */
  pendingTimers(): number {
    return this.#timers.size;
  }
  async advanceRunning(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      let due: Timer | undefined;
      for (const t of this.#timers) if (t.next <= end && (due === undefined || t.next < due.next)) due = t;
      if (due === undefined) break;
      this.#now = Math.max(this.#now, due.next);
      due.next += due.periodMs;
      await due.task();
    }
    this.#now = end;
  }
}
