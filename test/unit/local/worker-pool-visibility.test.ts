import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLocalBackend } from '../../../functions/local/compose.js';
import { runWorkerPool } from '../../../functions/local/worker-pool.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { resolveLease } from '../../../shared/domain/ceilings.js';
import { LeaseConfigError } from '../../../shared/domain/errors.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { FakeClock } from '../../support/fake-clock.js';
import { putSyntheticScene } from '../../support/local-scene.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** The local backend's own lease (900 s), as runMainJob resolves it. */
const LEASE_MS = resolveLease({ platform: 'local', functionTimeoutSec: 600 }).leaseSec * 1000;
const STEP_MS = 10_000;
/** Real time the pool gets to finish after the slow tile settles before simulated time is moved at all. */
const REAL_TIME_GRACE_MS = 3_000;

/**
 * One slow tile (its render takes `renderMs` of FakeClock time, the process
 * alive) among two workers; then the simulated time the pool stays idle before
 * it finishes: after 3 s of real time without finishing, the test moves the clock
 * by 10 s whenever the pool makes no progress for 100 ms of real time, so a
 * message hidden for 15 minutes costs 90 steps. Returns the idle time and how often the slow job was delivered.
 */
async function idleAfterSlowTile(renderMs: number): Promise<{ idleMs: number; deliveries: number; counters: Record<string, number> }> {
  const clock = new FakeClock();
  const telemetry = new JsonTelemetry(() => {});
  const b = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-pool-')), { clock, telemetry, maxReceiveCount: 5 });
  try {
    const source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', { width: 64, height: 64 });
    await fanOutScene(b, {
      source,
      params: { ...DEFAULT_PARAMS, tile_px: 64, output: { ...(DEFAULT_PARAMS.output as object), blocksize: 16 } },
    });
    let slowDone = false;
    let settledSinceSlow = 0;
    let deliveries = 0;
    const pool = runWorkerPool(b, {
      workers: 2,
      pollMs: 5,
      onSettled: () => {
        if (slowDone) settledSinceSlow++;
      },
      settings: (i) => ({
        owner: `worker-${i}`,
        leaseMs: LEASE_MS,
        retentionMs: 7 * 86_400_000,
        hooks: {
          afterClaim: async () => {
            deliveries++;
            if (i !== 0 || slowDone) return;
            await clock.advanceRunning(renderMs);
            // Real time for the other worker to poll while this one is still busy.
            await sleep(300);
            slowDone = true;
          },
        },
      }),
    }).then(() => 'done' as const);
    let idleMs = 0;
    let waitedMs = 0;
    while ((await Promise.race([pool, sleep(100).then(() => 'busy' as const)])) === 'busy') {
      // Idle time counts from the moment the slow delivery is settled (acked, or its stale ack ignored).
      if (settledSinceSlow === 0) continue;
      // Real time first: on a loaded machine the pool may take a while to wind down after the settle. Only a
      // pool that waits on the clock (a message hidden until its visibility runs out) needs the clock moved,
      // and no amount of real time finishes that one.
      waitedMs += 100;
      if (waitedMs < REAL_TIME_GRACE_MS) continue;
      if (idleMs > 2 * LEASE_MS) throw new Error(`the pool was still idle after ${idleMs} ms of simulated time`);
      await clock.advanceRunning(STEP_MS);
      idleMs += STEP_MS;
    }
    return { idleMs, deliveries, counters: telemetry.counters() as unknown as Record<string, number> };
  } finally {
    b.close();
  }
}

describe('the local worker pool after one slow tile', () => {
  it('does not idle: a render longer than the old 30 s visibility is not redelivered while it runs', async () => {
    const r = await idleAfterSlowTile(45_000);
    expect(r.idleMs).toBe(0);
    expect(r.deliveries).toBe(1);
    expect(r.counters).toMatchObject({ written: 1, committed: 1, 'claim-rejected': 0 });
  });

  it('does not idle after a render longer than the lease either: the claim and the message are both kept', async () => {
    const r = await idleAfterSlowTile(2 * LEASE_MS);
    expect(r.idleMs).toBe(0);
    expect(r.deliveries).toBe(1);
    expect(r.counters).toMatchObject({ written: 1, committed: 1, 'lease-taken-over': 0, 'lease-stolen': 0 });
  });

  it('refuses a visibility timeout shorter than the lease', async () => {
    const b = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-pool-')), { clock: new FakeClock() });
    try {
      await expect(
        runWorkerPool(b, { workers: 1, visibilityMs: 30_000, settings: () => ({ owner: 'w', leaseMs: LEASE_MS, retentionMs: 1 }) }),
      ).rejects.toThrow(LeaseConfigError);
    } finally {
      b.close();
    }
  });
});
