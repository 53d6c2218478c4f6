/** Time, in epoch milliseconds. The core never calls `Date.now()` or a timer itself; tests drive a fake clock. */
export interface Clock {
  now(): number;
  /**
   * Run `task` every `periodMs` (the first run one period from now) until the
   * returned function is called. The core's only timer (the lease keeper in
   * process-tile.ts). A task handles its own errors; a returned promise is
   * awaited only by fake clocks, so a test can step through each run.
   */
  every(periodMs: number, task: () => void | Promise<void>): () => void;
}
