import { InvalidEventError, InvalidParamsError } from '../domain/errors.js';
import { type AssetRef, type SourceRef, type TmsTileIndex, validAssets } from '../domain/job-key.js';
import type { ResolvedStacAsset } from '../domain/stac-item.js';
import type { GridTarget, Window } from '../domain/tile-grid.js';
import type { Resampling, TilingParams } from '../domain/tiling-params.js';
import type { ObjectStore, ReadPin } from '../ports/object-store.port.js';
import { assertSameBody, type Crs, crsOfRaster, crsTransform, longitudeAxis, parseCrs, rasterCrsOf, sameCrs } from '../raster/crs.js';
import { type GeoTransform, type RasterSource, windowGeoTransform } from '../raster/index.js';
import {
  checkZoomRange,
  footprintBounds,
  tileMatrix,
  tileMatrixSet,
  tileRangeForGrid,
  tileGrid as tmsTileGrid,
} from '../raster/tile-matrix-set.js';
import { type RasterGrid, roundToInteger, warpBand } from '../raster/warp.js';
import { openSourceCached } from './raster-cache.js';

/**
 * A scene's bands and the grid its tiles are cut from (issue 14): one multi-band file or one object per
 * band, kept on the source's own grid or resampled onto a CRS's or a tile matrix set's. Every band is read
 * pinned to the version its scene key names; the target grid is computed from those pinned headers and the
 * parameters only, so fan-out and every tile job agree on it.
 */

/** One band of a scene: the object holding it, the version its reads are pinned to, its 1-based index there. */
export interface SceneBand {
  readonly name: string;
  readonly key: string;
  readonly versionToken: string;
  readonly index: number;
}

/** The bands the parameters name, with the object each is read from (sorted by band name). */
export function sceneBands(source: SourceRef, tiling: TilingParams): SceneBand[] {
  const names = Object.keys(tiling.bands).sort();
  const index = (name: string) => tiling.bands[name] as number;
  if (source.assets === undefined) {
    return names.map((name) => ({ name, key: source.key, versionToken: source.versionToken, index: index(name) }));
  }
  const assets = validAssets(source);
  // An object the key names but no band reads would make a new scene out of bytes that change nothing.
  const unused = Object.keys(assets).filter((name) => !names.includes(name));
  if (unused.length > 0) {
    throw new InvalidParamsError(
      `the scene names band object(s) ${unused.join(', ')} that params.bands does not read; name them in params.bands or leave them out`,
    );
  }
  return names.map((name) => {
    const asset = assets[name] as AssetRef | undefined;
    if (asset === undefined) {
      throw new InvalidParamsError(
        `params.bands names ${name}, but the scene has no object for it: give every band a file (--band ${name}=PATH) or an asset (--asset ${name}=ASSET)`,
      );
    }
    return { name, key: asset.key, versionToken: asset.versionToken, index: index(name) };
  });
}

/** A band with its opened raster. */
export interface OpenedBand extends SceneBand {
  readonly raster: RasterSource;
}

/**
 * Open every band's object (once per object), each pinned: `pinOf` gives the pin of a band (fan-out pins
 * each object now; a tile job carries the pins fan-out resolved).
 */
export async function openSceneBands(
  sources: ObjectStore,
  bands: readonly SceneBand[],
  pinOf: (band: SceneBand) => ReadPin,
): Promise<OpenedBand[]> {
  const opened = await Promise.all(bands.map((band) => openSourceCached(sources, band.key, pinOf(band))));
  return bands.map((band, i) => {
    const raster = opened[i] as RasterSource;
    if (band.index > raster.bandCount) {
      throw new InvalidParamsError(`params: band ${band.name} is band ${band.index}, but ${band.key} has ${raster.bandCount} band(s)`);
    }
    return { ...band, raster };
  });
}

/** A scene's target grid: where its tiles lie, and their size. */
export interface SceneTarget extends GridTarget {
  readonly width: number;
  readonly height: number;
}

/**
 * The grid a scene's tiles are cut from, or `undefined` for the single-file scene on its own grid (as
 * before issue 14: windows of the source's pixels, read without resampling).
 * - `tms` + `zoom`: the tiles of that zoom covering every band's footprint, in the set's CRS; window (row,
 *   col) is one tile, `tile_px` 256 or 512 pixels a side. With `min_zoom` (a pyramid) this is the highest zoom's grid;
 *   the lower zooms' follow from it (shared/app/pyramid-grid.ts).
 * - `dst_crs`: the bands' footprint in that CRS at the finest band's resolution, as gdalwarp suggests an
 *   output grid (the diagonal of the reprojected extent over the source's pixel diagonal).
 * - several band objects: the finest band's grid; the others are resampled onto it.
 */
export function sceneTarget(bands: readonly OpenedBand[], tiling: TilingParams): SceneTarget | undefined {
  const { dstCrs, tms } = tiling.target;
  const first = bands[0];
  if (first === undefined) throw new InvalidParamsError('params.bands must name at least one band');
  const oneObject = bands.every((b) => b.key === first.key);
  if (dstCrs === undefined && tms === undefined) {
    if (oneObject) return undefined;
    const crss = bands.map((b) => crsOfRaster(b.raster.crs, b.key));
    const other = crss.find((c) => !sameCrs(c, crss[0] as Crs));
    if (other !== undefined) {
      throw new InvalidParamsError(
        `the band files are in different CRSs (${(crss[0] as Crs).id}, ${other.id}); name the target CRS (--crs EPSG:NNNN, params.dst_crs) to resample them onto one grid`,
      );
    }
    let finest = first;
    for (const b of bands) if (Math.abs(b.raster.geoTransform[1]) < Math.abs(finest.raster.geoTransform[1])) finest = b;
    const r = finest.raster;
    const crs = { ...(r.crs.epsg === undefined ? {} : { epsg: r.crs.epsg }), ...(r.crs.wkt === undefined ? {} : { wkt: r.crs.wkt }) };
    return { crs, geoTransform: r.geoTransform, width: r.width, height: r.height };
  }
  const grids = bands.map((b) => bandGrid(b));
  if (tms !== undefined) {
    // Every zoom of the range is the set's (a pyramid's too, and a quadtree: shared/app/pyramid-grid.ts).
    const set = checkZoomRange(tms.id, tms.minZoom ?? tms.zoom, tms.zoom);
    for (const grid of grids) assertSameBody(grid.crs, set.crs);
    if (dstCrs !== undefined && dstCrs !== `EPSG:${set.crs.epsg}`) {
      throw new InvalidParamsError(
        `dst_crs ${dstCrs} is not the CRS of ${set.id} (EPSG:${set.crs.epsg}): leave dst_crs out, or make it agree`,
      );
    }
    let minCol = Infinity;
    let maxCol = -Infinity;
    let minRow = Infinity;
    let maxRow = -Infinity;
    const matrixWidth = tileMatrix(set, tms.zoom).matrixWidth;
    for (const grid of grids) {
      const range = tileRangeForGrid(set, tms.zoom, grid);
      if (range === undefined) continue;
      // A band's span across the antimeridian runs past the last column; another band's may start at column 0 on its
      // east side: shifted by the matrix width, it joins the first band's span rather than stretching over the world.
      const shift = Number.isFinite(minCol) ? closestShift(range.minCol, range.maxCol, minCol, maxCol, matrixWidth) : 0;
      minCol = Math.min(minCol, range.minCol + shift);
      maxCol = Math.max(maxCol, range.maxCol + shift);
      minRow = Math.min(minRow, range.minRow);
      maxRow = Math.max(maxRow, range.maxRow);
    }
    if (Number.isFinite(minCol)) {
      if (maxCol - minCol + 1 >= matrixWidth) {
        minCol = 0;
        maxCol = matrixWidth - 1;
      } else if (minCol < 0 || minCol >= matrixWidth) {
        const k = Math.floor(minCol / matrixWidth) * matrixWidth;
        minCol -= k;
        maxCol -= k;
      }
    }
    if (!Number.isFinite(minCol)) {
      throw new InvalidParamsError(
        `the scene's footprint does not fall on ${set.id} (its extent does not transform into EPSG:${set.crs.epsg})`,
      );
    }
    const tilePx = tiling.tilePx as 256 | 512;
    const origin = tmsTileGrid(set, tms.zoom, minCol, minRow, tilePx);
    return {
      crs: rasterCrsOf(set.crs),
      geoTransform: origin.geoTransform,
      width: (maxCol - minCol + 1) * tilePx,
      height: (maxRow - minRow + 1) * tilePx,
      tms: { id: set.id, zoom: tms.zoom, minCol, minRow },
    };
  }
  const crs = dstCrsOf(dstCrs as string);
  for (const grid of grids) assertSameBody(grid.crs, crs);
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  let res = Infinity;
  const period = longitudeAxis(crs)?.period;
  for (const grid of grids) {
    const s = suggestedOutput(grid, crs);
    // As for tile columns: a band across the antimeridian and one beside it on its east side make one box.
    const shift = period === undefined || !Number.isFinite(minX) ? 0 : closestShift(s.minX, s.maxX, minX, maxX, period);
    s.minX += shift;
    s.maxX += shift;
    minX = Math.min(minX, s.minX);
    minY = Math.min(minY, s.minY);
    maxX = Math.max(maxX, s.maxX);
    maxY = Math.max(maxY, s.maxY);
    res = Math.min(res, s.res);
  }
  const width = Math.max(1, Math.round((maxX - minX) / res));
  const height = Math.max(1, Math.round((maxY - minY) / res));
  return { crs: rasterCrsOf(crs), geoTransform: [minX, res, 0, maxY, 0, -res], width, height };
}

/**
 * `params.dst_crs` as a CRS: `EPSG:<n>`, or the canonical PROJ string of a CRS without a code (the CLI writes any WKT,
 * PROJJSON or PROJ string in that form, so one CRS is one job key). Another spelling of a definition is refused, naming
 * the canonical one.
 */
export function dstCrsOf(dstCrs: string): Crs {
  const crs = parseCrs(dstCrs);
  if (crs.id !== dstCrs) {
    throw new InvalidParamsError(
      `params.dst_crs ${JSON.stringify(dstCrs)} is not in canonical form; write it as ${JSON.stringify(crs.id)} (the CLI's --crs does this for any WKT, PROJJSON or PROJ string)`,
    );
  }
  return crs;
}

/** The multiple of `period` that moves [lo, hi] onto or next to [minX, maxX] (0, or one period either way). */
function closestShift(lo: number, hi: number, minX: number, maxX: number, period: number): number {
  let best = 0;
  let width = Math.max(hi, maxX) - Math.min(lo, minX);
  for (const k of [-1, 1]) {
    const w = Math.max(hi + k * period, maxX) - Math.min(lo + k * period, minX);
    if (w < width) {
      width = w;
      best = k * period;
    }
  }
  return best;
}

/** gdalwarp's suggested output (GDALSuggestedWarpOutput) of one grid in `crs`: the reprojected extent and a square pixel size. */
function suggestedOutput(grid: RasterGrid, crs: Crs): { minX: number; minY: number; maxX: number; maxY: number; res: number } {
  const b = footprintBounds(grid, crs);
  if (b === undefined || b.maxX <= b.minX || b.maxY <= b.minY || !Number.isFinite(b.minY) || !Number.isFinite(b.maxY)) {
    throw new InvalidParamsError(
      `the footprint of a band does not transform into ${crs.id} (or reaches a pole that CRS cannot hold, as Mercator cannot); ` +
        'choose another target CRS or a tile matrix set',
    );
  }
  const res = Math.hypot(b.maxX - b.minX, b.maxY - b.minY) / Math.hypot(grid.width, grid.height);
  return { ...b, res };
}

/** Pixel-corner points along the edges of the box (x0, y0)-(x1, y1) of `grid`, in the grid's CRS. */
function edgePoints(grid: RasterGrid, x0: number, y0: number, x1: number, y1: number, steps: number): [Float64Array, Float64Array] {
  const [gx, dx, , gy, , dy] = grid.geoTransform;
  const xs = new Float64Array(4 * (steps + 1) + 1);
  const ys = new Float64Array(4 * (steps + 1) + 1);
  let k = 0;
  const put = (px: number, py: number) => {
    xs[k] = gx + px * dx;
    ys[k] = gy + py * dy;
    k++;
  };
  for (let s = 0; s <= steps; s++) {
    const t = s / steps;
    put(x0 + t * (x1 - x0), y0);
    put(x0 + t * (x1 - x0), y1);
    put(x0, y0 + t * (y1 - y0));
    put(x1, y0 + t * (y1 - y0));
  }
  put((x0 + x1) / 2, (y0 + y1) / 2);
  return [xs, ys];
}

/** A band's raster as a warp grid. */
export function bandGrid(band: OpenedBand): RasterGrid {
  const r = band.raster;
  return { crs: crsOfRaster(r.crs, band.key), geoTransform: r.geoTransform, width: r.width, height: r.height };
}

/**
 * Issue 29: the CRS a STAC Item declares for each band's asset (`proj:code`, `proj:epsg`, `proj:wkt2`,
 * `proj:projjson`) against the CRS of the file itself (its GeoKeys), which is what Tessera computes with. An item
 * that says one CRS for a file in another is refused as it is (InvalidEventError, poison: the same bytes fail every
 * time), before any claim, naming both; so is a proj: field of the wrong type. A declaration Tessera cannot read (a
 * non-EPSG authority such as IAU, a method it does not model) cannot be checked: its bands are returned, for the
 * caller to log. Each file's header is read pinned to `versionOf(key)`, through the raster cache fan-out reads it from.
 */
export async function checkStacCrs(
  sources: ObjectStore,
  itemKey: string,
  resolved: Readonly<Record<string, ResolvedStacAsset>>,
  versionOf: (key: string) => string,
): Promise<string[]> {
  const unreadable: string[] = [];
  for (const [band, r] of Object.entries(resolved)) {
    const declared = r.crs;
    if (declared === undefined) continue;
    if ('problem' in declared) {
      throw new InvalidEventError(
        `STAC item ${JSON.stringify(itemKey)} has ${declared.problem}; fix the item's projection extension fields`,
      );
    }
    let crs: Crs;
    try {
      crs = parseCrs(declared.text);
    } catch {
      unreadable.push(band);
      continue;
    }
    const raster = await openSourceCached(sources, r.key, await sources.pin(r.key, versionOf(r.key)));
    const actual = crsOfRaster(raster.crs, r.key);
    if (!sameCrs(crs, actual)) {
      throw new InvalidEventError(
        `STAC item ${JSON.stringify(itemKey)} declares asset ${JSON.stringify(r.asset)} (band ${band}) in ${crs.id}, but its file ` +
          `${JSON.stringify(r.key)} is in ${actual.id}; fix the item's proj: fields or the file's georeferencing (gdal_edit.py -a_srs)`,
      );
    }
  }
  return unreadable;
}

/** The target as a warp grid. */
export function targetGrid(target: SceneTarget): RasterGrid {
  return { crs: crsOfRaster(target.crs, 'the target grid'), geoTransform: target.geoTransform, width: target.width, height: target.height };
}

/** The tile matrix set index of window (row, col) of a target on a tile matrix set. */
export function tmsTileOf(target: GridTarget | undefined, window: Pick<Window, 'row' | 'col'>): TmsTileIndex | undefined {
  const tms = target?.tms;
  if (tms === undefined) return undefined;
  // A grid across the antimeridian runs past the matrix's last column; the tiles there are its first columns.
  const width = tileMatrix(tileMatrixSet(tms.id), tms.zoom).matrixWidth;
  return { tms: tms.id, z: tms.zoom, x: (tms.minCol + window.col) % width, y: tms.minRow + window.row };
}

/**
 * The geotransform a tile's COG is written with: its window of the scene grid, except that a tile matrix set tile past
 * the antimeridian (a grid that runs past the last column) is placed where its index is, one matrix width west.
 */
export function tileGeoTransform(
  target: GridTarget | undefined,
  scene: GeoTransform,
  window: Pick<Window, 'row' | 'col' | 'x' | 'y'>,
): GeoTransform {
  const gt = windowGeoTransform(scene, window);
  const tms = target?.tms;
  if (tms === undefined) return gt;
  const m = tileMatrix(tileMatrixSet(tms.id), tms.zoom);
  if (tms.minCol + window.col < m.matrixWidth) return gt;
  return [gt[0] - m.matrixWidth * m.tileWidth * m.cellSize, gt[1], gt[2], gt[3], gt[4], gt[5]];
}

/**
 * True when a tile job's target is the one its pinned headers and parameters give: the key binds (row,
 * col) and the scene, the pixels come from the target, so a message carrying another one is poison.
 * Floating-point terms agree to 1e-9 of a pixel (the same computation on another runtime may round its
 * last bit differently); the message's own values are the ones used.
 */
export function sameTarget(a: SceneTarget | undefined, b: SceneTarget | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  const pixel = Math.abs(a.geoTransform[1]) || 1;
  const close = (x: number, y: number, scale: number) => Math.abs(x - y) <= 1e-9 * scale;
  return (
    a.width === b.width &&
    a.height === b.height &&
    a.crs.epsg === b.crs.epsg &&
    a.crs.wkt === b.crs.wkt &&
    a.geoTransform.every((v, i) => close(v, b.geoTransform[i] as number, i === 0 || i === 3 ? pixel : Math.max(Math.abs(v), 1e-300))) &&
    JSON.stringify(a.tms ?? null) === JSON.stringify(b.tms ?? null)
  );
}

/** The target a tile job carries as a scene target (its grid size and georeferencing). */
export function jobTarget(grid: { readonly width: number; readonly height: number; readonly target?: GridTarget | undefined }) {
  return grid.target === undefined ? undefined : ({ ...grid.target, width: grid.width, height: grid.height } satisfies SceneTarget);
}

export function assertJobTarget(jobKey: string, carried: SceneTarget | undefined, derived: SceneTarget | undefined): void {
  if (!sameTarget(carried, derived)) {
    throw new InvalidEventError(
      `tile job ${jobKey.slice(0, 16)}... carries a target grid (${describe(carried)}) that its pinned sources and parameters do not give (${describe(derived)}); the message is wrong (poison)`,
    );
  }
}

const describe = (t: SceneTarget | undefined) =>
  t === undefined
    ? 'the source grid'
    : `${t.width}x${t.height} ${t.crs.epsg !== undefined ? `EPSG:${t.crs.epsg}` : 'in a CRS without an EPSG code'} at [${t.geoTransform.join(', ')}]`;

/**
 * Kernel half-widths in source pixels, per method (the 4 x 4 of cubic reaches two pixels out, lanczos three); the
 * box methods read the pixels under the target pixel's footprint, one pixel out being enough at scale 1.
 */
const RADIUS: Readonly<Record<Resampling, number>> = {
  nearest: 1,
  bilinear: 1,
  cubic: 2,
  cubicspline: 2,
  lanczos: 3,
  average: 1,
  rms: 1,
  mode: 1,
  max: 1,
  min: 1,
  med: 1,
  q1: 1,
  q3: 1,
  sum: 1,
};

/**
 * The pixels of one band on the target window: read straight from the source where the band lies on the
 * target grid, else resampled from the part of the source the window needs. Invalid pixels (nodata, NaN,
 * masked, outside the source) are NaN.
 */
export async function readBandOnTarget(
  band: OpenedBand,
  target: SceneTarget,
  window: Window,
  resampling: Resampling,
): Promise<Float64Array> {
  const r = band.raster;
  const n = window.width * window.height;
  const mask = await r.mask();
  // A file's own mask, when it has one, says alone which pixels are valid, as GDAL's mask band does: on a lossy
  // JPEG the nodata value is no longer a reliable marker (valid dark pixels decode to it, the nodata area rings).
  const noData = mask === undefined ? r.noData : undefined;
  if (onGrid(r, target)) {
    const [values] = await r.readWindow(window, [band.index]);
    const [m] = mask === undefined ? [undefined] : await mask.readWindow(window, [1]);
    return validValues(values as ArrayLike<number>, noData, m, n);
  }
  const whole = targetGrid(target);
  const grid = bandGrid(band);
  const tile: RasterGrid = {
    crs: whole.crs,
    geoTransform: windowTransform(target.geoTransform, window),
    width: window.width,
    height: window.height,
  };
  const read = sourceWindowFor(grid, tile, resampling);
  if (read === undefined) return new Float64Array(n).fill(Number.NaN);
  const [values] = await r.readWindow(read, [band.index]);
  const [m] = mask === undefined ? [undefined] : await mask.readWindow(read, [1]);
  const warped = warpBand(
    {
      crs: grid.crs,
      geoTransform: windowTransform(r.geoTransform, read),
      width: read.width,
      height: read.height,
      values: values as ArrayLike<number>,
      noData,
      mask: m,
      dataType: r.dataType,
    },
    tile,
    resampling,
    {
      targetWindowOf: { grid: whole, x: window.x, y: window.y },
      sourceWindowOf: { width: r.width, height: r.height, x: read.x, y: read.y },
    },
  );
  const range = INTEGER_RANGE[r.dataType];
  // nearest copies valid source pixels: integers of the band's type, never the nodata value, which rounding keeps as
  // they are (a full pass over the tile for nothing: docs/benchmarks.md section 9).
  if (range !== undefined && resampling !== 'nearest') roundLikeGdal(warped.values, range, noData);
  return warped.values;
}

/** The value range of each integer data type: a warped band keeps its type, as gdalwarp's output does. */
const INTEGER_RANGE: Partial<Record<RasterSource['dataType'], readonly [number, number]>> = {
  uint8: [0, 255],
  uint16: [0, 65_535],
  int16: [-32_768, 32_767],
  uint32: [0, 4_294_967_295],
  int32: [-2_147_483_648, 2_147_483_647],
};

/**
 * A resampled integer band as gdalwarp writes it: rounded half up and clamped to the type, and a valid
 * value that would land on the nodata value moved one step off it (GDAL's GWKAvoidNoDataSingleBand), so
 * resampling never turns a valid pixel into nodata. Then the band math runs on those values, as it would
 * on `gdalwarp`'s output.
 */
function roundLikeGdal(values: Float64Array, [min, max]: readonly [number, number], noData: number | undefined): void {
  for (let k = 0; k < values.length; k++) {
    const v = values[k] as number;
    if (Number.isNaN(v)) continue;
    let r = roundToInteger(v, min, max);
    if (r === noData) r = r < max ? r + 1 : r - 1;
    values[k] = r;
  }
}

/** A band lies on the target grid when its CRS, geotransform and size are the target's: its pixels are the target's. */
function onGrid(r: RasterSource, t: SceneTarget): boolean {
  return (
    r.width === t.width &&
    r.height === t.height &&
    r.geoTransform.every((v, i) => v === t.geoTransform[i]) &&
    sameCrs(crsOfRaster(r.crs, 'a band'), crsOfRaster(t.crs, 'the target grid'))
  );
}

function windowTransform(gt: GeoTransform | readonly number[], w: { readonly x: number; readonly y: number }): GeoTransform {
  return [(gt[0] as number) + w.x * (gt[1] as number), gt[1] as number, 0, (gt[3] as number) + w.y * (gt[5] as number), 0, gt[5] as number];
}

/** The values as float64 with NaN wherever the pixel is nodata, NaN or masked (mask 0). */
function validValues(values: ArrayLike<number>, noData: number | undefined, mask: ArrayLike<number> | undefined, n: number): Float64Array {
  const out = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    const v = values[k] as number;
    out[k] = v === noData || (mask !== undefined && !mask[k]) ? Number.NaN : v;
  }
  return out;
}

/**
 * The source window a target tile needs: the bounding box of the tile's edges mapped into source pixels,
 * widened by the kernel (stretched when downsampling), clipped to the raster. Undefined when the tile
 * misses the source.
 */
export function sourceWindowFor(
  source: RasterGrid,
  tile: RasterGrid,
  resampling: Resampling,
): { x: number; y: number; width: number; height: number } | undefined {
  const [xs, ys] = edgePoints(tile, 0, 0, tile.width, tile.height, 16);
  crsTransform(tile.crs, source.crs)(xs, ys);
  const [sx0, sdx, , sy0, , sdy] = source.geoTransform;
  let minU = Infinity;
  let minV = Infinity;
  let maxU = -Infinity;
  let maxV = -Infinity;
  for (let k = 0; k < xs.length; k++) {
    const u = ((xs[k] as number) - sx0) / sdx;
    const v = ((ys[k] as number) - sy0) / sdy;
    if (!Number.isFinite(u) || !Number.isFinite(v)) continue;
    minU = Math.min(minU, u);
    maxU = Math.max(maxU, u);
    minV = Math.min(minV, v);
    maxV = Math.max(maxV, v);
  }
  if (!Number.isFinite(minU)) return undefined;
  // Downsampling stretches bilinear and cubic over 1/scale source pixels (shared/raster/warp.ts).
  const stretch = Math.max(1, (maxU - minU) / tile.width, (maxV - minV) / tile.height);
  const margin = Math.ceil(RADIUS[resampling] * stretch) + 2;
  const x0 = Math.max(0, Math.floor(minU) - margin);
  const y0 = Math.max(0, Math.floor(minV) - margin);
  const x1 = Math.min(source.width, Math.ceil(maxU) + margin);
  const y1 = Math.min(source.height, Math.ceil(maxV) + margin);
  if (x1 <= x0 || y1 <= y0) return undefined;
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
}
