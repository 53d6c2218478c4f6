import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { evaluate, parseExpression, SyntheticLandscape, writeSyntheticScene } from '../../../shared/raster/index.js';
import { gdalInfo, gdalReadWindow, loadGdal, rootEpsg, scratchDir } from './gdal-harness.js';
import { walkTiff } from './tiff-walker.js';

const OPTS = { width: 1100, height: 900, bands: ['B04', 'B08'], epsg: 32631, originX: 500_000, originY: 5_700_000, pixelSize: 10 } as const;

describe('writeSyntheticScene', () => {
  const scratch = scratchDir();
  const path = join(scratch.dir, 'scene.tif');
  let bytes = 0;

  beforeAll(async () => {
    await loadGdal();
    bytes = (await writeSyntheticScene(path, OPTS)).bytes;
  });
  afterAll(() => scratch.remove());

  it('writes a tiled, uncompressed, pixel-interleaved uint16 GeoTIFF of the size it reports', () => {
    const file = readFileSync(path);
    expect(file.byteLength).toBe(bytes);
    const ifd = walkTiff(file).ifds[0];
    expect(ifd?.tags.get(322)).toEqual([512]);
    expect(ifd?.tags.get(259)).toEqual([1]);
    expect(ifd?.tags.has(317)).toBe(false);
    expect(ifd?.tags.get(284)).toEqual([1]);
    expect(ifd?.tags.get(258)).toEqual([16, 16]);
    // 3 x 2 tiles, all after the header, in increasing order.
    const offsets = ifd?.tags.get(324) as number[];
    expect(offsets).toHaveLength(6);
    expect([...offsets].sort((a, b) => a - b)).toEqual(offsets);
  });

  it('is what GDAL sees: size, EPSG:32631, geotransform, nodata, band names, block size', async () => {
    const info = await gdalInfo(path);
    expect(info.size).toEqual([1100, 900]);
    expect(rootEpsg(info)).toBe(32631);
    expect(info.geoTransform).toEqual([500_000, 10, 0, 5_700_000, 0, -10]);
    expect(info.bands.map((b) => [b.description, b.type, b.noDataValue, b.block])).toEqual([
      ['B04', 'UInt16', 0, [512, 512]],
      ['B08', 'UInt16', 0, [512, 512]],
    ]);
    expect(info.metadata.IMAGE_STRUCTURE).toMatchObject({ INTERLEAVE: 'PIXEL' });
    expect(info.metadata.IMAGE_STRUCTURE?.COMPRESSION).toBeUndefined();
  });

  it('holds the landscape’s pixels, as GDAL reads them, edge tiles included', async () => {
    const land = new SyntheticLandscape(1100, 900, OPTS.bands);
    const win = { x: 900, y: 400, width: 200, height: 500 };
    const expected = land.window(win);
    for (const band of [1, 2]) {
      const got = await gdalReadWindow(path, band, win);
      expect(Array.from(got)).toEqual(Array.from(expected[band - 1] as Uint16Array));
    }
  });

  it('looks like a landscape: vegetation, bare soil, water, and a few nodata pixels', () => {
    const land = new SyntheticLandscape(2048, 2048, OPTS.bands);
    const [red, nir] = land.window({ x: 0, y: 0, width: 2048, height: 2048 });
    const ndvi = evaluate(
      parseExpression('(B08 - B04) / (B08 + B04)', OPTS.bands),
      { B04: red as Uint16Array, B08: nir as Uint16Array },
      2048 * 2048,
      {
        noData: -9999,
        sourceNoData: 0,
      },
    );
    let vegetation = 0;
    let soil = 0;
    let water = 0;
    let nodata = 0;
    for (const v of ndvi) {
      if (v === -9999) nodata++;
      else if (v > 0.6) vegetation++;
      else if (v < 0) water++;
      else if (v < 0.3) soil++;
    }
    const n = ndvi.length;
    expect(vegetation / n).toBeGreaterThan(0.05);
    expect(soil / n).toBeGreaterThan(0.05);
    expect(water / n).toBeGreaterThan(0.001);
    expect(nodata).toBeGreaterThan(10);
    expect(nodata / n).toBeLessThan(0.001);
  });

  it('is deterministic: the same seed gives the same bytes, another seed other pixels', async () => {
    const again = join(scratch.dir, 'again.tif');
    await writeSyntheticScene(again, OPTS);
    expect(Buffer.compare(readFileSync(again), readFileSync(path))).toBe(0);
    const a = new SyntheticLandscape(64, 64, OPTS.bands, 1).window({ x: 0, y: 0, width: 64, height: 64 });
    const b = new SyntheticLandscape(64, 64, OPTS.bands, 2).window({ x: 0, y: 0, width: 64, height: 64 });
    expect(Array.from(a[0] as Uint16Array)).not.toEqual(Array.from(b[0] as Uint16Array));
  });

  it.each([
    ['band-interleaved and uncompressed', { interleave: 'band', compression: 'NONE' }, 'BAND', undefined],
    ['pixel-interleaved, DEFLATE with the horizontal predictor', { compression: 'DEFLATE' }, 'PIXEL', 'DEFLATE'],
    [
      'band-interleaved, DEFLATE, 256-pixel blocks',
      { interleave: 'band', blockSize: 256, compression: 'DEFLATE', level: 6 },
      'BAND',
      'DEFLATE',
    ],
  ] as const)('writes %s scenes that GDAL reads the same', async (name, extra, interleave, compression) => {
    const p = join(scratch.dir, `${name.replace(/\W+/g, '-')}.tif`);
    await writeSyntheticScene(p, { ...OPTS, ...extra });
    const info = await gdalInfo(p);
    expect(info.metadata.IMAGE_STRUCTURE?.INTERLEAVE).toBe(interleave);
    expect(info.metadata.IMAGE_STRUCTURE?.COMPRESSION).toBe(compression);
    const win = { x: 1000, y: 800, width: 100, height: 100 };
    const expected = new SyntheticLandscape(1100, 900, OPTS.bands).window(win);
    expect(Array.from(await gdalReadWindow(p, 2, win))).toEqual(Array.from(expected[1] as Uint16Array));
  });

  it('refuses an unknown band before creating any file', async () => {
    const p = join(scratch.dir, 'bad.tif');
    await expect(writeSyntheticScene(p, { ...OPTS, bands: ['B04', 'B99'] })).rejects.toThrow(InvalidParamsError);
    await expect(writeSyntheticScene(p, { ...OPTS, bands: ['B04', 'B99'] })).rejects.toThrow(/B02, B03, B04, B08/);
    expect(existsSync(p)).toBe(false);
  });
});
