import type { InvocationContext } from '@azure/functions';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import { TesseraError } from '../../../shared/domain/errors.js';
import { outputKeys } from '../../../shared/domain/job-key.js';
import { type AzureRuntime, azureRuntime, invocationBackend } from '../compose.js';
import { eventOf, parseBlobCreated } from './blob-event.js';
import type { TriggerHandler } from './scene.handler.js';

const TILE_KEY = /^tiles\/([0-9a-f]{64})\/\d+_\d+\.tif$/;

export type MosaicEventResult =
  | { readonly kind: 'assembled'; readonly sceneKey: string; readonly result: 'written' | 'already-present' }
  | { readonly kind: 'waiting'; readonly sceneKey: string; readonly present: number; readonly gridCount: number }
  | { readonly kind: 'ignored'; readonly reason: string };

/**
 * The mosaic handler: a `Microsoft.Storage.BlobCreated` event for a tile in
 * the output container (subscription filter: subject begins with
 * `/blobServices/default/containers/<outputs>/blobs/tiles/`, ends with `.tif`),
 * delivered through the mosaic Storage Queue. Each new tile counts the scene's
 * tiles; the one that completes the grid assembles the VRT. Assembly is
 * create-only, so two tiles finishing together both "assemble" and one write lands.
 *
 * The count is a listing of one scene's prefix per tile event. That keeps the
 * design free of extra state; for grids of many thousands of tiles a
 * timer-driven assembly would list less.
 *
 * Failures throw (the host retries, then keeps the event in
 * `<mosaic queue>-poison`); a missing manifest or tiles missing despite the
 * count are logged at ERROR.
 */
export function makeMosaicHandler(rt: () => AzureRuntime = azureRuntime): TriggerHandler<MosaicEventResult> {
  return async (entry: unknown, context: InvocationContext): Promise<MosaicEventResult> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    let where: Record<string, unknown> = {};
    try {
      const event = eventOf(entry);
      where = { eventId: event.id, subject: event.subject };
      const ignore = (reason: string): MosaicEventResult => {
        backend.telemetry.count('event-ignored');
        backend.telemetry.log('DEBUG', 'event-ignored', { ...where, reason });
        return { kind: 'ignored', reason };
      };
      const blob = parseBlobCreated(event);
      if (blob.container !== runtime.config.outputBucket) return ignore('not the output container');
      const sceneKey = TILE_KEY.exec(blob.key)?.[1];
      if (sceneKey === undefined) return ignore('not a tile');
      where = { ...where, sceneKey };
      if ((await backend.outputs.head(outputKeys.mosaic(sceneKey))) !== undefined) return ignore('mosaic already assembled');
      const manifest = await readSceneManifest(backend.outputs, sceneKey);
      let present = 0;
      for await (const _ of backend.outputs.list(outputKeys.tilePrefix(sceneKey))) present++;
      if (present < manifest.grid.count) {
        backend.telemetry.log('DEBUG', 'mosaic-waiting', { sceneKey, present, gridCount: manifest.grid.count });
        return { kind: 'waiting', sceneKey, present, gridCount: manifest.grid.count };
      }
      const r = await assembleMosaic(backend, sceneKey);
      backend.telemetry.log('INFO', 'mosaic-assembled', { sceneKey, mosaicKey: r.mosaicKey, result: r.result, tiles: r.manifestCount });
      return { kind: 'assembled', sceneKey, result: r.result };
    } catch (error) {
      const hopeless = error instanceof TesseraError && !error.retryable;
      backend.telemetry.log(hopeless ? 'ERROR' : 'WARN', hopeless ? 'mosaic-rejected' : 'mosaic-failed', { ...where, error });
      throw error;
    }
  };
}
