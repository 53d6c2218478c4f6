import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';

/**
 * Issue 29, section 1: `tessera run --unscale` against GDAL on Sentinel-2-like files with processing baseline
 * 04.00's offset. The test writes them from the real L2A bands (test/data/public/s2-29RKH: B8A at 200 m, B01 at
 * 600 m, uint16, nodata 0): every valid DN + 1000 (baseline 04.00's BOA_ADD_OFFSET), stamped with
 * `gdal_translate -a_scale 0.0001 -a_offset -0.1`, so reflectance = DN * 0.0001 - 0.1, as the archive's files
 * since January 2022 say. NDVI on the raw DN is then wrong by up to ~0.1 (the offset does not cancel in a ratio).
 *
 * GDAL's answer (test/support/gdal-warp-compare.py --unscale): each band warped as plain gdalwarp does onto the
 * mosaic's grid, then `gdal_translate -unscale -ot Float32`, then the same band math in numpy. Thresholds, the
 * other GDAL comparisons': resampling that picks a source value (and bands read on their own grid) identical
 * on every pixel valid in both; bilinear >= 99% within 1e-3; masks equal on >= 99.5%.
 */

const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const COMPARE = join(process.cwd(), 'test/support/gdal-warp-compare.py');
const DATA = join(process.cwd(), 'test/data/public/s2-29RKH');
const NDVI = '(B08 - B04) / (B08 + B04)';

interface Agreement {
  mosaic: { size: [number, number]; epsg: number };
  pixels: number;
  validBoth: number;
  identical: number;
  identicalPct: number;
  withinTolerancePct: number;
  maxAbsDiff: number;
  maskAgreePct: number;
  sources: Record<string, { unscale: { scale: number; offset: number } | null }>;
}

/** Writes the baseline 04.00 files: DN + 1000 where valid, and copies stamped with -a_scale/-a_offset. */
const WRITE_FILES = `
import sys, numpy as np
from osgeo import gdal
gdal.UseExceptions()
data, out = sys.argv[1], sys.argv[2]
for band in ('B8A', 'B01'):
    src = gdal.Open(f'{data}/{band}.tif')
    dn = src.GetRasterBand(1).ReadAsArray().astype(np.int64)
    shifted = np.where(dn == 0, 0, np.minimum(dn + 1000, 65535)).astype(np.uint16)
    raw = gdal.GetDriverByName('GTiff').Create(f'{out}/{band}_raw.tif', src.RasterXSize, src.RasterYSize, 1, gdal.GDT_UInt16,
                                               ['COMPRESS=DEFLATE', 'TILED=YES'])
    raw.SetGeoTransform(src.GetGeoTransform())
    raw.SetProjection(src.GetProjection())
    raw.GetRasterBand(1).WriteArray(shifted)
    raw.GetRasterBand(1).SetNoDataValue(0)
    raw = None
# Two bands in one file on B8A's grid (B01 brought onto it by gdalwarp -r near), for the single-file path.
nir = gdal.Open(f'{out}/B8A_raw.tif')
g = nir.GetGeoTransform()
b01 = gdal.Warp('', f'{out}/B01_raw.tif', format='MEM', dstSRS=nir.GetProjection(), resampleAlg='near',
                outputBounds=[g[0], g[3] + 549 * g[5], g[0] + 549 * g[1], g[3]], width=549, height=549, dstNodata=0)
pair = gdal.GetDriverByName('GTiff').Create(f'{out}/pair_raw.tif', 549, 549, 2, gdal.GDT_UInt16, ['COMPRESS=DEFLATE', 'INTERLEAVE=BAND'])
pair.SetGeoTransform(nir.GetGeoTransform())
pair.SetProjection(nir.GetProjection())
pair.GetRasterBand(1).WriteArray(b01.GetRasterBand(1).ReadAsArray())
pair.GetRasterBand(2).WriteArray(nir.GetRasterBand(1).ReadAsArray())
for i in (1, 2):
    pair.GetRasterBand(i).SetNoDataValue(0)
pair = None
`;

const dirs: string[] = [];
const measured: string[] = [];
let files: string;

async function tesseraRun(args: string[]): Promise<MainJobSummary> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-unscale-'));
  dirs.push(dir);
  let out = '';
  let err = '';
  const code = await main(['run', ...args, '--workers', '1', '--json', '--dir', dir], {
    stdout: (t) => {
      out += t;
    },
    stderr: (t) => {
      err += t;
    },
    cwd: dir,
  });
  expect(code, err).toBe(0);
  return JSON.parse(out.trim().split('\n').at(-1) as string) as MainJobSummary;
}

function compare(mosaic: string, bands: string[], resampling: string, extra: string[] = []): Agreement {
  const args = [COMPARE, '--mosaic', mosaic, '--expression', NDVI, '--resampling', resampling, ...extra];
  for (const b of bands) args.push('--band', b);
  return JSON.parse(execFileSync(PYTHON, args, { encoding: 'utf8' })) as Agreement;
}

function record(label: string, a: Agreement): void {
  measured.push(
    `${label}: grid ${a.mosaic.size.join(' x ')} EPSG:${a.mosaic.epsg}, ${a.validBoth} pixels valid in both, identical ${a.identicalPct.toFixed(3)}%, ` +
      `within 1e-3 ${a.withinTolerancePct.toFixed(3)}% (max |diff| ${a.maxAbsDiff.toPrecision(3)}), masks agree ${a.maskAgreePct.toFixed(3)}%`,
  );
  expect(a.validBoth).toBeGreaterThan(0.3 * a.pixels);
  expect(a.maskAgreePct).toBeGreaterThanOrEqual(99.5);
}

describe('tessera run --unscale computes NDVI on physical values, as gdal_translate -unscale then the band math', () => {
  beforeAll(() => {
    files = mkdtempSync(join(tmpdir(), 'tessera-n0400-'));
    dirs.push(files);
    execFileSync(PYTHON, ['-c', WRITE_FILES, DATA, files]);
    // The processing baseline 04.00 stamp, as GDAL writes it into GDAL_METADATA (role="scale" / role="offset").
    for (const name of ['B8A', 'B01', 'pair']) {
      execFileSync('gdal_translate', ['-q', '-a_scale', '0.0001', '-a_offset', '-0.1', `${files}/${name}_raw.tif`, `${files}/${name}.tif`]);
    }
  });
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    console.log(`--unscale agreement with GDAL (gdal_translate -unscale -ot Float32, GDAL 3.6):\n${measured.join('\n')}`);
  });

  it('two band files at 200 m and 600 m, on the finest grid: identical to GDAL on every pixel; raw DN NDVI is not', async () => {
    const s = await tesseraRun(['--band', `B08=${files}/B8A.tif`, '--band', `B04=${files}/B01.tif`, '--expression', NDVI, '--unscale']);
    const bands = [`B08=${files}/B8A.tif:1`, `B04=${files}/B01.tif:1`];
    const a = compare(s.mosaicPath, bands, 'nearest', ['--unscale']);
    record("band files, no target (B01 onto B8A's grid, nearest)", a);
    expect(a.sources.B08?.unscale).toEqual({ scale: 0.0001, offset: -0.1 });
    expect(a.identical).toBe(a.validBoth);
    // The comparison tells physical from raw: the same mosaic against NDVI of the raw DN.
    const raw = compare(s.mosaicPath, bands, 'nearest');
    measured.push(
      `  (the same mosaic against raw-DN NDVI: identical ${raw.identicalPct.toFixed(3)}%, max |diff| ${raw.maxAbsDiff.toPrecision(3)})`,
    );
    expect(raw.withinTolerancePct).toBeLessThan(50);
  }, 60_000);

  it('reprojected onto EPSG:3857 with bilinear: each band warped on its DN, then unscaled, as gdalwarp then gdal_translate -unscale', async () => {
    const s = await tesseraRun([
      '--band',
      `B08=${files}/B8A.tif`,
      '--band',
      `B04=${files}/B01.tif`,
      '--expression',
      NDVI,
      '--unscale',
      '--crs',
      'EPSG:3857',
      '--resampling',
      'bilinear',
    ]);
    const a = compare(s.mosaicPath, [`B08=${files}/B8A.tif:1`, `B04=${files}/B01.tif:1`], 'bilinear', ['--unscale']);
    record('band files, --crs EPSG:3857 --resampling bilinear', a);
    expect(a.withinTolerancePct).toBeGreaterThanOrEqual(99);
  }, 60_000);

  it('one two-band file on its own grid (bands read as stored): identical to GDAL', async () => {
    const s = await tesseraRun(['--scene', `${files}/pair.tif`, '--band', 'B04=1', '--band', 'B08=2', '--expression', NDVI, '--unscale']);
    const a = compare(s.mosaicPath, [`B04=${files}/pair.tif:1`, `B08=${files}/pair.tif:2`], 'nearest', ['--unscale']);
    record('one two-band file, its own grid', a);
    expect(a.identical).toBe(a.validBoth);
  }, 60_000);

  it("a STAC Item's raster:bands scale and offset unscale files that carry none: identical to GDAL given the same values", async () => {
    const raster = (nodata: number) => [{ nodata, data_type: 'uint16', scale: 0.0001, offset: -0.1 }];
    const itemPath = join(files, 'item.json');
    writeFileSync(
      itemPath,
      JSON.stringify({
        type: 'Feature',
        stac_version: '1.0.0',
        id: 'S2A_29RKH_20200219_0_L2A_N0400',
        geometry: null,
        properties: { datetime: '2020-02-19T11:27:51Z' },
        links: [],
        assets: {
          coastal: { href: './B01_raw.tif', type: 'image/tiff; application=geotiff', 'raster:bands': raster(0) },
          nir08: { href: './B8A_raw.tif', type: 'image/tiff; application=geotiff', 'raster:bands': raster(0) },
        },
      }),
    );
    const s = await tesseraRun(['--stac', itemPath, '--asset', 'B04=coastal', '--asset', 'B08=nir08', '--expression', NDVI, '--unscale']);
    const bands = [`B08=${files}/B8A_raw.tif:1`, `B04=${files}/B01_raw.tif:1`];
    const a = compare(s.mosaicPath, bands, 'nearest', [
      '--unscale',
      '--scale-offset',
      'B08=0.0001,-0.1',
      '--scale-offset',
      'B04=0.0001,-0.1',
    ]);
    record('STAC Item (raster:bands scale/offset), files without GDAL metadata', a);
    expect(a.identical).toBe(a.validBoth);
    // The files carry no scale: without the Item's values GDAL's -unscale is the identity, and the answer differs.
    const fileOnly = compare(s.mosaicPath, bands, 'nearest', ['--unscale']);
    expect(fileOnly.withinTolerancePct).toBeLessThan(50);
  }, 60_000);
});
