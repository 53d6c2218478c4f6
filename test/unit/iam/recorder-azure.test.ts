import type { ContainerClient } from '@azure/storage-blob';
import { beforeAll, describe, expect, it } from 'vitest';
import { AzureBlobObjectStore } from '../../../functions/azure/adapters/azure-blob-object-store.js';
import { AzureTableClaimStore } from '../../../functions/azure/adapters/azure-table-claim-store.js';
import { freshContainer, freshQueue, freshTable } from '../../azure/azurite.js';
import { asRole } from '../../support/function-role.js';
import { registerResources } from '../../support/iam/recorder.js';
import { freshJobId } from '../../support/ids.js';
import { collect, lines } from './recorder-support.js';

/**
 * The recorder on Azure: the real adapters, run as a role against Azurite (Blob, Table, Queue); what the
 * recorder makes of each request is compared whole. `a | b` is the cloud's own "either" (Put Blob that
 * can only create is authorised by `blobs/write` or by `blobs/add/action`), `a + b` "both".
 */
const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
const ENTITIES = 'Microsoft.Storage/storageAccounts/tableServices/tables/entities';
const MESSAGES = 'Microsoft.Storage/storageAccounts/queueServices/queues/messages';

let container: ContainerClient;
let outputs: AzureBlobObjectStore;

beforeAll(async () => {
  container = await freshContainer('iamout');
  outputs = new AzureBlobObjectStore(container);
  registerResources({ [container.containerName]: 'outputBucket' });
});

describe('the access recorder on Azure (real adapters as a role, against Azurite)', () => {
  it('Blob: a create-only Put Blob is write or add/action, a replace write, reads and listings blobs/read, a delete blobs/delete', async () => {
    const rec = collect();
    try {
      const first = await asRole('tile', () => outputs.putIfAbsent('tiles/s/0_0.tif', new Uint8Array([1, 2, 3])));
      if (first.kind !== 'written') throw new Error(`expected written, got ${first.kind}`);
      const replaced = await asRole('tile', () => outputs.putIfMatch('tiles/s/0_0.tif', new Uint8Array([4, 5]), first.version));
      if (replaced.kind !== 'written') throw new Error(`expected written, got ${replaced.kind}`);
      await asRole('mosaic', async () => {
        await outputs.get('tiles/s/0_0.tif');
        for await (const _ of outputs.list('tiles/s/')) void _;
      });
    } finally {
      rec.stop();
    }
    const out = 'outputBucket tiles/s/0_0.tif';
    expect(lines(rec.seen)).toEqual([
      `tile ${BLOBS}/write ${out} | tile ${BLOBS}/add/action ${out}`,
      `tile ${BLOBS}/write ${out}`,
      `mosaic ${BLOBS}/read ${out}`,
      `mosaic ${BLOBS}/read outputBucket list:tiles/s/`,
    ]);
  });

  it('Blob: a pin snapshots the blob (Snapshot Blob: write or add/action on the source), a delete is blobs/delete', async () => {
    const sources = await freshContainer('iamsrc');
    registerResources({ [sources.containerName]: 'sourceBucket' });
    const store = new AzureBlobObjectStore(sources);
    const put = await store.putIfAbsent('incoming/a.tif', new Uint8Array([7]));
    if (put.kind !== 'written') throw new Error(`expected written, got ${put.kind}`);
    const rec = collect();
    try {
      await asRole('scene', () => store.pin('incoming/a.tif', put.version));
      await asRole('verify', () => store.deleteIfVersion('incoming/a.tif', put.version));
    } finally {
      rec.stop();
    }
    const src = 'sourceBucket incoming/a.tif';
    const got = lines(rec.seen);
    expect(got).toContain(`scene ${BLOBS}/write ${src} | scene ${BLOBS}/add/action ${src}`);
    expect(got).toContain(`verify ${BLOBS}/delete ${src}`);
    expect(got.every((l) => /^(scene|verify) /.test(l) && !l.includes('UNRECOGNISED'))).toBe(true);
  });

  it('Table: a claim is Insert Entity (write or add/action), a commit Update Entity with If-Match (write or update/action)', async () => {
    const table = await freshTable('iamclaims');
    registerResources({ [table.tableName]: 'claimsTable' });
    const claims = new AzureTableClaimStore(table);
    const jobId = freshJobId();
    const rec = collect();
    try {
      await asRole('tile', async () => {
        await claims.claim({ jobId, owner: 'w1', now: 1_000, leaseUntil: 61_000, expiresAt: 9_999_999 });
        await claims.commit({ jobId, owner: 'w1', outputUri: 'https://x/y', now: 2_000 });
      });
    } finally {
      rec.stop();
    }
    expect(lines(rec.seen)).toEqual([
      `tile ${ENTITIES}/write claimsTable | tile ${ENTITIES}/add/action claimsTable`,
      `tile ${ENTITIES}/read claimsTable`,
      `tile ${ENTITIES}/write claimsTable | tile ${ENTITIES}/update/action claimsTable`,
    ]);
  });

  it('Queue: Put Message is add/action or write; Get Messages process/action or read + delete; Delete Message process/action or delete', async () => {
    const { queue } = await freshQueue('iamtiles');
    registerResources({ [queue.queueName]: 'tileQueue', [queue.poisonQueueName]: 'deadLetterQueue' });
    const rec = collect();
    try {
      await asRole('scene', () => queue.sendBatch([{ jobKey: freshJobId(), body: '{}' }]));
      await asRole('tile', async () => {
        const [d] = await queue.receive(1, 30_000);
        if (d === undefined) throw new Error('no message came back');
        await queue.ack(d);
      });
    } finally {
      rec.stop();
    }
    const got = lines(rec.seen);
    expect(got[0]).toBe(`scene ${MESSAGES}/add/action tileQueue | scene ${MESSAGES}/write tileQueue`);
    expect(got).toContain(
      `tile ${MESSAGES}/process/action tileQueue | tile ${MESSAGES}/read tileQueue + tile ${MESSAGES}/delete tileQueue`,
    );
    expect(got.at(-1)).toBe(`tile ${MESSAGES}/process/action tileQueue | tile ${MESSAGES}/delete tileQueue`);
    expect(got.every((l) => !l.includes('UNRECOGNISED'))).toBe(true);
  });
});
