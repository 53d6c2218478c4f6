import { canonicalJson } from '../domain/canonical-json.js';
import { codeVersion } from '../domain/code-version.js';
import { CodeVersionMismatchError, InvalidEventError, InvalidParamsError, TesseraError } from '../domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef, sceneKey, tileJobKey } from '../domain/job-key.js';
import { validateObjectKey } from '../domain/object-key.js';
import { type TileFormat, tileFormatOf } from '../domain/render-params.js';
import { type GridTarget, type TileGrid, tileGrid, type Window, windowAt } from '../domain/tile-grid.js';
import { tilingParams } from '../domain/tiling-params.js';
import type { JobMessage } from '../ports/job-queue.port.js';
import type { ReadPin } from '../ports/object-store.port.js';
import { levelGrid, pyramidOf } from './pyramid-grid.js';
import { tmsTileOf } from './scene-grid.js';

/** How a tile's output is written: create-only, or a repair under a known version. */
export type TileMode = { readonly kind: 'create' } | { readonly kind: 'overwrite'; readonly expectedVersion: string };

/** The scene's raster size: with `params.tile_px` it gives the grid, and the grid and (row, col) give the window. */
export interface JobGrid {
  readonly width: number;
  readonly height: number;
  /** The target grid's georeferencing, for a scene not tiled on one file's own pixels (shared/app/scene-grid.ts). */
  readonly target?: GridTarget | undefined;
}

/** The pins of a scene's reads: the anchor object's, and for a multi-file scene each band object's, by band name. */
export interface SceneReadPins {
  readonly pin?: ReadPin | undefined;
  readonly pins?: Readonly<Record<string, ReadPin>> | undefined;
}

/** One tile job on the wire. Everything in it is derivable from (source, params, code, grid, row, col). */
export interface TileJob {
  readonly v: 1;
  /** The build of the render path whose pixels the keys promise (shared/domain/code-version.ts). */
  readonly code: string;
  readonly sceneKey: string;
  readonly jobKey: string;
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  /** The raster size fan-out read from the source's header; bound to the source version at the read (render-tile.ts). */
  readonly grid: JobGrid;
  /**
   * Derived from `grid` and (row, col) (in a pyramid, from the grid of `zoom`): a message whose x, y, width or height
   * differ is poison.
   */
  readonly window: Window;
  /**
   * A zoom pyramid's tile (docs/pyramids.md): its zoom, from `min_zoom` to the scene grid's zoom; `window` is a window
   * of that zoom's grid (shared/app/pyramid-grid.ts) and the job key binds the zoom. Absent for one zoom's scene. A
   * tile below the highest zoom is built from its children's tiles, not from the source.
   */
  readonly zoom?: number | undefined;
  readonly outputKey: string;
  readonly mode: TileMode;
  /**
   * The read pin fan-out resolved for the source version of the key. Every
   * byte the job reads comes from that version, or the read throws
   * SourceChangedError. Not part of any key (its handle is an adapter detail);
   * absent in messages from before pinning, which read pinned to the token.
   */
  readonly pin?: ReadPin | undefined;
  /** A multi-file scene: the pin of each band's object, by band name (each for that asset's version token). */
  readonly pins?: Readonly<Record<string, ReadPin>> | undefined;
}

/** Largest message we accept; SQS allows 256 KiB, Azure queues 64 KiB. */
export const MAX_JOB_MESSAGE_BYTES = 48 * 1024;

export function makeTileJob(
  scene: string,
  source: SourceRef,
  params: ProcessingParams,
  grid: JobGrid,
  window: Window,
  mode: TileMode = { kind: 'create' },
  pin?: ReadPin | SceneReadPins | undefined,
  code: string = codeVersion(),
  zoom?: number | undefined,
): TileJob {
  const level = jobLevel(grid, params, zoom, mode);
  assertWindowOfGrid(level, params, window);
  const { pin: anchor, pins } = pin === undefined ? {} : 'version' in pin ? { pin: pin as ReadPin } : (pin as SceneReadPins);
  if (anchor !== undefined && anchor.version !== source.versionToken) {
    throw new InvalidEventError(`read pin names version ${anchor.version}, but the job key names ${source.versionToken}`);
  }
  for (const [band, p] of Object.entries(pins ?? {})) {
    const asset = source.assets?.[band];
    if (asset === undefined || p.version !== asset.versionToken) {
      throw new InvalidEventError(
        `read pin of band ${band} names version ${p.version}, but the job key names ${asset?.versionToken ?? 'no such band object'}`,
      );
    }
  }
  const copyPin = (p: ReadPin): ReadPin => (p.handle === undefined ? { version: p.version } : { version: p.version, handle: p.handle });
  return {
    v: 1,
    code,
    sceneKey: scene,
    jobKey: tileJobKey(scene, window, zoom),
    source,
    params,
    grid:
      grid.target === undefined
        ? { width: grid.width, height: grid.height }
        : { width: grid.width, height: grid.height, target: grid.target },
    window: { row: window.row, col: window.col, x: window.x, y: window.y, width: window.width, height: window.height },
    outputKey: outputKeys.tile(scene, window, tmsTileOf(level.target, window), tileFormatOf(params)),
    mode,
    ...(zoom === undefined ? {} : { zoom }),
    ...(anchor === undefined ? {} : { pin: copyPin(anchor) }),
    ...(pins === undefined ? {} : { pins: Object.fromEntries(Object.entries(pins).map(([b, p]) => [b, copyPin(p)])) }),
  };
}

/**
 * The grid a job's window is cut from: the scene grid, or in a pyramid the grid of the job's zoom. A pyramid's job
 * names its zoom and no other job does; a pyramid's tiles are never repaired in place (their parents are built from
 * them): poison otherwise.
 */
function jobLevel(grid: JobGrid, params: ProcessingParams, zoom: number | undefined, mode: TileMode): JobGrid {
  const tiling = tilingParams(params);
  const pyramid = pyramidOf(tiling);
  if (pyramid === undefined) {
    if (zoom !== undefined) throw new InvalidEventError(`a job of zoom ${zoom}, but the scene's parameters make one zoom (no min_zoom)`);
    return grid;
  }
  if (zoom === undefined || !Number.isInteger(zoom) || zoom < pyramid.minZoom || zoom > pyramid.maxZoom) {
    throw new InvalidEventError(
      `a tile job of a pyramid of zooms ${pyramid.minZoom}-${pyramid.maxZoom} names zoom ${JSON.stringify(zoom)}; each names its zoom`,
    );
  }
  if (grid.target?.tms?.zoom !== pyramid.maxZoom || grid.target.tms.id !== pyramid.tms) {
    throw new InvalidEventError(`a pyramid's tile job carries a grid that is not on ${pyramid.tms} zoom ${pyramid.maxZoom}`);
  }
  if (mode.kind === 'overwrite') {
    throw new InvalidParamsError(
      "a pyramid's tiles are not repaired in place (the tiles of the zooms below are built from them and would keep the old pixels): backfill with --policy new-key",
    );
  }
  return levelGrid(grid, tiling.tilePx, zoom);
}

/**
 * The output key of window (row, col) of a scene's grid: `{row}_{col}`, or `{tms}/{z}/{x}/{y}` on a tile matrix set,
 * ending in the extension of the scene's tile format (`tileFormatOf(params)`; `.tif` for COG tiles).
 */
export function tileOutputKey(
  scene: string,
  grid: Pick<JobGrid, 'target'>,
  window: Pick<Window, 'row' | 'col'>,
  format: TileFormat = 'COG',
): string {
  return outputKeys.tile(scene, window, tmsTileOf(grid.target, window), format);
}

/**
 * The window (row, col) of the grid, exactly. The job key binds only (row,
 * col) and the scene; the pixels come from x, y, width and height, so a job
 * whose geometry differs from what the grid gives would write other pixels
 * under the key. Poison: the message is wrong, no retry can mend it.
 */
function assertWindowOfGrid(grid: Pick<TileGrid, 'width' | 'height'>, params: ProcessingParams, window: Window): void {
  const tilePx = tilingParams(params).tilePx;
  const want = windowAt(tileGrid(grid.width, grid.height, tilePx), window.row, window.col);
  if (want.x !== window.x || want.y !== window.y || want.width !== window.width || want.height !== window.height) {
    throw new InvalidEventError(
      `window ${window.row}_${window.col} of the ${grid.width}x${grid.height} grid at ${tilePx} px is x=${want.x} y=${want.y} ${want.width}x${want.height}, ` +
        `but the job says x=${window.x} y=${window.y} ${window.width}x${window.height}; a window is derived from its grid, never taken from the message`,
    );
  }
}

/** The pin a job reads with: its own, or (a message from before pinning) the version token of its key. */
export function readPinOf(job: TileJob): ReadPin {
  return job.pin ?? { version: job.source.versionToken };
}

/** The pin of one band's reads: its object's in a multi-file scene, else the scene's own. */
export function bandPinOf(job: TileJob, band: string): ReadPin {
  const asset = job.source.assets?.[band];
  if (asset === undefined) return readPinOf(job);
  return job.pins?.[band] ?? { version: asset.versionToken };
}

export function toJobMessage(job: TileJob): JobMessage {
  return { jobKey: job.jobKey, body: canonicalJson(job) };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * Parse and verify a tile job message. A message that does not parse, or
 * whose keys do not match what its own fields derive to, is poison: it throws
 * InvalidEventError and must end in the dead-letter queue, never be retried.
 */
export function parseTileJob(body: string): TileJob {
  if (typeof body !== 'string') throw new InvalidEventError('tile job message body is not text');
  if (body.length > MAX_JOB_MESSAGE_BYTES)
    throw new InvalidEventError(`tile job message is ${body.length} bytes, more than ${MAX_JOB_MESSAGE_BYTES}`);
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (cause) {
    throw new InvalidEventError(`tile job message is not JSON: ${JSON.stringify(body.slice(0, 80))}`, { cause });
  }
  if (!isRecord(raw) || raw.v !== 1) throw new InvalidEventError('tile job message is not a version 1 tile job object');
  const { source, params, grid, window, mode, pin, zoom } = raw;
  if (zoom !== undefined && !isNat(zoom))
    throw new InvalidEventError('tile job message has an invalid zoom (a pyramid level: a whole number)');
  if (!isRecord(source) || typeof source.bucket !== 'string' || typeof source.key !== 'string' || typeof source.versionToken !== 'string') {
    throw new InvalidEventError('tile job message has no valid source {bucket, key, versionToken}');
  }
  if (!isRecord(params)) throw new InvalidEventError('tile job message has no params object');
  if (
    !isRecord(window) ||
    !isNat(window.row) ||
    !isNat(window.col) ||
    !isNat(window.x) ||
    !isNat(window.y) ||
    !isNat(window.width) ||
    !isNat(window.height) ||
    window.width === 0 ||
    window.height === 0
  ) {
    throw new InvalidEventError('tile job message has no valid window {row, col, x, y, width, height}');
  }
  // A tile job of another build (it has a source, params and a window) is refused as such before the fields
  // only this build's messages carry (older messages have no grid): the operator learns the real reason.
  const code = codeVersion();
  if (raw.code !== code) {
    throw new CodeVersionMismatchError(
      `tile job ${String(raw.jobKey).slice(0, 16)}...`,
      typeof raw.code === 'string' ? raw.code : undefined,
      code,
    );
  }
  if (!isRecord(grid) || !isNat(grid.width) || !isNat(grid.height)) {
    throw new InvalidEventError('tile job message has no valid grid {width, height} (the raster size its window is cut from)');
  }
  let parsedMode: TileMode;
  if (isRecord(mode) && mode.kind === 'create') parsedMode = { kind: 'create' };
  else if (isRecord(mode) && mode.kind === 'overwrite' && typeof mode.expectedVersion === 'string' && mode.expectedVersion !== '') {
    parsedMode = { kind: 'overwrite', expectedVersion: mode.expectedVersion };
  } else throw new InvalidEventError('tile job message has no valid mode');
  let parsedPin: ReadPin | undefined;
  if (pin !== undefined) {
    if (!isRecord(pin) || typeof pin.version !== 'string' || (pin.handle !== undefined && typeof pin.handle !== 'string')) {
      throw new InvalidEventError('tile job message has an invalid read pin {version, handle?}');
    }
    parsedPin = pin.handle === undefined ? { version: pin.version } : { version: pin.version, handle: pin.handle as string };
  }
  let parsedPins: Record<string, ReadPin> | undefined;
  if (raw.pins !== undefined) {
    if (!isRecord(raw.pins)) throw new InvalidEventError('tile job message has invalid band pins (band -> {version, handle?})');
    parsedPins = {};
    for (const [band, p] of Object.entries(raw.pins)) {
      if (!isRecord(p) || typeof p.version !== 'string' || (p.handle !== undefined && typeof p.handle !== 'string')) {
        throw new InvalidEventError(`tile job message has an invalid read pin for band ${JSON.stringify(band)}`);
      }
      parsedPins[band] = p.handle === undefined ? { version: p.version } : { version: p.version, handle: p.handle as string };
    }
  }
  let assets: Record<string, { key: string; versionToken: string }> | undefined;
  if (source.assets !== undefined) {
    if (!isRecord(source.assets)) throw new InvalidEventError('tile job message has invalid source assets (band -> {key, versionToken})');
    assets = {};
    for (const [band, a] of Object.entries(source.assets)) {
      if (!isRecord(a) || typeof a.key !== 'string' || typeof a.versionToken !== 'string') {
        throw new InvalidEventError(`tile job message has an invalid asset for band ${JSON.stringify(band)}`);
      }
      assets[band] = { key: a.key, versionToken: a.versionToken };
    }
  }
  const target = grid.target === undefined ? undefined : parseGridTarget(grid.target);
  const src: SourceRef = {
    bucket: source.bucket,
    key: source.key,
    versionToken: source.versionToken,
    ...(assets === undefined ? {} : { assets }),
  };
  const win: Window = { row: window.row, col: window.col, x: window.x, y: window.y, width: window.width, height: window.height };
  let expected: TileJob;
  try {
    validateObjectKey(src.key);
    const p = params as ProcessingParams;
    const jobGrid = { width: grid.width, height: grid.height, ...(target === undefined ? {} : { target }) };
    expected = makeTileJob(sceneKey(src, p, code), src, p, jobGrid, win, parsedMode, { pin: parsedPin, pins: parsedPins }, code, zoom);
  } catch (cause) {
    throw new InvalidEventError(
      `tile job message does not describe a valid job: ${cause instanceof TesseraError ? cause.message : String(cause)}`,
      {
        cause,
      },
    );
  }
  // The keys must be what the fields derive to: a tampered or stale message is poison.
  if (raw.sceneKey !== expected.sceneKey || raw.jobKey !== expected.jobKey || raw.outputKey !== expected.outputKey) {
    throw new InvalidEventError(
      `tile job message keys do not match its source, params and window (jobKey ${String(raw.jobKey).slice(0, 16)}...)`,
    );
  }
  return expected;
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

/** A message's target grid, checked for shape (the worker then checks it is the one its sources give). */
function parseGridTarget(raw: unknown): GridTarget {
  if (!isRecord(raw) || !isRecord(raw.crs) || !Array.isArray(raw.geoTransform) || raw.geoTransform.length !== 6) {
    throw new InvalidEventError('tile job message has an invalid target grid {crs, geoTransform[6], tms?}');
  }
  const { epsg, wkt } = raw.crs;
  if ((epsg !== undefined && !(isInt(epsg) && epsg > 0)) || (wkt !== undefined && typeof wkt !== 'string')) {
    throw new InvalidEventError('tile job message has an invalid target CRS {epsg?, wkt?}');
  }
  if (!raw.geoTransform.every((v) => typeof v === 'number' && Number.isFinite(v))) {
    throw new InvalidEventError('tile job message has a target geotransform with a non-finite term');
  }
  let tms: GridTarget['tms'];
  if (raw.tms !== undefined) {
    const t = raw.tms;
    if (!isRecord(t) || typeof t.id !== 'string' || !isNat(t.zoom) || !isNat(t.minCol) || !isNat(t.minRow)) {
      throw new InvalidEventError('tile job message has an invalid tile matrix set origin {id, zoom, minCol, minRow}');
    }
    tms = { id: t.id, zoom: t.zoom, minCol: t.minCol, minRow: t.minRow };
  }
  const gt = raw.geoTransform as number[];
  return {
    crs: { ...(epsg === undefined ? {} : { epsg: epsg as number }), ...(wkt === undefined ? {} : { wkt: wkt as string }) },
    geoTransform: [gt[0] as number, gt[1] as number, gt[2] as number, gt[3] as number, gt[4] as number, gt[5] as number],
    ...(tms === undefined ? {} : { tms }),
  };
}
