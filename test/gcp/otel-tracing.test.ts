import type { CloudEvent } from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composeGcp, functionRuntime, type GcpRuntime } from '../../functions/gcp/compose.js';
import { GCP_FUNCTIONS } from '../../functions/gcp/handlers/index.js';
import { createSceneHandler } from '../../functions/gcp/handlers/scene.handler.js';
import { createTileHandler, type MessagePublishedData } from '../../functions/gcp/handlers/tile.handler.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { parseTileJob } from '../../shared/app/tile-job.js';
import { SPAN } from '../../shared/app/tracing.js';
import { clockSkewMarginMs, ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { COUNTERS } from '../../shared/ports/telemetry.port.js';
import { FakeClock } from '../support/fake-clock.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { deliveryTraces, exportedMetricNames, exportedSpans, fullSteps, inMemoryOtel, startOtlpReceiver } from '../support/otel-trace.js';
import { createGcpStack, type GcpTestStack } from './stack.js';

/**
 * Traces and metrics of the GCP tile function (docs/telemetry.md) through its real handler on the emulators
 * (fake-gcs-server, Google's Pub/Sub and Firestore emulators): the SDK's in-memory exporters, and the deployed
 * entry point (functions/gcp/handlers/index.ts) setting the SDK up from OTEL_* variables by itself.
 */
const SCENE = { width: 96, height: 80 } as const; // tile_px 48: a 2 x 2 grid
const TILES = tileGrid(SCENE.width, SCENE.height, 48).count;

let s: GcpTestStack;
beforeAll(async () => {
  s = await createGcpStack();
});
afterAll(async () => {
  await s.close();
});

/** A pulled message as Eventarc delivers it again: the same message id, the next delivery attempt. */
const attempt = (event: CloudEvent<MessagePublishedData>, n: number): CloudEvent<MessagePublishedData> => ({
  ...event,
  data: { ...event.data, deliveryAttempt: n },
});

/** Publish to the tile topic as the scene function does (a duplicate is the fan-out publishing a job twice). */
async function publish(data: Buffer, attributes: Record<string, string> = {}): Promise<CloudEvent<MessagePublishedData>> {
  await s.clients.pubsub.topic(s.env[ENV.tileQueue] as string).publishMessage({ data, attributes });
  const [event, ...more] = await s.tileEvents();
  if (!event || more.length > 0) throw new Error(`expected one message on the tile subscription, got ${more.length + (event ? 1 : 0)}`);
  return event;
}

describe('GCP tile function on the emulators, traced', () => {
  it('exports a span per delivery (tile span, claim/read/render/write/commit below it) for written, duplicate, taken-over, stolen and poison deliveries; the counters as metrics', async () => {
    const otel = inMemoryOtel('tessera-tile');
    try {
      const clock = new FakeClock(Date.now());
      const logs = { scene: new JsonTelemetry(), a: new JsonTelemetry(), b: new JsonTelemetry() };
      // Composed as the deployed functions compose (composeGcp from the stack's environment): the SDK is found set up.
      const runtime = (role: 'scene' | 'tile', owner: string, telemetry: JsonTelemetry): GcpRuntime =>
        composeGcp(s.env, { role, clients: s.clients, telemetry, owner, clock });
      const scene = runtime('scene', 'scene-1', logs.scene);
      const b = runtime('tile', 'worker-b', logs.b);
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
      const a0 = runtime('tile', 'worker-a', logs.a);
      const a: GcpRuntime = {
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

      await createSceneHandler(scene)(await s.upload('incoming/scene.tif', await syntheticSceneBytes(SCENE)));
      const events = await s.tileEvents();
      expect(events).toHaveLength(TILES);
      const [m1, ...others] = events as [CloudEvent<MessagePublishedData>, ...CloudEvent<MessagePublishedData>[]];
      const body = (e: CloudEvent<MessagePublishedData>) => Buffer.from(e.data?.message?.data ?? '', 'base64');
      const dup = await publish(body(m1), m1.data?.message?.attributes);
      const poison = await publish(Buffer.from('not a tile job'));
      const id = (e: CloudEvent<MessagePublishedData>) => e.data?.message?.messageId as string;

      const t0 = clock.now();
      const stalled = createTileHandler(a)(attempt(m1, 1));
      await atWrite;
      // The duplicate meets A's live claim: acknowledged, A's own message completes the job.
      expect(await createTileHandler(b)(attempt(dup, 1))).toMatchObject({
        kind: 'ack',
        outcome: { kind: 'claim-rejected', reason: 'held' },
      });
      // A's lease lapses; Pub/Sub redelivers A's message to B, which takes the claim over and finds A's tile written.
      clock.advance(b.settings.leaseMs + clockSkewMarginMs(b.config) + 1000);
      const t1 = clock.now();
      expect(await createTileHandler(b)(attempt(m1, 2))).toMatchObject({ kind: 'ack', outcome: { kind: 'already-present' } });
      // A wakes up and commits as the owner it no longer is.
      resume();
      expect(await stalled).toMatchObject({ kind: 'ack', outcome: { kind: 'lease-stolen' } });
      for (const e of others)
        expect(await createTileHandler(b)(attempt(e, 1))).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
      expect(await createTileHandler(b)(attempt(dup, 2))).toMatchObject({
        kind: 'ack',
        outcome: { kind: 'claim-rejected', reason: 'done' },
      });
      expect(await createTileHandler(b)(attempt(poison, 1))).toMatchObject({ kind: 'dead-lettered', reason: 'INVALID_EVENT' });

      const traces = deliveryTraces(otel.spans.getFinishedSpans());
      const job = (e: CloudEvent<MessagePublishedData>) => parseTileJob(body(e).toString('utf8'));
      const J = job(m1);
      const tile = (e: CloudEvent<MessagePublishedData>) => `${job(e).window.row}_${job(e).window.col}`;
      const full = (
        e: CloudEvent<MessagePublishedData>,
        owner: string,
        lease: number,
        write: 'written' | 'already-present',
        commit: 'committed' | 'lease-stolen',
      ) => ({
        jobKey: job(e).jobKey,
        owner,
        tile: tile(e),
        outcome: write === 'already-present' ? 'already-present' : commit === 'lease-stolen' ? 'lease-stolen' : 'written',
        leaseDeadline: lease,
        steps: fullSteps(write, commit),
      });
      const ack = (outcome: string, jobKey: string) => ({ verdict: 'ack', outcome, jobKey, error: false });
      expect(traces).toEqual([
        {
          deliveryId: id(m1),
          receiveCount: 1,
          ...ack('lease-stolen', J.jobKey),
          tile: full(m1, `${id(m1)}@worker-a`, t0 + a.settings.leaseMs, 'written', 'lease-stolen'),
        },
        {
          deliveryId: id(dup),
          receiveCount: 1,
          ...ack('claim-rejected', J.jobKey),
          tile: {
            jobKey: J.jobKey,
            owner: `${id(dup)}@worker-b`,
            tile: tile(m1),
            outcome: 'claim-rejected',
            leaseDeadline: undefined,
            steps: ['claim:held'],
          },
        },
        {
          deliveryId: id(m1),
          receiveCount: 2,
          ...ack('already-present', J.jobKey),
          tile: full(m1, `${id(m1)}@worker-b`, t1 + b.settings.leaseMs, 'already-present', 'committed'),
        },
        ...others.map((e) => ({
          deliveryId: id(e),
          receiveCount: 1,
          ...ack('written', job(e).jobKey),
          tile: full(e, `${id(e)}@worker-b`, t1 + b.settings.leaseMs, 'written', 'committed'),
        })),
        {
          deliveryId: id(dup),
          receiveCount: 2,
          ...ack('claim-rejected', J.jobKey),
          tile: {
            jobKey: J.jobKey,
            owner: `${id(dup)}@worker-b`,
            tile: tile(m1),
            outcome: 'claim-rejected',
            leaseDeadline: undefined,
            steps: ['claim:done'],
          },
        },
        { deliveryId: id(poison), receiveCount: 1, verdict: 'poison', outcome: undefined, jobKey: undefined, error: true, tile: undefined },
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

  it('the deployed entry point sets the SDK up from OTEL_* variables, and the tile function exports a delivery before it answers', async () => {
    const receiver = await startOtlpReceiver();
    const saved = { ...process.env };
    let deployed: GcpRuntime | undefined;
    try {
      // A tile job to deliver (fanned out with no SDK set up: the scene runtime exports nothing).
      await createSceneHandler(s.runtime({ role: 'scene' }))(await s.upload('incoming/entry.tif', await syntheticSceneBytes(SCENE)));
      const [event] = await s.tileEvents();
      if (!event) throw new Error('the scene fanned out no tile job');
      // The function's environment as infra/ sets it, and the OTEL_* variables tessera:telemetry adds: nothing else
      // tells a function to trace. (Firestore and Pub/Sub find their emulators by variable too.)
      Object.assign(process.env, s.env, {
        FIRESTORE_EMULATOR_HOST: s.endpoints.firestore,
        PUBSUB_EMULATOR_HOST: s.endpoints.pubsub,
        K_SERVICE: 'tessera-tile-entry',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      });
      // The entry module, as a deployed instance loads it: it registers every function, and each composes its runtime
      // from process.env on first use (functionRuntime), which is where the SDK is set up.
      const entry = await import('../../functions/gcp/handlers/index.js');
      deployed = functionRuntime('tile');
      expect(deployed.otel).toBeDefined();
      // Delivered through the Functions Framework's own server, to the same tile handler with the same environment;
      // only the storage client is pointed at fake-gcs-server (the SDK's STORAGE_EMULATOR_HOST cannot serve both its
      // JSON and upload paths there).
      const name = `${GCP_FUNCTIONS.tile}-traced`;
      entry.registerGcpFunctions(
        {
          scene: () => s.runtime({ role: 'scene' }),
          tile: () => composeGcp(process.env, { role: 'tile', clients: s.clients }),
          mosaic: () => s.runtime({ role: 'mosaic' }),
          ingest: () => s.runtime({ role: 'ingest' }),
          reconcile: () => s.runtime({ role: 'reconcile' }),
          stream: () => s.runtime({ role: 'stream' }),
        },
        {
          ...GCP_FUNCTIONS,
          tile: name,
          scene: `${name}-scene`,
          mosaic: `${name}-mosaic`,
          ingest: `${name}-ingest`,
          reconcile: `${name}-reconcile`,
          stream: `${name}-stream`,
        },
      );
      const server = getTestServer(name);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const address = server.address();
        const port = typeof address === 'object' && address ? address.port : 0;
        const response = await fetch(`http://127.0.0.1:${port}/`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'ce-specversion': event.specversion,
            'ce-id': event.id,
            'ce-type': event.type,
            'ce-source': event.source,
          },
          body: JSON.stringify(event.data),
        });
        expect(response.status).toBeLessThan(300);
        // Already there when the answer came: the handler flushed before it answered.
        const spans = exportedSpans(receiver.requests).filter((x) => x.name.startsWith('tessera.'));
        expect(new Set(spans.map((x) => x.name))).toEqual(new Set(Object.values(SPAN)));
        expect(spans.every((x) => x.service === 'tessera-tile-entry')).toBe(true);
        expect(spans.find((x) => x.name === SPAN.tile)?.attributes).toMatchObject({
          'tessera.outcome': 'written',
          'tessera.claim_owner': expect.stringMatching(new RegExp(`^${event.data?.message?.messageId}@`)),
        });
        expect(exportedMetricNames(receiver.requests)).toEqual(
          expect.arrayContaining(['tessera.claimed', 'tessera.written', 'tessera.committed']),
        );
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    } finally {
      await deployed?.otel?.shutdown();
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
      await receiver.close();
    }
  });
});
