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

/**
 * Local stand-in for the cloud triggers: W workers pull from the SQLite queue
 * and settle each delivery the way SQS + Lambda would: ack on success, leave
 * the message (or delay it) on retry, and dead-letter poison at once.
 */
export async function runWorkerPool(backend: LocalBackend, options: PoolOptions): Promise<PoolStats> {
  const stats: PoolStats = { acked: 0, retried: 0, poison: 0 };
  const visibilityFor = (settings: WorkerSettings): number => {
    const visibility = options.visibilityMs ?? settings.leaseMs + VISIBILITY_MARGIN_MS;
    if (visibility < settings.leaseMs) {
      throw new LeaseConfigError(
        `local pool: a visibility timeout of ${visibility} ms is shorter than the ${settings.leaseMs} ms lease of ${settings.owner}; ` +
          'a slow tile would come back while it still runs and the pool would idle a lease long. Leave visibilityMs unset (lease + margin)',
      );
    }
    return visibility;
  };
  const poll = options.pollMs ?? 50;
  const settle = async (d: Delivery, settings: WorkerSettings, visibilityMs: number) => {
    // Keep the message hidden while its job runs, however long (the lease keeper renews the claim
    // just so): SQS's ChangeMessageVisibility, made with the queue's own conditional release,
    // which moves a message's visibility only while this receive is its latest.
    const stopHiding = backend.clock.every(Math.max(1, Math.floor(visibilityMs / 3)), () => backend.queue.release(d, visibilityMs));
    let verdict: Awaited<ReturnType<typeof handleQueueDelivery>>;
    try {
      // Tile jobs and fan-out chunks share the queue, as on the clouds.
      verdict = await handleQueueDelivery(backend, settings, { ...d, schedule: localSchedule(backend.queue.maxReceiveCount) });
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
    options.onSettled?.();
  };
  const worker = async (index: number) => {
    const settings = options.settings(index);
    const visibilityMs = visibilityFor(settings);
    for (;;) {
      const [delivery] = await backend.queue.receive(1, visibilityMs);
      if (delivery) {
        await settle(delivery, settings, visibilityMs);
        continue;
      }
      if (backend.queue.pending() === 0 && !(options.moreExpected?.() ?? false)) return;
      await new Promise((r) => setTimeout(r, poll));
    }
  };
  await Promise.all(Array.from({ length: options.workers }, (_, i) => worker(i)));
  return stats;
}
