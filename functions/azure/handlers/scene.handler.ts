import type { InvocationContext } from '@azure/functions';
import { poisonReason, settlePoison } from '../../../shared/app/poison.js';
import { acceptSourceObject } from '../../../shared/app/scene-event.js';
import { eventTimeMs, fanOutSourceEvent } from '../../../shared/app/stac-scene.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { TesseraError } from '../../../shared/domain/errors.js';
import type { SourceRef } from '../../../shared/domain/job-key.js';
import { type AzureRuntime, azureRuntime, invocationBackend, SCENE_EVENT_QUEUE } from '../compose.js';
import { commitsBlob, entryText, eventOf, parseBlobCreated, triggerQueueName } from './blob-event.js';

/** What one scene event came to; the handler returns it so tests (and logs) can see the decision. */
export type SceneEventResult =
  | { readonly kind: 'fanned-out'; readonly sceneKey: string; readonly enqueued: number; readonly manifest: 'written' | 'already-present' }
  | { readonly kind: 'ignored'; readonly reason: string }
  /** No retry can cure it (not a raster, bad parameters, an unreadable event): on `<scene queue>-poison`, acknowledged. */
  | { readonly kind: 'poison'; readonly code: string; readonly message: string };

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
 * A transient failure throws, so the delivery is retried: through the queue
 * the host retries up to maxDequeueCount and then keeps the event in
 * `<scene queue>-poison`, a durable record an operator can replay. A failure
 * no retry can cure (not a raster, bad parameters, an unreadable event) is
 * logged at ERROR and put on `<scene queue>-poison` at once by the handler,
 * which then returns: one delivery, not five 330 s apart.
 */
export function makeSceneHandler(rt: () => AzureRuntime = () => azureRuntime('scene')): TriggerHandler<SceneEventResult> {
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
      // Only an API that commits the blob's bytes starts a scene: not ADLS CreateFile or SFTP SftpCreate (an empty
      // blob, committed later by FlushWithClose / SftpCommit), not SftpWrite (a part), not an unknown API.
      if (!commitsBlob(blob.api)) return ignore('not a committing API', { key: blob.key, api: blob.api ?? null });
      // Which bytes to tile: the ones whose ETag the event names, whatever happened to the blob since. A metadata or
      // property update changes the ETag with the same bytes and sends no event, so keying by the live ETag would
      // tile those bytes again under a second scene key on a redelivery. The pin reads the state the event names: the
      // snapshot the first delivery's pin made, or the blob version with that ETag (versioning is on); an event whose
      // ETag names no stored state is stale (ignored, counted `event-stale`).
      const source: SourceRef = { bucket: blob.container, key: blob.key, versionToken: blob.etag };
      // The pin at fan-out checks the version again, closing the window between this head and the reads.
      // A STAC stack's blob is an item (shared/app/stac-scene.ts): through the scene queue the host's dequeue count
      // and maxDequeueCount bound the wait for a band not there yet; directly from Event Grid, the event's time.
      const dequeueCount = Number(context.triggerMetadata?.dequeueCount);
      const fan = await fanOutSourceEvent(backend, source, config, {
        ...(Number.isInteger(dequeueCount) && dequeueCount > 0
          ? { attempt: dequeueCount, maxDeliveries: runtime.host.maxDequeueCount }
          : {}),
        eventTimeMs: eventTimeMs(event.eventTime),
      });
      switch (fan.kind) {
        case 'fanned-out':
          return { kind: 'fanned-out', sceneKey: fan.result.sceneKey, enqueued: fan.result.enqueued, manifest: fan.result.manifest };
        case 'source-changed':
          // No snapshot, live blob or version holds the event's ETag any more: a newer upload replaced it, and that
          // upload's own event makes its scene.
          backend.telemetry.count('event-stale');
          return ignore('the event names a blob state no longer stored', {
            key: blob.key,
            eventEtag: blob.etag,
            current: fan.current ?? null,
          });
        case 'source-gone':
          return ignore('source blob no longer exists', { key: blob.key });
        case 'stale':
          return ignore(fan.reason, { key: fan.key });
        default:
          return assertNever(fan, 'scene fan-out');
      }
    } catch (error) {
      const hopeless = error instanceof TesseraError && !error.retryable;
      backend.telemetry.count(hopeless ? 'poison' : 'failed');
      backend.telemetry.log(hopeless ? 'ERROR' : 'WARN', hopeless ? 'scene-rejected' : 'scene-failed', { ...where, error });
      if (hopeless) {
        // Settled at once (shared/app/poison.ts): onto `<scene queue>-poison` by this handler, then success, so the
        // host does not retry it maxDequeueCount times 330 s apart. Only if that copy fails does the host's count decide.
        const settled = await settlePoison(
          runtime.poisonQueue(triggerQueueName(context, SCENE_EVENT_QUEUE)),
          {
            body: entryText(entry),
            messageId: String(context.triggerMetadata?.id ?? where.eventId ?? context.invocationId),
            ...poisonReason(error),
          },
          backend.telemetry,
        );
        if (settled.kind === 'dead-lettered') return { kind: 'poison', code: error.code, message: error.message };
      }
      throw error;
    }
  };
}
