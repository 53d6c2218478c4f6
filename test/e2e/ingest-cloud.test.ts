import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BlobServiceClient } from '@azure/storage-blob';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../cli/main.js';
import { createIngestHandler as createAwsIngestHandler } from '../../functions/aws/handlers/ingest.handler.js';
import type { AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { azureClients, composeAzure } from '../../functions/azure/compose.js';
import { makeIngestHandler as makeAzureIngestHandler } from '../../functions/azure/handlers/ingest.handler.js';
import { createIngestHandler as createGcpIngestHandler } from '../../functions/gcp/handlers/ingest.handler.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { awsEndpoints, dynamoDbClient, freshManifestTable } from '../aws/clients.js';
import { createQueue, createTestRuntime, createTestStack, emulatorClients, pollOnce, type TestQueue } from '../aws/stack.js';
import { connectionString, freshQueue, freshTable } from '../azure/azurite.js';
import { runQueueHost } from '../azure/functions-host.js';
import { testStack as azureTestStack } from '../azure/stack.js';
import { pullAll } from '../gcp/clients.js';
import { createGcpStack, type GcpTestStack, pubsubEvent } from '../gcp/stack.js';
import { freshJobId } from '../support/ids.js';
import { validArtefact } from '../support/ingest-fixtures.js';

/**
 * `tessera ingest --cloud aws|gcp|azure --outputs FILE` end to end against the
 * emulators posing as a deployed stack: the outputs file names the emulator
 * stack's ingest queue (with the testing-only `emulator` endpoints, as in
 * `tessera verify`), the CLI enqueues, the project's own ingest function runs
 * the delivery as its trigger would, and the manifest then holds the row. The
 * same command run again is "already published": one row, one promoted object.
 */

const SOURCE = 'sentinel-2-l2a';
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const dir = mkdtempSync(join(tmpdir(), 'tessera-ingest-cloud-'));
const servers: Server[] = [];
let artefact: Uint8Array;
let href: string;
/** The functions' opt-in for the artefact's origin on 127.0.0.1, which an ingest refuses by default (docs/ingest.md). */
const LOCAL_ORIGIN = { [ENV.ingestAllowPrivateAddresses]: '127.0.0.1' };

beforeAll(async () => {
  artefact = await validArtefact(41);
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'image/tiff', 'content-length': String(artefact.length) });
    res.end(Buffer.from(artefact));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  href = `http://127.0.0.1:${(server.address() as AddressInfo).port}/T31UDQ.tif`;
});
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

function outputsFile(name: string, outputs: Record<string, unknown>): string {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(outputs));
  return path;
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main(args, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), cwd: dir });
  return { code, stdout, stderr };
}

const ingestArgs = (cloud: string, outputs: string, itemId: string) => [
  'ingest',
  '--cloud',
  cloud,
  '--outputs',
  outputs,
  '--href',
  href,
  '--source',
  SOURCE,
  '--item-id',
  itemId,
  '--json',
];

describe('tessera ingest --cloud aws, against moto and DynamoDB Local posing as a stack', () => {
  // The CLI uses the default credential chain; the emulators take any key (as in test/e2e/verify.test.ts).
  beforeAll(() => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'tesseratest');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'tesseratest');
    vi.stubEnv('AWS_PROFILE', '');
  });
  afterAll(() => {
    vi.unstubAllEnvs();
  });

  it('enqueues on the ingest queue; the ingest function publishes once; a second request is already published', async () => {
    const stack = await createTestStack();
    const { queue, dlq } = await createQueue('ingest', { maxReceiveCount: 3 });
    const manifestTable = await freshManifestTable(dynamoDbClient());
    const rt = createTestRuntime(
      { env: { ...stack.env, ...LOCAL_ORIGIN, [ENV.manifestTable]: manifestTable, [ENV.deadLetterQueue]: (dlq as TestQueue).url } },
      emulatorClients(),
    );
    const e = awsEndpoints();
    const outputs = outputsFile('aws', { cloud: 'aws', region: e.region, ingestQueueUrl: queue.url, emulator: { sqs: e.moto } });

    const first = await cli(ingestArgs('aws', outputs, 'S2B_AWS_1'));
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const printed = JSON.parse(first.stdout) as { enqueued: boolean; queue: string; messageId: string; request: { externalId: string } };
    expect(printed).toMatchObject({ enqueued: true, cloud: 'aws', queue: `sqs:${queue.url}`, request: { externalId: 'S2B_AWS_1', href } });
    const run = await pollOnce(queue, createAwsIngestHandler(rt));
    expect(run.event.Records.map((r) => r.messageId)).toEqual([printed.messageId]);
    expect(run.response?.batchItemFailures).toEqual([]);
    const rows = await rt.manifest?.find(SOURCE, 'S2B_AWS_1');
    expect(rows?.map((r) => r.checksum)).toEqual([sha(artefact)]);

    expect((await cli(ingestArgs('aws', outputs, 'S2B_AWS_1'))).code).toBe(0);
    const logs: string[] = [];
    const again = createTestRuntime({ env: { ...stack.env, ...LOCAL_ORIGIN, [ENV.manifestTable]: manifestTable } }, emulatorClients(), {
      logs,
    });
    expect((await pollOnce(queue, createAwsIngestHandler(again))).response?.batchItemFailures).toEqual([]);
    expect(logs.some((l) => l.includes('"ingest-already-published"'))).toBe(true);
    expect(await rt.manifest?.find(SOURCE, 'S2B_AWS_1')).toHaveLength(1);
  });

  it("refuses a local path (no function can read it), another cloud's outputs, and a stack without an ingest queue, before sending", async () => {
    const e = awsEndpoints();
    const outputs = outputsFile('aws-noq', { cloud: 'aws', region: e.region, emulator: { sqs: e.moto } });
    const local = await cli([
      'ingest',
      '--cloud',
      'aws',
      '--outputs',
      outputs,
      '--href',
      './T31UDQ.tif',
      '--source',
      SOURCE,
      '--item-id',
      'X',
    ]);
    expect(local.code).toBe(1);
    expect(local.stderr).toContain('cannot read the local path');
    const noQueue = await cli(ingestArgs('aws', outputs, 'X'));
    expect(noQueue.code).toBe(1);
    expect(noQueue.stderr).toContain('has no ingestQueueUrl');
    const wrongCloud = await cli(ingestArgs('gcp', outputs, 'X'));
    expect(wrongCloud.stderr).toContain('is a "aws" stack, but --cloud gcp was given');
    expect((await cli(['ingest', '--stack', 'x', '--href', href, '--source', SOURCE, '--item-id', 'X'])).stderr).toContain(
      '--stack and --outputs go with --cloud',
    );
  });
});

describe('tessera ingest --cloud gcp, against the Pub/Sub, Firestore and fake-gcs-server emulators posing as a stack', () => {
  let s: GcpTestStack;
  beforeAll(async () => {
    s = await createGcpStack();
  });
  afterAll(async () => {
    await s.close();
  });

  it('publishes on the ingest topic; the pushed function publishes once; a second request is already published', async () => {
    const [topic] = await s.clients.pubsub.createTopic(`ingest-${freshJobId().slice(0, 10)}`);
    const [sub] = await topic.createSubscription(`ingest-sub-${freshJobId().slice(0, 10)}`);
    const outputs = outputsFile('gcp', {
      cloud: 'gcp',
      project: s.endpoints.projectId,
      ingestTopic: topic.name.split('/').at(-1),
      emulator: { pubsub: s.endpoints.pubsub },
    });
    const rt = s.runtime({ role: 'ingest', env: LOCAL_ORIGIN });
    for (const round of [1, 2]) {
      const sent = await cli(ingestArgs('gcp', outputs, 'S2B_GCP_1'));
      expect(sent.code, sent.stderr).toBe(0);
      const [m] = await pullAll(s.clients.pubsub, sub.name);
      if (!m) throw new Error('the request did not reach the ingest topic');
      expect(m.messageId).toBe((JSON.parse(sent.stdout) as { messageId: string }).messageId);
      const out = await createGcpIngestHandler(rt)(pubsubEvent(m, sub.name));
      expect(out).toMatchObject({
        kind: 'ack',
        outcomes: [{ published: round === 1, reason: round === 1 ? 'published' : 'already-published', checksum: sha(artefact) }],
      });
    }
    expect((await rt.manifest?.find(SOURCE, 'S2B_GCP_1'))?.map((r) => r.checksum)).toEqual([sha(artefact)]);
  });
});

describe('tessera ingest --cloud azure, against Azurite posing as a stack', () => {
  it('puts the request on the ingest queue; the queue-triggered function publishes once; a second request is already published', async () => {
    const stack = await azureTestStack();
    const manifest = await freshTable('manifest');
    const { queue }: { queue: AzureQueueJobQueue } = await freshQueue('ingest');
    const rt = composeAzure(
      { ...stack.env, ...LOCAL_ORIGIN, [ENV.manifestTable]: manifest.tableName },
      { clients: azureClients(connectionString()), clock: stack.clock, telemetry: new JsonTelemetry(() => undefined) },
    );
    const outputs = outputsFile('azure', {
      cloud: 'azure',
      storageAccount: 'devstoreaccount1',
      ingestQueue: queue.queueName,
      emulator: { connectionString: connectionString() },
    });
    for (const round of [1, 2]) {
      const sent = await cli(ingestArgs('azure', outputs, 'S2B_AZ_1'));
      expect(sent.code, sent.stderr).toBe(0);
      const run = await runQueueHost(
        queue,
        makeAzureIngestHandler(() => rt),
        { functionName: 'ingest' },
      );
      expect(run.invocations.map((i) => [i.deliveryId, i.result])).toEqual([
        [(JSON.parse(sent.stdout) as { messageId: string }).messageId, 'succeeded'],
      ]);
      expect(run.logs.some((l) => l.text.includes(round === 1 ? '"ingest-published"' : '"ingest-already-published"'))).toBe(true);
    }
    const rows = await rt.manifest?.find(SOURCE, 'S2B_AZ_1');
    expect(rows?.map((r) => r.checksum)).toEqual([sha(artefact)]);
    const promoted: string[] = [];
    for await (const b of BlobServiceClient.fromConnectionString(connectionString())
      .getContainerClient(stack.sourceContainer)
      .listBlobsFlat({ prefix: 'scenes/' }))
      promoted.push(b.name);
    expect(promoted).toEqual([rows?.[0]?.key]);
  });
});
