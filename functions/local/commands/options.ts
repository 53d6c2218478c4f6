import { InvalidParamsError } from '../../../shared/domain/errors.js';

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
