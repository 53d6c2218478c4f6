import type { app, StorageQueueFunctionOptions, StorageQueueHandler } from '@azure/functions';
import { describe, expect, inject, it } from 'vitest';
import type { AzureDelivery, AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { type AzureRuntime, azureClients, azureRuntime, composeAzure } from '../../functions/azure/compose.js';
import { registerFunctions } from '../../functions/azure/handlers/register.js';
import { makeSceneHandler } from '../../functions/azure/handlers/scene.handler.js';
import { makeTileHandler } from '../../functions/azure/handlers/tile.handler.js';
import type { QueueDeliveryVerdict } from '../../shared/app/queue-delivery.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { parseTileJob } from '../../shared/app/tile-job.js';
import { SPAN } from '../../shared/app/tracing.js';
import { clockSkewMarginMs, ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { COUNTERS } from '../../shared/ports/telemetry.port.js';
import { requireEndpoints } from '../support/global-setup.js';
import { deliveryTraces, exportedMetricNames, exportedSpans, fullSteps, inMemoryOtel, startOtlpReceiver } from '../support/otel-trace.js';
import { connectionString } from './azurite.js';
import { blobCreatedEvent, invocationContext, queueTriggerArgs } from './functions-host.js';
import { SOURCE_PREFIX, type TestStack, testScene, testStack } from './stack.js';

/**
 * Traces and metrics of the Azure tile function (docs/telemetry.md) through its real handler on Azurite: the SDK's
 * in-memory exporters, and the app's registrations (functions/azure/handlers/register.ts, what the entry module
 * calls) composing the runtime from the app settings and setting the SDK up from OTEL_* variables by itself.
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

describe('Azure tile function on Azurite, traced', () => {
  it('exports a span per delivery (tile span, claim/read/render/write/commit below it) for written, duplicate, taken-over, stolen and poison deliveries; the counters as metrics', async () => {
    const otel = inMemoryOtel('tessera-app');
    try {
      const stack = await testStack();
      const { clock } = stack;
      const logs = { scene: new JsonTelemetry(), a: new JsonTelemetry(), b: new JsonTelemetry() };
      // Composed as the app composes each function (composeAzure from the app settings): the SDK is found set up.
      const runtime = (owner: string, telemetry: JsonTelemetry): AzureRuntime =>
        composeAzure(stack.env, { clients: azureClients(connectionString()), clock, owner, telemetry });
      const b = runtime('worker-b', logs.b);
      expect(b.otel).toBe(otel.sdk);
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

      const traces = deliveryTraces(otel.spans.getFinishedSpans());
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
      expect(traces).toEqual([
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
      ]);

      // Every counter the logs kept, as a metric of the same name and the same total (scene, A and B together).
      const sums = await otel.metrics();
      const logged = (c: (typeof COUNTERS)[number]) => logs.scene.counters()[c] + logs.a.counters()[c] + logs.b.counters()[c];
      for (const c of COUNTERS) expect({ counter: c, metric: sums.get(`tessera.${c}`) ?? 0 }).toEqual({ counter: c, metric: logged(c) });
      expect(
        Object.fromEntries(
          [
            'enqueued',
            'claimed',
            'written',
            'write-already-present',
            'committed',
            'claim-rejected',
            'lease-taken-over',
            'lease-stolen',
            'poison',
          ].map((c) => [c, sums.get(`tessera.${c}`)]),
        ),
      ).toEqual({
        enqueued: TILES,
        claimed: TILES + 1,
        written: TILES,
        'write-already-present': 1,
        committed: TILES,
        'claim-rejected': 2,
        'lease-taken-over': 1,
        'lease-stolen': 1,
        poison: 1,
      });
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
