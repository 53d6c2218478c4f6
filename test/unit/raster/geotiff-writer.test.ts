import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { encodeGeoTiff, openGeoTiff, TiledGeoTiffFileWriter, type TypedArray } from '../../../shared/raster/index.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';
import { gdalInfo, gdalReadWindow, loadGdal, scratchDir } from './gdal-harness.js';

const W = 70;
const H = 45;
const GEO = { geoTransform: [600_000, 20, 0, 5_000_000, 0, -20], crs: { epsg: 32632 } } as const;

describe('encodeGeoTiff', () => {
  const scratch = scratchDir();
  const store = new MemoryObjectStore();
  beforeAll(async () => {
    await loadGdal();
  });
  afterAll(() => scratch.remove());

  const make = <T extends TypedArray>(create: (n: number) => T, f: (i: number) => number): T => {
    const a = create(W * H);
    for (let i = 0; i < a.length; i++) a[i] = f(i);
    return a;
  };

  it.each([
    [
      'uint8',
      () => [
        make(
          (n) => new Uint8Array(n),
          (i) => i % 256,
        ),
      ],
      'Byte',
    ],
    [
      'int16',
      () => [
        make(
          (n) => new Int16Array(n),
          (i) => ((i * 37) % 40_000) - 20_000,
        ),
      ],
      'Int16',
    ],
    [
      'uint32',
      () => [
        make(
          (n) => new Uint32Array(n),
          (i) => i * 99_991,
        ),
      ],
      'UInt32',
    ],
    [
      'int32',
      () => [
        make(
          (n) => new Int32Array(n),
          (i) => -i * 99_991,
        ),
      ],
      'Int32',
    ],
    [
      'float32',
      () => [
        make(
          (n) => new Float32Array(n),
          (i) => Math.sqrt(i) - 10,
        ),
      ],
      'Float32',
    ],
    [
      'float64',
      () => [
        make(
          (n) => new Float64Array(n),
          (i) => Math.exp(i / 1000) / 3,
        ),
      ],
      'Float64',
    ],
    [
      'uint16',
      () => [
        make(
          (n) => new Uint16Array(n),
          (i) => i,
        ),
        make(
          (n) => new Uint16Array(n),
          (i) => 65_535 - i,
        ),
        make(
          (n) => new Uint16Array(n),
          (i) => i * 3,
        ),
      ],
      'UInt16',
    ],
  ] as const)('writes %s bands that GDAL and Tessera read back exactly', async (dataType, bands, gdalType) => {
    const data = bands();
    for (const interleave of ['pixel', 'band'] as const) {
      const bytes = encodeGeoTiff({
        width: W,
        height: H,
        dataType,
        bandCount: data.length,
        bands: data,
        ...GEO,
        noData: 7,
        blockSize: 32,
        interleave,
      });
      const path = join(scratch.dir, `${dataType}-${interleave}.tif`);
      writeFileSync(path, bytes);
      const info = await gdalInfo(path);
      expect(info.bands.map((b) => b.type)).toEqual(data.map(() => gdalType));
      expect(info.geoTransform).toEqual([...GEO.geoTransform]);
      for (let b = 0; b < data.length; b++) {
        expect(Array.from(await gdalReadWindow(path, b + 1, { x: 0, y: 0, width: W, height: H }))).toEqual(
          Array.from(data[b] as TypedArray),
        );
      }
      await store.putIfAbsent(`w/${dataType}-${interleave}.tif`, bytes);
      const src = await openGeoTiff(store, `w/${dataType}-${interleave}.tif`);
      expect(src).toMatchObject({ dataType, noData: 7, crs: { epsg: 32632 }, blockWidth: 32 });
      const back = await src.readWindow(
        { x: 0, y: 0, width: W, height: H },
        data.map((_, i) => i + 1),
      );
      back.forEach((band, i) => {
        expect(Array.from(band)).toEqual(Array.from(data[i] as TypedArray));
      });
    }
  });

  it('refuses bands that do not match the declared layout', () => {
    const base = { width: W, height: H, dataType: 'uint16', bandCount: 1, ...GEO } as const;
    expect(() => encodeGeoTiff({ ...base, bands: [new Uint16Array(3)] })).toThrow(/holds 3 pixels/);
    expect(() => encodeGeoTiff({ ...base, bands: [new Float32Array(W * H)] })).toThrow(/is not uint16/);
    expect(() => encodeGeoTiff({ ...base, bands: [] })).toThrow(InvalidParamsError);
    expect(() => encodeGeoTiff({ ...base, bands: [new Uint16Array(W * H)], predictor: 3 })).toThrow(/predictor 3 is for floating-point/);
    expect(() => encodeGeoTiff({ ...base, bands: [new Uint16Array(W * H)], bandDescriptions: ['a', 'b'] })).toThrow(
      /2 band descriptions for 1 bands/,
    );
  });
});

describe('TiledGeoTiffFileWriter', () => {
  const scratch = scratchDir();
  afterAll(() => scratch.remove());
  const layout = { width: 40, height: 20, dataType: 'uint16', bandCount: 1, ...GEO, blockSize: 16 } as const;

  it('refuses a tile of the wrong size, a tile too many, and closing before every tile is written', async () => {
    const w = await TiledGeoTiffFileWriter.create(join(scratch.dir, 'a.tif'), layout);
    await expect(w.writeTile(new Uint16Array(10))).rejects.toThrow(/holds 256 samples/);
    for (let i = 0; i < 5; i++) await w.writeTile(new Uint16Array(256));
    expect(w.written).toBe(5);
    await expect(w.close()).rejects.toThrow(/5 of 6 tiles written/);

    const full = await TiledGeoTiffFileWriter.create(join(scratch.dir, 'b.tif'), layout);
    for (let i = 0; i < 6; i++) await full.writeTile(new Uint16Array(256).fill(i));
    await expect(full.writeTile(new Uint16Array(256))).rejects.toThrow(/all 6 tiles are written/);
    await expect(full.close()).resolves.toBeGreaterThan(0);
  });
});
