import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend } from '../../../functions/local/compose.js';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import type { Backend, WorkerHooks } from '../../../shared/app/backend.js';
import { fanOutScene, handleFanOutChunk, isFanOutChunkBody, parseFanOutChunk } from '../../../shared/app/fan-out.js';
import { processTile, type TileOutcome } from '../../../shared/app/process-tile.js';
import { reducerOf } from '../../../shared/app/pyramid.js';
import {
  assertSceneTileCount,
  checkZooms,
  childrenOf,
  levelGrid,
  levelTiles,
  parentWindowOf,
  pyramidScene,
  tilesPerZoom,
} from '../../../shared/app/pyramid-grid.js';
import { tmsTileOf } from '../../../shared/app/scene-grid.js';
import { readSceneManifest, type SceneManifest } from '../../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob, parseTileJob, type TileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { InvalidEventError, InvalidParamsError, MissingTilesError } from '../../../shared/domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef, tileJobKey } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { type GridTarget, windows } from '../../../shared/domain/tile-grid.js';
import { tilingParams, zoomRangeParams } from '../../../shared/domain/tiling-params.js';
import type { Delivery } from '../../../shared/ports/job-queue.port.js';
import type { ObjectStore } from '../../../shared/ports/object-store.port.js';
import { decodeImage } from '../../../shared/raster/image-encoder.js';
import { openGeoTiff, SENTINEL_LIKE_SCENE, writeSyntheticScene } from '../../../shared/raster/index.js';
import { tileMatrixSet, tileGrid as tmsTileGrid } from '../../../shared/raster/tile-matrix-set.js';
import { FakeClock } from '../../support/fake-clock.js';

/**
 * Issue 26 section 1: zoom pyramids on the local backend. The arithmetic of the levels, the bad input refused before
 * any claim, a pyramid with every message delivered twice, the read amplification of every zoom, and the crash points
 * between a child and its parent (docs/pyramids.md).
 */

const LEASE = 60_000;
/** The pyramid scene of a key and grid, 256 px COG tiles. */
const ps = (scene: string, grid: Parameters<typeof pyramidScene>[1]) => pyramidScene(scene, grid, { tilePx: 256, format: 'COG' });
const settings = (owner: string, hooks?: WorkerHooks) => ({ owner, leaseMs: LEASE, retentionMs: 3_600_000, hooks });
const pyramidParams = (extra: Record<string, unknown> = {}): ProcessingParams => ({
  ...DEFAULT_PARAMS,
  tile_px: 256,
  tms: 'WebMercatorQuad',
  zoom: 14,
  min_zoom: 11,
  resampling: 'bilinear',
  ...extra,
});

let dir: string;
let clock: FakeClock;
let logs: string[];
let b: LocalBackend;
let source: SourceRef;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tessera-pyramid-'));
  clock = new FakeClock();
  logs = [];
  b = createLocalBackend(join(dir, 'backend'), { clock, telemetry: new JsonTelemetry((l) => logs.push(l)) });
  // 5.12 km of a Sentinel-like 10 m scene at 51.4 N, DEFLATE in 256 px blocks as a COG: 4 x 4 tiles of zoom 14
  // (9.55 m Mercator pixels, 6 m on the ground).
  const path = join(dir, 'pyramid.tif');
  await writeSyntheticScene(path, { ...SENTINEL_LIKE_SCENE, width: 512, height: 512, seed: 3, blockSize: 256, compression: 'DEFLATE' });
  const put = await b.sources.putIfAbsent('scenes/pyramid.tif', new Uint8Array(readFileSync(path)));
  if (put.kind !== 'written') throw new Error('scene not staged');
  source = { bucket: 'local-sources', key: 'scenes/pyramid.tif', versionToken: put.version };
});

afterAll(() => {
  b.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A scene grid on WebMercatorQuad: `cols` x `rows` tiles of zoom `zoom` from (minCol, minRow). */
function tmsGrid(zoom: number, minCol: number, minRow: number, cols: number, rows: number) {
  const set = tileMatrixSet('WebMercatorQuad');
  const target: GridTarget = {
    crs: { epsg: 3857 },
    geoTransform: tmsTileGrid(set, zoom, minCol, minRow, 256).geoTransform as GridTarget['geoTransform'],
    tms: { id: 'WebMercatorQuad', zoom, minCol, minRow },
  };
  return { width: cols * 256, height: rows * 256, target };
}

describe('the levels of a pyramid', () => {
  it('halves the highest zoom tile range per zoom; a parent has the children that lie in the scene', () => {
    const grid = tmsGrid(5, 3, 6, 3, 2); // columns 3-5, rows 6-7 of zoom 5
    const z4 = levelGrid(grid, 256, 4);
    expect(z4.target.tms).toEqual({ id: 'WebMercatorQuad', zoom: 4, minCol: 1, minRow: 3 });
    expect([z4.cols, z4.rows]).toEqual([2, 1]); // columns 1-2, row 3
    expect(z4.target.geoTransform).toEqual(tmsTileGrid(tileMatrixSet('WebMercatorQuad'), 4, 1, 3, 256).geoTransform);
    // Tile (1, 3) of zoom 4 has children (2..3, 6..7) of zoom 5; only column 3 is in the scene.
    const kids = childrenOf(ps('s', grid), 4, { row: 0, col: 0 });
    expect(kids.map((k) => [k.window.col, k.window.row, k.dx, k.dy])).toEqual([
      [0, 0, 1, 0],
      [0, 1, 1, 1],
    ]);
    expect(kids[0]?.key).toBe(outputKeys.tile('s', { row: 0, col: 0 }, { tms: 'WebMercatorQuad', z: 5, x: 3, y: 6 }));
    expect(parentWindowOf(grid, 256, 5, { row: 1, col: 2 })).toMatchObject({ row: 0, col: 1 });
    expect(tilesPerZoom(grid, 256, 3)).toEqual([
      { zoom: 5, tiles: 6 },
      { zoom: 4, tiles: 2 },
      { zoom: 3, tiles: 2 }, // columns 0-1 of row 1
    ]);
  });

  it('keeps a span across the antimeridian one span at every zoom: column 8 of zoom 3 is tile 0, its parent tile 0 of zoom 2', () => {
    const grid = tmsGrid(3, 7, 2, 2, 1); // tiles 7 and 0 (= 8) of zoom 3
    const z2 = levelGrid(grid, 256, 2);
    expect([z2.target.tms?.minCol, z2.cols]).toEqual([3, 2]);
    expect([...windows(z2)].map((w) => tmsTileOf(z2.target, w)?.x)).toEqual([3, 0]);
    const kids = childrenOf(ps('s', grid), 2, { row: 0, col: 1 });
    expect(kids.map((k) => k.key)).toEqual([outputKeys.tile('s', { row: 0, col: 1 }, { tms: 'WebMercatorQuad', z: 3, x: 0, y: 2 })]);
    // Zoom 1 is two columns wide: the span is its whole row; zoom 0 is the one tile, both children of it.
    expect(tilesPerZoom(grid, 256, 0).map((l) => l.tiles)).toEqual([2, 2, 2, 1]);
    expect(childrenOf(ps('s', grid), 0, { row: 0, col: 0 }).map((k) => [k.window.col, k.dx])).toEqual([
      [0, 0],
      [1, 1],
    ]);
    expect(parentWindowOf(grid, 256, 1, { row: 0, col: 1 })).toMatchObject({ row: 0, col: 0 });
  });

  it('reduces a 2 x 2 block by the resampling: the mean, nearest the north-west pixel, never onto the nodata value', () => {
    expect(reducerOf('bilinear', -9999)([1, 2, 3, 6], 4, true)).toBe(3);
    expect(reducerOf('average', -9999)([1, 2, 0, 0], 2, false)).toBe(1.5);
    expect(reducerOf('nearest', -9999)([5, 7, 0, 0], 2, false)).toBe(-9999);
    expect(reducerOf('nearest', -9999)([5, 7, 0, 0], 2, true)).toBe(5);
    expect(reducerOf('mode', -9999)([2, 3, 3, 2], 4, true)).toBe(2);
    expect(reducerOf('max', -9999)([2, 3, 9, 2], 4, true)).toBe(9);
    expect(reducerOf('average', 0)([-1, 1, 0, 0], 2, true)).toBeGreaterThan(0);
  });
});

describe('bad zoom input is refused with a typed error naming the fix, before any claim', () => {
  it('refuses min_zoom above zoom, equal to it, or without a tile matrix set; the CLI range parser the same', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ zoom: 8, min_zoom: 14 }, /min_zoom 14 is above zoom 8.*swap them.*--zoom 8-14/],
      [{ zoom: 8, min_zoom: 8 }, /equals zoom: one zoom is written without min_zoom \(--zoom 8\)/],
      [{ tms: undefined, zoom: undefined, min_zoom: 3 }, /min_zoom starts a zoom range of a tile matrix set/],
      [{ min_zoom: 2.5 }, /min_zoom must be an integer/],
    ];
    for (const [extra, message] of cases) {
      const p = Object.fromEntries(Object.entries(pyramidParams(extra)).filter(([, v]) => v !== undefined)) as ProcessingParams;
      expect(() => tilingParams(p), JSON.stringify(extra)).toThrow(InvalidParamsError);
      expect(() => tilingParams(p), JSON.stringify(extra)).toThrow(message);
    }
    expect(zoomRangeParams('8-14')).toEqual({ zoom: 14, min_zoom: 8 });
    expect(zoomRangeParams('14-14')).toEqual({ zoom: 14 });
    expect(zoomRangeParams(' 9 ')).toEqual({ zoom: 9 });
    expect(() => zoomRangeParams('14-8')).toThrow(/--zoom 14-8: the lower zoom comes first, e.g. --zoom 8-14/);
    expect(() => zoomRangeParams('8-')).toThrow(/must be a zoom or a range MIN-MAX/);
    expect(() => zoomRangeParams('8-31', 'tessera:zoom')).toThrow(/tessera:zoom 8-31: zooms run from 0 to 30/);
  });

  it("refuses a zoom outside the tile matrix set, naming the set's zooms", () => {
    expect(() => checkZooms(tilingParams(pyramidParams({ zoom: 25, min_zoom: 20 })))).toThrow(
      /zoom range 20-25 is outside WebMercatorQuad, whose zooms are 0 to 24: choose zooms within them \(e.g. --zoom 18-24\)/,
    );
    expect(() => checkZooms(tilingParams(pyramidParams({ tms: 'UTM31WGS84Quad', zoom: 5, min_zoom: 0 })))).toThrow(
      /zoom range 0-5 is outside UTM31WGS84Quad, whose zooms are 1 to 24/,
    );
    expect(() => checkZooms(tilingParams(pyramidParams({ zoom: 24, min_zoom: 0 })))).not.toThrow();
  });

  it('refuses a range that makes too many tiles at fan-out, saying the count, the limit and the zoom that fits; nothing is written or enqueued', async () => {
    const params = pyramidParams({ version: 'too-many', zoom: 24, min_zoom: 10 });
    const error = await fanOutScene(b, { source, params }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidParamsError);
    expect((error as Error).message).toMatch(
      /^zooms 10-24 of WebMercatorQuad make [\d,]+ tiles for this scene \(zoom 24: [\d,]+, zoom 23: [\d,]+, zoom 22: [\d,]+, \.\.\.\), more than the 1,000,000 one scene may have; lower the highest zoom: --zoom 10-22 makes at most [\d,]+$/,
    );
    expect(await b.queue.receive(10, 1000)).toEqual([]);
    for await (const h of b.outputs.list('')) expect(h.key).not.toContain('scene.json');
    // The bound itself: the same scene's own count against a smaller limit.
    expect(() => assertSceneTileCount(tmsGrid(5, 0, 0, 4, 4), tilingParams(pyramidParams({ zoom: 5, min_zoom: 3 })), 20)).toThrow(
      /zooms 3-5 of WebMercatorQuad make 21 tiles for this scene \(zoom 5: 16, zoom 4: 4, zoom 3: 1\), more than the 20 one scene may have; lower the highest zoom: --zoom 3-4 makes at most 5/,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// The pipeline

interface Reads {
  sourceBytes: number;
  outputBytes: number;
}

/** The backend with every range read of its stores counted into `reads` (what a tile job reads: source, or child tiles). */
function counted(reads: Reads): Backend {
  const wrap = (store: ObjectStore, field: keyof Reads): ObjectStore =>
    new Proxy(store, {
      get(target, prop) {
        if (prop === 'getRange') {
          return async (...args: Parameters<ObjectStore['getRange']>) => {
            const bytes = await target.getRange(...args);
            reads[field] += bytes.byteLength;
            return bytes;
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  return { ...b, sources: wrap(b.sources, 'sourceBytes'), outputs: wrap(b.outputs, 'outputBytes') };
}

/** Per zoom: tiles written, pixels written, bytes read from the source and from the outputs (child tiles). */
type ZoomReads = Map<number, { tiles: number; pixels: number; sourceBytes: number; outputBytes: number; childPixels: number }>;

/**
 * Pull and process until the queue is empty, one delivery after another, each handled `times` times (the ack of the
 * first handling lost: the message comes back once). Tracks what each zoom read.
 */
async function drain(worker: string, options: { times?: number; perZoom?: ZoomReads; skip?: (job: TileJob) => boolean } = {}) {
  const outcomes: TileOutcome[] = [];
  const handled = new Map<string, number>();
  // Each job on a cold instance (its own raster cache), as the tiles of a scene spread over a cloud's instances: what
  // one tile job reads, header included.
  const reads: Reads = { sourceBytes: 0, outputBytes: 0 };
  for (let round = 0; round < 1000; round++) {
    const batch: Delivery[] = await b.queue.receive(10, 5 * LEASE);
    if (batch.length === 0) return outcomes;
    for (const d of batch) {
      const job = parseTileJob(d.body);
      if (options.skip?.(job)) {
        await b.queue.ack(d);
        continue;
      }
      const before = { ...reads };
      const outcome = await processTile(counted(reads), settings(worker), job, `${d.deliveryId}@${worker}`);
      outcomes.push(outcome);
      const zoom = job.zoom ?? -1;
      if (options.perZoom && outcome.kind === 'written') {
        const z = options.perZoom.get(zoom) ?? { tiles: 0, pixels: 0, sourceBytes: 0, outputBytes: 0, childPixels: 0 };
        const px = job.window.width * job.window.height;
        const isParent = job.zoom !== undefined && job.zoom < (job.grid.target?.tms?.zoom ?? 0);
        const kids = isParent ? childrenOf(ps(job.sceneKey, job.grid), job.zoom as number, job.window).length : 0;
        options.perZoom.set(zoom, {
          tiles: z.tiles + 1,
          pixels: z.pixels + px,
          sourceBytes: z.sourceBytes + reads.sourceBytes - before.sourceBytes,
          outputBytes: z.outputBytes + reads.outputBytes - before.outputBytes,
          childPixels: z.childPixels + kids * 256 * 256,
        });
      }
      const n = (handled.get(d.deliveryId) ?? 0) + 1;
      handled.set(d.deliveryId, n);
      if (n < (options.times ?? 1)) await b.queue.release(d, 0);
      else await b.queue.ack(d);
    }
  }
  throw new Error('the queue kept delivering');
}

/** Every tile key of every zoom of a manifest's pyramid, by zoom. */
function pyramidKeys(m: SceneManifest): Map<number, string[]> {
  const tiling = tilingParams(m.params);
  const out = new Map<number, string[]>();
  const tms = tiling.target.tms as { zoom: number; minZoom: number };
  for (let z = tms.zoom; z >= tms.minZoom; z--)
    out.set(
      z,
      [...levelTiles(ps(m.sceneKey, m.grid), z)].map((t) => t.key),
    );
  return out;
}

async function listed(scene: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const h of b.outputs.list(outputKeys.tilePrefix(scene))) out.set(h.key, h.version);
  return out;
}

async function pixelsOf(key: string): Promise<Float32Array> {
  const tile = await openGeoTiff(b.outputs, key);
  const [values] = await tile.readWindow({ x: 0, y: 0, width: tile.width, height: tile.height }, [1]);
  return values as Float32Array;
}

const enqueuedJobs = async (): Promise<TileJob[]> => {
  const ds = await b.queue.receive(100, 1);
  for (const d of ds) await b.queue.release(d, 0);
  return ds.map((d) => parseTileJob(d.body));
};

describe('a pyramid of zooms 11-14, every message delivered twice', () => {
  const perZoom: ZoomReads = new Map();
  let manifest: SceneManifest;

  beforeAll(async () => {
    const params = pyramidParams({ version: 'twice' });
    // The scene event twice: every job of zoom 14 on the queue twice, and every message handled twice.
    const fan = await fanOutScene(b, { source, params });
    await fanOutScene(b, { source, params });
    manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    await drain('w1', { times: 2, perZoom });
  });

  it('writes every tile of every zoom once under its own key, each claim committed once', async () => {
    const keys = pyramidKeys(manifest);
    const counts = Object.fromEntries([...keys].map(([z, k]) => [z, k.length]));
    expect(counts).toEqual({ 14: 16, 13: 4, 12: 1, 11: 1 });
    const have = await listed(manifest.sceneKey);
    expect([...have.keys()].sort()).toEqual([...keys.values()].flat().sort());
    for (const [z, ks] of keys) {
      for (const key of ks) expect(key).toMatch(new RegExp(`/WebMercatorQuad/${z}/\\d+/\\d+\\.tif$`));
    }
    const tiling = tilingParams(manifest.params);
    for (let z = 14; z >= 11; z--) {
      for (const t of levelTiles(ps(manifest.sceneKey, manifest.grid), z)) {
        expect(await b.claims.get(tileJobKey(manifest.sceneKey, t.window, z)), t.key).toMatchObject({
          state: 'COMMITTED',
          outputUri: t.key,
        });
      }
    }
    expect(perZoom.get(14)?.tiles).toBe(16);
    expect([11, 12, 13].map((z) => perZoom.get(z)?.tiles)).toEqual([1, 1, 4]);
    expect(tiling.target.tms).toEqual({ id: 'WebMercatorQuad', zoom: 14, minZoom: 11 });
  });

  it('builds a parent as the mean of its children 2 x 2 blocks, nodata only where all four are', async () => {
    const tiling = tilingParams(manifest.params);
    const parent = [...levelTiles(ps(manifest.sceneKey, manifest.grid), 13)].find(
      (t) => childrenOf(ps(manifest.sceneKey, manifest.grid), 13, t.window).length === 4,
    );
    if (parent === undefined) throw new Error('no parent with four children');
    const p = await pixelsOf(parent.key);
    const nodata = Math.fround(tiling.noData);
    let checked = 0;
    for (const child of childrenOf(ps(manifest.sceneKey, manifest.grid), 13, parent.window)) {
      const c = await pixelsOf(child.key);
      for (const [i, j] of [
        [0, 0],
        [17, 90],
        [127, 127],
        [64, 3],
      ] as const) {
        const block = [c[2 * i * 256 + 2 * j], c[2 * i * 256 + 2 * j + 1], c[(2 * i + 1) * 256 + 2 * j], c[(2 * i + 1) * 256 + 2 * j + 1]];
        const valid = block.filter((v) => v !== nodata) as number[];
        const want = valid.length === 0 ? nodata : Math.fround(valid.reduce((s, v) => s + v, 0) / valid.length);
        expect(p[(child.dy * 128 + i) * 256 + child.dx * 128 + j]).toBe(want);
        checked++;
      }
    }
    expect(checked).toBe(16);
  });

  it('reads at most four tiles of pixels per tile below the highest zoom, and nothing of the source (docs/pyramids.md)', () => {
    const rows = [...perZoom].sort(([a], [b]) => b - a);
    for (const [zoom, r] of rows) {
      const perPixel = { source: r.sourceBytes / r.pixels, outputs: r.outputBytes / r.pixels, childPixels: r.childPixels / r.pixels };
      if (zoom === 14) {
        // Rendered from the source, as one zoom's tiles are: a 10 m source under 9.55 m (6 m on the ground) pixels; each
        // tile reads the header (64 KiB) and the 256 px blocks of two uint16 bands under it (4.7 B/px measured).
        expect(perPixel.source, `zoom ${zoom}`).toBeLessThan(8);
      } else {
        expect(r.sourceBytes, `zoom ${zoom}`).toBe(0);
        expect(perPixel.childPixels, `zoom ${zoom}`).toBeLessThanOrEqual(4);
        // Float32 children, compressed: at most 4 bytes of child tile per child pixel, and 4 child pixels per pixel.
        expect(perPixel.outputs, `zoom ${zoom}`).toBeLessThanOrEqual(16);
      }
    }
  });

  it('reads less for its zoom-11 tile than the same tile read from the source (one zoom, no pyramid) does', async () => {
    const direct: ZoomReads = new Map();
    await fanOutScene(b, { source, params: (({ min_zoom: _, ...p }) => p)(pyramidParams({ version: 'direct-11', zoom: 11 })) });
    await drain('w1', { perZoom: direct });
    const one = direct.get(-1);
    const pyramid = perZoom.get(11);
    if (one === undefined || pyramid === undefined) throw new Error('nothing measured');
    expect(one.tiles).toBe(1);
    // From the source, the tile reads every source block under it: all of this 5 km scene. From its child, one tile.
    expect(one.sourceBytes / one.pixels).toBeGreaterThan(2 * (pyramid.outputBytes / pyramid.pixels));
    // The figures of docs/pyramids.md: TESSERA_PYRAMID_READS=1 prints them.
    if (process.env.TESSERA_PYRAMID_READS) console.log(JSON.stringify({ pyramid: [...perZoom], direct: one }));
  });

  it('assembles the VRT mosaic and the STAC Item of the highest zoom, and only once every zoom is complete', async () => {
    const m = await assembleMosaic(b, manifest.sceneKey);
    expect([m.manifestCount, m.gridCount]).toEqual([16, 16]);
    const vrt = new TextDecoder().decode(await b.outputs.get(m.mosaicKey));
    expect(vrt.match(/<SourceFilename[^>]*>[^<]*\/14\/\d+\/\d+\.tif</g)?.length).toBe(16);
    expect(vrt).not.toMatch(/\/1[123]\/\d+\/\d+\.tif/);
    const item = JSON.parse(new TextDecoder().decode(await b.outputs.get(m.stacItemKey as string)));
    expect(item.properties.description).toMatch(/WebMercatorQuad, zooms 11 to 14; the mosaics are of zoom 14/);
  });
});

describe('a pyramid of rendered PNG tiles (a colormap, nodata transparent)', () => {
  it("builds each parent from its children's images: the mean colour of the opaque pixels of each 2 x 2 block, transparent where none is", async () => {
    const params = pyramidParams({
      version: 'png',
      zoom: 14,
      min_zoom: 13,
      output: { format: 'PNG', nodata: -9999, rescale: [-1, 1], colormap: 'rdylgn' },
    });
    const fan = await fanOutScene(b, { source, params });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    await drain('w1');
    const p = pyramidScene(manifest.sceneKey, manifest.grid, tilingParams(params));
    const parent = [...levelTiles(p, 13)].find((t) => childrenOf(p, 13, t.window).length === 4);
    if (parent === undefined) throw new Error('no parent with four children');
    expect(parent.key).toMatch(/\/WebMercatorQuad\/13\/\d+\/\d+\.png$/);
    const image = await decodeImage(await b.outputs.get(parent.key), 4);
    let opaque = 0;
    let transparent = 0;
    for (const child of childrenOf(p, 13, parent.window)) {
      const c = await decodeImage(await b.outputs.get(child.key), 4);
      for (let i = 0; i < 128; i += 9) {
        for (let j = 0; j < 128; j += 7) {
          const at = [2 * i * 256 + 2 * j, 2 * i * 256 + 2 * j + 1, (2 * i + 1) * 256 + 2 * j, (2 * i + 1) * 256 + 2 * j + 1];
          const lit = at.filter((k) => (c.data[4 * k + 3] as number) === 255);
          const o = 4 * ((child.dy * 128 + i) * 256 + child.dx * 128 + j);
          const got = [...image.data.subarray(o, o + 4)];
          if (lit.length === 0) {
            expect(got).toEqual([0, 0, 0, 0]);
            transparent++;
            continue;
          }
          const mean = (ch: number) => Math.floor(lit.reduce((sum, k) => sum + (c.data[4 * k + ch] as number), 0) / lit.length + 0.5);
          expect(got).toEqual([mean(0), mean(1), mean(2), 255]);
          opaque++;
        }
      }
    }
    expect(opaque).toBeGreaterThan(100);
    // The scene's edge runs through the tiles of zoom 14 (its footprint is not a Mercator rectangle).
    expect(opaque + transparent).toBe(4 * 15 * 19);
  });
});

// ---------------------------------------------------------------------------------------------
// Crash points between a child and its parent (docs/pyramids.md, "How a parent waits")

const die = (): Promise<never> => Promise.reject(new Error('the process died here'));

/** A fresh pyramid scene (its own version label: its own keys) fanned out, its jobs of zoom 14 taken off the queue. */
async function freshPyramid(version: string): Promise<{ manifest: SceneManifest; jobs: TileJob[] }> {
  const params = pyramidParams({ version, zoom: 14, min_zoom: 13 });
  const fan = await fanOutScene(b, { source, params });
  const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
  const ds = await b.queue.receive(100, 1);
  for (const d of ds) await b.queue.ack(d);
  return { manifest, jobs: ds.map((d) => parseTileJob(d.body)) };
}

/** The first parent of zoom 13 with four children, its child jobs (the last one apart) and its key. */
function family(manifest: SceneManifest, jobs: readonly TileJob[]) {
  const parent = [...levelTiles(ps(manifest.sceneKey, manifest.grid), 13)][0];
  if (parent === undefined) throw new Error('no parent');
  const kids = childrenOf(ps(manifest.sceneKey, manifest.grid), 13, parent.window).map(
    (c) => jobs.find((j) => j.outputKey === c.key) as TileJob,
  );
  expect(kids).toHaveLength(4);
  return { parentKey: parent.key, first: kids.slice(0, 3), last: kids[3] as TileJob };
}

describe('a pyramid survives a crash at every point between its last child and its parent', () => {
  it('the last child dies after its write, before the parent step: no parent yet; its redelivery enqueues it, the parent is built once', async () => {
    const { manifest, jobs } = await freshPyramid('crash-before-enqueue');
    const { parentKey, first, last } = family(manifest, jobs);
    for (const j of first) expect((await processTile(b, settings('w1'), j, 'm@w1')).kind).toBe('written');
    await expect(processTile(b, settings('w1', { afterWrite: die }), last, 'm4@w1')).rejects.toThrow('died');
    // Its tile is written, its claim still CLAIMED, and no child enqueued the parent: the first three checked before it.
    expect(await b.outputs.head(last.outputKey)).toBeDefined();
    expect((await enqueuedJobs()).map((j) => j.outputKey)).toEqual([]);
    clock.advance(LEASE + 1);
    expect((await processTile(b, settings('w2'), last, 'm4@w2')).kind).toBe('already-present');
    expect((await enqueuedJobs()).map((j) => j.outputKey)).toEqual([parentKey]);
    const outcomes = await drain('w3');
    expect(outcomes.map((o) => o.kind)).toEqual(['written']);
    expect(await b.claims.get(tileJobKey(manifest.sceneKey, { row: 0, col: 0 }, 13))).toMatchObject({ state: 'COMMITTED' });
  });

  it('the last child dies after enqueuing its parent, before its commit: the parent is built from its tile; the redelivery enqueues a duplicate, stopped at the claim', async () => {
    const { manifest, jobs } = await freshPyramid('crash-after-enqueue');
    const { parentKey, first, last } = family(manifest, jobs);
    for (const j of first) await processTile(b, settings('w1'), j, 'm@w1');
    await expect(processTile(b, settings('w1', { afterParentEnqueue: die }), last, 'm4@w1')).rejects.toThrow('died');
    expect(await b.claims.get(last.jobKey)).toMatchObject({ state: 'CLAIMED' });
    expect((await drain('w3')).map((o) => o.kind)).toEqual(['written']);
    const built = await b.outputs.head(parentKey);
    clock.advance(LEASE + 1);
    expect((await processTile(b, settings('w2'), last, 'm4@w2')).kind).toBe('already-present');
    expect(await b.claims.get(last.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'm4@w2' });
    expect((await drain('w3')).map((o) => o.kind === 'claim-rejected' && o.reason)).toEqual(['done']);
    expect(await b.outputs.head(parentKey)).toEqual(built);
  });

  it('the last child dies after its commit, before its ack: the redelivery stops at its claim, and the one parent message stands', async () => {
    const { manifest, jobs } = await freshPyramid('crash-after-commit');
    const { parentKey, first, last } = family(manifest, jobs);
    for (const j of [...first, last]) await processTile(b, settings('w1'), j, 'm@w1');
    expect((await processTile(b, settings('w2'), last, 'm4@w2')).kind).toBe('claim-rejected');
    expect((await enqueuedJobs()).map((j) => j.outputKey)).toEqual([parentKey]);
    expect((await drain('w3')).map((o) => o.kind)).toEqual(['written']);
  });

  it("a parent's worker dies after its claim: the redelivery takes the lapsed lease over and builds it once", async () => {
    const { manifest, jobs } = await freshPyramid('parent-dies');
    const { parentKey, first, last } = family(manifest, jobs);
    for (const j of [...first, last]) await processTile(b, settings('w1'), j, 'm@w1');
    const [parent] = await enqueuedJobs();
    await b.queue.receive(10, 1).then((ds) => Promise.all(ds.map((d) => b.queue.ack(d))));
    await expect(processTile(b, settings('w1', { afterClaim: die }), parent as TileJob, 'p@w1')).rejects.toThrow('died');
    expect(await b.outputs.head(parentKey)).toBeUndefined();
    clock.advance(LEASE + 1);
    expect((await processTile(b, settings('w2'), parent as TileJob, 'p@w2')).kind).toBe('written');
    expect(await b.claims.get((parent as TileJob).jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'p@w2' });
  });
});

describe('a pyramid job is bound to its scene', () => {
  it('refuses a message whose zoom is outside the pyramid, or a tile job without its zoom', async () => {
    const { manifest, jobs } = await freshPyramid('bound');
    const job = jobs[0] as TileJob;
    expect(() => parseTileJob(toJobMessage({ ...job, zoom: 12 }).body)).toThrow(InvalidEventError);
    const { zoom: _, ...noZoom } = job;
    expect(() => parseTileJob(toJobMessage(noZoom).body)).toThrow(/names zoom undefined; each names its zoom/);
    expect(() =>
      makeTileJob(
        manifest.sceneKey,
        manifest.source,
        manifest.params,
        manifest.grid,
        job.window,
        { kind: 'overwrite', expectedVersion: 'v1' },
        undefined,
        undefined,
        14,
      ),
    ).toThrow(/not repaired in place .* --policy new-key/);
  });

  it('treats a parent message carrying another grid as poison: no tile written, its claim given back', async () => {
    const { manifest, jobs } = await freshPyramid('tampered');
    const tms = manifest.grid.target?.tms as NonNullable<GridTarget['tms']>;
    const moved = { ...manifest.grid, target: { ...(manifest.grid.target as GridTarget), tms: { ...tms, minCol: tms.minCol + 2 } } };
    const forged = makeTileJob(
      manifest.sceneKey,
      manifest.source,
      manifest.params,
      moved,
      { row: 0, col: 0, x: 0, y: 0, width: 256, height: 256 },
      undefined,
      undefined,
      undefined,
      13,
    );
    // Its keys are consistent with its own fields, so it parses; the manifest says otherwise.
    expect(parseTileJob(toJobMessage(forged).body).outputKey).toBe(forged.outputKey);
    await expect(processTile(b, settings('w1'), forged, 'f@w1')).rejects.toThrow(InvalidEventError);
    expect(await b.outputs.head(forged.outputKey)).toBeUndefined();
    expect((await b.claims.get(forged.jobKey))?.leaseUntil).toBeLessThan(clock.now());
    expect(jobs.length).toBe(16);
  });

  it("a chunked fan-out's chunks enqueue the highest zoom's jobs, each naming its zoom; the pyramid completes", async () => {
    const params = pyramidParams({ version: 'chunked', zoom: 13, min_zoom: 12 });
    const fan = await fanOutScene(b, { source, params, chunkWindows: 2 });
    expect([fan.enqueued, fan.chunks]).toEqual([0, 2]);
    for (const d of await b.queue.receive(10, 1)) {
      expect(isFanOutChunkBody(d.body)).toBe(true);
      await handleFanOutChunk(b, parseFanOutChunk(d.body));
      await b.queue.ack(d);
    }
    const outcomes = await drain('w1');
    expect(outcomes.filter((o) => o.kind === 'written')).toHaveLength(4 + 1);
    expect((await assembleMosaic(b, fan.sceneKey)).manifestCount).toBe(4);
  });

  it('a backfill enqueues a missing tile whose children are all written (its message lost), and the mosaic waits for it', async () => {
    const params = pyramidParams({ version: 'backfill', zoom: 13, min_zoom: 12 });
    const fan = await fanOutScene(b, { source, params });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    // Zoom 12's message is lost: acked unprocessed.
    await drain('w1', { skip: (j) => j.zoom === 12 });
    const root = [...levelTiles(ps(manifest.sceneKey, manifest.grid), 12)][0]?.key as string;
    const missing = await assembleMosaic(b, manifest.sceneKey).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(MissingTilesError);
    expect((missing as MissingTilesError).missing).toEqual([root]);
    expect((missing as MissingTilesError).gridCount).toBe(5);
    const again = await fanOutScene(b, { source: manifest.source, params: manifest.params, recorded: manifest });
    expect(again.enqueued).toBe(4 + 1);
    const outcomes = await drain('w2');
    expect(outcomes.filter((o) => o.kind === 'written').map((o) => o.outputKey)).toEqual([root]);
    expect((await assembleMosaic(b, manifest.sceneKey)).manifestCount).toBe(4);
  });
});
