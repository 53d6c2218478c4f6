import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConditionalCheckFailedException, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { Firestore } from '@google-cloud/firestore';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { awsEndpoints, dynamoDbClient, freshClaimsTable } from '../aws/clients.js';
import { FaultProxy, storeFaults } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';

/**
 * The fault proxy itself: that a dropped answer really lands at the store and
 * really makes the SDK retry, that canned errors are taken for the store's own,
 * and that probability rules repeat from their seed. The contracts rely on it.
 */
describe('FaultProxy', () => {
  const proxies: FaultProxy[] = [];
  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.stop()));
  });
  const started = async (target: string, protocol: 'http1' | 'http2' = 'http1', seed?: number) => {
    const p = await FaultProxy.start({ target, protocol, ...(seed === undefined ? {} : { seed }) });
    proxies.push(p);
    return p;
  };

  it('drop-response: DynamoDB applies the write, the SDK retries, and the retry meets its own row', async () => {
    const proxy = await started(awsEndpoints().dynamodb);
    const ddb = dynamoDbClient({ ...awsEndpoints(), dynamodb: proxy.url });
    const TableName = await freshClaimsTable(ddb);
    const lost = proxy.add({ match: { header: { 'x-amz-target': 'DynamoDB_20120810.PutItem' } }, action: 'drop-response' });
    const put = ddb.send(
      new PutItemCommand({ TableName, Item: { job_id: { S: 'j' } }, ConditionExpression: 'attribute_not_exists(job_id)' }),
    );
    await expect(put).rejects.toBeInstanceOf(ConditionalCheckFailedException);
    expect(lost.hits).toBe(1);
    const puts = proxy.requests.filter((r) => r.headers['x-amz-target'] === 'DynamoDB_20120810.PutItem');
    expect(puts.map((r) => [r.fault, r.status])).toEqual([
      ['drop-response', 200],
      [undefined, 400],
    ]);
    expect(puts[0]?.text).toBe(puts[1]?.text); // the SDK resent the very same request
    const row = await ddb.send(new GetItemCommand({ TableName, Key: { job_id: { S: 'j' } }, ConsistentRead: true }));
    expect(row.Item).toEqual({ job_id: { S: 'j' } });
  });

  it('respond: a DynamoDB throttling answer is retried by the SDK, which then succeeds', async () => {
    const proxy = await started(awsEndpoints().dynamodb);
    const ddb = dynamoDbClient({ ...awsEndpoints(), dynamodb: proxy.url });
    const TableName = await freshClaimsTable(ddb);
    const throttle = proxy.add({ match: { header: { 'x-amz-target': /PutItem$/ } }, action: storeFaults.dynamoDbThrottled() });
    await ddb.send(new PutItemCommand({ TableName, Item: { job_id: { S: 'k' } } }));
    expect(throttle.hits).toBe(1);
    expect(proxy.requests.filter((r) => r.headers['x-amz-target']?.toString().endsWith('PutItem')).map((r) => r.status)).toEqual([
      400, 200,
    ]);
  });

  it('http2: a Firestore commit whose answer is lost lands once and the SDK retry meets ALREADY_EXISTS', async () => {
    const gcp = requireEndpoints(inject('emulators'), 'gcp');
    const proxy = await started(`http://${gcp.firestore}`, 'http2');
    const db = new Firestore({ projectId: gcp.projectId, host: proxy.host, ssl: false, preferRest: false });
    try {
      const ref = db.collection(`proxy-${freshJobId().slice(0, 8)}`).doc('d');
      const lost = proxy.add({ match: { path: '/google.firestore.v1.Firestore/Commit' }, action: 'drop-response' });
      const error = await ref.create({ n: 1 }).then(
        () => undefined,
        (e: unknown) => e as { code?: number },
      );
      expect(lost.hits).toBe(1);
      expect(error?.code).toBe(6);
      expect((await ref.get()).data()).toEqual({ n: 1 });
      const commits = proxy.requests.filter((r) => r.path.endsWith('/Commit'));
      expect(commits.length).toBeGreaterThanOrEqual(2);
      expect(commits[0]?.fault).toBe('drop-response');
    } finally {
      await db.terminate();
    }
  });

  it('http2: a canned gRPC status reaches the client as that code', async () => {
    const gcp = requireEndpoints(inject('emulators'), 'gcp');
    const proxy = await started(`http://${gcp.firestore}`, 'http2');
    const db = new Firestore({ projectId: gcp.projectId, host: proxy.host, ssl: false, preferRest: false });
    try {
      const ref = db.collection(`proxy-${freshJobId().slice(0, 8)}`).doc('d');
      // FAILED_PRECONDITION: a code neither gax nor the SDK retries, so the client must see exactly it.
      proxy.add({ match: { path: /Commit$/ }, action: storeFaults.grpc(9, 'injected by the fault proxy') });
      const error = await ref.create({ n: 1 }).then(
        () => undefined,
        (e: unknown) => e as { code?: number; details?: string },
      );
      expect(error).toMatchObject({ code: 9, details: 'injected by the fault proxy' });
      expect((await ref.get()).exists).toBe(false);
    } finally {
      await db.terminate();
    }
  });

  it('probability rules repeat from their seed', async () => {
    const upstream = createServer((_, res) => res.end('ok'));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    try {
      const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
      const pattern = async (seed: number) => {
        const proxy = await started(base, 'http1', seed);
        proxy.add({ action: storeFaults.s3SlowDown(), times: Number.POSITIVE_INFINITY, probability: 0.5 });
        const statuses: number[] = [];
        for (let i = 0; i < 32; i++) statuses.push((await fetch(`${proxy.url}/k${i}`)).status);
        return statuses;
      };
      const a = await pattern(42);
      expect(await pattern(42)).toEqual(a);
      expect(a).toContain(503);
      expect(a).toContain(200);
      expect(await pattern(43)).not.toEqual(a);
    } finally {
      upstream.close();
    }
  });
});
