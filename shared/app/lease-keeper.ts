import type { Backend } from './backend.js';

/** What the keeper knows about the lease when the tile is ready to be written. */
export type LeaseAtWrite =
  /** Confirmed by the store until `leaseUntil` (the claim or the last heartbeat that answered). */
  | { readonly kind: 'held'; readonly leaseUntil: number }
  /** The store answered that another owner holds the row (or it is gone): the lease is not ours any more. */
  | { readonly kind: 'lost'; readonly holder: string | undefined }
  /** The last renewal failed and nothing since confirmed the lease: it may or may not still be ours. */
  | { readonly kind: 'unconfirmed'; readonly leaseUntil: number; readonly error: unknown };

export interface LeaseKeeper {
  /**
   * Stop renewing and say where the lease stands for the write. `renew` forces
   * one more heartbeat now (a repair always renews: it must own the claim at
   * its overwrite); otherwise one is made only when less than half the lease is
   * left, so a healthy tile writes with no extra call.
   */
  beforeWrite(renew: boolean): Promise<LeaseAtWrite>;
  /** Stop renewing (a failure path); waits for a heartbeat in flight. */
  stop(): Promise<void>;
}

/** How often a lease is renewed during a render: three chances before it lapses. */
export const heartbeatPeriodMs = (leaseMs: number): number => Math.max(1, Math.floor(leaseMs / 3));

/**
 * Keep a claim's lease alive while its tile renders: a heartbeat every
 * lease/3 from the Clock port's scheduler, conditional on ownership like every
 * heartbeat. One failed heartbeat is not a lost lease: it is logged (WARN,
 * `heartbeat-failed`) and the next period tries again, so a transient store
 * error never throws a finished tile away. A `lost` answer is definitive:
 * renewing stops, and the caller decides (a create-only write may go on, since
 * the commit checks ownership; a repair must not overwrite).
 */
export function keepLease(
  backend: Pick<Backend, 'claims' | 'clock' | 'telemetry'>,
  claim: { readonly jobId: string; readonly owner: string },
  leaseMs: number,
  confirmedUntil: number,
  fields: Readonly<Record<string, unknown>>,
): LeaseKeeper {
  const { claims, clock, telemetry } = backend;
  let state: LeaseAtWrite = { kind: 'held', leaseUntil: confirmedUntil };
  let inFlight: Promise<void> | undefined;

  const renew = (): Promise<void> => {
    inFlight ??= (async () => {
      const now = clock.now();
      try {
        const hb = await claims.heartbeat({ jobId: claim.jobId, owner: claim.owner, now, leaseUntil: now + leaseMs });
        if (hb.kind === 'extended') {
          if (state.kind !== 'lost') state = { kind: 'held', leaseUntil: hb.leaseUntil };
        } else {
          state = { kind: 'lost', holder: hb.current?.owner };
          cancel();
          telemetry.log('WARN', 'heartbeat-lost', { ...fields, holder: hb.current?.owner });
        }
      } catch (error) {
        if (state.kind !== 'lost') state = { kind: 'unconfirmed', leaseUntil: state.leaseUntil, error };
        telemetry.count('heartbeat-failed');
        telemetry.log('WARN', 'heartbeat-failed', {
          ...fields,
          confirmedUntil: state.kind === 'lost' ? undefined : state.leaseUntil,
          error,
        });
      } finally {
        inFlight = undefined;
      }
    })();
    return inFlight;
  };

  let cancel = clock.every(heartbeatPeriodMs(leaseMs), () => (state.kind === 'lost' ? undefined : renew()));
  const stop = async (): Promise<void> => {
    cancel();
    cancel = () => {};
    await inFlight;
  };

  return {
    stop,
    async beforeWrite(force) {
      await stop();
      if (state.kind === 'lost') return state;
      if (force || state.kind === 'unconfirmed' || state.leaseUntil - clock.now() < leaseMs / 2) await renew();
      return state;
    },
  };
}
