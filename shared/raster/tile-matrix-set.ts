import { InvalidParamsError } from '../domain/errors.js';
import { type Crs, crsFromEpsg, crsTransform, geographicOf, longitudeAxis } from './crs.js';
import utmTemplate from './tms/UTM31WGS84Quad.json' with { type: 'json' };
import webMercatorQuad from './tms/WebMercatorQuad.json' with { type: 'json' };
import worldCrs84Quad from './tms/WorldCRS84Quad.json' with { type: 'json' };
import type { RasterGrid } from './warp.js';

/**
 * OGC Two Dimensional Tile Matrix Set 2.0 (OGC 17-083r4) tiling schemes, so tiles line up with web maps and
 * with `gdal raster tile` / gdal2tiles on the same scheme.
 *
 * The definitions are the OGC's own registry JSON (github.com/opengeospatial/2D-Tile-Matrix-Set,
 * `registry/json/`, commit 7cee2f8cd03b07bf457683321747be41d10abe66; Apache-2.0), committed in ./tms/:
 * WebMercatorQuad (EPSG:3857, zooms 0-24), WorldCRS84Quad (OGC CRS84 lon/lat, zooms 0-23) and
 * UTM31WGS84Quad, the template of the "UTMnnWGS84Quad" family (zones 1-60 north, EPSG:326nn): the 60 registry
 * files are identical but for id, title, uri and crs (checked when they were fetched), so the other zones
 * are built from the template here rather than committed 60 times.
 *
 * Tiles are addressed as OGC (and XYZ) do: column from the left, row from the top (pointOfOrigin is the
 * top-left corner). A 512-pixel tile covers the same ground as the 256-pixel tile of the same index, at
 * half the cell size (what rio-tiler and TiTiler do with `tilesize=512`), so the index is the scheme's.
 */

export interface TileMatrix {
  readonly id: string;
  readonly scaleDenominator: number;
  readonly cellSize: number;
  /** Top-left corner in the set's CRS, in [x, y] (easting, northing / lon, lat) order. */
  readonly pointOfOrigin: readonly [number, number];
  readonly tileWidth: number;
  readonly tileHeight: number;
  readonly matrixWidth: number;
  readonly matrixHeight: number;
}

export interface TileMatrixSet {
  readonly id: string;
  readonly title: string;
  readonly uri: string;
  readonly crs: Crs;
  readonly tileMatrices: readonly TileMatrix[];
}

export interface TileRange {
  readonly zoom: number;
  readonly minCol: number;
  readonly maxCol: number;
  readonly minRow: number;
  readonly maxRow: number;
}

interface RegistryJson {
  id: string;
  title: string;
  uri: string;
  tileMatrices: {
    id: string;
    scaleDenominator: number;
    cellSize: number;
    pointOfOrigin: number[];
    tileWidth: number;
    tileHeight: number;
    matrixWidth: number;
    matrixHeight: number;
  }[];
}

function fromRegistry(json: RegistryJson, crs: Crs, id = json.id, title = json.title, uri = json.uri): TileMatrixSet {
  return {
    id,
    title,
    uri,
    crs,
    tileMatrices: json.tileMatrices.map((m) => ({
      id: m.id,
      scaleDenominator: m.scaleDenominator,
      cellSize: m.cellSize,
      pointOfOrigin: [m.pointOfOrigin[0] as number, m.pointOfOrigin[1] as number],
      tileWidth: m.tileWidth,
      tileHeight: m.tileHeight,
      matrixWidth: m.matrixWidth,
      matrixHeight: m.matrixHeight,
    })),
  };
}

const UTM = /^UTM(\d{2})WGS84Quad$/;
const sets = new Map<string, TileMatrixSet>();

/** The names `tileMatrixSet` accepts. */
export const TILE_MATRIX_SET_NAMES = ['WebMercatorQuad', 'WorldCRS84Quad', 'UTM01WGS84Quad ... UTM60WGS84Quad'] as const;

/** A tile matrix set by its OGC id. Throws InvalidParamsError for any other name. */
export function tileMatrixSet(id: string): TileMatrixSet {
  const cached = sets.get(id);
  if (cached) return cached;
  let set: TileMatrixSet;
  const utm = UTM.exec(id);
  if (id === 'WebMercatorQuad') set = fromRegistry(webMercatorQuad, crsFromEpsg(3857));
  // OGC CRS84 is WGS 84 with longitude first, which is how Tessera (and proj4) order EPSG:4326.
  else if (id === 'WorldCRS84Quad') set = fromRegistry(worldCrs84Quad, crsFromEpsg(4326));
  else if (utm && Number(utm[1]) >= 1 && Number(utm[1]) <= 60) {
    const zone = utm[1] as string;
    set = fromRegistry(
      utmTemplate,
      crsFromEpsg(32600 + Number(zone)),
      id,
      `Universal Transverse Mercator Zone ${zone} WGS84 Quad`,
      `http://www.opengis.net/def/tilematrixset/OGC/1.0/${id}`,
    );
  } else {
    throw new InvalidParamsError(
      `unknown tile matrix set ${JSON.stringify(id)}; use WebMercatorQuad, WorldCRS84Quad or UTMnnWGS84Quad with nn = 01..60 (e.g. UTM31WGS84Quad)`,
    );
  }
  sets.set(id, set);
  return set;
}

/** The tile matrix for zoom `zoom`. Throws InvalidParamsError when the set has no such zoom. */
export function tileMatrix(set: TileMatrixSet, zoom: number): TileMatrix {
  const m = Number.isInteger(zoom) ? set.tileMatrices.find((t) => t.id === String(zoom)) : undefined;
  if (!m) {
    const ids = set.tileMatrices.map((t) => Number(t.id));
    throw new InvalidParamsError(`${set.id} has no zoom ${JSON.stringify(zoom)}; its zooms are ${Math.min(...ids)} to ${Math.max(...ids)}`);
  }
  return m;
}

/**
 * The tiles of zoom `zoom` that a box in the set's CRS touches, clipped to the matrix. A box edge exactly on
 * a tile boundary does not pull in the tile beyond it. Undefined when the box misses the matrix.
 */
export function tileRangeForBounds(
  set: TileMatrixSet,
  zoom: number,
  bounds: { minX: number; minY: number; maxX: number; maxY: number },
): TileRange | undefined {
  const m = tileMatrix(set, zoom);
  const spanX = m.cellSize * m.tileWidth;
  const spanY = m.cellSize * m.tileHeight;
  const [ox, oy] = m.pointOfOrigin;
  const clamp = (v: number, hi: number) => Math.max(0, Math.min(hi, v));
  const fMinCol = (bounds.minX - ox) / spanX;
  const fMaxCol = (bounds.maxX - ox) / spanX;
  const fMinRow = (oy - bounds.maxY) / spanY;
  const fMaxRow = (oy - bounds.minY) / spanY;
  if (fMaxCol <= 0 || fMinCol >= m.matrixWidth || fMaxRow <= 0 || fMinRow >= m.matrixHeight) return undefined;
  const minCol = clamp(Math.floor(fMinCol), m.matrixWidth - 1);
  const minRow = clamp(Math.floor(fMinRow), m.matrixHeight - 1);
  // A zero-width box (a point) still touches the tile it is in.
  const maxCol = clamp(Math.max(minCol, Math.ceil(fMaxCol) - 1), m.matrixWidth - 1);
  const maxRow = clamp(Math.max(minRow, Math.ceil(fMaxRow) - 1), m.matrixHeight - 1);
  return { zoom, minCol, maxCol, minRow, maxRow };
}

/**
 * The bounding box in `crs` of the footprint of `grid` (any CRS): its outline, 21 points an edge walked in order
 * around the grid, transformed (as gdalwarp bounds a reprojected grid). Undefined when no point transforms.
 *
 * Where `crs` wraps at the antimeridian (geographic, Mercator, equidistant cylindrical: {@link longitudeAxis}), the
 * outline is unwrapped as it is walked, so a footprint across 180 degrees gets the box across it (minX < 180 < maxX,
 * maxX past the CRS's eastern edge) instead of a box around the whole world; and a footprint holding a pole (its
 * outline goes round it) spans every longitude and reaches the pole (y infinite on Mercator: a tile matrix set
 * clamps it at its edge, e.g. 85.0511 degrees on WebMercatorQuad).
 */
export function footprintBounds(grid: RasterGrid, crs: Crs): { minX: number; minY: number; maxX: number; maxY: number } | undefined {
  const [x0, dx, rx, y0, ry, dy] = grid.geoTransform;
  const steps = 20;
  const n = 4 * steps;
  const xs = new Float64Array(n);
  const ys = new Float64Array(n);
  // Clockwise from the top-left corner: top edge, right edge, bottom edge, left edge (each without its last corner).
  // The points are k / steps of an edge for integer k, the same values whichever way an edge is walked.
  for (let i = 0; i < n; i++) {
    const edge = Math.floor(i / steps);
    const k = i % steps;
    const [px, py] =
      edge === 0
        ? [(k / steps) * grid.width, 0]
        : edge === 1
          ? [grid.width, (k / steps) * grid.height]
          : edge === 2
            ? [((steps - k) / steps) * grid.width, grid.height]
            : [0, ((steps - k) / steps) * grid.height];
    xs[i] = x0 + px * dx + py * rx;
    ys[i] = y0 + px * ry + py * dy;
  }
  crsTransform(grid.crs, crs)(xs, ys);
  const axis = longitudeAxis(crs);
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  let previous: number | undefined;
  for (let k = 0; k < n; k++) {
    let x = xs[k] as number;
    const y = ys[k] as number;
    if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
    if (axis !== undefined && previous !== undefined) {
      // A step of more than half the world is the outline crossing the antimeridian, not a jump across the map.
      x += Math.round((previous - x) / axis.period) * axis.period;
    }
    previous = x;
    minX = Math.min(minX, x);
    maxX = Math.max(maxX, x);
    minY = Math.min(minY, y);
    maxY = Math.max(maxY, y);
  }
  if (!Number.isFinite(minX)) return undefined;
  if (axis === undefined) return { minX, minY, maxX, maxY };
  const west = axis.center - axis.period / 2;
  // The unwrapped box starts in the CRS's own longitude range; it may end past its eastern edge.
  const shift = Math.floor((minX - west) / axis.period + 1e-12) * axis.period;
  minX -= shift;
  maxX -= shift;
  const poles = polesInside(grid, crs);
  if (poles.north || poles.south || maxX - minX >= axis.period) {
    minX = west;
    maxX = west + axis.period;
  }
  if (poles.north || poles.south) {
    const px = Float64Array.of(0, 0);
    const py = Float64Array.of(poles.north ? 90 : -90, poles.south ? -90 : 90);
    crsTransform(geographicOf(crs), crs)(px, py);
    // Mercator has no finite y at a pole: the footprint is unbounded there.
    if (poles.north) maxY = Number.isFinite(py[0] as number) ? Math.max(maxY, py[0] as number) : Infinity;
    if (poles.south) minY = Number.isFinite(py[1] as number) ? Math.min(minY, py[1] as number) : -Infinity;
  }
  return { minX, minY, maxX, maxY };
}

/** Which poles lie inside `grid`'s footprint: each pole, from `crs`'s geographic CRS into the grid's pixels. */
function polesInside(grid: RasterGrid, crs: Crs): { north: boolean; south: boolean } {
  const xs = Float64Array.of(0, 0);
  const ys = Float64Array.of(90, -90);
  crsTransform(geographicOf(crs), grid.crs)(xs, ys);
  const [gx, dx, rx, gy, ry, dy] = grid.geoTransform;
  const det = dx * dy - rx * ry;
  const inside = (k: number) => {
    const x = (xs[k] as number) - gx;
    const y = (ys[k] as number) - gy;
    const col = (dy * x - rx * y) / det;
    const row = (dx * y - ry * x) / det;
    return col >= 0 && col <= grid.width && row >= 0 && row <= grid.height;
  };
  return { north: inside(0), south: inside(1) };
}

/** True when a set's matrices span the whole longitude period of its CRS (WebMercatorQuad, WorldCRS84Quad): its columns wrap. */
export function wrapsAtAntimeridian(set: TileMatrixSet, zoom: number): boolean {
  const axis = longitudeAxis(set.crs);
  if (axis === undefined) return false;
  const m = tileMatrix(set, zoom);
  return Math.abs(m.matrixWidth * m.tileWidth * m.cellSize - axis.period) <= 1e-9 * axis.period;
}

/**
 * The tiles of zoom `zoom` covering the footprint of `grid` (any CRS): its {@link footprintBounds} in the set's CRS.
 * On a set that wraps at the antimeridian a footprint across it gives one contiguous span that runs past the last
 * column (maxCol >= matrixWidth: column c is tile c mod matrixWidth), never the stripe of every column between its
 * two halves; {@link splitTileRange} gives the two ranges in the matrix, {@link tilesOf} the tiles. Rows are clamped
 * to the matrix (a polar footprint stops at WebMercatorQuad's 85.0511 degrees). Undefined when the footprint misses
 * the matrix or does not transform.
 */
export function tileRangeForGrid(set: TileMatrixSet, zoom: number, grid: RasterGrid): TileRange | undefined {
  const bounds = footprintBounds(grid, set.crs);
  if (bounds === undefined) return undefined;
  const m = tileMatrix(set, zoom);
  const [ox] = m.pointOfOrigin;
  const span = m.cellSize * m.tileWidth;
  if (!wrapsAtAntimeridian(set, zoom) || bounds.maxX <= ox + m.matrixWidth * span) return tileRangeForBounds(set, zoom, bounds);
  const rows = tileRangeForBounds(set, zoom, { ...bounds, minX: ox, maxX: ox + span });
  if (rows === undefined) return undefined;
  const minCol = Math.max(0, Math.floor((bounds.minX - ox) / span));
  const maxCol = Math.min(minCol + m.matrixWidth - 1, Math.max(minCol, Math.ceil((bounds.maxX - ox) / span) - 1));
  return { ...rows, minCol, maxCol };
}

/**
 * A range as the set's matrix holds it: itself, or, for a span past the last column (across the antimeridian), the
 * part up to the last column and the part from column 0.
 */
export function splitTileRange(set: TileMatrixSet, range: TileRange): TileRange[] {
  const width = tileMatrix(set, range.zoom).matrixWidth;
  if (range.maxCol < width) return [range];
  return [
    { ...range, maxCol: width - 1 },
    { ...range, minCol: 0, maxCol: range.maxCol - width },
  ];
}

/** Every tile of a range, row by row; with the set, a span past the last column wraps to column 0 (see {@link tileRangeForGrid}). */
export function* tilesOf(range: TileRange, set?: TileMatrixSet): Generator<{ zoom: number; col: number; row: number }> {
  const width = set === undefined ? Infinity : tileMatrix(set, range.zoom).matrixWidth;
  for (let row = range.minRow; row <= range.maxRow; row++) {
    for (let col = range.minCol; col <= range.maxCol; col++) yield { zoom: range.zoom, col: col % width, row };
  }
}

/**
 * The target grid of one tile: its CRS, geotransform and size, `tilePx` pixels a side (256, the registry's,
 * or 512 at half the cell size). Throws InvalidParamsError for a tile outside the matrix.
 */
export function tileGrid(set: TileMatrixSet, zoom: number, col: number, row: number, tilePx: 256 | 512 = 256): RasterGrid {
  const m = tileMatrix(set, zoom);
  if (!Number.isInteger(col) || !Number.isInteger(row) || col < 0 || row < 0 || col >= m.matrixWidth || row >= m.matrixHeight) {
    throw new InvalidParamsError(
      `tile ${set.id}/${zoom}/${col}/${row} is outside the matrix (${m.matrixWidth} x ${m.matrixHeight} tiles at zoom ${zoom})`,
    );
  }
  if (tilePx !== 256 && tilePx !== 512) {
    throw new InvalidParamsError(`tile size ${JSON.stringify(tilePx)} is not supported; use 256 or 512`);
  }
  const cell = (m.cellSize * m.tileWidth) / tilePx;
  const [ox, oy] = m.pointOfOrigin;
  return {
    crs: set.crs,
    geoTransform: [ox + col * m.tileWidth * m.cellSize, cell, 0, oy - row * m.tileHeight * m.cellSize, 0, -cell],
    width: tilePx,
    height: tilePx,
  };
}

/** The object key of a tile under a scene key: `{tms}/{z}/{x}/{y}`, as issue 14 fixes it. */
export function tileKeyPath(set: TileMatrixSet, zoom: number, col: number, row: number): string {
  return `${set.id}/${zoom}/${col}/${row}`;
}

/** The zooms a set defines: its first and last tile matrix ids (WebMercatorQuad 0-24, UTMnnWGS84Quad 1-24). */
export function zoomsOf(set: TileMatrixSet): { readonly min: number; readonly max: number } {
  const ids = set.tileMatrices.map((t) => Number(t.id));
  return { min: Math.min(...ids), max: Math.max(...ids) };
}

/**
 * The zooms `minZoom` to `maxZoom` of tile matrix set `id` (one zoom when they are equal), checked before any claim:
 * each must be one of the set's, and each zoom below the highest must be a quadtree parent of the next (half its
 * matrix width and height, twice its cell size, the same origin and tile size), so tile (x, y) of zoom z is the four
 * tiles (2x..2x+1, 2y..2y+1) of zoom z + 1, as a pyramid built from children needs (docs/pyramids.md). Every set
 * Tessera bundles is a quadtree; the check keeps it so. Throws InvalidParamsError naming the set's zooms.
 */
export function checkZoomRange(id: string, minZoom: number, maxZoom: number): TileMatrixSet {
  const set = tileMatrixSet(id);
  const { min, max } = zoomsOf(set);
  const range = minZoom === maxZoom ? `zoom ${maxZoom}` : `zoom range ${minZoom}-${maxZoom}`;
  for (const z of [minZoom, maxZoom]) {
    if (!Number.isInteger(z) || z < min || z > max) {
      throw new InvalidParamsError(
        `the ${range} is outside ${set.id}, whose zooms are ${min} to ${max}: choose zooms within them (e.g. --zoom ${Math.max(min, Math.min(maxZoom, max) - 6)}-${Math.min(maxZoom, max)})`,
      );
    }
  }
  for (let z = minZoom; z < maxZoom; z++) {
    const a = tileMatrix(set, z);
    const b = tileMatrix(set, z + 1);
    const quad =
      b.matrixWidth === 2 * a.matrixWidth &&
      b.matrixHeight === 2 * a.matrixHeight &&
      a.tileWidth === b.tileWidth &&
      a.tileHeight === b.tileHeight &&
      Math.abs(a.cellSize - 2 * b.cellSize) <= 1e-12 * a.cellSize &&
      a.pointOfOrigin[0] === b.pointOfOrigin[0] &&
      a.pointOfOrigin[1] === b.pointOfOrigin[1];
    if (!quad) {
      throw new InvalidParamsError(
        `${set.id} zoom ${z} is not the quadtree parent of zoom ${z + 1} (its tiles are not four tiles of the next zoom), so no pyramid spans both: tile one zoom at a time`,
      );
    }
  }
  return set;
}
