import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';

/**
 * Issue 14, section 5: `tessera run` on real public imagery, reprojected, against GDAL. The real CLI writes the
 * mosaic; test/support/gdal-warp-compare.py reads only the mosaic's grid (CRS, geotransform, size) from it and
 * builds GDAL's reference on that grid (`gdalwarp -r <same> -t_srs <same> -te/-tr <the grid>` of each band, then
 * the band math in numpy, as shared/raster/expression.ts does it), and compares pixel by pixel. Thresholds, the
 * issue's: nearest, every pixel valid in both identical; bilinear and cubic, at least 99% of them within 1e-3
 * (absolute: the results are NDVI-like ratios in [-1, 1]); nodata masks agreeing on at least 99.5% of pixels.
 * The measured figures are logged and written into docs/reprojection.md.
 *
 * The reference is gdalwarp's warp of the grid in one chunk (`-wo SRC_FILL_RATIO_HEURISTICS=NO -wm 2048`, checked
 * by the script), which is what Tessera renders: plain gdalwarp cuts a grid the source covers less than half of
 * (a tile matrix set's, with empty corners) into chunks and approximates each chunk's rows on their own, so its
 * pixels depend on its chunking. Those figures (plain gdalwarp) are logged beside, not asserted.
 *
 * Inputs (test/data/public/README.md): rasterio's Landsat 7 RGB (one 3-band uint8 file, bands named with
 * `--band NAME=PATH:INDEX`) and rio-tiler-pds's Sentinel-2 L2A band files (B8A at 200 m and B01 at 600 m: two
 * files at different resolutions, both warped onto the target grid before the band math).
 */

const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const COMPARE = join(process.cwd(), 'test/support/gdal-warp-compare.py');
const DATA = join(process.cwd(), 'test/data/public');
const LANDSAT = join(DATA, 'rgb_deflate.tif');
const S2_NIR08 = join(DATA, 's2-29RKH/B8A.tif');
const S2_COASTAL = join(DATA, 's2-29RKH/B01.tif');

type Resampling = 'nearest' | 'bilinear' | 'cubic' | (typeof OTHER_METHODS)[number];

/** Issue 29, section 4: gdalwarp's other methods, through the tile pipeline (tiles of a grid, downsampling). */
const OTHER_METHODS = ['cubicspline', 'lanczos', 'average', 'rms', 'mode', 'max', 'min', 'med', 'q1', 'q3', 'sum'] as const;
/** The methods whose result is one of the source's values: identical to gdalwarp's, as nearest. */
const PICKS_A_VALUE = new Set<string>(['nearest', 'mode', 'max', 'min', 'med', 'q1', 'q3']);

/** What gdal-warp-compare.py prints. */
interface Agreement {
  mosaic: { path: string; epsg: number; geoTransform: number[]; size: [number, number]; noData: number };
  reference: string;
  /** gdalwarp's chunks per band (one, unless --gdal-chunking). */
  chunks: Record<string, number>;
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

interface Scene {
  readonly label: string;
  /** `--band` values for `tessera run`, and the same bands for the comparison (NAME=PATH:INDEX). */
  readonly cliBands: readonly string[];
  readonly compareBands: readonly string[];
  readonly expression: string;
  /** A WebMercatorQuad zoom whose cells are about the source's pixel size. */
  readonly zoom: number;
  /** The CRS of its files (the grid when no target is named). */
  readonly epsg: number;
}

const SCENES: readonly Scene[] = [
  {
    label: 'Landsat 7 RGB, one 3-band file (rasterio RGB.byte.tif)',
    cliBands: [`B04=${LANDSAT}:1`, `B08=${LANDSAT}:3`],
    compareBands: [`B04=${LANDSAT}:1`, `B08=${LANDSAT}:3`],
    expression: '(B08 - B04) / (B08 + B04)',
    zoom: 9,
    epsg: 32618,
  },
  {
    label: 'Sentinel-2 L2A band files at 200 m and 600 m (rio-tiler-pds S2A_29RKH_20200219)',
    cliBands: [`B8A=${S2_NIR08}`, `B01=${S2_COASTAL}`],
    compareBands: [`B8A=${S2_NIR08}:1`, `B01=${S2_COASTAL}:1`],
    expression: '(B8A - B01) / (B8A + B01)',
    zoom: 10,
    epsg: 32629,
  },
];

interface Target {
  readonly name: string;
  readonly resampling: Resampling;
  /** Extra `tessera run` flags choosing the grid. */
  readonly flags: (scene: Scene) => string[];
  readonly epsg: (scene: Scene) => number;
  /** Only the scenes whose label starts with one of these (all when absent). */
  readonly scenes?: readonly string[];
}

const TARGETS: readonly Target[] = [
  // Every other gdalwarp method on a tile matrix set one zoom coarser than the scene's (downsampling: stretched
  // kernels, boxes of several source pixels), each tile the window of one warp of the whole grid.
  ...OTHER_METHODS.map((r) => ({
    name: `--tms WebMercatorQuad --zoom Z-1 --resampling ${r}`,
    resampling: r,
    flags: (s: Scene) => ['--tms', 'WebMercatorQuad', '--zoom', String(s.zoom - 1), '--resampling', r],
    epsg: () => 3857,
    scenes: ['Sentinel-2'],
  })),
  ...(['nearest', 'bilinear', 'cubic'] as const).map((r) => ({
    name: `--crs EPSG:3857 --resampling ${r}`,
    resampling: r,
    flags: () => ['--crs', 'EPSG:3857', '--resampling', r],
    epsg: () => 3857,
  })),
  ...(['nearest', 'bilinear'] as const).map((r) => ({
    name: `--tms WebMercatorQuad --zoom Z --resampling ${r}${r === 'bilinear' ? ' --mosaic cog' : ''}`,
    resampling: r,
    // One of them also writes the single COG mosaic, checked like the VRT.
    flags: (s: Scene) => [
      '--tms',
      'WebMercatorQuad',
      '--zoom',
      String(s.zoom),
      '--resampling',
      r,
      ...(r === 'bilinear' ? ['--mosaic', 'cog'] : []),
    ],
    epsg: () => 3857,
  })),
  // No target named: the finest band's own grid. The Sentinel-2 600 m band is resampled onto the 200 m
  // one (issue 14: bands at different resolutions); the Landsat file is read as it is.
  ...(['bilinear', 'cubic'] as const).map((r) => ({
    name: `no target (the finest band's grid) --resampling ${r}`,
    resampling: r,
    flags: () => ['--resampling', r],
    epsg: (s: Scene) => s.epsg,
  })),
];

const dirs: string[] = [];
const measured: string[] = [];

async function tesseraRun(args: string[]): Promise<MainJobSummary & Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-reproject-'));
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
  return JSON.parse(out.trim().split('\n').at(-1) as string);
}

function compare(mosaic: string, scene: Scene, resampling: Resampling, extra: readonly string[] = []): Agreement {
  const args = [COMPARE, '--mosaic', mosaic, '--expression', scene.expression, '--resampling', resampling, ...extra];
  for (const b of scene.compareBands) args.push('--band', b);
  return JSON.parse(execFileSync(PYTHON, args, { encoding: 'utf8' })) as Agreement;
}

const pct = (x: number) => `${x.toFixed(3)}%`;

describe('tessera run reprojects real imagery as gdalwarp does', () => {
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    console.log(`reprojection agreement with gdalwarp (GDAL 3.6) on real data:\n${measured.join('\n')}`);
  });

  for (const scene of SCENES) {
    describe(scene.label, () => {
      for (const target of TARGETS.filter((t) => t.scenes === undefined || t.scenes.some((p) => scene.label.startsWith(p)))) {
        it(`${target.name}: the mosaic agrees with gdalwarp of each band + the band math`, async () => {
          const s = await tesseraRun([
            ...scene.cliBands.flatMap((b) => ['--band', b]),
            '--expression',
            scene.expression,
            ...target.flags(scene),
          ]);
          expect(s.ok).toBe(true);
          expect(s.crs).toBe(`EPSG:${target.epsg(scene)}`);
          if (target.name.startsWith('--tms'))
            expect(s).toMatchObject({ tms: 'WebMercatorQuad', zoom: target.name.includes('Z-1') ? scene.zoom - 1 : scene.zoom });
          const a = compare(s.mosaicPath, scene, target.resampling);
          measured.push(
            `${scene.label} | ${target.name}: grid ${a.mosaic.size.join(' x ')} EPSG:${a.mosaic.epsg}, ${a.validBoth} pixels valid in both ` +
              `(${a.validOnlyOurs} only in Tessera's, ${a.validOnlyGdal} only in GDAL's), identical ${pct(a.identicalPct)}, ` +
              `within 1e-3 ${pct(a.withinTolerancePct)} (max |diff| ${a.maxAbsDiff.toPrecision(3)}), masks agree ${pct(a.maskAgreePct)}`,
          );
          expect(a.mosaic.epsg).toBe(target.epsg(scene));
          // Not a vacuous comparison: much of the grid is data on both sides (a quarter on the coarser tile matrix set,
          // whose nine tiles the scene's footprint crosses).
          expect(a.validBoth).toBeGreaterThan((target.name.includes('Z-1') ? 0.25 : 0.3) * a.pixels);
          if (PICKS_A_VALUE.has(target.resampling)) expect(a.identical).toBe(a.validBoth);
          else expect(a.withinTolerancePct).toBeGreaterThanOrEqual(99);
          expect(a.maskAgreePct).toBeGreaterThanOrEqual(99.5);
          if (target.name.endsWith('--mosaic cog')) {
            // The COG mosaic (assembled from the tiles) holds the same pixels on the same grid as the VRT.
            expect(typeof s.cogMosaicPath).toBe('string');
            const c = compare(s.cogMosaicPath as string, scene, target.resampling);
            expect({ ...c.mosaic, path: '' }).toEqual({ ...a.mosaic, path: '' });
            expect([c.validBoth, c.identical, c.validOnlyOurs, c.validOnlyGdal]).toEqual([
              a.validBoth,
              a.identical,
              a.validOnlyOurs,
              a.validOnlyGdal,
            ]);
            measured.push(`  (the COG mosaic: the same figures as the VRT's)`);
          }
          if (target.name.startsWith('--tms') && !target.name.includes('Z-1')) {
            const own = compare(s.mosaicPath, scene, target.resampling, ['--gdal-chunking']);
            measured.push(
              `  (plain gdalwarp, ${Object.values(own.chunks).join('/')} chunks: identical ${pct(own.identicalPct)}, ` +
                `within 1e-3 ${pct(own.withinTolerancePct)}, masks agree ${pct(own.maskAgreePct)})`,
            );
          }
          if (target.resampling === 'bilinear' && target.name.startsWith('--crs')) {
            // The comparison tells the methods apart: the same mosaic is not nearest's result.
            const wrong = compare(s.mosaicPath, scene, 'nearest');
            expect(wrong.identicalPct).toBeLessThan(90);
          }
        }, 60_000);
      }
    });
  }
});
