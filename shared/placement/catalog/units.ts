import { InvalidDurationError, InvalidMemoryError } from './errors.js';

/** Longest runtime the chooser accepts: a day. Longer is a batch system's job, not a function's. */
export const MAX_RUNTIME_SEC = 24 * 3600;
/** Largest memory the chooser accepts (1 TB): above every platform, but still a number a person meant. */
export const MAX_MEMORY_MB = 1024 * 1024;

const DURATION_UNITS: Readonly<Record<string, number>> = { h: 3600, hr: 3600, m: 60, min: 60, s: 1, sec: 1 };

/**
 * Parse a runtime: bare seconds (`720`) or number+unit parts (`90s`, `12m`,
 * `1h30m`, `1.5h`, `12min`). Fractions of a second round up, because a
 * timeout shorter than the job is the failure the caller is guarding against.
 *
 * @throws InvalidDurationError naming the input and the accepted forms.
 * @example parseDuration('1h30m') // 5400
 */
export function parseDuration(input: string): number {
  const text = input.trim().toLowerCase();
  if (text === '') throw new InvalidDurationError(input, 'is empty');
  let seconds: number;
  if (/^\d+(\.\d+)?$/.test(text)) {
    seconds = Number(text);
  } else {
    const part = /(\d+(?:\.\d+)?)\s*([a-z]+)/gy;
    const seen = new Set<number>();
    seconds = 0;
    let consumed = 0;
    for (let m = part.exec(text); m !== null; m = part.exec(text)) {
      const [whole, value = '', unit = ''] = m;
      const factor = DURATION_UNITS[unit];
      if (factor === undefined) throw new InvalidDurationError(input, `has an unknown unit ${JSON.stringify(unit)} (use h, m or s)`);
      if (seen.has(factor)) throw new InvalidDurationError(input, `gives the ${unit} unit twice`);
      seen.add(factor);
      seconds += Number(value) * factor;
      consumed += whole.length;
      // Parts may be separated by spaces: "1h 30m".
      while (text[part.lastIndex] === ' ') {
        part.lastIndex += 1;
        consumed += 1;
      }
    }
    if (consumed !== text.length || seen.size === 0) throw new InvalidDurationError(input, 'is not a duration');
  }
  if (!Number.isFinite(seconds) || seconds <= 0) throw new InvalidDurationError(input, 'must be longer than zero');
  if (seconds > MAX_RUNTIME_SEC)
    throw new InvalidDurationError(input, `is longer than ${MAX_RUNTIME_SEC / 3600} h, which no function platform runs`);
  return Math.ceil(seconds);
}

const MEMORY_UNITS: Readonly<Record<string, number>> = { '': 1, m: 1, mb: 1, mib: 1, g: 1024, gb: 1024, gib: 1024 };

/**
 * Parse a peak memory: bare MB (`2048`) or number+unit (`512MB`, `3GB`,
 * `1.5GiB`). MB and GB are read as the clouds read them in their memory
 * settings: binary (1 GB = 1,024 MB). Fractions of a MB round up.
 *
 * @throws InvalidMemoryError naming the input and the accepted forms.
 * @example parseMemory('3GB') // 3072
 */
export function parseMemory(input: string): number {
  const text = input.trim().toLowerCase();
  if (text === '') throw new InvalidMemoryError(input, 'is empty');
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/.exec(text);
  if (!m) throw new InvalidMemoryError(input, 'is not a memory size');
  const [, value = '', unit = ''] = m;
  const factor = MEMORY_UNITS[unit];
  if (factor === undefined) throw new InvalidMemoryError(input, `has an unknown unit ${JSON.stringify(unit)} (use MB or GB)`);
  const mb = Math.ceil(Number(value) * factor);
  if (!Number.isFinite(mb) || mb <= 0) throw new InvalidMemoryError(input, 'must be more than zero');
  if (mb > MAX_MEMORY_MB) throw new InvalidMemoryError(input, 'is larger than 1 TB, which no function platform offers');
  return mb;
}

function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** `720` -> `12 min`, `5400` -> `1 h 30 min`, `90` -> `1 min 30 s`, `45` -> `45 s`. */
export function formatDuration(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const parts = [h > 0 ? `${h} h` : '', m > 0 ? `${m} min` : '', s > 0 ? `${s} s` : ''].filter(Boolean);
  return parts.length > 0 ? parts.join(' ') : '0 s';
}

/** `3072` -> `3 GB`, `1536` -> `1,536 MB`. */
export function formatMemory(mb: number): string {
  if (!Number.isFinite(mb)) return 'unlimited';
  return mb % 1024 === 0 ? `${mb / 1024} GB` : `${thousands(mb)} MB`;
}

/** `4321.7` -> `4,322 km`. */
export function formatKm(km: number): string {
  return `${thousands(Math.round(km))} km`;
}
