import type { Request, Response } from '@google-cloud/functions-framework';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import { type MosaicSweepResult, sweepMosaics } from '../../../shared/app/mosaic-sweep.js';
import { InvalidEventError, MissingTilesError, TesseraError } from '../../../shared/domain/errors.js';
import type { GcpRuntime } from '../compose.js';

export type { MosaicSweepResult };

export interface MosaicHandlerOptions {
  /** Most scenes one sweep tries (each costs a listing of its tiles). Default 50. */
  readonly maxScenesPerSweep?: number;
  /** Share of the function timeout after which a sweep starts no new scene. Default 0.8. */
  readonly timeBudget?: number;
}

const SCENE_KEY = /^[0-9a-f]{64}$/;

/**
 * Mosaic assembly, an HTTP function (3,600 s ceiling).
 *
 * - `POST {}` (what the Cloud Scheduler job infra/ creates sends): a sweep
 *   (shared/app/mosaic-sweep.ts). It reads the pending index hours since its
 *   cursor, tries due scenes fewest attempts first, backs off a scene that
 *   stays pending (tiles on the dead-letter topic, poison) and closes out a
 *   superseded or long-incomplete scene with a report naming its missing
 *   windows. Answers 200 with a {@link MosaicSweepResult}.
 * - `POST {"sceneKey": "<64 hex>"}`: that one scene now. 200 with the result,
 *   409 naming the missing tiles, 400 for a bad key or unreadable manifest,
 *   503 for a failure a retry may fix.
 *
 * Not triggered per tile write: an event per tile would list the scene's
 * tiles once per tile, and the last tile's event is not special (events
 * arrive in any order). The VRT is written create-only, so overlapping runs
 * and repeated calls are harmless (`already-present`).
 */
export function createMosaicHandler(runtime: GcpRuntime | (() => GcpRuntime), options: MosaicHandlerOptions = {}) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;
  const maxScenes = options.maxScenesPerSweep ?? 50;
  const budget = options.timeBudget ?? 0.8;

  async function one(r: GcpRuntime, sceneKey: string, res: Response): Promise<void> {
    if (!SCENE_KEY.test(sceneKey)) throw new InvalidEventError(`sceneKey ${JSON.stringify(sceneKey)} is not a 64-hex scene key`);
    try {
      const result = await assembleMosaic(r.backend, sceneKey);
      r.backend.telemetry.log('INFO', 'mosaic-assembled', {
        sceneKey,
        mosaicKey: result.mosaicKey,
        result: result.result,
        tiles: result.manifestCount,
      });
      res.status(200).json(result);
    } catch (error) {
      if (!(error instanceof MissingTilesError)) throw error;
      res.status(409).json({ error: error.message, code: error.code, missing: error.missing });
    }
  }

  async function sweep(r: GcpRuntime): Promise<MosaicSweepResult> {
    const { backend, config } = r;
    const deadline = backend.clock.now() + config.functionTimeoutSec * 1000 * budget;
    return sweepMosaics(backend, { maxScenes, shouldStop: () => backend.clock.now() > deadline });
  }

  return async function mosaicHandler(req: Request, res: Response): Promise<void> {
    const r = rt();
    const body: unknown = req.body;
    const sceneKey = typeof body === 'object' && body !== null ? (body as { sceneKey?: unknown }).sceneKey : undefined;
    try {
      if (req.method !== 'POST') {
        res.status(405).set('allow', 'POST').json({ error: 'POST {} to sweep, or {"sceneKey": "<64 hex>"} to assemble one scene' });
      } else if (sceneKey === undefined) {
        res.status(200).json(await sweep(r));
      } else {
        await one(r, String(sceneKey), res);
      }
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      const retryable = !(err instanceof TesseraError) || err.retryable;
      r.backend.telemetry.log(retryable ? 'WARN' : 'ERROR', 'mosaic-failed', { sceneKey, error: err });
      res.status(retryable ? 503 : 400).json({ error: err.message, code: err instanceof TesseraError ? err.code : 'INTERNAL' });
    }
  };
}
