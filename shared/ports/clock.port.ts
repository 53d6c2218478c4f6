/** Time, in epoch milliseconds. The core never calls `Date.now()`; tests drive a fake clock. */
export interface Clock {
  now(): number;
}
