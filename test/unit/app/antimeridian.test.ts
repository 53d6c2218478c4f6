import { describe, expect, it } from 'vitest';
import { type OpenedBand, sceneTarget, tileGeoTransform, tmsTileOf } from '../../../shared/app/scene-grid.js';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { tileGrid as gridOf, type TileGrid, windows } from '../../../shared/domain/tile-grid.js';
import { tilingParams } from '../../../shared/domain/tiling-params.js';
import {
  CelestialBodyMismatchError,
  type Crs,
  canonicalCrsText,
  crsFromEpsg,
  crsTransform,
  parseCrs,
  rasterCrsOf,
} from '../../../shared/raster/crs.js';
import type { GeoTransform, RasterSource } from '../../../shared/raster/index.js';
import {
  footprintBounds,
  splitTileRange,
  tileMatrix,
  tileMatrixSet,
  tileRangeForBounds,
  tileRangeForGrid,
  tilesOf,
} from '../../../shared/raster/tile-matrix-set.js';

/**
 * Issue 29, section 3: the planner across the antimeridian and at the poles. A 233 km scene (2,330 pixels of 100 m)
 * straddling 180 degrees in UTM 60N gets the tiles on both sides of it, two ranges of the matrix, not the stripe of
 * every column between them (the old arithmetic, kept here as `naiveRange` to show what it did); a polar scene onto
 * WebMercatorQuad covers every column down from the matrix's top row (85.0511 degrees). The pixels are compared with
 * gdalwarp end to end in test/e2e/antimeridian-gdal.test.ts.
 */

/** UTM 60N (central meridian 177 E), 52 N: the scene runs from about 178.3 E to 178.2 W. */
const ANTIMERIDIAN_SCENE = {
  epsg: 32660,
  geoTransform: [587_200, 100, 0, 5_873_100, 0, -100] as GeoTransform,
  width: 2330,
  height: 2330,
};
/** NSIDC sea ice polar stereographic north (EPSG:3413): 2,000 km a side around the pole. */
const POLAR_SCENE = {
  epsg: 3413,
  geoTransform: [-1_000_000, 10_000, 0, 1_000_000, 0, -10_000] as GeoTransform,
  width: 200,
  height: 200,
};

function band(crs: Crs, geoTransform: GeoTransform, width: number, height: number, key = 'scene.tif'): OpenedBand {
  const raster = { crs: rasterCrsOf(crs), geoTransform, width, height, bandCount: 1 } as unknown as RasterSource;
  return { name: 'A', key, versionToken: 'v1', index: 1, raster };
}

const scene = band(
  crsFromEpsg(ANTIMERIDIAN_SCENE.epsg),
  ANTIMERIDIAN_SCENE.geoTransform,
  ANTIMERIDIAN_SCENE.width,
  ANTIMERIDIAN_SCENE.height,
);
const tiling = (extra: Record<string, unknown>) =>
  tilingParams({ ...DEFAULT_PARAMS, tile_px: 256, bands: { A: 1 }, expression: 'A', ...extra });

/** What the planner did before issue 29: the box of the transformed outline, no unwrapping. */
function naiveBounds(crs: Crs) {
  const [x0, dx, , y0, , dy] = ANTIMERIDIAN_SCENE.geoTransform;
  const xs: number[] = [];
  const ys: number[] = [];
  for (let k = 0; k <= 20; k++) {
    const t = k / 20;
    for (const [px, py] of [
      [t, 0],
      [t, 1],
      [0, t],
      [1, t],
    ] as const) {
      xs.push(x0 + px * ANTIMERIDIAN_SCENE.width * dx);
      ys.push(y0 + py * ANTIMERIDIAN_SCENE.height * dy);
    }
  }
  const X = Float64Array.from(xs);
  const Y = Float64Array.from(ys);
  crsTransform(crsFromEpsg(ANTIMERIDIAN_SCENE.epsg), crs)(X, Y);
  return { minX: Math.min(...X), minY: Math.min(...Y), maxX: Math.max(...X), maxY: Math.max(...Y) };
}

describe('a scene across the antimeridian', () => {
  it.each([
    ['WorldCRS84Quad', 9],
    ['WebMercatorQuad', 9],
  ])('gets the tiles of %s zoom %i on both sides of 180 degrees, in two ranges', (id, zoom) => {
    const set = tileMatrixSet(id);
    const m = tileMatrix(set, zoom);
    const before = tileRangeForBounds(set, zoom, naiveBounds(set.crs));
    const target = sceneTarget([scene], tiling({ tms: id, zoom }));
    if (target?.tms === undefined || before === undefined) throw new Error('no tile matrix set target');
    const beforeCount = (before.maxCol - before.minCol + 1) * (before.maxRow - before.minRow + 1);
    const grid: TileGrid = { ...gridOf(target.width, target.height, 256), target };
    const xs = new Set([...windows(grid)].map((w) => tmsTileOf(target, w)?.x));
    console.log(
      `${id} z${zoom}: before ${beforeCount} tiles (columns ${before.minCol}-${before.maxCol} of ${m.matrixWidth}), ` +
        `after ${grid.count} (columns ${[...xs].sort((a, b) => (a as number) - (b as number)).join(',')})`,
    );
    // The old planner spanned every column between the two halves.
    expect(before.maxCol - before.minCol + 1).toBeGreaterThan(m.matrixWidth * 0.9);
    // Now: the last columns and the first ones, nothing between.
    expect(xs.has(m.matrixWidth - 1)).toBe(true);
    expect(xs.has(0)).toBe(true);
    expect([...xs].every((x) => (x as number) < 10 || (x as number) >= m.matrixWidth - 10)).toBe(true);
    expect(grid.count).toBeLessThan(100);
    const range = tileRangeForGrid(set, zoom, { crs: crsFromEpsg(32660), ...ANTIMERIDIAN_SCENE });
    if (range === undefined) throw new Error('no range');
    const parts = splitTileRange(set, range);
    expect(parts).toHaveLength(2);
    expect(parts[0]?.maxCol).toBe(m.matrixWidth - 1);
    expect(parts[1]?.minCol).toBe(0);
    expect([...tilesOf(range, set)].map((t) => t.col)).toEqual([...tilesOf(range, set)].map((t) => t.col % m.matrixWidth));
  });

  it('places a tile past the last column where its index is: one matrix width west', () => {
    const target = sceneTarget([scene], tiling({ tms: 'WorldCRS84Quad', zoom: 9 }));
    if (target?.tms === undefined) throw new Error('no target');
    const grid: TileGrid = { ...gridOf(target.width, target.height, 256), target };
    for (const w of windows(grid)) {
      const tile = tmsTileOf(target, w);
      const gt = tileGeoTransform(target, target.geoTransform, w);
      const m = tileMatrix(tileMatrixSet('WorldCRS84Quad'), 9);
      // The tile's own corner, from its index, as the registry defines it.
      expect(gt[0]).toBeCloseTo(-180 + (tile?.x as number) * m.tileWidth * m.cellSize, 9);
      expect(gt[0]).toBeGreaterThanOrEqual(-180);
      expect(gt[0]).toBeLessThan(180);
    }
  });

  it('reprojects onto EPSG:4326 as one box across 180 degrees, not a stripe round the world', () => {
    const target = sceneTarget([scene], tiling({ dst_crs: 'EPSG:4326' }));
    if (target === undefined) throw new Error('no target');
    const before = naiveBounds(crsFromEpsg(4326));
    const [minX, res] = target.geoTransform;
    const maxX = minX + target.width * res;
    console.log(
      `EPSG:4326: before ${(before.maxX - before.minX).toFixed(2)} degrees wide, after ${target.width} x ${target.height} ` +
        `pixels of ${res.toFixed(5)} degrees, ${minX.toFixed(4)} to ${maxX.toFixed(4)}`,
    );
    expect(before.maxX - before.minX).toBeGreaterThan(350);
    expect(minX).toBeGreaterThan(178);
    expect(minX).toBeLessThan(180);
    expect(maxX).toBeGreaterThan(181);
    expect(maxX).toBeLessThan(182);
    // About 100 m pixels, as the scene's.
    expect(res).toBeLessThan(0.002);
  });

  it('unwraps a footprint onto Web Mercator by exactly the matrix width', () => {
    const b = footprintBounds({ crs: crsFromEpsg(32660), ...ANTIMERIDIAN_SCENE }, crsFromEpsg(3857));
    const half = 20_037_508.342789244;
    expect(b?.minX).toBeLessThan(half);
    expect(b?.maxX).toBeGreaterThan(half);
    expect((b?.maxX as number) - (b?.minX as number)).toBeLessThan(500_000);
  });
});

describe('a scene holding a pole', () => {
  const polar = band(crsFromEpsg(POLAR_SCENE.epsg), POLAR_SCENE.geoTransform, POLAR_SCENE.width, POLAR_SCENE.height);

  it('covers every column of WebMercatorQuad down from its top row (85.0511 degrees), clamped there', () => {
    const set = tileMatrixSet('WebMercatorQuad');
    const target = sceneTarget([polar], tiling({ tms: 'WebMercatorQuad', zoom: 4 }));
    if (target?.tms === undefined) throw new Error('no target');
    expect(target.tms.minCol).toBe(0);
    expect(target.width).toBe(16 * 256);
    expect(target.tms.minRow).toBe(0);
    expect(target.geoTransform[3]).toBeCloseTo(20_037_508.342789244, 3);
    // The scene's corners are 1,414 km from the pole (77.3 N, y 14.0e6 m): rows 0 to 2 of 16 (2.5e6 m each).
    expect(target.height).toBe(3 * 256);
    const b = footprintBounds({ crs: crsFromEpsg(3413), ...POLAR_SCENE }, set.crs);
    expect(b?.maxY).toBe(Number.POSITIVE_INFINITY);
  });

  it('reaches 90 degrees on EPSG:4326 and spans every longitude', () => {
    const target = sceneTarget([polar], tiling({ dst_crs: 'EPSG:4326' }));
    if (target === undefined) throw new Error('no target');
    expect(target.geoTransform[0]).toBeCloseTo(-180, 9);
    expect(target.geoTransform[3]).toBeCloseTo(90, 9);
    expect(target.geoTransform[0] + target.width * target.geoTransform[1]).toBeCloseTo(180, 0);
  });

  it('refuses EPSG:3857 as a target CRS: Mercator has no finite pole', () => {
    expect(() => sceneTarget([polar], tiling({ dst_crs: 'EPSG:3857' }))).toThrow(InvalidParamsError);
    expect(() => sceneTarget([polar], tiling({ dst_crs: 'EPSG:3857' }))).toThrow(/reaches a pole/);
  });
});

describe('a scene on another body', () => {
  const mars = parseCrs('+proj=eqc +lat_ts=0 +lat_0=0 +lon_0=0 +x_0=0 +y_0=0 +R=3396190 +units=m +no_defs');
  const marsBand = band(mars, [0, 5000, 0, 500_000, 0, -5000], 40, 30);

  it.each([
    ['a tile matrix set', { tms: 'WebMercatorQuad', zoom: 3 }],
    ['an Earth CRS', { dst_crs: 'EPSG:4326' }],
  ])('is refused onto %s with CelestialBodyMismatchError', (_, params) => {
    expect(() => sceneTarget([marsBand], tiling(params))).toThrow(CelestialBodyMismatchError);
    expect(() => sceneTarget([marsBand], tiling(params))).toThrow(/different celestial bodies/);
  });

  it('is tiled on its own grid, and reprojected onto a CRS of the same body', () => {
    expect(sceneTarget([marsBand], tiling({}))).toBeUndefined();
    const polar = canonicalCrsText('+proj=stere +lat_0=90 +lon_0=0 +k=1 +x_0=0 +y_0=0 +R=3396190 +units=m');
    const target = sceneTarget([marsBand], tiling({ dst_crs: polar }));
    expect(target?.crs.wkt).toMatch(/Polar Stereographic/);
  });

  it('refuses a dst_crs that is not written in its canonical form, naming it', () => {
    expect(() => sceneTarget([marsBand], tiling({ dst_crs: '+proj=eqc +R=3396190' }))).toThrow(/write it as "\+proj=eqc \+lat_ts=0 /);
  });
});
