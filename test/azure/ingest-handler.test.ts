import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BlobServiceClient } from '@azure/storage-blob';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { type AzureRuntime, azureClients, composeAzure } from '../../functions/azure/compose.js';
import { makeIngestHandler, makeReconcileHandler } from '../../functions/azure/handlers/ingest.handler.js';
import { toIngestMessage } from '../../shared/app/ingest.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { notARaster, validArtefact } from '../support/ingest-fixtures.js';
import { connectionString, freshQueue, freshTable } from './azurite.js';
import { invocationContext, runQueueHost, timerPayload } from './functions-host.js';
import { type TestStack, testStack } from './stack.js';

/**
 * The Azure ingest function (functions/azure/handlers/ingest.handler.ts)
 * driven the way the Functions host's queue listener drives it, against
 * Azurite: requests on an ingest queue with its `-poison` twin, staging and
 * promoted blobs in the sources container, the manifest in Table Storage.
 */

const SOURCE = 'sentinel-2-l2a';
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

let stack: TestStack;
let rt: AzureRuntime;
let queue: AzureQueueJobQueue;
let artefact: Uint8Array;
const servers: Server[] = [];

beforeAll(async () => {
  stack = await testStack();
  const manifest = await freshTable('manifest');
  ({ queue } = await freshQueue('ingest'));
  rt = composeAzure(
    // The test's HTTP origin listens on 127.0.0.1, which an ingest refuses unless told otherwise (docs/ingest.md).
    {
      ...stack.env,
      [ENV.manifestTable]: manifest.tableName,
      [ENV.ingestQueue]: queue.queueName,
      [ENV.ingestAllowPrivateAddresses]: '127.0.0.1',
    },
    {
      clients: azureClients(connectionString()),
      clock: stack.clock,
      owner: 'instance-1',
      telemetry: new JsonTelemetry(() => undefined, { clock: stack.clock }),
    },
  );
  artefact = await validArtefact(31);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

const sources = () => BlobServiceClient.fromConnectionString(connectionString()).getContainerClient(stack.sourceContainer);

async function keysUnder(prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const b of sources().listBlobsFlat({ prefix })) out.push(b.name);
  return out.sort();
}

async function origin(status: number, body: Uint8Array): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(status, { 'content-type': 'image/tiff', 'content-length': String(body.length) });
    res.end(Buffer.from(body));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/scene.tif`;
}

const host = () =>
  runQueueHost(
    queue,
    makeIngestHandler(() => rt),
    { functionName: 'ingest' },
  );

describe('the Azure ingest function against Azurite', () => {
  it('publishes an object:KEY artefact once; a duplicate delivery is already published and copies nothing', async () => {
    await sources().getBlockBlobClient('uploads/T31UDQ.tif').uploadData(Buffer.from(artefact));
    const body = toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'S2B_T31UDQ', href: 'object:uploads/T31UDQ.tif' });
    await queue.sendBatch([{ jobKey: '', body }]);
    const first = await host();
    expect(first.invocations.map((i) => [i.dequeueCount, i.result])).toEqual([[1, 'succeeded']]);
    const rows = await rt.manifest?.find(SOURCE, 'S2B_T31UDQ');
    expect(rows?.map((r) => r.checksum)).toEqual([sha(artefact)]);
    const published = await keysUnder('scenes/');
    expect(published).toEqual([rows?.[0]?.key]);

    await queue.sendBatch([{ jobKey: '', body }]);
    const second = await host();
    expect(second.invocations.map((i) => i.result)).toEqual(['succeeded']);
    expect(await keysUnder('scenes/')).toEqual(published);
    expect(await rt.manifest?.find(SOURCE, 'S2B_T31UDQ')).toHaveLength(1);
    // The invocation's log (the host's, through the InvocationContext) says why nothing was copied.
    expect(second.logs.some((l) => l.text.includes('"ingest-already-published"'))).toBe(true);
    expect(first.logs.some((l) => l.text.includes('"ingest-published"'))).toBe(true);
    expect(await queue.deadLetters()).toEqual([]);
  });

  it('moves a malformed request and a refused artefact to <queue>-poison itself at the first dequeue', async () => {
    const malformed = '{"type":"tessera.ingest","v":1}';
    const notRaster = toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'README', href: await origin(200, notARaster()) });
    await queue.sendBatch([{ jobKey: '', body: malformed }]);
    await queue.sendBatch([{ jobKey: '', body: notRaster }]);
    const run = await host();
    expect(run.invocations.map((i) => [i.dequeueCount, i.result])).toEqual([
      [1, 'succeeded'],
      [1, 'succeeded'],
    ]);
    const poisoned = (await queue.deadLetters()).map((m) => JSON.parse(m.body) as Record<string, unknown>);
    expect(poisoned).toHaveLength(2);
    expect(poisoned.some((m) => m.externalId === 'README')).toBe(true);
    expect(poisoned.some((m) => m.source === undefined)).toBe(true);
    expect(await rt.manifest?.find(SOURCE, 'README')).toEqual([]);
  });

  it('fails a transient failure (a 503 origin) so the host retries it, and only its count moves it to poison', async () => {
    const before = (await queue.deadLetters()).length;
    await queue.sendBatch([
      {
        jobKey: '',
        body: toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'FLAKY', href: await origin(503, new Uint8Array(4)) }),
      },
    ]);
    const run = await host();
    // Every dequeue up to the host's maxDequeueCount (5) fails; the host's own rule then moves it (functions-host.ts).
    expect(run.invocations.map((i) => i.result)).toEqual(Array(rt.host.maxDequeueCount).fill('failed'));
    expect(run.invocations.map((i) => i.dequeueCount)).toEqual([1, 2, 3, 4, 5].slice(0, rt.host.maxDequeueCount));
    expect((await queue.deadLetters()).length).toBe(before + 1);
  });

  it('reconciles the promoted prefix with the manifest on its timer, both ways', async () => {
    const orphan = `scenes/${SOURCE}/S2B_ORPHAN/${sha(artefact)}/data.tif`;
    await sources().getBlockBlobClient(orphan).uploadData(Buffer.from(artefact));
    const { context } = invocationContext('reconcile', 'timerTrigger');
    const report = await makeReconcileHandler(() => rt)(timerPayload(), context);
    expect(report).toMatchObject({ rowsChecked: 1, objectsWithoutRow: [orphan], rowsWithoutObject: [] });
  });
});
