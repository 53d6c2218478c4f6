import type { InvocationContext, Timer } from '@azure/functions';
import { type MosaicSweepResult, sweepMosaics } from '../../../shared/app/mosaic-sweep.js';
import { type AzureRuntime, azureRuntime, invocationBackend } from '../compose.js';

export type { MosaicSweepResult };

/** The mosaic sweep's timer schedule (NCRONTAB with seconds): every 5 minutes, as on AWS (EventBridge) and GCP (Cloud Scheduler). */
export const MOSAIC_SCHEDULE = '0 */5 * * * *';

export interface MosaicHandlerOptions {
  /** Most scenes one sweep tries (each costs a listing of its tiles). Default 50. */
  readonly maxScenesPerSweep?: number;
  /** Share of the host's function timeout after which a sweep starts no new scene. Default 0.8. */
  readonly timeBudget?: number;
}

/** A timer function's handler (the v4 `TimerHandler`, with the sweep's result as its return value). */
export type MosaicTimerHandler = (timer: Timer, context: InvocationContext) => Promise<MosaicSweepResult>;

/**
 * Mosaic assembly on a timer, the same sweep as AWS and GCP
 * (shared/app/mosaic-sweep.ts): it reads the pending index fan-out writes,
 * assembles the scenes whose tiles are all there, backs off the ones that
 * stay pending and closes out superseded or long-incomplete scenes with a
 * report naming their missing windows.
 *
 * Not a BlobCreated trigger per tile any more: that listed a scene's tiles
 * once per tile (quadratic in the grid), ran on every tile write, and a
 * scene whose last tile never came was never looked at again.
 * The VRT and every report are written create-only, so a run that overlaps
 * the previous one (a past-due timer) is harmless. A failed run throws; the
 * next tick retries.
 */
export function makeMosaicHandler(
  rt: () => AzureRuntime = () => azureRuntime('mosaic'),
  options: MosaicHandlerOptions = {},
): MosaicTimerHandler {
  const maxScenes = options.maxScenesPerSweep ?? 50;
  const budget = options.timeBudget ?? 0.8;
  return async (timer: Timer, context: InvocationContext): Promise<MosaicSweepResult> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const deadline = backend.clock.now() + runtime.host.functionTimeoutSec * 1000 * budget;
    if (timer?.isPastDue) backend.telemetry.log('INFO', 'mosaic-sweep-past-due', {});
    return sweepMosaics(backend, { maxScenes, shouldStop: () => backend.clock.now() > deadline });
  };
}
