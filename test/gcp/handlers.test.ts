import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSceneHandler, sourceOf } from '../../functions/gcp/handlers/scene.handler.js';
import { createTileHandler } from '../../functions/gcp/handlers/tile.handler.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { parseTileJob, type TileJob } from '../../shared/app/tile-job.js';
import { outputKeys, sceneKey, tileJobKey } from '../../shared/domain/job-key.js';
import { clockSkewMarginMs } from '../../shared/domain/runtime-config.js';
import { tileGrid, windows } from '../../shared/domain/tile-grid.js';
import { FakeClock } from '../support/fake-clock.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import type { PulledMessage } from './clients.js';
import { createGcpStack, type GcpTestStack, pubsubEvent, storageEvent, TEST_PARAMS, type TestRuntime } from './stack.js';

const SCENE = { width: 96, height: 80 } as const; // tile_px 48: a 2 x 2 grid
const GRID = tileGrid(SCENE.width, SCENE.height, 48);
let sceneBytes: Uint8Array;
const stacks: GcpTestStack[] = [];

beforeAll(async () => {
  sceneBytes = await syntheticSceneBytes(SCENE);
});
afterAll(async () => {
  await Promise.all(stacks.map((s) => s.close()));
});

async function stack(): Promise<GcpTestStack> {
  const s = await createGcpStack();
  stacks.push(s);
  return s;
}

/** The runtime with a hook that runs right after the claim (to stall the worker there). */
const afterClaim = (rt: TestRuntime, hook: () => Promise<void>): TestRuntime => ({
  ...rt,
  settings: { ...rt.settings, hooks: { afterClaim: hook } },
});

const logsOf = (lines: string[]) => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

/** A stack whose scene has been fanned out: its tile messages wait on the tile subscription. */
async function stackWithTileEvents() {
  const s = await stack();
  await createSceneHandler(s.runtime())(await s.upload('incoming/scene.tif', sceneBytes));
  const events = await s.tileEvents();
  expect(events).toHaveLength(GRID.count);
  return { s, events };
}

describe("GCP handlers against fake-gcs-server, Google's Firestore emulator and the Pub/Sub emulator", () => {
  describe('scene handler', () => {
    it.each([
      ['a space and a plus', 'incoming/T31 UDQ+B08.tif'],
      ['a literal %2F', 'incoming/a%2Fb/scene.tif'],
      ['unicode', 'incoming/Zürich/日本/é.tif'],
    ])('takes a key with %s literally and publishes the job keys the shared derivation gives', async (_label, key) => {
      const s = await stack();
      const event = await s.upload(key, sceneBytes);
      expect(event.data?.name).toBe(key); // GCS events carry the name as stored, not URL-encoded
      const rt = s.runtime();
      const outcome = await createSceneHandler(rt)(event);
      const source = { bucket: s.sourceBucket, key, versionToken: String(event.data?.generation) };
      const scene = sceneKey(source, TEST_PARAMS);
      expect(outcome).toEqual({ kind: 'fanned-out', sceneKey: scene, enqueued: GRID.count, source });

      const messages = await s.tileEvents();
      const jobs = messages.map((m) => parseTileJob(Buffer.from(m.data?.message?.data ?? '', 'base64').toString('utf8')));
      expect(jobs.map((j) => j.jobKey).sort()).toEqual([...windows(GRID)].map((w) => tileJobKey(scene, w)).sort());
      for (const [i, m] of messages.entries()) expect(m.data?.message?.attributes?.jobKey).toBe(jobs[i]?.jobKey);
      for (const j of jobs) expect(j.source).toEqual(source);
      expect((await readSceneManifest(rt.backend.outputs, scene)).source.key).toBe(key);
    });

    it('uses the generation as the version token: a new upload of the same name is a new scene, its old event is stale', async () => {
      const s = await stack();
      const rt = s.runtime();
      const handler = createSceneHandler(rt);
      const first = await s.upload('incoming/again.tif', sceneBytes);
      const a = await handler(first);
      const file = s.clients.storage.bucket(s.sourceBucket).file('incoming/again.tif');
      await file.save(Buffer.from(sceneBytes), {
        resumable: false,
        preconditionOpts: { ifGenerationMatch: String(first.data?.generation) },
      });
      const [metadata] = await file.getMetadata();
      const second = storageEvent(metadata);
      expect(second.data?.generation).not.toBe(first.data?.generation);
      const b = await handler(second);
      expect(a.kind === 'fanned-out' && b.kind === 'fanned-out' && a.sceneKey !== b.sceneKey).toBe(true);
      // A late redelivery of the first event: its generation is gone, reads would see the second's bytes.
      expect(await handler(first)).toEqual({ kind: 'ignored', reason: 'stale-generation', key: 'incoming/again.tif' });
      await file.delete();
      expect(await handler(second)).toEqual({ kind: 'ignored', reason: 'object-gone', key: 'incoming/again.tif' });
    });

    it('ignores and counts other buckets, objects outside the prefix or suffix, and other event types', async () => {
      const s = await stack();
      const rt = s.runtime();
      const handler = createSceneHandler(rt);
      expect(await handler(await s.upload('elsewhere/scene.tif', sceneBytes))).toMatchObject({ kind: 'ignored', reason: 'filtered-out' });
      expect(await handler(await s.upload('incoming/readme.txt', sceneBytes))).toMatchObject({ kind: 'ignored', reason: 'filtered-out' });
      expect(await handler(await s.upload('incoming/x.tif', sceneBytes, s.outputBucket))).toMatchObject({
        kind: 'ignored',
        reason: 'other-bucket',
      });
      const deleted = storageEvent(
        { bucket: s.sourceBucket, name: 'incoming/x.tif', generation: '1' },
        'google.cloud.storage.object.v1.deleted',
      );
      expect(await handler(deleted)).toMatchObject({ kind: 'ignored', reason: 'other-event' });
      expect(rt.backend.telemetry.counters()).toMatchObject({ 'event-ignored': 4, enqueued: 0 });
      expect(await s.tileEvents()).toEqual([]);
    });

    it('acknowledges an event it can never process (not a raster, no generation) as poison instead of throwing', async () => {
      const s = await stack();
      const logs: string[] = [];
      const rt = s.runtime({ logs });
      const handler = createSceneHandler(rt);
      const notTiff = await s.upload('incoming/not-a-tiff.tif', new TextEncoder().encode('just text'));
      expect(await handler(notTiff)).toMatchObject({ kind: 'poison', code: 'NOT_A_RASTER' });
      expect(await handler(storageEvent({ bucket: s.sourceBucket, name: 'incoming/x.tif' }))).toMatchObject({
        kind: 'poison',
        code: 'INVALID_EVENT',
      });
      expect(rt.backend.telemetry.counters()).toMatchObject({ poison: 2, enqueued: 0 });
      expect(
        logsOf(logs)
          .filter((l) => l.event === 'scene-poison')
          .map((l) => l.level),
      ).toEqual(['ERROR', 'ERROR']);
      // Settled at once into the dead-letter topic, one entry each, with why.
      expect((await s.deadLetters()).map((m) => m.attributes['tessera-reason']).sort()).toEqual(['INVALID_EVENT', 'NOT_A_RASTER']);
    });
  });

  describe('tile handler', () => {
    it('dispatches a fan-out chunk on the tile topic: it publishes its windows once, and they are written', async () => {
      const s = await stack();
      const rt = s.runtime();
      const event = await s.upload('incoming/chunked.tif', sceneBytes);
      const source = sourceOf(event);
      // Two chunk messages of two windows each, as a grid too big for one invocation would get.
      expect(await fanOutScene(rt.backend, { source, params: TEST_PARAMS, chunkWindows: 2 })).toMatchObject({ enqueued: 0, chunks: 2 });
      const handler = createTileHandler(rt);
      const chunks = await s.tileEvents();
      expect(chunks).toHaveLength(2);
      for (const e of chunks) expect(await handler(e)).toMatchObject({ kind: 'ack', outcome: { kind: 'chunk-enqueued', enqueued: 2 } });
      const tiles = await s.tileEvents();
      expect(tiles).toHaveLength(GRID.count);
      for (const e of tiles) expect(await handler(e)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
      expect(rt.backend.telemetry.counters()).toMatchObject({ enqueued: GRID.count, written: GRID.count, poison: 0 });
    });

    it('replays a message without touching the output: generation and update time unchanged', async () => {
      const { s, events } = await stackWithTileEvents();
      const rt = s.runtime();
      const handler = createTileHandler(rt);
      const event = events[0];
      if (!event) throw new Error('setup failed');
      const job = parseTileJob(Buffer.from(event.data?.message?.data ?? '', 'base64').toString('utf8'));
      expect(await handler(event)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
      const first = await rt.backend.outputs.head(job.outputKey);
      await new Promise((r) => setTimeout(r, 1100)); // a rewrite would show a later update time
      expect(await handler(event)).toMatchObject({ kind: 'ack', outcome: { kind: 'claim-rejected', reason: 'done' } });
      const second = await rt.backend.outputs.head(job.outputKey);
      expect(second?.version).toBe(first?.version);
      expect(second?.lastModified).toBe(first?.lastModified);
      expect(rt.backend.telemetry.counters()).toMatchObject({ written: 1, committed: 1, 'claim-rejected': 1 });
    });

    it('a zombie writer whose lease was stolen finishes: its write is refused (412) and its commit is LeaseStolen at ERROR', async () => {
      const { s, events } = await stackWithTileEvents();
      const event = events[0];
      if (!event) throw new Error('setup failed');
      const job = parseTileJob(Buffer.from(event.data?.message?.data ?? '', 'base64').toString('utf8'));
      const clock = new FakeClock(Date.now());
      const logsA: string[] = [];
      const a = s.runtime({ owner: 'zombie-a', clock, logs: logsA });
      const b = s.runtime({ owner: 'worker-b', clock });
      let bOutcome: unknown;
      const zombie = createTileHandler(
        afterClaim(a, async () => {
          // Instance A hits the 540 s timeout but keeps running (GCF does not kill it). The lease
          // lapses; Pub/Sub redelivers the same message to instance B, which takes the job over.
          clock.advance(a.settings.leaseMs + clockSkewMarginMs(a.config) + 1); // and past the clock skew margin
          bOutcome = await createTileHandler(b)(pubsubEvent(eventMessage(event), s.tileSubscription, 2));
        }),
      );
      expect(await zombie(event)).toMatchObject({ kind: 'ack', outcome: { kind: 'lease-stolen' } });
      expect(bOutcome).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });

      expect(a.backend.telemetry.counters()).toMatchObject({ 'lease-stolen': 1, 'write-already-present': 1, written: 0, committed: 0 });
      expect(b.backend.telemetry.counters()).toMatchObject({ 'lease-taken-over': 1, written: 1, committed: 1 });
      expect(logsOf(logsA).find((l) => l.event === 'lease-stolen')).toMatchObject({ level: 'ERROR', jobKey: job.jobKey });
      const row = await b.backend.claims.get(job.jobKey);
      expect(row).toMatchObject({ state: 'COMMITTED', owner: `${event.id}@worker-b` });
      const objects = [];
      for await (const h of b.backend.outputs.list(outputKeys.tilePrefix(job.sceneKey))) objects.push(h);
      expect(objects.map((o) => o.key)).toEqual([job.outputKey]);
    });

    it('takes over, rather than waits for, the lease an earlier attempt of the same message holds: the backoff would dead-letter first', async () => {
      // 5 delivery attempts at least 10 s apart end long before an 840 s lease: waiting would send the job to the
      // dead-letter topic (shared/app/redelivery.ts). The earlier attempt here is even alive: both compute, one write lands.
      const { s, events } = await stackWithTileEvents();
      const event = events[0];
      if (!event) throw new Error('setup failed');
      const job = parseTileJob(Buffer.from(event.data?.message?.data ?? '', 'base64').toString('utf8'));
      const a = s.runtime({ owner: 'slow-a' });
      const b = s.runtime({ owner: 'worker-b' });
      let redelivery: Promise<unknown> | undefined;
      const slow = createTileHandler(
        afterClaim(a, async () => {
          redelivery = createTileHandler(b)(pubsubEvent(eventMessage(event), s.tileSubscription, 2));
          await redelivery.catch(() => undefined);
        }),
      );
      expect(await slow(event)).toMatchObject({ kind: 'ack', outcome: { kind: 'already-present' } });
      await expect(redelivery).resolves.toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
      expect(b.backend.telemetry.counters()).toMatchObject({ 'claim-rejected': 1, 'lease-taken-over': 1, written: 1, committed: 1 });
      // Under the earlier attempt's owner: its own commit then succeeds too, no false lease-stolen alarm.
      expect(a.backend.telemetry.counters()).toMatchObject({ committed: 1, 'lease-stolen': 0 });
      expect(await b.backend.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: `${event.id}@slow-a` });
      const objects = [];
      for await (const h of b.backend.outputs.list(outputKeys.tilePrefix(job.sceneKey))) objects.push(h.key);
      expect(objects).toEqual([job.outputKey]);
    });

    it('after a crash right after the claim, the first redelivery completes the job; nothing reaches the dead-letter topic', async () => {
      const { s, events } = await stackWithTileEvents();
      const event = events[0];
      if (!event) throw new Error('setup failed');
      const job = parseTileJob(Buffer.from(event.data?.message?.data ?? '', 'base64').toString('utf8'));
      const dead = s.runtime({ owner: 'dead-a' });
      // The instance dies right after its claim: the hook never returns.
      void createTileHandler(afterClaim(dead, () => new Promise<void>(() => {})))(event);
      for (let i = 0; i < 50 && (await dead.backend.claims.get(job.jobKey)) === undefined; i++) await new Promise((r) => setTimeout(r, 50));
      const b = s.runtime({ owner: 'worker-b' });
      expect(await createTileHandler(b)(pubsubEvent(eventMessage(event), s.tileSubscription, 2))).toMatchObject({
        kind: 'ack',
        outcome: { kind: 'written' },
      });
      expect(await b.backend.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED' });
      expect(await s.deadLetters()).toEqual([]);
    });

    it.each([
      ['not JSON', () => Buffer.from('{"v":1,')],
      ['not a tile job', () => Buffer.from('{"v":1,"this":"is not a tile job"}')],
      ['not UTF-8', () => Buffer.from([0xff, 0xfe, 0xfd])],
    ])('publishes a message that is %s to the dead-letter topic and acknowledges it', async (_label, bytes) => {
      const s = await stack();
      const logs: string[] = [];
      const rt = s.runtime({ logs });
      await s.clients.pubsub.topic(s.env.TESSERA_TILE_QUEUE as string).publishMessage({ data: bytes(), attributes: { jobKey: 'bogus' } });
      const [pulled] = await s.tileEvents();
      if (!pulled) throw new Error('setup failed');
      const outcome = await createTileHandler(rt)(pulled);
      expect(outcome).toMatchObject({ kind: 'dead-lettered', reason: 'INVALID_EVENT' });
      const dead = await s.deadLetters();
      expect(dead).toHaveLength(1);
      expect(dead[0]?.data).toEqual(bytes()); // the original bytes, unchanged, for an operator to inspect
      expect(dead[0]?.attributes).toMatchObject({ jobKey: 'bogus', 'tessera-reason': 'INVALID_EVENT', 'tessera-message-id': pulled.id });
      expect(rt.backend.telemetry.counters()).toMatchObject({ poison: 1, claimed: 0, written: 0 });
      expect(logsOf(logs).find((l) => l.event === 'poison-message')).toMatchObject({ level: 'ERROR' });
    });

    it('dead-letters a job whose window was altered in flight, and claims and writes nothing for it', async () => {
      const { s, events } = await stackWithTileEvents();
      const rt = s.runtime();
      const event = events[0];
      if (!event) throw new Error('setup failed');
      const original = JSON.parse(Buffer.from(event.data?.message?.data ?? '', 'base64').toString('utf8')) as TileJob;
      const tampered = { ...original, window: { ...original.window, row: original.window.row + 7 } };
      const text = JSON.stringify(tampered);
      const poisoned = pubsubEvent({ ...eventMessage(event), data: Buffer.from(text), text }, s.tileSubscription);
      expect(await createTileHandler(rt)(poisoned)).toMatchObject({ kind: 'dead-lettered', reason: 'INVALID_EVENT' });
      expect(await rt.backend.claims.get(original.jobKey)).toBeUndefined();
      expect(await rt.backend.outputs.head(original.outputKey)).toBeUndefined();
      expect((await s.deadLetters()).map((m) => m.attributes['tessera-reason'])).toEqual(['INVALID_EVENT']);
    });
  });
});

/** The pulled-message view of a tile CloudEvent, to build its redelivery. */
function eventMessage(event: ReturnType<typeof pubsubEvent>): PulledMessage {
  const m = event.data?.message;
  const data = Buffer.from(m?.data ?? '', 'base64');
  return { data, text: data.toString('utf8'), attributes: m?.attributes ?? {}, messageId: m?.messageId ?? event.id };
}
