import type { ClaimResult } from '../domain/claim.js';
import type { ClaimStore } from '../ports/claim-store.port.js';

/**
 * How far apart two workers' clocks may be before a lease can be taken over
 * while its owner still believes it holds it (docs/architecture.md, "Clocks").
 * 30 s: NTP-synchronised cloud hosts are within milliseconds; the margin is for
 * a host whose sync broke, and costs a dead worker's job 30 s more of waiting.
 */
export const DEFAULT_CLOCK_SKEW_MARGIN_MS = 30_000;

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
 * The margin shifts only the takeover comparison: heartbeats and commits are
 * the owner judging its own lease on its own clock. A `held` answer reports
 * when this caller may take over (`leaseUntil + marginMs`), so a redelivery
 * timed from it does not come back early.
 */
export function withClockSkewMargin(claims: ClaimStore, marginMs: number = DEFAULT_CLOCK_SKEW_MARGIN_MS): ClaimStore {
  if (!Number.isFinite(marginMs) || marginMs < 0)
    throw new RangeError(`clock skew margin must be a non-negative number of ms, got ${marginMs}`);
  if (marginMs === 0) return claims;
  return {
    name: claims.name,
    async claim(request): Promise<ClaimResult> {
      const r = await claims.claim({ ...request, now: request.now - marginMs });
      return r.kind === 'held' ? { ...r, leaseUntil: r.leaseUntil + marginMs } : r;
    },
    commit: (request) => claims.commit(request),
    heartbeat: (request) => claims.heartbeat(request),
    get: (jobId) => claims.get(jobId),
    list: () => claims.list(),
  };
}
