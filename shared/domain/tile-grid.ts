import { InvalidGridError } from './errors.js';

/** One window of the grid, in source pixel coordinates. Edge windows are clipped. */
export interface Window {
  readonly row: number;
  readonly col: number;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

export interface TileGrid {
  readonly width: number;
  readonly height: number;
  readonly tilePx: number;
  readonly rows: number;
  readonly cols: number;
  readonly count: number;
  /** Where the grid lies, when it is not the single source file's own grid (see {@link GridTarget}). */
  readonly target?: GridTarget | undefined;
}

/**
 * The georeferencing of a scene's target grid, when the tiles are not cut from one source file's own
 * pixels: a CRS (`dst_crs`), a tile matrix set's tiles (`tms`, `zoom`), or several band files resampled
 * onto the finest. Fan-out computes it from the pinned headers and the parameters (shared/app/scene-grid.ts),
 * so it is a function of the scene key; every tile job carries it and the worker checks it again.
 */
export interface GridTarget {
  readonly crs: { readonly epsg?: number | undefined; readonly wkt?: string | undefined };
  /** GDAL order, north-up: `[originX, pixelWidth, 0, originY, 0, -pixelHeight]`. */
  readonly geoTransform: readonly [number, number, number, number, number, number];
  /** On a tile matrix set: window (row, col) is tile (x = minCol + col, y = minRow + row) of zoom `zoom`. */
  readonly tms?: { readonly id: string; readonly zoom: number; readonly minCol: number; readonly minRow: number } | undefined;
}

/** Largest raster side accepted (a 10 GB scene is ~50,000 px a side). */
export const MAX_RASTER_SIDE = 1_000_000;
export const MIN_TILE_PX = 16;
export const MAX_TILE_PX = 8192;
/** More windows than this is a mistake in the tile size, not a job. */
export const MAX_WINDOWS = 1_000_000;

function positiveInteger(name: string, value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new InvalidGridError(`${name} must be a positive integer, got ${JSON.stringify(value)}`);
  }
  if (value > max) throw new InvalidGridError(`${name} ${value} is larger than the maximum ${max}`);
  return value;
}

/**
 * A W x H raster at tile size t gives ceil(W/t) x ceil(H/t) windows.
 *
 * @example
 * tileGrid(1000, 600, 512) // { rows: 2, cols: 2, count: 4, ... }
 */
export function tileGrid(width: number, height: number, tilePx: number): TileGrid {
  positiveInteger('raster width', width, MAX_RASTER_SIDE);
  positiveInteger('raster height', height, MAX_RASTER_SIDE);
  positiveInteger('tile size', tilePx, MAX_TILE_PX);
  if (tilePx < MIN_TILE_PX) throw new InvalidGridError(`tile size ${tilePx} is below the minimum ${MIN_TILE_PX}`);
  const cols = Math.ceil(width / tilePx);
  const rows = Math.ceil(height / tilePx);
  const count = rows * cols;
  if (count > MAX_WINDOWS) {
    throw new InvalidGridError(
      `${width}x${height} at ${tilePx} px gives ${count} windows, more than ${MAX_WINDOWS}; use a larger tile size`,
    );
  }
  return { width, height, tilePx, rows, cols, count };
}

export function windowAt(grid: TileGrid, row: number, col: number): Window {
  if (!Number.isInteger(row) || !Number.isInteger(col) || row < 0 || col < 0 || row >= grid.rows || col >= grid.cols) {
    throw new InvalidGridError(`window ${row}_${col} is outside the ${grid.rows}x${grid.cols} grid`);
  }
  const x = col * grid.tilePx;
  const y = row * grid.tilePx;
  return { row, col, x, y, width: Math.min(grid.tilePx, grid.width - x), height: Math.min(grid.tilePx, grid.height - y) };
}

/** Row-major iteration over every window. */
export function* windows(grid: TileGrid): Generator<Window> {
  for (let row = 0; row < grid.rows; row++) {
    for (let col = 0; col < grid.cols; col++) yield windowAt(grid, row, col);
  }
}
