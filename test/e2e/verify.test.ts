import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QueueServiceClient } from '@azure/storage-queue';
import { afterAll, afterEach, beforeEach, describe, expect, inject, it, vi } from 'vitest';
import { main } from '../../cli/main.js';
import { createMosaicHandler } from '../../functions/aws/handlers/mosaic.handler.js';
import { createSceneHandler } from '../../functions/aws/handlers/scene.handler.js';
import { createTileHandler } from '../../functions/aws/handlers/tile.handler.js';
import { AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { azureClients, composeAzure } from '../../functions/azure/compose.js';
import { makeMosaicHandler } from '../../functions/azure/handlers/mosaic.handler.js';
import { makeSceneHandler } from '../../functions/azure/handlers/scene.handler.js';
import { makeTileHandler } from '../../functions/azure/handlers/tile.handler.js';
import { createMosaicHandler as createGcpMosaicHandler } from '../../functions/gcp/handlers/mosaic.handler.js';
import { createSceneHandler as createGcpSceneHandler, type StorageObjectData } from '../../functions/gcp/handlers/scene.handler.js';
import { createTileHandler as createGcpTileHandler } from '../../functions/gcp/handlers/tile.handler.js';
import { parseStackConfig } from '../../infra/common/config.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { LIVE_SCENARIOS, type VerifyReport } from '../../shared/app/verify/verify-stack.js';
import { canonicalJson } from '../../shared/domain/canonical-json.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import type { FunctionRole } from '../../shared/domain/key-layout.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { awsEndpoints, dynamoDbClient, freshBucket, freshClaimsTable, s3Client } from '../aws/clients.js';
import { createTestStack, drain, TEST_SOURCE_PREFIX, type TestStack } from '../aws/stack.js';
import { connectionString, freshContainer, freshName, freshTable } from '../azure/azurite.js';
import { blobCreatedEvent, invocationContext, runQueueHost, timerPayload } from '../azure/functions-host.js';
import { TEST_PARAMS as AZURE_PARAMS } from '../azure/stack.js';
import { createGcpStack, storageEvent } from '../gcp/stack.js';
import { asRole } from '../support/function-role.js';
import { requireEndpoints } from '../support/global-setup.js';
import type { Cloud } from '../support/iam/access.js';
import type { AccessCheck } from '../support/iam/access-check.js';
import { registerResources } from '../support/iam/resources.js';
import { IamRun } from '../support/iam/run.js';

/**
 * `tessera verify --outputs FILE` against the AWS emulators posing as a
 * deployed stack: the outputs name the emulator stack's buckets, table and
 * queues (with the testing-only `emulator` endpoints), and the project's real
 * handlers run as "the deployed functions", pumped by this test the way the
 * Lambda event source mappings and the schedule would: scene queue -> scene
 * handler, tile queue -> tile handler, then a mosaic sweep. verify itself
 * never runs a handler. Like every emulator suite, it fails (never skips)
 * when the emulators are not running; `npm test` runs it in its first pass.
 */

/**
 * The enforced-IAM check of the green verify runs (docs/iam.md): each deployed function runs as its role,
 * verify as `verify`, and every request they make is checked against the grants the Pulumi program deploys
 * for a stack with that source prefix. (The runs that point verify at a bucket or table outside the stack
 * are not checked: reaching outside the stack is what they are about, and IAM would refuse it.)
 */
const iamRuns = new Map<string, IamRun>();
function iamRunFor(sourcePrefix: string): IamRun {
  let run = iamRuns.get(sourcePrefix);
  if (run === undefined) {
    run = new IamRun({ config: { 'tessera:sourcePrefix': sourcePrefix } });
    iamRuns.set(sourcePrefix, run);
  }
  return run;
}

interface IamWatch {
  readonly run: IamRun;
  readonly check: AccessCheck;
  findings?: readonly string[];
}

/** Start checking `cloud`'s roles (before its functions start, so their first requests are seen). */
async function watchIam(cloud: Cloud, sourcePrefix: string): Promise<IamWatch> {
  const run = iamRunFor(sourcePrefix);
  return { run, check: await run.start(cloud) };
}

/** Stop checking (once; in a `finally`, after the functions stopped) and keep the findings. */
function stopIam(watch: IamWatch): readonly string[] {
  watch.findings ??= watch.run.finish(watch.check);
  return watch.findings;
}

/** Nothing outside the grants, and the check saw the roles at work (an empty check proves nothing). */
function expectWithinGrants(watch: IamWatch): void {
  const findings = stopIam(watch);
  expect(findings, `accesses of the ${watch.check.cloud} functions and verify outside their deployed grants`).toEqual([]);
  expect([...watch.check.tally.accessesByRole.keys()].sort(), 'roles seen at work').toEqual(['mosaic', 'scene', 'tile', 'verify']);
}

afterAll(() => {
  for (const run of iamRuns.values()) for (const line of run.summary()) process.stderr.write(`[verify] iam ${line}\n`);
});

/** A handler run as the function the stack deploys it as (its requests are that role's). */
function asFunction<A extends unknown[], R>(role: FunctionRole, handler: (...args: A) => R): (...args: A) => R {
  return (...args) => asRole(role, () => handler(...args));
}

const queueName = (url: string) => url.split('/').pop() ?? url;

function registerAwsStack(stack: TestStack): void {
  registerResources({
    [stack.sourceBucket]: 'sourceBucket',
    [stack.outputBucket]: 'outputBucket',
    [stack.claimsTable]: 'claimsTable',
    [queueName(stack.tiles.url)]: 'tileQueue',
    [queueName(stack.tilesDlq.url)]: 'deadLetterQueue',
    [queueName(stack.scenes.url)]: 'sceneQueue',
    [queueName(stack.scenesDlq.url)]: 'sceneDeadLetterQueue',
  });
}

function outputsOf(stack: TestStack, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const e = awsEndpoints();
  return {
    cloud: 'aws',
    region: e.region,
    platform: 'lambda',
    functionTimeoutSeconds: 900,
    leaseSeconds: 960,
    sourcePrefix: 'incoming/',
    sourceBucket: stack.sourceBucket,
    outputBucket: stack.outputBucket,
    claimsTable: stack.claimsTable,
    tileQueueUrl: stack.tiles.url,
    tileDeadLetterQueueUrl: stack.tilesDlq.url,
    sceneQueueUrl: stack.scenes.url,
    emulator: { s3: e.moto, sqs: e.moto, dynamodb: e.dynamodb },
    ...overrides,
  };
}

/** The deployed functions: poll both queues and run the sweep until stopped. */
function deployedFunctions(stack: TestStack) {
  const rt = stack.runtime({ owner: 'deployed-lambda' });
  // The event source mappings and the schedule are the platform's; each handler runs as its function.
  const scene = asFunction('scene', createSceneHandler(rt));
  const tile = asFunction('tile', createTileHandler(rt));
  const mosaic = asFunction('mosaic', createMosaicHandler(rt));
  const tick = { 'detail-type': 'Scheduled Event', source: 'aws.events' } as never;
  let running = true;
  const loop = (async () => {
    while (running) {
      await drain(stack.scenes, scene, { emptyPolls: 1, maxPolls: 5 });
      await drain(stack.tiles, tile, { emptyPolls: 1, maxPolls: 10 });
      await mosaic(tick);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    telemetry: rt.backend.telemetry,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

async function verify(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  // `tessera verify` runs under its own identity (the verify role).
  const code = await asRole('verify', () =>
    main(['verify', ...args], { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), cwd: process.cwd() }),
  );
  return { code, stdout, stderr };
}

function writeOutputs(outputs: unknown, name = 'aws-emulator.json'): string {
  const file = join(mkdtempSync(join(tmpdir(), 'tessera-verify-')), name);
  writeFileSync(file, typeof outputs === 'string' ? outputs : JSON.stringify(outputs));
  return file;
}

describe('tessera verify against the AWS emulators as a deployed stack', () => {
  // The default credential chain reads these, as it reads a CI job's; the emulators accept any.
  beforeEach(() => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'tesseratest');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'tesseratest');
    vi.stubEnv('AWS_PROFILE', '');
  });
  afterEach(() => vi.unstubAllEnvs());

  it('passes smoke, replay and the live parity scenarios, and the handlers saw the duplicate rejected at its claim', async () => {
    const stack = await createTestStack();
    registerAwsStack(stack);
    const iam = await watchIam('aws', TEST_SOURCE_PREFIX);
    const fns = deployedFunctions(stack);
    try {
      const r = await verify(['--outputs', writeOutputs(outputsOf(stack)), '--json', '--timeout', '60']);
      const report = JSON.parse(r.stdout) as VerifyReport;
      expect(report, r.stderr).toMatchObject({
        stack: 'aws-emulator',
        cloud: 'aws',
        smoke: { pass: true, tiles: 4 },
        replay: { pass: true },
      });
      expect(report.parity.map((p) => [p.scenario, p.pass])).toEqual([
        ['16 concurrent claimers, one winner', true],
        ['16 create-only writers of one output key', true],
        ['odd keys (+, %2F, space, unicode) round-trip', true],
        ['poison tile message settled into the DLQ', true],
        ['backfill skip fills a gap, leaves committed tiles untouched', true],
        ['backfill new-key writes beside the old tiles', true],
        ['backfill overwrite repairs at the seen version, dead-letters a changed tile (pyramids: refused)', true],
      ]);
      // The poison message and the stale repair were removed from the DLQ under their receipts; nothing is left.
      expect(report.cleanup).toMatchObject({ pass: true, deadLetters: 2, left: [] });
      expect(r.code).toBe(0);
      expect(r.stderr).toContain('smoke: uploading incoming/tessera-verify-');
      // The re-delivered tile message, then the 4 tile jobs the duplicate scene event fanned out again,
      // reached the tile handler through the queues and stopped at their claims.
      expect(fns.telemetry.counters()['claim-rejected']).toBeGreaterThanOrEqual(1 + 4);
    } finally {
      await fns.stop();
      stopIam(iam);
    }
    expectWithinGrants(iam);
  }, 60_000);

  it('fails (exit 1) when the outputs name another output bucket than the one the functions write', async () => {
    const stack = await createTestStack();
    const fns = deployedFunctions(stack);
    try {
      const elsewhere = await freshBucket(s3Client(), 'elsewhere');
      const r = await verify(['--outputs', writeOutputs(outputsOf(stack, { outputBucket: elsewhere })), '--timeout', '3']);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/^smoke\s+FAIL/m);
      expect(r.stdout).toContain('VerifyTimeoutError');
    } finally {
      await fns.stop();
    }
  }, 60_000);

  it('fails replay (exit 1) when the outputs name another claims table than the one the functions commit to', async () => {
    const stack = await createTestStack();
    const fns = deployedFunctions(stack);
    try {
      const elsewhere = await freshClaimsTable(dynamoDbClient(), 'elsewhere');
      const r = await verify(['--outputs', writeOutputs(outputsOf(stack, { claimsTable: elsewhere })), '--json', '--timeout', '30']);
      expect(r.code).toBe(1);
      const report = JSON.parse(r.stdout) as VerifyReport;
      expect(report).toMatchObject({
        smoke: { pass: true },
        replay: { pass: false, detail: expect.stringMatching(/is absent, not COMMITTED/) },
      });
      // The backfills build on a replayed scene: not run, and failed, rather than left to time out on the wrong table.
      expect(report.parity.filter((p) => p.scenario.startsWith('backfill')).map((p) => [p.pass, p.detail])).toEqual(
        Array(3).fill([false, 'not run: the replay failed, so the scene it would backfill is not proven']),
      );
    } finally {
      await fns.stop();
    }
  }, 60_000);

  it('refuses a bad outputs file with a typed error and exit 2', async () => {
    expect(await verify(['--outputs', writeOutputs('not json')])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('is not JSON'),
    });
    const noTable = await verify([
      '--outputs',
      writeOutputs({ cloud: 'aws', region: 'us-east-1', leaseSeconds: 60, functionTimeoutSeconds: 30 }),
    ]);
    expect(noTable).toMatchObject({ code: 2, stderr: expect.stringContaining('has no sourceBucket') });
    expect(await verify(['--outputs', writeOutputs({ cloud: 'ibm' })])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('not one of aws, gcp, azure'),
    });
    expect(await verify([])).toMatchObject({ code: 2, stderr: expect.stringContaining('name a stack with --stack') });
    expect((await verify(['--help'])).stdout).toContain('tessera verify: check a deployed stack');
  });
});

/**
 * An Azure stack on Azurite, shaped like infra/'s, with the real handlers as
 * its function app: this test plays Event Grid (a BlobCreated event on the
 * scene queue for every new source blob), the queue triggers (runQueueHost)
 * and the mosaic timer.
 */
async function azureEmulatorStack(params: ProcessingParams = AZURE_PARAMS) {
  const [sources, outputs, table] = await Promise.all([freshContainer('src'), freshContainer('out'), freshTable('claims')]);
  const tileQueue = freshName('tiles');
  const sceneQueue = freshName('scenes');
  const service = QueueServiceClient.fromConnectionString(connectionString());
  await Promise.all(
    [tileQueue, sceneQueue].flatMap((q) => [service.getQueueClient(q).create(), service.getQueueClient(`${q}-poison`).create()]),
  );
  const env: Record<string, string> = {
    [ENV.platform]: 'azure-consumption',
    [ENV.claimsTable]: table.tableName,
    [ENV.sourceBucket]: sources.containerName,
    [ENV.outputBucket]: outputs.containerName,
    [ENV.tileQueue]: tileQueue,
    [ENV.sourcePrefix]: 'scenes/',
    [ENV.sourceSuffix]: '.tif',
    [ENV.params]: canonicalJson(params),
  };
  registerResources({
    [sources.containerName]: 'sourceBucket',
    [outputs.containerName]: 'outputBucket',
    [table.tableName]: 'claimsTable',
    [tileQueue]: 'tileQueue',
    [`${tileQueue}-poison`]: 'deadLetterQueue',
    [sceneQueue]: 'sceneQueue',
    [`${sceneQueue}-poison`]: 'sceneDeadLetterQueue',
  });
  const clients = azureClients(connectionString());
  const telemetry = new JsonTelemetry();
  const rt = composeAzure(env, { clients, owner: 'deployed-function-app', telemetry });
  const scenes = AzureQueueJobQueue.onAccount(clients.queue, sceneQueue);
  const tiles = AzureQueueJobQueue.onAccount(clients.queue, tileQueue);
  const blobEndpoint = requireEndpoints(inject('emulators'), 'azure').blob;
  // The Functions host's dequeues and timer are the platform's; each handler runs as its function.
  const onScene = asFunction(
    'scene',
    makeSceneHandler(() => rt),
  );
  const onTile = asFunction(
    'tile',
    makeTileHandler(() => rt),
  );
  const onTimer = asFunction(
    'mosaic',
    makeMosaicHandler(() => rt),
  );
  const seen = new Set<string>();
  let running = true;
  const loop = (async () => {
    while (running) {
      // Event Grid: one BlobCreated event per new source blob.
      for await (const h of rt.backend.sources.list('scenes/')) {
        if (seen.has(h.key)) continue;
        seen.add(h.key);
        const event = blobCreatedEvent(blobEndpoint, sources.containerName, h.key, h.version, h.size);
        await scenes.sendBatch([{ jobKey: `event:${h.key}`, body: JSON.stringify(event) }]);
      }
      await runQueueHost(scenes, onScene, { functionName: 'scene' });
      await runQueueHost(tiles, onTile, { functionName: 'tile' });
      await onTimer(timerPayload(), invocationContext('mosaic', 'timerTrigger').context);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const outputsFile = {
    cloud: 'azure',
    region: 'westeurope',
    platform: 'azure-consumption',
    plan: 'consumption',
    functionTimeoutSeconds: 600,
    leaseSeconds: 660,
    sourcePrefix: 'scenes/',
    storageAccount: 'devstoreaccount1',
    sourceContainer: sources.containerName,
    outputContainer: outputs.containerName,
    claimsTable: table.tableName,
    tileQueue,
    poisonQueue: `${tileQueue}-poison`,
    sceneQueue,
    emulator: { connectionString: connectionString() },
  };
  return {
    outputsFile,
    telemetry,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

describe('tessera verify against Azurite as a deployed Azure stack', () => {
  it('passes smoke, replay and the live parity scenarios; the duplicate stopped at its claim', async () => {
    const iam = await watchIam('azure', 'scenes/');
    const stack = await azureEmulatorStack();
    try {
      const r = await verify(['--outputs', writeOutputs(stack.outputsFile, 'azure-emulator.json'), '--json', '--timeout', '60']);
      const report = JSON.parse(r.stdout) as VerifyReport;
      expect(report, r.stderr).toMatchObject({
        stack: 'azure-emulator',
        cloud: 'azure',
        smoke: { pass: true, tiles: 9 },
        replay: { pass: true },
      });
      expect(report.parity.filter((p) => !p.pass)).toEqual([]);
      expect(report.parity).toHaveLength(LIVE_SCENARIOS.length);
      expect(report.cleanup).toMatchObject({ pass: true, deadLetters: 2, left: [] });
      expect(r.code).toBe(0);
      // The tile message and the 9 jobs of the duplicate BlobCreated event, each stopped at its claim.
      expect(stack.telemetry.counters()['claim-rejected']).toBeGreaterThanOrEqual(1 + 9);
    } finally {
      await stack.stop();
      stopIam(iam);
    }
    expectWithinGrants(iam);
  }, 60_000);
});

/**
 * A GCP stack in the emulators (fake-gcs-server, Google's Firestore and
 * Pub/Sub emulators), shaped like infra/'s, with the real handlers as its
 * functions: this test plays Eventarc (a finalized event per new source
 * object, the tile topic's push subscription, here pulled) and Cloud
 * Scheduler (a mosaic sweep over HTTP). verify opens its own tap
 * subscriptions on the tile and dead-letter topics, as it does on GCP.
 */
async function gcpEmulatorStack(params?: ProcessingParams) {
  const stack = await createGcpStack(params === undefined ? {} : { params });
  const topic = (name: string | undefined) => name?.split('/').pop() ?? '';
  registerResources({
    [stack.sourceBucket]: 'sourceBucket',
    [stack.outputBucket]: 'outputBucket',
    [stack.claimsCollection]: 'claimsTable',
    [stack.manifestCollection]: 'manifestTable',
    [topic(stack.env[ENV.tileQueue])]: 'tileQueue',
    [topic(stack.tileSubscription)]: 'tileQueue',
    [topic(stack.env[ENV.deadLetterQueue])]: 'deadLetterQueue',
    [topic(stack.deadLetterSubscription)]: 'deadLetterQueue',
  });
  const scene = stack.runtime({ role: 'scene', owner: 'deployed-scene' });
  const tile = stack.runtime({ role: 'tile', owner: 'deployed-tile' });
  const mosaic = stack.runtime({ role: 'mosaic', owner: 'deployed-mosaic' });
  // Eventarc, the push subscription and Cloud Scheduler are the platform's; each handler runs as its function.
  const onScene = asFunction('scene', createGcpSceneHandler(scene));
  const onTile = asFunction('tile', createGcpTileHandler(tile));
  const onSweep = asFunction('mosaic', createGcpMosaicHandler(mosaic));
  const response = { status: () => response, json: () => response, set: () => response };
  const seen = new Set<string>();
  let running = true;
  const loop = (async () => {
    while (running) {
      // Eventarc: one finalized event per new object generation under the source prefix.
      const [files] = await stack.clients.storage.bucket(stack.sourceBucket).getFiles({ prefix: 'incoming/' });
      for (const f of files) {
        const id = `${f.name}#${String(f.metadata.generation)}`;
        if (seen.has(id)) continue;
        seen.add(id);
        await onScene(storageEvent(f.metadata as StorageObjectData));
      }
      // The tile topic's subscription, pushed to the tile function (a throw would be a redelivery; none is expected).
      for (const event of await stack.tileEvents()) await onTile(event);
      await onSweep({ method: 'POST', body: {} } as never, response as never);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const outputsFile = {
    cloud: 'gcp',
    region: 'europe-west1',
    platform: 'gcf2-event',
    project: stack.endpoints.projectId,
    functionTimeoutSeconds: 540,
    leaseSeconds: 840,
    sourcePrefix: 'incoming/',
    sourceBucket: stack.sourceBucket,
    outputBucket: stack.outputBucket,
    claimsCollection: stack.claimsCollection,
    tileTopic: stack.env[ENV.tileQueue],
    deadLetterTopic: stack.env[ENV.deadLetterQueue],
    emulator: { gcs: stack.endpoints.gcs, firestore: stack.endpoints.firestore, pubsub: stack.endpoints.pubsub },
  };
  return {
    stack,
    outputsFile,
    telemetry: tile.backend.telemetry,
    stop: async () => {
      running = false;
      await loop;
      await stack.close();
    },
  };
}

describe('tessera verify against the GCP emulators as a deployed stack', () => {
  it('passes smoke, replay, the live parity scenarios and the backfill policies, and cleans up after itself', async () => {
    const iam = await watchIam('gcp', 'incoming/');
    const gcp = await gcpEmulatorStack();
    try {
      const r = await verify([
        '--outputs',
        writeOutputs(gcp.outputsFile, 'gcp-emulator.json'),
        '--json',
        '--timeout',
        '60',
        '--quiet',
        '2',
      ]);
      const report = JSON.parse(r.stdout) as VerifyReport;
      expect(report, r.stderr).toMatchObject({
        stack: 'gcp-emulator',
        cloud: 'gcp',
        smoke: { pass: true, tiles: 4 },
        replay: { pass: true },
      });
      expect(report.parity.filter((p) => !p.pass)).toEqual([]);
      expect(report.parity.map((p) => p.scenario)).toEqual(LIVE_SCENARIOS.map((s) => s.name));
      expect(report.cleanup).toMatchObject({ pass: true, claimRows: expect.any(Number) });
      expect(r.code).toBe(0);
      // The replayed tile message, then the 4 jobs of the scene's re-published fan-out, stopped at their claims.
      expect(gcp.telemetry.counters()['claim-rejected']).toBeGreaterThanOrEqual(1 + 4);
      // Nothing of the run is left in the buckets or the claims collection, and verify's taps are gone.
      const [sources] = await gcp.stack.clients.storage.bucket(gcp.stack.sourceBucket).getFiles();
      expect(sources.map((f) => f.name)).toEqual([]);
      const [outputs] = await gcp.stack.clients.storage.bucket(gcp.stack.outputBucket).getFiles();
      expect(outputs.map((f) => f.name).filter((k) => !k.startsWith('index/mosaic-sweep'))).toEqual([]);
      const rows = await gcp.stack.clients.firestore.collection(gcp.stack.claimsCollection).get();
      expect(rows.docs.map((d) => d.id)).toEqual([]);
      const [subscriptions] = await gcp.stack.clients.pubsub.getSubscriptions();
      expect(subscriptions.map((x) => x.name).filter((n) => n.includes('tessera-verify-'))).toEqual([]);
    } finally {
      await gcp.stop();
      stopIam(iam);
    }
    expectWithinGrants(iam);
  }, 120_000);
});

describe('tessera verify against a GCP stack it cannot open taps on', () => {
  it('fails every check with the reason (exit 1) and writes nothing when the tile topic does not exist', async () => {
    const gcp = await createGcpStack();
    try {
      const outputs = {
        cloud: 'gcp',
        region: 'europe-west1',
        platform: 'gcf2-event',
        project: gcp.endpoints.projectId,
        functionTimeoutSeconds: 540,
        leaseSeconds: 840,
        sourcePrefix: 'incoming/',
        sourceBucket: gcp.sourceBucket,
        outputBucket: gcp.outputBucket,
        claimsCollection: gcp.claimsCollection,
        tileTopic: `projects/${gcp.endpoints.projectId}/topics/no-such-topic`,
        deadLetterTopic: gcp.env[ENV.deadLetterQueue],
        emulator: { gcs: gcp.endpoints.gcs, firestore: gcp.endpoints.firestore, pubsub: gcp.endpoints.pubsub },
      };
      const r = await verify(['--outputs', writeOutputs(outputs, 'gcp-broken.json'), '--json', '--timeout', '5']);
      expect(r.code).toBe(1);
      const report = JSON.parse(r.stdout) as VerifyReport;
      expect(report.smoke).toMatchObject({
        pass: false,
        detail: expect.stringMatching(/^not run: verify could not prepare its checks: .*/),
      });
      expect(report.parity.every((p) => !p.pass)).toBe(true);
      const [sources] = await gcp.clients.storage.bucket(gcp.sourceBucket).getFiles();
      expect(sources).toEqual([]);
    } finally {
      await gcp.close();
    }
  });
});

describe('tessera verify over three stacks', () => {
  beforeEach(() => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'tesseratest');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'tesseratest');
    vi.stubEnv('AWS_PROFILE', '');
  });
  afterEach(() => vi.unstubAllEnvs());

  it('prints one matrix, a column per stack (AWS, GCP, Azure), every row ok, exit 0', async () => {
    const watches = [await watchIam('aws', TEST_SOURCE_PREFIX), await watchIam('gcp', 'incoming/'), await watchIam('azure', 'scenes/')];
    const aws = await createTestStack();
    registerAwsStack(aws);
    const awsFns = deployedFunctions(aws);
    const gcp = await gcpEmulatorStack();
    const azure = await azureEmulatorStack();
    try {
      const r = await verify([
        ...['--outputs', writeOutputs(outputsOf(aws), 'aws-emulator.json')],
        ...['--outputs', writeOutputs(gcp.outputsFile, 'gcp-emulator.json')],
        ...['--outputs', writeOutputs(azure.outputsFile, 'azure-emulator.json')],
        ...['--timeout', '60', '--quiet', '2'],
      ]);
      const lines = r.stdout.split('\n');
      expect(lines[0], r.stderr).toMatch(/^scenario\s+aws-emulator \(aws\)\s+gcp-emulator \(gcp\)\s+azure-emulator \(azure\)$/);
      const rows = lines.slice(1, lines.indexOf(''));
      // smoke, replay, every live scenario, cleanup: a row each, ok in all three columns.
      expect(rows).toHaveLength(2 + LIVE_SCENARIOS.length + 1);
      for (const row of rows) expect(row).toMatch(/\sok\s+ok\s+ok$/);
      expect(r.stdout).not.toContain('failures:');
      expect(r.code).toBe(0);
    } finally {
      await Promise.all([awsFns.stop(), gcp.stop(), azure.stop()]);
      for (const w of watches) stopIam(w);
    }
    for (const w of watches) expectWithinGrants(w);
  }, 180_000);
});

/**
 * The processing parameters of a stack configured with `pulumi config set` (infra/common/config.ts reads them as
 * `pulumi up` does): here a zoom range, `tessera:zoom 13-15` of WebMercatorQuad, and a tile format. The smoke scene
 * (96 x 80 px at 10 m) makes 4 tiles at zoom 15, 2 at 14 and 1 at 13: parents with two children and a root.
 */
function configuredParams(config: Record<string, string>): ProcessingParams {
  const values = { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1', ...config };
  return parseStackConfig(values, { stack: 'verify-pyramid', defaultArchiveDir: 'dist' }).params;
}

const PYRAMID = { 'tessera:tms': 'WebMercatorQuad', 'tessera:zoom': '13-15', 'tessera:tilePx': '256' };

describe('tessera verify on stacks configured with a zoom range (docs/pyramids.md) and a rendered format', () => {
  beforeEach(() => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'tesseratest');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'tesseratest');
    vi.stubEnv('AWS_PROFILE', '');
  });
  afterEach(() => vi.unstubAllEnvs());

  it('passes every check on a PNG pyramid (AWS), a COG pyramid (GCP) and a JPEG pyramid (Azure); no tile delivery fails', async () => {
    const watches = [await watchIam('aws', TEST_SOURCE_PREFIX), await watchIam('gcp', 'incoming/'), await watchIam('azure', 'scenes/')];
    const aws = await createTestStack({
      params: configuredParams({ ...PYRAMID, 'tessera:format': 'png', 'tessera:rescale': '-1,1', 'tessera:colormap': 'rdylgn' }),
    });
    registerAwsStack(aws);
    const awsFns = deployedFunctions(aws);
    const gcp = await gcpEmulatorStack(configuredParams(PYRAMID));
    const azure = await azureEmulatorStack(
      configuredParams({ ...PYRAMID, 'tessera:format': 'jpeg', 'tessera:rescale': '-1,1', 'tessera:background': '255,255,255' }),
    );
    try {
      const r = await verify([
        ...['--outputs', writeOutputs(outputsOf(aws), 'aws-png-pyramid.json')],
        ...['--outputs', writeOutputs(gcp.outputsFile, 'gcp-cog-pyramid.json')],
        ...['--outputs', writeOutputs(azure.outputsFile, 'azure-jpeg-pyramid.json')],
        ...['--timeout', '60', '--quiet', '2', '--json'],
      ]);
      const reports = JSON.parse(r.stdout) as VerifyReport[];
      for (const report of reports) {
        expect(report.smoke, `${report.stack}: ${report.smoke.detail}\n${r.stderr}`).toMatchObject({ pass: true, tiles: 7 });
        expect([report.stack, report.replay.pass, report.replay.detail]).toEqual([report.stack, true, expect.any(String)]);
        expect(report.parity.filter((p) => !p.pass).map((p) => [report.stack, p.scenario, p.detail])).toEqual([]);
        expect(report.cleanup, `${report.stack}: ${report.cleanup.detail}`).toMatchObject({ pass: true, faults: [] });
      }
      expect(r.code).toBe(0);
      // Every tile delivery ended in a commit or a claim stop: none failed (a parent that cannot read its scene's
      // manifest fails, is retried and ends dead-lettered). The only poison: verify's probe and its refused repair.
      for (const [name, telemetry] of [
        ['aws', awsFns.telemetry],
        ['gcp', gcp.telemetry],
        ['azure', azure.telemetry],
      ] as const) {
        expect([name, telemetry.counters().failed ?? 0, telemetry.counters().poison]).toEqual([name, 0, 2]);
      }
    } finally {
      await Promise.all([awsFns.stop(), gcp.stop(), azure.stop()]);
      for (const w of watches) stopIam(w);
    }
    for (const w of watches) expectWithinGrants(w);
  }, 240_000);
});
