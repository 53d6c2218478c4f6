import type { InvocationContext } from '@azure/functions';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { acceptSourceObject } from '../../../shared/app/scene-event.js';
import { TesseraError } from '../../../shared/domain/errors.js';
import type { SourceRef } from '../../../shared/domain/job-key.js';
import { type AzureRuntime, azureRuntime, invocationBackend } from '../compose.js';
import { eventOf, parseBlobCreated } from './blob-event.js';

/** What one scene event came to; the handler returns it so tests (and logs) can see the decision. */
export type SceneEventResult =
  | { readonly kind: 'fanned-out'; readonly sceneKey: string; readonly enqueued: number; readonly manifest: 'written' | 'already-present' }
  | { readonly kind: 'ignored'; readonly reason: string };

/** A function handler: a queue trigger's (or an Event Grid trigger's) input and the invocation context. */
export type TriggerHandler<R> = (entry: unknown, context: InvocationContext) => Promise<R>;

/**
 * The scene handler: a `Microsoft.Storage.BlobCreated` event for the source
 * container, delivered by Event Grid through the scene Storage Queue (or
 * directly by an Event Grid trigger: the input is the same event). It fans the
 * scene out into one tile-queue message per window (shared/app/fan-out.ts),
 * with the blob's ETag as the version token.
 *
 * Filtering happens twice: the Event Grid subscription's subject filters keep
 * most events away, and this handler checks container, prefix and suffix again
 * (a subscription scoped to the account also sees the output container).
 * What it drops is returned as `ignored` and counted as `event-ignored`.
 *
 * Every failure throws, so the delivery is retried: through the queue the host
 * retries up to maxDequeueCount and then keeps the event in
 * `<scene queue>-poison`, a durable record an operator can replay. A failure no
 * retry can cure (not a raster, bad parameters, an unreadable event) is logged
 * at ERROR so it is seen at once; a transient one at WARN.
 */
export function makeSceneHandler(rt: () => AzureRuntime = azureRuntime): TriggerHandler<SceneEventResult> {
  return async (entry: unknown, context: InvocationContext): Promise<SceneEventResult> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const { config } = runtime;
    let where: Record<string, unknown> = {};
    try {
      const event = eventOf(entry);
      where = { eventId: event.id, subject: event.subject };
      const ignore = (reason: string, fields: Record<string, unknown> = {}): SceneEventResult => {
        backend.telemetry.count('event-ignored');
        backend.telemetry.log('INFO', 'event-ignored', { ...where, reason, ...fields });
        return { kind: 'ignored', reason };
      };
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
      const source: SourceRef = { bucket: blob.container, key: blob.key, versionToken: blob.etag };
      const r = await fanOutScene(backend, { source, params: config.params });
      return { kind: 'fanned-out', sceneKey: r.sceneKey, enqueued: r.enqueued, manifest: r.manifest };
    } catch (error) {
      const hopeless = error instanceof TesseraError && !error.retryable;
      backend.telemetry.count(hopeless ? 'poison' : 'failed');
      backend.telemetry.log(hopeless ? 'ERROR' : 'WARN', hopeless ? 'scene-rejected' : 'scene-failed', { ...where, error });
      throw error;
    }
  };
}
