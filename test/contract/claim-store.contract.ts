import { describe, expect, it } from 'vitest';
import type { ClaimStore } from '../../shared/ports/claim-store.port.js';
import { type ClaimStoreFaults, retryingLostAnswer } from '../support/claim-faults.js';
import { freshJobId } from '../support/ids.js';

const T0 = 1_800_000_000_000; // a fixed instant; the port takes time as an argument
const LEASE = 1_200_000;
const RETAIN = 7 * 24 * 3_600_000;

export interface ClaimStoreContractOptions {
  /** How many truly concurrent callers the concurrency cases use (at least 16). */
  readonly concurrency?: number;
}

/**
 * A store under contract and the faults its wire can be made to suffer: a
 * fault proxy between the SDK and the emulator for the cloud stores (so the
 * SDK's own retry runs), a wrapper for SQLite (test/support/claim-faults.ts).
 */
export interface ClaimStoreUnderTest {
  readonly store: ClaimStore;
  readonly faults: ClaimStoreFaults;
}

/**
 * The one contract every ClaimStore passes: the local SQLite adapter and each
 * cloud adapter against its emulator run exactly these cases, lost answers and
 * transient errors included.
 */
export function describeClaimStoreContract(
  name: string,
  factory: () => ClaimStoreUnderTest | Promise<ClaimStoreUnderTest>,
  options: ClaimStoreContractOptions = {},
): void {
  const n = Math.max(16, options.concurrency ?? 16);
  const claimReq = (jobId: string, owner: string, now = T0) => ({ jobId, owner, now, leaseUntil: now + LEASE, expiresAt: now + RETAIN });

  describe(`${name} (ClaimStore contract)`, () => {
    let underTest: ClaimStoreUnderTest | undefined;
    const setup = async () => {
      underTest ??= await factory();
      return underTest;
    };
    const get = async () => (await setup()).store;

    describe('claim', () => {
      it('wins when no row exists and records the lease', async () => {
        const s = await get();
        const id = freshJobId('fresh');
        const r = await s.claim(claimReq(id, 'w1'));
        expect(r.kind).toBe('claimed');
        const row = await s.get(id);
        expect(row).toMatchObject({ jobId: id, state: 'CLAIMED', owner: 'w1', leaseUntil: T0 + LEASE });
        expect(Math.abs((row?.expiresAt ?? 0) - (T0 + RETAIN))).toBeLessThan(1000);
      });

      it('returns held with the holder while the lease is live', async () => {
        const s = await get();
        const id = freshJobId('held');
        await s.claim(claimReq(id, 'w1'));
        const r = await s.claim(claimReq(id, 'w2', T0 + 1000));
        expect(r).toEqual({ kind: 'held', by: 'w1', leaseUntil: T0 + LEASE });
      });

      it('returns held at the instant the lease ends (lease_until < now is strict)', async () => {
        const s = await get();
        const id = freshJobId('edge');
        await s.claim(claimReq(id, 'w1'));
        const r = await s.claim(claimReq(id, 'w2', T0 + LEASE));
        expect(r.kind).toBe('held');
      });

      it('takes over a lapsed lease and names the previous owner', async () => {
        const s = await get();
        const id = freshJobId('lapsed');
        await s.claim(claimReq(id, 'w1'));
        const r = await s.claim(claimReq(id, 'w2', T0 + LEASE + 1));
        expect(r.kind).toBe('claimed');
        if (r.kind === 'claimed') expect(r.stolenFrom).toBe('w1');
        expect(await s.get(id)).toMatchObject({ state: 'CLAIMED', owner: 'w2', leaseUntil: T0 + LEASE + 1 + LEASE });
      });

      it('returns done for a committed job, even long after its lease', async () => {
        const s = await get();
        const id = freshJobId('done');
        await s.claim(claimReq(id, 'w1'));
        await s.commit({ jobId: id, owner: 'w1', outputUri: 'tiles/x/0_0.tif', now: T0 + 5 });
        const r = await s.claim(claimReq(id, 'w2', T0 + 10 * LEASE));
        expect(r).toEqual({ kind: 'done', outputUri: 'tiles/x/0_0.tif', finishedAt: T0 + 5 });
      });
    });

    describe('commit', () => {
      it('seals the job when the committer still owns it', async () => {
        const s = await get();
        const id = freshJobId('commit');
        await s.claim(claimReq(id, 'w1'));
        const r = await s.commit({ jobId: id, owner: 'w1', outputUri: 'tiles/a/1_2.tif', now: T0 + 7 });
        expect(r.kind).toBe('committed');
        expect(await s.get(id)).toMatchObject({ state: 'COMMITTED', owner: 'w1', outputUri: 'tiles/a/1_2.tif', finishedAt: T0 + 7 });
      });

      it('is idempotent for the owner', async () => {
        const s = await get();
        const id = freshJobId('commit2');
        await s.claim(claimReq(id, 'w1'));
        await s.commit({ jobId: id, owner: 'w1', outputUri: 'o', now: T0 + 1 });
        expect((await s.commit({ jobId: id, owner: 'w1', outputUri: 'o', now: T0 + 2 })).kind).toBe('committed');
      });

      it('returns lease-stolen, naming the new owner, when the lease was taken over', async () => {
        const s = await get();
        const id = freshJobId('stolen');
        await s.claim(claimReq(id, 'w1'));
        await s.claim(claimReq(id, 'w2', T0 + LEASE + 1));
        const r = await s.commit({ jobId: id, owner: 'w1', outputUri: 'o', now: T0 + LEASE + 2 });
        expect(r.kind).toBe('lease-stolen');
        if (r.kind === 'lease-stolen') expect(r.current).toMatchObject({ owner: 'w2', state: 'CLAIMED' });
        expect(await s.get(id)).toMatchObject({ state: 'CLAIMED', owner: 'w2' });
      });

      it('returns lease-stolen when no claim row exists', async () => {
        const s = await get();
        const r = await s.commit({ jobId: freshJobId('ghost'), owner: 'w1', outputUri: 'o', now: T0 });
        expect(r).toEqual({ kind: 'lease-stolen', current: undefined });
      });

      it('lets the owner commit after its lease lapsed if nobody took it over', async () => {
        const s = await get();
        const id = freshJobId('late');
        await s.claim(claimReq(id, 'w1'));
        expect((await s.commit({ jobId: id, owner: 'w1', outputUri: 'o', now: T0 + 2 * LEASE })).kind).toBe('committed');
      });
    });

    describe('heartbeat', () => {
      it('extends a live lease of its owner', async () => {
        const s = await get();
        const id = freshJobId('hb');
        await s.claim(claimReq(id, 'w1'));
        const r = await s.heartbeat({ jobId: id, owner: 'w1', now: T0 + 1000, leaseUntil: T0 + 1000 + LEASE });
        expect(r).toEqual({ kind: 'extended', leaseUntil: T0 + 1000 + LEASE });
        expect((await s.claim(claimReq(id, 'w2', T0 + LEASE + 1))).kind).toBe('held');
      });

      it('releases the job for an immediate takeover when the owner sets the lease into the past', async () => {
        const s = await get();
        const id = freshJobId('release');
        await s.claim(claimReq(id, 'w1'));
        expect((await s.heartbeat({ jobId: id, owner: 'w1', now: T0 + 10, leaseUntil: T0 + 9 })).kind).toBe('extended');
        const r = await s.claim(claimReq(id, 'w2', T0 + 11));
        expect(r.kind).toBe('claimed');
      });

      it('refuses another owner, a lapsed lease and a committed job', async () => {
        const s = await get();
        const id = freshJobId('hb2');
        await s.claim(claimReq(id, 'w1'));
        expect((await s.heartbeat({ jobId: id, owner: 'w2', now: T0 + 1, leaseUntil: T0 + LEASE })).kind).toBe('lost');
        expect((await s.heartbeat({ jobId: id, owner: 'w1', now: T0 + LEASE + 1, leaseUntil: T0 + 2 * LEASE })).kind).toBe('lost');
        const id2 = freshJobId('hb3');
        await s.claim(claimReq(id2, 'w1'));
        await s.commit({ jobId: id2, owner: 'w1', outputUri: 'o', now: T0 + 1 });
        expect((await s.heartbeat({ jobId: id2, owner: 'w1', now: T0 + 2, leaseUntil: T0 + LEASE })).kind).toBe('lost');
      });
    });

    describe('get and list', () => {
      it('get returns undefined for an unknown job', async () => {
        const s = await get();
        expect(await s.get(freshJobId('none'))).toBeUndefined();
      });

      it('list yields every row written', async () => {
        const s = await get();
        const ids = [freshJobId('l1'), freshJobId('l2')];
        for (const id of ids) await s.claim(claimReq(id, 'w1'));
        const seen = new Set<string>();
        for await (const row of s.list()) seen.add(row.jobId);
        for (const id of ids) expect(seen.has(id)).toBe(true);
      });
    });

    describe('deleteIf', () => {
      it('deletes a COMMITTED row of its owner; the job can then be claimed afresh', async () => {
        const s = await get();
        const id = freshJobId('del');
        await s.claim(claimReq(id, 'w1'));
        await s.commit({ jobId: id, owner: 'w1', outputUri: 'o', now: T0 + 1 });
        expect(await s.deleteIf({ jobId: id, state: 'COMMITTED', owner: 'w1' })).toEqual({ kind: 'deleted' });
        expect(await s.get(id)).toBeUndefined();
        expect((await s.claim(claimReq(id, 'w2', T0 + 2))).kind).toBe('claimed');
      });

      it('deletes a CLAIMED row of its owner', async () => {
        const s = await get();
        const id = freshJobId('del-claimed');
        await s.claim(claimReq(id, 'w1'));
        expect(await s.deleteIf({ jobId: id, state: 'CLAIMED', owner: 'w1' })).toEqual({ kind: 'deleted' });
        expect(await s.get(id)).toBeUndefined();
      });

      it('leaves a row of another owner or in another state alone, and names it', async () => {
        const s = await get();
        const id = freshJobId('del-other');
        await s.claim(claimReq(id, 'w1'));
        const other = await s.deleteIf({ jobId: id, state: 'CLAIMED', owner: 'w2' });
        expect(other).toMatchObject({ kind: 'mismatch', current: { jobId: id, owner: 'w1', state: 'CLAIMED' } });
        const state = await s.deleteIf({ jobId: id, state: 'COMMITTED', owner: 'w1' });
        expect(state).toMatchObject({ kind: 'mismatch', current: { owner: 'w1', state: 'CLAIMED' } });
        expect(await s.get(id)).toMatchObject({ owner: 'w1', state: 'CLAIMED', leaseUntil: T0 + LEASE });
      });

      it('answers absent for an unknown job, and for a delete repeated after it landed', async () => {
        const s = await get();
        expect(await s.deleteIf({ jobId: freshJobId('del-none'), state: 'COMMITTED', owner: 'w1' })).toEqual({ kind: 'absent' });
        const id = freshJobId('del-twice');
        await s.claim(claimReq(id, 'w1'));
        expect(await s.deleteIf({ jobId: id, state: 'CLAIMED', owner: 'w1' })).toEqual({ kind: 'deleted' });
        expect(await s.deleteIf({ jobId: id, state: 'CLAIMED', owner: 'w1' })).toEqual({ kind: 'absent' });
      });

      it('a delete racing a takeover of a lapsed lease never removes the new owner', async () => {
        const s = await get();
        const id = freshJobId('del-race');
        await s.claim(claimReq(id, 'old'));
        const later = T0 + LEASE + 1;
        const [deleted, taken] = await Promise.all([
          s.deleteIf({ jobId: id, state: 'CLAIMED', owner: 'old' }),
          s.claim(claimReq(id, 'new', later)),
        ]);
        // Either the delete went first (and the claim made a fresh row) or the takeover did (and the delete
        // failed its owner check): the new owner's row stands in both orders.
        expect(taken.kind).toBe('claimed');
        expect(await s.get(id)).toMatchObject({ owner: 'new', state: 'CLAIMED', leaseUntil: later + LEASE });
        expect(deleted.kind).toBe(taken.kind === 'claimed' && taken.stolenFrom === 'old' ? 'mismatch' : 'deleted');
      });
    });

    // A write that landed but whose answer was lost is sent again (by the SDK on the wire, by the caller
    // where there is none); the retry meets the row its own first attempt wrote and must answer as that
    // attempt would have. Answering `held` by itself made a job wait a whole lease (20 min on AWS), then
    // take its own lease over and log a false lease-taken-over.
    describe('lost answers', () => {
      it('a claim whose answer was lost is claimed by its retry, not held by its own caller', async () => {
        const { store: s, faults } = await setup();
        const id = freshJobId('lost-claim');
        const shot = faults.loseNextAnswer('claim');
        const r = await retryingLostAnswer(() => s.claim(claimReq(id, 'w1')));
        expect(shot.hits).toBe(1);
        expect(r).toMatchObject({ kind: 'claimed', row: { owner: 'w1', state: 'CLAIMED', leaseUntil: T0 + LEASE } });
        if (r.kind === 'claimed') expect(r.stolenFrom).toBeUndefined();
        expect((await s.claim(claimReq(id, 'w2', T0 + 1))).kind).toBe('held');
      });

      // Before (issue 25 item 6): DynamoDB and SQLite named no previous owner here, so the takeover was not counted and
      // the zombie's later lease-stolen had no lease-taken-over to match.
      it('a takeover whose answer was lost is claimed by its retry and still names the owner it took the lease from', async () => {
        const { store: s, faults } = await setup();
        const id = freshJobId('lost-takeover');
        await s.claim(claimReq(id, 'dead'));
        const later = T0 + LEASE + 1;
        const shot = faults.loseNextAnswer('takeover');
        const r = await retryingLostAnswer(() => s.claim(claimReq(id, 'w2', later)));
        expect(shot.hits).toBe(1);
        expect(r.kind).toBe('claimed');
        if (r.kind === 'claimed') expect(r.stolenFrom).toBe('dead');
        expect(await s.get(id)).toMatchObject({ owner: 'w2', state: 'CLAIMED', leaseUntil: later + LEASE });
      });

      it('a commit whose answer was lost is committed on its retry', async () => {
        const { store: s, faults } = await setup();
        const id = freshJobId('lost-commit');
        await s.claim(claimReq(id, 'w1'));
        const shot = faults.loseNextAnswer('commit');
        const r = await retryingLostAnswer(() => s.commit({ jobId: id, owner: 'w1', outputUri: 'tiles/l/0_0.tif', now: T0 + 5 }));
        expect(shot.hits).toBe(1);
        expect(r.kind).toBe('committed');
        expect(await s.get(id)).toMatchObject({ state: 'COMMITTED', owner: 'w1', outputUri: 'tiles/l/0_0.tif', finishedAt: T0 + 5 });
      });

      it('a heartbeat and a release whose answers were lost are extended on their retries', async () => {
        const { store: s, faults } = await setup();
        const id = freshJobId('lost-beat');
        await s.claim(claimReq(id, 'w1'));
        const beat = faults.loseNextAnswer('heartbeat');
        const hb = await retryingLostAnswer(() => s.heartbeat({ jobId: id, owner: 'w1', now: T0 + 1000, leaseUntil: T0 + 1000 + LEASE }));
        expect(beat.hits).toBe(1);
        expect(hb).toEqual({ kind: 'extended', leaseUntil: T0 + 1000 + LEASE });
        // A release sets the lease into the past, so its retry fails the live-lease condition on its own row.
        const release = faults.loseNextAnswer('heartbeat');
        const rel = await retryingLostAnswer(() => s.heartbeat({ jobId: id, owner: 'w1', now: T0 + 2000, leaseUntil: T0 + 1999 }));
        expect(release.hits).toBe(1);
        expect(rel).toEqual({ kind: 'extended', leaseUntil: T0 + 1999 });
        expect((await s.claim(claimReq(id, 'w2', T0 + 2001))).kind).toBe('claimed');
      });

      it('an earlier lease of the same owner is not mistaken for this request: held until it lapses', async () => {
        const s = await get();
        const id = freshJobId('same-owner');
        await s.claim(claimReq(id, 'm1@w'));
        expect(await s.claim(claimReq(id, 'm1@w', T0 + 1000))).toEqual({ kind: 'held', by: 'm1@w', leaseUntil: T0 + LEASE });
        expect((await s.heartbeat({ jobId: id, owner: 'm1@w', now: T0 + LEASE + 1, leaseUntil: T0 + 2 * LEASE })).kind).toBe('lost');
      });
    });

    // One transient answer (DynamoDB throttling, Table 503 ServerBusy, Firestore ABORTED, SQLITE_BUSY) is
    // retried below the port or surfaces as a retryable error; never as a permanent one (that dead-letters).
    describe('transient answers', () => {
      for (const write of ['claim', 'commit', 'heartbeat'] as const) {
        it(`one transient error on a ${write} is absorbed or thrown as retryable, and the retry succeeds`, async () => {
          const { store: s, faults } = await setup();
          const id = freshJobId(`transient-${write}`);
          if (write !== 'claim') await s.claim(claimReq(id, 'w1'));
          const call = (): Promise<{ readonly kind: string }> =>
            write === 'claim'
              ? s.claim(claimReq(id, 'w1'))
              : write === 'commit'
                ? s.commit({ jobId: id, owner: 'w1', outputUri: 'o', now: T0 + 3 })
                : s.heartbeat({ jobId: id, owner: 'w1', now: T0 + 3, leaseUntil: T0 + 3 + LEASE });
          const shot = faults.failNextTransiently(write);
          const first = await call().then(
            (r) => r,
            (e: unknown) => e,
          );
          expect(shot.hits).toBe(1);
          if (first instanceof Error) expect(first).toMatchObject({ retryable: true });
          const r = first instanceof Error ? await call() : (first as { readonly kind: string });
          expect(r.kind).toBe(write === 'claim' ? 'claimed' : write === 'commit' ? 'committed' : 'extended');
        });
      }
    });

    describe('concurrency', () => {
      it(`${n} concurrent claimers of one job: exactly one wins`, async () => {
        const s = await get();
        const id = freshJobId('race');
        const results = await Promise.all(Array.from({ length: n }, (_, i) => s.claim(claimReq(id, `w${i}`))));
        const winners = results.filter((r) => r.kind === 'claimed');
        expect(winners).toHaveLength(1);
        expect(results.filter((r) => r.kind === 'held')).toHaveLength(n - 1);
        const winner = results.findIndex((r) => r.kind === 'claimed');
        for (const r of results) if (r.kind === 'held') expect(r.by).toBe(`w${winner}`);
      });

      it(`${n} concurrent takeovers of a lapsed lease: exactly one wins`, async () => {
        const s = await get();
        const id = freshJobId('steal-race');
        await s.claim(claimReq(id, 'dead'));
        const later = T0 + LEASE + 1;
        const results = await Promise.all(Array.from({ length: n }, (_, i) => s.claim(claimReq(id, `w${i}`, later))));
        expect(results.filter((r) => r.kind === 'claimed')).toHaveLength(1);
        expect(results.filter((r) => r.kind === 'held')).toHaveLength(n - 1);
      });

      it('a takeover racing the old owner commit leaves one consistent winner', async () => {
        const s = await get();
        const id = freshJobId('commit-race');
        await s.claim(claimReq(id, 'old'));
        const later = T0 + LEASE + 1;
        const [commit, ...claims] = await Promise.all([
          s.commit({ jobId: id, owner: 'old', outputUri: 'o', now: later }),
          ...Array.from({ length: n - 1 }, (_, i) => s.claim(claimReq(id, `w${i}`, later))),
        ]);
        const row = await s.get(id);
        const stole = claims.filter((r) => r.kind === 'claimed');
        if (commit?.kind === 'committed') {
          // The commit landed first: nobody may take a committed job.
          expect(stole).toHaveLength(0);
          expect(row?.state).toBe('COMMITTED');
        } else {
          expect(stole).toHaveLength(1);
          expect(row).toMatchObject({ state: 'CLAIMED' });
        }
      });
    });
  });
}
