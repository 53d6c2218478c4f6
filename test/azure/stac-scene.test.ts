import type { StorageQueueHandler } from '@azure/functions';
import { describe, expect, inject, it } from 'vitest';
import type { AzureRuntime } from '../../functions/azure/compose.js';
import { makeSceneHandler } from '../../functions/azure/handlers/scene.handler.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import type { JsonTelemetry } from '../../shared/app/telemetry.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshQueue } from './azurite.js';
import { blobCreatedEvent, runQueueHost } from './functions-host.js';
import { SOURCE_PREFIX, TEST_PARAMS, type TestStack, testScene, testStack } from './stack.js';

// The Event Grid -> Storage Queue scene trigger of a STAC stack (shared/app/stac-scene.ts, docs/multi-file-scenes.md)
// on Azurite, driven the way the host's queue listener drives it (dequeue counts, <queue>-poison).

const GRID = tileGrid(64, 48, TEST_PARAMS.tile_px as number);
const DIR = `${SOURCE_PREFIX}S2B_T31UDQ_20240601`;
const STAC_ENV = { [ENV.sourceSuffix]: '.json', [ENV.stacAssets]: '{"B04":"B04","B08":"nir08"}' };
const blobEndpoint = () => requireEndpoints(inject('emulators'), 'azure').blob;
const counters = (rt: AzureRuntime) => (rt.backend.telemetry as JsonTelemetry).counters();

/** A Landsat-like item: bands picked by eo:bands name (B04) and by common name (nir08). */
const item = () =>
  new TextEncoder().encode(
    JSON.stringify({
      type: 'Feature',
      stac_version: '1.0.0',
      id: 'S2B_T31UDQ_20240601',
      properties: { datetime: null, start_datetime: '2024-06-01T10:56:00Z', end_datetime: '2024-06-01T10:57:00Z' },
      assets: {
        red: { href: './red.tif', type: 'image/tiff; application=geotiff', 'eo:bands': [{ name: 'B04', common_name: 'red' }] },
        nir: { href: './Zürich nir.tif', type: 'image/tiff; application=geotiff', 'eo:bands': [{ name: 'B8A', common_name: 'nir08' }] },
      },
    }),
  );

async function put(stack: TestStack, rt: AzureRuntime, key: string, bytes: Uint8Array) {
  const r = await rt.backend.sources.putIfAbsent(key, bytes);
  if (r.kind !== 'written') throw new Error(`fixture ${key} already exists`);
  return blobCreatedEvent(blobEndpoint(), stack.sourceContainer, key, r.version, bytes.byteLength);
}

describe('Azure scene handler on a STAC stack (Azurite, host-driven scene queue)', () => {
  it('retries an item whose band has not landed (the host dequeues it again), then fans it out once the band is there', async () => {
    const stack = await testStack();
    const { rt } = stack.runtime('instance-1', STAC_ENV);
    const { queue: scenes } = await freshQueue('scenes');
    const red = await put(stack, rt, `${DIR}/red.tif`, testScene(1));
    const itemEvent = await put(stack, rt, `${DIR}/item.json`, item());
    await scenes.sendBatch([
      { jobKey: red.id, body: JSON.stringify(red) },
      { jobKey: itemEvent.id, body: JSON.stringify(itemEvent) },
    ]);
    const handler = makeSceneHandler(() => rt);
    let itemDeliveries = 0;
    // The band lands while the item waits for its second dequeue.
    const host: StorageQueueHandler<unknown> = async (entry, context) => {
      if (JSON.stringify(entry).includes('item.json') && ++itemDeliveries === 2)
        await put(stack, rt, `${DIR}/Zürich nir.tif`, testScene(2));
      return handler(entry, context);
    };
    const run = await runQueueHost(scenes, host, { functionName: 'scene', batchSize: 1 });
    expect(run.invocations.map((i) => `${i.dequeueCount}:${i.result}`)).toEqual(['1:succeeded', '1:failed', '2:succeeded']);
    expect(counters(rt)).toMatchObject({ 'scene-incomplete': 1, 'event-ignored': 1, enqueued: GRID.count, poison: 0 });
    expect(await scenes.deadLetters()).toEqual([]);
    const jobs = await rt.backend.queue.receive(32, 30_000);
    expect(jobs).toHaveLength(GRID.count);
    const manifest = await readSceneManifest(rt.backend.outputs, JSON.parse(jobs[0]?.body ?? '{}').sceneKey);
    expect(manifest.source.assets).toMatchObject({ B04: { key: `${DIR}/red.tif` }, B08: { key: `${DIR}/Zürich nir.tif` } });
    expect(manifest.params.bands).toEqual({ B04: 1, B08: 1 });
  });

  it("puts an item still incomplete at the host's last dequeue on <queue>-poison itself, logged with SCENE_INCOMPLETE", async () => {
    const stack = await testStack();
    const { rt } = stack.runtime('instance-1', STAC_ENV);
    const { queue: scenes } = await freshQueue('scenes', rt.host.maxDequeueCount);
    await put(stack, rt, `${DIR}/red.tif`, testScene(1));
    const itemEvent = await put(stack, rt, `${DIR}/item.json`, item());
    await scenes.sendBatch([{ jobKey: itemEvent.id, body: JSON.stringify(itemEvent) }]);
    const run = await runQueueHost(
      scenes,
      makeSceneHandler(() => rt),
      { functionName: 'scene' },
    );
    const n = rt.host.maxDequeueCount;
    // Every dequeue but the last is a retry; the last settles it as poison and returns, so the host deletes it.
    expect(run.invocations.map((i) => i.result)).toEqual([...Array(n - 1).fill('failed'), 'succeeded']);
    expect((await scenes.deadLetters()).map((m) => JSON.parse(m.body).id)).toEqual([itemEvent.id]);
    expect(counters(rt)).toMatchObject({ 'scene-incomplete': n, poison: 1, failed: n - 1, enqueued: 0 });
    // Event Grid's copy in <queue>-poison is the event as it came; why is in the invocation's log.
    const settled = run.logs.filter((l) => l.text.includes('"poison-dead-lettered"'));
    expect(settled).toHaveLength(1);
    expect(settled[0]?.text).toContain('"reason":"SCENE_INCOMPLETE"');
  });
});
