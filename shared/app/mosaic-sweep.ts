import { MissingTilesError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { assembleMosaic, type MosaicResult } from './assemble-mosaic.js';
import type { Backend } from './backend.js';

/** What one sweep did. Pending scenes (tiles still missing) are simply tried again on the next run. */
export interface MosaicSweepResult {
  readonly assembled: readonly { readonly sceneKey: string; readonly mosaicKey: string; readonly result: MosaicResult['result'] }[];
  /** Scenes whose tiles are not all there yet; tried again on the next run. */
  readonly pending: readonly { readonly sceneKey: string; readonly missing: number }[];
  readonly failed: readonly { readonly sceneKey: string; readonly error: string }[];
  /** Scenes left for the next run: over the per-run limit, or out of time. */
  readonly deferred: number;
}

export interface MosaicSweepOptions {
  /** Assemble exactly these scenes (an operator's request); default: every scene with a manifest and no mosaic. */
  readonly scenes?: readonly string[] | undefined;
  /** Most scenes one sweep tries (each costs a listing of its tiles). Default 50. */
  readonly maxScenes?: number | undefined;
  /** Asked before each scene: true when the invocation is running out of time. */
  readonly shouldStop?: (() => boolean) | undefined;
}

const SCENE_MANIFEST = /^scenes\/([0-9a-f]{64})\/scene\.json$/;
const MOSAIC = /^mosaics\/([0-9a-f]{64})\.vrt$/;

/**
 * The scheduled mosaic trigger shared by the clouds whose mosaic runs on a
 * schedule: assemble every scene that has a manifest but no mosaic, oldest
 * first. A scene whose tiles are not all written yet is `pending` and is tried
 * again next run; one whose tiles went to the dead-letter path stays pending
 * (logged each run) until an operator backfills it.
 *
 * Why a schedule and not an event per tile write: an event per tile would list
 * the scene's tiles once per tile (quadratic in the grid), and the last tile's
 * event is not special, since events arrive in any order. The VRT is written
 * create-only, so overlapping runs and duplicates are harmless.
 */
export async function sweepMosaics(backend: Backend, options: MosaicSweepOptions = {}): Promise<MosaicSweepResult> {
  const waiting = options.scenes ?? (await scenesWithoutMosaic(backend.outputs));
  const maxScenes = options.maxScenes ?? 50;
  const assembled: { sceneKey: string; mosaicKey: string; result: MosaicResult['result'] }[] = [];
  const pending: { sceneKey: string; missing: number }[] = [];
  const failed: { sceneKey: string; error: string }[] = [];
  let tried = 0;
  for (const sceneKey of waiting) {
    if (tried >= maxScenes || options.shouldStop?.()) break;
    tried++;
    try {
      const r = await assembleMosaic(backend, sceneKey);
      assembled.push({ sceneKey, mosaicKey: r.mosaicKey, result: r.result });
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

/** Scene keys with a manifest and no mosaic, oldest manifest first. */
export async function scenesWithoutMosaic(outputs: ObjectStore): Promise<string[]> {
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
