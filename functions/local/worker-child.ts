import type { WorkerHooks, WorkerSettings } from '../../shared/app/backend.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import type { Counter, Telemetry } from '../../shared/ports/telemetry.port.js';
import { shareCoresWith } from '../../shared/raster/codecs.js';
import { tuneHeapForTiles } from '../../shared/raster/heap-tuning.js';
import type { SettledHash } from './adapters/fs-object-store.js';
import { createLocalBackend, type LocalBackend } from './compose.js';
import { type PoolStats, runWorker, type SettledDelivery } from './worker-pool.js';

/**
 * The child side of a local worker process (the parent side is
 * functions/local/worker-process.ts). One worker per OS process, each with its
 * own SQLite connections and filesystem stores on the shared data directory,
 * running the same loop as every local worker ({@link runWorker}). Its counters
 * and log lines go to the parent over the IPC channel, one message each, so a
 * worker killed with SIGKILL loses nothing it had already reported.
 */

/** What the parent tells a worker process to be: its argv[2], as JSON. */
export interface WorkerChildConfig {
  readonly dir: string;
  readonly owner: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly maxReceiveCount: number;
  readonly visibilityMs?: number | undefined;
  readonly pollMs?: number | undefined;
  /** Keep polling an empty queue until the parent sends `release` (the main job's zombie may still hand work back). */
  readonly holdOpen: boolean;
  /** Free-form data for a test's own child entry (e.g. where to crash); the default entry ignores it. */
  readonly data?: unknown;
  /** How many workers the pool starts (this one included): each takes its share of the cores for its codec calls. */
  readonly siblings?: number | undefined;
  /** The parent's settled source hashes (WorkerProcessPoolOptions.settledHashes), adopted by this worker's source store. */
  readonly settledHashes?: readonly SettledHash[] | undefined;
}

/** Child -> parent. */
export type WorkerChildMessage =
  | { readonly kind: 'ready'; readonly owner: string; readonly pid: number }
  | { readonly kind: 'count'; readonly counter: Counter; readonly n: number }
  | { readonly kind: 'log'; readonly line: string }
  | ({ readonly kind: 'settled' } & SettledDelivery)
  /** A test entry's own report (e.g. "I am at the crash point"): see {@link WorkerChildContext.report}. */
  | { readonly kind: 'report'; readonly payload: unknown }
  /** `hashedBytes`: what its source store read to hash sources (0 when the parent's settled hashes answered its pins). */
  | { readonly kind: 'done'; readonly stats: PoolStats; readonly maxRssKb: number; readonly hashedBytes: number };

/** Parent -> child. */
export type WorkerParentMessage = { readonly kind: 'release' };

/** What a child entry's `wrap` and hooks get to work with. */
export interface WorkerChildContext {
  readonly config: WorkerChildConfig;
  /** Send a `report` message to the parent; resolves once it is written to the channel. */
  report(payload: unknown): Promise<void>;
}

export interface WorkerChildOptions {
  /**
   * Replace ports before the worker starts (a fault-injecting claim store, a
   * store that stalls at a chosen call): gets the process's own local backend
   * and returns the one the worker runs on. The default entry wraps nothing.
   */
  readonly wrap?: ((backend: LocalBackend, context: WorkerChildContext) => LocalBackend) | undefined;
  /** The tile use case's crash seams (after the claim, after the write). */
  readonly hooks?: ((context: WorkerChildContext) => WorkerHooks) | undefined;
  /** The loop's seam between the verdict and the ack (committed, not yet acked). */
  readonly beforeSettle?:
    | ((delivery: Delivery, verdict: SettledDelivery['verdict'], context: WorkerChildContext) => Promise<void>)
    | undefined;
}

/** Parse and check the config the parent passed; a bad one is a clear error, not a worker that idles. */
export function parseWorkerChildConfig(text: string | undefined): WorkerChildConfig {
  if (text === undefined) {
    throw new InvalidParamsError(
      'worker process: no config in argv[2]; start workers with startWorkerPool() (functions/local/worker-process.ts), not by hand',
    );
  }
  const c = JSON.parse(text) as Partial<WorkerChildConfig>;
  const positive = (name: keyof WorkerChildConfig, v: unknown) => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) {
      throw new InvalidParamsError(`worker process: config.${name} must be a positive whole number, got ${JSON.stringify(v)}`);
    }
  };
  if (typeof c.dir !== 'string' || c.dir === '') throw new InvalidParamsError('worker process: config.dir must name the data directory');
  if (typeof c.owner !== 'string' || c.owner === '') throw new InvalidParamsError('worker process: config.owner must name the worker');
  positive('leaseMs', c.leaseMs);
  positive('retentionMs', c.retentionMs);
  positive('maxReceiveCount', c.maxReceiveCount);
  if (c.visibilityMs !== undefined) positive('visibilityMs', c.visibilityMs);
  if (c.pollMs !== undefined) positive('pollMs', c.pollMs);
  if (c.siblings !== undefined) positive('siblings', c.siblings);
  if (c.settledHashes !== undefined && !Array.isArray(c.settledHashes))
    throw new InvalidParamsError('worker process: config.settledHashes must be an array of { state, version }');
  return { ...c, holdOpen: c.holdOpen === true } as WorkerChildConfig;
}

/** Send to the parent; nothing when the channel is gone (the parent died: the worker then stops after its delivery). */
function send(message: WorkerChildMessage): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) return resolve();
    process.send(message, undefined, {}, () => resolve());
  });
}

/** Counters and log lines, forwarded to the parent as they happen. */
function forwardingTelemetry(owner: string): Telemetry {
  const lines = new JsonTelemetry((line) => void send({ kind: 'log', line }), { fields: { worker: owner, pid: process.pid } });
  return {
    log: (level, event, fields) => lines.log(level, event, fields),
    count: (counter, n = 1) => void send({ kind: 'count', counter, n }),
  };
}

/**
 * Run this process as one local worker until the queue is drained, then exit.
 * The default entry (worker-entry.ts) calls it with no options; a test's own
 * entry calls it with `wrap` / hooks to crash or stall the worker at an exact
 * point (test/support/workers/crash-worker.ts).
 */
export async function runWorkerChild(options: WorkerChildOptions = {}): Promise<void> {
  const config = parseWorkerChildConfig(process.argv[2]);
  shareCoresWith(config.siblings ?? 1);
  tuneHeapForTiles(process.env[ENV.tileHeapGrowingPercent]);
  const context: WorkerChildContext = { config, report: (payload) => send({ kind: 'report', payload }) };
  let released = !config.holdOpen;
  let orphaned = false;
  process.on('message', (m: WorkerParentMessage) => {
    if (m.kind === 'release') released = true;
  });
  // The parent is gone: finish the delivery in hand, take no more (its lease and the queue keep the rest safe).
  process.on('disconnect', () => {
    orphaned = true;
  });
  const own = createLocalBackend(config.dir, { telemetry: forwardingTelemetry(config.owner), maxReceiveCount: config.maxReceiveCount });
  // Checked entry by entry: a malformed one is an error here, before the worker takes any delivery.
  own.sources.adoptSettledHashes(config.settledHashes ?? []);
  const backend = options.wrap ? options.wrap(own, context) : own;
  const settings: WorkerSettings = {
    owner: config.owner,
    leaseMs: config.leaseMs,
    retentionMs: config.retentionMs,
    hooks: options.hooks?.(context),
  };
  try {
    await send({ kind: 'ready', owner: config.owner, pid: process.pid });
    const stats = await runWorker(backend, settings, {
      visibilityMs: config.visibilityMs,
      pollMs: config.pollMs,
      moreExpected: () => !released && !orphaned,
      stopping: () => orphaned,
      onSettled: (s) => void send({ kind: 'settled', ...s }),
      beforeSettle: options.beforeSettle && ((d, verdict) => options.beforeSettle?.(d, verdict, context) ?? Promise.resolve()),
    });
    // maxRSS is in KiB: the peak of this worker, runtime included (what a function's memory setting must hold).
    await send({ kind: 'done', stats, maxRssKb: process.resourceUsage().maxRSS, hashedBytes: own.sources.hashedBytes });
  } finally {
    own.close();
    process.removeAllListeners('message');
    if (process.connected) process.disconnect();
  }
}
