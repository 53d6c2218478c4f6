import type { ClaimResult, HeartbeatResult } from '../domain/claim.js';
import { DEFAULT_CLOCK_SKEW_MARGIN_SEC } from '../domain/runtime-config.js';
import type { ClaimRequest, ClaimStore, HeartbeatRequest } from '../ports/claim-store.port.js';

/**
 * How far apart two workers' clocks may be before a lease can be taken over
 * while its owner still believes it holds it (docs/architecture.md, "Clocks"),
 * in ms: `TESSERA_CLOCK_SKEW_MARGIN_SECONDS`, default 30 s.
 */
export const DEFAULT_CLOCK_SKEW_MARGIN_MS = DEFAULT_CLOCK_SKEW_MARGIN_SEC * 1000;

/**
 * The claim store as a worker with an imperfect clock must use it: a lapsed
 * lease is taken over only once it lapsed by more than `marginMs` on the
 * claimer's clock. The stores compare `lease_until` (written in the owner's
 * clock) with `now` (the claimer's clock): DynamoDB, Table Storage and SQLite
 * have no server time a condition can read, so the comparison is between two
 * clocks, and this margin is what makes it safe.
 *
 * The guarantee, for clocks that differ by `skew`:
 * - `|skew| < marginMs`: a lease is never taken over before its owner's own
 *   clock passed `lease_until`, so an owner whose heartbeat and commit checks
 *   pass is never overlapped (the owner's own checks run on its own clock).
 * - `skew >= marginMs` (a claimer ahead): a live lease can be taken over up to
 *   `skew - marginMs` early. Two workers then compute the same tile; the
 *   create-only write keeps exactly one output and the old owner's commit is
 *   refused (`lease-stolen`, an alarm): correct output, wasted work, a page.
 * - a claimer behind its peers waits `|skew| + marginMs` longer than needed to
 *   take a dead worker's lease over: latency, never a wrong answer.
 *
 * The margin shifts only the takeover comparison (and sets a release twice
 * that much further into the past): heartbeats and commits are the owner judging its own
 * lease on its own clock. A `held` answer reports
 * when this caller may take over (`leaseUntil + marginMs`), so a redelivery
 * timed from it does not come back early.
 */
export function withClockSkewMargin<S extends ClaimStore>(claims: S, marginMs: number = DEFAULT_CLOCK_SKEW_MARGIN_MS): S {
  if (!Number.isFinite(marginMs) || marginMs < 0)
    throw new RangeError(`clock skew margin must be a non-negative number of ms, got ${marginMs}`);
  if (marginMs === 0) return claims;
  const claim = async (request: ClaimRequest): Promise<ClaimResult> => {
    const r = await claims.claim({ ...request, now: request.now - marginMs });
    return r.kind === 'held' ? { ...r, leaseUntil: r.leaseUntil + marginMs } : r;
  };
  // A release (a heartbeat that sets the lease into the past, so a redelivery can take the job at once) goes
  // twice the margin further back: a claimer waits the margin out, and one whose clock is up to a margin
  // behind the releaser's reads the release that much later.
  const heartbeat = (request: HeartbeatRequest): Promise<HeartbeatResult> =>
    claims.heartbeat(request.leaseUntil < request.now ? { ...request, leaseUntil: request.leaseUntil - 2 * marginMs } : request);
  // The same store in every other respect (an adapter's own extras, such as the Table sweep, stay callable).
  return new Proxy(claims, {
    get(target, prop) {
      if (prop === 'claim') return claim;
      if (prop === 'heartbeat') return heartbeat;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
