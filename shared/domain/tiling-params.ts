import { InvalidParamsError } from './errors.js';
import type { ProcessingParams } from './job-key.js';
import { RENDER_OUTPUT_FIELDS, type RenderParams, renderParams, TILE_FORMATS, type TileFormat } from './render-params.js';
import { MAX_TILE_PX, MIN_TILE_PX } from './tile-grid.js';

/** The typed view of the processing parameters the tiler understands. */
export interface TilingParams {
  readonly tilePx: number;
  readonly expression: string;
  /** Band name in the expression -> 1-based band index in the source. */
  readonly bands: Readonly<Record<string, number>>;
  readonly noData: number;
  readonly blockSize: number;
  /** How the COG's blocks are compressed: `output.compression`. */
  readonly compression: OutputCompression;
  /** The codec's level, `output.level` (DEFLATE 1-9, ZSTD 1-22; default {@link DEFAULT_LEVELS}); 0 for NONE. */
  readonly level: number;
  /** The grid the tiles are cut from: the source's own, a CRS's, or a tile matrix set's. */
  readonly target: TargetParams;
  /** `mosaic`: the VRT mosaic only (default), or also one COG mosaic (`cog`) or one PMTiles archive (`pmtiles`) of the tiles. */
  readonly mosaic: MosaicKind;
  /**
   * `unscale`: each band's scale and offset are applied (value * scale + offset) before the band math, so the
   * expression sees physical values (reflectance, not DN), as `gdal_translate -unscale` and rio-tiler's `unscale`.
   */
  readonly unscale: boolean;
  /**
   * `scale_offset`: per band name, the scale and offset `unscale` applies instead of the file's own (GDAL
   * metadata): the STAC path fills it from the Item's `raster:bands`, which describe the asset. Empty unless
   * `unscale` is set.
   */
  readonly scaleOffset: Readonly<Record<string, ScaleOffset>>;
  /** `output.format`: COG (default), or PNG, WEBP or JPEG rendered for web maps (shared/domain/render-params.ts). */
  readonly format: TileFormat;
  /** How a rendered format's pixels are made (rescale, colormap, background); undefined for COG. */
  readonly render: RenderParams | undefined;
}

/** A band's linear map from stored values to physical ones: physical = stored * scale + offset. */
export interface ScaleOffset {
  readonly scale: number;
  readonly offset: number;
}

/**
 * The mosaics a scene gets: always the VRT over its tiles; `cog` adds one Cloud Optimized GeoTIFF of them all; `pmtiles`
 * adds one PMTiles archive of a rendered scene's tiles on WebMercatorQuad, every zoom (docs/web-maps.md, "PMTiles archive").
 */
export const MOSAIC_KINDS = ['vrt', 'cog', 'pmtiles'] as const;
export type MosaicKind = (typeof MOSAIC_KINDS)[number];

/**
 * How each band is resampled onto the target grid: every method of gdalwarp's `-r`, under its name
 * (shared/raster/warp.ts follows GDAL 3.6's warp kernel for each; docs/reprojection.md).
 */
export const RESAMPLINGS = [
  'nearest',
  'bilinear',
  'cubic',
  'cubicspline',
  'lanczos',
  'average',
  'rms',
  'mode',
  'max',
  'min',
  'med',
  'q1',
  'q3',
  'sum',
] as const;
export type Resampling = (typeof RESAMPLINGS)[number];

/**
 * The target grid, as the parameters name it (`dst_crs`, `resampling`, `tms`, `zoom`, the design notes'
 * names). Only the shape is checked here: the app layer resolves the codes against the bundled EPSG set
 * and the tile matrix sets (shared/app/scene-grid.ts), which the domain does not import.
 */
export interface TargetParams {
  /**
   * `EPSG:<n>`, normalised to upper case, or the canonical PROJ string of a CRS without an EPSG code (`+proj=... +no_defs`,
   * as shared/raster/crs.ts writes it; the app layer refuses any other spelling); absent: the source grid's CRS (or the
   * tile matrix set's).
   */
  readonly dstCrs?: string | undefined;
  /** Default `nearest`, gdalwarp's default. */
  readonly resampling: Resampling;
  /**
   * A tile matrix set and zoom: tiles are that set's tiles, keyed `{tms}/{z}/{x}/{y}`. With `minZoom` (`min_zoom`), a
   * pyramid: every zoom from `minZoom` up to `zoom` (docs/pyramids.md); `zoom` stays the scene grid's (the mosaics').
   */
  readonly tms?: { readonly id: string; readonly zoom: number; readonly minZoom?: number | undefined } | undefined;
}

/**
 * What the writer can honour, and nothing else: every `output` field is part
 * of the job key, so a value the writer would ignore gives a key that promises
 * bytes it never writes. Such a value is refused here, before any claim.
 */
export const OUTPUT_FORMATS = TILE_FORMATS;
/** Tiles are band math results: float32, the type NaN-free nodata and ratios need. */
export const OUTPUT_DTYPES = ['float32'] as const;
export const OUTPUT_COMPRESSIONS = ['DEFLATE', 'ZSTD', 'NONE'] as const;
export type OutputCompression = (typeof OUTPUT_COMPRESSIONS)[number];
/**
 * Each codec's levels and the one used when `output.level` is absent: GDAL's
 * defaults (ZLEVEL 6, ZSTD_LEVEL 9), so a tile and `gdal_translate -co
 * COMPRESS=<codec>` agree on what "the default" means. Absent and explicit
 * default give the same bytes under different keys, as `compression` does.
 */
export const OUTPUT_LEVELS: Readonly<Record<Exclude<OutputCompression, 'NONE'>, { min: number; max: number; default: number }>> = {
  DEFLATE: { min: 1, max: 9, default: 6 },
  ZSTD: { min: 1, max: 22, default: 9 },
};
const OUTPUT_FIELDS = ['format', 'dtype', 'nodata', 'compression', 'level', 'blocksize', ...RENDER_OUTPUT_FIELDS] as const;
const EPSG_CODE = /^EPSG:\d{4,6}$/i;
/** The shape of a canonical PROJ string (`+key=value` tokens, single spaces); its content is checked where CRSs are known. */
const PROJ_STRING = /^\+proj=[a-z]+(?: \+[A-Za-z_0-9]+(?:=[^\s=]+)?)*$/;
const TMS_ID = /^[A-Za-z][A-Za-z0-9]{0,63}$/;
/** Tile sizes a tile matrix set's tiles come in: the registry's 256, or 512 at half the cell size. */
export const TMS_TILE_PX = [256, 512] as const;

const BAND_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,31}$/;

/**
 * Validate the tiler's parameters. Integers must be integers (a `tile_px` of
 * 512.5 or "512" is refused, not rounded), so the job key and the work agree.
 */
export function tilingParams(params: ProcessingParams): TilingParams {
  const fail = (msg: string): never => {
    throw new InvalidParamsError(`params: ${msg}`);
  };
  const int = (name: string, v: unknown, min: number, max: number): number => {
    if (typeof v !== 'number' || !Number.isInteger(v)) fail(`${name} must be an integer, got ${JSON.stringify(v)}`);
    if ((v as number) < min || (v as number) > max) fail(`${name} must be between ${min} and ${max}, got ${v}`);
    return v as number;
  };
  const tilePx = int('tile_px', params.tile_px, MIN_TILE_PX, MAX_TILE_PX);
  const expression = params.expression;
  if (typeof expression !== 'string' || expression.trim() === '') fail('expression must be a non-empty string');
  const bandsRaw = params.bands;
  if (typeof bandsRaw !== 'object' || bandsRaw === null || Array.isArray(bandsRaw))
    fail('bands must map band names to 1-based band indexes, e.g. {"B04":1,"B08":2}');
  const bands: Record<string, number> = {};
  for (const [name, index] of Object.entries(bandsRaw as Record<string, unknown>)) {
    if (!BAND_NAME.test(name)) fail(`band name ${JSON.stringify(name)} must be an identifier (letters, digits, _)`);
    bands[name] = int(`bands.${name}`, index, 1, 65_535);
  }
  if (Object.keys(bands).length === 0) fail('bands must name at least one band');
  const output = (params.output ?? {}) as Record<string, unknown>;
  if (typeof output !== 'object' || output === null || Array.isArray(output)) fail('output must be an object');
  for (const name of Object.keys(output)) {
    if (!(OUTPUT_FIELDS as readonly string[]).includes(name))
      fail(`output.${name} is not a setting the writer knows (it knows ${OUTPUT_FIELDS.join(', ')}); remove it`);
  }
  const oneOf = <T extends string>(name: string, v: unknown, allowed: readonly T[]): T => {
    if (!(allowed as readonly unknown[]).includes(v))
      fail(`output.${name} ${JSON.stringify(v)} is not supported; the writer supports ${allowed.map((a) => JSON.stringify(a)).join(', ')}`);
    return v as T;
  };
  const format = oneOf('format', output.format ?? 'COG', OUTPUT_FORMATS);
  // A rendered format's rescale, colormap and background, or their absence on a COG (render-params.ts).
  const render = renderParams(format, output, fail);
  oneOf('dtype', output.dtype ?? 'float32', OUTPUT_DTYPES);
  const compression = oneOf('compression', output.compression ?? 'DEFLATE', OUTPUT_COMPRESSIONS);
  let level = 0;
  if (compression === 'NONE') {
    // A level NONE would ignore gives a key that promises a difference the bytes never show.
    if (output.level !== undefined) fail('output.level has no meaning without compression; remove it or choose DEFLATE or ZSTD');
  } else {
    const range = OUTPUT_LEVELS[compression];
    level = int(`output.level (${compression})`, output.level ?? range.default, range.min, range.max);
  }
  const noData = outputNoData(output.nodata, fail);
  const blockSize = int('output.blocksize', output.blocksize ?? 256, 16, 4096);
  if (blockSize % 16 !== 0) fail(`output.blocksize must be a multiple of 16 (TIFF tiles), got ${blockSize}`);
  const target = targetParams(params, tilePx, fail);
  const mosaic = params.mosaic ?? 'vrt';
  if (!(MOSAIC_KINDS as readonly unknown[]).includes(mosaic))
    fail(
      `mosaic ${JSON.stringify(mosaic)} is not supported; use "vrt" (the VRT mosaic), "cog" (also one COG mosaic) or "pmtiles" (also one PMTiles archive of rendered tiles)`,
    );
  if (mosaic === 'cog' && render !== undefined)
    fail(
      `mosaic "cog" is built from COG tiles of the band math; ${format} tiles are rendered images: use mosaic "vrt" (the default), or output.format COG`,
    );
  if (mosaic === 'pmtiles' && render === undefined)
    fail(
      'mosaic "pmtiles" is an archive of rendered map tiles: add output.format PNG, WEBP or JPEG with output.rescale (--format png --rescale MIN,MAX), or use mosaic "cog" for COG tiles',
    );
  if (mosaic === 'pmtiles' && target.tms?.id !== 'WebMercatorQuad')
    fail(
      `mosaic "pmtiles" holds tiles by zoom/x/y of WebMercatorQuad, the web map's grid; ${target.tms === undefined ? 'these tiles are on no tile matrix set' : `these are on ${target.tms.id}`}: add tms WebMercatorQuad and a zoom (--tms WebMercatorQuad --zoom 8-14), or use mosaic "vrt"`,
    );
  const { unscale, scaleOffset } = unscaleParams(params, bands, fail);
  return {
    tilePx,
    expression: expression as string,
    bands,
    noData,
    blockSize,
    compression,
    level,
    target,
    mosaic: mosaic as MosaicKind,
    unscale,
    scaleOffset,
    format,
    render,
  };
}

/**
 * `output.nodata` (the CLI's `--dst-nodata`): a finite number, or the string "nan" for NaN (JSON has no NaN),
 * as gdalwarp's `-dstnodata` takes it. Default -9999.
 */
function outputNoData(value: unknown, fail: (msg: string) => never): number {
  if (value === undefined) return -9999;
  if (typeof value === 'string' && value.trim().toLowerCase() === 'nan') return Number.NaN;
  if (typeof value !== 'number' || !Number.isFinite(value))
    return fail(`output.nodata must be a finite number or "nan", got ${JSON.stringify(value)}`);
  return value;
}

/** `unscale` (a boolean, default false) and `scale_offset` ({band: {scale, offset}}, only with `unscale`). */
function unscaleParams(
  params: ProcessingParams,
  bands: Readonly<Record<string, number>>,
  fail: (msg: string) => never,
): { unscale: boolean; scaleOffset: Record<string, ScaleOffset> } {
  const { unscale, scale_offset: raw } = params;
  if (unscale !== undefined && typeof unscale !== 'boolean') fail(`unscale must be true or false, got ${JSON.stringify(unscale)}`);
  const scaleOffset: Record<string, ScaleOffset> = {};
  if (raw === undefined) return { unscale: unscale === true, scaleOffset };
  // Without unscale the values would never be applied: a key that promises a difference the bytes never show.
  if (unscale !== true) fail('scale_offset has no effect without unscale: set "unscale": true, or remove scale_offset');
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    fail('scale_offset must map band names to {"scale": number, "offset": number}, e.g. {"B04":{"scale":0.0001,"offset":-0.1}}');
  for (const [name, v] of Object.entries(raw as Record<string, unknown>)) {
    if (!Object.hasOwn(bands, name))
      fail(`scale_offset names band ${JSON.stringify(name)}, which bands does not; name only bands it reads`);
    const entry = v as Record<string, unknown> | null;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      fail(`scale_offset.${name} must be {"scale": number, "offset": number}`);
    const extra = Object.keys(entry as object).filter((k) => k !== 'scale' && k !== 'offset');
    if (extra.length > 0) fail(`scale_offset.${name} has ${extra.join(', ')}; it takes only scale and offset`);
    const { scale, offset } = entry as { scale?: unknown; offset?: unknown };
    if (typeof scale !== 'number' || !Number.isFinite(scale) || scale === 0)
      fail(`scale_offset.${name}.scale must be a finite non-zero number, got ${JSON.stringify(scale)}`);
    if (typeof offset !== 'number' || !Number.isFinite(offset))
      fail(`scale_offset.${name}.offset must be a finite number, got ${JSON.stringify(offset)}`);
    scaleOffset[name] = { scale: scale as number, offset: offset as number };
  }
  return { unscale: true, scaleOffset };
}

function targetParams(params: ProcessingParams, tilePx: number, fail: (msg: string) => never): TargetParams {
  const { dst_crs: dstCrs, resampling, tms, zoom, min_zoom: minZoom } = params;
  if (
    dstCrs !== undefined &&
    (typeof dstCrs !== 'string' || !(EPSG_CODE.test(dstCrs) || (dstCrs.length <= 1000 && PROJ_STRING.test(dstCrs))))
  )
    fail(
      `dst_crs must be an EPSG code written EPSG:<number> (e.g. "EPSG:3857") or a CRS's canonical PROJ string (tessera run --crs writes any WKT, PROJJSON or PROJ string so), got ${JSON.stringify(dstCrs)}`,
    );
  if (resampling !== undefined && !(RESAMPLINGS as readonly unknown[]).includes(resampling))
    fail(`resampling ${JSON.stringify(resampling)} is not supported; use one of ${RESAMPLINGS.join(', ')}`);
  if ((tms === undefined) !== (zoom === undefined)) fail('tms and zoom go together: name a tile matrix set and a zoom level, or neither');
  let set: TargetParams['tms'];
  if (tms !== undefined) {
    if (typeof tms !== 'string' || !TMS_ID.test(tms))
      fail(`tms must be a tile matrix set id such as "WebMercatorQuad", got ${JSON.stringify(tms)}`);
    if (typeof zoom !== 'number' || !Number.isInteger(zoom) || zoom < 0 || zoom > 30)
      fail(`zoom must be an integer from 0 to 30, got ${JSON.stringify(zoom)}`);
    // A tile of a set has the set's size (or twice it): any other tile_px would be a key for tiles that are never made.
    if (!(TMS_TILE_PX as readonly number[]).includes(tilePx))
      fail(`tile_px must be 256 or 512 on a tile matrix set (the set's 256 px tiles, or 512 px at half the cell size), got ${tilePx}`);
    set = { id: tms as string, zoom: zoom as number, ...pyramidMinZoom(minZoom, zoom as number, fail) };
  } else if (minZoom !== undefined) fail('min_zoom starts a zoom range of a tile matrix set: give tms and zoom too, or remove it');
  return {
    ...(dstCrs === undefined ? {} : { dstCrs: EPSG_CODE.test(dstCrs as string) ? (dstCrs as string).toUpperCase() : (dstCrs as string) }),
    resampling: (resampling as Resampling | undefined) ?? 'nearest',
    ...(set === undefined ? {} : { tms: set }),
  };
}

/**
 * `min_zoom` (the CLI's `--zoom MIN-MAX`): the lowest zoom of a pyramid whose highest is `zoom`. Absent for one zoom;
 * equal to `zoom` is refused, so one zoom has one key (leave it out), as is a range upside down.
 */
function pyramidMinZoom(minZoom: unknown, zoom: number, fail: (msg: string) => never): { minZoom?: number } {
  if (minZoom === undefined) return {};
  if (typeof minZoom !== 'number' || !Number.isInteger(minZoom) || minZoom < 0 || minZoom > 30)
    fail(`min_zoom must be an integer from 0 to 30, got ${JSON.stringify(minZoom)}`);
  if ((minZoom as number) > zoom)
    fail(
      `min_zoom ${minZoom} is above zoom ${zoom}: a range runs from min_zoom up to zoom; swap them (min_zoom ${zoom}, zoom ${minZoom}: the CLI's --zoom ${zoom}-${minZoom})`,
    );
  if (minZoom === zoom) fail(`min_zoom ${minZoom} equals zoom: one zoom is written without min_zoom (--zoom ${zoom}), so it has one key`);
  return { minZoom: minZoom as number };
}

/**
 * A zoom or a zoom range as a user writes it (`tessera run --zoom 14` or `--zoom 8-14`, stack config `tessera:zoom`):
 * the parameters' `zoom` and, for a range, `min_zoom`. A range of one zoom (`14-14`) is that zoom, so it has one key.
 * `name` is how the caller's user spells the option, for the message.
 *
 * @example
 * zoomRangeParams('8-14') // { zoom: 14, min_zoom: 8 }
 */
export function zoomRangeParams(text: string, name = '--zoom'): { zoom: number; min_zoom?: number } {
  const m = /^\s*(\d{1,2})\s*(?:-\s*(\d{1,2})\s*)?$/.exec(text);
  if (!m)
    throw new InvalidParamsError(
      `${name} must be a zoom or a range MIN-MAX of whole numbers from 0 to 30, e.g. 14 or 8-14; got ${JSON.stringify(text)}`,
    );
  const lo = Number(m[1]);
  const hi = m[2] === undefined ? lo : Number(m[2]);
  if (lo > 30 || hi > 30)
    throw new InvalidParamsError(`${name} ${text}: zooms run from 0 to 30 (a tile matrix set's own range is checked against the set)`);
  if (lo > hi) throw new InvalidParamsError(`${name} ${text}: the lower zoom comes first, e.g. ${name} ${hi}-${lo}`);
  return lo === hi ? { zoom: hi } : { zoom: hi, min_zoom: lo };
}
