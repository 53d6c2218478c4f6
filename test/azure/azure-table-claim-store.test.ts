import type { TableClient } from '@azure/data-tables';
import { describe, expect, it } from 'vitest';
import { AzureTableClaimStore, PARTITION_PREFIX_LENGTH } from '../../functions/azure/adapters/azure-table-claim-store.js';
import { AdapterError } from '../../shared/domain/errors.js';
import { freshJobId } from '../support/ids.js';
import { freshTable } from './azurite.js';

const T0 = 1_800_000_000_000;
const LEASE = 900_000;
const claimReq = (jobId: string, owner: string, now = T0, retainMs = 7 * 86_400_000) => ({
  jobId,
  owner,
  now,
  leaseUntil: now + LEASE,
  expiresAt: now + retainMs,
});

/**
 * The real table client with one seam: `beforeDelete` runs against Azurite just
 * before each delete the store issues, so a test can land a concurrent writer
 * between the cleanup's read and its conditional delete.
 */
function withWriterBeforeDelete(table: TableClient, beforeDelete: (partitionKey: string, rowKey: string) => Promise<void>): TableClient {
  return new Proxy(table, {
    get(target, prop, receiver) {
      if (prop === 'deleteEntity') {
        return async (...args: Parameters<TableClient['deleteEntity']>) => {
          await beforeDelete(args[0], args[1]);
          return target.deleteEntity(...args);
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('AzureTableClaimStore', () => {
  describe('row layout', () => {
    it('keys a job by a 2-hex-character PartitionKey and the whole job key as RowKey, with lease_until in ms and expires_at as a DateTime', async () => {
      const table = await freshTable();
      const store = new AzureTableClaimStore(table);
      const id = freshJobId('layout');
      await store.claim(claimReq(id, 'w1'));
      const raw = await table.getEntity<Record<string, unknown>>(id.slice(0, PARTITION_PREFIX_LENGTH), id);
      expect(raw).toMatchObject({
        partitionKey: id.slice(0, 2),
        rowKey: id,
        state: 'CLAIMED',
        owner: 'w1',
        lease_until: BigInt(T0 + LEASE),
      });
      expect(raw.expires_at).toEqual(new Date(T0 + 7 * 86_400_000));
    });

    it('spreads job keys over many partitions', async () => {
      const store = new AzureTableClaimStore(await freshTable());
      const partitions = new Set(Array.from({ length: 200 }, (_, i) => store.keys(freshJobId(`spread${i}`)).partitionKey));
      expect(partitions.size).toBeGreaterThan(100);
    });

    it.each([
      ['not hex', 'zz'.repeat(32)],
      ['uppercase', 'AB'.repeat(32)],
      ['too short', 'abc'],
      ['a slash', `${'a'.repeat(63)}/`],
    ])('refuses a job id that is %s before touching the table', async (_label, id) => {
      const store = new AzureTableClaimStore(await freshTable());
      await expect(store.claim(claimReq(id, 'w1'))).rejects.toBeInstanceOf(AdapterError);
      await expect(store.get(id)).rejects.toThrow(/claim-store:azure-table/);
    });
  });

  describe('lost races', () => {
    it('a job whose row cleanup swept away can be claimed afresh', async () => {
      const table = await freshTable();
      const store = new AzureTableClaimStore(table);
      const id = freshJobId('swept');
      await store.claim(claimReq(id, 'old', T0, 1));
      await store.deleteExpired(T0 + LEASE + 10);
      const r = await store.claim(claimReq(id, 'new', T0 + LEASE + 20));
      expect(r.kind).toBe('claimed');
      expect(await store.get(id)).toMatchObject({ owner: 'new', state: 'CLAIMED' });
    });

    it('16 concurrent commits and takeovers of one lapsed lease leave exactly one owner and a consistent row', async () => {
      const store = new AzureTableClaimStore(await freshTable());
      const id = freshJobId('mixed');
      await store.claim(claimReq(id, 'old'));
      const later = T0 + LEASE + 1;
      const results = await Promise.all([
        ...Array.from({ length: 8 }, () => store.commit({ jobId: id, owner: 'old', outputUri: 'o', now: later })),
        ...Array.from({ length: 8 }, (_, i) => store.claim(claimReq(id, `w${i}`, later))),
      ]);
      const row = await store.get(id);
      const committed = results.filter((r) => r.kind === 'committed').length;
      const claimed = results.filter((r) => r.kind === 'claimed').length;
      if (row?.state === 'COMMITTED') {
        expect(row.owner).toBe('old');
        expect(claimed).toBe(0);
        expect(committed).toBe(8);
      } else {
        expect(claimed).toBe(1);
        expect(committed).toBe(0);
        expect(results.filter((r) => r.kind === 'lease-stolen')).toHaveLength(8);
      }
    });
  });

  describe('deleteExpired (Table Storage has no TTL)', () => {
    it('deletes rows past expires_at and keeps the others', async () => {
      const store = new AzureTableClaimStore(await freshTable());
      const gone = freshJobId('gone');
      const committed = freshJobId('committed-gone');
      const kept = freshJobId('kept');
      await store.claim(claimReq(gone, 'w1', T0, 1000));
      await store.claim(claimReq(committed, 'w1', T0, 1000));
      await store.commit({ jobId: committed, owner: 'w1', outputUri: 'o', now: T0 + 1 });
      await store.claim(claimReq(kept, 'w1', T0, 10 * LEASE));
      const report = await store.deleteExpired(T0 + 2 * LEASE);
      expect(report).toEqual({ deleted: 2, skipped: 0 });
      expect(await store.get(gone)).toBeUndefined();
      expect(await store.get(committed)).toBeUndefined();
      expect(await store.get(kept)).toMatchObject({ owner: 'w1' });
    });

    it('keeps a row whose retention ended while its lease is still live', async () => {
      const store = new AzureTableClaimStore(await freshTable());
      const id = freshJobId('live');
      await store.claim(claimReq(id, 'w1', T0, 1000));
      expect(await store.deleteExpired(T0 + 2000)).toEqual({ deleted: 0, skipped: 1 });
      expect(await store.get(id)).toBeDefined();
    });

    it('leaves a row alone when a writer changed it between the scan and the delete (If-Match on the ETag)', async () => {
      const table = await freshTable();
      const id = freshJobId('raced');
      const setup = new AzureTableClaimStore(table);
      await setup.claim(claimReq(id, 'old', T0, 1000));
      // The concurrent writer: a takeover with a fresh retention lands after the scan read the row.
      const racing = new AzureTableClaimStore(
        withWriterBeforeDelete(table, async () => {
          await setup.claim(claimReq(id, 'new', T0 + 2 * LEASE, 10 * LEASE));
        }),
      );
      expect(await racing.deleteExpired(T0 + 2 * LEASE)).toEqual({ deleted: 0, skipped: 1 });
      expect(await setup.get(id)).toMatchObject({ owner: 'new', state: 'CLAIMED' });
    });
  });
});
