import type { EventGridEvent, EventGridHandler, InvocationContext } from '@azure/functions';
import { assembleMosaic } from '../../../shared/app/assemble-mosaic.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import { AdapterError, TesseraError } from '../../../shared/domain/errors.js';
import { outputKeys } from '../../../shared/domain/job-key.js';
import { type AzureRuntime, azureRuntime, invocationBackend } from '../compose.js';
import { parseBlobCreated } from './blob-event.js';

const TILE_KEY = /^tiles\/([0-9a-f]{64})\/\d+_\d+\.tif$/;

export type MosaicEventResult =
  | { readonly kind: 'assembled'; readonly sceneKey: string; readonly result: 'written' | 'already-present' }
  | { readonly kind: 'waiting'; readonly sceneKey: string; readonly present: number; readonly gridCount: number }
  | { readonly kind: 'ignored'; readonly reason: string }
  | { readonly kind: 'rejected'; readonly sceneKey: string; readonly error: string };

/**
 * The mosaic trigger: an Event Grid trigger for `Microsoft.Storage.BlobCreated`
 * on the output container's `tiles/` blobs (subscription filter: subject
 * begins with `/blobServices/default/containers/<outputs>/blobs/tiles/`, ends
 * with `.tif`). Each new tile counts the scene's tiles; the one that completes
 * the grid assembles the VRT. Assembly is create-only, so two tiles finishing
 * together both "assemble" and one write lands.
 *
 * The count is a listing of one scene's prefix per tile event. That keeps
 * the design free of extra state; for grids of many thousands of tiles a
 * timer-driven assembly would list less.
 */
export function makeMosaicHandler(rt: () => AzureRuntime = azureRuntime): EventGridHandler<EventGridEvent> {
  return async (event: EventGridEvent, context: InvocationContext): Promise<MosaicEventResult> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const ignore = (reason: string): MosaicEventResult => {
      backend.telemetry.count('event-ignored');
      backend.telemetry.log('DEBUG', 'event-ignored', { eventId: event?.id, subject: event?.subject, reason });
      return { kind: 'ignored', reason };
    };
    let sceneKey: string;
    try {
      const blob = parseBlobCreated(event);
      if (blob.container !== runtime.config.outputBucket) return ignore('not the output container');
      const m = TILE_KEY.exec(blob.key);
      if (!m) return ignore('not a tile');
      sceneKey = m[1] as string;
    } catch (error) {
      if (error instanceof TesseraError && !error.retryable) return ignore(`unreadable event: ${error.message}`);
      throw error;
    }
    try {
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
      // A missing or unreadable manifest, or tiles missing despite the count: retrying the event changes nothing.
      // Storage failures (AdapterError) throw, so Event Grid retries them.
      if (error instanceof TesseraError && !error.retryable && !(error instanceof AdapterError)) {
        backend.telemetry.log('ERROR', 'mosaic-rejected', { sceneKey, error });
        return { kind: 'rejected', sceneKey, error: error.message };
      }
      throw error;
    }
  };
}
