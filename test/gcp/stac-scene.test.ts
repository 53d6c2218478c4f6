import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSceneHandler } from '../../functions/gcp/handlers/scene.handler.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { STAC_COMPLETION_WINDOW_MS } from '../../shared/app/stac-scene.js';
import { SceneIncompleteError } from '../../shared/domain/errors.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { createGcpStack, type GcpTestStack } from './stack.js';

// The finalize-triggered scene function of a STAC stack (shared/app/stac-scene.ts, docs/multi-file-scenes.md),
// against fake-gcs-server and the Pub/Sub emulator. Eventarc gives no delivery count: the event's time bounds the wait.

const SCENE = { width: 96, height: 80 } as const; // tile_px 48: a 2 x 2 grid
const GRID = tileGrid(SCENE.width, SCENE.height, 48);
const DIR = 'incoming/S2B_T31UDQ_20240601';
const STAC_ENV = { [ENV.sourceSuffix]: '.json', [ENV.stacAssets]: '{"B04":"red","B08":"nir"}' };
let bandBytes: Uint8Array;
const stacks: GcpTestStack[] = [];

beforeAll(async () => {
  bandBytes = await syntheticSceneBytes(SCENE);
});
afterAll(async () => {
  await Promise.all(stacks.map((s) => s.close()));
});

async function stack(): Promise<GcpTestStack> {
  const s = await createGcpStack();
  stacks.push(s);
  return s;
}

const item = (hrefs: { red: string; nir: string }) =>
  new TextEncoder().encode(
    JSON.stringify({
      type: 'Feature',
      stac_version: '1.0.0',
      id: 'S2B_T31UDQ_20240601',
      properties: { datetime: '2024-06-01T10:56:29Z' },
      assets: {
        red: { href: hrefs.red, type: 'image/tiff; application=geotiff', 'eo:bands': [{ name: 'B04', common_name: 'red' }] },
        nir: { href: hrefs.nir, type: 'image/tiff; application=geotiff', 'eo:bands': [{ name: 'B08', common_name: 'nir' }] },
      },
    }),
  );

describe('GCP scene handler on a STAC stack (fake-gcs-server, Pub/Sub emulator)', () => {
  it('throws (Eventarc retries) while a band is missing, ignores band uploads, and fans out once the band landed', async () => {
    const s = await stack();
    const rt = s.runtime({ env: STAC_ENV });
    const handler = createSceneHandler(rt);
    const b04 = await s.upload(`${DIR}/B04.tif`, bandBytes);
    // Hrefs as STAC publishers write them: relative, with a literal `+` and a percent-encoded space.
    const itemEvent = await s.upload(`${DIR}/item.json`, item({ red: './B04.tif', nir: '../S2B_T31UDQ_20240601/B08%20nir+1.tif' }));
    await expect(handler(itemEvent)).rejects.toThrow(SceneIncompleteError);
    await expect(handler(itemEvent)).rejects.toThrow(/B08 nir\+1\.tif.*retried/);
    expect(await handler(b04)).toMatchObject({ kind: 'ignored', reason: 'filtered-out' });

    const b08 = await s.upload(`${DIR}/B08 nir+1.tif`, bandBytes);
    expect(await handler(b08)).toMatchObject({ kind: 'ignored', reason: 'filtered-out' });
    const outcome = await handler(itemEvent);
    // The outcome names the object of the event (the item); the scene it made names every band object.
    const itemRef = { bucket: s.sourceBucket, key: `${DIR}/item.json`, versionToken: String(itemEvent.data?.generation) };
    expect(outcome).toMatchObject({ kind: 'fanned-out', enqueued: GRID.count, source: itemRef });
    expect(rt.backend.telemetry.counters()).toMatchObject({ 'scene-incomplete': 2, failed: 2, enqueued: GRID.count, poison: 0 });
    if (outcome.kind !== 'fanned-out') throw new Error('expected a fan-out');
    const manifest = await readSceneManifest(rt.backend.outputs, outcome.sceneKey);
    expect(manifest.source).toEqual({
      ...itemRef,
      assets: {
        B04: { key: `${DIR}/B04.tif`, versionToken: String(b04.data?.generation) },
        B08: { key: `${DIR}/B08 nir+1.tif`, versionToken: String(b08.data?.generation) },
      },
    });
    expect(manifest.params.bands).toEqual({ B04: 1, B08: 1 });
    expect(await s.tileEvents()).toHaveLength(GRID.count);
  });

  it('dead-letters, with SCENE_INCOMPLETE, an item whose band is still missing the completion window after its event', async () => {
    const s = await stack();
    const rt = s.runtime({ env: STAC_ENV });
    await s.upload(`${DIR}/B04.tif`, bandBytes);
    const fresh = await s.upload(`${DIR}/item.json`, item({ red: 'B04.tif', nir: 'B08.tif' }));
    const old = { ...fresh, time: new Date(Date.now() - STAC_COMPLETION_WINDOW_MS - 60_000).toISOString() };
    expect(await createSceneHandler(rt)(old)).toMatchObject({ kind: 'poison', code: 'SCENE_INCOMPLETE' });
    const [letter, ...more] = await s.deadLetters();
    expect(more).toEqual([]);
    expect(letter?.attributes['tessera-reason']).toBe('SCENE_INCOMPLETE');
    expect(rt.backend.telemetry.counters()).toMatchObject({ 'scene-incomplete': 1, poison: 1, enqueued: 0 });
  });

  it('dead-letters a malformed item, and an item whose asset is a URL, at their first delivery', async () => {
    const s = await stack();
    const rt = s.runtime({ env: STAC_ENV });
    const handler = createSceneHandler(rt);
    const notItem = await s.upload(`${DIR}/collection.json`, new TextEncoder().encode('{"type":"Collection","id":"s2"}'));
    expect(await handler(notItem)).toMatchObject({ kind: 'poison', code: 'INVALID_EVENT' });
    const remote = await s.upload(`${DIR}/item.json`, item({ red: 'gs://elsewhere/B04.tif', nir: 'B08.tif' }));
    expect(await handler(remote)).toMatchObject({ kind: 'poison', code: 'INVALID_EVENT', message: expect.stringMatching(/is a URL/) });
    expect((await s.deadLetters()).map((m) => m.attributes['tessera-reason'])).toEqual(['INVALID_EVENT', 'INVALID_EVENT']);
  });
});
