import { DeleteItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DeleteObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { TableClient } from '@azure/data-tables';
import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { DynamoDbManifestStore } from '../../functions/aws/adapters/dynamodb-manifest-store.js';
import { SqsJobQueue } from '../../functions/aws/adapters/sqs-job-queue.js';
import { AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { AzureTableManifestStore } from '../../functions/azure/adapters/azure-table-manifest-store.js';
import { FirestoreManifestStore } from '../../functions/gcp/adapters/firestore-manifest-store.js';
import { GcsObjectStore } from '../../functions/gcp/adapters/gcs-object-store.js';
import type { PullQueue } from '../../shared/ports/job-queue.port.js';
import {
  awsEndpoints,
  dynamoDbClient,
  freshClaimsTable,
  freshManifestTable,
  freshBucket as freshS3Bucket,
  s3Client,
  sqsClient,
} from '../aws/clients.js';
import { freshName } from '../azure/azurite.js';
import { firestoreClient, freshBucket, storageClient } from '../gcp/clients.js';
import { azuriteConnectionString } from '../support/emulators/azure.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId, freshPrefix } from '../support/ids.js';
import { unconditionalWrites } from './precondition-guard.js';

/**
 * The wire guard in the contract files (test/contract/<cloud>.contract.test.ts)
 * must be able to fail: here each store is sent, through a fault proxy, the
 * unconditional writes and deletes an adapter or its SDK could make, with the
 * raw SDK, and the guard must name every one, and none of the conditional ones.
 */
const proxies: FaultProxy[] = [];
afterAll(() => Promise.all(proxies.map((p) => p.stop())));
const proxyFor = async (target: string, protocol: 'http1' | 'http2' = 'http1') => {
  const p = await FaultProxy.start({ target, protocol });
  proxies.push(p);
  return p;
};
const reasons = (p: FaultProxy) => unconditionalWrites(p.requests).map((f) => f.why);

describe('the wire guard finds unconditional writes', () => {
  it('S3: a PutObject without If-None-Match/If-Match; DynamoDB: a PutItem without a ConditionExpression', async () => {
    const aws = awsEndpoints();
    const s3p = await proxyFor(aws.moto);
    const bucket = await freshS3Bucket(s3Client());
    const s3 = s3Client({ ...aws, moto: s3p.url });
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k/create.tif', Body: 'x', IfNoneMatch: '*' }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k/blind.tif', Body: 'x' }));
    expect(reasons(s3p)).toEqual(['PutObject without If-None-Match or If-Match']);

    const ddbp = await proxyFor(aws.dynamodb);
    const ddb = dynamoDbClient({ ...aws, dynamodb: ddbp.url });
    const TableName = await freshClaimsTable(dynamoDbClient());
    const item = { job_id: { S: freshJobId() } };
    await ddb.send(new PutItemCommand({ TableName, Item: item, ConditionExpression: 'attribute_not_exists(job_id)' }));
    await ddb.send(new PutItemCommand({ TableName, Item: item }));
    expect(reasons(ddbp)).toEqual(['PutItem without a ConditionExpression']);
  });

  it("GCS: the SDK's own validation DELETE and a save without ifGenerationMatch; Firestore: a set() without a precondition", async () => {
    const gcp = requireEndpoints(inject('emulators'), 'gcp');
    const gcsp = await proxyFor(gcp.gcs);
    const bucket = await freshBucket(gcp, 'wire');
    const viaProxy = storageClient({ ...gcp, gcs: gcsp.url }).bucket(bucket.name);
    await new GcsObjectStore(viaProxy).putIfAbsent(`${freshPrefix()}ok.tif`, new Uint8Array([1]));
    await viaProxy.file(`${freshPrefix()}blind.tif`).save(Buffer.from('x'), { resumable: false });
    // An answer without checksums: the SDK's default validation deletes the object, with no generation.
    const key = `${freshPrefix()}validated.tif`;
    gcsp.add({
      match: { method: 'POST', path: '/upload/' },
      action: {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ bucket: bucket.name, name: key, generation: '7' }),
      },
    });
    await viaProxy
      .file(key)
      .save(Buffer.from('x'), { resumable: false, preconditionOpts: { ifGenerationMatch: 0 } })
      .catch(() => {});
    expect(reasons(gcsp)).toEqual([
      'upload (multipart) without ifGenerationMatch',
      'object DELETE without ifGenerationMatch (the SDK validation delete looks like this)',
    ]);

    const fsp = await proxyFor(`http://${gcp.firestore}`, 'http2');
    const db = firestoreClient({ ...gcp, firestore: fsp.host });
    try {
      const doc = db.collection('wire').doc(freshJobId());
      await doc.create({ n: 0 });
      await doc.set({ n: 1 });
      expect(reasons(fsp)).toEqual(['Commit with 1 update without a precondition']);
    } finally {
      await db.terminate();
    }
  });

  it('Azure: a Put Blob without a condition, a Delete Blob without an ETag, a Table upsert', async () => {
    const azure = requireEndpoints(inject('emulators'), 'azure');
    const blobp = await proxyFor(azure.blob);
    const direct = BlobServiceClient.fromConnectionString(azure.connectionString).getContainerClient(freshName('wire'));
    await direct.create();
    const viaProxy = BlobServiceClient.fromConnectionString(
      azuriteConnectionString(blobp.url, azure.queue, azure.table),
    ).getContainerClient(direct.containerName);
    await viaProxy.getBlockBlobClient('ok.tif').upload('x', 1, { conditions: { ifNoneMatch: '*' } });
    await viaProxy.getBlockBlobClient('blind.tif').upload('x', 1);
    await viaProxy.getBlockBlobClient('blind.tif').delete();
    expect(reasons(blobp)).toEqual(['Put Blob without If-None-Match or an If-Match ETag', 'Delete Blob without an If-Match ETag']);

    const tablep = await proxyFor(azure.table);
    const name = freshName('wire');
    await TableClient.fromConnectionString(azure.connectionString, name, { allowInsecureConnection: true }).createTable();
    const table = TableClient.fromConnectionString(azuriteConnectionString(azure.blob, azure.queue, tablep.url), name, {
      allowInsecureConnection: true,
    });
    await table.createEntity({ partitionKey: 'p', rowKey: 'r', n: 1 });
    await table.upsertEntity({ partitionKey: 'p', rowKey: 'r', n: 2 }, 'Replace');
    expect(reasons(tablep)).toEqual(['PUT of an entity without If-Match (an upsert)']);
  });
});

// Deletes of data need a precondition as much as writes do (the ports' deleteIfVersion and deleteIf send one).
describe('the wire guard finds unconditional deletes', () => {
  it('S3: a DeleteObject without If-Match; DynamoDB: a DeleteItem without a ConditionExpression', async () => {
    const aws = awsEndpoints();
    const s3p = await proxyFor(aws.moto);
    const bucket = await freshS3Bucket(s3Client());
    const s3 = s3Client({ ...aws, moto: s3p.url });
    const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'k/a.tif', Body: 'x', IfNoneMatch: '*' }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'k/a.tif', IfMatch: put.ETag }));
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'k/b.tif' }));
    expect(reasons(s3p)).toEqual(['DeleteObject without If-Match']);

    const ddbp = await proxyFor(aws.dynamodb);
    const ddb = dynamoDbClient({ ...aws, dynamodb: ddbp.url });
    const TableName = await freshClaimsTable(dynamoDbClient());
    const Key = { job_id: { S: freshJobId() } };
    await ddb.send(new DeleteItemCommand({ TableName, Key, ConditionExpression: 'attribute_exists(job_id)' })).catch(() => {});
    await ddb.send(new DeleteItemCommand({ TableName, Key }));
    expect(reasons(ddbp)).toEqual(['DeleteItem without a ConditionExpression']);
  });

  it('GCS: an object DELETE without ifGenerationMatch; Firestore: a delete() without a precondition', async () => {
    const gcp = requireEndpoints(inject('emulators'), 'gcp');
    const gcsp = await proxyFor(gcp.gcs);
    const bucket = await freshBucket(gcp, 'wire');
    const store = new GcsObjectStore(storageClient({ ...gcp, gcs: gcsp.url }).bucket(bucket.name));
    const key = `${freshPrefix()}d.tif`;
    const put = await store.putIfAbsent(key, new Uint8Array([1]));
    if (put.kind !== 'written') throw new Error('setup failed');
    expect(await store.deleteIfVersion(key, put.version)).toEqual({ kind: 'deleted' });
    await store.putIfAbsent(key, new Uint8Array([2]));
    await storageClient({ ...gcp, gcs: gcsp.url })
      .bucket(bucket.name)
      .file(key)
      .delete();
    expect(reasons(gcsp)).toEqual(['object DELETE without ifGenerationMatch (the SDK validation delete looks like this)']);

    const fsp = await proxyFor(`http://${gcp.firestore}`, 'http2');
    const db = firestoreClient({ ...gcp, firestore: fsp.host });
    try {
      const doc = db.collection('wire').doc(freshJobId());
      await doc.create({ n: 0 });
      const [snap] = await db.getAll(doc);
      await doc.delete({ lastUpdateTime: snap?.updateTime as never });
      await doc.create({ n: 1 });
      await doc.delete();
      expect(reasons(fsp)).toEqual(['Commit with 1 delete without a precondition']);
    } finally {
      await db.terminate();
    }
  });

  it('Azure Table: a Delete Entity with If-Match: * (no version)', async () => {
    const azure = requireEndpoints(inject('emulators'), 'azure');
    const tablep = await proxyFor(azure.table);
    const name = freshName('wire');
    await TableClient.fromConnectionString(azure.connectionString, name, { allowInsecureConnection: true }).createTable();
    const table = TableClient.fromConnectionString(azuriteConnectionString(azure.blob, azure.queue, tablep.url), name, {
      allowInsecureConnection: true,
    });
    const created = await table.createEntity({ partitionKey: 'p', rowKey: 'r', n: 1 });
    await table.deleteEntity('p', 'r', { etag: created.etag as string });
    await table.createEntity({ partitionKey: 'p', rowKey: 'r', n: 2 });
    await table.deleteEntity('p', 'r');
    expect(reasons(tablep)).toEqual(['DELETE of an entity with If-Match: * (no version)']);
  });
});

// Queues delete too: a message is deleted (acked) or hidden again (released) only under the receipt of the
// receive that handed it out (SQS ReceiptHandle, Storage Queue popreceipt). The adapters' own cycle must pass the guard.
describe('the queue adapters delete and release only under a receipt', () => {
  const cycle = async (queue: PullQueue) => {
    await queue.sendBatch([
      { jobKey: 'a', body: '{"a":1}' },
      { jobKey: 'b', body: '{"b":1}' },
    ]);
    const got = await queue.receive(10, 30_000);
    expect(got).toHaveLength(2);
    await queue.ack(got[0] as (typeof got)[number]);
    await queue.release(got[1] as (typeof got)[number], 0);
  };

  it('SqsJobQueue: DeleteMessage and ChangeMessageVisibility carry the ReceiptHandle', async () => {
    const aws = awsEndpoints();
    const proxy = await proxyFor(aws.moto);
    const { QueueUrl } = await sqsClient().send(new CreateQueueCommand({ QueueName: freshName('wire') }));
    await cycle(new SqsJobQueue(sqsClient({ ...aws, moto: proxy.url }), QueueUrl as string));
    expect(proxy.requests.some((r) => /DeleteMessage/.test(String(r.headers['x-amz-target']) + r.text))).toBe(true);
    expect(unconditionalWrites(proxy.requests)).toEqual([]);
  });

  it('AzureQueueJobQueue: Delete Message and Update Message carry the popreceipt; Clear Messages would not', async () => {
    const azure = requireEndpoints(inject('emulators'), 'azure');
    const proxy = await proxyFor(azure.queue);
    const service = QueueServiceClient.fromConnectionString(azuriteConnectionString(azure.blob, proxy.url, azure.table));
    const name = freshName('wire');
    await service.getQueueClient(name).create();
    await service.getQueueClient(`${name}-poison`).create();
    await cycle(AzureQueueJobQueue.onAccount(service, name));
    expect(proxy.requests.some((r) => r.method === 'DELETE' && r.path.includes('/messages/'))).toBe(true);
    expect(unconditionalWrites(proxy.requests)).toEqual([]);
    await service.getQueueClient(name).clearMessages();
    expect(reasons(proxy)).toEqual(['Clear Messages carries no precondition']);
  });
});

// The ingest manifest is create-only on every cloud: each adapter's register passes the guard, SDK resends
// included, and a blind write of a manifest row (what a careless "upsert the row" fix would send) is named.
describe('the wire guard covers the manifest tables', () => {
  const row = () => ({
    source: 'sentinel-2-l2a',
    externalId: `S2B/${freshJobId().slice(0, 8)}#?`,
    checksum: freshJobId(),
    key: 'scenes/s2/a.tif',
    bytes: 1,
    runId: 'run-1',
    publishedAt: '2026-12-01T09:00:00.000Z',
  });

  it('DynamoDB: register is a conditional PutItem; a blind PutItem of a manifest item is named', async () => {
    const aws = awsEndpoints();
    const p = await proxyFor(aws.dynamodb);
    const TableName = await freshManifestTable(dynamoDbClient());
    const ddb = dynamoDbClient({ ...aws, dynamodb: p.url });
    const store = new DynamoDbManifestStore(ddb, TableName);
    const e = row();
    await store.register(e);
    await store.register({ ...e, runId: 'run-2' });
    expect(reasons(p)).toEqual([]);
    await ddb.send(new PutItemCommand({ TableName, Item: { pk: { S: 'x' }, checksum: { S: e.checksum }, run_id: { S: 'blind' } } }));
    expect(reasons(p)).toEqual(['PutItem without a ConditionExpression']);
  });

  it('Firestore: register is a create() (exists: false); a set() of a manifest document is named', async () => {
    const gcp = requireEndpoints(inject('emulators'), 'gcp');
    const p = await proxyFor(`http://${gcp.firestore}`, 'http2');
    const db = firestoreClient({ ...gcp, firestore: p.host });
    try {
      const collection = db.collection(`manifest-${freshJobId().slice(0, 8)}`);
      const store = new FirestoreManifestStore(collection);
      const e = row();
      await store.register(e);
      await store.register({ ...e, runId: 'run-2' });
      expect(reasons(p)).toEqual([]);
      await collection.doc('blind').set({ run_id: 'blind' });
      expect(reasons(p)).toEqual(['Commit with 1 update without a precondition']);
    } finally {
      await db.terminate();
    }
  });

  it('Azure Table: register is Insert Entity; an upsert of a manifest entity is named', async () => {
    const azure = requireEndpoints(inject('emulators'), 'azure');
    const p = await proxyFor(azure.table);
    const name = freshName('manifest');
    await TableClient.fromConnectionString(azure.connectionString, name, { allowInsecureConnection: true }).createTable();
    const table = TableClient.fromConnectionString(azuriteConnectionString(azure.blob, azure.queue, p.url), name, {
      allowInsecureConnection: true,
    });
    const store = new AzureTableManifestStore(table);
    const e = row();
    await store.register(e);
    await store.register({ ...e, runId: 'run-2' });
    expect(reasons(p)).toEqual([]);
    await table.upsertEntity({ partitionKey: 'p', rowKey: e.checksum, run_id: 'blind' }, 'Replace');
    expect(reasons(p)).toEqual(['PUT of an entity without If-Match (an upsert)']);
  });
});
