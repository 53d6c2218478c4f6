import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidGridError,
  NotARasterError,
  ObjectNotFoundError,
  RasterWithoutCrsError,
  UnsupportedRasterError,
} from '../../../shared/domain/errors.js';
import { tileGrid, windows } from '../../../shared/domain/tile-grid.js';
import type { ObjectHead, ObjectStore } from '../../../shared/ports/object-store.port.js';
import {
  encodeGeoTiff,
  openGeoTiff,
  type RasterWindow,
  SyntheticLandscape,
  type TypedArray,
  writeSyntheticScene,
} from '../../../shared/raster/index.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';
import { gdalGeoTiff, gdalInfo, loadGdal, scratchDir } from './gdal-harness.js';
import { patchTag, walkTiff } from './tiff-walker.js';

/** Wraps a store and counts what a reader asks of it. */
class CountingStore implements ObjectStore {
  readonly name = 'counting';
  rangeReads = 0;
  bytesRequested = 0;
  wholeReads = 0;
  constructor(private readonly inner: ObjectStore) {}
  reset(): void {
    this.rangeReads = 0;
    this.bytesRequested = 0;
    this.wholeReads = 0;
  }
  putIfAbsent(...a: Parameters<ObjectStore['putIfAbsent']>) {
    return this.inner.putIfAbsent(...a);
  }
  putIfMatch(...a: Parameters<ObjectStore['putIfMatch']>) {
    return this.inner.putIfMatch(...a);
  }
  deleteIfVersion(...a: Parameters<ObjectStore['deleteIfVersion']>) {
    return this.inner.deleteIfVersion(...a);
  }
  pin(...a: Parameters<ObjectStore['pin']>) {
    return this.inner.pin(...a);
  }
  async getRange(...[key, start, end, pin]: Parameters<ObjectStore['getRange']>): Promise<Uint8Array> {
    this.rangeReads++;
    const bytes = await this.inner.getRange(key, start, end, pin);
    this.bytesRequested += bytes.byteLength;
    return bytes;
  }
  get(key: string): Promise<Uint8Array> {
    this.wholeReads++;
    return this.inner.get(key);
  }
  head(key: string): Promise<ObjectHead | undefined> {
    return this.inner.head(key);
  }
  list(prefix: string): AsyncIterable<ObjectHead> {
    return this.inner.list(prefix);
  }
}

const SCENE = { bands: ['B04', 'B08'], epsg: 32631, originX: 500_000, originY: 5_700_000, pixelSize: 10, seed: 3 } as const;

function expectWindow(got: readonly TypedArray[], expected: readonly ArrayLike<number>[]): void {
  expect(got).toHaveLength(expected.length);
  got.forEach((band, b) => {
    const want = expected[b] as ArrayLike<number>;
    expect(band.length).toBe(want.length);
    let mismatches = 0;
    for (let i = 0; i < want.length; i++) if (band[i] !== want[i]) mismatches++;
    expect(mismatches, `band ${b + 1}`).toBe(0);
  });
}

/** Band arrays of a window cut from whole-image arrays. */
function cut(bands: readonly ArrayLike<number>[], width: number, win: RasterWindow): number[][] {
  return bands.map((band) => {
    const out: number[] = [];
    for (let r = 0; r < win.height; r++) for (let c = 0; c < win.width; c++) out.push(band[(win.y + r) * width + win.x + c] as number);
    return out;
  });
}

const scratch = scratchDir();
const store = new MemoryObjectStore();

beforeAll(async () => {
  await loadGdal();
});
afterAll(() => scratch.remove());

describe('openGeoTiff on synthetic scenes', () => {
  const W = 1300;
  const H = 1100;
  const land = new SyntheticLandscape(W, H, SCENE.bands, SCENE.seed);
  const variants = [
    { name: 'pixel-interleaved, DEFLATE', interleave: 'pixel', compression: 'DEFLATE' },
    { name: 'band-interleaved, DEFLATE', interleave: 'band', compression: 'DEFLATE' },
    { name: 'pixel-interleaved, uncompressed', interleave: 'pixel', compression: 'NONE' },
    { name: 'band-interleaved, uncompressed', interleave: 'band', compression: 'NONE' },
  ] as const;

  beforeAll(async () => {
    for (const v of variants) {
      const path = join(scratch.dir, `${v.interleave}-${v.compression}.tif`);
      await writeSyntheticScene(path, {
        ...SCENE,
        width: W,
        height: H,
        blockSize: 256,
        interleave: v.interleave,
        compression: v.compression,
      });
      await store.putIfAbsent(`synthetic/${v.interleave}-${v.compression}.tif`, readFileSync(path));
    }
  });

  it('reports size, bands, type, CRS, geotransform, nodata, blocks and band names', async () => {
    const src = await openGeoTiff(store, 'synthetic/pixel-DEFLATE.tif');
    expect(src).toMatchObject({
      key: 'synthetic/pixel-DEFLATE.tif',
      width: W,
      height: H,
      bandCount: 2,
      dataType: 'uint16',
      crs: { epsg: 32631 },
      noData: 0,
      tiled: true,
      blockWidth: 256,
      blockHeight: 256,
      compression: 'DEFLATE',
      bandDescriptions: ['B04', 'B08'],
    });
    expect(src.geoTransform).toEqual([500_000, 10, 0, 5_700_000, 0, -10]);
  });

  describe.each(variants)('$name', (v) => {
    const key = `synthetic/${v.interleave}-${v.compression}.tif`;

    it('reads an interior window spanning several blocks exactly as generated', async () => {
      const src = await openGeoTiff(store, key);
      const win = { x: 200, y: 300, width: 512, height: 512 };
      expectWindow(await src.readWindow(win, [1, 2]), land.window(win));
    });

    it('reads every window of a 512-pixel grid, clipped edge windows included', async () => {
      const src = await openGeoTiff(store, key);
      const grid = tileGrid(W, H, 512);
      const all = [...windows(grid)];
      expect(all.at(-1)).toMatchObject({ width: W - 1024, height: H - 1024 });
      for (const w of all) expectWindow(await src.readWindow(w, [1, 2]), land.window(w));
    });

    it('reads one band alone, bands in any order, and single pixels', async () => {
      const src = await openGeoTiff(store, key);
      const win = { x: 1299, y: 1099, width: 1, height: 1 };
      const [b04, b08] = land.window(win);
      expectWindow(await src.readWindow(win, [2, 1]), [b08 as Uint16Array, b04 as Uint16Array]);
      const strip = { x: 0, y: 700, width: W, height: 3 };
      expectWindow(await src.readWindow(strip, [2]), [land.window(strip)[1] as Uint16Array]);
    });
  });

  it('refuses a window outside the raster and a band it does not have', async () => {
    const src = await openGeoTiff(store, 'synthetic/pixel-DEFLATE.tif');
    await expect(src.readWindow({ x: 1000, y: 0, width: 512, height: 512 }, [1])).rejects.toBeInstanceOf(InvalidGridError);
    await expect(src.readWindow({ x: -1, y: 0, width: 5, height: 5 }, [1])).rejects.toBeInstanceOf(InvalidGridError);
    await expect(src.readWindow({ x: 0, y: 0, width: 0, height: 5 }, [1])).rejects.toBeInstanceOf(InvalidGridError);
    await expect(src.readWindow({ x: 0, y: 0, width: 5, height: 5 }, [3])).rejects.toThrow(/bands 1 to 2/);
    await expect(src.readWindow({ x: 0, y: 0, width: 5, height: 5 }, [])).rejects.toThrow(/at least one band/);
  });
});

describe('openGeoTiff reads by range only', () => {
  const size = 4096;
  const key = 'synthetic/4096.tif';
  let fileBytes = 0;
  const counting = new CountingStore(store);
  const land = new SyntheticLandscape(size, size, SCENE.bands, SCENE.seed);

  beforeAll(async () => {
    const path = join(scratch.dir, '4096.tif');
    fileBytes = (await writeSyntheticScene(path, { ...SCENE, width: size, height: size })).bytes;
    await store.putIfAbsent(key, readFileSync(path));
  }, 120_000);

  it('opens with one range read and reads a block-aligned 512 window with one more, a tiny part of the file', async () => {
    counting.reset();
    const src = await openGeoTiff(counting, key);
    expect(counting.rangeReads).toBe(1);
    const win = { x: 1536, y: 2048, width: 512, height: 512 };
    expectWindow(await src.readWindow(win, [1, 2]), land.window(win));
    expect(counting.rangeReads).toBe(2);
    expect(counting.wholeReads).toBe(0);
    expect(counting.bytesRequested).toBeLessThan(fileBytes / 20);
    expect(src.stats()).toMatchObject({ rangeReads: 2, bytesRead: counting.bytesRequested, blocksDecoded: 1 });
  });

  it('fetches the four blocks under an unaligned window in two reads, neighbours in the file coalesced', async () => {
    counting.reset();
    const src = await openGeoTiff(counting, key);
    const win = { x: 256, y: 256, width: 512, height: 512 };
    expectWindow(await src.readWindow(win, [1, 2]), land.window(win));
    expect(counting.rangeReads).toBe(3);
    expect(src.stats().blocksDecoded).toBe(4);
    expect(counting.bytesRequested).toBeLessThan(fileBytes / 10);
  });

  it('serves a repeated window from its block cache and concurrent reads from one fetch', async () => {
    counting.reset();
    const src = await openGeoTiff(counting, key);
    const win = { x: 0, y: 0, width: 512, height: 512 };
    await Promise.all([src.readWindow(win, [1, 2]), src.readWindow(win, [2]), src.readWindow(win, [1])]);
    expect(counting.rangeReads).toBe(2);
    await src.readWindow(win, [1, 2]);
    expect(counting.rangeReads).toBe(2);
    expect(src.stats().cacheHits).toBe(1);
  });

  it('fetches again when its cache is disabled', async () => {
    counting.reset();
    const src = await openGeoTiff(counting, key, { blockCacheBytes: 0 });
    const win = { x: 512, y: 512, width: 512, height: 512 };
    await src.readWindow(win, [1, 2]);
    await src.readWindow(win, [1, 2]);
    expect(counting.rangeReads).toBe(3);
  });

  it('fetches IFD values beyond a small first read with further range reads', async () => {
    counting.reset();
    const src = await openGeoTiff(counting, key, { maxHeaderBytes: 64 });
    expect(counting.rangeReads).toBeGreaterThan(1);
    expect(counting.bytesRequested).toBeLessThan(64 * 1024);
    const win = { x: 4000, y: 4000, width: 96, height: 96 };
    expectWindow(await src.readWindow(win, [1, 2]), land.window(win));
  });
});

describe('openGeoTiff block cache', () => {
  // 12 blocks of 512 px across, two uint16 bands: two rows of them (24 MiB decoded) are more than the former fixed 16 MiB.
  const width = 6144;
  const height = 1024;
  const key = 'synthetic/6144x1024.tif';

  beforeAll(async () => {
    const path = join(scratch.dir, '6144x1024.tif');
    await writeSyntheticScene(path, { ...SCENE, width, height, blockSize: 512, compression: 'DEFLATE', level: 1 });
    await store.putIfAbsent(key, readFileSync(path));
  }, 120_000);

  it('holds two rows of blocks by default: a row of tiles straddling them, read twice, decodes each block once', async () => {
    const src = await openGeoTiff(store, key);
    for (let pass = 0; pass < 2; pass++) {
      for (let x = 0; x < width; x += 256) await src.readWindow({ x, y: 384, width: 256, height: 256 }, [1, 2]);
    }
    expect(src.stats().blocksDecoded).toBe(24);
  });

  it('keeps a capacity given explicitly', async () => {
    const src = await openGeoTiff(store, key, { blockCacheBytes: 16 * 1024 * 1024 });
    for (let pass = 0; pass < 2; pass++) {
      for (let x = 0; x < width; x += 256) await src.readWindow({ x, y: 384, width: 256, height: 256 }, [1, 2]);
    }
    // Sixteen 1 MiB blocks: a row of tiles needing 24 evicts each block before it comes round again.
    expect(src.stats().blocksDecoded).toBe(48);
  });
});

describe('openGeoTiff on layouts written by GDAL', () => {
  const W = 300;
  const H = 200;
  const GEO = ['-a_srs', 'EPSG:32631', '-a_ullr', '500000', '5702000', '503000', '5700000'];
  const ramp = <T extends TypedArray>(make: (n: number) => T, f: (i: number, b: number) => number, bands = 2): T[] =>
    Array.from({ length: bands }, (_, b) => {
      const a = make(W * H);
      for (let i = 0; i < W * H; i++) a[i] = f(i, b);
      return a;
    });
  const u16 = ramp(
    (n) => new Uint16Array(n),
    (i, b) => (i * (b + 3) * 2654435761) % 65536,
  );
  const smooth16 = ramp(
    (n) => new Uint16Array(n),
    (i, b) => 1000 + ((i % W) + Math.floor(i / W)) * (b + 1),
  );
  const f32 = ramp(
    (n) => new Float32Array(n),
    (i, b) => Math.sin(i / 97 + b) * 1e3,
  );
  const f64 = ramp(
    (n) => new Float64Array(n),
    (i, b) => Math.cos(i / 51 + b) * 1e-3,
  );
  const i16 = ramp(
    (n) => new Int16Array(n),
    (i, b) => ((i * 7 + b) % 60000) - 30000,
  );
  const u8 = ramp(
    (n) => new Uint8Array(n),
    (i) => (i * 31) % 256,
    3,
  );
  const i32 = ramp(
    (n) => new Int32Array(n),
    (i, b) => (i - 30000) * 70001 * (b + 1),
    1,
  );
  const u32 = ramp(
    (n) => new Uint32Array(n),
    (i) => i * 65537,
    1,
  );

  it.each([
    ['stripped, uncompressed', u16, ['-co', 'TILED=NO']],
    ['one strip for the whole image, uncompressed (read in row slices)', u16, ['-co', 'BLOCKYSIZE=200']],
    ['stripped, LZW, horizontal predictor', smooth16, ['-co', 'COMPRESS=LZW', '-co', 'PREDICTOR=2']],
    ['7-row strips, DEFLATE, band-interleaved', u16, ['-co', 'COMPRESS=DEFLATE', '-co', 'INTERLEAVE=BAND', '-co', 'BLOCKYSIZE=7']],
    ['64 x 32 tiles, PACKBITS', smooth16, ['-co', 'TILED=YES', '-co', 'BLOCKXSIZE=64', '-co', 'BLOCKYSIZE=32', '-co', 'COMPRESS=PACKBITS']],
    [
      'big-endian tiles, DEFLATE, horizontal predictor',
      smooth16,
      ['-co', 'TILED=YES', '-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=2', '-co', 'ENDIANNESS=BIG'],
    ],
    [
      'BigTIFF, band-interleaved tiles, LZW',
      u16,
      ['-co', 'BIGTIFF=YES', '-co', 'TILED=YES', '-co', 'COMPRESS=LZW', '-co', 'INTERLEAVE=BAND'],
    ],
    ['float32 tiles, DEFLATE, floating-point predictor', f32, ['-co', 'TILED=YES', '-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=3']],
    [
      'big-endian float32 strips, LZW, floating-point predictor',
      f32,
      ['-co', 'COMPRESS=LZW', '-co', 'PREDICTOR=3', '-co', 'ENDIANNESS=BIG'],
    ],
    ['pixel-interleaved float64, floating-point predictor', f64, ['-co', 'TILED=YES', '-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=3']],
    ['int16, DEFLATE, horizontal predictor', i16, ['-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=2']],
    ['three uint8 bands, LZW', u8, ['-co', 'COMPRESS=LZW', '-co', 'TILED=YES', '-co', 'BLOCKXSIZE=32', '-co', 'BLOCKYSIZE=48']],
    ['int32, uncompressed', i32, []],
    ['uint32, DEFLATE, horizontal predictor', u32, ['-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=2', '-co', 'TILED=YES']],
  ] as const)('reads %s', async (name, bands, options) => {
    const key = `gdal/${name.replace(/[^a-z0-9]+/gi, '-')}.tif`;
    await store.putIfAbsent(key, await gdalGeoTiff(scratch.dir, `layout-${Math.abs(hashOf(name))}`, bands, W, H, [...GEO, ...options]));
    const src = await openGeoTiff(store, key);
    expect(src).toMatchObject({ width: W, height: H, bandCount: bands.length, crs: { epsg: 32631 } });
    expect(src.geoTransform).toEqual([500_000, 10, 0, 5_702_000, 0, -10]);
    const all = Array.from({ length: bands.length }, (_, i) => i + 1);
    const whole = { x: 0, y: 0, width: W, height: H };
    expectWindow(await src.readWindow(whole, all), cut(bands, W, whole));
    const inner = { x: 37, y: 61, width: 150, height: 101 };
    expectWindow(await src.readWindow(inner, all.slice().reverse()), cut(bands, W, inner).reverse());
  });

  it('reads blocks GDAL left out of a sparse file as nodata', async () => {
    // The top-left 64 x 64 tile is all nodata, so GDAL with SPARSE_OK writes no bytes for it.
    const band = (smooth16[0] as Uint16Array).slice();
    for (let r = 0; r < 64; r++) band.fill(5, r * W, r * W + 64);
    const bytes = await gdalGeoTiff(scratch.dir, 'sparse', [band], W, H, [
      ...GEO,
      '-a_nodata',
      '5',
      '-co',
      'SPARSE_OK=TRUE',
      '-co',
      'TILED=YES',
      '-co',
      'BLOCKXSIZE=64',
      '-co',
      'BLOCKYSIZE=64',
    ]);
    expect(walkTiff(bytes).ifds[0]?.tags.get(325)?.[0]).toBe(0);
    await store.putIfAbsent('gdal/sparse.tif', bytes);
    const src = await openGeoTiff(store, 'gdal/sparse.tif');
    const win = { x: 0, y: 0, width: 100, height: 80 };
    expectWindow(await src.readWindow(win, [1]), cut([band], W, win));
  });

  it('reads the full-resolution image of a GDAL COG with overviews, and its nodata', async () => {
    const bytes = await gdalGeoTiff(
      scratch.dir,
      'gdal-cog',
      f32.slice(0, 1),
      W,
      H,
      [...GEO, '-co', 'BLOCKSIZE=64', '-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=YES', '-a_nodata', '-9999'],
      'COG',
    );
    await store.putIfAbsent('gdal/cog.tif', bytes);
    const src = await openGeoTiff(store, 'gdal/cog.tif');
    expect(src).toMatchObject({ width: W, height: H, noData: -9999, blockWidth: 64, dataType: 'float32' });
    const win = { x: 100, y: 50, width: 200, height: 150 };
    expectWindow(await src.readWindow(win, [1]), cut(f32.slice(0, 1), W, win));
  });

  it('reads a geographic CRS and applies GDAL’s half-pixel shift for PixelIsPoint', async () => {
    const point = await gdalGeoTiff(scratch.dir, 'point', u16.slice(0, 1), W, H, [
      '-a_srs',
      'EPSG:4326',
      '-a_ullr',
      '2',
      '49',
      '2.3',
      '48.8',
      '-mo',
      'AREA_OR_POINT=Point',
    ]);
    await store.putIfAbsent('gdal/point.tif', point);
    const src = await openGeoTiff(store, 'gdal/point.tif');
    expect(src.crs).toMatchObject({ epsg: 4326, geographic: true });
    const path = join(scratch.dir, 'point-check.tif');
    writeFileSync(path, point);
    const info = await gdalInfo(path);
    expect(info.metadata['']?.AREA_OR_POINT).toBe('Point');
    src.geoTransform.forEach((v, i) => {
      expect(v).toBeCloseTo(info.geoTransform[i] as number, 9);
    });
  });
});

describe('openGeoTiff refuses what it cannot read, with the reason', () => {
  const W = 40;
  const H = 30;
  const GEO = ['-a_srs', 'EPSG:32631', '-a_ullr', '500000', '5700300', '500400', '5700000'];
  const band = new Uint16Array(W * H).map((_, i) => i);
  const put = async (key: string, bytes: Uint8Array) => {
    await store.putIfAbsent(key, bytes);
    return key;
  };
  const plain = () => gdalGeoTiff(scratch.dir, 'plain', [band], W, H, GEO);

  it.each([
    ['a PNG image', async () => gdalGeoTiff(scratch.dir, 'png', [new Uint8Array(W * H)], W, H, [], 'PNG'), /looks like a PNG image/],
    ['a text file', async () => new TextEncoder().encode('band,value\nB04,1200\n'), /looks like text/],
    ['an empty object', async () => new Uint8Array(0), /it is empty/],
    ['a 5-byte object', async () => new Uint8Array([0x49, 0x49, 0x2a, 0, 8]), /only 5 bytes long/],
    ['a TIFF with the wrong version number', async () => patchMagic(await plain()), /version number is 99/],
    ['a TIFF cut inside its header', async () => (await plain()).slice(0, 20), /truncated TIFF/],
    ['a TIFF cut inside its image data', async () => sliceHalf(await plain()), /truncated TIFF: its block/],
  ])('NotARasterError for %s', async (_name, make, message) => {
    const key = await put(`bad/${_name.replace(/\W+/g, '-')}`, await make());
    const err = await openGeoTiff(store, key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotARasterError);
    expect((err as Error).message).toMatch(message);
  });

  it('NotARasterError when image data turns out truncated at read time, beyond the header read', async () => {
    const path = join(scratch.dir, 'cut.tif');
    await writeSyntheticScene(path, { ...SCENE, width: 1024, height: 1024, blockSize: 256 });
    const whole = readFileSync(path);
    const key = await put('bad/cut-late.tif', whole.subarray(0, whole.byteLength - 1000));
    const src = await openGeoTiff(store, key, { maxHeaderBytes: 4096 });
    await expect(src.readWindow({ x: 0, y: 0, width: 10, height: 10 }, [1])).resolves.toHaveLength(1);
    await expect(src.readWindow({ x: 1000, y: 1000, width: 24, height: 24 }, [1])).rejects.toThrow(/truncated TIFF/);
  });

  it('RasterWithoutCrsError for a TIFF without GeoKeys', async () => {
    const key = await put('bad/no-crs.tif', await gdalGeoTiff(scratch.dir, 'nocrs', [band], W, H, []));
    await expect(openGeoTiff(store, key)).rejects.toThrow(RasterWithoutCrsError);
    await expect(openGeoTiff(store, key)).rejects.toThrow(/no GeoTIFF GeoKeys.*-a_srs EPSG/);
  });

  it('RasterWithoutCrsError for a CRS without a position on the ground', async () => {
    const key = await put('bad/no-gt.tif', await gdalGeoTiff(scratch.dir, 'nogt', [band], W, H, ['-a_srs', 'EPSG:32631']));
    await expect(openGeoTiff(store, key)).rejects.toThrow(RasterWithoutCrsError);
    await expect(openGeoTiff(store, key)).rejects.toThrow(/no ModelTiepoint/);
  });

  it('reads signed 8-bit samples (GDAL Int8) as int16 with the same values (once refused)', async () => {
    const key = await put('int8/gdal-int8.tif', await gdalGeoTiff(scratch.dir, 'int8', [band], W, H, [...GEO, '-ot', 'Int8']));
    const src = await openGeoTiff(store, key);
    expect(src.dataType).toBe('int16');
    const [got] = await src.readWindow({ x: 0, y: 0, width: W, height: H }, [1]);
    expect(Array.from(got as Int16Array)).toEqual(Array.from(band, (v) => Math.min(127, v)));
  });

  it.each([
    ['complex samples', () => gdalGeoTiff(scratch.dir, 'cint16', [band], W, H, [...GEO, '-ot', 'CInt16']), /complex integer samples/],
    ['12-bit samples', () => gdalGeoTiff(scratch.dir, 'nbits12', [band], W, H, [...GEO, '-co', 'NBITS=12']), /12-bit unsigned integer/],
    ['1-bit samples', () => gdalGeoTiff(scratch.dir, 'nbits1', [new Uint8Array(W * H)], W, H, [...GEO, '-co', 'NBITS=1']), /1-bit/],
    [
      'half-precision floats',
      () => gdalGeoTiff(scratch.dir, 'f16', [new Float32Array(W * H)], W, H, [...GEO, '-co', 'NBITS=16']),
      /16-bit floating-point/,
    ],
    ['LZMA compression', async () => patchTag(await plain(), 259, 34925), /LZMA compression/],
    ['JPEG compression', async () => patchTag(await plain(), 259, 7), /JPEG compression/],
    ['YCbCr colour', async () => patchTag(await plain(), 262, 6), /YCbCr/],
    [
      // User-defined projections of the supported families are read (docs/reprojection.md); oblique Mercator is not one.
      'a user-defined projected CRS of a method Tessera does not implement',
      () =>
        gdalGeoTiff(scratch.dir, 'userdef', [band], W, H, [
          '-a_srs',
          '+proj=omerc +lat_0=4 +lonc=115 +alpha=53.3 +gamma=53.1 +k=0.99984 +x_0=590476.87 +y_0=442857.65 +ellps=GRS80 +units=m +no_defs',
          '-a_ullr',
          '0',
          '300',
          '400',
          '0',
        ]),
      /user-defined projected CRS/,
    ],
  ])('UnsupportedRasterError for %s', async (name, make, message) => {
    const key = await put(`unsupported/${name.replace(/\W+/g, '-')}.tif`, await make());
    const err = await openGeoTiff(store, key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnsupportedRasterError);
    expect((err as Error).message).toMatch(message);
  });

  it('UnsupportedRasterError for compressed strips too large to read by window', async () => {
    const key = await put(
      'unsupported/one-strip.tif',
      await gdalGeoTiff(scratch.dir, 'onestrip', [band], W, H, [...GEO, '-co', 'COMPRESS=DEFLATE', '-co', `BLOCKYSIZE=${H}`]),
    );
    await expect(openGeoTiff(store, key, { maxBlockBytes: 1024 })).rejects.toThrow(/too large to read by window.*TILED=YES/);
    await expect(openGeoTiff(store, key)).resolves.toMatchObject({ tiled: false, blockHeight: H });
  });

  it('InvalidGridError for an absurd size', async () => {
    const wide = encodeGeoTiff({
      width: 70_000,
      height: 1,
      dataType: 'uint8',
      bandCount: 1,
      bands: [new Uint8Array(70_000)],
      geoTransform: [0, 1, 0, 0, 0, -1],
      crs: { epsg: 32631 },
      compression: 'NONE',
      blockSize: 16,
    });
    const key = await put('bad/huge.tif', patchTag(wide, 256, 2_000_000));
    await expect(openGeoTiff(store, key)).rejects.toThrow(InvalidGridError);
  });

  it('ObjectNotFoundError for a missing object', async () => {
    await expect(openGeoTiff(store, 'bad/missing.tif')).rejects.toBeInstanceOf(ObjectNotFoundError);
  });
});

function hashOf(s: string): number {
  let h = 0;
  for (const c of s) h = (Math.imul(h, 31) + (c.codePointAt(0) ?? 0)) | 0;
  return h;
}

function patchMagic(bytes: Uint8Array): Uint8Array {
  const out = bytes.slice();
  out[2] = 99;
  return out;
}

function sliceHalf(bytes: Uint8Array): Uint8Array {
  return bytes.slice(0, Math.floor(bytes.byteLength / 2));
}
