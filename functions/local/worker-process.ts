import { type ChildProcess, fork } from 'node:child_process';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { WorkerProcessError } from '../../shared/domain/errors.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import type { SettledHash } from './adapters/fs-object-store.js';
import type { WorkerChildConfig, WorkerChildMessage, WorkerParentMessage } from './worker-child.js';
import { type PoolStats, type SettledDelivery, sumStats, visibilityFor } from './worker-pool.js';

/**
 * The parent side of the local runtime's worker processes: N OS processes on
 * one data directory, each pulling from the SQLite queue (worker-child.ts).
 * SIGKILL one and the others carry on: its claim's lease lapses and its
 * message's visibility runs out, and the next delivery takes the job over
 * through the same gates as on the clouds.
 */

/** The default number of local workers: one per core this process may use. */
export const defaultWorkers = (): number => availableParallelism();

/**
 * The default child entry: one worker, no wrapped ports. From source, worker-entry.ts (run through tsx); in the
 * built package (scripts/build-package.ts, docs/packages.md), the bundle's worker-entry.js beside this code.
 */
export const DEFAULT_WORKER_ENTRY = new URL(import.meta.url.endsWith('.ts') ? './worker-entry.ts' : './worker-entry.js', import.meta.url);

/** A worker's settings that cross the process boundary (hooks are closures: a child entry supplies its own). */
export interface WorkerProcessSettings {
  readonly owner: string;
  readonly leaseMs: number;
  readonly retentionMs: number;
}

export interface WorkerProcessPoolOptions {
  /** The data directory (claims.db, queue.db, sources/, outputs/) every worker opens for itself. */
  readonly dir: string;
  /** Workers started at once; {@link WorkerProcessPool.start} adds more (a replacement). Default {@link defaultWorkers}. */
  readonly workers?: number | undefined;
  /** Settings of the worker with this index (0, 1, ...; a replacement gets the next index). */
  readonly settings: (index: number) => WorkerProcessSettings;
  /** The queue's maxReceiveCount, as the parent's own backend has it (default 3, as createLocalBackend). */
  readonly maxReceiveCount?: number | undefined;
  /** See PoolOptions.visibilityMs (worker-pool.ts): default lease + margin, never less than the lease. */
  readonly visibilityMs?: number | undefined;
  readonly pollMs?: number | undefined;
  /** Where the workers' counters go (e.g. the parent backend's JsonTelemetry, whose counters the summary reads). */
  readonly telemetry?: Telemetry | undefined;
  /** Every JSON log line a worker writes (it carries `worker` and `pid`). */
  readonly log?: ((line: string) => void) | undefined;
  /** Called in the parent after every delivery a worker settles (progress). */
  readonly onSettled?: ((settled: SettledDelivery, worker: WorkerProcess) => void) | undefined;
  /** Keep the workers polling an empty queue while this says more work may still arrive (checked every pollMs). */
  readonly moreExpected?: (() => boolean) | undefined;
  /**
   * The child entry module (a .ts file runs through tsx, a .js one as it is); a test's entry calls runWorkerChild()
   * with wrapped ports.
   */
  readonly entry?: URL | string | undefined;
  /** Passed to every child as config.data (for a test entry). */
  readonly data?: unknown;
  /**
   * Settled source hashes the parent holds (its source store's {@link FsObjectStore.settledHashes}: the scene it
   * pinned at fan-out), handed to every child so that none reads the whole scene again to hash it for its first
   * pinned read. A file changed since has another state and is hashed again.
   */
  readonly settledHashes?: readonly SettledHash[] | undefined;
  /** A worker is up: its backend is open and its loop starts now (e.g. start the next only once the first runs). */
  readonly onReady?: ((worker: WorkerProcess) => void) | undefined;
  /** A test entry's `report` messages. */
  readonly onReport?: ((payload: unknown, worker: WorkerProcess) => void) | undefined;
}

/** How one worker process ended. */
export type WorkerExit =
  | { readonly kind: 'drained'; readonly stats: PoolStats; readonly maxRssKb: number; readonly hashedBytes: number }
  /** Ended by a signal (SIGKILL from a test, the OOM killer, a Ctrl-C): a crash the others survive. */
  | { readonly kind: 'killed'; readonly signal: NodeJS.Signals; readonly stats: PoolStats };

/** One worker process. */
export interface WorkerProcess {
  readonly index: number;
  readonly owner: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** What it reported settled so far (a killed worker's count stops where it died). */
  readonly settled: PoolStats;
  /** Resolves when it exits; rejects with a WorkerProcessError when it exits with a code other than 0. */
  readonly exited: Promise<WorkerExit>;
  /** Send a signal (default SIGKILL); resolves with its exit. */
  kill(signal?: NodeJS.Signals): Promise<WorkerExit>;
}

export interface WorkerPoolResult extends PoolStats {
  readonly workers: number;
  readonly killed: number;
  /** The highest peak RSS of any worker that drained, in KiB. */
  readonly maxRssKb: number;
  /** Bytes the workers that drained read to hash sources (0 when the settled hashes they were handed answered). */
  readonly sourceBytesHashed: number;
}

/**
 * A TypeScript entry runs through tsx's loader, given by absolute URL (`--import tsx` would resolve from the cwd,
 * which may be outside the repo); a JavaScript one (the built package's, which ships no tsx) needs none.
 */
function loaderArgs(entry: string): string[] {
  if (!/\.[cm]?ts$/.test(entry)) return [];
  return ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];
}

/**
 * N local worker processes on one data directory.
 *
 * @example
 * const pool = startWorkerPool({ dir, workers: 4, settings: (i) => ({ owner: `worker-${i}`, leaseMs, retentionMs }) });
 * await pool.workers[0]?.kill('SIGKILL');
 * pool.start(); // a replacement
 * const result = await pool.drained();
 */
export class WorkerProcessPool {
  readonly workers: WorkerProcess[] = [];
  readonly #options: WorkerProcessPoolOptions;
  readonly #live = new Set<WorkerProcess>();
  #released: boolean;
  /** Workers the pool was started with: each child's share of the cores (shareCoresWith). */
  #siblings = 1;
  #watch: ReturnType<typeof setInterval> | undefined;
  #failure: WorkerProcessError | undefined;

  constructor(options: WorkerProcessPoolOptions) {
    this.#options = options;
    this.#released = !(options.moreExpected?.() ?? false);
    if (!this.#released) {
      this.#watch = setInterval(() => {
        if (options.moreExpected?.() ?? false) return;
        this.#release();
      }, options.pollMs ?? 50);
    }
    const n = options.workers ?? defaultWorkers();
    this.#siblings = n;
    for (let i = 0; i < n; i++) this.start();
  }

  /** Start one more worker (the next index): a replacement for a killed one, or extra capacity. */
  start(): WorkerProcess {
    const o = this.#options;
    const index = this.workers.length;
    const settings = o.settings(index);
    // Refused here, in the parent, rather than as N children that each die of it.
    visibilityFor({ ...settings }, o.visibilityMs);
    const config: WorkerChildConfig = {
      dir: resolve(o.dir),
      owner: settings.owner,
      leaseMs: settings.leaseMs,
      retentionMs: settings.retentionMs,
      maxReceiveCount: o.maxReceiveCount ?? 3,
      visibilityMs: o.visibilityMs,
      pollMs: o.pollMs,
      holdOpen: !this.#released,
      data: o.data,
      siblings: this.#siblings,
      ...(o.settledHashes === undefined || o.settledHashes.length === 0 ? {} : { settledHashes: o.settledHashes }),
    };
    const entryUrl = o.entry ?? DEFAULT_WORKER_ENTRY;
    const entry = typeof entryUrl === 'string' ? entryUrl : fileURLToPath(entryUrl);
    const child = fork(entry, [JSON.stringify(config)], {
      // The same (pinned) Node as the parent, with tsx's loader for a .ts entry and nothing else of the parent's
      // execArgv (vitest's or a debugger's flags are not the worker's).
      execPath: process.execPath,
      execArgv: loaderArgs(entry),
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'json',
    });
    const settled: PoolStats = { acked: 0, retried: 0, poison: 0 };
    let done: { stats: PoolStats; maxRssKb: number; hashedBytes: number } | undefined;
    let worker: WorkerProcess;
    child.on('message', (m: WorkerChildMessage) => {
      switch (m.kind) {
        case 'ready':
          o.onReady?.(worker);
          break;
        case 'count':
          o.telemetry?.count(m.counter, m.n);
          break;
        case 'log':
          o.log?.(m.line);
          break;
        case 'settled':
          if (m.verdict === 'ack') settled.acked++;
          else if (m.verdict === 'retry') settled.retried++;
          else settled.poison++;
          o.onSettled?.(m, worker);
          break;
        case 'report':
          o.onReport?.(m.payload, worker);
          break;
        case 'done':
          done = { stats: m.stats, maxRssKb: m.maxRssKb, hashedBytes: m.hashedBytes };
          break;
        default:
          assertNeverMessage(m);
      }
    });
    const exited = new Promise<WorkerExit>((resolveExit, rejectExit) => {
      child.once('error', (cause) => {
        rejectExit(new WorkerProcessError(settings.owner, `worker ${settings.owner} could not start: ${cause.message}`, { cause }));
      });
      // 'close', not 'exit': every IPC message it sent has been handled by then.
      child.once('close', (code, signal) => {
        if (signal) return resolveExit({ kind: 'killed', signal, stats: { ...settled } });
        if (code === 0 && done) return resolveExit({ kind: 'drained', ...done });
        rejectExit(
          new WorkerProcessError(
            settings.owner,
            `worker ${settings.owner} (pid ${child.pid}) exited with code ${code}${done ? '' : ' before it drained the queue'}; ` +
              'its stderr (above) says why. The other workers carry on; its job comes back after its lease',
          ),
        );
      });
    });
    worker = {
      index,
      owner: settings.owner,
      pid: child.pid ?? -1,
      child,
      settled,
      exited,
      kill: (signal = 'SIGKILL') => {
        child.kill(signal);
        return exited;
      },
    };
    this.workers.push(worker);
    this.#live.add(worker);
    exited
      .catch((error: WorkerProcessError) => {
        this.#failure ??= error;
      })
      .finally(() => this.#live.delete(worker));
    return worker;
  }

  /** Workers still running. */
  get live(): readonly WorkerProcess[] {
    return [...this.#live];
  }

  /**
   * Wait until every worker has exited (a replacement started meanwhile is
   * waited for too). Rejects with the first WorkerProcessError once all have
   * exited: a worker that failed on its own is a bug, not a crash to survive.
   */
  async drained(): Promise<WorkerPoolResult> {
    while (this.#live.size > 0) await Promise.race([...this.#live].map((w) => w.exited.catch(() => undefined)));
    if (this.#watch) clearInterval(this.#watch);
    if (this.#failure) throw this.#failure;
    const exits = await Promise.all(this.workers.map((w) => w.exited));
    return {
      ...sumStats(exits.map((e) => e.stats)),
      workers: this.workers.length,
      killed: exits.filter((e) => e.kind === 'killed').length,
      maxRssKb: Math.max(0, ...exits.map((e) => (e.kind === 'drained' ? e.maxRssKb : 0))),
      sourceBytesHashed: exits.reduce((n, e) => n + (e.kind === 'drained' ? e.hashedBytes : 0), 0),
    };
  }

  /** SIGKILL every live worker (cleanup after a failed test). */
  async killAll(): Promise<void> {
    await Promise.all(this.live.map((w) => w.kill('SIGKILL').catch(() => undefined)));
    if (this.#watch) clearInterval(this.#watch);
  }

  #release(): void {
    this.#released = true;
    if (this.#watch) clearInterval(this.#watch);
    this.#watch = undefined;
    const message: WorkerParentMessage = { kind: 'release' };
    // A worker exiting at this moment cannot take it and needs it no more: the send's error is dropped.
    for (const w of this.#live) if (w.child.connected) w.child.send(message, (error) => void error);
  }
}

/** Start worker processes; see {@link WorkerProcessPool}. */
export function startWorkerPool(options: WorkerProcessPoolOptions): WorkerProcessPool {
  return new WorkerProcessPool(options);
}

/** Start the workers and wait for the drain: the local runtime's tile phase. */
export function runWorkerProcesses(options: WorkerProcessPoolOptions): Promise<WorkerPoolResult> {
  return startWorkerPool(options).drained();
}

function assertNeverMessage(m: never): void {
  throw new WorkerProcessError('?', `worker process sent an unknown message ${JSON.stringify(m)}; parent and child are different builds`);
}
