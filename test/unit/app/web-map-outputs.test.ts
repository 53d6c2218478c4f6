import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import Ajv from 'ajv';
import { PMTiles, type Source } from 'pmtiles';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend } from '../../../functions/local/compose.js';
import { parseStackConfig, StackConfigError } from '../../../infra/common/config.js';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { sweepMosaics } from '../../../shared/app/mosaic-sweep.js';
import { ArchiveTooLargeError, archiveTiles, assertArchiveFits, MAX_ARCHIVE_BYTES } from '../../../shared/app/pmtiles-archive.js';
import { processTile } from '../../../shared/app/process-tile.js';
import {
  QUICKLOOK_MAX_PX,
  QUICKLOOK_MAX_TILES,
  quicklookPixels,
  quicklookTileCount,
  writeQuicklook,
} from '../../../shared/app/quicklook.js';
import { readSceneManifest, type SceneManifest } from '../../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { parseTileJob, tileOutputKey } from '../../../shared/app/tile-job.js';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef, sceneKey } from '../../../shared/domain/job-key.js';
import { outputForFormat } from '../../../shared/domain/render-params.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { tileGrid, windows } from '../../../shared/domain/tile-grid.js';
import { tilingParams } from '../../../shared/domain/tiling-params.js';
import type { ObjectHead, ObjectStore, PutOptions } from '../../../shared/ports/object-store.port.js';
import { encodeImage } from '../../../shared/raster/image-encoder.js';
import { FakeClock } from '../../support/fake-clock.js';
import { putSyntheticScene } from '../../support/local-scene.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';
import { fixtureSettings } from '../../support/tile-fixture.js';

// Issue 26 sections 3 and 4: the PMTiles archive, the TileJSON and the quicklook of a rendered pyramid, assembled with
// the mosaic; a crash during assembly and a duplicate assembly; the refusal of an archive too large, before any claim.

/** A 512 x 512 synthetic scene (5.12 km, UTM 31N) as PNG tiles on WebMercatorQuad, zooms 13-15, with an archive. */
const PARAMS: ProcessingParams = {
  ...DEFAULT_PARAMS,
  version: 'web-map-outputs-1',
  tile_px: 256,
  tms: 'WebMercatorQuad',
  zoom: 15,
  min_zoom: 13,
  resampling: 'bilinear',
  mosaic: 'pmtiles',
  output: outputForFormat(DEFAULT_PARAMS.output as Record<string, unknown>, { format: 'PNG', rescale: [-1, 1], colormap: 'rdylgn' }),
};

const TILEJSON_SCHEMA = JSON.parse(readFileSync(join(process.cwd(), 'test/data/tilejson/tilejson-3.0.0.schema.json'), 'utf8')) as object;

/** The `pmtiles` reader over bytes in memory. */
const reader = (bytes: Uint8Array) =>
  new PMTiles({ getKey: () => 'memory', getBytes: async (o, l) => ({ data: bytes.slice(o, o + l).buffer }) } satisfies Source);

let template: string;
let scene: string;
let source: SourceRef;
const opened: LocalBackend[] = [];

/** A backend on a copy of the rendered scene's folder: every test starts from all tiles written, nothing assembled. */
function copy(wrap?: (outputs: ObjectStore) => ObjectStore): { b: LocalBackend; logs: string[]; telemetry: JsonTelemetry } {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-webmap-'));
  cpSync(template, dir, { recursive: true });
  const logs: string[] = [];
  const telemetry = new JsonTelemetry((l) => logs.push(l));
  const b = createLocalBackend(dir, { clock: new FakeClock(), telemetry });
  opened.push(b);
  if (wrap !== undefined) Object.defineProperty(b, 'outputs', { value: wrap(b.outputs) });
  return { b, logs, telemetry };
}

/** An outputs store whose create-only write of `key` dies: the process is gone before (or after) the write. */
class Crash extends Error {}
function dyingAt(key: string, when: 'before' | 'after') {
  return (inner: ObjectStore): ObjectStore =>
    new Proxy(inner, {
      get(target, prop) {
        if (prop === 'putIfAbsent')
          return async (k: string, body: Uint8Array, options?: PutOptions) => {
            if (k === key && when === 'before') throw new Crash(`died before writing ${k}`);
            const r = await target.putIfAbsent(k, body, options);
            if (k === key) throw new Crash(`died after writing ${k}`);
            return r;
          };
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
}

async function bytesOf(b: LocalBackend, key: string): Promise<Buffer | undefined> {
  return (await b.outputs.head(key)) === undefined ? undefined : Buffer.from(await b.outputs.get(key));
}

beforeAll(async () => {
  template = mkdtempSync(join(tmpdir(), 'tessera-webmap-template-'));
  const b = createLocalBackend(template, { clock: new FakeClock(), telemetry: new JsonTelemetry(() => {}) });
  source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', { width: 512, height: 512 });
  scene = (await fanOutScene(b, { source, params: PARAMS })).sceneKey;
  // Every tile, parents enqueued by their last child, until the queue is empty.
  for (let round = 0; round < 100; round++) {
    const batch = await b.queue.receive(10, 60_000);
    if (batch.length === 0) break;
    for (const d of batch) {
      await processTile(b, fixtureSettings('w1'), parseTileJob(d.body), `${d.deliveryId}@w1`);
      await b.queue.ack(d);
    }
  }
  b.close();
}, 120_000);

afterAll(() => {
  for (const b of opened) {
    try {
      b.close();
    } catch {
      // Closed by its test already.
    }
  }
});

describe('the web map outputs of a rendered pyramid (assembleMosaic)', () => {
  it('writes a PMTiles archive of every zoom that the pmtiles reader reads back tile for tile, a TileJSON and a quicklook, all linked from the Item', async () => {
    const { b } = copy();
    const m = await assembleMosaic(b, scene);
    expect(m).toMatchObject({
      result: 'written',
      pmtilesKey: outputKeys.pmtiles(scene),
      tileJsonKey: outputKeys.tileJson(scene),
      quicklookKey: outputKeys.quicklook(scene),
    });
    const manifest = await readSceneManifest(b.outputs, scene);
    const tiles = archiveTiles(manifest, tilingParams(PARAMS));
    expect(new Set(tiles.map((t) => t.z))).toEqual(new Set([13, 14, 15]));
    const archive = reader(await b.outputs.get(outputKeys.pmtiles(scene)));
    for (const t of tiles) {
      const got = await archive.getZxy(t.z, t.x, t.y);
      expect(Buffer.from(got?.data ?? new ArrayBuffer(0)).equals(Buffer.from(await b.outputs.get(t.key))), t.key).toBe(true);
    }
    const header = await archive.getHeader();
    expect(header).toMatchObject({ tileType: 2, minZoom: 13, maxZoom: 15, numAddressedTiles: tiles.length, clustered: true });
    expect(await archive.getMetadata()).toMatchObject({ 'tessera:colormap': 'rdylgn', 'tessera:rescale': [-1, 1], 'tessera:scene': scene });

    const item = JSON.parse((await bytesOf(b, outputKeys.stacItem(scene)))?.toString() ?? '{}') as {
      assets: Record<string, { href: string }>;
      links: { rel: string; href: string }[];
    };
    expect(item.assets.pmtiles?.href).toBe(`./${scene}.pmtiles`);
    expect(item.assets.thumbnail?.href).toBe(`./${scene}.quicklook.png`);
    expect(item.links.map((l) => l.rel)).toEqual(['pmtiles', 'tilejson', 'xyz']);
  });

  it('writes a TileJSON 3.0.0 (valid against its JSON schema) whose tile template, resolved against it, names the tiles', async () => {
    const { b } = copy();
    await assembleMosaic(b, scene);
    const doc = JSON.parse((await bytesOf(b, outputKeys.tileJson(scene)))?.toString() ?? '{}') as Record<string, unknown>;
    const validate = new Ajv({ allErrors: true }).compile(TILEJSON_SCHEMA);
    expect(validate(doc), JSON.stringify(validate.errors)).toBe(true);
    // The schema is not vacuous: a TileJSON without tiles fails it.
    expect(validate({ ...doc, tiles: undefined })).toBe(false);
    expect(doc).toMatchObject({
      tilejson: '3.0.0',
      scheme: 'xyz',
      minzoom: 13,
      maxzoom: 15,
      'tessera:colormap': 'rdylgn',
      'tessera:rescale': [-1, 1],
    });
    const [west, south, east, north] = doc.bounds as [number, number, number, number];
    const [lon, lat, zoom] = doc.center as [number, number, number];
    expect(west).toBeLessThan(east);
    expect(south).toBeLessThan(north);
    expect(lon).toBeGreaterThan(west);
    expect(lon).toBeLessThan(east);
    expect(lat).toBeGreaterThan(south);
    expect(lat).toBeLessThan(north);
    // 1792 px at zoom 15 is 896 at zoom 14: the zoom where the scene is at most 1024 px across.
    expect(zoom).toBe(14);
    const tiles = doc.tiles as string[];
    const manifest = await readSceneManifest(b.outputs, scene);
    for (const t of archiveTiles(manifest, tilingParams(PARAMS))) {
      const href = (tiles[0] as string).replace('{z}', String(t.z)).replace('{x}', String(t.x)).replace('{y}', String(t.y));
      expect(posix.normalize(posix.join(posix.dirname(outputKeys.tileJson(scene)), href))).toBe(t.key);
    }
    expect(doc['tessera:pmtiles']).toBe(`./${scene}.pmtiles`);
  });

  it('makes the quicklook of a pyramid from the zoom that is fine enough: at most 1024 px, the zoom-14 pixels where the scene is', async () => {
    const { b } = copy();
    await assembleMosaic(b, scene);
    const png = (await bytesOf(b, outputKeys.quicklook(scene))) as Buffer;
    const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    expect(Math.max(info.width, info.height)).toBeLessThanOrEqual(QUICKLOOK_MAX_PX);
    // Factor 1 on zoom 14: each quicklook pixel is the zoom-14 pixel under it (the scene starts at a whole pixel there).
    const manifest = await readSceneManifest(b.outputs, scene);
    expect([info.width, info.height, info.channels]).toEqual([manifest.grid.width / 2, manifest.grid.height / 2, 4]);
    const heads = new Map<string, ObjectHead>();
    for await (const h of b.outputs.list(outputKeys.tilePrefix(scene))) heads.set(h.key, h);
    const image = await quicklookPixels(b.outputs, manifest, tilingParams(PARAMS), heads);
    expect(image.zoom).toBe(14);
    expect(Buffer.from(image.data).equals(data)).toBe(true);
    let opaque = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] === 255) opaque++;
    expect(opaque).toBeGreaterThan(info.width * info.height * 0.5);
  });

  it('after a crash before the archive and another after it, the sweep assembles the scene: the same archive bytes, the rest written once', async () => {
    const reference = copy();
    await assembleMosaic(reference.b, scene);
    const keys = [outputKeys.pmtiles(scene), outputKeys.tileJson(scene), outputKeys.quicklook(scene), outputKeys.stacItem(scene)];
    const want = await Promise.all(keys.map((k) => bytesOf(reference.b, k)));

    // Crash 1: the process dies before the archive's write: nothing of the scene's outputs, no VRT.
    const first = copy(dyingAt(outputKeys.pmtiles(scene), 'before'));
    await expect(assembleMosaic(first.b, scene)).rejects.toThrow(Crash);
    for (const k of [...keys, outputKeys.mosaic(scene)]) expect(await first.b.outputs.head(k), k).toBeUndefined();
    // Crash 2 (the same folder, a new process): dies right after the archive's write.
    const dir = first.b.dir;
    first.b.close();
    const again = createLocalBackend(dir, { clock: new FakeClock(), telemetry: first.telemetry });
    opened.push(again);
    const inner = again.outputs;
    Object.defineProperty(again, 'outputs', { value: dyingAt(outputKeys.pmtiles(scene), 'after')(inner) });
    await expect(assembleMosaic(again, scene)).rejects.toThrow(Crash);
    expect(await again.outputs.head(outputKeys.mosaic(scene))).toBeUndefined();
    // The VRT is written last, so the sweep still sees the scene as waiting, and assembles it.
    Object.defineProperty(again, 'outputs', { value: inner });
    const swept = await sweepMosaics(again);
    expect(swept.assembled.map((a) => a.sceneKey)).toEqual([scene]);
    const got = await Promise.all(keys.map((k) => bytesOf(again, k)));
    got.forEach((bytes, i) => {
      expect(bytes?.equals(want[i] as Buffer), keys[i]).toBe(true);
    });
    expect(first.telemetry.counters()['write-already-present']).toBe(1);
  });

  it('a duplicate assembly finds every output already present with the same bytes, and changes no version', async () => {
    const { b, telemetry } = copy();
    await assembleMosaic(b, scene);
    const versions = async () => {
      const out: Record<string, string> = {};
      for await (const h of b.outputs.list(outputKeys.allMosaics())) out[h.key] = h.version;
      return out;
    };
    const before = await versions();
    expect(Object.keys(before)).toHaveLength(5);
    const second = await assembleMosaic(b, scene);
    expect(second.result).toBe('already-present');
    expect(await versions()).toEqual(before);
    // The VRT, the archive, the TileJSON, the quicklook and the Item.
    expect(telemetry.counters()['write-already-present']).toBe(5);
  });
});

describe('a PMTiles archive too large for one, refused before any claim', () => {
  it('names the tiles, the estimate and the fixes (a lower highest zoom, or no --mosaic pmtiles)', async () => {
    const { b } = copy();
    // Zooms 13-20 of the same 5 km scene: about 60,000 tiles, some 4 GB as PNG.
    const params = { ...PARAMS, zoom: 20, version: 'too-large-1' };
    const refused = fanOutScene(b, { source, params });
    await expect(refused).rejects.toThrow(ArchiveTooLargeError);
    const error = (await refused.catch((e: unknown) => e)) as ArchiveTooLargeError;
    expect(error).toBeInstanceOf(InvalidParamsError);
    expect(error.estimate.bytes).toBeGreaterThan(MAX_ARCHIVE_BYTES);
    expect(error.message).toMatch(/zooms 13-20 of WebMercatorQuad make [\d,]+ tiles for this scene, about [\d,]+ MB as PNG/);
    expect(error.message).toMatch(/--zoom 13-(\d+) makes [\d,]+ tiles, about [\d,]+ MB/);
    expect(error.message).toContain('leave out --mosaic pmtiles');
    // Nothing of the scene: no manifest, no job.
    expect(await b.outputs.head(outputKeys.sceneManifest(sceneKey(source, params)))).toBeUndefined();
    expect(await b.queue.receive(10, 100)).toEqual([]);
  });

  it('lets the zoom the error names through, and estimates by bytes as well as tiles', () => {
    const manifest = { width: 512 * 8, height: 512 * 8 };
    const target = {
      ...manifest,
      target: {
        crs: { epsg: 3857 },
        geoTransform: [0, 1, 0, 0, 0, -1] as const,
        tms: { id: 'WebMercatorQuad', zoom: 15, minCol: 0, minRow: 0 },
      },
    };
    const tiling = tilingParams(PARAMS);
    // 16 x 16 tiles of 256 px at zoom 15 (+ 64 + 16): 336 tiles, about 22 MB at 1 byte a pixel.
    expect(() => assertArchiveFits(target, tiling)).not.toThrow();
    expect(() => assertArchiveFits(target, tiling, { maxBytes: 10e6 })).toThrow(
      /336 tiles .* about 22 MB .* --zoom 13-14 makes 80 tiles, about 5 MB/,
    );
    expect(() => assertArchiveFits(target, tiling, { maxBytes: 2e6 })).toThrow(/--zoom 13 makes 16 tiles, about 1 MB/);
    expect(() => assertArchiveFits(target, tiling, { maxTiles: 10 })).toThrow(/tile a smaller area/);
    expect(MAX_ARCHIVE_BYTES).toBe(256 * 1024 * 1024);
  });
});

describe('quicklookPixels', () => {
  it('averages f x f boxes weighted by alpha: transparent pixels lend no colour, a wholly transparent box stays transparent', async () => {
    // A rendered scene of 2100 x 300 px in 300 px tiles on no tile matrix set: factor 3 (2100 / 1024, rounded up).
    const outputs = new MemoryObjectStore(() => 0);
    const params = { ...PARAMS, tms: undefined, zoom: undefined, min_zoom: undefined, mosaic: undefined, tile_px: 300, version: 'ql' };
    const grid = tileGrid(2100, 300, 300);
    const manifest = { v: 1, sceneKey: 'b'.repeat(64), params, grid } as unknown as SceneManifest;
    const tiling = tilingParams(params as ProcessingParams);
    const heads = new Map<string, ObjectHead>();
    for (const w of windows(grid)) {
      // Each tile: columns alternately opaque (value 40 * col + x % 2 * 10 in red) and transparent, rows alike.
      const data = new Uint8Array(w.width * w.height * 4);
      for (let y = 0; y < w.height; y++)
        for (let x = 0; x < w.width; x++) {
          const at = (y * w.width + x) * 4;
          const opaque = w.col < 6 ? x % 3 !== 2 : false;
          if (!opaque) continue;
          data.set([40 * w.col + (x % 3) * 10, 7, 200, 255], at);
        }
      const key = tileOutputKey(manifest.sceneKey, grid, w, 'PNG');
      await outputs.putIfAbsent(key, await encodeImage({ data, width: w.width, height: w.height, channels: 4 }, 'PNG'));
      heads.set(key, (await outputs.head(key)) as ObjectHead);
    }
    const q = await quicklookPixels(outputs, manifest, tiling, heads);
    expect([q.width, q.height, q.channels]).toEqual([700, 100, 4]);
    // Tile 0, box 0: of its 3 x 3 pixels, 6 opaque (red 0 and 10) and 3 transparent: red 5, alpha 170.
    expect([...q.data.subarray(0, 4)]).toEqual([5, 7, 200, 170]);
    // Tile 5 (x 1500-1799), box at x 1500: red 200 and 210.
    expect([...q.data.subarray(500 * 4, 500 * 4 + 4)]).toEqual([205, 7, 200, 170]);
    // Tile 6 is wholly transparent.
    expect([...q.data.subarray(650 * 4, 650 * 4 + 4)]).toEqual([0, 0, 0, 0]);
  });
});

describe('asking for the archive (mosaic: pmtiles, --mosaic pmtiles, tessera:mosaic)', () => {
  const ctx = { stack: 'test-stack', defaultArchiveDir: '/repo/dist' };
  const aws = { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1' };
  const rendered = { 'tessera:format': 'png', 'tessera:rescale': '-1,1', 'tessera:tms': 'WebMercatorQuad', 'tessera:zoom': '8-12' };
  const problems = (values: Record<string, string>): readonly string[] => {
    try {
      parseStackConfig(values, ctx);
    } catch (e) {
      if (e instanceof StackConfigError) return e.problems;
      throw e;
    }
    throw new Error('the configuration was accepted');
  };

  it('is a processing parameter of a stack like of tessera run', () => {
    expect(parseStackConfig({ ...aws, ...rendered, 'tessera:mosaic': 'PMTiles' }, ctx).params.mosaic).toBe('pmtiles');
    expect(tilingParams(PARAMS).mosaic).toBe('pmtiles');
  });

  it('is refused without rendered tiles on WebMercatorQuad, naming the fix', () => {
    expect(problems({ ...aws, 'tessera:mosaic': 'pmtiles' })[0]).toMatch(
      /tessera:mosaic.*archive of rendered map tiles: add output.format PNG/,
    );
    expect(problems({ ...aws, ...rendered, 'tessera:tms': 'WorldCRS84Quad', 'tessera:mosaic': 'pmtiles' })[0]).toContain(
      'these are on WorldCRS84Quad: add tms WebMercatorQuad',
    );
    expect(() => tilingParams({ ...PARAMS, tms: undefined, zoom: undefined, min_zoom: undefined })).toThrow(
      /on no tile matrix set: add tms WebMercatorQuad and a zoom/,
    );
    expect(() => tilingParams({ ...PARAMS, mosaic: 'mbtiles' })).toThrow(/"pmtiles" \(also one PMTiles archive of rendered tiles\)/);
  });
});

describe('a quicklook that would read too many tiles', () => {
  it('is skipped with a WARN naming the fix: a scene of one zoom past QUICKLOOK_MAX_TILES tiles', async () => {
    const params = { ...PARAMS, tms: undefined, zoom: undefined, min_zoom: undefined, mosaic: undefined, tile_px: 16, version: 'ql-many' };
    // 1,040 x 1,040 px in 16 px tiles: 4,225 tiles (65 x 65), over the 4,096 a quicklook reads.
    const manifest = { v: 1, sceneKey: 'c'.repeat(64), params, grid: tileGrid(1040, 1040, 16) } as unknown as SceneManifest;
    const tiling = tilingParams(params as ProcessingParams);
    expect(quicklookTileCount(manifest, tiling)).toBe(4225);
    const logs: string[] = [];
    const outputs = new MemoryObjectStore(() => 0);
    expect(await writeQuicklook(outputs, manifest, tiling, new Map(), new JsonTelemetry((l) => logs.push(l)))).toBeUndefined();
    expect(logs.join('\n')).toMatch(/"quicklook-skipped".*"tiles":4225.*--zoom MIN-MAX/);
    expect(QUICKLOOK_MAX_TILES).toBe(4096);
  });
});
