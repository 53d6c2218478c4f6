import type { Context, ScheduledEvent } from 'aws-lambda';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import { InvalidEventError, MissingTilesError } from '../../../shared/domain/errors.js';
import { outputKeys } from '../../../shared/domain/job-key.js';
import { type AwsRuntime, lambdaRuntime } from '../compose.js';
import { outOfTime } from './sqs-batch.js';

/** Assemble one scene now (an operator, a script or a state machine invokes with this). */
export interface AssembleSceneEvent {
  readonly sceneKey: string;
}

export type MosaicEvent = AssembleSceneEvent | ScheduledEvent;

export interface MosaicSweepResult {
  readonly assembled: readonly { readonly sceneKey: string; readonly mosaicKey: string; readonly result: 'written' | 'already-present' }[];
  /** Scenes whose tiles are not all there yet; tried again on the next run. */
  readonly pending: readonly { readonly sceneKey: string; readonly missing: number }[];
  readonly failed: readonly { readonly sceneKey: string; readonly error: string }[];
  /** Scenes left for the next run because this one ran out of scenes or time. */
  readonly deferred: number;
}

export interface MosaicHandlerOptions {
  /** Most scenes one sweep tries (each costs a listing of its tiles). Default 50. */
  readonly maxScenesPerSweep?: number;
}

const SCENE_MANIFEST = /^scenes\/([0-9a-f]{64})\/scene\.json$/;
const MOSAIC = /^mosaics\/([0-9a-f]{64})\.vrt$/;

/**
 * Mosaic assembly. The trigger is a schedule (an EventBridge rule, every 5
 * minutes in infra/) rather than a per-tile event: each run lists the scene
 * manifests fan-out wrote and the mosaics already written, and assembles
 * every scene that has a manifest but no mosaic, oldest first. A scene whose
 * tiles are not all written yet is `pending` (MissingTilesError names them)
 * and is simply tried again next run; one whose tiles went to the DLQ stays
 * pending and is logged each run until an operator backfills it.
 *
 * Why not trigger on tile writes: a notification per tile would list the
 * scene's tiles once per tile (quadratic in the grid), and the last tile's
 * notification is not special, as notifications arrive in any order.
 *
 * Invoked with `{ sceneKey }` it assembles that one scene and reports it.
 * The VRT is written create-only, so overlapping runs and duplicates are harmless.
 */
export function createMosaicHandler(runtime: AwsRuntime | (() => AwsRuntime), options: MosaicHandlerOptions = {}) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;
  const maxScenes = options.maxScenesPerSweep ?? 50;

  return async (event: MosaicEvent, context?: Context): Promise<MosaicSweepResult> => {
    const { backend } = rt();
    const { telemetry } = backend;
    let scenes: string[];
    let deferred = 0;
    if (event && typeof (event as AssembleSceneEvent).sceneKey === 'string') {
      const sceneKey = (event as AssembleSceneEvent).sceneKey;
      if (!/^[0-9a-f]{64}$/.test(sceneKey)) throw new InvalidEventError(`sceneKey ${JSON.stringify(sceneKey)} is not a 64-hex scene key`);
      scenes = [sceneKey];
    } else {
      const waiting = await scenesWithoutMosaic(rt());
      scenes = waiting.slice(0, maxScenes);
      deferred = waiting.length - scenes.length;
    }

    const assembled: { sceneKey: string; mosaicKey: string; result: 'written' | 'already-present' }[] = [];
    const pending: { sceneKey: string; missing: number }[] = [];
    const failed: { sceneKey: string; error: string }[] = [];
    for (const [i, sceneKey] of scenes.entries()) {
      if (outOfTime(context)) {
        deferred += scenes.length - i;
        break;
      }
      try {
        const r = await assembleMosaic(backend, sceneKey);
        assembled.push({ sceneKey, mosaicKey: r.mosaicKey, result: r.result });
      } catch (error) {
        if (error instanceof MissingTilesError) {
          pending.push({ sceneKey, missing: error.missing.length });
          continue;
        }
        const err = error instanceof Error ? error : new Error(String(error));
        telemetry.log('ERROR', 'mosaic-failed', { sceneKey, error: err });
        failed.push({ sceneKey, error: err.message });
      }
    }
    telemetry.log('INFO', 'mosaic-sweep', { assembled: assembled.length, pending: pending.length, failed: failed.length, deferred });
    return { assembled, pending, failed, deferred };
  };
}

/** Scene keys with a manifest and no mosaic, oldest manifest first. */
async function scenesWithoutMosaic(rt: AwsRuntime): Promise<string[]> {
  const { outputs } = rt.backend;
  const done = new Set<string>();
  for await (const head of outputs.list('mosaics/')) {
    const m = MOSAIC.exec(head.key);
    if (m?.[1]) done.add(m[1]);
  }
  const waiting: { sceneKey: string; at: number }[] = [];
  for await (const head of outputs.list('scenes/')) {
    const m = SCENE_MANIFEST.exec(head.key);
    if (m?.[1] && !done.has(m[1]) && head.key === outputKeys.sceneManifest(m[1])) waiting.push({ sceneKey: m[1], at: head.lastModified });
  }
  return waiting.sort((a, b) => a.at - b.at).map((w) => w.sceneKey);
}

/** The Lambda entry point (`mosaic.handler.handler`). */
export const handler = createMosaicHandler(lambdaRuntime);
