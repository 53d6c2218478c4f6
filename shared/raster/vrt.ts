import { InvalidParamsError } from '../domain/errors.js';
import type { GeoTransform, RasterCrs } from './georeferencing.js';
import type { RasterWindow } from './geotiff-source.js';
import { formatNoData } from './tiff-format.js';
import { escapeXml } from './xml.js';

/** GDAL data type names a VRT band may declare. */
export type GdalDataTypeName = 'Byte' | 'UInt16' | 'Int16' | 'UInt32' | 'Int32' | 'Float32' | 'Float64';

/**
 * One tile of the mosaic: where it is (`href`: relative to the VRT unless it is
 * absolute, e.g. `/vsis3/bucket/key` or `https://...`; `relativePath`: always
 * relative) and which window of the mosaic it fills.
 */
export type VrtSource =
  | { readonly href: string; readonly window: RasterWindow; readonly band?: number | undefined }
  | { readonly relativePath: string; readonly window: RasterWindow; readonly band?: number | undefined };

export interface BuildVrtOptions {
  readonly width: number;
  readonly height: number;
  readonly crs: RasterCrs;
  readonly geoTransform: GeoTransform;
  readonly dataType: GdalDataTypeName;
  /** The bands' nodata; absent for a rendered mosaic, whose alpha band says which pixels are empty. */
  readonly noData?: number | undefined;
  /**
   * A rendered mosaic (PNG, WebP or JPEG tiles): one band per entry, its GDAL colour interpretation (`Gray`, `Red`,
   * `Green`, `Blue`, `Alpha`), each source's band of the same number. Absent: one band, the tiles' band 1.
   */
  readonly colorInterp?: readonly string[] | undefined;
  /** The sources' block size: lets GDAL plan reads without opening every tile. */
  readonly blockSize?: number | undefined;
  readonly sources: readonly VrtSource[];
}

/** Absolute for GDAL: a root path, a /vsi path, a URL, or a Windows drive path. */
function isAbsolute(path: string): boolean {
  return path.startsWith('/') || /^[a-z][a-z0-9+.-]*:\/\//i.test(path) || /^[a-z]:[\\/]/i.test(path);
}

function num(v: number): string {
  // Shortest round-trip representation: GDAL's CPLAtof reads it back exactly.
  return formatNoData(v);
}

/**
 * A GDAL VRT mosaic: one Float32 (or other) band whose ComplexSources place
 * each tile at its window, exactly as `gdalbuildvrt` would. Sources are
 * listed row-major (by window row, then column) whatever order they come in,
 * so the same grid always gives the same bytes. Everything is XML-escaped.
 *
 * @example
 * buildVrt({ width: 1024, height: 1024, crs: { epsg: 32631 }, geoTransform: [500000, 10, 0, 5700000, 0, -10],
 *   dataType: 'Float32', noData: -9999, blockSize: 512,
 *   sources: [{ href: 'tiles/0_0.tif', window: { x: 0, y: 0, width: 512, height: 512 } }, ...] });
 */
export function buildVrt(opts: BuildVrtOptions): string {
  const { width, height, geoTransform: gt } = opts;
  if (!Number.isInteger(width) || !Number.isInteger(height) || width <= 0 || height <= 0) {
    throw new InvalidParamsError(`buildVrt: size must be positive integers, got ${width}x${height}`);
  }
  if (gt.length !== 6 || !gt.every(Number.isFinite)) throw new InvalidParamsError(`buildVrt: geotransform [${gt.join(', ')}] is invalid`);
  if (opts.sources.length === 0) throw new InvalidParamsError('buildVrt: a mosaic needs at least one source');
  let srs: string;
  if (opts.crs.epsg !== undefined) srs = `EPSG:${opts.crs.epsg}`;
  else if (opts.crs.wkt !== undefined) srs = opts.crs.wkt;
  else throw new InvalidParamsError('buildVrt: the CRS needs an EPSG code or a WKT');
  const bs = opts.blockSize;
  if (bs !== undefined && (!Number.isInteger(bs) || bs <= 0))
    throw new InvalidParamsError(`buildVrt: blockSize must be a positive integer, got ${bs}`);

  const ordered = opts.sources
    .map((s, i) => ({ s, i }))
    .sort((a, b) => a.s.window.y - b.s.window.y || a.s.window.x - b.s.window.x || a.i - b.i)
    .map(({ s }) => s);

  const noData = opts.noData === undefined ? undefined : num(opts.noData);
  const lines: string[] = [
    `<VRTDataset rasterXSize="${width}" rasterYSize="${height}">`,
    `  <SRS>${escapeXml(srs)}</SRS>`,
    `  <GeoTransform>${gt.map(num).join(', ')}</GeoTransform>`,
  ];
  const bands = opts.colorInterp ?? [undefined];
  for (const [b, interp] of bands.entries()) {
    lines.push(
      `  <VRTRasterBand dataType="${opts.dataType}" band="${b + 1}"${bs === undefined ? '' : ` blockXSize="${bs}" blockYSize="${bs}"`}>`,
      ...(interp === undefined ? [] : [`    <ColorInterp>${escapeXml(interp)}</ColorInterp>`]),
      ...(noData === undefined ? [] : [`    <NoDataValue>${noData}</NoDataValue>`]),
    );
    bandSources(lines, ordered, opts, b + 1, noData);
    lines.push('  </VRTRasterBand>');
  }
  lines.push('</VRTDataset>', '');
  return lines.join('\n');
}

/** The ComplexSources of band `band`: each tile's band of that number (or the source's own `band`) at its window. */
function bandSources(
  lines: string[],
  ordered: readonly VrtSource[],
  opts: BuildVrtOptions,
  band: number,
  noData: string | undefined,
): void {
  const { width, height } = opts;
  const bs = opts.blockSize;
  for (const source of ordered) {
    const w = source.window;
    if (![w.x, w.y, w.width, w.height].every(Number.isInteger) || w.x < 0 || w.y < 0 || w.width <= 0 || w.height <= 0) {
      throw new InvalidParamsError(`buildVrt: window ${JSON.stringify(w)} is invalid`);
    }
    if (w.x + w.width > width || w.y + w.height > height) {
      throw new InvalidParamsError(`buildVrt: window ${JSON.stringify(w)} falls outside the ${width}x${height} mosaic`);
    }
    let path: string;
    let relative: boolean;
    if ('href' in source) {
      path = source.href;
      relative = !isAbsolute(path);
    } else {
      path = source.relativePath;
      relative = true;
      if (isAbsolute(path)) throw new InvalidParamsError(`buildVrt: relativePath ${JSON.stringify(path)} is absolute; pass it as href`);
    }
    if (path === '') throw new InvalidParamsError('buildVrt: a source path is empty');
    lines.push(
      '    <ComplexSource>',
      `      <SourceFilename relativeToVRT="${relative ? 1 : 0}">${escapeXml(path)}</SourceFilename>`,
      `      <SourceBand>${opts.colorInterp === undefined ? (source.band ?? 1) : band}</SourceBand>`,
    );
    if (bs !== undefined) {
      lines.push(
        `      <SourceProperties RasterXSize="${w.width}" RasterYSize="${w.height}" DataType="${opts.dataType}" BlockXSize="${bs}" BlockYSize="${bs}" />`,
      );
    }
    lines.push(
      `      <SrcRect xOff="0" yOff="0" xSize="${w.width}" ySize="${w.height}" />`,
      `      <DstRect xOff="${w.x}" yOff="${w.y}" xSize="${w.width}" ySize="${w.height}" />`,
      ...(noData === undefined ? [] : [`      <NODATA>${noData}</NODATA>`]),
      '    </ComplexSource>',
    );
  }
}
