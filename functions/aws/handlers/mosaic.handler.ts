import type { Context, ScheduledEvent } from 'aws-lambda';
import { type MosaicSweepResult, sweepMosaics } from '../../../shared/app/mosaic-sweep.js';
import { InvalidEventError } from '../../../shared/domain/errors.js';
import { type AwsRuntime, lambdaRuntime } from '../compose.js';
import { outOfTime } from './sqs-batch.js';

/** Assemble one scene now (an operator, a script or a state machine invokes with this). */
export interface AssembleSceneEvent {
  readonly sceneKey: string;
}

export type MosaicEvent = AssembleSceneEvent | ScheduledEvent;

export type { MosaicSweepResult };

export interface MosaicHandlerOptions {
  /** Most scenes one sweep tries (each costs a listing of its tiles). Default 50. */
  readonly maxScenesPerSweep?: number;
}

/**
 * Mosaic assembly. The trigger is a schedule (an EventBridge rule, every 5
 * minutes in infra/) rather than a per-tile event: each run is the shared
 * sweep (shared/app/mosaic-sweep.ts). It reads the pending index hours since
 * its cursor (never every scene and mosaic), tries due scenes fewest attempts
 * first, at most `maxScenesPerSweep`, backs off a scene that stays pending
 * (tiles in the DLQ, poison), and closes out a superseded or long-incomplete
 * scene with a report naming its missing windows, so no number of stuck
 * scenes can keep a newer scene's mosaic from coming.
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
    let scenes: string[] | undefined;
    if (event && typeof (event as AssembleSceneEvent).sceneKey === 'string') {
      const sceneKey = (event as AssembleSceneEvent).sceneKey;
      if (!/^[0-9a-f]{64}$/.test(sceneKey)) throw new InvalidEventError(`sceneKey ${JSON.stringify(sceneKey)} is not a 64-hex scene key`);
      scenes = [sceneKey];
    }
    return sweepMosaics(backend, { scenes, maxScenes, shouldStop: () => outOfTime(context) });
  };
}

/** The Lambda entry point (`mosaic.handler.handler`). */
export const handler = createMosaicHandler(lambdaRuntime);
