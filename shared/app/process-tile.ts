import { assertNever } from '../domain/claim.js';
import { LeaseStolenError } from '../domain/errors.js';
import { repairJobKey } from '../domain/job-key.js';
import { tilingParams } from '../domain/tiling-params.js';
import { parseExpression } from '../raster/index.js';
import type { Backend, WorkerSettings } from './backend.js';
import { renderTile } from './render-tile.js';
import type { TileJob } from './tile-job.js';

export type TileOutcome =
  | { readonly kind: 'written' | 'already-present' | 'lease-stolen'; readonly jobKey: string; readonly outputKey: string }
  | {
      readonly kind: 'version-mismatch';
      readonly expected: string;
      readonly current: string | undefined;
      readonly jobKey: string;
      readonly outputKey: string;
    }
  | {
      readonly kind: 'claim-rejected';
      readonly reason: 'held' | 'done';
      readonly by?: string | undefined;
      readonly leaseUntil?: number | undefined;
      readonly jobKey: string;
      readonly outputKey: string;
    };

/**
 * Process one tile job through the three gates.
 *
 * Timeline (crash points and what each leaves behind, see docs/architecture.md):
 * 1. claim: one conditional write. Losing (`held`/`done`) is a normal answer: no work, no reads.
 *    (crash after claim: a CLAIMED row that lapses after the lease; a redelivery takes it over)
 * 2. read the window by range reads, band math, encode a COG.
 * 3. create-only write of the output. `already-present` is success (a duplicate got there first).
 *    (crash after write: the object exists, the row is CLAIMED; a redelivery re-computes, gets
 *    `already-present` and commits)
 * 4. commit, conditional on still owning the row. Failure is LeaseStolen: an alarm.
 *    (crash after commit, before ack: a redelivery is rejected at the claim with `done`)
 *
 * `claimOwner` is the owner written to the row (the delivery and the worker, see deliveries.ts).
 */
export async function processTile(
  backend: Backend,
  settings: WorkerSettings,
  job: TileJob,
  claimOwner = settings.owner,
): Promise<TileOutcome> {
  const { claims, outputs, clock, telemetry } = backend;
  const claimId = job.mode.kind === 'overwrite' ? repairJobKey(job.jobKey, job.mode.expectedVersion) : job.jobKey;
  const base = { jobKey: job.jobKey, outputKey: job.outputKey } as const;
  const fields = {
    jobKey: job.jobKey,
    claimId,
    outputKey: job.outputKey,
    owner: claimOwner,
    window: `${job.window.row}_${job.window.col}`,
  };
  // Validate before claiming: a bad parameter is poison and must not wedge a claim.
  const tiling = tilingParams(job.params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));

  const now = clock.now();
  const claim = await claims.claim({
    jobId: claimId,
    owner: claimOwner,
    now,
    leaseUntil: now + settings.leaseMs,
    expiresAt: now + settings.retentionMs,
  });
  switch (claim.kind) {
    case 'claimed':
      telemetry.count('claimed');
      if (claim.stolenFrom !== undefined) {
        telemetry.count('lease-taken-over');
        telemetry.log('WARN', 'lease-taken-over', { ...fields, previousOwner: claim.stolenFrom });
      }
      break;
    case 'held':
      telemetry.count('claim-rejected');
      telemetry.log('INFO', 'claim-rejected', { ...fields, reason: 'held', by: claim.by, leaseUntil: claim.leaseUntil });
      return { kind: 'claim-rejected', reason: 'held', by: claim.by, leaseUntil: claim.leaseUntil, ...base };
    case 'done':
      telemetry.count('claim-rejected');
      telemetry.log('INFO', 'claim-rejected', { ...fields, reason: 'done' });
      return { kind: 'claim-rejected', reason: 'done', ...base };
    default:
      return assertNever(claim, 'claim result');
  }
  await settings.hooks?.afterClaim?.(job);

  let result: 'written' | 'already-present';
  try {
    const cog = await renderTile(backend.sources, job, tiling, expression);

    // A long computation may have used up much of the lease: renew it before the
    // write so a healthy slow worker is not mistaken for a dead one.
    const beforeWrite = clock.now();
    if (beforeWrite - now > settings.leaseMs / 2) {
      const hb = await claims.heartbeat({
        jobId: claimId,
        owner: claimOwner,
        now: beforeWrite,
        leaseUntil: beforeWrite + settings.leaseMs,
      });
      if (hb.kind === 'lost') telemetry.log('WARN', 'heartbeat-lost', { ...fields, holder: hb.current?.owner });
    }

    if (job.mode.kind === 'create') {
      const put = await outputs.putIfAbsent(job.outputKey, cog, {
        contentType: 'image/tiff; application=geotiff; profile=cloud-optimized',
      });
      result = put.kind;
      if (put.kind === 'written') telemetry.count('written');
      else {
        telemetry.count('write-already-present');
        telemetry.log('INFO', 'write-already-present', fields);
      }
    } else {
      const put = await outputs.putIfMatch(job.outputKey, cog, job.mode.expectedVersion, {
        contentType: 'image/tiff; application=geotiff; profile=cloud-optimized',
      });
      switch (put.kind) {
        case 'written':
          telemetry.count('written');
          result = 'written';
          break;
        case 'version-mismatch':
        case 'absent': {
          // Someone else touched the object since the operator read its version.
          // Release the repair claim so a corrected backfill can run, and report.
          const current = put.kind === 'absent' ? undefined : put.current;
          telemetry.count('version-mismatch');
          telemetry.log('ERROR', 'version-mismatch', { ...fields, expected: job.mode.expectedVersion, current: current ?? '(absent)' });
          await releaseClaim(backend, claimId, claimOwner);
          return { kind: 'version-mismatch', expected: job.mode.expectedVersion, current, ...base };
        }
        default:
          return assertNever(put, 'put result');
      }
    }
  } catch (error) {
    // A failure after the claim: give the claim back so the redelivery can
    // take it at once rather than find it `held` by this dead attempt.
    await releaseClaim(backend, claimId, claimOwner);
    throw error;
  }
  await settings.hooks?.afterWrite?.(job);

  const commit = await claims.commit({ jobId: claimId, owner: claimOwner, outputUri: job.outputKey, now: clock.now() });
  switch (commit.kind) {
    case 'committed':
      telemetry.count('committed');
      return { kind: result, ...base };
    case 'lease-stolen': {
      const err = new LeaseStolenError(claims.name, claimId, claimOwner, commit.current?.owner);
      telemetry.count('lease-stolen');
      telemetry.log('ERROR', 'lease-stolen', {
        ...fields,
        holder: commit.current?.owner,
        state: commit.current?.state,
        write: result,
        message: err.message,
      });
      return { kind: 'lease-stolen', ...base };
    }
    default:
      return assertNever(commit, 'commit result');
  }
}

/**
 * Give a claim back after a failure so a redelivery can take it at once
 * instead of waiting out the lease: a heartbeat that sets the lease into the
 * past. Conditional on ownership like every heartbeat; best effort.
 */
export async function releaseClaim(backend: Backend, claimId: string, owner: string): Promise<boolean> {
  const now = backend.clock.now();
  try {
    const r = await backend.claims.heartbeat({ jobId: claimId, owner, now, leaseUntil: now - 1 });
    return r.kind === 'extended';
  } catch (error) {
    backend.telemetry.log('WARN', 'release-failed', { claimId, owner, error });
    return false;
  }
}
