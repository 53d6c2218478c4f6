import type { Clock } from '../../shared/ports/clock.port.js';

/** A clock tests move by hand. */
export class FakeClock implements Clock {
  #now: number;
  constructor(start = Date.UTC(2026, 11, 1)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
}
