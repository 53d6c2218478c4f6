import { Timestamp } from '@google-cloud/firestore';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { FirestoreClaimStore } from '../../functions/gcp/adapters/firestore-claim-store.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';
import { firestoreClient } from './clients.js';

const gcp = requireEndpoints(inject('emulators'), 'gcp');
const db = firestoreClient(gcp);
afterAll(() => db.terminate());
const collection = db.collection(`claims-${freshJobId().slice(0, 8)}`);
const store = new FirestoreClaimStore(collection);
const T0 = 1_800_000_000_000;
const LEASE = 840_000;
const RETAIN = 7 * 86_400_000;

describe('FirestoreClaimStore document layout', () => {
  it('stores expires_at as a Timestamp a TTL policy can use, lease_until as epoch ms, and bumps rev on every write', async () => {
    const id = freshJobId('layout');
    await store.claim({ jobId: id, owner: 'w1', now: T0, leaseUntil: T0 + LEASE, expiresAt: T0 + RETAIN });
    const claimed = (await collection.doc(id).get()).data();
    expect(claimed?.expires_at).toBeInstanceOf(Timestamp);
    expect((claimed?.expires_at as Timestamp | undefined)?.toMillis()).toBe(T0 + RETAIN);
    expect(claimed).toMatchObject({ job_id: id, state: 'CLAIMED', owner: 'w1', lease_until: T0 + LEASE, rev: 1 });
    await store.commit({ jobId: id, owner: 'w1', outputUri: 'tiles/s/0_0.tif', now: T0 + 5 });
    expect((await collection.doc(id).get()).data()).toMatchObject({
      state: 'COMMITTED',
      output_uri: 'tiles/s/0_0.tif',
      finished_at: T0 + 5,
      rev: 2,
    });
  });

  it('answers claimed, not held, when its own create landed but the answer was lost (an SDK retry)', async () => {
    const id = freshJobId('retried');
    const req = { jobId: id, owner: 'w1', now: T0, leaseUntil: T0 + LEASE, expiresAt: T0 + RETAIN };
    expect((await store.claim(req)).kind).toBe('claimed');
    expect(await store.claim(req)).toMatchObject({ kind: 'claimed', row: { owner: 'w1', leaseUntil: T0 + LEASE } });
    expect((await store.claim({ ...req, leaseUntil: T0 + LEASE + 1 })).kind).toBe('held');
  });

  it('loses a takeover computed from a stale read: the update_time precondition refuses it', async () => {
    const id = freshJobId('stale');
    await store.claim({ jobId: id, owner: 'dead', now: T0, leaseUntil: T0 + LEASE, expiresAt: T0 + RETAIN });
    const staleRead = await collection.doc(id).get();
    const later = T0 + LEASE + 1;
    expect((await store.claim({ jobId: id, owner: 'w1', now: later, leaseUntil: later + LEASE, expiresAt: later + RETAIN })).kind).toBe(
      'claimed',
    );
    // A second claimer that read before w1 wrote: its compare-and-set must fail (gRPC 9), not overwrite w1.
    const write = collection.doc(id).update({ owner: 'w2', rev: 99 }, { lastUpdateTime: staleRead.updateTime as Timestamp });
    await expect(write).rejects.toMatchObject({ code: 9 });
    expect(await store.get(id)).toMatchObject({ owner: 'w1' });
  });

  it('releases a claim (heartbeat into the past) so a redelivery can take it at once', async () => {
    const id = freshJobId('release');
    await store.claim({ jobId: id, owner: 'w1', now: T0, leaseUntil: T0 + LEASE, expiresAt: T0 + RETAIN });
    expect(await store.heartbeat({ jobId: id, owner: 'w1', now: T0 + 10, leaseUntil: T0 + 9 })).toEqual({
      kind: 'extended',
      leaseUntil: T0 + 9,
    });
    expect(await store.claim({ jobId: id, owner: 'w2', now: T0 + 11, leaseUntil: T0 + 11 + LEASE, expiresAt: T0 + RETAIN })).toMatchObject({
      kind: 'claimed',
      stolenFrom: 'w1',
    });
  });
});

/**
 * ABORTED (gRPC 10) is contention, on a create as on a compare-and-set. The SDK
 * itself retries a batch commit on ABORTED until its budget (gax: up to 600 s)
 * is spent; what reaches the adapter after that is modelled here by a collection
 * whose `create` answers ABORTED a given number of times, then delegates to the
 * emulator. Before this was classified, one such ABORTED was a non-retryable
 * AdapterError: the delivery was settled as poison and the tile dead-lettered.
 */
describe('FirestoreClaimStore and ABORTED on create', () => {
  const aborted = () => Object.assign(new Error('10 ABORTED: Aborted due to cross-transaction contention.'), { code: 10 });
  /** The same collection, but `create` on its documents fails with ABORTED `times` times first (and can run `before` each time). */
  const contended = (times: number, before?: (id: string) => Promise<void>) => {
    let left = times;
    return new Proxy(collection, {
      get(target, prop, receiver) {
        if (prop !== 'doc') return Reflect.get(target, prop, receiver);
        return (id: string) => {
          const ref = target.doc(id);
          return new Proxy(ref, {
            get(r, p, rr) {
              if (p !== 'create') return Reflect.get(r, p, rr);
              return async (data: Record<string, unknown>) => {
                if (left-- > 0) {
                  await before?.(id);
                  throw aborted();
                }
                return r.create(data);
              };
            },
          });
        };
      },
    });
  };
  const req = (id: string, owner = 'w1') => ({ jobId: id, owner, now: T0, leaseUntil: T0 + LEASE, expiresAt: T0 + RETAIN });

  it('reads and decides again: claimed when nobody wrote meanwhile', async () => {
    const id = freshJobId('aborted');
    const r = await new FirestoreClaimStore(contended(1)).claim(req(id));
    expect(r).toMatchObject({ kind: 'claimed', row: { owner: 'w1' } });
    expect(await store.get(id)).toMatchObject({ owner: 'w1', state: 'CLAIMED' });
  });

  it('reads and decides again: held by the rival whose create won the contention', async () => {
    const id = freshJobId('aborted-rival');
    const rivalWins = async (jobId: string) => {
      await store.claim(req(jobId, 'rival'));
    };
    expect(await new FirestoreClaimStore(contended(1, rivalWins)).claim(req(id))).toEqual({
      kind: 'held',
      by: 'rival',
      leaseUntil: T0 + LEASE,
    });
  });

  it('a contention that never settles is a retryable error, never poison', async () => {
    const id = freshJobId('aborted-forever');
    await expect(new FirestoreClaimStore(contended(1000)).claim(req(id))).rejects.toMatchObject({
      code: 'ADAPTER_FAILURE',
      retryable: true,
    });
  });
});
