import { InvalidEventError, InvalidParamsError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import type { TileFormat } from '../domain/render-params.js';
import { type GridTarget, MAX_WINDOWS, type TileGrid, tileGrid, type Window, windowAt, windows } from '../domain/tile-grid.js';
import type { TilingParams } from '../domain/tiling-params.js';
import { checkZoomRange, tileMatrix, tileMatrixSet, tileGrid as tmsTileGrid } from '../raster/tile-matrix-set.js';
import { tmsTileOf } from './scene-grid.js';

/**
 * The levels of a zoom pyramid (issue 26 section 1, docs/pyramids.md): pure arithmetic on the scene grid, so fan-out,
 * every tile job and the mosaic agree on every level's tiles without reading anything.
 *
 * A pyramid scene's grid is its highest zoom's (the scene target on the tile matrix set, as one zoom's scene has). The
 * grid of every lower zoom z follows from it alone: its tile range is the max zoom's range halved (max - z) times,
 * each tile the parent of the four tiles under it; a span across the antimeridian stays one span (a column past the
 * matrix's last is its index modulo the matrix width, as at the highest zoom: shared/app/scene-grid.ts).
 */

/** A pyramid: the zooms `minZoom` to `maxZoom` of one tile matrix set. */
export interface Pyramid {
  readonly tms: string;
  readonly minZoom: number;
  readonly maxZoom: number;
}

/** The pyramid the parameters ask for (`min_zoom` below `zoom`), or undefined for one zoom or no tile matrix set. */
export function pyramidOf(tiling: TilingParams): Pyramid | undefined {
  const tms = tiling.target.tms;
  if (tms?.minZoom === undefined) return undefined;
  return { tms: tms.id, minZoom: tms.minZoom, maxZoom: tms.zoom };
}

/**
 * The zooms of the parameters' tile matrix set, checked against the set (a zoom it does not have, a pair of zooms that
 * is not a quadtree) before any claim: InvalidParamsError naming the set's zooms. Nothing to check without a set.
 */
export function checkZooms(tiling: TilingParams): void {
  const tms = tiling.target.tms;
  if (tms !== undefined) checkZoomRange(tms.id, tms.minZoom ?? tms.zoom, tms.zoom);
}

/** The most tiles one scene may have over all its zooms: as many as one grid may have windows (tile-grid.ts). */
export const MAX_SCENE_TILES = MAX_WINDOWS;

/** A scene grid on a tile matrix set: its size and where it starts in the matrix of its zoom. */
type TmsGrid = Pick<TileGrid, 'width' | 'height'> & { readonly target?: GridTarget | undefined };

/** The column and row span of zoom `zoom` under a grid on a tile matrix set: the highest zoom's, halved per zoom below. */
function spanAt(grid: TmsGrid, tilePx: number, zoom: number) {
  const tms = grid.target?.tms;
  if (tms === undefined) throw new InvalidEventError('a pyramid level needs a scene grid on a tile matrix set');
  if (!Number.isInteger(zoom) || zoom > tms.zoom || zoom < 0) {
    throw new InvalidEventError(`zoom ${zoom} is not a level of a pyramid whose highest zoom is ${tms.zoom}`);
  }
  if (grid.width % tilePx !== 0 || grid.height % tilePx !== 0) {
    throw new InvalidEventError(`a ${grid.width}x${grid.height} grid is not whole ${tilePx} px tiles of ${tms.id}`);
  }
  const shift = 2 ** (tms.zoom - zoom);
  const maxCol = tms.minCol + grid.width / tilePx - 1;
  const maxRow = tms.minRow + grid.height / tilePx - 1;
  const minRow = Math.floor(tms.minRow / shift);
  const rows = Math.floor(maxRow / shift) - minRow + 1;
  const matrixWidth = tileMatrix(tileMatrixSet(tms.id), zoom).matrixWidth;
  const minCol = Math.floor(tms.minCol / shift);
  const cols = Math.floor(maxCol / shift) - minCol + 1;
  // A span across the antimeridian that reaches round the whole matrix at this zoom is the whole row of tiles, as
  // sceneTarget makes it at the highest zoom: never a column twice.
  if (cols >= matrixWidth) return { tms, minCol: 0, minRow, cols: matrixWidth, rows, matrixWidth };
  return { tms, minCol, minRow, cols, rows, matrixWidth };
}

/** The window offset of matrix column `col` in a span from `minCol` (columns wrap round a matrix `width` wide). */
const offsetIn = (col: number, minCol: number, width: number): number => (((col - minCol) % width) + width) % width;

/**
 * The grid of zoom `zoom` of a pyramid whose highest zoom is the scene grid's: window (row, col) is tile
 * (minCol + col, minRow + row) of that zoom, georeferenced as the tile matrix set places it. The highest zoom's is the
 * scene grid itself.
 */
export function levelGrid(grid: TmsGrid, tilePx: number, zoom: number): TileGrid & { readonly target: GridTarget } {
  const { tms, minCol, minRow, cols, rows } = spanAt(grid, tilePx, zoom);
  const target = grid.target as GridTarget;
  if (zoom === tms.zoom) return { ...tileGrid(grid.width, grid.height, tilePx), target };
  const origin = tmsTileGrid(tileMatrixSet(tms.id), zoom, minCol, minRow, tilePx as 256 | 512);
  return {
    ...tileGrid(cols * tilePx, rows * tilePx, tilePx),
    target: { crs: target.crs, geoTransform: origin.geoTransform as GridTarget['geoTransform'], tms: { id: tms.id, zoom, minCol, minRow } },
  };
}

/** Tiles per zoom of a pyramid (or one zoom) over a scene grid on a tile matrix set, highest zoom first. */
export function tilesPerZoom(grid: TmsGrid, tilePx: number, minZoom: number): { readonly zoom: number; readonly tiles: number }[] {
  const top = grid.target?.tms?.zoom;
  if (top === undefined) return [];
  const out: { zoom: number; tiles: number }[] = [];
  for (let z = top; z >= minZoom; z--) {
    const s = spanAt(grid, tilePx, z);
    out.push({ zoom: z, tiles: s.cols * s.rows });
  }
  return out;
}

/**
 * Refuse a scene on a tile matrix set whose zooms make more than `limit` tiles, before any claim: from the scene's
 * target alone (no grid is built, so a range far too deep is refused with its count rather than a grid error). Names
 * the count, the limit and the highest zoom that fits.
 */
export function assertSceneTileCount(target: TmsGrid, tiling: TilingParams, limit: number = MAX_SCENE_TILES): void {
  const tms = tiling.target.tms;
  if (tms === undefined || target.target?.tms === undefined) return;
  const minZoom = tms.minZoom ?? tms.zoom;
  const per = tilesPerZoom(target, tiling.tilePx, minZoom);
  const total = per.reduce((n, l) => n + l.tiles, 0);
  if (total <= limit) return;
  // Halving from the highest zoom bounds each lower zoom's own footprint from above: "at most".
  let fits: { zoom: number; tiles: number } | undefined;
  for (let z = tms.zoom - 1; z >= minZoom && fits === undefined; z--) {
    const n = per.filter((l) => l.zoom <= z).reduce((sum, l) => sum + l.tiles, 0);
    if (n <= limit) fits = { zoom: z, tiles: n };
  }
  const asked = tms.minZoom === undefined ? `zoom ${tms.zoom}` : `zooms ${minZoom}-${tms.zoom}`;
  const shown = per
    .slice(0, 3)
    .map((l) => `zoom ${l.zoom}: ${l.tiles.toLocaleString('en-US')}`)
    .join(', ');
  const fix =
    fits === undefined
      ? 'tile a smaller area or fewer zooms'
      : `lower the highest zoom: --zoom ${tms.minZoom === undefined ? fits.zoom : `${minZoom}-${fits.zoom}`} makes at most ${fits.tiles.toLocaleString('en-US')}`;
  throw new InvalidParamsError(
    `${asked} of ${tms.id} make ${total.toLocaleString('en-US')} tiles for this scene (${shown}${per.length > 3 ? ', ...' : ''}), ` +
      `more than the ${limit.toLocaleString('en-US')} one scene may have; ${fix}`,
  );
}

/**
 * A pyramid's scene as its tile keys need it: the scene key, its grid (the highest zoom's), the tile size and the tile
 * format (its keys end in the format's extension: shared/domain/render-params.ts).
 */
export interface PyramidScene {
  readonly scene: string;
  readonly grid: TmsGrid;
  readonly tilePx: number;
  readonly format: TileFormat;
}

/** A scene's {@link PyramidScene} from its key, grid and checked parameters. */
export const pyramidScene = (scene: string, grid: TmsGrid, tiling: Pick<TilingParams, 'tilePx' | 'format'>): PyramidScene => ({
  scene,
  grid,
  tilePx: tiling.tilePx,
  format: tiling.format,
});

/** One tile of a pyramid level: its zoom, its window of that level's grid, its output key. */
export interface LevelTile {
  readonly zoom: number;
  readonly window: Window;
  readonly key: string;
}

/** Every tile of zoom `zoom` of a scene's pyramid, row by row, with its output key. */
export function* levelTiles(p: PyramidScene, zoom: number): Generator<LevelTile> {
  const level = levelGrid(p.grid, p.tilePx, zoom);
  for (const window of windows(level))
    yield { zoom, window, key: outputKeys.tile(p.scene, window, tmsTileOf(level.target, window), p.format) };
}

/** A child of a tile: its window in the zoom above and output key, and which quarter of its parent it fills. */
export interface ChildTile extends LevelTile {
  /** 0 or 1: the west or east half of the parent. */
  readonly dx: number;
  /** 0 or 1: the north or south half of the parent. */
  readonly dy: number;
}

/**
 * The children of window (row, col) of zoom `zoom`: the tiles (2x..2x+1, 2y..2y+1) of zoom + 1 that lie in the scene
 * (a parent on the scene's edge has fewer than four; the missing quarters are nodata).
 */
export function childrenOf(p: PyramidScene, zoom: number, window: Pick<Window, 'row' | 'col'>): ChildTile[] {
  const parent = spanAt(p.grid, p.tilePx, zoom);
  const below = spanAt(p.grid, p.tilePx, zoom + 1);
  const child = levelGrid(p.grid, p.tilePx, zoom + 1);
  const out: ChildTile[] = [];
  for (const dy of [0, 1]) {
    for (const dx of [0, 1]) {
      const col = offsetIn(2 * ((parent.minCol + window.col) % parent.matrixWidth) + dx, below.minCol, below.matrixWidth);
      const row = 2 * (parent.minRow + window.row) + dy - below.minRow;
      if (col < 0 || row < 0 || col >= child.cols || row >= child.rows) continue;
      const w = windowAt(child, row, col);
      out.push({ zoom: zoom + 1, window: w, key: outputKeys.tile(p.scene, w, tmsTileOf(child.target, w), p.format), dx, dy });
    }
  }
  return out;
}

/** The window of zoom `zoom - 1` whose tile holds window (row, col) of zoom `zoom` (undefined at zoom 0). */
export function parentWindowOf(grid: TmsGrid, tilePx: number, zoom: number, window: Pick<Window, 'row' | 'col'>): Window | undefined {
  if (zoom <= 0) return undefined;
  const here = spanAt(grid, tilePx, zoom);
  const above = spanAt(grid, tilePx, zoom - 1);
  const col = offsetIn(Math.floor(((here.minCol + window.col) % here.matrixWidth) / 2), above.minCol, above.matrixWidth);
  return windowAt(levelGrid(grid, tilePx, zoom - 1), Math.floor((here.minRow + window.row) / 2) - above.minRow, col);
}

/** Every tile of every zoom below the highest of a scene's pyramid (none for one zoom), highest zoom first. */
export function* lowerLevelTiles(scene: string, grid: TmsGrid, tiling: TilingParams): Generator<LevelTile> {
  const pyramid = pyramidOf(tiling);
  if (pyramid === undefined) return;
  const p = pyramidScene(scene, grid, tiling);
  for (let z = pyramid.maxZoom - 1; z >= pyramid.minZoom; z--) yield* levelTiles(p, z);
}
