import { outputKeys } from '../domain/job-key.js';
import { DEFAULT_RETENTION_SEC } from '../domain/runtime-config.js';
import type { Backend } from './backend.js';

export interface ReconcileOptions {
  /**
   * How long claim rows are kept (the `expiresAt` every claim writes, then TTL
   * or the Table sweep deletes them): default the runtime's 7 days. Must be the
   * retention the workers ran with, or old tiles are misfiled.
   */
  readonly retentionMs?: number;
}

export interface ReconcileReport {
  readonly objectsChecked: number;
  readonly claimsChecked: number;
  /**
   * Published tiles no claim row points at although one must still exist: a
   * crash between write and commit, or a foreign writer (written within the
   * retention, so their claim cannot have been deleted by it).
   */
  readonly objectsWithoutClaim: readonly string[];
  /**
   * Published tiles with no claim row, written longer ago than the retention:
   * every claim that can have made them has passed its `expiresAt`, so the row's
   * absence is retention at work ("claim expired by retention"), not a sign of
   * a missing claim ("never claimed": `objectsWithoutClaim`). Not an alarm.
   */
  readonly claimExpiredByRetention: readonly string[];
  /** COMMITTED claims whose output is gone: something deleted published data. */
  readonly claimsWithoutObject: readonly { readonly jobId: string; readonly outputUri: string }[];
  /** CLAIMED rows whose lease has lapsed: a worker died; a redelivery or backfill will take them over. */
  readonly lapsedClaims: readonly { readonly jobId: string; readonly owner: string; readonly leaseUntil: number }[];
  /**
   * Findings of the two listings that the re-check dissolved: a tile committed after the claims were
   * listed (a tile job between the listings), a committed tile a lagging listing missed. Not an alarm.
   */
  readonly settledByRecheck: number;
}

/**
 * Compare published tiles with committed claims in both directions. Read-only:
 * it reports, an operator (or `tessera backfill --policy skip`) repairs.
 *
 * Tile jobs run while this reads, so the order of the reads decides what a race looks like:
 * 1. the claims are listed first. A job writes its tile before it commits, so the tile of every
 *    COMMITTED row listed here was in place before step 2 began; read the other way round, every
 *    tile written and committed between the two listings looked like a committed claim whose tile
 *    is gone (published data deleted).
 * 2. then the tiles.
 * 3. every finding is read again before it is reported: a committed claim without its tile re-heads
 *    the tile (a lagging listing is no deletion); tiles without a committed claim are looked up in a
 *    second listing of the claims, made after the tiles were listed (a job that committed after step 1
 *    is no crash). Only what survives the re-check is reported.
 */
export async function reconcile(backend: Backend, sceneKey?: string, options: ReconcileOptions = {}): Promise<ReconcileReport> {
  const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_SEC * 1000;
  const prefix = sceneKey === undefined ? outputKeys.allTiles() : outputKeys.tilePrefix(sceneKey);
  const now = backend.clock.now();
  const committed: { jobId: string; outputUri: string }[] = [];
  const lapsedClaims: { jobId: string; owner: string; leaseUntil: number }[] = [];
  for await (const row of backend.claims.list()) {
    if (row.state === 'COMMITTED') {
      if (row.outputUri?.startsWith(prefix)) committed.push({ jobId: row.jobId, outputUri: row.outputUri });
    } else if (row.leaseUntil < now) {
      lapsedClaims.push({ jobId: row.jobId, owner: row.owner, leaseUntil: row.leaseUntil });
    }
  }
  /** Each tile and when the store says it was written. */
  const objects = new Map<string, number>();
  for await (const head of backend.outputs.list(prefix)) objects.set(head.key, head.lastModified);

  let settledByRecheck = 0;
  const claimsWithoutObject: { jobId: string; outputUri: string }[] = [];
  /** Each re-headed tile: whether it is there (a repair's claim and its tile's own share the tile). */
  const reheaded = new Map<string, boolean>();
  for (const { jobId, outputUri } of committed) {
    if (objects.has(outputUri)) continue;
    let present = reheaded.get(outputUri);
    if (present === undefined) {
      present = (await backend.outputs.head(outputUri)) !== undefined;
      reheaded.set(outputUri, present);
    }
    if (present) settledByRecheck++;
    else claimsWithoutObject.push({ jobId, outputUri });
  }
  const committedOutputs = new Set(committed.map((c) => c.outputUri));
  let unclaimed = [...objects].filter(([k]) => !committedOutputs.has(k));
  if (unclaimed.length > 0) {
    const committedSince = new Set<string>();
    for await (const row of backend.claims.list())
      if (row.state === 'COMMITTED' && row.outputUri !== undefined && row.outputUri.startsWith(prefix)) committedSince.add(row.outputUri);
    const before = unclaimed.length;
    unclaimed = unclaimed.filter(([k]) => !committedSince.has(k));
    settledByRecheck += before - unclaimed.length;
  }
  // A claim is made before its tile is written and expires `retentionMs` after it was made, so a tile
  // written more than `retentionMs` ago can have no claim row left. Younger tiles must still have one.
  // (lastModified is the store's clock; the margin of a clock skew is noise against 7 days.)
  const expired = (writtenAt: number) => writtenAt + retentionMs < now;
  const objectsWithoutClaim = unclaimed
    .filter(([, at]) => !expired(at))
    .map(([k]) => k)
    .sort();
  const claimExpiredByRetention = unclaimed
    .filter(([, at]) => expired(at))
    .map(([k]) => k)
    .sort();
  claimsWithoutObject.sort((a, b) => (a.outputUri < b.outputUri ? -1 : a.outputUri > b.outputUri ? 1 : 0));
  const report = {
    objectsChecked: objects.size,
    claimsChecked: committed.length,
    objectsWithoutClaim,
    claimExpiredByRetention,
    claimsWithoutObject,
    lapsedClaims,
    settledByRecheck,
  };
  backend.telemetry.log(objectsWithoutClaim.length + claimsWithoutObject.length > 0 ? 'WARN' : 'INFO', 'reconciled', {
    prefix,
    objectsChecked: objects.size,
    claimsChecked: committed.length,
    objectsWithoutClaim: objectsWithoutClaim.length,
    claimExpiredByRetention: claimExpiredByRetention.length,
    claimsWithoutObject: claimsWithoutObject.length,
    lapsedClaims: lapsedClaims.length,
    settledByRecheck,
  });
  return report;
}
