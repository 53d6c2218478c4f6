/**
 * Summaries of repeated measurements. The machines these run on are noisy
 * (shared cores, other jobs), so every figure is a median over repetitions
 * with its spread, and comparisons are ratios of measurements taken side by
 * side in the same run.
 */

/** Median, quartiles and extremes of a sample. */
export interface Summary {
  readonly n: number;
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly p25: number;
  readonly p75: number;
  /** (max - min) / median, as a fraction: how far apart the repetitions were. */
  readonly spread: number;
}

/** Linear-interpolated quantile of a sorted sample (q in [0, 1]). */
function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (at - lo);
}

/**
 * Summarise a sample. Throws on an empty one: a section that measured
 * nothing is a broken benchmark, not a zero.
 *
 * @example
 * summarize([10, 12, 11]) // { n: 3, median: 11, min: 10, max: 12, spread: 0.18, ... }
 */
export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) throw new Error('summarize: no measurements (a section measured nothing)');
  if (values.some((v) => !Number.isFinite(v))) throw new Error(`summarize: a measurement is not a finite number: ${values.join(', ')}`);
  const sorted = [...values].sort((a, b) => a - b);
  const median = quantile(sorted, 0.5);
  const min = sorted[0] as number;
  const max = sorted[sorted.length - 1] as number;
  return {
    n: sorted.length,
    median,
    min,
    max,
    p25: quantile(sorted, 0.25),
    p75: quantile(sorted, 0.75),
    spread: median === 0 ? 0 : (max - min) / median,
  };
}

export function median(values: readonly number[]): number {
  return summarize(values).median;
}

/** A number with a sensible count of significant digits for a report. */
export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return '0';
  const abs = Math.abs(value);
  if (abs >= 10 ** digits) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(digits)).toString();
}

/** `median (min-max, n=N)` for a summary, in a unit. */
export function fmtSummary(s: Summary, unit = '', digits = 3): string {
  const u = unit ? ` ${unit}` : '';
  return `${fmt(s.median, digits)}${u} (${fmt(s.min, digits)}-${fmt(s.max, digits)}, n=${s.n})`;
}
