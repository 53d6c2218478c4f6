import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';
import { CRS_FAMILIES, type CrsFamily } from '../support/crs-families.js';

/**
 * Issue 29, sections 2 and 3, end to end against gdalwarp: `tessera run` (the real CLI, local backend) on rasters GDAL
 * writes itself (`gdal_translate -a_srs`, test/unit/raster/crs-reference.py), and test/support/gdal-warp-compare.py
 * building GDAL's answer on the mosaic's grid, as test/e2e/reproject-gdal.test.ts does for EPSG scenes, with its
 * thresholds: nearest, every pixel valid in both identical; bilinear, >= 99% within 1e-3; masks >= 99.5%.
 *
 * - every CRS family without an EPSG code as a source (user-defined GeoKeys), reprojected onto EPSG:4326 (Mars onto
 *   a Mars polar stereographic CRS: the same body);
 * - `--crs` as WKT2, PROJJSON, WKT 1 and PROJ strings of CRSs without a code; GDAL's reference reads the same text
 *   (`--dst-srs`), so a misreading on Tessera's side cannot hide behind the SRS Tessera wrote into its own mosaic;
 * - a scene across the antimeridian onto EPSG:4326, WorldCRS84Quad and WebMercatorQuad, and a polar scene (EPSG:3413)
 *   onto WebMercatorQuad, each against gdalwarp onto the same grid.
 */

const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const COMPARE = join(process.cwd(), 'test/support/gdal-warp-compare.py');
const WRITER = join(process.cwd(), 'test/unit/raster/crs-reference.py');

interface Agreement {
  mosaic: { path: string; epsg: number | null; geoTransform: number[]; size: [number, number] };
  pixels: number;
  validBoth: number;
  validOnlyOurs: number;
  validOnlyGdal: number;
  identical: number;
  identicalPct: number;
  withinTolerancePct: number;
  maxAbsDiff: number;
  maskAgreePct: number;
}

let dir: string;
const runs: string[] = [];
const measured: string[] = [];

/** The family's raster at five times the unit test's resolution: 200 x 150 pixels over the same ground. */
const scaled = (f: CrsFamily): CrsFamily => {
  const [x, dx, r1, y, r2, dy] = f.geoTransform;
  return { ...f, geoTransform: [x, dx / 5, r1, y, r2, dy / 5], width: f.width * 5, height: f.height * 5 };
};

function writeRasters(rasters: readonly { name: string; srs: string; geoTransform: readonly number[]; width: number; height: number }[]) {
  const request = rasters.map((r) => ({ ...r, path: join(dir, `${r.name}.tif`) }));
  execFileSync(PYTHON, [WRITER, 'write'], { input: JSON.stringify(request), encoding: 'utf8', maxBuffer: 64 << 20 });
}

async function tesseraRun(args: string[]): Promise<MainJobSummary & Record<string, unknown>> {
  const out = mkdtempSync(join(tmpdir(), 'tessera-crs-run-'));
  runs.push(out);
  let stdout = '';
  let stderr = '';
  const code = await main(['run', ...args, '--workers', '1', '--json', '--dir', out], {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    cwd: out,
  });
  expect(code, stderr).toBe(0);
  return JSON.parse(stdout.trim().split('\n').at(-1) as string);
}

function compare(mosaic: string, source: string, resampling: 'nearest' | 'bilinear', dstSrs?: string): Agreement {
  const args = [COMPARE, '--mosaic', mosaic, '--band', `A=${source}:1`, '--expression', 'A', '--resampling', resampling];
  if (dstSrs !== undefined) args.push('--dst-srs', dstSrs);
  return JSON.parse(execFileSync(PYTHON, args, { encoding: 'utf8', maxBuffer: 64 << 20 })) as Agreement;
}

function expectAgreement(label: string, a: Agreement, resampling: 'nearest' | 'bilinear', minValidShare = 0.2): void {
  measured.push(
    `${label}: grid ${a.mosaic.size.join(' x ')}, ${a.validBoth} pixels valid in both (${a.validOnlyOurs} only in Tessera's, ` +
      `${a.validOnlyGdal} only in GDAL's), identical ${a.identicalPct.toFixed(3)}%, within 1e-3 ${a.withinTolerancePct.toFixed(3)}% ` +
      `(max |diff| ${a.maxAbsDiff.toPrecision(3)}), masks agree ${a.maskAgreePct.toFixed(3)}%`,
  );
  // Not a vacuous comparison: a good part of the grid is data on both sides.
  expect(a.validBoth).toBeGreaterThan(minValidShare * a.pixels);
  if (resampling === 'nearest') expect(a.identical).toBe(a.validBoth);
  else expect(a.withinTolerancePct).toBeGreaterThanOrEqual(99);
  expect(a.maskAgreePct).toBeGreaterThanOrEqual(99.5);
}

const source = (name: string) => join(dir, `${name}.tif`);
const srsText = (name: string, format: 'wkt1' | 'wkt2' | 'projjson') =>
  execFileSync('gdalsrsinfo', ['-o', format, '--single-line', source(name)], { encoding: 'utf8' }).trim();

/** Mars polar stereographic: a target on the same body as the Mars family. */
const MARS_POLAR = '+proj=stere +lat_0=90 +lon_0=0 +k=1 +x_0=0 +y_0=0 +R=3396190 +units=m +no_defs';

/** UTM 60N at 52 N, 233 km at 1 km: from about 178.3 E to 178.2 W. */
const ANTIMERIDIAN = {
  name: 'antimeridian',
  srs: 'EPSG:32660',
  geoTransform: [587_200, 1000, 0, 5_873_100, 0, -1000],
  width: 233,
  height: 233,
};
/** NSIDC EPSG:3413, 2,000 km a side around the north pole at 10 km. */
const POLAR = { name: 'polar', srs: 'EPSG:3413', geoTransform: [-1_000_000, 10_000, 0, 1_000_000, 0, -10_000], width: 200, height: 200 };

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tessera-crs-gdal-'));
  writeRasters([...CRS_FAMILIES.map((f) => ({ ...scaled(f), name: f.id })), ANTIMERIDIAN, POLAR]);
}, 60_000);

afterAll(() => {
  for (const d of [dir, ...runs]) rmSync(d, { recursive: true, force: true });
  console.log(`CRS agreement with gdalwarp (GDAL 3.6):\n${measured.join('\n')}`);
});

describe('a source in a CRS without an EPSG code (user-defined GeoKeys) reprojects as gdalwarp does', () => {
  for (const f of CRS_FAMILIES) {
    const mars = f.id === 'mars-eqc';
    it(`${f.name} onto ${mars ? 'a Mars polar stereographic CRS' : 'EPSG:4326'}`, async () => {
      const s = await tesseraRun([
        '--band',
        `A=${source(f.id)}:1`,
        '--expression',
        'A',
        '--crs',
        mars ? MARS_POLAR : 'EPSG:4326',
        '--tile',
        '128',
      ]);
      expect(s.ok).toBe(true);
      expect(s.crs).toBe(mars ? '+proj=stere +lat_0=90 +lon_0=0 +k_0=1 +x_0=0 +y_0=0 +R=3396190 +units=m +no_defs' : 'EPSG:4326');
      expectAgreement(
        `${f.id} -> ${mars ? 'Mars polar' : 'EPSG:4326'} nearest`,
        compare(s.mosaicPath, source(f.id), 'nearest', mars ? MARS_POLAR : undefined),
        'nearest',
      );
    }, 60_000);
  }

  it('refuses a Mars scene onto an Earth CRS before any tile runs, saying why', async () => {
    const out = mkdtempSync(join(tmpdir(), 'tessera-crs-run-'));
    runs.push(out);
    let stderr = '';
    const code = await main(
      ['run', '--band', `A=${source('mars-eqc')}:1`, '--expression', 'A', '--crs', 'EPSG:4326', '--workers', '1', '--json', '--dir', out],
      {
        stdout: () => {},
        stderr: (t) => {
          stderr += t;
        },
        cwd: out,
      },
    );
    expect(code).toBe(1);
    expect(stderr).toMatch(/CelestialBodyMismatchError \[UNSUPPORTED_RASTER\]: .*different celestial bodies/);
    // Refused at fan-out, before any claim: no tile was written.
    expect(existsSync(join(out, 'outputs', 'objects', 'tiles'))).toBe(false);
  }, 60_000);
});

describe('--crs given as WKT2, PROJJSON, WKT 1 or a PROJ string reprojects as gdalwarp -t_srs with the same text', () => {
  const cases: readonly { label: string; from: string; crs: () => string; resampling: 'nearest' | 'bilinear' }[] = [
    { label: 'WKT2 (GDAL export of the LAEA family)', from: 'tmerc-utm', crs: () => srsText('laea', 'wkt2'), resampling: 'nearest' },
    {
      label: 'PROJJSON (the Lambert 2SP family, US survey feet)',
      from: 'laea',
      crs: () => srsText('lcc-2sp', 'projjson'),
      resampling: 'bilinear',
    },
    { label: 'WKT 1 (the equirectangular family)', from: 'sinu', crs: () => srsText('eqc', 'wkt1'), resampling: 'bilinear' },
    {
      label: 'PROJ string (a CONUS Lambert conic without a code)',
      from: 'aea',
      crs: () => '+proj=lcc +lat_0=23 +lon_0=-96 +lat_1=33 +lat_2=45 +x_0=0 +y_0=0 +ellps=GRS80 +units=m +no_defs',
      resampling: 'nearest',
    },
    {
      label: 'PROJ string (NSIDC polar stereographic, spelled out)',
      from: 'stere-a',
      crs: () => '+proj=stere +lat_0=90 +lat_ts=70 +lon_0=-45 +x_0=0 +y_0=0 +datum=WGS84 +units=m +no_defs',
      resampling: 'nearest',
    },
    {
      label: 'WKT2 (GDAL export of the MODIS sinusoidal family)',
      from: 'merc',
      crs: () => srsText('sinu', 'wkt2'),
      // Nearest: bilinear here is off by up to 0.0096 (a source without nodata on a grid downsampled in y takes
      // gdalwarp's no-mask kernel; the CRSs agree, nearest is identical): reported to the resampling work.
      resampling: 'nearest',
    },
  ];
  for (const c of cases) {
    it(`${c.label}, from the ${c.from} family`, async () => {
      const crs = c.crs();
      const s = await tesseraRun(['--band', `A=${source(c.from)}:1`, '--expression', 'A', '--crs', crs, '--resampling', c.resampling]);
      expect(s.ok).toBe(true);
      expect(s.crs).toMatch(/^\+proj=/);
      expectAgreement(
        `${c.from} -> --crs ${c.label} ${c.resampling}`,
        compare(s.mosaicPath, source(c.from), c.resampling, crs),
        c.resampling,
      );
    }, 60_000);
  }
});

describe('the antimeridian and the poles, against gdalwarp onto the same grid', () => {
  const stacItem = (s: MainJobSummary) =>
    JSON.parse(readFileSync(s.stacItemPath, 'utf8')) as { bbox: number[]; geometry: { type: string; coordinates: unknown[] } };
  /** The tile files a run wrote under tiles/<scene>/<tms>/<z>/<x>/<y>.tif: their columns. */
  const columns = (s: MainJobSummary, tms: string, zoom: number) =>
    readdirSync(join(s.outputDir, 'tiles', s.sceneKey, tms, String(zoom)))
      .map(Number)
      .sort((a, b) => a - b);

  it('a scene across 180 degrees onto EPSG:4326: one grid across it (lon past 180), a MultiPolygon STAC footprint', async () => {
    const s = await tesseraRun(['--band', `A=${source('antimeridian')}:1`, '--expression', 'A', '--crs', 'EPSG:4326', '--tile', '128']);
    const a = compare(s.mosaicPath, source('antimeridian'), 'nearest');
    const [x0, dx] = a.mosaic.geoTransform as [number, number];
    expect(x0).toBeLessThan(180);
    expect(x0 + a.mosaic.size[0] * dx).toBeGreaterThan(181);
    expect(s.windows).toBeLessThan(20);
    expectAgreement('antimeridian -> EPSG:4326 nearest', a, 'nearest');
    const item = stacItem(s);
    expect(item.geometry.type).toBe('MultiPolygon');
    expect(item.geometry.coordinates).toHaveLength(2);
    // STAC / RFC 7946: across the antimeridian, the bbox's west edge is east of its east edge.
    expect(item.bbox[0]).toBeGreaterThan(178);
    expect(item.bbox[2]).toBeLessThan(-178);
  }, 60_000);

  it.each([
    ['WorldCRS84Quad', 6, 'nearest', 128],
    ['WebMercatorQuad', 7, 'bilinear', 128],
  ] as const)(
    'a scene across 180 degrees onto %s zoom %i (%s): tiles on both sides, none between',
    async (tms, zoom, resampling, last) => {
      const s = await tesseraRun([
        '--band',
        `A=${source('antimeridian')}:1`,
        '--expression',
        'A',
        '--tms',
        tms,
        '--zoom',
        String(zoom),
        '--resampling',
        resampling,
      ]);
      const cols = columns(s, tms, zoom);
      measured.push(`antimeridian -> ${tms} z${zoom}: ${s.windows} tiles, columns ${cols.join(',')}`);
      expect(cols[0]).toBe(0);
      // Both sets have 128 columns at these zooms: the last columns and the first, nothing between.
      expect(cols.at(-1)).toBe(last - 1);
      expect(cols.every((c) => c < 8 || c >= last - 8)).toBe(true);
      expect(s.windows).toBeLessThan(30);
      expectAgreement(
        `antimeridian -> ${tms} z${zoom} ${resampling}`,
        compare(s.mosaicPath, source('antimeridian'), resampling),
        resampling,
        0.1,
      );
      // A tile of column 0 is georeferenced at the west edge of the world, where its index puts it.
      const tile = join(
        s.outputDir,
        'tiles',
        s.sceneKey,
        tms,
        String(zoom),
        '0',
        readdirSync(join(s.outputDir, 'tiles', s.sceneKey, tms, String(zoom), '0'))[0] as string,
      );
      const origin = JSON.parse(execFileSync('gdalinfo', ['-json', tile], { encoding: 'utf8' })).geoTransform[0] as number;
      expect(origin).toBeCloseTo(tms === 'WorldCRS84Quad' ? -180 : -20_037_508.342789244, 6);
      expect(stacItem(s).geometry.type).toBe('MultiPolygon');
    },
    60_000,
  );

  it('a polar scene (EPSG:3413) onto WebMercatorQuad zoom 3: every column, clamped at the top row (85.0511 degrees)', async () => {
    const s = await tesseraRun(['--band', `A=${source('polar')}:1`, '--expression', 'A', '--tms', 'WebMercatorQuad', '--zoom', '3']);
    expect(columns(s, 'WebMercatorQuad', 3)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const a = compare(s.mosaicPath, source('polar'), 'nearest');
    expect(a.mosaic.geoTransform[3]).toBeCloseTo(20_037_508.342789244, 3);
    expectAgreement('polar EPSG:3413 -> WebMercatorQuad z3 nearest', a, 'nearest', 0.1);
    const item = stacItem(s);
    expect(item.bbox[0]).toBe(-180);
    expect(item.bbox[2]).toBe(180);
    expect(item.bbox[3]).toBeCloseTo(85.0511, 3);
  }, 60_000);
});
