import type { ClaimResult, ClaimRow, ClaimState, CommitResult, HeartbeatResult } from '../domain/claim.js';

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

/** Delete a claim row only while it is in `state` and owned by `owner` (cleanup of rows the caller made). */
export interface DeleteClaimRequest {
  readonly jobId: string;
  readonly state: ClaimState;
  readonly owner: string;
}

/**
 * - `deleted`: the row was in that state with that owner, and is gone.
 * - `mismatch`: the row is in another state or has another owner; it is left alone.
 * - `absent`: no row. Also the answer to a delete whose first attempt landed and
 *   whose answer was lost (the SDK resent it).
 */
export type DeleteClaimResult =
  | { readonly kind: 'deleted' }
  | { readonly kind: 'mismatch'; readonly current: ClaimRow }
  | { readonly kind: 'absent' };

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
 * - `deleteIf` removes a row only in the given state and owner.
 */
export interface ClaimStore {
  /** Short adapter name used in messages and logs, e.g. `dynamodb`, `sqlite`. */
  readonly name: string;
  claim(request: ClaimRequest): Promise<ClaimResult>;
  commit(request: CommitRequest): Promise<CommitResult>;
  heartbeat(request: HeartbeatRequest): Promise<HeartbeatResult>;
  get(jobId: string): Promise<ClaimRow | undefined>;
  /**
   * Delete a row only if it is in `state` and owned by `owner`: one conditional
   * delete (DynamoDB ConditionExpression, Firestore precondition on the
   * document's updateTime, Azure Table If-Match on its ETag, SQLite WHERE).
   * Never part of the claim protocol: for a caller removing what it created
   * (tessera verify's claim rows).
   */
  deleteIf(request: DeleteClaimRequest): Promise<DeleteClaimResult>;
  /** Every row (reconcile, tests). Order is unspecified. */
  list(): AsyncIterable<ClaimRow>;
}
