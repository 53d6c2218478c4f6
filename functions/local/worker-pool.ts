import type { WorkerSettings } from '../../shared/app/backend.js';
import { handleTileDelivery } from '../../shared/app/deliveries.js';
import { assertNever } from '../../shared/domain/claim.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import type { LocalBackend } from './compose.js';

export interface PoolOptions {
  readonly workers: number;
  readonly settings: (index: number) => WorkerSettings;
  /** How long a received message stays hidden (the local visibility timeout). */
  readonly visibilityMs: number;
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
 * the message (or delay it) on retry, and let poison run out its receive
 * count into the dead-letter table.
 */
export async function runWorkerPool(backend: LocalBackend, options: PoolOptions): Promise<PoolStats> {
  const stats: PoolStats = { acked: 0, retried: 0, poison: 0 };
  const poll = options.pollMs ?? 50;
  const settle = async (d: Delivery, settings: WorkerSettings) => {
    const verdict = await handleTileDelivery(backend, settings, d);
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
        // Not acked: it comes back until its receive count runs out, then the queue dead-letters it.
        await backend.queue.release(d, 0);
        break;
      default:
        assertNever(verdict, 'delivery verdict');
    }
    options.onSettled?.();
  };
  const worker = async (index: number) => {
    const settings = options.settings(index);
    for (;;) {
      const [delivery] = await backend.queue.receive(1, options.visibilityMs);
      if (delivery) {
        await settle(delivery, settings);
        continue;
      }
      if (backend.queue.pending() === 0 && !(options.moreExpected?.() ?? false)) return;
      await new Promise((r) => setTimeout(r, poll));
    }
  };
  await Promise.all(Array.from({ length: options.workers }, (_, i) => worker(i)));
  return stats;
}
