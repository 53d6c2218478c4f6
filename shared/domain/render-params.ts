/**
 * Rendered tiles for web maps (docs/web-maps.md, "Rendered tiles"): the `output` settings that turn a tile's
 * float32 band math into an 8-bit PNG, WebP or JPEG image instead of a COG, as TiTiler's `rescale` and
 * `colormap` and `gdal raster tile`'s formats do. Part of the processing parameters, so of every job key: a
 * PNG tile and a COG tile of the same window are two jobs with two keys.
 *
 * The domain checks the shape (a name from the list, a range, a colour); shared/raster/image-encoder.ts renders
 * and encodes, with the colormap tables of shared/raster/colormaps.ts.
 */

/** Every tile format: the COG of the band math (default, for analysis), or an image rendered for a web map. */
export const TILE_FORMATS = ['COG', 'PNG', 'WEBP', 'JPEG'] as const;
export type TileFormat = (typeof TILE_FORMATS)[number];
/** The formats rendered to 8-bit pixels by `rescale` (and a `colormap`). */
export type RenderedFormat = Exclude<TileFormat, 'COG'>;

/** What each format's tile object is called and served as: the key's extension and the stores' Content-Type. */
export const TILE_FORMAT_FILES: Readonly<Record<TileFormat, { readonly extension: string; readonly contentType: string }>> = {
  COG: { extension: 'tif', contentType: 'image/tiff; application=geotiff; profile=cloud-optimized' },
  PNG: { extension: 'png', contentType: 'image/png' },
  WEBP: { extension: 'webp', contentType: 'image/webp' },
  JPEG: { extension: 'jpg', contentType: 'image/jpeg' },
};

/**
 * The colormaps `output.colormap` (`--colormap`) names: matplotlib's perceptually uniform maps (CC0) and the
 * ColorBrewer schemes RdYlGn (red to green, NDVI's usual) and Greys (white to black). Their tables are in
 * shared/raster/colormaps.generated.ts, written by scripts/generate-colormaps.ts from the cited sources.
 */
export const COLORMAP_NAMES = ['viridis', 'plasma', 'magma', 'inferno', 'rdylgn', 'greys'] as const;
export type ColormapName = (typeof COLORMAP_NAMES)[number];

/** The `output` fields only a rendered format reads, and those only the COG writer reads. */
export const RENDER_OUTPUT_FIELDS = ['rescale', 'colormap', 'background'] as const;
export const COG_OUTPUT_FIELDS = ['dtype', 'compression', 'level', 'blocksize'] as const;

/** How a rendered tile is made from the band math. */
export interface RenderParams {
  readonly format: RenderedFormat;
  /**
   * `output.rescale` ([min, max], `--rescale MIN,MAX`): the values mapped onto the 256 levels, as matplotlib's
   * Normalize and colormap lookup do: level = floor((v - min) / (max - min) * 256), clamped to 0..255 (so min is
   * level 0 and max level 255; values outside the range take the end levels).
   */
  readonly rescale: readonly [number, number];
  /** `output.colormap`: the level picks the map's colour (RGB); without one the level is a grey value. */
  readonly colormap?: ColormapName | undefined;
  /**
   * `output.background` ([r, g, b], JPEG only): the colour nodata and masked pixels are painted, JPEG having no
   * transparency. PNG and WebP make those pixels transparent (alpha 0) instead.
   */
  readonly background?: readonly [number, number, number] | undefined;
}

/** The file extension of a format's tiles (`tif`, `png`, `webp`, `jpg`). */
export const tileExtension = (format: TileFormat): string => TILE_FORMAT_FILES[format].extension;

/** The Content-Type a format's tiles are written with on every store. */
export const tileContentType = (format: TileFormat): string => TILE_FORMAT_FILES[format].contentType;

/**
 * The tile format the processing parameters ask for, read leniently (`output.format`, default COG): for building
 * a key from parameters that {@link renderParams} checks elsewhere (tilingParams refuses an unknown format before
 * any key is used).
 */
export function tileFormatOf(params: Readonly<Record<string, unknown>>): TileFormat {
  const output = params.output;
  const format = typeof output === 'object' && output !== null ? (output as Record<string, unknown>).format : undefined;
  return (TILE_FORMATS as readonly unknown[]).includes(format) ? (format as TileFormat) : 'COG';
}

/**
 * Check the rendered-format settings of `output` (its format already known to be one of {@link TILE_FORMATS}).
 * Undefined for a COG, which takes none of them. Every refusal names the fix.
 */
export function renderParams(
  format: TileFormat,
  output: Readonly<Record<string, unknown>>,
  fail: (msg: string) => never,
): RenderParams | undefined {
  if (format === 'COG') {
    const extra = RENDER_OUTPUT_FIELDS.filter((f) => output[f] !== undefined);
    if (extra.length > 0)
      fail(
        `output.${extra.join(', output.')} ${extra.length > 1 ? 'apply' : 'applies'} to rendered tiles only (output.format PNG, WEBP or JPEG; --format png|webp|jpeg); a COG keeps the band math's float32 values: remove ${extra.length > 1 ? 'them' : 'it'} or choose a rendered format`,
      );
    return undefined;
  }
  const cogOnly = COG_OUTPUT_FIELDS.filter((f) => output[f] !== undefined);
  if (cogOnly.length > 0)
    fail(
      `output.${cogOnly.join(', output.')} ${cogOnly.length > 1 ? 'are settings' : 'is a setting'} of COG tiles; a ${format} tile is 8-bit pixels encoded as ${format}: remove ${cogOnly.length > 1 ? 'them' : 'it'} (--compression and --level apply to --format cog only)`,
    );
  const rescale = rescaleOf(format, output.rescale, fail);
  const colormap = colormapOf(output.colormap, fail);
  let background: RenderParams['background'];
  if (format === 'JPEG') {
    if (output.background === undefined)
      fail(
        'output.format JPEG has no transparency, so nodata and masked pixels would be painted black (the black border of JPEG map tiles): use PNG or WEBP (--format png|webp), whose nodata is transparent, or name the colour those pixels get with output.background [r, g, b] (--background R,G,B, e.g. 255,255,255)',
      );
    background = backgroundOf(output.background, fail);
  } else if (output.background !== undefined) {
    fail(`output.background is for JPEG tiles; a ${format} tile's nodata and masked pixels are transparent: remove it`);
  }
  return {
    format,
    rescale,
    ...(colormap === undefined ? {} : { colormap }),
    ...(background === undefined ? {} : { background }),
  };
}

function rescaleOf(format: RenderedFormat, raw: unknown, fail: (msg: string) => never): readonly [number, number] {
  if (raw === undefined)
    fail(
      `output.format ${format} renders the band math, a float32 band, to 8-bit pixels, and needs the range to map: give output.rescale [min, max] (--rescale MIN,MAX, e.g. --rescale=-1,1 for NDVI, --rescale 0,255 for 8-bit data, --rescale 0,10000 for reflectance as DN)`,
    );
  if (!Array.isArray(raw) || raw.length !== 2 || !raw.every((v) => typeof v === 'number' && Number.isFinite(v)))
    fail(`output.rescale must be [min, max], two finite numbers (--rescale MIN,MAX), got ${JSON.stringify(raw)}`);
  const [min, max] = raw as [number, number];
  if (!(min < max))
    fail(`output.rescale min ${min} must be less than max ${max} (--rescale MIN,MAX, e.g. --rescale=-1,1); swap them or widen the range`);
  return [min, max];
}

function colormapOf(raw: unknown, fail: (msg: string) => never): ColormapName | undefined {
  if (raw === undefined) return undefined;
  if (!(COLORMAP_NAMES as readonly unknown[]).includes(raw))
    fail(
      `output.colormap ${JSON.stringify(raw)} is not a known colormap; use one of ${COLORMAP_NAMES.join(', ')} (--colormap NAME), or none for grey`,
    );
  return raw as ColormapName;
}

function backgroundOf(raw: unknown, fail: (msg: string) => never): readonly [number, number, number] {
  if (!Array.isArray(raw) || raw.length !== 3 || !raw.every((v) => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 255))
    fail(`output.background must be [r, g, b], three whole numbers from 0 to 255 (--background R,G,B), got ${JSON.stringify(raw)}`);
  const [r, g, b] = raw as [number, number, number];
  return [r, g, b];
}

/**
 * The `output` of the processing parameters for a tile format: `base` (the COG output profile) with the COG-only
 * settings dropped for a rendered format and the rendered-format settings added. What the CLI (`--format`,
 * `--rescale`, `--colormap`, `--background`) and a stack's config (tessera:format, ...) build the job key's output from.
 *
 * @example
 * outputForFormat(DEFAULT_PARAMS.output, { format: 'PNG', rescale: [-1, 1], colormap: 'rdylgn' })
 * // { format: 'PNG', nodata: -9999, rescale: [-1, 1], colormap: 'rdylgn' }
 */
export function outputForFormat(
  base: Readonly<Record<string, unknown>>,
  render: {
    readonly format: TileFormat;
    readonly rescale?: readonly [number, number] | undefined;
    readonly colormap?: string | undefined;
    readonly background?: readonly [number, number, number] | undefined;
  },
): Record<string, unknown> {
  const kept = Object.entries(base).filter(([k]) => render.format === 'COG' || !(COG_OUTPUT_FIELDS as readonly string[]).includes(k));
  return {
    ...Object.fromEntries(kept),
    format: render.format,
    ...(render.rescale === undefined ? {} : { rescale: [...render.rescale] }),
    ...(render.colormap === undefined ? {} : { colormap: render.colormap }),
    ...(render.background === undefined ? {} : { background: [...render.background] }),
  };
}
