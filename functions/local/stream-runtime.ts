import { readdir, readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import {
  type BatchOutcome,
  type BatchSettings,
  type BatchVerdict,
  batchSourceOf,
  handleBatchDelivery,
} from '../../shared/app/feature-batch.js';
import { poisonReason } from '../../shared/app/poison.js';
import { localSchedule } from '../../shared/app/redelivery.js';
import { assertNever } from '../../shared/domain/claim.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { batchEventBody, batchJobKey, type FeatureBatchParams } from '../../shared/domain/feature-batch.js';
import type { SourceRef } from '../../shared/domain/job-key.js';
import { streamKeys } from '../../shared/domain/key-layout.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { PostgisFeatureBatchSink, type StreamTotals } from '../postgres/postgis-feature-batch-sink.js';
import { SqliteJobQueue } from './adapters/sqlite-job-queue.js';
import { LOCAL_SOURCE_BUCKET, type LocalBackend } from './compose.js';
import type { Progress } from './progress.js';

/** The local stream queue: beside the tile queue in queue.db, under its own name, so the tile workers never see a batch event. */
export const STREAM_QUEUE_NAME = 'streams';
/** Deliveries before a batch event is dead-lettered (SQS's maxReceiveCount on the clouds). */
const STREAM_MAX_RECEIVE_COUNT = 3;

export interface StreamRunOptions {
  /** The folder of batch files (every regular file under it, recursively; dot-files skipped). */
  readonly folder: string;
  readonly params: FeatureBatchParams;
  /** Batches processed at once (each is I/O to PostGIS between its parsing): 2 keeps both cores busy. */
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly progress: Progress;
}

/** What one run did, batch by batch and in total. */
export interface StreamRunSummary {
  readonly files: number;
  /** Files whose bytes the store held already (a re-run): the same version, the same batch key. */
  readonly alreadyStaged: number;
  readonly batches: {
    readonly inserted: number;
    readonly alreadyDone: number;
    readonly claimRejected: number;
    readonly sourceChanged: number;
    readonly leaseStolen: number;
    readonly deadLettered: number;
    /** Failed transiently (PostGIS unreachable, a lease of an earlier run still live): left on the queue for the next run. */
    readonly leftOnQueue: number;
  };
  readonly records: { readonly inserted: number; readonly duplicates: number; readonly rejected: number; readonly blankLines: number };
  /** Each poison batch: its key in the store and why. */
  readonly poison: readonly { readonly key: string; readonly error: string }[];
  /** Claim-store round trips this run made, by kind (a release after a failure is a heartbeat). */
  readonly claimStore: { readonly claims: number; readonly commits: number; readonly heartbeats: number };
  readonly seconds: number;
  /**
   * Of `seconds`, how long putting the files into the source store took: the landing a stream's producer does on a
   * cloud (Firehose's PUT), not the processing; the rest is the queue, the claims, the parsing and PostGIS.
   */
  readonly stagingSeconds: number;
  /**
   * Of `seconds`, the batches alone: from the consumers' first receive to the last batch settled. Outside it: staging,
   * queueing the events, the tables' migration (begun alongside the staging; what it takes longer is waited for
   * before the consumers start) and reading the totals back.
   */
  readonly batchSeconds: number;
  /**
   * Bytes the source store read to hash them while the consumers ran: 0 when every batch's pinned read was answered by
   * the hash settled at staging, as a cloud's versioned GET hashes nothing (a file changed under the run is hashed
   * again, and then refused).
   */
  readonly sourceBytesHashedInBatches: number;
  /** What PostGIS holds for the pipeline afterwards. */
  readonly totals: StreamTotals;
}

/** Every regular file under `folder`, sorted, as paths relative to it with `/` separators. */
async function batchFiles(folder: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (entry.name.startsWith('.')) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) out.push(relative(folder, path).split(sep).join('/'));
    }
  };
  await walk(folder);
  return out.sort();
}

/** A claim store that counts its round trips: the benchmark's "claims per record", measured, not assumed. */
function countingClaims(backend: LocalBackend): { claims: LocalBackend['claims']; calls: StreamRunSummary['claimStore'] } {
  const calls = { claims: 0, commits: 0, heartbeats: 0 };
  const counter = { claim: 'claims', commit: 'commits', heartbeat: 'heartbeats' } as const;
  const inner = backend.claims;
  const claims = new Proxy(inner, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      if (prop === 'claim' || prop === 'commit' || prop === 'heartbeat') {
        return (...args: unknown[]) => {
          calls[counter[prop]]++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { claims, calls };
}

/**
 * The local runtime of feature streams (docs/feature-batches.md): each file under the folder is put in the source store
 * under `streams/<its path>` (create-only: its content hash is its version; a changed file is a new version, so a
 * new batch), one batch event per file goes on the local queue (as an S3 notification would go on SQS), and
 * `concurrency` consumers drain it through the same `handleBatchDelivery` every cloud runs, with the SQLite claim
 * store and PostGIS. A run that dies leaves its messages on the queue: the next run's consumers find them again
 * after their visibility, take over the lapsed claims and find finished batches done in PostGIS.
 */
export async function runStreamFolder(backend: LocalBackend, sinkUrl: string, options: StreamRunOptions): Promise<StreamRunSummary> {
  const started = performance.now();
  const folder = resolve(options.folder);
  const files = await batchFiles(folder).catch((cause: unknown) => {
    throw new InvalidParamsError(
      `cannot read the batch folder ${folder}: ${(cause as Error).message}; pass an existing folder with --dir`,
      {
        cause,
      },
    );
  });
  const queue = new SqliteJobQueue(join(backend.dir, 'queue.db'), {
    clock: backend.clock,
    maxReceiveCount: STREAM_MAX_RECEIVE_COUNT,
    queueName: STREAM_QUEUE_NAME,
  });
  const sink = PostgisFeatureBatchSink.fromUrl(sinkUrl, { max: options.concurrency + 1 });
  const counting = countingClaims(backend);
  try {
    // The tables' migration is PostGIS's work and the staging this process's: begun together. A migration that fails
    // here is tried again by the first batch, which then fails (and is retried) as it would have without this.
    const migrated = sink.ready().catch(() => undefined);
    // Stage: what S3 PutObject / Firehose's delivery does on a cloud; the event names the version written.
    options.progress.phase('staging');
    let alreadyStaged = 0;
    const sources: SourceRef[] = [];
    for (const [i, file] of files.entries()) {
      const key = streamKeys.batch(file);
      const bytes = await readFile(join(folder, ...file.split('/')));
      let put = await backend.sources.putIfAbsent(key, bytes);
      if (put.kind === 'already-present' && !put.sameBytes) {
        // The file changed since an earlier run staged it: a new upload under the same name, a new version.
        const current = await backend.sources.head(key);
        if (current !== undefined) {
          const replaced = await backend.sources.putIfMatch(key, bytes, current.version);
          put = replaced.kind === 'written' ? replaced : put;
        }
      }
      if (put.kind === 'already-present') alreadyStaged++;
      const version = put.kind === 'written' ? put.version : (await backend.sources.head(key))?.version;
      if (version === undefined) throw new InvalidParamsError(`batch ${key} vanished from the source store while it was staged; run again`);
      sources.push({ bucket: LOCAL_SOURCE_BUCKET, key, versionToken: version });
      options.progress.update(i + 1, files.length, 'files');
    }
    // Each batch's consumer reads its file pinned to the version staged: the store answers a pin from a settled hash
    // (the file unchanged since a filesystem tick that has passed) without hashing the file again, as S3 or GCS answers
    // a versioned GET. The hashes computed above are not settled yet (the files changed within the current tick), so
    // settle them here, as the landing's last step, as the main job does for a scene (main-job.ts): a few ms for the
    // tick, then one more hash of each file. (Before: every consumer hashed its batch again, a filesystem-clock probe
    // and nine file operations per batch instead of five.)
    for (const s of sources) await backend.sources.settle(s.key, s.versionToken);
    const stagingSeconds = (performance.now() - started) / 1000;
    await queue.sendBatch(sources.map((s) => ({ jobKey: batchJobKey(s, options.params), body: batchEventBody(s) })));

    options.progress.phase('batches');
    const settings: BatchSettings = {
      owner: `${hostname()}:${process.pid}`,
      leaseMs: options.leaseMs,
      retentionMs: options.retentionMs,
      params: options.params,
    };
    const batchBackend = {
      claims: counting.claims,
      sources: backend.sources,
      batches: sink,
      clock: backend.clock,
      telemetry: backend.telemetry,
    };
    const tally = {
      inserted: 0,
      alreadyDone: 0,
      claimRejected: 0,
      sourceChanged: 0,
      leaseStolen: 0,
      deadLettered: 0,
      leftOnQueue: 0,
      records: 0,
      duplicates: 0,
      rejected: 0,
      blankLines: 0,
    };
    const poison: { key: string; error: string }[] = [];
    let settled = 0;
    const count = (outcome: BatchOutcome): void => {
      switch (outcome.kind) {
        case 'inserted':
          tally.inserted++;
          tally.records += outcome.inserted;
          tally.duplicates += outcome.duplicates;
          tally.rejected += outcome.rejects;
          tally.blankLines += outcome.blankLines;
          break;
        case 'already-done':
          tally.alreadyDone++;
          break;
        case 'claim-rejected':
          tally.claimRejected++;
          break;
        case 'source-changed':
          tally.sourceChanged++;
          break;
        case 'lease-stolen':
          tally.leaseStolen++;
          break;
        default:
          assertNever(outcome, 'batch outcome');
      }
    };
    const settle = async (d: Delivery, verdict: BatchVerdict, key: string): Promise<void> => {
      switch (verdict.kind) {
        case 'ack':
          count(verdict.outcome);
          await queue.ack(d);
          break;
        case 'poison':
          tally.deadLettered++;
          poison.push({ key, error: verdict.error.message });
          await queue.deadLetter(d, poisonReason(verdict.error));
          break;
        case 'retry':
          // Visible again after its delay: this run's consumers stop once nothing is visible, so a next run takes it.
          tally.leftOnQueue++;
          await queue.release(d, verdict.delayMs ?? 0);
          return;
        default:
          assertNever(verdict, 'batch verdict');
      }
      settled++;
      options.progress.update(settled, files.length, 'batches');
    };
    // Consumers pull one message at a time: a slow batch does not hold others hidden behind it.
    const consume = async (): Promise<void> => {
      for (;;) {
        const [d] = await queue.receive(1, options.leaseMs);
        if (d === undefined) return;
        let source: SourceRef;
        try {
          source = batchSourceOf(d.body);
        } catch (error) {
          await settle(d, { kind: 'poison', error: error as Error }, '(unreadable event)');
          continue;
        }
        const verdict = await handleBatchDelivery(batchBackend, settings, {
          source,
          deliveryId: String(d.deliveryId),
          receiveCount: d.receiveCount,
          schedule: localSchedule(STREAM_MAX_RECEIVE_COUNT),
        });
        await settle(d, verdict, source.key);
      }
    };
    await migrated;
    const hashedBefore = backend.sources.hashedBytes;
    const batchesStarted = performance.now();
    await Promise.all(Array.from({ length: options.concurrency }, () => consume()));
    const batchSeconds = (performance.now() - batchesStarted) / 1000;
    const sourceBytesHashedInBatches = backend.sources.hashedBytes - hashedBefore;
    options.progress.done();
    const totals = await sink.totals(options.params.pipeline);
    return {
      files: files.length,
      alreadyStaged,
      batches: {
        inserted: tally.inserted,
        alreadyDone: tally.alreadyDone,
        claimRejected: tally.claimRejected,
        sourceChanged: tally.sourceChanged,
        leaseStolen: tally.leaseStolen,
        deadLettered: tally.deadLettered,
        leftOnQueue: tally.leftOnQueue,
      },
      records: { inserted: tally.records, duplicates: tally.duplicates, rejected: tally.rejected, blankLines: tally.blankLines },
      poison,
      claimStore: { ...counting.calls },
      seconds: (performance.now() - started) / 1000,
      stagingSeconds,
      batchSeconds,
      sourceBytesHashedInBatches,
      totals,
    };
  } finally {
    queue.close();
    await sink.close();
  }
}
