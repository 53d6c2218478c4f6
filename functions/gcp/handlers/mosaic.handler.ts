import type { Request, Response } from '@google-cloud/functions-framework';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import { InvalidEventError, MissingTilesError, TesseraError } from '../../../shared/domain/errors.js';
import type { GcpRuntime } from '../compose.js';

/**
 * Mosaic assembly as an HTTP function: `POST {"sceneKey": "<64 hex>"}`.
 *
 * The trigger is HTTP, not a storage event: a finalize event per tile would
 * list the scene's tiles once per tile, and the last tile's event is not
 * special (events arrive in any order). An operator, a script, Cloud
 * Workflows or a Cloud Scheduler job per scene calls it once the scene's tile
 * jobs have drained (docs/gcp.md). HTTP functions may run 3,600 s, ample for
 * listing a 40,000-tile scene.
 *
 * Answers: 200 with the result (the VRT is create-only, so calling twice is
 * harmless: `already-present`); 409 naming the missing tiles; 400 for a bad
 * request or an unreadable manifest; 503 for a failure a retry may fix.
 */
export function createMosaicHandler(runtime: GcpRuntime | (() => GcpRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;

  return async function mosaicHandler(req: Request, res: Response): Promise<void> {
    const { backend } = rt();
    const { telemetry } = backend;
    let sceneKey = '';
    try {
      if (req.method !== 'POST') {
        res.status(405).set('allow', 'POST').json({ error: 'POST {"sceneKey": "<64 hex>"} to assemble a scene mosaic' });
        return;
      }
      const body: unknown = req.body;
      sceneKey = typeof body === 'object' && body !== null ? String((body as { sceneKey?: unknown }).sceneKey ?? '') : '';
      if (!/^[0-9a-f]{64}$/.test(sceneKey)) throw new InvalidEventError(`sceneKey ${JSON.stringify(sceneKey)} is not a 64-hex scene key`);
      const result = await assembleMosaic(backend, sceneKey);
      telemetry.log('INFO', 'mosaic-assembled', {
        sceneKey,
        mosaicKey: result.mosaicKey,
        result: result.result,
        tiles: result.manifestCount,
      });
      res.status(200).json(result);
    } catch (error) {
      if (error instanceof MissingTilesError) {
        res.status(409).json({ error: error.message, code: error.code, missing: error.missing });
        return;
      }
      const err = error instanceof Error ? error : new Error(String(error));
      const retryable = !(err instanceof TesseraError) || err.retryable;
      telemetry.log(retryable ? 'WARN' : 'ERROR', 'mosaic-failed', { sceneKey, error: err });
      res.status(retryable ? 503 : 400).json({ error: err.message, code: err instanceof TesseraError ? err.code : 'INTERNAL' });
    }
  };
}
