import { describe, expect, it } from 'vitest';
import { buildCogMosaic, type CogMosaicInput, type CogMosaicTile, CogMosaicTooLargeError } from '../../../shared/app/cog-mosaic.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { InvalidParamsError, MissingTilesError, OutputOccupiedError, SourceChangedError } from '../../../shared/domain/errors.js';
import type { ObjectHead } from '../../../shared/ports/object-store.port.js';
import { encodeCogByStrips } from '../../../shared/raster/cog-strip-writer.js';
import { encodeCog, type GeoTransform, openGeoTiff, windowGeoTransform } from '../../../shared/raster/index.js';
import type { BlockCompression } from '../../../shared/raster/tiff-writer.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';

const NO_DATA = -9999;
const GT: GeoTransform = [500_000, 10, 0, 5_700_000, 0, -10];
const CRS = { epsg: 32631 } as const;

/** A smooth field with nodata holes (one crossing a block row boundary), deterministic. */
function field(width: number, height: number): Float32Array {
  const data = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) data[y * width + x] = Math.sin(x / 37) * Math.cos(y / 23) * 0.8 + (x % 7) * 0.001;
  }
  for (let y = Math.max(0, Math.floor(height / 2) - 9); y < Math.min(height, Math.floor(height / 2) + 9); y++) {
    data.fill(NO_DATA, y * width + 5, y * width + Math.min(width, 40));
  }
  return data;
}

const rowsOf = (data: Float32Array, width: number) => async (y: number, rows: number) => data.slice(y * width, (y + rows) * width);

describe('encodeCogByStrips', () => {
  const cases: { width: number; height: number; blockSize: number; compression: BlockCompression; lanes: number }[] = [
    { width: 1000, height: 777, blockSize: 256, compression: 'DEFLATE', lanes: 1 },
    { width: 1000, height: 777, blockSize: 256, compression: 'DEFLATE', lanes: 3 },
    { width: 513, height: 1025, blockSize: 128, compression: 'ZSTD', lanes: 2 },
    { width: 97, height: 61, blockSize: 16, compression: 'NONE', lanes: 1 },
    { width: 200, height: 100, blockSize: 256, compression: 'DEFLATE', lanes: 1 },
  ];
  for (const c of cases) {
    it(`gives encodeCog's bytes for a ${c.width} x ${c.height} raster in ${c.blockSize}-pixel ${c.compression} blocks (${c.lanes} lane(s))`, async () => {
      const data = field(c.width, c.height);
      const spec = {
        width: c.width,
        height: c.height,
        geoTransform: GT,
        crs: CRS,
        noData: NO_DATA,
        blockSize: c.blockSize,
        compression: c.compression,
      };
      const asked: [number, number][] = [];
      const read = rowsOf(data, c.width);
      const streamed = await encodeCogByStrips(
        spec,
        (y, rows) => {
          asked.push([y, rows]);
          return read(y, rows);
        },
        { lanes: c.lanes },
      );
      expect(Buffer.from(streamed).equals(Buffer.from(encodeCog({ ...spec, data })))).toBe(true);
      // Top to bottom, one block row at a time: never the whole raster.
      expect(asked[0]).toEqual([0, Math.min(c.blockSize, c.height)]);
      expect(asked.every(([y, rows], i) => y === i * c.blockSize && rows <= c.blockSize)).toBe(true);
    });
  }

  it('refuses when the compressed blocks pass the budget, before reading the rest', async () => {
    const data = field(1000, 777);
    let strips = 0;
    const read = rowsOf(data, 1000);
    const encoding = encodeCogByStrips(
      { width: 1000, height: 777, geoTransform: GT, crs: CRS, noData: NO_DATA, blockSize: 256, compression: 'NONE' },
      (y, rows) => {
        strips++;
        return read(y, rows);
      },
      { lanes: 1, budget: { maxBytes: 4 * 256 * 256 * 5, exceeded: (bytes) => new Error(`over: ${bytes}`) } },
    );
    await expect(encoding).rejects.toThrow(/^over: \d+$/);
    expect(strips).toBe(2);
  });
});

/** A scene cut into tiles the way the pipeline writes them: each tile a COG georeferenced to its window. */
async function writeTiles(
  store: MemoryObjectStore,
  data: Float32Array,
  width: number,
  height: number,
  tilePx: number,
  blockSize: number,
): Promise<CogMosaicTile[]> {
  const tiles: CogMosaicTile[] = [];
  for (let y = 0; y < height; y += tilePx) {
    for (let x = 0; x < width; x += tilePx) {
      const window = { x, y, width: Math.min(tilePx, width - x), height: Math.min(tilePx, height - y) };
      const pixels = new Float32Array(window.width * window.height);
      for (let r = 0; r < window.height; r++)
        pixels.set(data.subarray((y + r) * width + x, (y + r) * width + x + window.width), r * window.width);
      const key = `tiles/scene/${y / tilePx}_${x / tilePx}.tif`;
      const cog = encodeCog({
        ...window,
        data: pixels,
        geoTransform: windowGeoTransform(GT, window),
        crs: CRS,
        noData: NO_DATA,
        blockSize,
        compression: 'DEFLATE',
      });
      await store.putIfAbsent(key, cog);
      tiles.push({ key, window });
    }
  }
  return tiles;
}

describe('buildCogMosaic', () => {
  const width = 1100;
  const height = 700;
  const data = field(width, height);
  const input = (tiles: readonly CogMosaicTile[], more: Partial<CogMosaicInput> = {}): CogMosaicInput => ({
    sceneKey: 'scene',
    mosaicKey: 'mosaics/scene.tif',
    vrtKey: 'mosaics/scene.vrt',
    width,
    height,
    geoTransform: GT,
    crs: CRS,
    noData: NO_DATA,
    blockSize: 256,
    compression: 'DEFLATE',
    tiles,
    ...more,
  });

  it('writes the COG encodeCog makes of the whole scene, with its overviews, from 512-pixel tiles', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    const telemetry = new JsonTelemetry();
    const result = await buildCogMosaic(store, input(tiles), telemetry);
    expect(result).toEqual({ kind: 'written', key: 'mosaics/scene.tif', bytes: expect.any(Number), width, height });
    const stored = await store.get('mosaics/scene.tif');
    const reference = encodeCog({
      width,
      height,
      data,
      geoTransform: GT,
      crs: CRS,
      noData: NO_DATA,
      blockSize: 256,
      compression: 'DEFLATE',
    });
    expect(Buffer.from(stored).equals(Buffer.from(reference))).toBe(true);
    expect(result.bytes).toBe(reference.byteLength);
    const cog = await openGeoTiff(store, 'mosaics/scene.tif');
    expect((await cog.overviews()).map((o) => [o.width, o.height])).toEqual([
      [550, 350],
      [275, 175],
      [138, 88],
    ]);
  });

  it('finds already-present with the same bytes on a re-run (a crash after the write), and counts it', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    const lines: string[] = [];
    const telemetry = new JsonTelemetry((l) => lines.push(l));
    const first = await buildCogMosaic(store, input(tiles), telemetry);
    const again = await buildCogMosaic(store, input(tiles), telemetry);
    expect(again).toEqual({ ...first, kind: 'already-present' });
    expect(telemetry.counters()['write-already-present']).toBe(1);
    expect(lines.some((l) => JSON.parse(l).level === 'INFO' && JSON.parse(l).event === 'write-already-present')).toBe(true);
  });

  it('fills what no tile covers with nodata, and the later tile wins where windows overlap', async () => {
    const store = new MemoryObjectStore();
    const all = await writeTiles(store, data, width, height, 512, 256);
    // Drop the middle tile of the top row, and place the first tile a second time over the gap's left part.
    const tiles = all.filter((t) => t.key !== 'tiles/scene/0_1.tif');
    const moved = { key: 'tiles/scene/0_0.tif', window: { x: 256, y: 0, width: 512, height: 512 } };
    await buildCogMosaic(store, input([...tiles, moved]), new JsonTelemetry());
    const cog = await openGeoTiff(store, 'mosaics/scene.tif');
    const [row] = await cog.readWindow({ x: 0, y: 3, width, height: 1 }, [1]);
    const expected = new Float32Array(width);
    for (let x = 0; x < width; x++) {
      if (x < 256) expected[x] = data[3 * width + x] as number;
      else if (x < 768) expected[x] = data[3 * width + (x - 256)] as number;
      else if (x < 1024) expected[x] = NO_DATA;
      else expected[x] = data[3 * width + x] as number;
    }
    expect(row).toEqual(expected);
  });

  it('names every missing tile and writes nothing', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    const listed = [...tiles, { key: 'tiles/scene/9_9.tif', window: { x: 0, y: 0, width: 10, height: 10 } }];
    const lines: string[] = [];
    const error = await buildCogMosaic(store, input(listed), new JsonTelemetry((l) => lines.push(l))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MissingTilesError);
    expect((error as MissingTilesError).missing).toEqual(['tiles/scene/9_9.tif']);
    expect((error as MissingTilesError).gridCount).toBe(listed.length);
    expect(await store.head('mosaics/scene.tif')).toBeUndefined();
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(expect.objectContaining({ level: 'ERROR', event: 'mosaic-missing-tiles' }));
  });

  it('reads each tile pinned to the version its head returned: a tile replaced in between is not mixed in', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    const replaced = 'tiles/scene/1_1.tif';
    const other = await store.get('tiles/scene/0_0.tif');
    // A repair overwrites one tile right after the build's heads saw it.
    const head = store.head.bind(store);
    store.head = async (key: string): Promise<ObjectHead | undefined> => {
      const seen = await head(key);
      if (key === replaced && seen) await store.putIfMatch(key, other, seen.version);
      return seen;
    };
    await expect(buildCogMosaic(store, input(tiles), new JsonTelemetry())).rejects.toBeInstanceOf(SourceChangedError);
    expect(await head('mosaics/scene.tif')).toBeUndefined();
  });

  it('does not take foreign bytes at the key for its own: write-occupied, ERROR, OutputOccupiedError', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    await store.putIfAbsent('mosaics/scene.tif', new Uint8Array([1, 2, 3]));
    const lines: string[] = [];
    const telemetry = new JsonTelemetry((l) => lines.push(l));
    await expect(buildCogMosaic(store, input(tiles), telemetry)).rejects.toBeInstanceOf(OutputOccupiedError);
    expect(telemetry.counters()['write-occupied']).toBe(1);
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(expect.objectContaining({ level: 'ERROR', event: 'write-occupied' }));
    expect(await store.get('mosaics/scene.tif')).toEqual(new Uint8Array([1, 2, 3]));
  });

  it('refuses a mosaic over the pixel cap before reading a tile, pointing at the VRT mosaic', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    let heads = 0;
    const head = store.head.bind(store);
    store.head = (key: string) => {
      heads++;
      return head(key);
    };
    const error = await buildCogMosaic(store, input(tiles, { maxPixels: width * height - 1 }), new JsonTelemetry()).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CogMosaicTooLargeError);
    expect((error as Error).message).toMatch(/open the VRT mosaic "mosaics\/scene\.vrt" instead/);
    expect(heads).toBe(0);
  });

  it('refuses a mosaic whose compressed blocks pass the byte cap, and writes nothing', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    const error = await buildCogMosaic(store, input(tiles, { maxBytes: 100_000 }), new JsonTelemetry()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CogMosaicTooLargeError);
    expect((error as CogMosaicTooLargeError).code).toBe('MOSAIC_TOO_LARGE');
    expect(await store.head('mosaics/scene.tif')).toBeUndefined();
  });

  it('rejects a window outside the mosaic, and a tile whose size is not its window’s, with typed errors', async () => {
    const store = new MemoryObjectStore();
    const tiles = await writeTiles(store, data, width, height, 512, 256);
    const outside = [...tiles.slice(1), { key: 'tiles/scene/0_0.tif', window: { x: 1000, y: 0, width: 512, height: 512 } }];
    await expect(buildCogMosaic(store, input(outside), new JsonTelemetry())).rejects.toThrow(InvalidParamsError);
    const wrongSize = [...tiles.slice(1), { key: 'tiles/scene/0_0.tif', window: { x: 0, y: 0, width: 256, height: 512 } }];
    await expect(buildCogMosaic(store, input(wrongSize), new JsonTelemetry())).rejects.toThrow(
      /is 512x512 but the scene manifest places a 256x512 window/,
    );
  });
});
