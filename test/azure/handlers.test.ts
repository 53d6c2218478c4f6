import { BlobServiceClient } from '@azure/storage-blob';
import { describe, expect, inject, it } from 'vitest';
import type { AzureDelivery } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import type { AzureRuntime } from '../../functions/azure/compose.js';
import { makeCleanupHandler } from '../../functions/azure/handlers/cleanup.handler.js';
import { makeMosaicHandler } from '../../functions/azure/handlers/mosaic.handler.js';
import { makeSceneHandler, type SceneEventResult } from '../../functions/azure/handlers/scene.handler.js';
import { makeTileHandler } from '../../functions/azure/handlers/tile.handler.js';
import type { DeliveryVerdict } from '../../shared/app/deliveries.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { sceneLifecycleKeys } from '../../shared/app/scene-manifest.js';
import type { JsonTelemetry } from '../../shared/app/telemetry.js';
import { makeTileJob, toJobMessage } from '../../shared/app/tile-job.js';
import { canonicalJson } from '../../shared/domain/canonical-json.js';
import { outputKeys, sceneKey, tileJobKey } from '../../shared/domain/job-key.js';
import { decodeEventKey } from '../../shared/domain/object-key.js';
import { clockSkewMarginMs } from '../../shared/domain/runtime-config.js';
import { tileGrid, windows } from '../../shared/domain/tile-grid.js';
import type { ObjectHead } from '../../shared/ports/object-store.port.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshQueue } from './azurite.js';
import { blobCreatedEvent, type CapturedLog, invocationContext, queueTriggerArgs, runQueueHost, timerPayload } from './functions-host.js';
import { SOURCE_PREFIX, TEST_PARAMS, type TestStack, testScene, testStack } from './stack.js';

const blobEndpoint = () => requireEndpoints(inject('emulators'), 'azure').blob;

/** Upload a source scene the way a user would (plain SDK upload) and return the event Event Grid would send. */
async function uploadScene(stack: TestStack, rt: AzureRuntime, key: string, bytes = testScene()) {
  const r = await rt.backend.sources.putIfAbsent(key, bytes, { contentType: 'image/tiff' });
  if (r.kind !== 'written') throw new Error(`fixture ${key} already exists`);
  return { etag: r.version, event: blobCreatedEvent(blobEndpoint(), stack.sourceContainer, key, r.version, bytes.byteLength) };
}

async function heads(rt: AzureRuntime, prefix: string): Promise<ObjectHead[]> {
  const out: ObjectHead[] = [];
  for await (const h of rt.backend.outputs.list(prefix)) out.push(h);
  return out.sort((a, b) => a.key.localeCompare(b.key));
}

async function sceneEvent(
  rt: AzureRuntime,
  event: ReturnType<typeof blobCreatedEvent>,
  logs: CapturedLog[] = [],
): Promise<SceneEventResult> {
  const invocation = invocationContext('scene', 'eventGridTrigger');
  try {
    return (await makeSceneHandler(() => rt)(event, invocation.context)) as SceneEventResult;
  } finally {
    logs.push(...invocation.logs);
  }
}

/** One queue-trigger invocation of the tile worker for a message received from Azurite. */
async function invokeTile(rt: AzureRuntime, d: AzureDelivery, logs: CapturedLog[] = []): Promise<DeliveryVerdict> {
  const { entry, metadata } = queueTriggerArgs(d);
  const invocation = invocationContext('tile', 'queueTrigger', metadata);
  try {
    return (await makeTileHandler(() => rt)(entry, invocation.context)) as DeliveryVerdict;
  } finally {
    logs.push(...invocation.logs);
  }
}

const counters = (rt: AzureRuntime) => (rt.backend.telemetry as JsonTelemetry).counters();

const GRID = tileGrid(64, 48, 32);

describe('Azure handlers on Azurite', () => {
  describe('scene (Event Grid BlobCreated)', () => {
    it('fans a new source blob out into one queue message per window, keyed by its ETag', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const key = `${SOURCE_PREFIX}T31UDQ/B08.tif`;
      const { etag, event } = await uploadScene(stack, rt, key);
      const r = await sceneEvent(rt, event);
      const expectedScene = sceneKey({ bucket: stack.sourceContainer, key, versionToken: etag }, TEST_PARAMS);
      expect(r).toEqual({ kind: 'fanned-out', sceneKey: expectedScene, enqueued: GRID.count, manifest: 'written' });
      const messages = await rt.backend.queue.receive(32, 30_000);
      expect(messages.map((m) => m.jobKey).sort()).toEqual([...windows(GRID)].map((w) => tileJobKey(expectedScene, w)).sort());
      expect(await rt.backend.outputs.head(outputKeys.sceneManifest(expectedScene))).toBeDefined();
    });

    it('fans a duplicate delivery of the event out under the same scene key and leaves the manifest alone', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const { event } = await uploadScene(stack, rt, `${SOURCE_PREFIX}dup.tif`);
      const first = await sceneEvent(rt, event);
      const manifestBefore =
        first.kind === 'fanned-out' ? await rt.backend.outputs.head(outputKeys.sceneManifest(first.sceneKey)) : undefined;
      const second = await sceneEvent(rt, event);
      expect(second).toMatchObject({ kind: 'fanned-out', manifest: 'already-present' });
      if (first.kind !== 'fanned-out' || second.kind !== 'fanned-out') throw new Error('not fanned out');
      expect(second.sceneKey).toBe(first.sceneKey);
      expect((await rt.backend.outputs.head(outputKeys.sceneManifest(first.sceneKey)))?.version).toBe(manifestBefore?.version);
    });

    it.each([
      [
        'a blob outside the source prefix',
        (s: TestStack, key: string, etag: string) => blobCreatedEvent(blobEndpoint(), s.sourceContainer, `elsewhere/${key}`, etag, 1),
      ],
      [
        'a blob without the source suffix',
        (s: TestStack, key: string, etag: string) => blobCreatedEvent(blobEndpoint(), s.sourceContainer, `${key}.aux.xml`, etag, 1),
      ],
      [
        'a blob in the output container',
        (s: TestStack, key: string, etag: string) => blobCreatedEvent(blobEndpoint(), s.outputContainer, key, etag, 1),
      ],
      [
        'an ADLS CreateFile announcement',
        (s: TestStack, key: string, etag: string) => blobCreatedEvent(blobEndpoint(), s.sourceContainer, key, etag, 0, 'CreateFile'),
      ],
      ...['SftpCreate', 'SftpWrite', 'PutBlockFromURL', 'SomeFutureApi'].map(
        (api) =>
          [
            `a ${api} event (it commits no bytes, or is not a known commit)`,
            (s: TestStack, key: string, etag: string) => blobCreatedEvent(blobEndpoint(), s.sourceContainer, key, etag, 1, api),
          ] as [string, (s: TestStack, key: string, etag: string) => ReturnType<typeof blobCreatedEvent>],
      ),
      [
        'an event for a blob deleted since',
        (s: TestStack, key: string, etag: string) => blobCreatedEvent(blobEndpoint(), s.sourceContainer, `${key}-gone.tif`, etag, 1),
      ],
    ])('ignores %s and enqueues nothing', async (_label, makeEvent) => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const key = `${SOURCE_PREFIX}filtered.tif`;
      const { etag } = await uploadScene(stack, rt, key);
      const logs: CapturedLog[] = [];
      const r = await sceneEvent(rt, makeEvent(stack, key, etag), logs);
      expect(r.kind).toBe('ignored');
      expect(await rt.backend.queue.receive(32, 1000)).toEqual([]);
      expect(await heads(rt, 'scenes/')).toEqual([]);
      expect(counters(rt)['event-ignored']).toBe(1);
      expect(logs.filter((l) => l.level === 'error')).toEqual([]);
    });

    it('takes events from the scene queue as Event Grid writes them there (base64 JSON) and fans out', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const { queue: scenes } = await freshQueue('scenes');
      const key = `${SOURCE_PREFIX}queued.tif`;
      const { etag, event } = await uploadScene(stack, rt, key);
      await scenes.sendBatch([{ jobKey: event.id, body: JSON.stringify(event) }]);
      const run = await runQueueHost(
        scenes,
        makeSceneHandler(() => rt),
        { functionName: 'scene' },
      );
      expect(run.invocations.map((i) => i.result)).toEqual(['succeeded']);
      const local = sceneKey({ bucket: stack.sourceContainer, key, versionToken: etag }, TEST_PARAMS);
      expect((await rt.backend.queue.receive(32, 30_000)).map((m) => m.jobKey).sort()).toEqual(
        [...windows(GRID)].map((w) => tileJobKey(local, w)).sort(),
      );
    });

    it.each(['PutBlob', 'PutBlockList', 'CopyBlob', 'FlushWithClose', 'SftpCommit'])(
      'starts a scene for a %s event, an API that commits the blob',
      async (api) => {
        const stack = await testStack();
        const { rt } = stack.runtime();
        const key = `${SOURCE_PREFIX}committed-${api}.tif`;
        const { etag } = await uploadScene(stack, rt, key);
        const r = await sceneEvent(rt, blobCreatedEvent(blobEndpoint(), stack.sourceContainer, key, etag, 1, api));
        expect(r).toMatchObject({
          kind: 'fanned-out',
          sceneKey: sceneKey({ bucket: stack.sourceContainer, key, versionToken: etag }, TEST_PARAMS),
        });
      },
    );

    it("keys a redelivery by the event's ETag after a metadata update: the same scene, read from the first delivery's snapshot", async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const key = `${SOURCE_PREFIX}tagged.tif`;
      const { etag, event } = await uploadScene(stack, rt, key);
      const first = await sceneEvent(rt, event);
      const scene = sceneKey({ bucket: stack.sourceContainer, key, versionToken: etag }, TEST_PARAMS);
      expect(first).toMatchObject({ kind: 'fanned-out', sceneKey: scene, manifest: 'written' });
      // A metadata (or property) update after the upload: the ETag changes, the bytes do not, and no event follows.
      const blob = BlobServiceClient.fromConnectionString(stack.env.TESSERA_AZURE_STORAGE_ACCOUNT as string)
        .getContainerClient(stack.sourceContainer)
        .getBlobClient(key);
      const updated = (await blob.setMetadata({ reviewed: 'yes' })).etag as string;
      expect(updated).not.toBe(etag);
      // The original event again (Event Grid redelivers, or the scene queue does): the same scene key, nothing new.
      expect(await sceneEvent(rt, event)).toMatchObject({ kind: 'fanned-out', sceneKey: scene, manifest: 'already-present' });
    });

    it('ignores and counts an event whose ETag names no stored state (updated before its first delivery; Azurite keeps no versions)', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const key = `${SOURCE_PREFIX}touched.tif`;
      const { event } = await uploadScene(stack, rt, key);
      const blob = BlobServiceClient.fromConnectionString(stack.env.TESSERA_AZURE_STORAGE_ACCOUNT as string)
        .getContainerClient(stack.sourceContainer)
        .getBlobClient(key);
      await blob.setMetadata({ reviewed: 'yes' });
      // On Azure, versioning keeps the event's state as a blob version and the pin reads it (docs/azure.md); Azurite
      // keeps none, so here the event names nothing stored: stale, never a scene under the live ETag.
      const r = await sceneEvent(rt, event);
      expect(r).toMatchObject({ kind: 'ignored', reason: 'the event names a blob state no longer stored' });
      expect(counters(rt)['event-stale']).toBe(1);
      expect(await heads(rt, '')).toEqual([]);
    });

    it('logs a source that is not a raster at ERROR and puts its event on <scene queue>-poison itself, after one dequeue', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const { queue: scenes } = await freshQueue('scenes');
      const { event } = await uploadScene(stack, rt, `${SOURCE_PREFIX}not-a-tiff.tif`, new TextEncoder().encode('this is not a TIFF'));
      await scenes.sendBatch([{ jobKey: event.id, body: JSON.stringify(event) }]);
      const run = await runQueueHost(
        scenes,
        makeSceneHandler(() => rt),
        { functionName: 'scene' },
      );
      expect(run.invocations.map((i) => i.result)).toEqual(['succeeded']);
      expect(run.logs.filter((l) => l.level === 'error' && l.text.includes('"scene-rejected"'))).toHaveLength(1);
      expect((await scenes.deadLetters()).map((m) => JSON.parse(m.body).id)).toEqual([event.id]);
      expect(await rt.backend.queue.receive(32, 1000)).toEqual([]);
      expect(await heads(rt, '')).toEqual([]);
    });

    it('settles a storage failure no retry can cure (the output container is gone) as poison at once, like AWS and GCP', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const { event } = await uploadScene(stack, rt, `${SOURCE_PREFIX}retry.tif`);
      // The output container disappears: the manifest write fails with 404 ContainerNotFound.
      await BlobServiceClient.fromConnectionString(stack.env.TESSERA_AZURE_STORAGE_ACCOUNT as string)
        .getContainerClient(stack.outputContainer)
        .delete();
      // The adapter calls a missing container non-retryable: the event goes to `<scene queue>-poison` for a replay once it exists.
      expect(await sceneEvent(rt, event)).toMatchObject({
        kind: 'poison',
        code: 'ADAPTER_FAILURE',
        message: expect.stringMatching(/ContainerNotFound|does not exist/),
      });
    });

    it.each([
      ['a plus sign', `${SOURCE_PREFIX}a+b.tif`],
      ['a literal %2F', `${SOURCE_PREFIX}T31UDQ%2FB08.tif`],
      ['unicode', `${SOURCE_PREFIX}Zürich/日本/é.tif`],
      ['a space', `${SOURCE_PREFIX}scene one.tif`],
    ])('gives a blob named with %s the job keys the local computation gives its literal name', async (_label, key) => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const { etag, event } = await uploadScene(stack, rt, key);
      // Event Grid writes the stored name into the subject, so no S3-style decoding may be applied.
      expect(event.subject.endsWith(`/blobs/${key}`)).toBe(true);
      const r = await sceneEvent(rt, event);
      const local = sceneKey({ bucket: stack.sourceContainer, key, versionToken: etag }, TEST_PARAMS);
      expect(r).toMatchObject({ kind: 'fanned-out', sceneKey: local });
      const jobs = await rt.backend.queue.receive(32, 30_000);
      expect(jobs.map((j) => j.jobKey).sort()).toEqual([...windows(GRID)].map((w) => tileJobKey(local, w)).sort());
      if (key.includes('+') || key.includes('%2F')) {
        expect(sceneKey({ bucket: stack.sourceContainer, key: decodeEventKey(key), versionToken: etag }, TEST_PARAMS)).not.toBe(local);
      }
    });
  });

  describe('tile worker (Storage Queue trigger)', () => {
    async function fannedOut(stack: TestStack, rt: AzureRuntime, name = 'scene.tif') {
      const { event } = await uploadScene(stack, rt, `${SOURCE_PREFIX}${name}`);
      const r = await sceneEvent(rt, event);
      if (r.kind !== 'fanned-out') throw new Error(`fan-out failed: ${JSON.stringify(r)}`);
      return r.sceneKey;
    }

    it('writes and commits every tile of a scene, and the mosaic timer (the sweep) leaves it pending until the last tile lands', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const scene = await fannedOut(stack, rt);
      const mosaic = makeMosaicHandler(() => rt);
      const logs: CapturedLog[] = [];
      const sweeps: { assembled: number; pending: number }[] = [];
      // One message at a time, a sweep after each tile: no tile write triggers anything.
      for (let i = 0; i < GRID.count; i++) {
        const [d] = await rt.backend.queue.receive(1, 600_000);
        if (!d) throw new Error(`message ${i} missing`);
        expect(await invokeTile(rt, d, logs)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
        await rt.backend.queue.ack(d);
        const { context } = invocationContext('mosaic', 'timerTrigger');
        const r = await mosaic(timerPayload(), context);
        sweeps.push({ assembled: r.assembled.length, pending: r.pending.length });
      }
      expect(sweeps).toEqual([...Array(GRID.count - 1).fill({ assembled: 0, pending: 1 }), { assembled: 1, pending: 0 }]);
      const tiles = await heads(rt, outputKeys.tilePrefix(scene));
      expect(tiles.map((t) => t.key)).toEqual([...windows(GRID)].map((w) => outputKeys.tile(scene, w)).sort());
      for (const w of windows(GRID)) expect(await rt.backend.claims.get(tileJobKey(scene, w))).toMatchObject({ state: 'COMMITTED' });
      expect(await rt.backend.outputs.head(outputKeys.mosaic(scene))).toBeDefined();
      expect(counters(rt)).toMatchObject({ claimed: GRID.count, written: GRID.count, committed: GRID.count, 'lease-stolen': 0 });
      expect(logs.filter((l) => l.level === 'error')).toEqual([]);
    });

    it('dispatches a fan-out chunk on the tile queue: it enqueues its windows once, and they are written', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const key = `${SOURCE_PREFIX}chunked.tif`;
      const { etag } = await uploadScene(stack, rt, key);
      const source = { bucket: stack.sourceContainer, key, versionToken: etag };
      // Two chunk messages of two windows each, as a grid too big for one invocation would get.
      expect(await fanOutScene(rt.backend, { source, params: TEST_PARAMS, chunkWindows: 2 })).toMatchObject({ enqueued: 0, chunks: 2 });
      const run = await runQueueHost(
        rt.backend.queue,
        makeTileHandler(() => rt),
      );
      expect(run.invocations.map((i) => i.result)).toEqual(Array(2 + GRID.count).fill('succeeded'));
      expect(counters(rt)).toMatchObject({ enqueued: GRID.count, written: GRID.count, committed: GRID.count, poison: 0 });
      const scene = sceneKey(source, TEST_PARAMS);
      expect((await heads(rt, outputKeys.tilePrefix(scene))).length).toBe(GRID.count);
    });

    it('replays a whole scene without changing any tile ETag and acks every duplicate at the claim', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const scene = await fannedOut(stack, rt);
      await runQueueHost(
        rt.backend.queue,
        makeTileHandler(() => rt),
      );
      const before = await heads(rt, outputKeys.tilePrefix(scene));
      // The same jobs delivered again (a duplicate fan-out), handled by another instance.
      const source = JSON.parse(new TextDecoder().decode(await rt.backend.outputs.get(outputKeys.sceneManifest(scene)))).source;
      await rt.backend.queue.sendBatch([...windows(GRID)].map((w) => toJobMessage(makeTileJob(scene, source, TEST_PARAMS, GRID, w))));
      const other = stack.runtime('instance-2');
      const replay = await runQueueHost(
        other.rt.backend.queue,
        makeTileHandler(() => other.rt),
      );
      expect(replay.invocations.map((i) => i.result)).toEqual(Array(GRID.count).fill('succeeded'));
      expect(await heads(rt, outputKeys.tilePrefix(scene))).toEqual(before);
      expect(await rt.backend.queue.deadLetters()).toEqual([]);
      expect(counters(other.rt)).toMatchObject({ 'claim-rejected': GRID.count, claimed: 0, written: 0 });
      expect(replay.logs.filter((l) => l.text.includes('"claim-rejected"') && l.text.includes('"reason":"done"'))).toHaveLength(GRID.count);
    });

    it('a worker whose lease was taken over fails its commit with LeaseStolen, and exactly one output exists', async () => {
      const stack = await testStack();
      const a = stack.runtime('instance-a');
      const b = stack.runtime('instance-b');
      const scene = await fannedOut(stack, a.rt);
      // Only one job matters here; the same job is delivered twice (a duplicate message).
      const all = await a.rt.backend.queue.receive(32, 600_000);
      const [job] = all;
      if (!job) throw new Error('nothing queued');
      await a.rt.backend.queue.sendBatch([{ jobKey: job.jobKey, body: job.body }]);
      const [dup] = await a.rt.backend.queue.receive(1, 600_000);
      if (!dup) throw new Error('duplicate not received');

      const gate = () => {
        let open!: () => void;
        const opened = new Promise<void>((r) => {
          open = r;
        });
        return { open, opened };
      };
      const aClaimed = gate();
      const aMayWrite = gate();
      const bClaimed = gate();
      const bMayWrite = gate();
      const rtA: AzureRuntime = {
        ...a.rt,
        settings: {
          ...a.rt.settings,
          hooks: {
            afterClaim: async () => {
              aClaimed.open();
              await aMayWrite.opened;
            },
          },
        },
      };
      const rtB: AzureRuntime = {
        ...b.rt,
        settings: {
          ...b.rt.settings,
          hooks: {
            afterClaim: async () => {
              bClaimed.open();
              await bMayWrite.opened;
            },
          },
        },
      };
      const logsA: CapturedLog[] = [];
      const logsB: CapturedLog[] = [];
      const runA = invokeTile(rtA, job, logsA);
      await aClaimed.opened;
      stack.clock.advance(rtA.settings.leaseMs + clockSkewMarginMs(rtA.config) + 1); // A stalls past its lease (and the skew margin)
      const runB = invokeTile(rtB, dup, logsB);
      await bClaimed.opened; // B took the lapsed lease over
      aMayWrite.open();
      const verdictA = await runA; // A writes first, then its commit finds B's row
      bMayWrite.open();
      const verdictB = await runB;

      expect(verdictA).toMatchObject({ kind: 'ack', outcome: { kind: 'lease-stolen', jobKey: job.jobKey } });
      expect(verdictB).toMatchObject({ kind: 'ack', outcome: { kind: 'already-present', jobKey: job.jobKey } });
      expect(logsA.some((l) => l.level === 'error' && l.text.includes('"event":"lease-stolen"'))).toBe(true);
      expect(logsB.some((l) => l.level === 'warning' && l.text.includes('"event":"lease-taken-over"'))).toBe(true);
      expect(counters(a.rt)).toMatchObject({ 'lease-stolen': 1, written: 1, committed: 0 });
      expect(counters(b.rt)).toMatchObject({ 'lease-taken-over': 1, 'write-already-present': 1, committed: 1 });
      const outputs = await heads(a.rt, outputKeys.tilePrefix(scene));
      expect(outputs).toHaveLength(1);
      expect(await a.rt.backend.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: expect.stringContaining('instance-b') });
    });

    it.each([
      ['text that is not JSON', 'definitely not a tile job'],
      ['JSON that is not a tile job', '{"v":1,"jobKey":"abc"}'],
    ])('moves %s to <queue>-poison itself at the first dequeue, returns, and writes nothing', async (_label, body) => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      await rt.backend.queue.sendBatch([{ jobKey: '', body }]);
      const run = await runQueueHost(
        rt.backend.queue,
        makeTileHandler(() => rt),
      );
      expect(run.invocations.map((i) => [i.dequeueCount, i.result])).toEqual([[1, 'succeeded']]);
      // One entry: the message as the trigger handed it over (JSON canonically re-serialised, as the host parsed it).
      expect((await rt.backend.queue.deadLetters()).map((m) => m.body)).toEqual([
        body.startsWith('{') ? canonicalJson(JSON.parse(body)) : body,
      ]);
      expect(run.logs.some((l) => l.level === 'warning' && l.text.includes('"poison-dead-lettered"'))).toBe(true);
      expect(await heads(rt, '')).toEqual([]);
      const claims = [];
      for await (const row of rt.backend.claims.list()) claims.push(row);
      expect(claims).toEqual([]);
    });

    it('settles a job whose source is gone once, as source-changed: acked, nothing written, its claim released, its scene superseded', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const scene = await fannedOut(stack, rt, 'vanishing.tif');
      const queued = await rt.backend.queue.receive(32, 600_000);
      const [victim, ...rest] = queued;
      if (!victim) throw new Error('nothing queued');
      for (const d of rest) await rt.backend.queue.ack(d);
      await rt.backend.queue.release(victim);
      // The blob and the snapshot fan-out pinned it with are both gone: no version of the job's is left to read.
      await BlobServiceClient.fromConnectionString(stack.env.TESSERA_AZURE_STORAGE_ACCOUNT as string)
        .getContainerClient(stack.sourceContainer)
        .getBlobClient(`${SOURCE_PREFIX}vanishing.tif`)
        .delete({ deleteSnapshots: 'include' });
      // A fresh instance: nothing of the scene is cached in its process.
      const worker = stack.runtime('instance-2').rt;
      const run = await runQueueHost(
        worker.backend.queue,
        makeTileHandler(() => worker),
      );
      // Before pinned reads: four failed dequeues and the poison queue (an endless-retry class of failure).
      expect(run.invocations.map((i) => i.result)).toEqual(['succeeded']);
      expect(await rt.backend.queue.deadLetters()).toEqual([]);
      expect(counters(worker)).toMatchObject({ 'source-changed': 1, poison: 0, written: 0 });
      expect(await heads(rt, outputKeys.tilePrefix(scene))).toEqual([]);
      expect(await rt.backend.outputs.head(sceneLifecycleKeys.superseded(scene))).toBeDefined();
      const row = await rt.backend.claims.get(victim.jobKey);
      expect(row?.state).toBe('CLAIMED');
      expect(row?.leaseUntil ?? Number.POSITIVE_INFINITY).toBeLessThan(stack.clock.now());
    });

    describe("a delivery that meets the live lease of its own message's earlier attempt (it died after its claim)", () => {
      async function heldByEarlierAttempt(stack: TestStack, rt: AzureRuntime) {
        await fannedOut(stack, rt, 'held.tif');
        const [d, ...rest] = await rt.backend.queue.receive(32, 600_000);
        if (!d) throw new Error('nothing queued');
        for (const x of rest) await rt.backend.queue.ack(x);
        const now = stack.clock.now();
        await rt.backend.claims.claim({
          jobId: d.jobKey,
          owner: `${d.deliveryId}@dead-instance`,
          now,
          leaseUntil: now + rt.settings.leaseMs,
          expiresAt: now + rt.settings.retentionMs,
        });
        return d;
      }

      it("throws (retry) while the host's remaining retries, visibilityTimeout apart, reach past the lease", async () => {
        const stack = await testStack();
        const { rt } = stack.runtime();
        const d = await heldByEarlierAttempt(stack, rt);
        // Second dequeue: three more, 330 s apart (990 s), outlast the 900 s lease.
        await expect(invokeTile(rt, { ...d, receiveCount: 2 })).rejects.toThrow(/earlier attempt of delivery .* holds the lease/);
        expect(counters(rt)).toMatchObject({ 'claim-rejected': 1, written: 0 });
      });

      it('on the last dequeue the host allows, takes the stale lease over and writes instead of going to <queue>-poison', async () => {
        const stack = await testStack();
        const { rt } = stack.runtime();
        const d = await heldByEarlierAttempt(stack, rt);
        const last = { ...d, receiveCount: rt.host.maxDequeueCount };
        expect(await invokeTile(rt, last)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
        expect(counters(rt)).toMatchObject({ 'lease-taken-over': 1, written: 1, committed: 1 });
        expect(await rt.backend.claims.get(d.jobKey)).toMatchObject({ state: 'COMMITTED', owner: `${d.deliveryId}@dead-instance` });
        expect(await rt.backend.queue.deadLetters()).toEqual([]);
      });
    });

    it('reads the job from the parsed queue entry, not from the camel-cased triggerMetadata.queueTrigger', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      await fannedOut(stack, rt);
      const [d] = await rt.backend.queue.receive(1, 600_000);
      if (!d) throw new Error('nothing queued');
      const { entry, metadata } = queueTriggerArgs(d);
      // The library lower-cases the first letter of every key inside parsed metadata: B04 becomes b04.
      expect(JSON.stringify(metadata.queueTrigger)).toContain('"b04"');
      const { context } = invocationContext('tile', 'queueTrigger', metadata);
      expect(await makeTileHandler(() => rt)(entry, context)).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
    });
  });

  describe('cleanup (timer)', () => {
    it('deletes claim rows past their retention and keeps the rest', async () => {
      const stack = await testStack();
      const { rt } = stack.runtime();
      const now = stack.clock.now();
      const old = tileJobKey('a'.repeat(64), { row: 0, col: 0 });
      const recent = tileJobKey('a'.repeat(64), { row: 0, col: 1 });
      await rt.backend.claims.claim({ jobId: old, owner: 'w', now: now - 10_000_000, leaseUntil: now - 9_000_000, expiresAt: now - 1 });
      await rt.backend.claims.claim({ jobId: recent, owner: 'w', now, leaseUntil: now + 1000, expiresAt: now + 86_400_000 });
      const { context } = invocationContext('cleanup', 'timerTrigger');
      expect(await makeCleanupHandler(() => rt)(timerPayload(), context)).toEqual({ deleted: 1, skipped: 0 });
      expect(await rt.backend.claims.get(old)).toBeUndefined();
      expect(await rt.backend.claims.get(recent)).toBeDefined();
    });
  });
});
