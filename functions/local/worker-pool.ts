import type { WorkerSettings } from '../../shared/app/backend.js';
import { poisonReason } from '../../shared/app/poison.js';
import { handleQueueDelivery } from '../../shared/app/queue-delivery.js';
import { localSchedule } from '../../shared/app/redelivery.js';
import { assertNever } from '../../shared/domain/claim.js';
import { LeaseConfigError } from '../../shared/domain/errors.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import type { LocalBackend } from './compose.js';

/** Visibility beyond the lease: the settle (ack) after a render that used the whole lease. */
export const VISIBILITY_MARGIN_MS = 30_000;

export interface PoolOptions {
  readonly workers: number;
  readonly settings: (index: number) => WorkerSettings;
  /**
   * How long a received message stays hidden (the local visibility timeout).
   * Default: the worker's lease plus {@link VISIBILITY_MARGIN_MS}. Never less
   * than the lease (refused): a message that comes back while its first attempt
   * still renders finds its own earlier attempt holding the lease, waits a whole
   * lease to retry, and the first attempt's ack then misses (its receipt is
   * stale), so the pool idles a lease long after one slow tile. The clouds need
   * the same (SQS visibility and Pub/Sub ack deadline >= the function timeout).
   */
  readonly visibilityMs?: number | undefined;
  /** Called after every delivery is settled (progress). */
  readonly onSettled?: (() => void) | undefined;
  /** Keep polling while this says more work may still arrive (e.g. a stalled zombie). */
  readonly moreExpected?: (() => boolean) | undefined;
  readonly pollMs?: number;
}

export interface PoolStats {
  acked: number;
  retried: number;
  poison: number;
}

/** How one delivery was settled: what a pool reports per delivery (progress, the process pool's IPC). */
export interface SettledDelivery {
  readonly verdict: 'ack' | 'retry' | 'poison';
  readonly deliveryId: string;
  readonly jobKey: string;
  readonly receiveCount: number;
}

export interface WorkerLoopOptions {
  /** The visibility timeout (see {@link PoolOptions.visibilityMs}); default lease + {@link VISIBILITY_MARGIN_MS}. */
  readonly visibilityMs?: number | undefined;
  readonly pollMs?: number | undefined;
  readonly onSettled?: ((settled: SettledDelivery) => void) | undefined;
  /** Keep polling an empty queue while this says more work may still arrive. */
  readonly moreExpected?: (() => boolean) | undefined;
  /**
   * Test seam: runs after the verdict and before the queue hears it (the ack, release or
   * dead-letter). A crash here is the "committed, not acked" crash point, which the
   * tile use case's own hooks (afterClaim, afterWrite) cannot reach.
   */
  readonly beforeSettle?: ((delivery: Delivery, verdict: SettledDelivery['verdict']) => Promise<void>) | undefined;
  /** Stop taking new deliveries when this says so (the delivery in hand is still settled). */
  readonly stopping?: (() => boolean) | undefined;
}

/** The visibility a worker's receives use: the option, or lease + margin; never shorter than the lease. */
export function visibilityFor(settings: WorkerSettings, visibilityMs: number | undefined): number {
  const visibility = visibilityMs ?? settings.leaseMs + VISIBILITY_MARGIN_MS;
  if (visibility < settings.leaseMs) {
    throw new LeaseConfigError(
      `local pool: a visibility timeout of ${visibility} ms is shorter than the ${settings.leaseMs} ms lease of ${settings.owner}; ` +
        'a slow tile would come back while it still runs and the pool would idle a lease long. Leave visibilityMs unset (lease + margin)',
    );
  }
  return visibility;
}

/**
 * One local worker: pulls from the SQLite queue and settles each delivery the
 * way SQS + Lambda would: ack on success, leave the message (or delay it) on
 * retry, and dead-letter poison at once. Returns when the queue holds nothing
 * pending (visible or in flight) and no more work is expected.
 *
 * Every worker process runs exactly this loop (functions/local/worker-child.ts);
 * {@link runWorkerPool} runs several in one process.
 */
export async function runWorker(backend: LocalBackend, settings: WorkerSettings, options: WorkerLoopOptions = {}): Promise<PoolStats> {
  const stats: PoolStats = { acked: 0, retried: 0, poison: 0 };
  const visibilityMs = visibilityFor(settings, options.visibilityMs);
  const poll = options.pollMs ?? 50;
  const settle = async (d: Delivery) => {
    // Keep the message hidden while its job runs, however long (the lease keeper renews the claim
    // just so): SQS's ChangeMessageVisibility, made with the queue's own conditional release,
    // which moves a message's visibility only while this receive is its latest.
    const stopHiding = backend.clock.every(Math.max(1, Math.floor(visibilityMs / 3)), () => backend.queue.release(d, visibilityMs));
    let verdict: Awaited<ReturnType<typeof handleQueueDelivery>>;
    try {
      // Tile jobs and fan-out chunks share the queue, as on the clouds.
      verdict = await handleQueueDelivery(backend, settings, { ...d, schedule: localSchedule(backend.queue.maxReceiveCount) });
      await options.beforeSettle?.(d, verdict.kind);
    } finally {
      stopHiding();
    }
    switch (verdict.kind) {
      case 'ack':
        stats.acked++;
        await backend.queue.ack(d);
        break;
      case 'retry':
        stats.retried++;
        await backend.queue.release(d, verdict.delayMs ?? 0);
        break;
      case 'poison':
        stats.poison++;
        // Settled at once, as on every cloud (shared/app/poison.ts): one dead-letter entry, never redelivered.
        await backend.queue.deadLetter(d, poisonReason(verdict.error));
        break;
      default:
        assertNever(verdict, 'delivery verdict');
    }
    options.onSettled?.({ verdict: verdict.kind, deliveryId: d.deliveryId, jobKey: d.jobKey, receiveCount: d.receiveCount ?? 1 });
  };
  while (!(options.stopping?.() ?? false)) {
    const [delivery] = await backend.queue.receive(1, visibilityMs);
    if (delivery) {
      await settle(delivery);
      continue;
    }
    if (backend.queue.pending() === 0 && !(options.moreExpected?.() ?? false)) break;
    await new Promise((r) => setTimeout(r, poll));
  }
  return stats;
}

/**
 * W workers as async tasks in THIS process, sharing one backend. The local
 * runtime runs its workers as OS processes (functions/local/worker-process.ts);
 * this in-process pool stays for what a process cannot do: tests that drive a
 * FakeClock, which cannot be shared with another process (e.g.
 * test/unit/local/worker-pool-visibility.test.ts moves simulated time under a
 * running pool), and hooks that are closures.
 */
export async function runWorkerPool(backend: LocalBackend, options: PoolOptions): Promise<PoolStats> {
  const all = Array.from({ length: options.workers }, (_, i) => options.settings(i));
  // Refuse a bad visibility before any worker starts.
  for (const settings of all) visibilityFor(settings, options.visibilityMs);
  const results = await Promise.all(
    all.map((settings) =>
      runWorker(backend, settings, {
        visibilityMs: options.visibilityMs,
        pollMs: options.pollMs,
        onSettled: options.onSettled && (() => options.onSettled?.()),
        moreExpected: options.moreExpected,
      }),
    ),
  );
  return sumStats(results);
}

export function sumStats(all: readonly PoolStats[]): PoolStats {
  return all.reduce((a, s) => ({ acked: a.acked + s.acked, retried: a.retried + s.retried, poison: a.poison + s.poison }), {
    acked: 0,
    retried: 0,
    poison: 0,
  });
}
