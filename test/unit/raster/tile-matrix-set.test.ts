import { describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { crsFromEpsg, crsTransform } from '../../../shared/raster/crs.js';
import {
  tileGrid,
  tileKeyPath,
  tileMatrix,
  tileMatrixSet,
  tileRangeForBounds,
  tileRangeForGrid,
  tilesOf,
} from '../../../shared/raster/tile-matrix-set.js';

/** The standard XYZ ("slippy map") tile of a lon/lat at zoom z (OpenStreetMap wiki formulas). */
function xyz(lon: number, lat: number, z: number): [number, number] {
  const n = 2 ** z;
  const r = (lat * Math.PI) / 180;
  return [Math.floor(((lon + 180) / 360) * n), Math.floor(((1 - Math.log(Math.tan(r) + 1 / Math.cos(r)) / Math.PI) / 2) * n)];
}

function toMercator(lon: number, lat: number): [number, number] {
  const xs = Float64Array.of(lon);
  const ys = Float64Array.of(lat);
  crsTransform(crsFromEpsg(4326), crsFromEpsg(3857))(xs, ys);
  return [xs[0] as number, ys[0] as number];
}

describe('tileMatrixSet', () => {
  it('loads the OGC registry definitions of WebMercatorQuad, WorldCRS84Quad and the UTM family', () => {
    const wmq = tileMatrixSet('WebMercatorQuad');
    expect(wmq.crs.epsg).toBe(3857);
    expect(wmq.tileMatrices).toHaveLength(25);
    expect(tileMatrix(wmq, 0)).toMatchObject({ matrixWidth: 1, matrixHeight: 1, tileWidth: 256, cellSize: 156543.033928041 });
    const crs84 = tileMatrixSet('WorldCRS84Quad');
    expect(crs84.crs.epsg).toBe(4326);
    expect(tileMatrix(crs84, 0)).toMatchObject({ matrixWidth: 2, matrixHeight: 1, cellSize: 0.703125, pointOfOrigin: [-180, 90] });
    const utm18 = tileMatrixSet('UTM18WGS84Quad');
    expect(utm18.crs.epsg).toBe(32618);
    expect(utm18.uri).toBe('http://www.opengis.net/def/tilematrixset/OGC/1.0/UTM18WGS84Quad');
    expect(tileMatrix(utm18, 1)).toMatchObject({ matrixWidth: 1, matrixHeight: 2, pointOfOrigin: [-9501965.72931276, 20003931.4586255] });
  });

  it('rejects unknown sets, zones and zooms with a typed error that lists what exists', () => {
    expect(() => tileMatrixSet('GoogleMapsCompatible')).toThrow(InvalidParamsError);
    expect(() => tileMatrixSet('UTM61WGS84Quad')).toThrow(/UTMnnWGS84Quad/);
    expect(() => tileMatrix(tileMatrixSet('WebMercatorQuad'), 25)).toThrow(/zooms are 0 to 24/);
    expect(() => tileMatrix(tileMatrixSet('UTM31WGS84Quad'), 0)).toThrow(/zooms are 1 to 24/);
    expect(() => tileGrid(tileMatrixSet('WebMercatorQuad'), 1, 2, 0)).toThrow(/outside the matrix/);
  });
});

describe('WebMercatorQuad tiles', () => {
  const wmq = tileMatrixSet('WebMercatorQuad');
  const points: [number, number][] = [
    [-9.0, 53.2],
    [2.35, 48.85],
    [-122.42, 37.77],
    [151.21, -33.87],
    [0.0001, 0.0001],
    [-179.9, 84.9],
    [139.69, 35.69],
  ];

  it('puts a point in the tile the standard XYZ formulas give, at every zoom 0-20', () => {
    for (const [lon, lat] of points) {
      const [x, y] = toMercator(lon, lat);
      for (let z = 0; z <= 20; z++) {
        const range = tileRangeForBounds(wmq, z, { minX: x, minY: y, maxX: x, maxY: y });
        const [col, row] = xyz(lon, lat, z);
        expect(range, `${lon},${lat} z${z}`).toEqual({ zoom: z, minCol: col, maxCol: col, minRow: row, maxRow: row });
      }
    }
  });

  it("matches mercantile's documented bounds of tile 10/486/332", () => {
    // mercantile README: bounds(486, 332, 10) == LngLatBbox(west=-9.140625, south=53.120405283106564,
    // east=-8.7890625, north=53.33087298301705).
    const grid = tileGrid(wmq, 10, 486, 332);
    const [x0, dx, , y0, , dy] = grid.geoTransform;
    const xs = Float64Array.of(x0, x0 + 256 * dx);
    const ys = Float64Array.of(y0, y0 + 256 * dy);
    crsTransform(wmq.crs, crsFromEpsg(4326))(xs, ys);
    expect(xs[0]).toBeCloseTo(-9.140625, 9);
    expect(ys[0]).toBeCloseTo(53.33087298301705, 9);
    expect(xs[1]).toBeCloseTo(-8.7890625, 9);
    expect(ys[1]).toBeCloseTo(53.120405283106564, 9);
  });

  it('makes 512-pixel tiles cover the same ground at half the cell size', () => {
    const a = tileGrid(wmq, 5, 10, 12);
    const b = tileGrid(wmq, 5, 10, 12, 512);
    expect(b.width).toBe(512);
    expect(b.geoTransform[0]).toBe(a.geoTransform[0]);
    expect(b.geoTransform[3]).toBe(a.geoTransform[3]);
    expect(b.geoTransform[1] * 2).toBeCloseTo(a.geoTransform[1], 9);
  });

  it('does not pull in the next tile for a box edge exactly on a tile boundary', () => {
    const g = tileGrid(wmq, 3, 2, 5);
    const [x0, dx, , y0, , dy] = g.geoTransform;
    const range = tileRangeForBounds(wmq, 3, { minX: x0, maxX: x0 + 256 * dx, maxY: y0, minY: y0 + 256 * dy });
    expect(range).toEqual({ zoom: 3, minCol: 2, maxCol: 2, minRow: 5, maxRow: 5 });
    expect(tileRangeForBounds(wmq, 3, { minX: 3e7, maxX: 4e7, minY: 0, maxY: 1 })).toBeUndefined();
  });

  it("covers a scene's footprint: RGB.byte.tif's grid (UTM 18N) at zoom 8, tile keys {tms}/{z}/{x}/{y}", () => {
    // The scene's grid as gdalinfo reports it (test/data/public/rgb_deflate.tif).
    const grid = {
      crs: crsFromEpsg(32618),
      geoTransform: [101985, 300.0379266750948, 0, 2826915, 0, -300.041782729805] as const,
      width: 791,
      height: 718,
    };
    const range = tileRangeForGrid(wmq, 8, grid);
    // Its extreme lon/lat corners (gdalinfo): west 78.9587 W (upper left), east 76.5749 W (lower right),
    // north 25.5509 N (upper right), south 23.5650 N (lower left).
    const [w, n] = xyz(-78.9587, 25.5509, 8);
    const [e, s] = xyz(-76.5749, 23.565, 8);
    expect(range).toMatchObject({ minCol: w, maxCol: e, minRow: n, maxRow: s });
    const keys = [...tilesOf(range as NonNullable<typeof range>)].map((t) => tileKeyPath(wmq, t.zoom, t.col, t.row));
    expect(keys[0]).toBe(`WebMercatorQuad/8/${w}/${n}`);
    expect(keys).toHaveLength((e - w + 1) * (s - n + 1));
  });
});

describe('WorldCRS84Quad and UTM tiles', () => {
  it('tiles CRS84 in degrees from (-180, 90): zoom 1 is 4 x 2 tiles of 90 degrees', () => {
    const set = tileMatrixSet('WorldCRS84Quad');
    const g = tileGrid(set, 1, 3, 1);
    expect(g.geoTransform).toEqual([90, 90 / 256, 0, 0, 0, -90 / 256]);
    expect(tileRangeForBounds(set, 1, { minX: -10, minY: -10, maxX: 10, maxY: 10 })).toEqual({
      zoom: 1,
      minCol: 1,
      maxCol: 2,
      minRow: 0,
      maxRow: 1,
    });
  });

  it('tiles UTM zones from the registry origin with the registry cell sizes', () => {
    const set = tileMatrixSet('UTM31WGS84Quad');
    const m = tileMatrix(set, 10);
    const g = tileGrid(set, 10, 100, 200);
    expect(g.geoTransform[0]).toBeCloseTo(-9501965.72931276 + 100 * 256 * m.cellSize, 6);
    expect(g.geoTransform[3]).toBeCloseTo(20003931.4586255 - 200 * 256 * m.cellSize, 6);
    // A point at the zone's central meridian on the equator (500000, 0) is in the column the origin offset gives.
    const range = tileRangeForBounds(set, 10, { minX: 500000, minY: 0, maxX: 500000, maxY: 0 });
    expect(range?.minCol).toBe(Math.floor((500000 + 9501965.72931276) / (256 * m.cellSize)));
  });
});
