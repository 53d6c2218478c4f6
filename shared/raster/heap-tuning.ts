import { setFlagsFromString } from 'node:v8';
import { InvalidParamsError } from '../domain/errors.js';

/**
 * How far V8 lets the old generation grow past what the last full collection
 * left alive, in a process that renders tiles: 300 % (the limit is 4x the live
 * size). V8's own factor, for a heap this small, is about 1.1x-2x.
 *
 * Why (docs/benchmarks.md, "Garbage collection in a tile process"): a tile
 * process keeps little alive in V8's heap (about 16 MB: code, the parsed job,
 * the SQLite handles) while every tile passes several large ArrayBuffers through
 * it (the source blocks, the decoded bands, the pixels, the compressed blocks,
 * the COG: about 5.5 MB for a 512 px NDVI tile). V8 counts those buffers against
 * the old generation's limit, so with its default factor a full mark-compact
 * ran every three or four tiles: 12-16 % of a worker's CPU profile, 3.8 ms of a
 * 22.7 ms ZSTD 1 tile. At 300 % the same 64-tile run (one pinned core, 4096^2
 * scene, 512 px tiles) took 0.99-1.10 s of CPU instead of 1.34-1.40 s (ZSTD 1)
 * and 1.63-1.65 s instead of 1.92-1.96 s (DEFLATE 6), for 25-40 MB more peak
 * RSS (157-164 -> 187-200 MB). 100 % changed nothing; 200 % was between.
 *
 * The tile bytes do not change (garbage collection never touches what is
 * computed). The heap stays capped by `--max-old-space-size` (on the clouds,
 * the function's memory): near the cap V8 collects as before.
 */
export const TILE_HEAP_GROWING_PERCENT = 300;

/** The percentage this process set, once set (0: not yet, or V8's own factor kept). */
let applied = 0;

/**
 * Tune this process's garbage collector for tile rendering (see
 * {@link TILE_HEAP_GROWING_PERCENT}). Called once by every tile process at
 * start: a local worker process (functions/local/worker-child.ts) and each
 * cloud's tile function (its wiring). Not by processes whose live heap is
 * large by design (a mosaic assembly over thousands of manifests, the CLI's
 * parent): there a 4x limit would be memory spent on nothing.
 *
 * V8 reads the factor each time it sets the next limit, so setting it from
 * JavaScript after start-up takes effect at the next collection (a flag that
 * sizes the heap at start-up, such as `--initial-old-space-size`, would not).
 * `node --heap-growing-percent=N` on the command line, or the environment
 * variable TESSERA_TILE_HEAP_GROWING_PERCENT (the caller passes it in:
 * `0` leaves V8's own factor), overrides this value.
 *
 * @returns the percentage set, or 0 when V8's own factor is kept
 * @example
 * tuneHeapForTiles(process.env.TESSERA_TILE_HEAP_GROWING_PERCENT);
 */
export function tuneHeapForTiles(override?: string | undefined): number {
  const percent = growingPercent(override);
  if (applied !== 0 || percent === 0) return applied;
  // A flag given on the command line is the operator's: leave it.
  if (process.execArgv.some((a) => a.startsWith('--heap-growing-percent'))) return 0;
  setFlagsFromString(`--heap-growing-percent=${percent}`);
  applied = percent;
  return percent;
}

/** The percentage an override asks for: a whole number 0-1000, else a clear error (a typo must not pass silently). */
export function growingPercent(override: string | undefined): number {
  if (override === undefined || override.trim() === '') return TILE_HEAP_GROWING_PERCENT;
  const n = Number(override);
  if (!Number.isInteger(n) || n < 0 || n > 1000) {
    throw new InvalidParamsError(
      `TESSERA_TILE_HEAP_GROWING_PERCENT must be a whole number from 0 (V8's own factor) to 1000, got ${JSON.stringify(override)}`,
    );
  }
  return n;
}
