import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromArrayBuffer } from 'geotiff';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidParamsError, UnsupportedRasterError } from '../../../shared/domain/errors.js';
import {
  COG_GHOST_AREA,
  cogOverviewSizes,
  downsampleAverage,
  encodeCog,
  encodeCogAsync,
  type GeoTransform,
  openGeoTiff,
} from '../../../shared/raster/index.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';
import { gdalInfo, gdalReadWindow, loadGdal, rootEpsg, scratchDir } from './gdal-harness.js';
import { cogLayoutErrors, walkTiff } from './tiff-walker.js';

const NO_DATA = -9999;
const GT: GeoTransform = [500_000, 10, 0, 5_700_000, 0, -10];

/** A smooth float field with a nodata hole, deterministic. */
function field(width: number, height: number): Float32Array {
  const data = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) data[y * width + x] = Math.sin(x / 37) * Math.cos(y / 23) * 0.8 + (x % 7) * 0.001;
  }
  for (let y = 10; y < 20; y++) data.fill(NO_DATA, y * width + 5, y * width + 25);
  return data;
}

describe('encodeCog', () => {
  const scratch = scratchDir();
  const write = (name: string, bytes: Uint8Array) => {
    const path = join(scratch.dir, name);
    writeFileSync(path, bytes);
    return path;
  };

  beforeAll(async () => {
    await loadGdal();
  });
  afterAll(() => scratch.remove());

  describe('a 1000 x 777 raster in 256-pixel blocks', () => {
    const width = 1000;
    const height = 777;
    const data = field(width, height);
    const cog = encodeCog({
      width,
      height,
      data,
      geoTransform: GT,
      crs: { epsg: 32631 },
      noData: NO_DATA,
      blockSize: 256,
      compression: 'DEFLATE',
    });

    it('follows the COG layout rules of GDAL’s validator, leaders and trailers included', () => {
      expect(cogLayoutErrors(cog)).toEqual([]);
    });

    it('starts with GDAL’s ghost area, byte for byte', () => {
      const ghost = new TextDecoder().decode(cog.subarray(8, 8 + COG_GHOST_AREA.length));
      expect(ghost).toBe(
        'GDAL_STRUCTURAL_METADATA_SIZE=000140 bytes\nLAYOUT=IFDS_BEFORE_DATA\nBLOCK_ORDER=ROW_MAJOR\n' +
          'BLOCK_LEADER=SIZE_AS_UINT4\nBLOCK_TRAILER=LAST_4_BYTES_REPEATED\nKNOWN_INCOMPATIBLE_EDITION=NO\n ',
      );
      expect(walkTiff(cog).firstIfd).toBe(192);
    });

    it('has overviews down to one block, as GDAL’s COG driver makes them', () => {
      const { ifds } = walkTiff(cog);
      expect(ifds.map((i) => [i.tags.get(256)?.[0], i.tags.get(257)?.[0]])).toEqual([
        [1000, 777],
        [500, 389],
        [250, 195],
      ]);
      expect(cogOverviewSizes(width, height, 256)).toEqual([
        { width: 500, height: 389 },
        { width: 250, height: 195 },
      ]);
    });

    it('writes float32, DEFLATE, the floating-point predictor and GDAL_NODATA in every IFD', () => {
      for (const ifd of walkTiff(cog).ifds) {
        expect(ifd.tags.get(258)).toEqual([32]);
        expect(ifd.tags.get(339)).toEqual([3]);
        expect(ifd.tags.get(259)).toEqual([8]);
        expect(ifd.tags.get(317)).toEqual([3]);
        expect(ifd.tags.get(322)).toEqual([256]);
        expect(ifd.tags.get(323)).toEqual([256]);
        expect(ifd.tags.get(42113)).toBe('-9999');
      }
      const main = walkTiff(cog).ifds[0];
      expect(main?.tags.get(33550)).toEqual([10, 10, 0]);
      expect(main?.tags.get(33922)).toEqual([0, 0, 0, 500_000, 5_700_000, 0]);
      // GeoKeys: projected model, PixelIsArea, ProjectedCSTypeGeoKey = 32631.
      expect(main?.tags.get(34735)).toEqual([1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32631]);
    });

    it('opens in GDAL with its size, geotransform, CRS, nodata, block size, compression and LAYOUT=COG', async () => {
      const info = await gdalInfo(write('cog-1000.tif', cog));
      expect(info.size).toEqual([1000, 777]);
      expect(info.geoTransform).toEqual([...GT]);
      expect(rootEpsg(info)).toBe(32631);
      expect(info.coordinateSystem?.wkt).toContain('WGS 84 / UTM zone 31N');
      const band = info.bands[0];
      expect(band?.type).toBe('Float32');
      expect(band?.noDataValue).toBe(NO_DATA);
      expect(band?.block).toEqual([256, 256]);
      expect(band?.overviews?.map((o) => o.size)).toEqual([
        [500, 389],
        [250, 195],
      ]);
      expect(info.metadata.IMAGE_STRUCTURE).toMatchObject({ COMPRESSION: 'DEFLATE', LAYOUT: 'COG', PREDICTOR: '3' });
    });

    it('holds exactly the given pixels when GDAL reads them back', async () => {
      const path = write('cog-values.tif', cog);
      const all = await gdalReadWindow(path, 1, { x: 0, y: 0, width, height });
      let mismatches = 0;
      for (let i = 0; i < data.length; i++) if (all[i] !== data[i]) mismatches++;
      expect(mismatches).toBe(0);
    });

    it('holds averaged overviews that GDAL reads back', async () => {
      const path = write('cog-ovr.tif', cog);
      const g = await loadGdal();
      const ds = (await g.open(path)).datasets[0];
      if (!ds) throw new Error('GDAL did not open the COG');
      try {
        const out = await g.gdal_translate(ds, ['-of', 'ENVI', '-ot', 'Float64', '-ovr', '0'], 'ovr0');
        const bytes = await g.getFileBytes(out);
        const got = new Float64Array(bytes.slice().buffer, 0, 500 * 389);
        const expected = downsampleAverage(data, width, height, NO_DATA);
        let mismatches = 0;
        for (let i = 0; i < expected.length; i++) if (got[i] !== expected[i]) mismatches++;
        expect(mismatches).toBe(0);
      } finally {
        await g.close(ds);
      }
    });

    it('reads back through Tessera’s own range reader', async () => {
      const store = new MemoryObjectStore();
      await store.putIfAbsent('t/cog.tif', cog);
      const src = await openGeoTiff(store, 't/cog.tif');
      expect(src).toMatchObject({ width, height, bandCount: 1, dataType: 'float32', noData: NO_DATA, crs: { epsg: 32631 }, tiled: true });
      expect(src.geoTransform).toEqual(GT);
      const [got] = await src.readWindow({ x: 300, y: 200, width: 400, height: 300 }, [1]);
      for (let r = 0; r < 300; r += 37) {
        for (let c = 0; c < 400; c += 41) expect(got?.[r * 400 + c]).toBe(data[(200 + r) * width + 300 + c]);
      }
    });

    // Every lane count: on the pool with blocks in flight at once (2, 4), and on the event loop one block
    // at a time (1, what a process on one core runs): the blocks land in their places whatever finishes first.
    it.each([1, 2, 4])('comes out byte for byte the same from encodeCogAsync with %i lane(s)', async (lanes) => {
      const async = await encodeCogAsync(
        {
          width,
          height,
          data,
          geoTransform: GT,
          crs: { epsg: 32631 },
          noData: NO_DATA,
          blockSize: 256,
          compression: 'DEFLATE',
        },
        { lanes },
      );
      expect(Buffer.compare(async, cog)).toBe(0);
    });

    it('reads back through geotiff.js, an independent decoder', async () => {
      const tiff = await fromArrayBuffer(cog.slice().buffer);
      expect(await tiff.getImageCount()).toBe(3);
      const image = await tiff.getImage(0);
      expect(image.getWidth()).toBe(1000);
      expect(image.getGeoKeys()?.ProjectedCSTypeGeoKey).toBe(32631);
      const rasters = (await image.readRasters({ window: [900, 700, 1000, 777] })) as unknown as Float32Array[];
      const got = rasters[0] as Float32Array;
      for (let r = 0; r < 77; r++) for (let c = 0; c < 100; c++) expect(got[r * 100 + c]).toBe(data[(700 + r) * width + 900 + c]);
    });
  });

  it('writes one IFD and no overview for a raster that fits in one block, and GDAL still reports LAYOUT=COG', async () => {
    const data = field(512, 512);
    const cog = encodeCog({
      width: 512,
      height: 512,
      data,
      geoTransform: GT,
      crs: { epsg: 32631 },
      noData: NO_DATA,
      blockSize: 512,
      compression: 'DEFLATE',
    });
    expect(walkTiff(cog).ifds).toHaveLength(1);
    expect(cogLayoutErrors(cog)).toEqual([]);
    const info = await gdalInfo(write('one-block.tif', cog));
    expect(info.bands[0]?.block).toEqual([512, 512]);
    expect(info.bands[0]?.overviews ?? []).toEqual([]);
    expect(info.metadata.IMAGE_STRUCTURE?.LAYOUT).toBe('COG');
  });

  it('pads a clipped edge tile to a full block and GDAL reads only the real pixels', async () => {
    const data = field(300, 77);
    const cog = encodeCog({
      width: 300,
      height: 77,
      data,
      geoTransform: GT,
      crs: { epsg: 32631 },
      noData: NO_DATA,
      blockSize: 512,
      compression: 'DEFLATE',
    });
    const path = write('edge.tif', cog);
    const info = await gdalInfo(path);
    expect(info.size).toEqual([300, 77]);
    expect(info.bands[0]?.block).toEqual([512, 512]);
    expect(Array.from(await gdalReadWindow(path, 1, { x: 0, y: 0, width: 300, height: 77 }))).toEqual(Array.from(data));
  });

  it('georeferences a geographic CRS and a rotated geotransform the way GDAL reads them', async () => {
    const geographic = encodeCog({
      width: 64,
      height: 32,
      data: field(64, 32),
      geoTransform: [2.1, 0.001, 0, 48.9, 0, -0.001],
      crs: { epsg: 4326 },
      noData: NO_DATA,
      blockSize: 64,
      compression: 'DEFLATE',
    });
    const gInfo = await gdalInfo(write('geographic.tif', geographic));
    expect(rootEpsg(gInfo)).toBe(4326);
    expect(gInfo.geoTransform).toEqual([2.1, 0.001, 0, 48.9, 0, -0.001]);

    const rotated: GeoTransform = [500_000, 8, 2, 5_700_000, 2, -8];
    const r = encodeCog({
      width: 64,
      height: 32,
      data: field(64, 32),
      geoTransform: rotated,
      crs: { epsg: 32631 },
      noData: NO_DATA,
      blockSize: 64,
      compression: 'DEFLATE',
    });
    expect(walkTiff(r).ifds[0]?.tags.has(34264)).toBe(true);
    expect((await gdalInfo(write('rotated.tif', r))).geoTransform).toEqual([...rotated]);
  });

  it('writes without a predictor when asked, and a NaN nodata as GDAL spells it', async () => {
    const data = field(100, 100);
    data[0] = Number.NaN;
    const cog = encodeCog({
      width: 100,
      height: 100,
      data,
      geoTransform: GT,
      crs: { epsg: 32631 },
      noData: Number.NaN,
      blockSize: 64,
      compression: 'DEFLATE',
      predictor: 1,
    });
    expect(walkTiff(cog).ifds[0]?.tags.get(42113)).toBe('nan');
    const path = write('nan.tif', cog);
    const info = await gdalInfo(path);
    expect(info.metadata.IMAGE_STRUCTURE?.PREDICTOR).toBeUndefined();
    expect(info.bands[0]?.noDataValue).toBe('NaN');
    const back = await gdalReadWindow(path, 1, { x: 0, y: 0, width: 100, height: 100 });
    expect(back[0]).toBeNaN();
    expect(Array.from(back.subarray(1))).toEqual(Array.from(data.subarray(1)));
  });

  it('refuses inputs it cannot write, naming the problem', () => {
    const base = {
      width: 10,
      height: 10,
      data: new Float32Array(100),
      geoTransform: GT,
      crs: { epsg: 32631 },
      noData: NO_DATA,
      blockSize: 16,
    } as const;
    expect(() => encodeCog({ ...base, compression: 'DEFLATE', data: new Float32Array(99) })).toThrow(InvalidParamsError);
    expect(() => encodeCog({ ...base, compression: 'DEFLATE', blockSize: 100 })).toThrow(/multiple of 16/);
    expect(() => encodeCog({ ...base, compression: 'DEFLATE', crs: {} })).toThrow(UnsupportedRasterError);
    expect(() => encodeCog({ ...base, compression: 'DEFLATE', crs: { epsg: 40000 } })).toThrow(/1 to 32766/);
  });

  it('takes the EPSG code from a WKT whose root carries one', async () => {
    const wkt =
      'PROJCS["WGS 84 / UTM zone 31N",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],' +
      'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],UNIT["metre",1],AUTHORITY["EPSG","32631"]]';
    const cog = encodeCog({
      width: 16,
      height: 16,
      data: field(16, 16),
      geoTransform: GT,
      crs: { wkt },
      noData: NO_DATA,
      blockSize: 16,
      compression: 'DEFLATE',
    });
    expect(rootEpsg(await gdalInfo(write('wkt.tif', cog)))).toBe(32631);
  });
});

describe('encodeCog’s scratch buffers (reused from one encode to the next)', () => {
  const opts = (data: Float32Array, compression: 'DEFLATE' | 'ZSTD' | 'NONE') => ({
    width: 600,
    height: 520,
    data,
    geoTransform: GT,
    crs: { epsg: 32631 },
    noData: NO_DATA,
    blockSize: 256,
    compression,
  });
  const fields = [field(600, 520), field(600, 520).map((v, i) => (i % 11 === 0 ? NO_DATA : v * 0.5 + 0.1))];

  it('give the same bytes to encodes that overlap on one lane, and to the encodes after them', async () => {
    for (const compression of ['DEFLATE', 'ZSTD', 'NONE'] as const) {
      const expected = fields.map((d) => Buffer.from(encodeCog(opts(d, compression))).toString('base64'));
      // Two one-lane encodes interleave at every block (each yields to the event loop), each with its own scratch.
      const both = await Promise.all(fields.map((d) => encodeCogAsync(opts(d, compression), { lanes: 1 })));
      expect(both.map((b) => Buffer.from(b).toString('base64'))).toEqual(expected);
      // Then the same shapes again, on the buffers those encodes gave back, in the other order.
      const again = [
        encodeCog(opts(fields[1] as Float32Array, compression)),
        await encodeCogAsync(opts(fields[0] as Float32Array, compression), { lanes: 1 }),
      ];
      expect(again.map((b) => Buffer.from(b).toString('base64'))).toEqual([expected[1], expected[0]]);
    }
  });
});

describe('downsampleAverage', () => {
  it('averages each 2 x 2 box over its valid pixels and keeps nodata where none is valid', () => {
    // 3 x 3 -> 2 x 2; the right column and bottom row boxes are clipped.
    const src = new Float32Array([1, 3, 5, -1, Number.NaN, 7, -1, -1, 9]);
    expect(Array.from(downsampleAverage(src, 3, 3, -1))).toEqual([2, 6, -1, 9]);
  });
});

describe('the COG layout check used above', () => {
  const scratch = scratchDir();
  afterAll(() => scratch.remove());

  it('passes a COG written by GDAL itself and catches a broken trailer and out-of-order blocks', async () => {
    const g = await loadGdal();
    const data = field(600, 400);
    const src = join(scratch.dir, 'src.tif');
    writeFileSync(
      src,
      encodeCog({
        width: 600,
        height: 400,
        data,
        geoTransform: GT,
        crs: { epsg: 32631 },
        noData: NO_DATA,
        blockSize: 256,
        compression: 'DEFLATE',
      }),
    );
    const ds = (await g.open(src)).datasets[0];
    if (!ds) throw new Error('GDAL did not open the source');
    let reference: Uint8Array;
    try {
      const out = await g.gdal_translate(ds, ['-of', 'COG', '-co', 'BLOCKSIZE=256', '-co', 'COMPRESS=DEFLATE'], 'gdal-cog');
      reference = await g.getFileBytes(out);
    } finally {
      await g.close(ds);
    }
    expect(cogLayoutErrors(reference)).toEqual([]);

    const ours = encodeCog({
      width: 600,
      height: 400,
      data,
      geoTransform: GT,
      crs: { epsg: 32631 },
      noData: NO_DATA,
      blockSize: 256,
      compression: 'DEFLATE',
    });
    const main = walkTiff(ours).ifds[0];
    if (!main) throw new Error('no IFD');
    const firstOffset = (main.tags.get(324) as number[])[0] as number;
    const firstCount = (main.tags.get(325) as number[])[0] as number;
    const broken = ours.slice();
    broken[firstOffset + firstCount] = (broken[firstOffset + firstCount] as number) ^ 0xff;
    expect(cogLayoutErrors(broken)).toEqual(['level 0: block 0 trailer does not repeat its last 4 bytes']);
    const noGhost = ours.slice();
    noGhost.set(new TextEncoder().encode('XDAL'), 8);
    expect(cogLayoutErrors(noGhost)).toContain('the main IFD is at 192, not 8');
  });
});
