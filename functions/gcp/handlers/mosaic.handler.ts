import type { Request, Response } from '@google-cloud/functions-framework';
import { assembleMosaic, type MosaicResult } from '../../../shared/app/assemble-mosaic.js';
import { InvalidEventError, MissingTilesError, TesseraError } from '../../../shared/domain/errors.js';
import { outputKeys } from '../../../shared/domain/job-key.js';
import type { ObjectStore } from '../../../shared/ports/object-store.port.js';
import type { GcpRuntime } from '../compose.js';

/** What one sweep did. Pending scenes (tiles still missing) are simply tried again on the next run. */
export interface MosaicSweepResult {
  readonly assembled: readonly { readonly sceneKey: string; readonly mosaicKey: string; readonly result: MosaicResult['result'] }[];
  readonly pending: readonly { readonly sceneKey: string; readonly missing: number }[];
  readonly failed: readonly { readonly sceneKey: string; readonly error: string }[];
  /** Scenes left for the next run: over the per-run limit, or out of time. */
  readonly deferred: number;
}

export interface MosaicHandlerOptions {
  /** Most scenes one sweep tries (each costs a listing of its tiles). Default 50. */
  readonly maxScenesPerSweep?: number;
  /** Share of the function timeout after which a sweep starts no new scene. Default 0.8. */
  readonly timeBudget?: number;
}

const SCENE_KEY = /^[0-9a-f]{64}$/;
const SCENE_MANIFEST = /^scenes\/([0-9a-f]{64})\/scene\.json$/;
const MOSAIC = /^mosaics\/([0-9a-f]{64})\.vrt$/;

/**
 * Mosaic assembly, an HTTP function (3,600 s ceiling).
 *
 * - `POST {}` (what the Cloud Scheduler job infra/ creates sends): a sweep.
 *   It lists the scene manifests fan-out wrote and the mosaics already
 *   written, and assembles every scene with a manifest and no mosaic, oldest
 *   first. A scene whose tiles are not all there yet is `pending` and is tried
 *   again on the next run; one whose tiles went to the dead-letter topic stays
 *   pending (logged each run) until an operator backfills it. Answers 200 with
 *   a {@link MosaicSweepResult}.
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
    const waiting = await scenesWithoutMosaic(backend.outputs);
    const assembled: { sceneKey: string; mosaicKey: string; result: MosaicResult['result'] }[] = [];
    const pending: { sceneKey: string; missing: number }[] = [];
    const failed: { sceneKey: string; error: string }[] = [];
    let tried = 0;
    for (const sceneKey of waiting) {
      if (tried >= maxScenes || backend.clock.now() > deadline) break;
      tried++;
      try {
        const result = await assembleMosaic(backend, sceneKey);
        assembled.push({ sceneKey, mosaicKey: result.mosaicKey, result: result.result });
      } catch (error) {
        if (error instanceof MissingTilesError) pending.push({ sceneKey, missing: error.missing.length });
        else {
          const err = error instanceof Error ? error : new Error(String(error));
          backend.telemetry.log('ERROR', 'mosaic-failed', { sceneKey, error: err });
          failed.push({ sceneKey, error: err.message });
        }
      }
    }
    const result = { assembled, pending, failed, deferred: waiting.length - tried };
    backend.telemetry.log('INFO', 'mosaic-sweep', {
      assembled: assembled.length,
      pending: pending.length,
      failed: failed.length,
      deferred: result.deferred,
    });
    return result;
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

/** Scene keys with a manifest and no mosaic, oldest manifest first. */
async function scenesWithoutMosaic(outputs: ObjectStore): Promise<string[]> {
  const done = new Set<string>();
  for await (const head of outputs.list('mosaics/')) {
    const key = MOSAIC.exec(head.key)?.[1];
    if (key) done.add(key);
  }
  const waiting: { sceneKey: string; at: number }[] = [];
  for await (const head of outputs.list('scenes/')) {
    const key = SCENE_MANIFEST.exec(head.key)?.[1];
    if (key && !done.has(key) && head.key === outputKeys.sceneManifest(key)) waiting.push({ sceneKey: key, at: head.lastModified });
  }
  return waiting.sort((a, b) => a.at - b.at).map((w) => w.sceneKey);
}
