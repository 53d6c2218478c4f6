import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createIngestHandler } from '../../functions/aws/handlers/ingest.handler.js';
import { createReconcileHandler } from '../../functions/aws/handlers/reconcile.handler.js';
import { toIngestMessage } from '../../shared/app/ingest.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { notARaster, validArtefact } from '../support/ingest-fixtures.js';
import { dynamoDbClient, freshManifestTable } from './clients.js';
import { expectNoAccessDenied } from './iam.js';
import {
  asFunction,
  createQueue,
  createTestRuntime,
  createTestStack,
  pollOnce,
  type TestQueue,
  type TestRuntime,
  type TestStack,
} from './stack.js';

/**
 * The AWS ingest function (functions/aws/handlers/ingest.handler.ts) driven as
 * the SQS event source mapping drives it, against moto (S3, SQS) and DynamoDB
 * Local (the manifest), on a stack shaped like infra/'s: the ingest queue with
 * its own DLQ, staging/ and the promoted prefix in the source bucket.
 */

const SOURCE = 'sentinel-2-l2a';
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

let stack: TestStack;
let rt: TestRuntime;
let ingestQueue: TestQueue;
let ingestDlq: TestQueue;
let sourceBucket: string;
let artefact: Uint8Array;
const logs: string[] = [];
const servers: Server[] = [];

beforeAll(async () => {
  // Enforced: the ingest and reconcile functions' S3 requests are signed by their IAM users with the deployed policies.
  stack = await createTestStack({ enforced: true });
  const queues = await createQueue('ingest', { maxReceiveCount: 3 }, stack.sqs);
  ingestQueue = queues.queue;
  ingestDlq = queues.dlq as TestQueue;
  const manifestTable = await freshManifestTable(dynamoDbClient());
  sourceBucket = stack.sourceBucket;
  // As infra/ sets it on the ingest function: its own trigger's DLQ, the manifest table, the ingest queue.
  const env = {
    ...stack.env,
    [ENV.deadLetterQueue]: ingestDlq.url,
    [ENV.manifestTable]: manifestTable,
    [ENV.ingestQueue]: ingestQueue.url,
    [ENV.maxDeliveries]: '3',
    // The test's HTTP origin listens on 127.0.0.1, which an ingest refuses unless told otherwise (docs/ingest.md).
    [ENV.ingestAllowPrivateAddresses]: '127.0.0.1',
  };
  rt = createTestRuntime({ env }, stack.clients(), { logs });
  artefact = await validArtefact(11);
});
afterEach(expectNoAccessDenied);
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

async function keysUnder(prefix: string): Promise<string[]> {
  const out = await stack.s3.send(new ListObjectsV2Command({ Bucket: sourceBucket, Prefix: prefix }));
  return (out.Contents ?? []).map((o) => o.Key as string).sort();
}

async function enqueue(body: string): Promise<void> {
  await stack.sqs.send(new SendMessageCommand({ QueueUrl: ingestQueue.url, MessageBody: body }));
}

async function dlqBodies(): Promise<string[]> {
  const out = await stack.sqs.send(new ReceiveMessageCommand({ QueueUrl: ingestDlq.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
  return (out.Messages ?? []).map((m) => m.Body ?? '');
}

/** An HTTP origin on 127.0.0.1 answering every GET with `status` and `body`. */
async function origin(status: number, body: Uint8Array): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(status, { 'content-type': 'image/tiff', 'content-length': String(body.length) });
    res.end(Buffer.from(body));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/scene.tif`;
}

const handler = () => asFunction('ingest', createIngestHandler(rt));
const settled = () =>
  logs.map((l) => JSON.parse(l) as { event: string; reason?: string; key?: string }).filter((l) => l.event === 'ingest-settled');

describe('the AWS ingest function against moto and DynamoDB Local', () => {
  it('publishes an object:KEY artefact: staged, promoted under the scene prefix, one manifest row; a duplicate delivery is already published', async () => {
    await stack.s3.send(new PutObjectCommand({ Bucket: sourceBucket, Key: 'uploads/T31UDQ.tif', Body: artefact }));
    const body = toIngestMessage({
      kind: 'artefact',
      source: SOURCE,
      externalId: 'S2B_T31UDQ_20260612',
      href: 'object:uploads/T31UDQ.tif',
    });
    await enqueue(body);
    const first = await pollOnce(ingestQueue, handler());
    expect(first.event.Records).toHaveLength(1);
    expect(first.response?.batchItemFailures).toEqual([]);
    const rows = await rt.manifest?.find(SOURCE, 'S2B_T31UDQ_20260612');
    expect(rows?.map((r) => r.checksum)).toEqual([sha(artefact)]);
    const published = await keysUnder('incoming/');
    expect(published).toEqual([rows?.[0]?.key]);
    // The promoted key is under the scene prefix the trigger watches; the download stayed under staging/ (the lifecycle expires it).
    expect(rows?.[0]?.key.startsWith('incoming/')).toBe(true);
    expect((await keysUnder('staging/')).length).toBeGreaterThanOrEqual(1);
    expect(settled().at(-1)).toMatchObject({ reason: 'published', key: rows?.[0]?.key });

    // The same request delivered again (an SQS duplicate, or the CLI run twice): acked, no second object, no second row.
    await enqueue(body);
    const second = await pollOnce(ingestQueue, handler());
    expect(second.response?.batchItemFailures).toEqual([]);
    expect(settled().at(-1)).toMatchObject({ reason: 'already-published', key: rows?.[0]?.key });
    expect(await keysUnder('incoming/')).toEqual(published);
    expect(await rt.manifest?.find(SOURCE, 'S2B_T31UDQ_20260612')).toHaveLength(1);
    expect(await dlqBodies()).toEqual([]);
  });

  it('fetches an http(s) href from 127.0.0.1 and publishes it', async () => {
    const bytes = await validArtefact(12);
    await enqueue(toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'S2B_HTTP_1', href: await origin(200, bytes) }));
    const { response } = await pollOnce(ingestQueue, handler());
    expect(response?.batchItemFailures).toEqual([]);
    expect((await rt.manifest?.find(SOURCE, 'S2B_HTTP_1'))?.map((r) => r.checksum)).toEqual([sha(bytes)]);
  });

  it('settles a malformed message and a refused artefact in the ingest DLQ at once: one delivery each, never retried', async () => {
    const malformed = '{"type":"tessera.ingest","v":1,"source":"sentinel-2-l2a"}';
    await enqueue(malformed);
    const bad = await pollOnce(ingestQueue, handler());
    // Not in batchItemFailures: the handler put it in the DLQ itself and Lambda deletes the original.
    expect(bad.response?.batchItemFailures).toEqual([]);
    expect(bad.event.Records[0]?.attributes.ApproximateReceiveCount).toBe('1');
    expect(await dlqBodies()).toEqual([malformed]);

    const notRaster = toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'README', href: await origin(200, notARaster()) });
    await enqueue(notRaster);
    const refused = await pollOnce(ingestQueue, handler());
    expect(refused.response?.batchItemFailures).toEqual([]);
    expect(await dlqBodies()).toEqual([notRaster]);
    // Nothing was promoted or registered for it.
    expect(await rt.manifest?.find(SOURCE, 'README')).toEqual([]);
    // Nothing left on the ingest queue to redeliver.
    expect((await pollOnce(ingestQueue, handler())).event.Records).toEqual([]);
  });

  it('hands a transient failure (a 503 origin) back to SQS for a later attempt, not to the DLQ', async () => {
    await enqueue(
      toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'S2B_FLAKY', href: await origin(503, new Uint8Array(4)) }),
    );
    const { event, response } = await pollOnce(ingestQueue, handler());
    expect(response?.batchItemFailures).toEqual([{ itemIdentifier: event.Records[0]?.messageId }]);
    expect(await dlqBodies()).toEqual([]);
    expect(await rt.manifest?.find(SOURCE, 'S2B_FLAKY')).toEqual([]);
  });

  it('reconciles the promoted prefix with the manifest, both ways, from the scheduled function', async () => {
    const clean = await asFunction('reconcile', createReconcileHandler(rt))();
    expect(clean.objectsWithoutRow).toEqual([]);
    expect(clean.rowsWithoutObject).toEqual([]);
    expect(clean.rowsChecked).toBe(2);
    // An object under the prefix that no row names: what a promotion that crashed before its commit leaves.
    const orphan = `incoming/${SOURCE}/S2B_ORPHAN/${sha(artefact)}/data.tif`;
    await stack.s3.send(new PutObjectCommand({ Bucket: sourceBucket, Key: orphan, Body: artefact }));
    const report = await asFunction('reconcile', createReconcileHandler(rt))();
    expect(report.objectsWithoutRow).toEqual([orphan]);
  });
});
