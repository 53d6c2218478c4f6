import type { EventGridEvent, EventGridHandler, InvocationContext } from '@azure/functions';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { acceptSourceObject } from '../../../shared/app/scene-event.js';
import { AdapterError, TesseraError } from '../../../shared/domain/errors.js';
import type { SourceRef } from '../../../shared/domain/job-key.js';
import { type AzureRuntime, azureRuntime, invocationBackend } from '../compose.js';
import { parseBlobCreated } from './blob-event.js';

/** What one scene event came to; the handler returns it so tests (and logs) can see the decision. */
export type SceneEventResult =
  | { readonly kind: 'fanned-out'; readonly sceneKey: string; readonly enqueued: number; readonly manifest: 'written' | 'already-present' }
  | { readonly kind: 'ignored'; readonly reason: string }
  | { readonly kind: 'rejected'; readonly error: string };

/**
 * The scene handler: an Event Grid trigger for `Microsoft.Storage.BlobCreated`
 * on the source container. It fans the scene out into one queue message per
 * window (shared/app/fan-out.ts), with the blob's ETag as the version token.
 *
 * Filtering happens twice: the Event Grid subscription's subject filters keep
 * most events away, and this handler checks container, prefix and suffix again
 * (a subscription scoped to the account also sees the output container).
 *
 * Errors: a storage failure throws, so Event Grid retries the delivery (its
 * schedule runs up to 24 h, then the subscription's dead-letter container),
 * which also covers a missing container while infrastructure is being fixed.
 * A problem with the event or the scene itself (not a raster, bad
 * parameters) is logged at ERROR and returned: retrying it changes nothing.
 */
export function makeSceneHandler(rt: () => AzureRuntime = azureRuntime): EventGridHandler<EventGridEvent> {
  return async (event: EventGridEvent, context: InvocationContext): Promise<SceneEventResult> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const { config } = runtime;
    const ignore = (reason: string, fields: Record<string, unknown> = {}): SceneEventResult => {
      backend.telemetry.count('event-ignored');
      backend.telemetry.log('INFO', 'event-ignored', { eventId: event?.id, subject: event?.subject, reason, ...fields });
      return { kind: 'ignored', reason };
    };
    let source: SourceRef;
    try {
      const blob = parseBlobCreated(event);
      if (blob.container !== config.sourceBucket) return ignore('not the source container', { container: blob.container });
      if (!acceptSourceObject(blob.key, { prefix: config.sourcePrefix, suffix: config.sourceSuffix })) {
        return ignore('outside the source prefix/suffix filter', { key: blob.key });
      }
      // ADLS Gen2 accounts announce an empty file at CreateFile and again at FlushWithClose; only the second has content.
      if (blob.api === 'CreateFile') return ignore('ADLS CreateFile (empty until FlushWithClose)', { key: blob.key });
      // The event may be late: if the blob was replaced or deleted since, the newer blob's own event does the work,
      // and fanning out now would pair this ETag with the newer bytes.
      const head = await backend.sources.head(blob.key);
      if (head === undefined) return ignore('source blob no longer exists', { key: blob.key });
      if (head.version !== blob.etag)
        return ignore('source blob changed since the event', { key: blob.key, eventEtag: blob.etag, etag: head.version });
      source = { bucket: blob.container, key: blob.key, versionToken: blob.etag };
    } catch (error) {
      return reject(error);
    }
    try {
      const r = await fanOutScene(backend, { source, params: config.params });
      return { kind: 'fanned-out', sceneKey: r.sceneKey, enqueued: r.enqueued, manifest: r.manifest };
    } catch (error) {
      return reject(error);
    }

    function reject(error: unknown): SceneEventResult {
      if (error instanceof TesseraError && !error.retryable && !(error instanceof AdapterError)) {
        backend.telemetry.count('poison');
        backend.telemetry.log('ERROR', 'scene-rejected', { eventId: event?.id, subject: event?.subject, error });
        return { kind: 'rejected', error: error.message };
      }
      backend.telemetry.count('failed');
      backend.telemetry.log('WARN', 'scene-failed', { eventId: event?.id, subject: event?.subject, error });
      throw error;
    }
  };
}
