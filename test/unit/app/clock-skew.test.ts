import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteClaimStore } from '../../../functions/local/adapters/sqlite-claim-store.js';
import { DEFAULT_CLOCK_SKEW_MARGIN_MS, withClockSkewMargin } from '../../../shared/app/clock-skew.js';
import { clockSkewMarginMs, ENV, parseRuntimeConfig } from '../../../shared/domain/runtime-config.js';
import { freshJobId } from '../../support/ids.js';

const T0 = 1_800_000_000_000;
const LEASE = 1_200_000;
const MARGIN = DEFAULT_CLOCK_SKEW_MARGIN_MS;
const store = new SqliteClaimStore(join(mkdtempSync(join(tmpdir(), 'tessera-skew-')), 'claims.db'));
const claims = withClockSkewMargin(store, MARGIN);
/** A claim by a worker whose clock reads `T0 + trueElapsed + skew`. */
const claimAt = (jobId: string, owner: string, trueElapsed: number, skew = 0) => {
  const now = T0 + trueElapsed + skew;
  return claims.claim({ jobId, owner, now, leaseUntil: now + LEASE, expiresAt: now + 7 * 86_400_000 });
};

describe('withClockSkewMargin: leases between workers whose clocks disagree', () => {
  it("inside the margin (a claimer 20 s ahead) a lease is never taken before its owner's own clock passed it", async () => {
    const id = freshJobId('skew20');
    await claimAt(id, 'owner', 0);
    // True time: 10 s before the lease ends. The claimer reads 10 s past it.
    expect(await claimAt(id, 'ahead', LEASE - 10_000, 20_000)).toEqual({ kind: 'held', by: 'owner', leaseUntil: T0 + LEASE + MARGIN });
    // Without the margin the same claimer would have taken the live lease.
    expect(
      (await store.claim({ jobId: id, owner: 'raw', now: T0 + LEASE + 10_000, leaseUntil: T0 + 2 * LEASE, expiresAt: T0 + LEASE })).kind,
    ).toBe('claimed');
  });

  it('beyond the margin (a claimer 300 s ahead) a live lease can be taken up to skew - margin early: stated, not prevented', async () => {
    const id = freshJobId('skew300');
    await claimAt(id, 'owner', 0);
    const early = 300_000 - MARGIN - 1_000; // 269 s before the lease ends, true time
    expect(await claimAt(id, 'ahead', LEASE - early, 300_000)).toMatchObject({ kind: 'claimed', stolenFrom: 'owner' });
  });

  it('a claimer 300 s behind waits skew + margin longer to take a dead lease: latency, never a wrong owner', async () => {
    const id = freshJobId('behind300');
    await claimAt(id, 'dead', 0);
    expect((await claimAt(id, 'behind', LEASE + MARGIN + 1, -300_000)).kind).toBe('held');
    expect((await claimAt(id, 'behind', LEASE + MARGIN + 300_000 + 1, -300_000)).kind).toBe('claimed');
  });

  it('a release goes the margin further back, so a redelivery (even one 20 s behind) takes the job at once', async () => {
    const id = freshJobId('release');
    await claimAt(id, 'owner', 0);
    const now = T0 + 5_000;
    expect((await claims.heartbeat({ jobId: id, owner: 'owner', now, leaseUntil: now - 1 })).kind).toBe('extended');
    expect(await claimAt(id, 'next', 5_001, -20_000)).toMatchObject({ kind: 'claimed', stolenFrom: 'owner' });
  });

  it("leaves heartbeats, commits and the adapter's own members alone", async () => {
    const id = freshJobId('rest');
    await claimAt(id, 'owner', 0);
    expect(await claims.heartbeat({ jobId: id, owner: 'owner', now: T0 + 1, leaseUntil: T0 + 1 + LEASE })).toEqual({
      kind: 'extended',
      leaseUntil: T0 + 1 + LEASE,
    });
    expect((await claims.commit({ jobId: id, owner: 'owner', outputUri: 'o', now: T0 + 2 })).kind).toBe('committed');
    expect(claims.name).toBe('sqlite');
    expect(typeof claims.close).toBe('function');
    expect(withClockSkewMargin(store, 0)).toBe(store);
    expect(() => withClockSkewMargin(store, -1)).toThrow(RangeError);
  });
});

describe('the clock skew margin in the runtime config', () => {
  const base = {
    [ENV.platform]: 'aws-lambda',
    [ENV.claimsTable]: 't',
    [ENV.sourceBucket]: 's',
    [ENV.outputBucket]: 'o',
    [ENV.tileQueue]: 'q',
    [ENV.functionTimeoutSeconds]: '900',
  };
  it('defaults to 30 s, takes 0 and whole seconds, and refuses one as long as the lease', () => {
    expect(clockSkewMarginMs(parseRuntimeConfig(base))).toBe(30_000);
    expect(parseRuntimeConfig({ ...base, [ENV.clockSkewMarginSeconds]: '0' }).clockSkewMarginSec).toBe(0);
    expect(parseRuntimeConfig({ ...base, [ENV.clockSkewMarginSeconds]: '5' }).clockSkewMarginSec).toBe(5);
    expect(() => parseRuntimeConfig({ ...base, [ENV.clockSkewMarginSeconds]: '-1' })).toThrow(/CLOCK_SKEW_MARGIN/);
    const lease = parseRuntimeConfig(base).leaseSec;
    expect(() => parseRuntimeConfig({ ...base, [ENV.clockSkewMarginSeconds]: String(lease) })).toThrow(/shorter than the lease/);
  });

  it('caps the default at a quarter of a short lease', () => {
    expect(clockSkewMarginMs({ leaseSec: 60 })).toBe(15_000);
  });
});
