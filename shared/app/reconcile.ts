import { outputKeys } from '../domain/job-key.js';
import type { Backend } from './backend.js';

export interface ReconcileReport {
  readonly objectsChecked: number;
  readonly claimsChecked: number;
  /** Published tiles no COMMITTED claim points at: a crash between write and commit, or a foreign writer. */
  readonly objectsWithoutClaim: readonly string[];
  /** COMMITTED claims whose output is gone: something deleted published data. */
  readonly claimsWithoutObject: readonly { readonly jobId: string; readonly outputUri: string }[];
  /** CLAIMED rows whose lease has lapsed: a worker died; a redelivery or backfill will take them over. */
  readonly lapsedClaims: readonly { readonly jobId: string; readonly owner: string; readonly leaseUntil: number }[];
}

/**
 * Compare published tiles with committed claims in both directions. Read-only:
 * it reports, an operator (or `tessera backfill --policy skip`) repairs.
 */
export async function reconcile(backend: Backend, sceneKey?: string): Promise<ReconcileReport> {
  const prefix = sceneKey === undefined ? 'tiles/' : outputKeys.tilePrefix(sceneKey);
  const objects = new Set<string>();
  for await (const head of backend.outputs.list(prefix)) objects.add(head.key);
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
  const objectsWithoutClaim = [...objects].filter((k) => !committedOutputs.has(k)).sort();
  const report = { objectsChecked: objects.size, claimsChecked, objectsWithoutClaim, claimsWithoutObject, lapsedClaims };
  backend.telemetry.log(objectsWithoutClaim.length + claimsWithoutObject.length > 0 ? 'WARN' : 'INFO', 'reconciled', {
    prefix,
    objectsChecked: objects.size,
    claimsChecked,
    objectsWithoutClaim: objectsWithoutClaim.length,
    claimsWithoutObject: claimsWithoutObject.length,
    lapsedClaims: lapsedClaims.length,
  });
  return report;
}
