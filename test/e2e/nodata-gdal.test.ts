import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';

/**
 * Issue 29, section 5, against GDAL on real data: a valid zero is never taken for nodata unless the file says so;
 * a JPEG-compressed source with a nodata value and an internal mask is read through its mask (GDAL's mask band),
 * not its nodata value, which JPEG's loss has made unreliable; `--dst-nodata` sets the tiles' nodata, and a valid
 * result equal to it stays valid.
 *
 * GDAL's reference: test/support/gdal-warp-compare.py (gdalwarp of each band onto the mosaic's grid, then the band
 * math), with `--src-mask` for the JPEG file: `gdalwarp -srcnodata None -dstalpha`, i.e. the file's mask band.
 */

const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const COMPARE = join(process.cwd(), 'test/support/gdal-warp-compare.py');
const LANDSAT = join(process.cwd(), 'test/data/public/rgb_deflate.tif');
// Fully valid (no nodata pixel), so an NDVI of it against itself is 0 everywhere.
const S2_NIR08 = join(process.cwd(), 'test/data/public/s2-29RKH/B8A.tif');

interface Agreement {
  mosaic: { noData: number | 'nan' };
  pixels: number;
  validOurs: number;
  validGdal: number;
  validBoth: number;
  identical: number;
  identicalPct: number;
  withinTolerancePct: number;
  maxAbsDiff: number;
  maskAgreePct: number;
  validOnlyOurs: number;
  validOnlyGdal: number;
}

/** Facts about a file as GDAL reads it: its mask band and its values. */
const FACTS = `
import json, sys, numpy as np
from osgeo import gdal
gdal.UseExceptions()
ds = gdal.Open(sys.argv[1]); b = ds.GetRasterBand(int(sys.argv[2]))
mask = b.GetMaskBand().ReadAsArray() != 0
v = b.ReadAsArray()
nodata = b.GetNoDataValue()
print(json.dumps({'noData': None if nodata is None else ('nan' if nodata != nodata else nodata), 'maskFlags': b.GetMaskFlags(),
    'validByMask': int(mask.sum()), 'validZeros': int((mask & (v == 0)).sum()),
    'validByNoData': int((v != nodata).sum()) if nodata is not None else int(v.size),
    'maskedButNotNoData': int((~mask & (v != nodata)).sum()) if nodata is not None else 0}))
`;

const dirs: string[] = [];
const measured: string[] = [];
let files: string;

async function tesseraRun(args: string[]): Promise<MainJobSummary> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-nodata-'));
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

function compare(mosaic: string, expression: string, bands: string[], resampling: string, extra: string[] = []): Agreement {
  const args = [COMPARE, '--mosaic', mosaic, '--expression', expression, '--resampling', resampling, ...extra];
  for (const b of bands) args.push('--band', b);
  return JSON.parse(execFileSync(PYTHON, args, { encoding: 'utf8' })) as Agreement;
}

const facts = (path: string, band = 1) =>
  JSON.parse(execFileSync(PYTHON, ['-c', FACTS, path, String(band)], { encoding: 'utf8' })) as {
    noData: number | 'nan' | null;
    maskFlags: number;
    validByMask: number;
    validZeros: number;
    validByNoData: number;
    maskedButNotNoData: number;
  };

function record(label: string, a: Agreement): void {
  measured.push(
    `${label}: ${a.validBoth} pixels valid in both (${a.validOnlyOurs} only in Tessera's, ${a.validOnlyGdal} only in GDAL's), ` +
      `identical ${a.identicalPct.toFixed(3)}%, within tolerance ${a.withinTolerancePct.toFixed(3)}% (max |diff| ${a.maxAbsDiff.toPrecision(3)}), ` +
      `masks agree ${a.maskAgreePct.toFixed(3)}%`,
  );
}

describe('nodata: valid zeros, JPEG with a mask, --dst-nodata, against GDAL', () => {
  beforeAll(() => {
    files = mkdtempSync(join(tmpdir(), 'tessera-nodata-files-'));
    dirs.push(files);
    // Landsat RGB (nodata 0 collar) as JPEG, quality 60, with an internal mask from band 1's nodata (gdal_translate
    // -mask 1): lossy blocks turn dark valid pixels into 0 and ring into the collar.
    execFileSync('gdal_translate', [
      '-q',
      '-co',
      'COMPRESS=JPEG',
      '-co',
      'TILED=YES',
      '-co',
      'PHOTOMETRIC=RGB',
      '-co',
      'JPEG_QUALITY=60',
      '-mask',
      '1',
      '--config',
      'GDAL_TIFF_INTERNAL_MASK',
      'YES',
      LANDSAT,
      join(files, 'landsat-jpeg.tif'),
    ]);
    // Landsat band 1 with its nodata declaration removed: its zero collar is then data, as the file says.
    execFileSync('gdal_translate', ['-q', '-b', '1', '-a_nodata', 'none', LANDSAT, join(files, 'landsat-no-nodata.tif')]);
  });
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    console.log(`nodata agreement with GDAL 3.6:\n${measured.join('\n')}`);
  });

  it('reads a JPEG file with nodata 0 and an internal mask through its mask: valid zeros stay valid, the ringing collar does not', async () => {
    const jpeg = join(files, 'landsat-jpeg.tif');
    const f = facts(jpeg);
    // Not a vacuous case: GDAL's mask band (GMF_PER_DATASET = 2, despite the nodata value) keeps thousands of valid
    // zeros that the nodata value would drop, and masks pixels the nodata value would keep.
    expect(f).toMatchObject({ noData: 0, maskFlags: 2 });
    expect(f.validZeros).toBeGreaterThan(1000);
    expect(f.maskedButNotNoData).toBeGreaterThan(1000);
    const s = await tesseraRun(['--scene', jpeg, '--band', 'R=1', '--expression', 'R']);
    // jpeg-js and libjpeg-turbo decode up to 1 level apart on a few percent of samples (docs/geotiff.md).
    const a = compare(s.mosaicPath, 'R', [`R=${jpeg}:1`], 'nearest', ['--src-mask', '--tolerance', '1']);
    record('Landsat RGB as JPEG q60 + internal mask, band 1, its own grid', a);
    expect(a.validOurs).toBe(f.validByMask);
    expect(a.maskAgreePct).toBe(100);
    expect(a.withinTolerancePct).toBeGreaterThanOrEqual(95);
    // GDAL's nodata-based answer (plain gdalwarp) would disagree on the valid zeros and the collar's ringing.
    const byNoData = compare(s.mosaicPath, 'R', [`R=${jpeg}:1`], 'nearest', ['--tolerance', '1']);
    expect(byNoData.validOnlyOurs).toBeGreaterThanOrEqual(f.validZeros);
  }, 60_000);

  it('reprojects the JPEG file through its mask too: masks agree with gdalwarp -srcnodata None', async () => {
    const jpeg = join(files, 'landsat-jpeg.tif');
    const s = await tesseraRun(['--scene', jpeg, '--band', 'R=1', '--expression', 'R', '--crs', 'EPSG:3857', '--resampling', 'nearest']);
    const a = compare(s.mosaicPath, 'R', [`R=${jpeg}:1`], 'nearest', ['--src-mask', '--tolerance', '1']);
    record('Landsat RGB as JPEG q60 + internal mask, band 1, --crs EPSG:3857 nearest', a);
    expect(a.maskAgreePct).toBeGreaterThanOrEqual(99.5);
    expect(a.validOnlyGdal + a.validOnlyOurs).toBeLessThan(0.001 * a.pixels);
    expect(a.withinTolerancePct).toBeGreaterThanOrEqual(95);
  }, 60_000);

  it('keeps zeros valid in a file that declares no nodata, on its own grid and reprojected', async () => {
    const file = join(files, 'landsat-no-nodata.tif');
    const f = facts(file);
    expect(f.noData).toBeNull();
    expect(f.validZeros).toBeGreaterThan(100_000);
    const own = await tesseraRun(['--scene', file, '--band', 'R=1', '--expression', 'R']);
    const a = compare(own.mosaicPath, 'R', [`R=${file}:1`], 'nearest');
    record('Landsat band 1 with its nodata declaration removed (a zero collar of data), its own grid', a);
    expect(a.validOurs).toBe(a.pixels);
    expect(a.identical).toBe(a.validBoth);
    expect(a.maskAgreePct).toBe(100);
    const warped = await tesseraRun(['--scene', file, '--band', 'R=1', '--expression', 'R', '--crs', 'EPSG:3857']);
    const b = compare(warped.mosaicPath, 'R', [`R=${file}:1`], 'nearest');
    record('Landsat band 1 with its nodata declaration removed, --crs EPSG:3857 nearest', b);
    expect(b.identical).toBe(b.validBoth);
    expect(b.maskAgreePct).toBeGreaterThanOrEqual(99.5);
  }, 60_000);

  it('--dst-nodata 0: the tiles say nodata 0, and an NDVI of exactly 0 stays valid (the next float32 above 0)', async () => {
    // One band read as both: NDVI is 0 on every valid pixel, which a nodata of 0 would otherwise swallow.
    const s = await tesseraRun(['--scene', S2_NIR08, '--band', 'B04=1', '--band', 'B08=1', '--dst-nodata', '0']);
    const a = compare(s.mosaicPath, '(B08 - B04) / (B08 + B04)', [`B04=${S2_NIR08}:1`, `B08=${S2_NIR08}:1`], 'nearest');
    record('Sentinel-2 B8A as B04 and B08 (NDVI 0 everywhere), --dst-nodata 0', a);
    expect(a.mosaic.noData).toBe(0);
    expect(a.validOurs).toBe(facts(S2_NIR08).validByMask);
    expect(a.maskAgreePct).toBe(100);
    expect(a.maxAbsDiff).toBeLessThan(1e-44);
  }, 60_000);

  it('--dst-nodata nan: the tiles say nodata nan, and nodata pixels are NaN', async () => {
    const s = await tesseraRun(['--scene', LANDSAT, '--band', 'R=1', '--expression', 'R / 255', '--dst-nodata', 'nan']);
    const a = compare(s.mosaicPath, 'R / 255', [`R=${LANDSAT}:1`], 'nearest');
    record('Landsat band 1 / 255 (nodata 0 collar), --dst-nodata nan', a);
    expect(a.mosaic.noData).toBe('nan');
    expect(a.maskAgreePct).toBe(100);
    expect(a.validOurs).toBeLessThan(a.pixels);
    expect(a.identical).toBe(a.validBoth);
  }, 60_000);
});
