import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidGridError } from '../../../shared/domain/errors.js';
import { bundledEpsgCount, crsFromEpsg, crsTransform, UnknownCrsError } from '../../../shared/raster/crs.js';
import type { GeoTransform } from '../../../shared/raster/georeferencing.js';
import { type RasterGrid, RESAMPLINGS, type Resampling, roundToInteger, type WarpedBand, warpBand } from '../../../shared/raster/warp.js';
import { scratchDir } from './gdal-harness.js';

/**
 * shared/raster/warp.ts against gdalwarp (Debian's GDAL 3.6 through osgeo.gdal, test/unit/raster/warp-reference.py)
 * with every gdalwarp resampling method, on a real Landsat scene (rasterio's RGB.byte.tif,
 * test/data/public/rgb_deflate.tif, uint8 nodata 0, UTM 18N), a real Sentinel-2 L2A band (rio-tiler-pds's B8A,
 * uint16 nodata 0, UTM 29N) and a synthetic float32 scene with nodata holes. The source pixels come from GDAL too,
 * so only the warp is compared. Agreement, as issues 14 and 29 ask: the methods that pick a source value (nearest,
 * mode, max, min, med, q1, q3) identical on every pixel both call valid; the others (bilinear, cubic, cubicspline,
 * lanczos, average, rms, sum) within 1 DN (integers, after GDAL's rounding) or 1e-3 relative (floats) on >= 99% of
 * pixels both call valid; nodata masks equal on >= 99.5% of pixels. The measured figures are logged and written
 * into docs/reprojection.md.
 */

const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');

interface Case {
  name: string;
  resampling: Resampling;
  dstEpsg: number;
  te: [number, number, number, number];
  ts: [number, number];
}

interface SourceFacts {
  size: [number, number];
  geoTransform: GeoTransform;
  epsg: number;
  noData: number | 'nan' | null;
  dataType: string;
}

/** The methods whose result is one of the source's values: gdalwarp's and Tessera's must be identical. */
const PICKS_A_VALUE: ReadonlySet<Resampling> = new Set(['nearest', 'mode', 'max', 'min', 'med', 'q1', 'q3']);

/** GDAL's type name -> Tessera's, and the integer range a warped value is rounded into. */
const TYPES: Readonly<Record<string, { type: 'uint8' | 'uint16' | 'float32'; range?: [number, number] }>> = {
  Byte: { type: 'uint8', range: [0, 255] },
  UInt16: { type: 'uint16', range: [0, 65_535] },
  Float32: { type: 'float32' },
};

interface Reference {
  facts: SourceFacts;
  source: Float64Array;
  results: Map<string, Float64Array>;
}

function readF64(path: string): Float64Array {
  const bytes = readFileSync(path);
  return new Float64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

function gdalwarp(dir: string, source: string, band: number, cases: Case[]): Reference {
  const request = join(dir, 'request.json');
  writeFileSync(
    request,
    JSON.stringify({
      out: dir,
      source,
      band,
      cases: cases.map((c) => ({ name: c.name, resampling: c.resampling, dstSrs: `EPSG:${c.dstEpsg}`, te: c.te, ts: c.ts })),
    }),
  );
  const facts = JSON.parse(
    execFileSync(PYTHON, [join(process.cwd(), 'test/unit/raster/warp-reference.py'), request], { encoding: 'utf8' }),
  ) as SourceFacts;
  return {
    facts,
    source: readF64(join(dir, 'source.bin')),
    results: new Map(cases.map((c) => [c.name, readF64(join(dir, `${c.name}.bin`))])),
  };
}

/** A target grid covering the source's footprint in `epsg`, with about `factor` times the source's pixel count per axis. */
function footprintGrid(facts: SourceFacts, epsg: number, factor: number): { te: [number, number, number, number]; ts: [number, number] } {
  const [x0, dx, , y0, , dy] = facts.geoTransform;
  const [w, h] = facts.size;
  const xs = new Float64Array(4 * 21);
  const ys = new Float64Array(4 * 21);
  for (let k = 0; k <= 20; k++) {
    const t = k / 20;
    const edge = [
      [t * w, 0],
      [t * w, h],
      [0, t * h],
      [w, t * h],
    ];
    edge.forEach(([px, py], e) => {
      xs[e * 21 + k] = x0 + (px as number) * dx;
      ys[e * 21 + k] = y0 + (py as number) * dy;
    });
  }
  crsTransform(crsFromEpsg(facts.epsg), crsFromEpsg(epsg))(xs, ys);
  const te: [number, number, number, number] = [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
  return { te, ts: [Math.round(w * factor), Math.round(h * factor)] };
}

function targetGrid(c: Case): RasterGrid {
  const [xmin, ymin, xmax, ymax] = c.te;
  const [w, h] = c.ts;
  return { crs: crsFromEpsg(c.dstEpsg), geoTransform: [xmin, (xmax - xmin) / w, 0, ymax, 0, -(ymax - ymin) / h], width: w, height: h };
}

interface Agreement {
  both: number;
  close: number;
  identical: number;
  maskAgree: number;
  pixels: number;
  maxDiff: number;
  /** Valid in Tessera's result only, and in gdalwarp's only. */
  oursOnly: number;
  gdalOnly: number;
}

function compare(ours: WarpedBand, gdal: Float64Array, range: [number, number] | undefined): Agreement {
  const integer = range !== undefined;
  let both = 0;
  let close = 0;
  let identical = 0;
  let maskAgree = 0;
  let maxDiff = 0;
  let oursOnly = 0;
  let gdalOnly = 0;
  for (let k = 0; k < gdal.length; k++) {
    const g = gdal[k] as number;
    const gValid = !Number.isNaN(g);
    const oValid = ours.valid[k] === 1;
    if (gValid === oValid) maskAgree++;
    else if (oValid) oursOnly++;
    else gdalOnly++;
    if (!gValid || !oValid) continue;
    both++;
    const o = range !== undefined ? roundToInteger(ours.values[k] as number, range[0], range[1]) : (ours.values[k] as number);
    const diff = Math.abs(o - g);
    maxDiff = Math.max(maxDiff, diff);
    if (diff === 0) identical++;
    if (integer ? diff <= 1 : diff <= 1e-3 * Math.max(1, Math.abs(g))) close++;
  }
  return { both, close, identical, maskAgree, pixels: gdal.length, maxDiff, oursOnly, gdalOnly };
}

const measured: string[] = [];

function checkAgreement(label: string, c: Case, a: Agreement): void {
  const closePct = (100 * a.close) / a.both;
  const maskPct = (100 * a.maskAgree) / a.pixels;
  measured.push(
    `${label} ${c.name}: ${a.both} pixels valid in both, ${((100 * a.identical) / a.both).toFixed(2)}% identical, ` +
      `${closePct.toFixed(2)}% within tolerance (max diff ${a.maxDiff.toPrecision(3)}), masks agree ${maskPct.toFixed(2)}% (${a.oursOnly} valid only here, ${a.gdalOnly} only in GDAL)`,
  );
  expect(a.both).toBeGreaterThan(0.3 * a.pixels);
  if (PICKS_A_VALUE.has(c.resampling)) expect(a.identical).toBe(a.both);
  else expect(closePct).toBeGreaterThanOrEqual(99);
  expect(maskPct).toBeGreaterThanOrEqual(99.5);
}

function warpCases(facts: SourceFacts): Case[] {
  const cases: Case[] = [];
  for (const [epsg, factor, tag] of [
    [3857, 1, 'mercator'],
    [4326, 1.2, 'lonlat'],
    [3857, 0.4, 'mercator-down'],
  ] as const) {
    const grid = footprintGrid(facts, epsg, factor);
    for (const resampling of RESAMPLINGS) {
      cases.push({ name: `${tag}-${resampling}`, resampling, dstEpsg: epsg, ...grid });
    }
  }
  return cases;
}

describe('warpBand against gdalwarp', () => {
  const scratch = scratchDir();
  afterAll(() => {
    scratch.remove();
    console.log(`warp agreement with gdalwarp (GDAL 3.6):\n${measured.join('\n')}`);
  });

  const scenes = [
    {
      label: 'RGB.byte.tif band 1 (uint8, nodata 0, EPSG:32618)',
      source: join(process.cwd(), 'test/data/public/rgb_deflate.tif'),
      dir: 'landsat',
    },
    {
      label: 'Sentinel-2 L2A B8A (uint16, nodata 0, EPSG:32629)',
      source: join(process.cwd(), 'test/data/public/s2-29RKH/B8A.tif'),
      dir: 's2',
    },
    { label: 'synthetic float32 (nodata -9999 holes, EPSG:32631)', source: 'synthetic', dir: 'synthetic' },
  ];
  for (const scene of scenes) {
    describe(scene.label, () => {
      let ref: Reference;
      let cases: Case[];
      beforeAll(() => {
        const dir = join(scratch.dir, scene.dir);
        execFileSync('mkdir', ['-p', dir]);
        // Two calls: the first learns the source's footprint, the second warps onto grids derived from it.
        const probe = gdalwarp(dir, scene.source, 1, []);
        cases = warpCases(probe.facts);
        ref = gdalwarp(dir, scene.source, 1, cases);
      });

      for (const tag of ['mercator', 'lonlat', 'mercator-down']) {
        for (const resampling of RESAMPLINGS) {
          it(`${resampling} onto the ${tag} grid agrees with gdalwarp -r ${resampling}`, () => {
            const c = cases.find((k) => k.name === `${tag}-${resampling}`) as Case;
            const { facts } = ref;
            const type = TYPES[facts.dataType];
            if (type === undefined) throw new Error(`the test knows no GDAL type ${facts.dataType}`);
            const source = {
              crs: crsFromEpsg(facts.epsg),
              geoTransform: facts.geoTransform,
              width: facts.size[0],
              height: facts.size[1],
              values: ref.source,
              dataType: type.type,
            };
            const ours = warpBand(source, targetGrid(c), resampling);
            checkAgreement(scene.label, c, compare(ours, ref.results.get(c.name) as Float64Array, type.range));
          });
        }
      }
    });
  }
});

describe('warpBand', () => {
  const utm = crsFromEpsg(32631);
  const grid = (width: number, height: number, x0 = 500000, y0 = 5000000, px = 10): RasterGrid => ({
    crs: utm,
    geoTransform: [x0, px, 0, y0, 0, -px],
    width,
    height,
  });

  it('returns nodata for target pixels whose centre falls outside the source, whatever the method', () => {
    const source = { ...grid(4, 4), values: new Float64Array(16).fill(7) };
    // Target: 8 x 8 pixels of 10 m starting 20 m west and north of the source.
    const target = grid(8, 8, 499980, 5000020);
    const kernels = new Set<Resampling>(['nearest', 'bilinear', 'cubic', 'cubicspline', 'lanczos', 'sum']);
    for (const r of RESAMPLINGS) {
      const out = warpBand(source, target, r);
      const validCount = out.valid.reduce((s, v) => s + v, 0);
      // The box methods: GDAL's footprint rule gives the row and column just above and left of the source the
      // edge values. sum weighs by the area covered exactly, so a box beside the raster adds nothing.
      expect(validCount, r).toBe(kernels.has(r) ? 16 : 25);
      expect(out.valid[0]).toBe(0);
      expect(Number.isNaN(out.values[0])).toBe(true);
      expect(out.values[2 * 8 + 2], r).toBeCloseTo(7, 12);
    }
  });

  it('sums source-centrically: upsampling splits each value over the target pixels it covers, the total is kept', () => {
    const values = Float64Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    // 5 m target pixels over 10 m source pixels: each source value is shared by four target pixels.
    const out = warpBand({ ...grid(4, 4), values, noData: 6 }, grid(8, 8, 500000, 5000000, 5), 'sum');
    expect(out.values[0]).toBeCloseTo(1 / 4, 12);
    expect(out.values[1 * 8 + 3]).toBeCloseTo(2 / 4, 12);
    // The nodata source pixel (6, at column 1, row 1) leaves its four target pixels nodata.
    expect(out.valid[2 * 8 + 2]).toBe(0);
    let total = 0;
    for (let k = 0; k < 64; k++) if (out.valid[k]) total += out.values[k] as number;
    expect(total).toBeCloseTo(136 - 6, 9);
    // Downsampling by 2 adds whole pixels, nodata skipped.
    const down = warpBand({ ...grid(4, 4), values, noData: 6 }, grid(2, 2, 500000, 5000000, 20), 'sum');
    expect(Array.from(down.values)).toEqual([1 + 2 + 5, 3 + 4 + 7 + 8, 9 + 10 + 13 + 14, 11 + 12 + 15 + 16]);
  });

  it('picks, over each target footprint, the max, min, quartiles and the first value to reach the highest count', () => {
    // One 20 m target pixel over four 10 m source pixels, read row by row: in 9, 3, 3, 9 the 3 reaches two first.
    const box = (values: number[], r: Resampling) =>
      warpBand({ ...grid(2, 2), values: Float64Array.from(values), dataType: 'uint16' }, grid(1, 1, 500000, 5000000, 20), r).values[0];
    expect(box([9, 3, 3, 9], 'mode')).toBe(3);
    expect(box([3, 9, 9, 3], 'mode')).toBe(9);
    expect(box([5, 1, 7, 2], 'max')).toBe(7);
    expect(box([5, 1, 7, 2], 'min')).toBe(1);
    // Sorted 1, 2, 5, 7: GDAL takes the value at ceil(q * n - 1): q1 -> 1, med -> 2, q3 -> 5.
    expect(box([5, 1, 7, 2], 'q1')).toBe(1);
    expect(box([5, 1, 7, 2], 'med')).toBe(2);
    expect(box([5, 1, 7, 2], 'q3')).toBe(5);
    expect(box([5, 1, 7, 2], 'rms')).toBeCloseTo(Math.sqrt((25 + 1 + 49 + 4) / 4), 12);
  });

  it("counts a float band's mode by float32 equality, as GDAL does, and gives the float32 value", () => {
    // 0.1 and 0.1 + 1e-12 are one float32: counted together (three) they outnumber the two 0.5s.
    const values = Float64Array.from([0.5, 0.1, 0.5, 0.1 + 1e-12, 0.1, 0, 0, 0, 0]);
    const out = warpBand({ ...grid(3, 3), values, noData: 0, dataType: 'float64' }, grid(1, 1, 500000, 5000000, 30), 'mode');
    expect(out.values[0]).toBe(Math.fround(0.1));
  });

  it('gives lanczos nodata where fewer than half of its taps are valid, a value where most are', () => {
    // 10 x 10 rasters of 50 with nodata in their first columns; the target pixel is centred on source column 8,
    // whose taps are columns 5-9 (clipped at the edge) and rows 2-8.
    const raster = (nodataColumns: number) => {
      const values = new Float64Array(100).fill(50);
      for (let k = 0; k < 100; k++) if (k % 10 < nodataColumns) values[k] = -1;
      return { ...grid(10, 10), values, noData: -1 };
    };
    const target = grid(1, 1, 500080, 4999950, 10);
    // Columns 0-7 nodata: 14 of the 35 taps valid, fewer than half, though the centre is valid.
    expect(warpBand(raster(8), target, 'lanczos').valid[0]).toBe(0);
    // Columns 0-3 nodata: every tap valid.
    const dense = warpBand(raster(4), target, 'lanczos');
    expect(dense.valid[0]).toBe(1);
    expect(dense.values[0]).toBeCloseTo(50, 9);
  });

  it('reproduces a constant exactly with cubicspline and lanczos, weights renormalised at the edges', () => {
    const values = new Float64Array(64).fill(42);
    for (const r of ['cubicspline', 'lanczos'] as const) {
      const out = warpBand({ ...grid(8, 8), values }, grid(7, 7, 500005, 4999995), r);
      for (let k = 0; k < 49; k++) expect(out.values[k], `${r} ${k}`).toBeCloseTo(42, 9);
    }
  });

  it('renormalises bilinear weights over the valid neighbours, and leaves a target pixel centred on nodata as nodata', () => {
    const values = Float64Array.from([10, 10, 10, 10, -1, 10, 10, 10, 10]);
    // Shifted by half a pixel, every target pixel sees four sources, the nodata centre among them. Unnormalised
    // weights would give 7.5; target (0, 0) is centred on the nodata pixel itself, which gdalwarp skips.
    const out = warpBand({ ...grid(3, 3), values, noData: -1 }, grid(2, 2, 500005, 4999995), 'bilinear');
    expect(Array.from(out.values)).toEqual([Number.NaN, 10, 10, 10]);
    expect(Array.from(out.valid)).toEqual([0, 1, 1, 1]);
  });

  it('interpolates bilinear exactly halfway between two source pixels', () => {
    const values = Float64Array.from([0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100, 0, 100]);
    const out = warpBand({ ...grid(4, 4), values }, grid(3, 3, 500005, 4999995), 'bilinear');
    expect(out.values[0]).toBeCloseTo(50, 12);
  });

  it('uses Keys cubic convolution (a = -0.5): a linear ramp is reproduced exactly inside the raster', () => {
    const values = new Float64Array(64);
    for (let k = 0; k < 64; k++) values[k] = 3 * (k % 8) + 2 * Math.floor(k / 8);
    const out = warpBand({ ...grid(8, 8), values }, grid(4, 4, 500025, 4999975), 'cubic');
    // Target pixel (1, 1) centre = source (4, 4): a source centre plus half a pixel on each axis.
    expect(out.values[1 * 4 + 1]).toBeCloseTo(3 * 3.5 + 2 * 3.5, 10);
  });

  it('averages the source footprint with fractional coverage, skipping nodata', () => {
    const values = Float64Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    const out = warpBand({ ...grid(4, 4), values, noData: 6 }, grid(2, 2, 500000, 5000000, 20), 'average');
    expect(out.values[0]).toBeCloseTo((1 + 2 + 5) / 3, 12);
    expect(out.values[3]).toBeCloseTo((11 + 12 + 15 + 16) / 4, 12);
  });

  it('gives every target pixel the same source coordinates with the approximate transformer as without, to 0.125 px', () => {
    const values = new Float64Array(200 * 200);
    for (let k = 0; k < values.length; k++) values[k] = k % 200;
    const source = { ...grid(200, 200), values };
    const target: RasterGrid = {
      crs: crsFromEpsg(4326),
      geoTransform: [3.0001, 0.00002, 0, 45.1399, 0, -0.00002],
      width: 300,
      height: 20,
    };
    const approx = warpBand(source, target, 'bilinear');
    const exact = warpBand(source, target, 'bilinear', { maxErrorPixels: 0 });
    let worst = 0;
    for (let k = 0; k < approx.values.length; k++) {
      if (approx.valid[k] && exact.valid[k]) worst = Math.max(worst, Math.abs((approx.values[k] as number) - (exact.values[k] as number)));
    }
    // values = column index: a value difference is a column difference in source pixels.
    expect(worst).toBeLessThanOrEqual(0.125);
    expect(approx.valid.reduce((s, v) => s + v, 0)).toBeGreaterThan(1000);
  });

  it('warps a tile as its window of the whole grid, whatever was warped before it and whichever source window it reads', () => {
    // The centres of a tile and the transformer's exact points are remembered from tile to tile and band to band
    // (shared/raster/warp.ts): a remembered value must be the value, so tiles taken in any order, each band of them
    // and each window read of the source give the whole grid's pixels.
    const n = 200;
    const values = Float64Array.from({ length: n * n }, (_, k) => k);
    const doubled = values.map((v) => 2 * v);
    const merc = crsFromEpsg(3857);
    // The middle of the source (a margin of 50 pixels) in EPSG:3857: every pixel's kernel lies inside the window below.
    const xs = Float64Array.of(500500, 501500);
    const ys = Float64Array.of(4999500, 4998500);
    crsTransform(utm, merc)(xs, ys);
    const [w, h, tw, th] = [160, 96, 40, 48];
    const px = ((xs[1] as number) - (xs[0] as number)) / w;
    const py = ((ys[1] as number) - (ys[0] as number)) / h;
    const whole: RasterGrid = { crs: merc, geoTransform: [xs[0] as number, px, 0, ys[0] as number, 0, py], width: w, height: h };
    const windowOf = (v: Float64Array, x: number, y: number, size: number) =>
      Float64Array.from({ length: size * size }, (_, k) => v[(y + Math.floor(k / size)) * n + x + (k % size)] as number);
    const reads = [
      { label: 'the whole source', band: (v: Float64Array) => ({ ...grid(n, n), values: v }), window: undefined },
      {
        label: 'a window of it',
        band: (v: Float64Array) => ({ ...grid(140, 140, 500300, 4999700), values: windowOf(v, 30, 30, 140) }),
        window: { width: n, height: n, x: 30, y: 30 },
      },
    ];
    for (const resampling of ['nearest', 'bilinear'] as const) {
      const reference = [values, doubled].map((v) => warpBand({ ...grid(n, n), values: v }, whole, resampling));
      const mismatches: string[] = [];
      let compared = 0;
      for (const [tx, ty] of [
        [1, 1],
        [0, 0],
        [3, 1],
        [2, 0],
        [0, 1],
        [3, 0],
        [1, 0],
        [2, 1],
      ] as const) {
        const tile: RasterGrid = {
          ...whole,
          geoTransform: [(xs[0] as number) + tx * tw * px, px, 0, (ys[0] as number) + ty * th * py, 0, py],
          width: tw,
          height: th,
        };
        for (const read of reads) {
          [values, doubled].forEach((v, b) => {
            const out = warpBand(read.band(v), tile, resampling, {
              targetWindowOf: { grid: whole, x: tx * tw, y: ty * th },
              sourceWindowOf: read.window,
            });
            const ref = reference[b] as WarpedBand;
            for (let j = 0; j < th; j++) {
              for (let i = 0; i < tw; i++) {
                const got = out.values[j * tw + i] as number;
                const want = ref.values[(ty * th + j) * w + tx * tw + i] as number;
                // The window's own origin moves the source coordinates by a rounding error at most (bilinear's weights).
                const same =
                  Number.isNaN(got) || Number.isNaN(want)
                    ? Number.isNaN(got) && Number.isNaN(want)
                    : read.window === undefined || resampling === 'nearest'
                      ? got === want
                      : Math.abs(got - want) <= 1e-9 * Math.abs(want);
                if (!same) mismatches.push(`${resampling}, ${read.label}, band ${b}, tile ${tx},${ty} pixel ${i},${j}: ${got} for ${want}`);
                if (!Number.isNaN(want)) compared++;
              }
            }
          });
        }
      }
      expect(mismatches.slice(0, 5)).toEqual([]);
      expect(compared).toBe(2 * 2 * w * h);
    }
  });

  it('rejects a rotated grid, a zero pixel size and a value count that does not match the grid with a typed error', () => {
    const ok = grid(2, 2);
    const values = new Float64Array(4);
    expect(() => warpBand({ ...ok, values, geoTransform: [0, 1, 0.1, 0, 0, -1] }, ok, 'nearest')).toThrow(InvalidGridError);
    expect(() => warpBand({ ...ok, values, geoTransform: [0, 0, 0, 0, 0, -1] }, ok, 'nearest')).toThrow(/pixel size/);
    expect(() => warpBand({ ...ok, values: new Float64Array(3) }, ok, 'nearest')).toThrow(/one value per pixel/);
    expect(() => warpBand({ ...ok, values }, { ...ok, width: 0 }, 'nearest')).toThrow(/positive integers/);
  });
});

describe('crsFromEpsg', () => {
  it('bundles thousands of EPSG definitions offline, and knows the common ones', () => {
    expect(bundledEpsgCount()).toBeGreaterThan(5000);
    expect(crsFromEpsg(4326)).toMatchObject({ epsg: 4326, geographic: true });
    expect(crsFromEpsg('EPSG:3857')).toMatchObject({ epsg: 3857, geographic: false });
    expect(crsFromEpsg('epsg:32618').proj4).toContain('+proj=utm +zone=18');
    expect(crsFromEpsg(2193).proj4).toContain('+proj=tmerc');
  });

  it('throws UnknownCrsError for an unknown code and for text that is not an EPSG code', () => {
    expect(() => crsFromEpsg(999999)).toThrow(UnknownCrsError);
    expect(() => crsFromEpsg('EPSG:4979')).toThrow(/not among/); // geographic 3D: not a raster grid CRS
    expect(() => crsFromEpsg('WGS84')).toThrow(/is not an EPSG code/);
    try {
      crsFromEpsg(1);
    } catch (e) {
      expect((e as UnknownCrsError).code).toBe('INVALID_PARAMS');
    }
  });

  it('transforms like PROJ (cs2cs EPSG:32618 EPSG:3857) to the millimetre', () => {
    const xs = Float64Array.of(101985, 500000);
    const ys = Float64Array.of(2826915, 0);
    crsTransform(crsFromEpsg(32618), crsFromEpsg(3857))(xs, ys);
    // Reference values printed by `echo '101985 2826915' | cs2cs -f %.6f EPSG:32618 EPSG:3857` (PROJ 9.1).
    expect(xs[0]).toBeCloseTo(-8789636.707872, 3);
    expect(ys[0]).toBeCloseTo(2938035.238324, 3);
    expect(xs[1]).toBeCloseTo(-8348961.809496, 3);
  });
});
