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
