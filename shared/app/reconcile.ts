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
}

/**
 * Compare published tiles with committed claims in both directions. Read-only:
 * it reports, an operator (or `tessera backfill --policy skip`) repairs.
 */
export async function reconcile(backend: Backend, sceneKey?: string, options: ReconcileOptions = {}): Promise<ReconcileReport> {
  const retentionMs = options.retentionMs ?? DEFAULT_RETENTION_SEC * 1000;
  const prefix = sceneKey === undefined ? outputKeys.allTiles() : outputKeys.tilePrefix(sceneKey);
  /** Each tile and when the store says it was written. */
  const objects = new Map<string, number>();
  for await (const head of backend.outputs.list(prefix)) objects.set(head.key, head.lastModified);
  const committedOutputs = new Set<string>();
  const claimsWithoutObject: { jobId: string; outputUri: string }[] = [];
  const lapsedClaims: { jobId: string; owner: string; leaseUntil: number }[] = [];
  const now = backend.clock.now();
  let claimsChecked = 0;
  for await (const row of backend.claims.list()) {
    if (row.state === 'COMMITTED') {
      if (row.outputUri === undefined || !row.outputUri.startsWith(prefix)) continue;
      claimsChecked++;
      committedOutputs.add(row.outputUri);
      if (!objects.has(row.outputUri)) claimsWithoutObject.push({ jobId: row.jobId, outputUri: row.outputUri });
    } else if (row.leaseUntil < now) {
      lapsedClaims.push({ jobId: row.jobId, owner: row.owner, leaseUntil: row.leaseUntil });
    }
  }
  // A claim is made before its tile is written and expires `retentionMs` after it was made, so a tile
  // written more than `retentionMs` ago can have no claim row left. Younger tiles must still have one.
  // (lastModified is the store's clock; the margin of a clock skew is noise against 7 days.)
  const unclaimed = [...objects].filter(([k]) => !committedOutputs.has(k));
  const expired = (writtenAt: number) => writtenAt + retentionMs < now;
  const objectsWithoutClaim = unclaimed
    .filter(([, at]) => !expired(at))
    .map(([k]) => k)
    .sort();
  const claimExpiredByRetention = unclaimed
    .filter(([, at]) => expired(at))
    .map(([k]) => k)
    .sort();
  const report = {
    objectsChecked: objects.size,
    claimsChecked,
    objectsWithoutClaim,
    claimExpiredByRetention,
    claimsWithoutObject,
    lapsedClaims,
  };
  backend.telemetry.log(objectsWithoutClaim.length + claimsWithoutObject.length > 0 ? 'WARN' : 'INFO', 'reconciled', {
    prefix,
    objectsChecked: objects.size,
    claimsChecked,
    objectsWithoutClaim: objectsWithoutClaim.length,
    claimExpiredByRetention: claimExpiredByRetention.length,
    claimsWithoutObject: claimsWithoutObject.length,
    lapsedClaims: lapsedClaims.length,
  });
  return report;
}
