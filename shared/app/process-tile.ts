import { assertNever, type ClaimResult, type CommitResult } from '../domain/claim.js';
import { codeVersion } from '../domain/code-version.js';
import { contentDigest } from '../domain/content-digest.js';
import {
  CodeVersionMismatchError,
  LeaseStolenError,
  LeaseUnconfirmedError,
  OutputOccupiedError,
  SourceChangedError,
} from '../domain/errors.js';
import { repairJobKey } from '../domain/job-key.js';
import { tileContentType } from '../domain/render-params.js';
import { tilingParams } from '../domain/tiling-params.js';
import type { FeaturePutResult, FeatureSink, SceneRetireResult } from '../ports/feature-sink.port.js';
import { parseExpression } from '../raster/index.js';
import type { Backend, WorkerSettings } from './backend.js';
import { keepLease } from './lease-keeper.js';
import { enqueueParentWhenReady, isParentJob, renderParentTile } from './pyramid.js';
import { computeTilePixels, encodeTile, type RenderedTile, readTileBands } from './render-tile.js';
import { markSceneSuperseded } from './scene-manifest.js';
import { featureSceneOf, sceneFanOutTime, tileFeature } from './tile-feature.js';
import type { TileJob } from './tile-job.js';
import { inSpan, SPAN, SPAN_ATTR } from './tracing.js';

export type TileOutcome =
  /**
   * A repair whose heartbeat found another owner holding its claim: it did not
   * overwrite (two repairs racing one tile would leave the loser a false
   * version-mismatch). Acked: the holder's own message completes the repair.
   */
  | { readonly kind: 'lease-lost'; readonly holder: string | undefined; readonly jobKey: string; readonly outputKey: string }
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
    }
  /**
   * The source no longer has the version in the job key: nothing was written,
   * the claim is given back and the scene is marked superseded. Settled once
   * (acked); the new version's own event makes the new scene.
   */
  | {
      readonly kind: 'source-changed';
      readonly expected: string;
      readonly current: string | undefined;
      readonly jobKey: string;
      readonly outputKey: string;
    };

/** The id of a job's claim row: its job key, or for a repair the repair key (one repair per expected version). */
export const claimIdOf = (job: TileJob): string =>
  job.mode.kind === 'overwrite' ? repairJobKey(job.jobKey, job.mode.expectedVersion) : job.jobKey;

export interface ProcessTileOptions {
  /**
   * The claim is already held by `claimOwner` until this time (epoch ms): the
   * caller took over its own message's stale lease with a conditional
   * heartbeat (shared/app/redelivery.ts), so the claim step is skipped.
   */
  readonly heldUntil?: number | undefined;
}

/**
 * Process one tile job through the three gates.
 *
 * Timeline (crash points and what each leaves behind, see docs/architecture.md):
 * 0. before the claim: the job's code version is the running build's and its parameters are valid
 *    (poison otherwise: no claim, no reads; its window was checked against its grid at parsing).
 * 1. claim: one conditional write. Losing (`held`/`done`) is a normal answer: no work, no reads.
 *    (crash after claim: a CLAIMED row that lapses after the lease; a redelivery takes it over, or,
 *    where the transport would dead-letter the message first, takes its own message's lease over at once:
 *    shared/app/redelivery.ts)
 * 2. read the window by range reads, band math, encode a COG. The lease is renewed every lease/3
 *    meanwhile (lease-keeper.ts); a failed renewal is logged and retried, never fatal to the tile.
 *    (a repair renews once more before its overwrite and writes only while it owns the claim)
 *    Every read is pinned to the source version of the key: if the source changed, SourceChanged
 *    gives the claim back, tombstones the scene, with a sink retires the scene's feature rows (an
 *    incomplete scene can never complete now) and returns `source-changed` (settled once, acked; a crash
 *    or a sink outage before the ack is redelivered and does both again, each idempotent).
 * 3. create-only write of the output. `already-present` with the same bytes is success (a duplicate,
 *    or this attempt's own write whose answer was lost); other bytes at the key (foreign, truncated) are
 *    an alarm: `write-occupied` ERROR, claim given back, never committed (OutputOccupiedError, poison).
 *    (crash after write: the object exists, the row is CLAIMED; a redelivery re-computes, gets
 *    `already-present` and commits)
 * 3b. with a feature sink (backend.sink): insert the tile's statistics row, `ON CONFLICT (job_id) DO
 *    NOTHING`, and its scene's row count in one transaction (the insert that completes the scene makes it
 *    the current one of its source, if newest: docs/postgis.md). After the write, so a row never
 *    describes a tile that is not there; before the commit, so a crash in between leaves a CLAIMED row
 *    whose redelivery re-runs the idempotent insert (`already-present` is success, counted). A sink
 *    failure gives the claim back.
 *    (crash after the insert: the row exists; the redelivery's insert is `already-present`, then commits)
 * 3c. a zoom pyramid's tile (docs/pyramids.md): head its siblings and, when all are written, enqueue its parent's
 *    job. Before the commit, so a committed tile has always run it: a crash before the commit is redelivered and
 *    checks again (a duplicate parent stops at its claim); a queue failure gives the claim back.
 *    (crash after the enqueue: the redelivery re-renders, `already-present`, enqueues again, commits)
 * 4. commit, conditional on still owning the row. Failure is LeaseStolen: an alarm. A commit that
 *    throws (transient) gives the claim back first, so the redelivery claims at once.
 *    (crash after commit, before ack: a redelivery is rejected at the claim with `done`)
 *
 * `claimOwner` is the owner written to the row (the delivery and the worker, see deliveries.ts).
 */
export function processTile(
  backend: Backend,
  settings: WorkerSettings,
  job: TileJob,
  claimOwner = settings.owner,
  options: ProcessTileOptions = {},
): Promise<TileOutcome> {
  // One span per tile (docs/telemetry.md), its children the steps below; a no-op until an SDK is registered.
  const attributes = {
    [SPAN_ATTR.jobKey]: job.jobKey,
    [SPAN_ATTR.claimId]: claimIdOf(job),
    [SPAN_ATTR.claimOwner]: claimOwner,
    [SPAN_ATTR.tile]: `${job.window.row}_${job.window.col}`,
    [SPAN_ATTR.outputKey]: job.outputKey,
  };
  return inSpan(SPAN.tile, attributes, async (span) => {
    const outcome = await runTile(backend, settings, job, claimOwner, options, (leaseUntil) =>
      span.setAttribute(SPAN_ATTR.leaseDeadline, leaseUntil),
    );
    span.setAttribute(SPAN_ATTR.outcome, outcome.kind);
    return outcome;
  });
}

async function runTile(
  backend: Backend,
  settings: WorkerSettings,
  job: TileJob,
  claimOwner: string,
  options: ProcessTileOptions,
  onLease: (leaseUntil: number) => void,
): Promise<TileOutcome> {
  const { claims, clock, telemetry } = backend;
  const claimId = claimIdOf(job);
  const base = { jobKey: job.jobKey, outputKey: job.outputKey } as const;
  const fields = {
    jobKey: job.jobKey,
    claimId,
    outputKey: job.outputKey,
    owner: claimOwner,
    window: `${job.window.row}_${job.window.col}`,
  };
  // Validate before claiming: a bad parameter is poison and must not wedge a claim.
  // A job of another build would put this build's pixels under that build's key (code-version.ts).
  if (job.code !== codeVersion()) throw new CodeVersionMismatchError(`tile job ${job.jobKey.slice(0, 16)}...`, job.code, codeVersion());
  const tiling = tilingParams(job.params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));

  const now = clock.now();
  const claim: ClaimResult =
    options.heldUntil === undefined
      ? await inSpan(SPAN.claim, {}, async (span) => {
          const answer = await claims.claim({
            jobId: claimId,
            owner: claimOwner,
            now,
            leaseUntil: now + settings.leaseMs,
            expiresAt: now + settings.retentionMs,
          });
          span.setAttribute(SPAN_ATTR.outcome, answer.kind);
          return answer;
        })
      : // Already ours: the caller took its own message's stale lease over (deliveries.ts).
        {
          kind: 'claimed',
          row: {
            jobId: claimId,
            state: 'CLAIMED',
            owner: claimOwner,
            leaseUntil: options.heldUntil,
            expiresAt: now + settings.retentionMs,
          },
        };
  let leaseUntil = now + settings.leaseMs;
  switch (claim.kind) {
    case 'claimed':
      leaseUntil = claim.row.leaseUntil;
      onLease(leaseUntil);
      telemetry.count('claimed');
      if (claim.stolenFrom !== undefined && claim.stolenFrom !== claimOwner) {
        telemetry.count('lease-taken-over');
        telemetry.log('WARN', 'lease-taken-over', { ...fields, previousOwner: claim.stolenFrom });
      } else if (claim.stolenFrom !== undefined) {
        // The row's lapsed lease was this very owner's (this message on this worker: an attempt that gave its
        // claim back after a failure, or died). Not a takeover: a zombie of that attempt would commit as this
        // same owner, so no lease-stolen can ever answer the count (a sink outage's redelivery named itself).
        telemetry.log('INFO', 'own-claim-reclaimed', fields);
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
  // A render may outlast the lease: renew it every lease/3 while it runs (lease-keeper.ts), so a
  // healthy slow worker is never mistaken for a dead one and its job is not taken over.
  const keeper = keepLease(backend, { jobId: claimId, owner: claimOwner }, settings.leaseMs, leaseUntil, fields);
  try {
    await settings.hooks?.afterClaim?.(job);
  } catch (error) {
    // A hook that throws is the process dying (a test seam): its timers die with it, its claim stays.
    await keeper.stop();
    throw error;
  }
  let result: 'written' | 'already-present';
  let rendered: RenderedTile;
  try {
    if (isParentJob(job)) {
      // A pyramid's tile below its highest zoom is built from its four children's tiles, not the source (pyramid.ts).
      rendered = await inSpan(SPAN.render, {}, () => renderParentTile(backend.outputs, job, tiling));
    } else {
      // Read and render are the two halves of renderTileWithPixels (render-tile.ts), apart so each has its span.
      const read = await inSpan(SPAN.read, {}, () => readTileBands(backend.sources, job, tiling));
      rendered = await inSpan(SPAN.render, {}, async () => {
        const pixels = computeTilePixels(job, tiling, expression, read);
        return { cog: await encodeTile(job, tiling, read.georef, pixels), pixels, georef: read.georef };
      });
    }
    const { cog } = rendered;

    // Where the lease stands now decides the write. A create-only write is safe without it (the
    // commit checks ownership), so a failed or lost heartbeat never throws a finished tile away.
    // A repair overwrites: it renews once more and writes only while it provably owns the claim.
    const lease = await keeper.beforeWrite(job.mode.kind === 'overwrite');
    if (job.mode.kind === 'overwrite' && lease.kind === 'lost') {
      telemetry.log('WARN', 'repair-abandoned', { ...fields, holder: lease.holder });
      return { kind: 'lease-lost', holder: lease.holder, ...base };
    }
    if (job.mode.kind === 'overwrite' && lease.kind === 'unconfirmed') {
      throw new LeaseUnconfirmedError(claims.name, claimId, claimOwner, lease.error);
    }
    const mode = job.mode;
    const written = await inSpan(SPAN.write, {}, async (span) => {
      const w = await writeTile(backend, job, mode, cog, tileContentType(tiling.format), { claimId, claimOwner, fields, base });
      span.setAttribute(SPAN_ATTR.outcome, w.kind === 'done' ? w.outcome.kind : w.result);
      return w;
    });
    if (written.kind === 'done') return written.outcome;
    result = written.result;
  } catch (error) {
    await keeper.stop();
    // A failure after the claim: give the claim back so the redelivery can
    // take it at once rather than find it `held` by this dead attempt.
    await releaseClaim(backend, claimId, claimOwner);
    if (error instanceof SourceChangedError) {
      // Pinned reads refused bytes of another version: nothing was written and no
      // retry can succeed. Tombstone the scene (create-only) so the mosaic sweep closes it out.
      await markSceneSuperseded(backend, job.sceneKey, job.source, job.jobKey, error);
      if (backend.sink !== undefined) await retireFeatures(backend, backend.sink, job, error, fields);
      return { kind: 'source-changed', expected: error.expectedVersion, current: error.currentVersion, ...base };
    }
    throw error;
  }
  await settings.hooks?.afterWrite?.(job);
  // Feature rows describe the scene grid's windows (the highest zoom's), the ones the sink counts a scene complete by.
  if (backend.sink !== undefined && !isParentJob(job)) {
    await putFeature(backend, backend.sink, job, rendered, tiling.noData, { claimId, claimOwner, fields });
    await settings.hooks?.afterFeature?.(job);
  }

  if (job.zoom !== undefined) {
    // 3c. A pyramid's tile: enqueue its parent once every sibling is written, before the commit (pyramid.ts).
    try {
      await enqueueParentWhenReady(backend, job, fields);
    } catch (error) {
      await releaseClaim(backend, claimId, claimOwner);
      throw error;
    }
    await settings.hooks?.afterParentEnqueue?.(job);
  }

  let commit: CommitResult;
  try {
    commit = await inSpan(SPAN.commit, {}, async (span) => {
      const answer = await claims.commit({ jobId: claimId, owner: claimOwner, outputUri: job.outputKey, now: clock.now() });
      span.setAttribute(SPAN_ATTR.outcome, answer.kind);
      return answer;
    });
  } catch (error) {
    // The commit failed (throttling past the SDK's retries): give the claim back, as after every failure
    // past the claim, so the redelivery claims at once instead of spending a delivery of its transport's
    // budget waiting out this attempt's lease (soak seed 16). If the commit did land, the row is COMMITTED
    // and this owner-conditional release changes nothing.
    await releaseClaim(backend, claimId, claimOwner);
    throw error;
  }
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

/** What step 3 left: a result to commit, or the tile's outcome already (a repair whose object another hand changed). */
type WriteStep =
  | { readonly kind: 'wrote'; readonly result: 'written' | 'already-present' }
  | { readonly kind: 'done'; readonly outcome: TileOutcome };

/**
 * Step 3: the create-only write (or a repair's conditional overwrite) of the rendered tile. A throw is handled
 * by the caller's catch, which gives the claim back.
 */
async function writeTile(
  backend: Backend,
  job: TileJob,
  mode: TileJob['mode'],
  cog: Uint8Array,
  contentType: string,
  at: {
    readonly claimId: string;
    readonly claimOwner: string;
    readonly fields: Readonly<Record<string, unknown>>;
    readonly base: { readonly jobKey: string; readonly outputKey: string };
  },
): Promise<WriteStep> {
  const { outputs, telemetry } = backend;
  const { claimId, claimOwner, fields, base } = at;
  if (mode.kind === 'create') {
    // The format's own type (a COG's, image/png, image/webp, image/jpeg), on every store (render-params.ts).
    const put = await outputs.putIfAbsent(job.outputKey, cog, { contentType });
    if (put.kind === 'written') {
      telemetry.count('written');
      return { kind: 'wrote', result: 'written' };
    }
    if (!put.sameBytes) {
      // A foreign, truncated or unverifiable object holds the key: committing would call it good for ever.
      // Alarm, give the claim back (the caller's catch) and dead-letter the delivery for an operator.
      const err = new OutputOccupiedError(outputs.name, job.outputKey, contentDigest(cog), put.current);
      telemetry.count('write-occupied');
      telemetry.log('ERROR', 'write-occupied', { ...fields, found: put.current?.version ?? '(vanished)', message: err.message });
      throw err;
    }
    telemetry.count('write-already-present');
    telemetry.log('INFO', 'write-already-present', fields);
    return { kind: 'wrote', result: 'already-present' };
  }
  if (await holdsBytes(outputs, job.outputKey, mode.expectedVersion, cog)) {
    // The expected version already holds exactly this render: the repair's effect is in place, so
    // nothing is written. A replacement would change only the modification time, and where the
    // version is a content hash (S3's single-part ETag, the local store) an SDK's resend of it after
    // a lost answer would pass If-Match again and replace the object a second time (soak seed 1).
    telemetry.count('write-already-present');
    telemetry.log('INFO', 'repair-bytes-in-place', fields);
    return { kind: 'wrote', result: 'already-present' };
  }
  const put = await outputs.putIfMatch(job.outputKey, cog, mode.expectedVersion, { contentType });
  switch (put.kind) {
    case 'written':
      telemetry.count('written');
      return { kind: 'wrote', result: 'written' };
    case 'version-mismatch':
    case 'absent': {
      // Someone else touched the object since the operator read its version.
      // Release the repair claim so a corrected backfill can run, and report.
      const current = put.kind === 'absent' ? undefined : put.current;
      telemetry.count('version-mismatch');
      telemetry.log('ERROR', 'version-mismatch', { ...fields, expected: mode.expectedVersion, current: current ?? '(absent)' });
      await releaseClaim(backend, claimId, claimOwner);
      return { kind: 'done', outcome: { kind: 'version-mismatch', expected: mode.expectedVersion, current, ...base } };
    }
    default:
      return assertNever(put, 'put result');
  }
}

/**
 * Step 3b: the tile's feature row. Idempotent by the sink's unique job key, so
 * a duplicate delivery or a takeover after a crash inserts nothing new. A
 * failure gives the claim back (the tile is written; the redelivery re-renders,
 * finds the tile `already-present` and inserts again) and is rethrown.
 */
async function putFeature(
  backend: Backend,
  sink: FeatureSink,
  job: TileJob,
  rendered: RenderedTile,
  noData: number,
  at: { readonly claimId: string; readonly claimOwner: string; readonly fields: Readonly<Record<string, unknown>> },
): Promise<void> {
  const { telemetry } = backend;
  let put: FeaturePutResult;
  try {
    const fannedOutAt = await sceneFanOutTime(backend.outputs, job.sceneKey);
    put = await sink.put(tileFeature(job, rendered.georef, rendered.pixels, noData, fannedOutAt));
  } catch (error) {
    await releaseClaim(backend, at.claimId, at.claimOwner);
    throw error;
  }
  switch (put.kind) {
    case 'inserted':
      telemetry.count('feature-inserted');
      break;
    case 'already-present':
      // A duplicate delivery, or this job's own earlier attempt that crashed before its commit.
      telemetry.count('feature-already-present');
      telemetry.log('INFO', 'feature-already-present', { ...at.fields, sink: sink.name });
      break;
    default:
      assertNever(put, 'feature put result');
  }
}

/**
 * The sink's half of settling `source-changed`: the scene can never complete, so its rows (those already
 * in, and any a late delivery adds) never become current. Every tile that sees the change calls it, not
 * only the tombstone's writer, so a crash between the tombstone and this call is mended by the next one.
 * A failure is thrown: a transient one (retryable) brings the delivery back to settle both again; the claim
 * was given back already.
 */
async function retireFeatures(
  backend: Backend,
  sink: FeatureSink,
  job: TileJob,
  error: SourceChangedError,
  fields: Readonly<Record<string, unknown>>,
): Promise<void> {
  const scene = featureSceneOf(job, await sceneFanOutTime(backend.outputs, job.sceneKey));
  const retired: SceneRetireResult = await sink.retireScene(scene, { kind: 'source-changed', currentVersion: error.currentVersion });
  switch (retired.kind) {
    case 'retired':
    case 'already-retired':
    case 'complete':
      // `complete`: every window had its row before the change (a late repair or a replay met it); the rows
      // describe tiles that exist, and stay current until a newer scene of the source completes.
      backend.telemetry.log('INFO', 'feature-scene-superseded', { ...fields, sink: sink.name, result: retired.kind });
      return;
    default:
      assertNever(retired, 'scene retire result');
  }
}

/**
 * Whether `key` is at `version` and holds exactly `body` (a repair that would change nothing).
 * Two reads, not one atomic step: if the object changes in between, the answer is still one some
 * instant of the store gave (it held these bytes), and anything else falls through to the
 * conditional write, whose precondition decides.
 */
async function holdsBytes(outputs: Backend['outputs'], key: string, version: string, body: Uint8Array): Promise<boolean> {
  const head = await outputs.head(key);
  if (head === undefined || head.version !== version || head.size !== body.byteLength) return false;
  return Buffer.from(await outputs.get(key)).equals(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}

/**
 * Give a claim back after a failure so a redelivery can take it at once
 * instead of waiting out the lease: a heartbeat that sets the lease into the
 * past. Conditional on ownership like every heartbeat; best effort.
 */
export async function releaseClaim(
  backend: Pick<Backend, 'claims' | 'clock' | 'telemetry'>,
  claimId: string,
  owner: string,
): Promise<boolean> {
  const now = backend.clock.now();
  try {
    const r = await backend.claims.heartbeat({ jobId: claimId, owner, now, leaseUntil: now - 1 });
    return r.kind === 'extended';
  } catch (error) {
    backend.telemetry.log('WARN', 'release-failed', { claimId, owner, error });
    return false;
  }
}
