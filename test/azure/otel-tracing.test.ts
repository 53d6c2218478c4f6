import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { app, StorageQueueFunctionOptions, StorageQueueHandler } from '@azure/functions';
import { SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { AzureDelivery, AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { setUpAzureMonitor } from '../../functions/azure/azure-monitor.js';
import { APPLICATIONINSIGHTS_CONNECTION_STRING, AZURE_MONITOR_EXPORTER } from '../../functions/azure/azure-monitor-env.js';
import { type AzureRuntime, azureClients, azureRuntime, composeAzure } from '../../functions/azure/compose.js';
import { registerFunctions } from '../../functions/azure/handlers/register.js';
import { makeSceneHandler } from '../../functions/azure/handlers/scene.handler.js';
import { makeTileHandler } from '../../functions/azure/handlers/tile.handler.js';
import { installedOtelSdk } from '../../functions/otel/otel-env.js';
import { setUpOpenTelemetry } from '../../functions/otel/otel-sdk.js';
import type { QueueDeliveryVerdict } from '../../shared/app/queue-delivery.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { parseTileJob } from '../../shared/app/tile-job.js';
import { SPAN } from '../../shared/app/tracing.js';
import { clockSkewMarginMs, ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { COUNTERS, type Counter } from '../../shared/ports/telemetry.port.js';
import { requireEndpoints } from '../support/global-setup.js';
import {
  type DeliveryTrace,
  deliveryTraces,
  exportedMetricNames,
  exportedSpans,
  fullSteps,
  inMemoryOtel,
  startOtlpReceiver,
} from '../support/otel-trace.js';
import { connectionString } from './azurite.js';
import { blobCreatedEvent, invocationContext, queueTriggerArgs } from './functions-host.js';
import { SOURCE_PREFIX, type TestStack, testScene, testStack } from './stack.js';

/**
 * Traces and metrics of the Azure tile function (docs/telemetry.md) through its real handler on Azurite: the SDK's
 * in-memory exporters, and the app's registrations (functions/azure/handlers/register.ts, what the entry module
 * calls) composing the runtime from the app settings and setting the SDK up from OTEL_* variables by itself; then the
 * same with Azure Monitor's distro (tessera:telemetry `cloud`), its envelopes read back from a local Breeze endpoint.
 */
const TILES = tileGrid(64, 48, 32).count;
const blobEndpoint = () => requireEndpoints(inject('emulators'), 'azure').blob;

/** Fan a new scene out with `rt` (the scene function): its tile jobs wait on the stack's tile queue. */
async function fanOut(stack: TestStack, rt: AzureRuntime, key: string): Promise<void> {
  const bytes = testScene();
  const put = await rt.backend.sources.putIfAbsent(key, bytes, { contentType: 'image/tiff' });
  if (put.kind !== 'written') throw new Error(`fixture ${key} already exists`);
  const event = blobCreatedEvent(blobEndpoint(), stack.sourceContainer, key, put.version, bytes.byteLength);
  expect(await makeSceneHandler(() => rt)(event, invocationContext('scene', 'eventGridTrigger').context)).toMatchObject({
    kind: 'fanned-out',
  });
}

/** One queue-trigger invocation, with the arguments the host gives it for this dequeue. */
function invoke(handler: StorageQueueHandler<unknown>, stack: TestStack, d: AzureDelivery): Promise<QueueDeliveryVerdict> {
  const { entry, metadata } = queueTriggerArgs(d);
  const { context } = invocationContext('tile', 'queueTrigger', metadata, stack.env[ENV.tileQueue]);
  return handler(entry, context) as Promise<QueueDeliveryVerdict>;
}

async function receiveAll(queue: AzureQueueJobQueue, n: number): Promise<AzureDelivery[]> {
  const got = await queue.receive(32, 60_000);
  if (got.length !== n) throw new Error(`expected ${n} messages on the tile queue, got ${got.length}`);
  return got;
}

/** The fixed counts of {@link tracedScenario}: every SDK must export these, and the logs must count them. */
const SCENARIO_COUNTS = {
  enqueued: TILES,
  claimed: TILES + 1,
  written: TILES,
  'write-already-present': 1,
  committed: TILES,
  'claim-rejected': 2,
  'lease-taken-over': 1,
  'lease-stolen': 1,
  poison: 1,
};

/** Every counter the logs kept, as a metric of the same name and the same total; and the scenario's own counts. */
function expectCounters(sums: ReadonlyMap<string, number>, logged: (c: Counter) => number): void {
  for (const c of COUNTERS) expect({ counter: c, metric: sums.get(`tessera.${c}`) ?? 0 }).toEqual({ counter: c, metric: logged(c) });
  expect(Object.fromEntries(Object.keys(SCENARIO_COUNTS).map((c) => [c, sums.get(`tessera.${c}`)]))).toEqual(SCENARIO_COUNTS);
}

/**
 * Written, duplicate, taken-over, stolen and poison deliveries through the real tile handler, with whichever SDK this
 * process set up (composeAzure finds it installed): what their traces must be, and the logs' counts (scene, A and B).
 */
async function tracedScenario(): Promise<{ expected: DeliveryTrace[]; logged: (c: Counter) => number }> {
  const stack = await testStack();
  const { clock } = stack;
  const logs = { scene: new JsonTelemetry(), a: new JsonTelemetry(), b: new JsonTelemetry() };
  // Composed as the app composes each function (composeAzure from the app settings): the SDK is found set up.
  const runtime = (owner: string, telemetry: JsonTelemetry): AzureRuntime =>
    composeAzure(stack.env, { clients: azureClients(connectionString()), clock, owner, telemetry });
  const b = runtime('worker-b', logs.b);
  expect(b.otel).toBeDefined();
  expect(b.otel).toBe(installedOtelSdk());
  // Worker A stalls after its write (a frozen instance: no timer of its fires), until the test lets it go on.
  let reachedWrite!: () => void;
  let resume!: () => void;
  const atWrite = new Promise<void>((r) => {
    reachedWrite = r;
  });
  const gate = new Promise<void>((r) => {
    resume = r;
  });
  const a0 = runtime('worker-a', logs.a);
  const a: AzureRuntime = {
    ...a0,
    settings: {
      ...a0.settings,
      hooks: {
        afterWrite: async () => {
          reachedWrite();
          await gate;
        },
      },
    },
  };
  const tileA = makeTileHandler(() => a);
  const tileB = makeTileHandler(() => b);
  const queue = b.backend.queue;

  await fanOut(stack, runtime('scene-1', logs.scene), `${SOURCE_PREFIX}scene.tif`);
  const [m1, ...others] = (await receiveAll(queue, TILES)) as [AzureDelivery, ...AzureDelivery[]];
  // A duplicate of m1's job (the fan-out sending it twice), and a message that is no tile job at all.
  await queue.sendBatch([{ jobKey: m1.jobKey, body: m1.body }]);
  const [dup] = (await receiveAll(queue, 1)) as [AzureDelivery];
  await queue.sendBatch([{ jobKey: 'not-a-job', body: 'not a tile job' }]);
  const [poison] = (await receiveAll(queue, 1)) as [AzureDelivery];
  /** The host's next dequeue of the same message: the same id, the count one up. */
  const again = (d: AzureDelivery): AzureDelivery => ({ ...d, receiveCount: d.receiveCount + 1 });

  const t0 = clock.now();
  const stalled = invoke(tileA, stack, m1);
  await atWrite;
  // The duplicate meets A's live claim: acknowledged, A's own message completes the job.
  expect(await invoke(tileB, stack, dup)).toMatchObject({ kind: 'ack', outcome: { kind: 'claim-rejected', reason: 'held' } });
  // A's lease lapses (its instance froze, its host stopped renewing the message); the queue hands m1 to B,
  // which takes the claim over and finds A's tile written.
  clock.advance(b.settings.leaseMs + clockSkewMarginMs(b.config) + 1000);
  const t1 = clock.now();
  expect(await invoke(tileB, stack, again(m1))).toMatchObject({ kind: 'ack', outcome: { kind: 'already-present' } });
  // A wakes up and commits as the owner it no longer is.
  resume();
  expect(await stalled).toMatchObject({ kind: 'ack', outcome: { kind: 'lease-stolen' } });
  for (const d of others) expect(await invoke(tileB, stack, d)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
  expect(await invoke(tileB, stack, again(dup))).toMatchObject({ kind: 'ack', outcome: { kind: 'claim-rejected', reason: 'done' } });
  expect(await invoke(tileB, stack, poison)).toMatchObject({ kind: 'poison' });

  const job = (d: AzureDelivery) => parseTileJob(d.body);
  const J = job(m1);
  const tile = (d: AzureDelivery) => `${job(d).window.row}_${job(d).window.col}`;
  const full = (
    d: AzureDelivery,
    owner: string,
    lease: number,
    write: 'written' | 'already-present',
    commit: 'committed' | 'lease-stolen',
  ) => ({
    jobKey: job(d).jobKey,
    owner,
    tile: tile(d),
    outcome: write === 'already-present' ? 'already-present' : commit === 'lease-stolen' ? 'lease-stolen' : 'written',
    leaseDeadline: lease,
    steps: fullSteps(write, commit),
  });
  const ack = (outcome: string, jobKey: string) => ({ verdict: 'ack', outcome, jobKey, error: false });
  const refused = (d: AzureDelivery, step: string) => ({
    jobKey: J.jobKey,
    owner: `${d.deliveryId}@worker-b`,
    tile: tile(m1),
    outcome: 'claim-rejected',
    leaseDeadline: undefined,
    steps: [step],
  });
  const expected: DeliveryTrace[] = [
    {
      deliveryId: m1.deliveryId,
      receiveCount: 1,
      ...ack('lease-stolen', J.jobKey),
      tile: full(m1, `${m1.deliveryId}@worker-a`, t0 + a.settings.leaseMs, 'written', 'lease-stolen'),
    },
    { deliveryId: dup.deliveryId, receiveCount: 1, ...ack('claim-rejected', J.jobKey), tile: refused(dup, 'claim:held') },
    {
      deliveryId: m1.deliveryId,
      receiveCount: 2,
      ...ack('already-present', J.jobKey),
      tile: full(m1, `${m1.deliveryId}@worker-b`, t1 + b.settings.leaseMs, 'already-present', 'committed'),
    },
    ...others.map((d) => ({
      deliveryId: d.deliveryId,
      receiveCount: 1,
      ...ack('written', job(d).jobKey),
      tile: full(d, `${d.deliveryId}@worker-b`, t1 + b.settings.leaseMs, 'written', 'committed'),
    })),
    { deliveryId: dup.deliveryId, receiveCount: 2, ...ack('claim-rejected', J.jobKey), tile: refused(dup, 'claim:done') },
    {
      deliveryId: poison.deliveryId,
      receiveCount: 1,
      verdict: 'poison',
      outcome: undefined,
      jobKey: undefined,
      error: true,
      tile: undefined,
    },
  ];
  return { expected, logged: (c) => logs.scene.counters()[c] + logs.a.counters()[c] + logs.b.counters()[c] };
}

describe('Azure tile function on Azurite, traced', () => {
  it('exports a span per delivery (tile span, claim/read/render/write/commit below it) for written, duplicate, taken-over, stolen and poison deliveries; the counters as metrics', async () => {
    const otel = inMemoryOtel('tessera-app');
    try {
      const { expected, logged } = await tracedScenario();
      expect(deliveryTraces(otel.spans.getFinishedSpans())).toEqual(expected);
      expectCounters(await otel.metrics(), logged);
    } finally {
      await otel.sdk.shutdown();
    }
  });

  it("the app's registered tile function composes from the app settings, sets the SDK up from OTEL_* variables and exports a delivery before it answers", async () => {
    const receiver = await startOtlpReceiver();
    const saved = { ...process.env };
    let deployed: AzureRuntime | undefined;
    try {
      const stack = await testStack();
      // A tile job to deliver, fanned out with no SDK set up (the scene runtime exports nothing).
      const { rt: scene } = stack.runtime('scene-1');
      await fanOut(stack, scene, `${SOURCE_PREFIX}entry.tif`);
      const [d] = await scene.backend.queue.receive(1, 60_000);
      if (!d) throw new Error('the scene fanned out no tile job');
      // The app settings as infra/ writes them (Azurite's connection string for the account) and the OTEL_* variables
      // tessera:telemetry adds: nothing else tells the app to trace.
      Object.assign(process.env, stack.env, { WEBSITE_SITE_NAME: 'tessera-app-entry', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url });
      // What the entry module (functions/azure/handlers/index.ts) does at load, with a registrar that keeps the handlers.
      const handlers = new Map<string, StorageQueueHandler<unknown>>();
      registerFunctions({
        storageQueue: ((name: string, options: StorageQueueFunctionOptions) => {
          handlers.set(name, options.handler);
        }) as typeof app.storageQueue,
        timer: (() => undefined) as typeof app.timer,
      });
      const tile = handlers.get('tile');
      if (!tile) throw new Error('registerFunctions registered no tile function');
      expect(await invoke(tile, stack, d)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
      deployed = azureRuntime('tile');
      expect(deployed.otel).toBeDefined();
      // Already there when the answer came: the handler flushed before it answered.
      const spans = exportedSpans(receiver.requests);
      expect(new Set(spans.map((x) => x.name))).toEqual(new Set(Object.values(SPAN)));
      expect(spans.every((x) => x.service === 'tessera-app-entry')).toBe(true);
      expect(spans.find((x) => x.name === SPAN.tile)?.attributes).toMatchObject({
        'tessera.outcome': 'written',
        'tessera.claim_owner': `${d.deliveryId}@${deployed.settings.owner}`,
      });
      expect(exportedMetricNames(receiver.requests)).toEqual(
        expect.arrayContaining(['tessera.claimed', 'tessera.written', 'tessera.committed']),
      );
    } finally {
      await deployed?.otel?.shutdown();
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
      await receiver.close();
    }
  });
});

/** One Application Insights envelope, as the Breeze endpoint takes it (the fields these tests read). */
interface Envelope {
  readonly name: string;
  readonly time: string;
  readonly iKey: string;
  readonly sampleRate?: number;
  readonly tags: Readonly<Record<string, string>>;
  readonly data: {
    readonly baseType: string;
    readonly baseData: {
      readonly id?: string;
      readonly name?: string;
      readonly success?: boolean;
      readonly properties?: Readonly<Record<string, string>>;
      readonly metrics?: readonly { readonly name: string; readonly value: number }[];
    };
  };
}

/**
 * A local Application Insights ingestion (Breeze) endpoint: `POST /v2.1/track`, a JSON array of envelopes (gzipped
 * when Content-Encoding says so: the exporter gzips for Azure's own ingestion hosts only), answered as Breeze answers
 * (every item accepted). HTTPS, because the exporter rewrites an `http://` IngestionEndpoint to `https://`: its
 * certificate is made here for 127.0.0.1, and only the exporter trusts it (its `tlsOptions.ca`, through the distro's
 * documented APPLICATIONINSIGHTS_CONFIGURATION_CONTENT).
 */
async function startBreezeReceiver(
  tls: { key: string; cert: string },
  ikey: string,
): Promise<{ connectionString: string; envelopes: Envelope[]; paths: string[]; close(): Promise<void> }> {
  const envelopes: Envelope[] = [];
  const paths: string[] = [];
  const server = createHttpsServer(tls, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      paths.push(req.url ?? '');
      const raw = Buffer.concat(chunks);
      const items = JSON.parse((req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8')) as Envelope[];
      envelopes.push(...items);
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ itemsReceived: items.length, itemsAccepted: items.length, errors: [] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    connectionString: `InstrumentationKey=${ikey};IngestionEndpoint=https://127.0.0.1:${port}/`,
    envelopes,
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A self-signed certificate and key for 127.0.0.1 (openssl; Debian's openssl package, which .ci/run installs). */
function localhostCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-breeze-'));
  try {
    const made = spawnSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1'].concat([
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ]),
      { encoding: 'utf8' },
    );
    if (made.status !== 0)
      throw new Error(
        `openssl could not make the Breeze receiver's certificate (${made.error?.message ?? made.stderr}): install openssl (apt-get install openssl)`,
      );
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const isSpan = (e: Envelope) => e.data.baseType === 'RemoteDependencyData' || e.data.baseType === 'RequestData';

/**
 * The spans the envelopes carry, as the SDK's spans for {@link deliveryTraces}: span id (`baseData.id`), trace id
 * (`ai.operation.id`), parent (`ai.operation.parentId`), name, attributes (`properties`, every value a string), status
 * (`success`), start (`time`, to the millisecond: equal starts keep the order the spans arrived in, which is the order
 * they ended, so steps one after another stay in order).
 */
function breezeSpans(envelopes: readonly Envelope[]): ReadableSpan[] {
  return envelopes.filter(isSpan).map((e) => {
    const traceId = e.tags['ai.operation.id'] ?? '';
    const parent = e.tags['ai.operation.parentId'];
    const ms = Date.parse(e.time);
    const span = {
      name: e.data.baseData.name ?? '',
      attributes: e.data.baseData.properties ?? {},
      startTime: [Math.floor(ms / 1000), (ms % 1000) * 1_000_000],
      status: { code: e.data.baseData.success === false ? SpanStatusCode.ERROR : SpanStatusCode.UNSET },
      spanContext: () => ({ traceId, spanId: e.data.baseData.id ?? '', traceFlags: 1 }),
      parentSpanContext: parent === undefined ? undefined : { traceId, spanId: parent, traceFlags: 1 },
    };
    // The fields deliveryTraces reads; the rest of a ReadableSpan is not in an envelope.
    return span as unknown as ReadableSpan;
  });
}

/** Each `tessera.*` metric's total over every export (the exporter's counters are deltas: one export, one increment). */
function breezeMetrics(envelopes: readonly Envelope[]): Map<string, number> {
  const sums = new Map<string, number>();
  for (const e of envelopes.filter((x) => x.data.baseType === 'MetricData'))
    for (const m of e.data.baseData.metrics ?? []) if (m.name.startsWith('tessera.')) sums.set(m.name, (sums.get(m.name) ?? 0) + m.value);
  return sums;
}

describe('Azure tile function on Azurite, to Application Insights (tessera:telemetry cloud: the Azure Monitor distro)', () => {
  const IKEY = '5be1d0c7-0000-4000-8000-000000000027';
  const saved = { ...process.env };
  let tls: { key: string; cert: string };

  beforeAll(() => {
    tls = localhostCertificate();
    // Read once per process by the distro, before its first setup: the exporter trusts the receiver's certificate.
    process.env.APPLICATIONINSIGHTS_CONFIGURATION_CONTENT = JSON.stringify({
      azureMonitorExporterOptions: { tlsOptions: { ca: tls.cert } },
    });
    // No SDK statsbeat to Microsoft's endpoints from a test; and the Azure SDKs' own logger, which the distro turns on
    // at warning level for the whole process (docs/telemetry.md), at error level.
    process.env.APPLICATION_INSIGHTS_NO_STATSBEAT = 'true';
    process.env.AZURE_LOG_LEVEL = 'error';
  });
  afterAll(() => {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  });

  it('exports the same span trees and counters as the OTLP SDK, as envelopes: dependencies with operation and parent ids, and metrics', async () => {
    const breeze = await startBreezeReceiver(tls, IKEY);
    const sdk = setUpAzureMonitor(
      {
        [APPLICATIONINSIGHTS_CONNECTION_STRING]: breeze.connectionString,
        OTEL_TRACES_EXPORTER: AZURE_MONITOR_EXPORTER,
        OTEL_METRICS_EXPORTER: AZURE_MONITOR_EXPORTER,
      },
      { serviceName: 'tessera-app' },
    );
    try {
      const { expected, logged } = await tracedScenario();
      await sdk.flush();
      expect(new Set(breeze.paths)).toEqual(new Set(['/v2.1/track']));
      const { envelopes } = breeze;
      // The same trees the in-memory exporter gave above, read back from what Application Insights would store.
      expect(deliveryTraces(breezeSpans(envelopes))).toEqual(expected);
      expectCounters(breezeMetrics(envelopes), logged);
      // Spans as in-process dependencies (a delivery, with no parent, as a plain one), metrics, and nothing else
      // (no instrumentation's spans, no logs, no standard metrics); all to the connection string's component, unsampled.
      expect(new Set(envelopes.map((e) => e.name))).toEqual(
        new Set(['Microsoft.ApplicationInsights.RemoteDependency', 'Microsoft.ApplicationInsights.Metric']),
      );
      expect(new Set(envelopes.map((e) => e.iKey))).toEqual(new Set([IKEY]));
      expect(new Set(envelopes.filter(isSpan).map((e) => [e.tags['ai.cloud.role'], e.sampleRate].join(' ')))).toEqual(
        new Set(['tessera-app 100']),
      );
    } finally {
      await sdk.shutdown();
      await breeze.close();
    }
  });

  it("the app's entry, given a cloud stack's app settings, loads the distro; its tile function sets it up from them and exports a delivery before it answers", async () => {
    const breeze = await startBreezeReceiver(tls, IKEY);
    const before = { ...process.env };
    let deployed: AzureRuntime | undefined;
    try {
      const stack = await testStack();
      const { rt: scene } = stack.runtime('scene-1');
      await fanOut(stack, scene, `${SOURCE_PREFIX}entry.tif`);
      const [d] = await scene.backend.queue.receive(1, 60_000);
      if (!d) throw new Error('the scene fanned out no tile job');
      // The settings infra/azure/telemetry.ts writes for `cloud`, and the component's connection string: nothing else.
      Object.assign(process.env, stack.env, {
        WEBSITE_SITE_NAME: 'tessera-app-entry',
        OTEL_TRACES_EXPORTER: AZURE_MONITOR_EXPORTER,
        OTEL_METRICS_EXPORTER: AZURE_MONITOR_EXPORTER,
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=azure-test',
        [APPLICATIONINSIGHTS_CONNECTION_STRING]: breeze.connectionString,
      });
      // A fresh load of the app, as a new instance loads it; what its entry module (functions/azure/handlers/index.ts)
      // does, with a registrar that keeps the handlers: the settings ask for Azure Monitor, so it loads the distro.
      vi.resetModules();
      const env = await import('../../functions/azure/azure-monitor-env.js');
      expect(env.azureMonitorRequested(process.env)).toBe(true);
      await import('../../functions/azure/azure-monitor.js');
      const register = await import('../../functions/azure/handlers/register.js');
      const compose = await import('../../functions/azure/compose.js');
      const handlers = new Map<string, StorageQueueHandler<unknown>>();
      register.registerFunctions({
        storageQueue: ((name: string, options: StorageQueueFunctionOptions) => {
          handlers.set(name, options.handler);
        }) as typeof app.storageQueue,
        timer: (() => undefined) as typeof app.timer,
      });
      const tile = handlers.get('tile');
      if (!tile) throw new Error('registerFunctions registered no tile function');
      expect(await invoke(tile, stack, d)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
      deployed = compose.azureRuntime('tile');
      expect(deployed.otel).toBeDefined();
      // Already there when the answer came: the handler flushed before it answered.
      const spans = breeze.envelopes.filter(isSpan);
      expect(new Set(spans.map((e) => e.data.baseData.name))).toEqual(new Set(Object.values(SPAN)));
      expect(new Set(spans.map((e) => e.tags['ai.cloud.role']))).toEqual(new Set(['tessera-app-entry']));
      expect(spans.find((e) => e.data.baseData.name === SPAN.tile)?.data.baseData.properties).toMatchObject({
        'tessera.outcome': 'written',
        'tessera.claim_owner': `${d.deliveryId}@${deployed.settings.owner}`,
      });
      expect([...breezeMetrics(breeze.envelopes).keys()]).toEqual(
        expect.arrayContaining(['tessera.claimed', 'tessera.written', 'tessera.committed']),
      );
    } finally {
      await deployed?.otel?.shutdown();
      for (const k of Object.keys(process.env)) if (!(k in before)) delete process.env[k];
      Object.assign(process.env, before);
      await breeze.close();
    }
  });
});

describe('Azure Monitor settings, refused with the fix named', () => {
  const AM = AZURE_MONITOR_EXPORTER;
  const cs = 'InstrumentationKey=5be1d0c7-0000-4000-8000-000000000027;IngestionEndpoint=https://127.0.0.1:9/';
  it.each([
    ['no connection string', { OTEL_TRACES_EXPORTER: AM }, /APPLICATIONINSIGHTS_CONNECTION_STRING is not set/],
    [
      'one exporter variable another exporter',
      { OTEL_TRACES_EXPORTER: AM, OTEL_METRICS_EXPORTER: 'otlp', [APPLICATIONINSIGHTS_CONNECTION_STRING]: cs },
      /OTEL_METRICS_EXPORTER=otlp.*set both to azure_monitor/,
    ],
    [
      'a sampler the distro does not take',
      { OTEL_TRACES_EXPORTER: AM, OTEL_TRACES_SAMPLER: 'microsoft.rate_limited', [APPLICATIONINSIGHTS_CONNECTION_STRING]: cs },
      /microsoft.fixed_percentage/,
    ],
    [
      'a share below 1 %',
      {
        OTEL_TRACES_EXPORTER: AM,
        OTEL_TRACES_SAMPLER: 'microsoft.fixed_percentage',
        OTEL_TRACES_SAMPLER_ARG: '0.001',
        [APPLICATIONINSIGHTS_CONNECTION_STRING]: cs,
      },
      /from 0.01 to 1/,
    ],
  ])('%s', (_, env, message) => {
    expect(() => setUpAzureMonitor(env, { serviceName: 'x' })).toThrow(message);
    expect(installedOtelSdk()).toBeUndefined();
  });

  it('azure_monitor outside the Azure app (the OTLP SDK: local runs, AWS, GCP) is refused, not silently dropped', () => {
    expect(() => setUpOpenTelemetry({ OTEL_TRACES_EXPORTER: AM }, { serviceName: 'x' })).toThrow(/the Azure functions' exporter/);
    expect(installedOtelSdk()).toBeUndefined();
  });
});
