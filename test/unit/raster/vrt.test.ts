import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { tileGrid, windows } from '../../../shared/domain/tile-grid.js';
import { buildVrt, encodeCog, type GeoTransform, windowGeoTransform } from '../../../shared/raster/index.js';
import { gdalInfo, gdalReadWindow, rootEpsg, scratchDir } from './gdal-harness.js';

const GT: GeoTransform = [500_000, 10, 0, 5_700_000, 0, -10];
const w = (x: number, y: number, width = 512, height = 512) => ({ x, y, width, height });

describe('buildVrt', () => {
  const scratch = scratchDir();
  afterAll(() => scratch.remove());

  it('lists one ComplexSource per tile in row-major order whatever order they come in', () => {
    const xml = buildVrt({
      width: 1024,
      height: 700,
      crs: { epsg: 32631 },
      geoTransform: GT,
      dataType: 'Float32',
      noData: -9999,
      blockSize: 512,
      sources: [
        { href: 'tiles/1_1.tif', window: w(512, 512, 512, 188) },
        { href: 'tiles/0_1.tif', window: w(512, 0) },
        { href: 'tiles/1_0.tif', window: w(0, 512, 512, 188) },
        { href: 'tiles/0_0.tif', window: w(0, 0) },
      ],
    });
    expect([...xml.matchAll(/<SourceFilename relativeToVRT="1">([^<]+)</g)].map((m) => m[1])).toEqual([
      'tiles/0_0.tif',
      'tiles/0_1.tif',
      'tiles/1_0.tif',
      'tiles/1_1.tif',
    ]);
    expect(xml).toContain('<VRTDataset rasterXSize="1024" rasterYSize="700">');
    expect(xml).toContain('<SRS>EPSG:32631</SRS>');
    expect(xml).toContain('<GeoTransform>500000, 10, 0, 5700000, 0, -10</GeoTransform>');
    expect(xml).toContain('<VRTRasterBand dataType="Float32" band="1" blockXSize="512" blockYSize="512">');
    expect(xml).toContain('<NoDataValue>-9999</NoDataValue>');
    expect(xml).toContain('<DstRect xOff="512" yOff="512" xSize="512" ySize="188" />');
    expect(xml.match(/<ComplexSource>/g)).toHaveLength(4);
  });

  it('gives the same text for the same grid', () => {
    const opts = {
      width: 600,
      height: 600,
      crs: { epsg: 32631 },
      geoTransform: GT,
      dataType: 'Float32',
      noData: -9999,
      sources: [...windows(tileGrid(600, 600, 256))].map((win) => ({ href: `t/${win.row}_${win.col}.tif`, window: win })),
    } as const;
    expect(buildVrt(opts)).toBe(buildVrt({ ...opts, sources: [...opts.sources].reverse() }));
  });

  it('marks absolute sources as not relative to the VRT', () => {
    const xml = buildVrt({
      width: 1024,
      height: 512,
      crs: { epsg: 32631 },
      geoTransform: GT,
      dataType: 'Float32',
      noData: -9999,
      sources: [
        { href: '/vsis3/bucket/tiles/0_0.tif', window: w(0, 0) },
        { relativePath: '../tiles/0_1.tif', window: w(512, 0) },
      ],
    });
    expect(xml).toContain('<SourceFilename relativeToVRT="0">/vsis3/bucket/tiles/0_0.tif</SourceFilename>');
    expect(xml).toContain('<SourceFilename relativeToVRT="1">../tiles/0_1.tif</SourceFilename>');
    for (const href of ['https://example.com/t.tif', 'gs://bucket/t.tif', 'C:\\tiles\\t.tif']) {
      expect(
        buildVrt({
          width: 8,
          height: 8,
          crs: { epsg: 32631 },
          geoTransform: GT,
          dataType: 'Float32',
          noData: 0,
          sources: [{ href, window: w(0, 0, 8, 8) }],
        }),
      ).toContain('relativeToVRT="0"');
    }
  });

  it('escapes XML in paths and in a WKT CRS', () => {
    const xml = buildVrt({
      width: 8,
      height: 8,
      crs: { wkt: 'LOCAL_CS["a <b> & \'c\' \\"d\\""]' },
      geoTransform: GT,
      dataType: 'Float32',
      noData: Number.NaN,
      sources: [{ href: 'tiles/a&b <"x">\'.tif', window: w(0, 0, 8, 8) }],
    });
    expect(xml).toContain('<SRS>LOCAL_CS[&quot;a &lt;b&gt; &amp; &apos;c&apos; \\&quot;d\\&quot;&quot;]</SRS>');
    expect(xml).toContain('>tiles/a&amp;b &lt;&quot;x&quot;&gt;&apos;.tif<');
    expect(xml).toContain('<NoDataValue>nan</NoDataValue>');
    expect(xml).not.toMatch(/[<>]"x"|&b /);
  });

  it.each([
    ['a window outside the mosaic', { sources: [{ href: 'a.tif', window: w(0, 0, 600, 10) }] }, /falls outside/],
    ['a negative window', { sources: [{ href: 'a.tif', window: w(-1, 0, 10, 10) }] }, /is invalid/],
    ['no source', { sources: [] }, /at least one source/],
    ['an absolute relativePath', { sources: [{ relativePath: '/abs/a.tif', window: w(0, 0, 10, 10) }] }, /is absolute/],
    ['an empty path', { sources: [{ href: '', window: w(0, 0, 10, 10) }] }, /empty/],
    ['a CRS with neither EPSG nor WKT', { crs: {} }, /EPSG code or a WKT/],
  ])('refuses %s', (_name, override, message) => {
    const base = {
      width: 512,
      height: 512,
      crs: { epsg: 32631 },
      geoTransform: GT,
      dataType: 'Float32',
      noData: -9999,
      sources: [{ href: 'a.tif', window: w(0, 0) }],
    } as const;
    expect(() => buildVrt({ ...base, ...override })).toThrow(InvalidParamsError);
    expect(() => buildVrt({ ...base, ...override })).toThrow(message);
  });

  it('opens in GDAL as the mosaic of its COG tiles, clipped edges included', async () => {
    const width = 700;
    const height = 600;
    const data = new Float32Array(width * height);
    for (let i = 0; i < data.length; i++) data[i] = ((i % width) * 3 + Math.floor(i / width) * 7) / 10;
    data.fill(-9999, 0, 50); // a nodata run in the first tile
    const grid = tileGrid(width, height, 512);
    // gdal3.js mounts only the VRT's own directory, so the tiles live below it here.
    mkdirSync(join(scratch.dir, 'tiles'));
    const sources = [];
    for (const win of windows(grid)) {
      const tile = new Float32Array(win.width * win.height);
      for (let r = 0; r < win.height; r++)
        tile.set(data.subarray((win.y + r) * width + win.x, (win.y + r) * width + win.x + win.width), r * win.width);
      const cog = encodeCog({
        width: win.width,
        height: win.height,
        data: tile,
        geoTransform: windowGeoTransform(GT, win),
        crs: { epsg: 32631 },
        noData: -9999,
        blockSize: 512,
        compression: 'DEFLATE',
      });
      writeFileSync(join(scratch.dir, 'tiles', `${win.row}_${win.col}.tif`), cog);
      sources.push({ href: `tiles/${win.row}_${win.col}.tif`, window: win });
    }
    const vrt = buildVrt({
      width,
      height,
      crs: { epsg: 32631 },
      geoTransform: GT,
      dataType: 'Float32',
      noData: -9999,
      blockSize: 512,
      sources,
    });
    const path = join(scratch.dir, 'scene.vrt');
    writeFileSync(path, vrt);

    const info = await gdalInfo(path);
    expect(info.size).toEqual([width, height]);
    expect(info.geoTransform).toEqual([...GT]);
    expect(rootEpsg(info)).toBe(32631);
    expect(info.bands[0]).toMatchObject({ type: 'Float32', noDataValue: -9999 });

    // One pixel in each tile, and a window straddling all four.
    for (const [x, y] of [
      [0, 0],
      [511, 0],
      [512, 0],
      [699, 599],
      [3, 599],
    ] as const) {
      const [v] = await gdalReadWindow(path, 1, { x, y, width: 1, height: 1 });
      expect(v, `pixel ${x},${y}`).toBe(data[y * width + x]);
    }
    const straddle = await gdalReadWindow(path, 1, { x: 400, y: 400, width: 250, height: 200 });
    let mismatches = 0;
    for (let r = 0; r < 200; r++)
      for (let c = 0; c < 250; c++) if (straddle[r * 250 + c] !== data[(400 + r) * width + 400 + c]) mismatches++;
    expect(mismatches).toBe(0);
  });
});
