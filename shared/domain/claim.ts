/** Claim row states. A COMMITTED row never matches a claim again. */
export type ClaimState = 'CLAIMED' | 'COMMITTED';

/** The claim row every ClaimStore keeps, in the units of the core (epoch milliseconds). */
export interface ClaimRow {
  readonly jobId: string;
  readonly state: ClaimState;
  readonly owner: string;
  readonly leaseUntil: number;
  /** Retention: after this the row may be deleted (TTL). Never consulted for correctness. */
  readonly expiresAt: number;
  readonly outputUri?: string | undefined;
  readonly finishedAt?: number | undefined;
}

/** The outcome of a claim. Losing is a normal answer, not an error. */
export type ClaimResult =
  | { readonly kind: 'claimed'; readonly row: ClaimRow; readonly stolenFrom?: string | undefined }
  | { readonly kind: 'held'; readonly by: string; readonly leaseUntil: number }
  | { readonly kind: 'done'; readonly outputUri: string | undefined; readonly finishedAt: number | undefined };

/** The outcome of a commit: `lease-stolen` is an alarm the caller logs at ERROR. */
export type CommitResult =
  | { readonly kind: 'committed'; readonly row: ClaimRow }
  | { readonly kind: 'lease-stolen'; readonly current: ClaimRow | undefined };

export type HeartbeatResult =
  | { readonly kind: 'extended'; readonly leaseUntil: number }
  | { readonly kind: 'lost'; readonly current: ClaimRow | undefined };

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}

/**
 * True when the stored row is exactly the lease this request asked for: the
 * caller's own write, seen again. A write whose request landed but whose answer
 * was lost is retried (by the SDK with the very same bytes, or by the caller
 * with the same request); the retry then meets a row that its own first attempt
 * wrote and must answer as that attempt would have (`claimed`, `extended`),
 * never `held` by itself: that would wait a whole lease and then log a false
 * takeover. Same owner AND same `leaseUntil`: a later attempt of the same
 * message asks for a new lease, so an earlier attempt's row is not mistaken for
 * this one's (shared/app/redelivery.ts decides about those). One rule for every
 * adapter; each maps the row it read (or the ALL_OLD item it got back) to it.
 */
export function isOwnLease(row: ClaimRow | undefined, request: { readonly owner: string; readonly leaseUntil: number }): boolean {
  return row !== undefined && row.state === 'CLAIMED' && row.owner === request.owner && row.leaseUntil === request.leaseUntil;
}
