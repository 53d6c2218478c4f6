import type { ClaimResult, ClaimRow, CommitResult, HeartbeatResult } from '../domain/claim.js';

export interface ClaimRequest {
  readonly jobId: string;
  readonly owner: string;
  /** The claimer's clock, epoch ms: a row whose `leaseUntil` < `now` is lapsed. */
  readonly now: number;
  readonly leaseUntil: number;
  readonly expiresAt: number;
}

export interface CommitRequest {
  readonly jobId: string;
  readonly owner: string;
  readonly outputUri: string;
  readonly now: number;
}

export interface HeartbeatRequest {
  readonly jobId: string;
  readonly owner: string;
  readonly now: number;
  readonly leaseUntil: number;
}

/**
 * The leased conditional claim. Every method is ONE conditional operation on
 * the backend (or a compare-and-set the backend serialises), never a
 * read-then-write with a gap.
 *
 * - `claim` wins if no row exists, or the row is CLAIMED with `leaseUntil < now`.
 *   A COMMITTED row never matches. Losing returns `held` (with the holder) or `done`.
 * - `commit` succeeds only if `owner` still owns the row; otherwise `lease-stolen`.
 *   Committing twice by the same owner is `committed` both times.
 * - `heartbeat` extends a live lease of its owner only.
 */
export interface ClaimStore {
  /** Short adapter name used in messages and logs, e.g. `dynamodb`, `sqlite`. */
  readonly name: string;
  claim(request: ClaimRequest): Promise<ClaimResult>;
  commit(request: CommitRequest): Promise<CommitResult>;
  heartbeat(request: HeartbeatRequest): Promise<HeartbeatResult>;
  get(jobId: string): Promise<ClaimRow | undefined>;
  /** Every row (reconcile, tests). Order is unspecified. */
  list(): AsyncIterable<ClaimRow>;
}
