import { InvalidParamsError } from '../../shared/domain/errors.js';
import { COLORMAP_NAMES, outputForFormat, type TileFormat } from '../../shared/domain/render-params.js';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import { OUTPUT_COMPRESSIONS, OUTPUT_LEVELS, tilingParams } from '../../shared/domain/tiling-params.js';

/** Strict integer option: `--workers 4.5` or `--workers four` is an error, not a rounding. */
export function intOption(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max)
    throw new InvalidParamsError(`--${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return v;
}

export function numberOption(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || v > max)
    throw new InvalidParamsError(`--${name} must be a number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return v;
}

export const DEFAULT_DIR = '.tessera';

/**
 * `--compression deflate|zstd|none` and `--level N`: the output profile to tile with
 * (`output` of the processing parameters, so part of every job key), or undefined for the
 * default one. A codec named without a level takes that codec's default level.
 */
export function outputProfileOption(
  compression: string | undefined,
  level: string | undefined,
): Readonly<Record<string, unknown>> | undefined {
  if (compression === undefined && level === undefined) return undefined;
  const base = DEFAULT_PARAMS.output as Readonly<Record<string, unknown>>;
  const codec = compression?.toUpperCase();
  if (codec !== undefined && !(OUTPUT_COMPRESSIONS as readonly string[]).includes(codec)) {
    throw new InvalidParamsError(`--compression must be deflate, zstd or none, got ${JSON.stringify(compression)}`);
  }
  const chosen = (codec ?? base.compression) as (typeof OUTPUT_COMPRESSIONS)[number];
  if (chosen === 'NONE' && level !== undefined) throw new InvalidParamsError('--level has no meaning with --compression none; remove it');
  const range = chosen === 'NONE' ? undefined : OUTPUT_LEVELS[chosen];
  const { level: baseLevel, ...rest } = base;
  const chosenLevel =
    range === undefined
      ? undefined
      : level !== undefined
        ? intOption('level', level, 0, range.min, range.max)
        : codec === undefined
          ? baseLevel
          : range.default;
  const output = { ...rest, compression: chosen, ...(chosenLevel === undefined ? {} : { level: chosenLevel }) };
  tilingParams({ ...DEFAULT_PARAMS, output }); // anything else wrong is the parameters' own message
  return output;
}

/** `--format`'s words and the `output.format` each names (jpg is jpeg's other name). */
const FORMAT_WORDS: Readonly<Record<string, TileFormat>> = { cog: 'COG', png: 'PNG', webp: 'WEBP', jpeg: 'JPEG', jpg: 'JPEG' };

/** The rendered-tile options of `tessera run` (docs/web-maps.md, "Rendered tiles"). */
export interface RenderOptionValues {
  readonly format?: string | undefined;
  readonly rescale?: string | undefined;
  readonly colormap?: string | undefined;
  readonly background?: string | undefined;
  /** Whether --compression or --level was given: settings of COG tiles only. */
  readonly cogProfile: boolean;
}

/**
 * `--format png|webp|jpeg|cog`, `--rescale MIN,MAX`, `--colormap NAME`, `--background R,G,B`: the `output` of the
 * processing parameters for the chosen tile format (so part of every job key), built on `output` (the COG profile
 * from --compression, --level and --dst-nodata, or the default one), or `output` itself when none is given. Every
 * mistake is refused here, before anything is staged or claimed, with the fix.
 *
 * @example
 * renderOutputOption(undefined, { format: 'png', rescale: '-1,1', colormap: 'rdylgn', cogProfile: false })
 * // { format: 'PNG', nodata: -9999, rescale: [-1, 1], colormap: 'rdylgn' }
 */
export function renderOutputOption(
  output: Readonly<Record<string, unknown>> | undefined,
  values: RenderOptionValues,
): Readonly<Record<string, unknown>> | undefined {
  const { rescale, colormap, background } = values;
  if (values.format === undefined) {
    const given = (['rescale', 'colormap', 'background'] as const).filter((k) => values[k] !== undefined);
    if (given.length > 0)
      throw new InvalidParamsError(
        `--${given.join(', --')} ${given.length > 1 ? 'apply' : 'applies'} to rendered tiles: add --format png (or webp, or jpeg with --background); COG tiles keep the band math's values`,
      );
    return output;
  }
  const format = FORMAT_WORDS[values.format.trim().toLowerCase()];
  if (format === undefined)
    throw new InvalidParamsError(
      `--format must be png, webp, jpeg or cog (the default: float32 COG tiles for analysis), got ${JSON.stringify(values.format)}`,
    );
  if (format !== 'COG' && values.cogProfile)
    throw new InvalidParamsError(
      `--compression and --level set the COG tiles' codec; --format ${values.format} tiles are encoded as ${format}: remove them`,
    );
  const name = colormap?.trim().toLowerCase();
  if (name !== undefined && !(COLORMAP_NAMES as readonly string[]).includes(name))
    throw new InvalidParamsError(`--colormap ${JSON.stringify(colormap)} is not a known colormap; use one of ${COLORMAP_NAMES.join(', ')}`);
  const built = outputForFormat(output ?? (DEFAULT_PARAMS.output as Readonly<Record<string, unknown>>), {
    format,
    rescale: rescale === undefined ? undefined : rescaleOption(rescale),
    colormap: name,
    background: background === undefined ? undefined : backgroundOption(background),
  });
  tilingParams({ ...DEFAULT_PARAMS, output: built }); // a missing --rescale or --background: the parameters' own message
  return built;
}

/** `--rescale MIN,MAX`: two numbers, MIN below MAX. */
function rescaleOption(raw: string): readonly [number, number] {
  const parts = raw.split(',').map((p) => p.trim());
  const [min, max] = parts.map(Number) as [number, number];
  if (parts.length !== 2 || parts.some((p) => p === '') || !Number.isFinite(min) || !Number.isFinite(max))
    throw new InvalidParamsError(
      `--rescale must be MIN,MAX, two numbers (e.g. --rescale=-1,1 for NDVI: with = when MIN is negative), got ${JSON.stringify(raw)}`,
    );
  if (!(min < max))
    throw new InvalidParamsError(`--rescale=${raw}: MIN must be less than MAX (e.g. --rescale=-1,1); swap them or widen the range`);
  return [min, max];
}

/** `--background R,G,B`: three whole numbers from 0 to 255. */
function backgroundOption(raw: string): readonly [number, number, number] {
  const parts = raw.split(',').map((p) => p.trim());
  const rgb = parts.map(Number);
  if (parts.length !== 3 || parts.some((p) => p === '') || !rgb.every((v) => Number.isInteger(v) && v >= 0 && v <= 255))
    throw new InvalidParamsError(
      `--background must be R,G,B, three whole numbers from 0 to 255 (e.g. 255,255,255 for white), got ${JSON.stringify(raw)}`,
    );
  return rgb as unknown as readonly [number, number, number];
}
