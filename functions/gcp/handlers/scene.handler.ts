import type { CloudEvent } from '@google-cloud/functions-framework';
import type { StaleEventReason } from '../../../shared/app/fan-out.js';
import { acceptSourceObject } from '../../../shared/app/scene-event.js';
import { eventTimeMs, fanOutSourceEvent } from '../../../shared/app/stac-scene.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { InvalidEventError, TesseraError } from '../../../shared/domain/errors.js';
import type { SourceRef } from '../../../shared/domain/job-key.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import type { GcpRuntime } from '../compose.js';

/** The Eventarc event type of a new object generation in a bucket. */
export const STORAGE_OBJECT_FINALIZED = 'google.cloud.storage.object.v1.finalized';

/** The fields of a GCS object the finalized event carries (a StorageObjectData; the rest is ignored). */
export interface StorageObjectData {
  readonly bucket?: string;
  /** The object name, as stored: NOT URL-encoded (unlike S3 notifications). */
  readonly name?: string;
  /** int64 as a decimal string (JSON encoding of the protobuf); a number from some producers. */
  readonly generation?: string | number;
  readonly metageneration?: string | number;
  readonly size?: string | number;
  readonly contentType?: string;
}

/** What the scene handler did with one event. */
export type SceneEventOutcome =
  | { readonly kind: 'fanned-out'; readonly sceneKey: string; readonly enqueued: number; readonly source: SourceRef }
  | {
      readonly kind: 'ignored';
      readonly reason: 'other-event' | 'other-bucket' | 'filtered-out' | 'stale-generation' | 'object-gone' | StaleEventReason;
      readonly key?: string | undefined;
    }
  /** Cannot succeed on any retry (malformed event, not a raster, bad parameters): logged at ERROR, counted, acknowledged. */
  | { readonly kind: 'poison'; readonly code: string; readonly message: string };

/** The object the event names, with its generation as the version token. Throws InvalidEventError. */
export function sourceOf(event: CloudEvent<StorageObjectData>): SourceRef {
  const data = event.data;
  const bucket = data?.bucket;
  const name = data?.name;
  const generation = data?.generation;
  if (typeof bucket !== 'string' || bucket === '' || typeof name !== 'string') {
    throw new InvalidEventError(`storage event ${event.id} has no data.bucket or data.name`);
  }
  const versionToken = typeof generation === 'number' ? String(generation) : generation;
  if (typeof versionToken !== 'string' || !/^[1-9][0-9]*$/.test(versionToken)) {
    throw new InvalidEventError(
      `storage event ${event.id} for gs://${bucket}/${name} has no valid data.generation (${JSON.stringify(generation)})`,
    );
  }
  // GCS delivers the name as stored: `+`, `%2F` and unicode are literal characters, never decoded.
  return { bucket, key: validateObjectKey(name), versionToken };
}

/**
 * The scene trigger: a CloudEvent function for `google.cloud.storage.object.v1.finalized`
 * on the source bucket (Eventarc, event-driven: 540 s ceiling).
 *
 * Objects outside the configured bucket, prefix or suffix are ignored and
 * counted, and so is an event whose generation is no longer the live one (the
 * object was overwritten or deleted since: the newer generation has its own
 * event, and reads would see its bytes). For a scene it takes the generation
 * as the version token (a new upload of the same name is a new generation, so
 * a new scene key) and fans out: the scene manifest create-only, one Pub/Sub
 * message per window. A duplicate event repeats the fan-out harmlessly.
 *
 * Returning acknowledges the event. It throws only for failures a retry may
 * fix (the trigger must have retries on); an event that can never succeed is
 * logged at ERROR, counted as `poison`, published to the dead-letter topic
 * (when one is configured) and acknowledged, since Eventarc would otherwise
 * retry it for 24 hours.
 */
export function createSceneHandler(runtime: GcpRuntime | (() => GcpRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;

  return async function sceneHandler(event: CloudEvent<StorageObjectData>): Promise<SceneEventOutcome> {
    const { backend, config, filter } = rt();
    const { telemetry } = backend;
    const ignore = (reason: Extract<SceneEventOutcome, { kind: 'ignored' }>['reason'], key?: string): SceneEventOutcome => {
      telemetry.count('event-ignored');
      telemetry.log(reason === 'filtered-out' ? 'INFO' : 'WARN', 'event-ignored', { reason, eventId: event.id, type: event.type, key });
      return { kind: 'ignored', reason, key };
    };
    try {
      if (event.type !== STORAGE_OBJECT_FINALIZED) return ignore('other-event');
      const source = sourceOf(event);
      if (source.bucket !== config.sourceBucket) return ignore('other-bucket', source.key);
      if (!acceptSourceObject(source.key, filter)) return ignore('filtered-out', source.key);
      // The scene is the generation the event names, read pinned to it whatever is live now: a metadata update
      // changes only the metageneration, and a newer upload has its own event and its own scene. A generation the
      // bucket no longer keeps is stale (the pin says so: source-changed, or object-gone once nothing is left).
      // A STAC stack's object is an item (shared/app/stac-scene.ts). Eventarc gives no delivery count and retries
      // for 24 h, so the event's own time bounds the wait for a band that is not there yet.
      const fan = await fanOutSourceEvent(backend, source, config, { eventTimeMs: eventTimeMs(event.time) });
      switch (fan.kind) {
        case 'fanned-out':
          return { kind: 'fanned-out', sceneKey: fan.result.sceneKey, enqueued: fan.result.enqueued, source };
        case 'source-changed':
          return ignore('stale-generation', source.key);
        case 'source-gone':
          return ignore('object-gone', source.key);
        case 'stale':
          return ignore(fan.reason, source.key);
        default:
          return assertNever(fan, 'scene fan-out');
      }
    } catch (error) {
      if (error instanceof TesseraError && !error.retryable) {
        telemetry.count('poison');
        telemetry.log('ERROR', 'scene-poison', { eventId: event.id, subject: event.subject, code: error.code, error });
        // Settled at once, as on every cloud (shared/app/poison.ts): the event into the dead-letter topic, then
        // acknowledged. A failed publish throws (retryable), so the event is retried rather than lost.
        const { deadLetters } = rt();
        if (deadLetters) {
          await deadLetters.send({
            data: Buffer.from(JSON.stringify({ id: event.id, type: event.type, subject: event.subject, data: event.data }), 'utf8'),
            reason: error.code,
            error: error.message,
            messageId: event.id,
          });
          telemetry.log('WARN', 'poison-dead-lettered', { eventId: event.id, reason: error.code, sink: deadLetters.name });
        }
        return { kind: 'poison', code: error.code, message: error.message };
      }
      telemetry.count('failed');
      telemetry.log('WARN', 'scene-failed', { eventId: event.id, subject: event.subject, error });
      throw error;
    }
  };
}
