import { InvalidParamsError } from '../../shared/domain/errors.js';
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
