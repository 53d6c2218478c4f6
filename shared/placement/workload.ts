import { InvalidParamsError } from '../domain/errors.js';
import { CLOUDS, type Cloud } from './catalog/index.js';

/**
 * The workload `tessera choose` prices: how many scenes a month, how large,
 * cut into how many tiles, each taking how long, and where the data (and,
 * optionally, the outputs) live. Flags and a workload file (YAML/JSON) fill
 * the same fields; {@link normalizeWorkload} checks them and fills defaults.
 */

/** Sample types a scene's bands may have, with their size in bytes. */
export const DTYPE_BYTES = {
  uint8: 1,
  int8: 1,
  uint16: 2,
  int16: 2,
  uint32: 4,
  int32: 4,
  float32: 4,
  float64: 8,
} as const satisfies Record<string, number>;
export type Dtype = keyof typeof DTYPE_BYTES;

/** The scene as a raster grid; its size in bytes is width x height x bands x the dtype's size. */
export interface SceneGrid {
  readonly width: number;
  readonly height: number;
  readonly bands: number;
  readonly dtype: Dtype;
}

/** Where something lives, for pricing: a cloud and one of its regions. */
export interface PricedLocation {
  readonly cloud: Cloud;
  readonly region: string;
}

export interface WorkloadInput {
  readonly scenesPerMonth?: number | undefined;
  /** Scene size in bytes; or give {@link grid}. */
  readonly sceneBytes?: number | undefined;
  readonly grid?: SceneGrid | undefined;
  /** Tiles per scene; or give {@link tilePx} with a grid. */
  readonly tiles?: number | undefined;
  readonly tilePx?: number | undefined;
  readonly duplicateRate?: number | undefined;
  /** How long tiles and mosaic are kept, days. */
  readonly retentionDays?: number | undefined;
  /** Where the outputs must end up, when not in the compute region. */
  readonly outputs?: PricedLocation | undefined;
  /** Apply the clouds' monthly free tiers (off by default: they are per account and shared). */
  readonly freeTier?: boolean | undefined;
}

/** A workload after validation, every quantity derived. */
export interface Workload {
  readonly scenesPerMonth: number;
  readonly sceneBytes: number;
  /** How the scene size was given. */
  readonly sceneFrom: 'size' | 'grid' | 'default';
  readonly grid: SceneGrid | undefined;
  readonly tiles: number;
  readonly duplicateRate: number;
  readonly retentionDays: number;
  readonly outputs: PricedLocation | undefined;
  readonly freeTier: boolean;
  /** Bytes of tiles written per scene: one float32 band per pixel (the expression's result), uncompressed. */
  readonly outputBytesPerScene: number;
  /** Bytes of the mosaic (VRT) and scene manifest per scene. */
  readonly mosaicBytesPerScene: number;
  /** Range GETs one tile job makes on the source: the header read plus the window's body ranges. */
  readonly rangesPerTile: number;
}

/**
 * The `tessera run` demo scene: 5120 x 5120 pixels, two uint16 bands
 * (B04, B08), 256 px tiles (400 of them). The default workload is one such
 * scene a month, so a bare `tessera choose <region> --runtime --memory`
 * still prints costs.
 */
export const DEFAULT_GRID: SceneGrid = { width: 5120, height: 5120, bands: 2, dtype: 'uint16' };
export const DEFAULT_TILE_PX = 256;
export const DEFAULT_DUPLICATE_RATE = 0.01;
export const DEFAULT_RETENTION_DAYS = 30;
/** A month, for retention and for the free tiers counted per day. */
export const DAYS_PER_MONTH = 30;
/** The bands assumed when only a scene size is given: the demo scene's two uint16 bands. */
const ASSUMED_BANDS = 2;
const ASSUMED_SAMPLE_BYTES = 2;
/** Bytes of the output per pixel: one float32 band. */
const OUTPUT_SAMPLE_BYTES = 4;
/** The VRT names each tile in a few hundred bytes of XML; the manifest is a few KB. */
const MOSAIC_BYTES_PER_TILE = 400;
const MANIFEST_BYTES = 4096;
/**
 * Range GETs: the reader fetches a 64 KiB header, then the window's blocks,
 * coalescing blocks at most 16 KiB apart into ranges of up to 32 MiB
 * (shared/raster/geotiff-source.ts). A window's rows are not contiguous in
 * the file, so half that cap is assumed as the mean range: body ranges per
 * tile = ceil(bytes per tile / 16 MiB), at least 1.
 */
export const MEAN_RANGE_BYTES = 16 * 1024 * 1024;

const GIB = 1024 ** 3;

/** Bytes per unit; `GB` is read as the clouds bill it, 2^30 bytes (as --memory reads MB and GB). */
const BYTE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: GIB,
  gb: GIB,
  gib: GIB,
  t: 1024 ** 4,
  tb: 1024 ** 4,
  tib: 1024 ** 4,
};

/**
 * Parse a data size: bytes (`10737418240`) or number+unit (`10GB`, `512MiB`,
 * `1.5TB`). GB is 2^30 bytes, as the clouds bill transfer and storage.
 *
 * @throws InvalidParamsError naming the input and the accepted forms.
 * @example parseBytes('10GB') // 10737418240
 */
export function parseBytes(input: string, what = 'scene size'): number {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/.exec(input.trim().toLowerCase());
  const factor = m ? BYTE_UNITS[m[2] ?? ''] : undefined;
  if (!m || factor === undefined) {
    throw new InvalidParamsError(
      `${what} ${JSON.stringify(input)} is not a size; write it as bytes or with units (512MB, 10GB, 1.5TB; 1 GB = 2^30 bytes)`,
    );
  }
  const bytes = Math.ceil(Number(m[1]) * factor);
  if (!Number.isFinite(bytes) || bytes <= 0) throw new InvalidParamsError(`${what} ${JSON.stringify(input)} must be more than zero`);
  return bytes;
}

/**
 * Parse `CLOUD:REGION` (`aws:eu-west-1`, `gcp:europe-west1`, `azure:westeurope`).
 *
 * @throws InvalidParamsError for another shape or an unknown cloud.
 */
export function parseLocation(input: string, flag: string): PricedLocation {
  const m = /^\s*([a-z]+)\s*:\s*([a-z0-9-]+)\s*$/i.exec(input);
  const cloud = m?.[1]?.toLowerCase();
  if (!m || cloud === undefined || !(CLOUDS as readonly string[]).includes(cloud)) {
    throw new InvalidParamsError(
      `${flag} takes CLOUD:REGION with CLOUD one of ${CLOUDS.join(', ')} (e.g. aws:eu-west-1), got ${JSON.stringify(input)}`,
    );
  }
  return { cloud: cloud as Cloud, region: (m[2] ?? '').toLowerCase() };
}

function wholeAtLeast(problems: string[], name: string, value: number | undefined, min: number): void {
  if (value !== undefined && (!Number.isInteger(value) || value < min))
    problems.push(`${name} must be a whole number >= ${min}, got ${value}`);
}

/**
 * Check a workload and derive its quantities.
 *
 * @throws InvalidParamsError listing every problem at once.
 */
export function normalizeWorkload(input: WorkloadInput = {}): Workload {
  const problems: string[] = [];
  wholeAtLeast(problems, 'scenes per month', input.scenesPerMonth, 1);
  wholeAtLeast(problems, 'tiles', input.tiles, 1);
  wholeAtLeast(problems, 'tile size (px)', input.tilePx, 1);
  if (input.sceneBytes !== undefined && (!Number.isFinite(input.sceneBytes) || input.sceneBytes <= 0))
    problems.push(`scene size must be more than zero bytes, got ${input.sceneBytes}`);
  if (input.sceneBytes !== undefined && input.grid !== undefined)
    problems.push('give the scene size or the grid (width, height, bands, dtype), not both');
  if (input.tiles !== undefined && input.tilePx !== undefined) problems.push('give the tile count or the tile size, not both');
  if (input.tilePx !== undefined && input.grid === undefined && input.sceneBytes !== undefined)
    problems.push('a tile size needs the grid (width and height) to count tiles; give --tiles with --scene-size');
  const grid = input.grid;
  if (grid !== undefined) {
    wholeAtLeast(problems, 'width', grid.width, 1);
    wholeAtLeast(problems, 'height', grid.height, 1);
    wholeAtLeast(problems, 'bands', grid.bands, 1);
    if (!Object.hasOwn(DTYPE_BYTES, grid.dtype))
      problems.push(`dtype must be one of ${Object.keys(DTYPE_BYTES).join(', ')}, got ${JSON.stringify(grid.dtype)}`);
  }
  const duplicateRate = input.duplicateRate ?? DEFAULT_DUPLICATE_RATE;
  if (!Number.isFinite(duplicateRate) || duplicateRate < 0 || duplicateRate > 1)
    problems.push(`duplicate rate must be within 0..1, got ${duplicateRate}`);
  const retentionDays = input.retentionDays ?? DEFAULT_RETENTION_DAYS;
  if (!Number.isFinite(retentionDays) || retentionDays < 0) problems.push(`retention must be zero or more days, got ${retentionDays}`);
  if (problems.length > 0) throw new InvalidParamsError(problems.join('; '));

  const sceneFrom = grid !== undefined ? 'grid' : input.sceneBytes !== undefined ? 'size' : 'default';
  const usedGrid = grid ?? (sceneFrom === 'default' ? DEFAULT_GRID : undefined);
  const sceneBytes = usedGrid
    ? usedGrid.width * usedGrid.height * usedGrid.bands * DTYPE_BYTES[usedGrid.dtype]
    : (input.sceneBytes as number);
  const tilePx = input.tilePx ?? (input.tiles === undefined && usedGrid ? DEFAULT_TILE_PX : undefined);
  const tiles =
    input.tiles ??
    (usedGrid && tilePx !== undefined ? Math.ceil(usedGrid.width / tilePx) * Math.ceil(usedGrid.height / tilePx) : undefined);
  if (tiles === undefined) throw new InvalidParamsError('say how many tiles a scene makes: --tiles N, or the grid with --tile-px');
  // Pixels: from the grid, or from the size with the demo scene's two uint16 bands.
  const pixels = usedGrid ? usedGrid.width * usedGrid.height : sceneBytes / (ASSUMED_BANDS * ASSUMED_SAMPLE_BYTES);
  return {
    scenesPerMonth: input.scenesPerMonth ?? 1,
    sceneBytes,
    sceneFrom,
    grid: usedGrid,
    tiles,
    duplicateRate,
    retentionDays,
    outputs: input.outputs,
    freeTier: input.freeTier ?? false,
    outputBytesPerScene: pixels * OUTPUT_SAMPLE_BYTES,
    mosaicBytesPerScene: tiles * MOSAIC_BYTES_PER_TILE + MANIFEST_BYTES,
    rangesPerTile: 1 + Math.max(1, Math.ceil(sceneBytes / tiles / MEAN_RANGE_BYTES)),
  };
}
