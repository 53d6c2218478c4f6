import { describe, expect, it } from 'vitest';
import type { Backend } from '../../../shared/app/backend.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import {
  eventTimeMs,
  fanOutSourceEvent,
  fanOutStacSceneEvent,
  itemBandPins,
  itemPinId,
  STAC_COMPLETION_WINDOW_MS,
} from '../../../shared/app/stac-scene.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { AdapterError, InvalidEventError, InvalidParamsError, SceneIncompleteError } from '../../../shared/domain/errors.js';
import { type SourceRef, sceneKey } from '../../../shared/domain/job-key.js';
import { AREAS, itemPinKeys, outputKeys } from '../../../shared/domain/key-layout.js';
import { DEFAULT_PARAMS, ENV, parseRuntimeConfig } from '../../../shared/domain/runtime-config.js';
import type { ClaimStore } from '../../../shared/ports/claim-store.port.js';
import type { JobMessage, JobQueue } from '../../../shared/ports/job-queue.port.js';
import { FakeClock } from '../../support/fake-clock.js';
import { syntheticSceneBytes } from '../../support/local-scene.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';
import { RED_ASSET, stacItemBytes } from '../../support/stac-fixtures.js';

class Capture implements JobQueue {
  readonly name = 'capture';
  readonly messages: JobMessage[] = [];
  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    this.messages.push(...messages);
  }
}

const PARAMS = { ...DEFAULT_PARAMS, version: 'stac-1', tile_px: 32 };
const ITEM_KEY = 'scenes/S2/T31UDQ/2024-06-01/item.json';
const SELECTION = { B04: 'red', B08: 'nir' } as const;
const CONFIG = { selection: SELECTION, params: PARAMS, platform: 'aws-lambda', functionTimeoutSec: 900 } as const;

/** The test Item, with `extra` assets beside its bands B04.tif and B08.tif. */
function itemJson(extra: Record<string, unknown> = {}): Uint8Array {
  return stacItemBytes({
    red: RED_ASSET,
    nir: { href: './B08.tif', type: 'image/tiff; application=geotiff', 'eo:bands': [{ name: 'B08', common_name: 'nir' }] },
    ...extra,
  });
}

async function setup(bands: readonly ('B04' | 'B08')[] = ['B04', 'B08']) {
  const clock = new FakeClock();
  const queue = new Capture();
  const lines: string[] = [];
  const telemetry = new JsonTelemetry((l) => lines.push(l), { clock });
  const backend: Backend = {
    claims: undefined as unknown as ClaimStore, // fan-out never claims
    sources: new MemoryObjectStore(() => clock.now()),
    outputs: new MemoryObjectStore(() => clock.now()),
    queue,
    clock,
    telemetry,
  };
  const bytes = await syntheticSceneBytes({ width: 64, height: 48 });
  for (const b of bands) await backend.sources.putIfAbsent(`scenes/S2/T31UDQ/2024-06-01/${b}.tif`, bytes);
  const put = await backend.sources.putIfAbsent(ITEM_KEY, itemJson());
  if (put.kind !== 'written') throw new Error('setup');
  const item: SourceRef = { bucket: 'sources', key: ITEM_KEY, versionToken: put.version };
  return { backend, queue, clock, telemetry, item, bytes, lines };
}

describe('fanOutStacSceneEvent', () => {
  it('fans out the scene of the item: every band object and its version in the source, each band index in the params', async () => {
    const { backend, queue, item } = await setup();
    const fan = await fanOutStacSceneEvent(backend, item, CONFIG);
    if (fan.kind !== 'fanned-out') throw new Error(`expected a fan-out, got ${fan.kind}`);
    const manifest = await readSceneManifest(backend.outputs, fan.result.sceneKey);
    const b04 = await backend.sources.head('scenes/S2/T31UDQ/2024-06-01/B04.tif');
    const b08 = await backend.sources.head('scenes/S2/T31UDQ/2024-06-01/B08.tif');
    expect(manifest.source).toEqual({
      ...item,
      assets: {
        B04: { key: 'scenes/S2/T31UDQ/2024-06-01/B04.tif', versionToken: b04?.version },
        B08: { key: 'scenes/S2/T31UDQ/2024-06-01/B08.tif', versionToken: b08?.version },
      },
    });
    expect(manifest.params.bands).toEqual({ B04: 1, B08: 1 });
    expect(fan.result.sceneKey).toBe(sceneKey(manifest.source, manifest.params));
    expect(queue.messages).toHaveLength(fan.result.grid.count);
  });

  it('makes the same scene from a duplicate item event: its manifest is already there, its jobs have the same keys', async () => {
    const { backend, queue, item } = await setup();
    const first = await fanOutStacSceneEvent(backend, item, CONFIG);
    const again = await fanOutStacSceneEvent(backend, item, CONFIG);
    if (first.kind !== 'fanned-out' || again.kind !== 'fanned-out') throw new Error('expected two fan-outs');
    expect(again.result.sceneKey).toBe(first.result.sceneKey);
    expect(again.result.manifest).toBe('already-present');
    const keys = queue.messages.map((m) => m.jobKey);
    expect(new Set(keys).size).toBe(keys.length / 2);
  });

  it('is a retryable SceneIncompleteError, counted, while a band is not in the store yet; and fans out once it lands', async () => {
    const { backend, item, telemetry, bytes } = await setup(['B04']);
    const act = fanOutStacSceneEvent(backend, item, CONFIG, { attempt: 1, maxDeliveries: 5 });
    await expect(act).rejects.toThrow(SceneIncompleteError);
    await expect(act).rejects.toMatchObject({
      retryable: true,
      code: 'SCENE_INCOMPLETE',
      missing: ['scenes/S2/T31UDQ/2024-06-01/B08.tif'],
    });
    expect(telemetry.counters()['scene-incomplete']).toBe(1);
    await backend.sources.putIfAbsent('scenes/S2/T31UDQ/2024-06-01/B08.tif', bytes);
    expect((await fanOutStacSceneEvent(backend, item, CONFIG, { attempt: 2, maxDeliveries: 5 })).kind).toBe('fanned-out');
  });

  it("gives up (not retryable: the trigger dead-letters it) on the transport's last delivery, naming what is missing", async () => {
    const { backend, item } = await setup(['B04']);
    const act = fanOutStacSceneEvent(backend, item, CONFIG, { attempt: 5, maxDeliveries: 5 });
    await expect(act).rejects.toMatchObject({ retryable: false, code: 'SCENE_INCOMPLETE' });
    await expect(act).rejects.toThrow(/B08\.tif.*still missing at delivery 5 of 5: upload the missing band\(s\), then redrive this event/);
  });

  it('gives up once the completion window after the item event has passed, where the transport counts no deliveries', async () => {
    const { backend, item, clock } = await setup(['B08']);
    const eventTimeMs = clock.now();
    clock.advance(STAC_COMPLETION_WINDOW_MS - 1);
    await expect(fanOutStacSceneEvent(backend, item, CONFIG, { eventTimeMs })).rejects.toMatchObject({ retryable: true });
    clock.advance(1);
    await expect(fanOutStacSceneEvent(backend, item, CONFIG, { eventTimeMs })).rejects.toMatchObject({ retryable: false });
    await expect(fanOutStacSceneEvent(backend, item, CONFIG, { eventTimeMs })).rejects.toThrow(/B04\.tif.*60 min after the item's event/);
  });

  it('resolves the band versions once per item version: a band re-uploaded before a duplicate item event makes no second scene', async () => {
    const { backend, queue, item, telemetry } = await setup();
    const first = await fanOutStacSceneEvent(backend, item, CONFIG);
    if (first.kind !== 'fanned-out') throw new Error('expected a fan-out');
    const b04 = 'scenes/S2/T31UDQ/2024-06-01/B04.tif';
    const before = await backend.sources.head(b04);
    // New bytes under the band's name: no item event, and this store keeps no old version.
    await backend.sources.putIfMatch(b04, await syntheticSceneBytes({ width: 64, height: 48, seed: 9 }), before?.version as string);
    const sent = queue.messages.length;
    const again = await fanOutStacSceneEvent(backend, item, CONFIG);
    expect(again).toEqual({ kind: 'stale', reason: 'band-version-gone', key: b04 });
    expect(telemetry.counters()['event-stale']).toBe(1);
    expect(queue.messages).toHaveLength(sent);
    const manifests: string[] = [];
    for await (const h of backend.outputs.list(outputKeys.allScenes())) if (h.key.endsWith('/scene.json')) manifests.push(h.key);
    expect(manifests).toEqual([outputKeys.sceneManifest(first.result.sceneKey)]);
  });

  it('reuses the band versions another delivery of the item version recorded, even when its own heads would differ', async () => {
    const { backend, item } = await setup();
    const b04 = 'scenes/S2/T31UDQ/2024-06-01/B04.tif';
    const b08 = 'scenes/S2/T31UDQ/2024-06-01/B08.tif';
    // The race's winner recorded the versions it headed; then B04 changed (this store keeps no old version).
    const winner = { B04: (await backend.sources.head(b04))?.version as string, B08: (await backend.sources.head(b08))?.version as string };
    const recordKey = itemPinKeys.record(itemPinId(item, [b04, b08]));
    await backend.outputs.putIfAbsent(
      recordKey,
      new TextEncoder().encode(JSON.stringify({ item, bands: { [b04]: winner.B04, [b08]: winner.B08 }, resolvedAt: 'x' })),
    );
    const pins = await itemBandPins(backend, item, [b04, b08], {});
    expect(pins).toEqual({ versions: { [b04]: winner.B04, [b08]: winner.B08 }, recorded: 'found' });
  });

  it('recognises its own record after a lost write answer: the retry reads it back and makes the same scene', async () => {
    const { backend, item } = await setup();
    const outputs = backend.outputs;
    let lose = true;
    const lossy: Backend = {
      ...backend,
      outputs: Object.assign(Object.create(outputs) as typeof outputs, {
        putIfAbsent: async (key: string, body: Uint8Array, options?: Parameters<typeof outputs.putIfAbsent>[2]) => {
          const r = await outputs.putIfAbsent(key, body, options);
          if (lose && key.startsWith(AREAS.itemPins.prefix)) {
            lose = false;
            throw new AdapterError('answer lost after the write landed', { retryable: true });
          }
          return r;
        },
      }),
    };
    await expect(fanOutStacSceneEvent(lossy, item, CONFIG)).rejects.toMatchObject({ retryable: true });
    const retry = await fanOutStacSceneEvent(lossy, item, CONFIG);
    const clean = await fanOutStacSceneEvent(backend, item, CONFIG);
    if (retry.kind !== 'fanned-out' || clean.kind !== 'fanned-out') throw new Error('expected fan-outs');
    expect(retry.result.sceneKey).toBe(clean.result.sceneKey);
  });

  it("refuses, before any read, an item whose band resolves outside the stack's source prefix (the scene function may read nowhere else)", async () => {
    const { backend, item } = await setup();
    const reads: string[] = [];
    const sources = backend.sources;
    const counting: Backend = {
      ...backend,
      sources: Object.assign(Object.create(sources) as typeof sources, {
        head: async (key: string) => {
          reads.push(key);
          return sources.head(key);
        },
      }),
    };
    const act = fanOutStacSceneEvent(counting, item, { ...CONFIG, sourcePrefix: 'scenes/S2/T31UDQ/2024-06-01/B04' });
    await expect(act).rejects.toBeInstanceOf(InvalidEventError);
    await expect(act).rejects.toMatchObject({ retryable: false, message: expect.stringContaining('B08.tif') });
    expect(reads).toEqual([]);
  });

  it('refuses a band pins record changed behind its back (it is written create-only)', async () => {
    const { backend, item } = await setup();
    const b04 = 'scenes/S2/T31UDQ/2024-06-01/B04.tif';
    const b08 = 'scenes/S2/T31UDQ/2024-06-01/B08.tif';
    await backend.outputs.putIfAbsent(itemPinKeys.record(itemPinId(item, [b04, b08])), new TextEncoder().encode('{"bands":{}}'));
    await expect(fanOutStacSceneEvent(backend, item, CONFIG)).rejects.toThrow(/changed behind Tessera's back/);
  });

  it('answers source-changed for an item overwritten since its event, and source-gone for one deleted', async () => {
    const { backend, item } = await setup();
    const put = await backend.sources.putIfMatch(ITEM_KEY, itemJson({ extra: { href: './x.tif' } }), item.versionToken);
    expect(put.kind).toBe('written');
    expect(await fanOutStacSceneEvent(backend, item, CONFIG)).toMatchObject({ kind: 'source-changed' });
    const head = await backend.sources.head(ITEM_KEY);
    await backend.sources.deleteIfVersion(ITEM_KEY, head?.version as string);
    expect(await fanOutStacSceneEvent(backend, { ...item, versionToken: head?.version as string }, CONFIG)).toEqual({
      kind: 'source-gone',
    });
  });

  it('throws poison for a malformed item and for a selection the item cannot satisfy', async () => {
    const { backend, clock } = await setup();
    const bad = await backend.sources.putIfAbsent(
      'scenes/bad.json',
      new TextEncoder().encode('{"type":"FeatureCollection","features":[]}'),
    );
    const badRef = { bucket: 'sources', key: 'scenes/bad.json', versionToken: bad.kind === 'written' ? bad.version : '' };
    const act = fanOutStacSceneEvent(backend, badRef, CONFIG, { eventTimeMs: clock.now() });
    await expect(act).rejects.toThrow(InvalidEventError);
    await expect(act).rejects.toMatchObject({ retryable: false });
    const { item } = await setup();
    await expect(fanOutStacSceneEvent(backend, item, { ...CONFIG, selection: { B04: 'thumbnail' } })).rejects.toThrow(InvalidParamsError);
  });
});

describe('fanOutSourceEvent', () => {
  it('fans a STAC stack out through its item, and any other stack through the object itself', async () => {
    const { backend, item, bytes } = await setup();
    const stac = await fanOutSourceEvent(backend, item, {
      params: PARAMS,
      platform: 'aws-lambda',
      functionTimeoutSec: 900,
      stacAssets: SELECTION,
    });
    expect(stac.kind).toBe('fanned-out');
    const put = await backend.sources.putIfAbsent('scenes/one.tif', bytes);
    const one = { bucket: 'sources', key: 'scenes/one.tif', versionToken: put.kind === 'written' ? put.version : '' };
    const single = await fanOutSourceEvent(backend, one, { params: PARAMS, platform: 'aws-lambda', functionTimeoutSec: 900 });
    if (single.kind !== 'fanned-out') throw new Error('expected a fan-out');
    expect(single.result.sceneKey).toBe(sceneKey(one, PARAMS));
    // The STAC item itself is no raster: without the selection it is poison, as any non-TIFF object is.
    await expect(
      fanOutSourceEvent(backend, item, { params: PARAMS, platform: 'aws-lambda', functionTimeoutSec: 900 }),
    ).rejects.toMatchObject({
      retryable: false,
    });
  });
});

describe('eventTimeMs', () => {
  it('reads an RFC 3339 event time, and nothing else', () => {
    expect(eventTimeMs('2024-06-01T10:56:29.123Z')).toBe(Date.UTC(2024, 5, 1, 10, 56, 29, 123));
    expect(eventTimeMs('yesterday')).toBeUndefined();
    expect(eventTimeMs(undefined)).toBeUndefined();
    expect(eventTimeMs(1717239389000)).toBeUndefined();
  });
});

describe('TESSERA_STAC_ASSETS', () => {
  const base = {
    [ENV.platform]: 'aws-lambda',
    [ENV.claimsTable]: 'claims',
    [ENV.sourceBucket]: 'sources',
    [ENV.outputBucket]: 'outputs',
    [ENV.tileQueue]: 'tiles',
    [ENV.functionTimeoutSeconds]: '900',
  };
  it('makes a STAC stack when set, and is refused at start-up when it is not a band -> asset object', () => {
    expect(parseRuntimeConfig(base).stacAssets).toBeUndefined();
    expect(parseRuntimeConfig({ ...base, [ENV.stacAssets]: '{"B04":"red","B08":"nir"}' }).stacAssets).toEqual(SELECTION);
    expect(() => parseRuntimeConfig({ ...base, [ENV.stacAssets]: 'red,nir' })).toThrow(/TESSERA_STAC_ASSETS is not JSON/);
    expect(() => parseRuntimeConfig({ ...base, [ENV.stacAssets]: '{"B04":7}' })).toThrow(/band "B04" must name a STAC asset/);
  });
});
