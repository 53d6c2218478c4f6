import type { EventGridEvent } from '@azure/functions';
import { InvalidEventError } from '../../../shared/domain/errors.js';

/** The Event Grid event type of a committed blob (Put Blob, Put Block List, Copy Blob, Flush With Close). */
export const BLOB_CREATED = 'Microsoft.Storage.BlobCreated';

const SUBJECT = /^\/blobServices\/default\/containers\/([^/]+)\/blobs\/(.+)$/s;

/**
 * The `data.api` values of a BlobCreated event whose blob's bytes are committed
 * (Azure's "Blob Storage as an Event Grid source" event list):
 * - Blob REST API: PutBlob, PutBlockList (the block blob is completely
 *   committed), CopyBlob (on a hierarchical-namespace account the event fires
 *   when a copy that does not finish at once starts: see docs/azure.md);
 * - Data Lake Storage REST API: FlushWithClose (CreateFile announces an empty file);
 * - SFTP: SftpCommit (SftpCreate announces an empty blob, SftpWrite a part of a
 *   resumable upload).
 * Anything else, an unknown API included, starts no scene: it is counted as ignored.
 */
export const COMMITTING_BLOB_APIS: readonly string[] = ['PutBlob', 'PutBlockList', 'CopyBlob', 'FlushWithClose', 'SftpCommit'];

/** Whether a BlobCreated event's API commits the blob's bytes ({@link COMMITTING_BLOB_APIS}). */
export const commitsBlob = (api: string | undefined): boolean => api !== undefined && COMMITTING_BLOB_APIS.includes(api);

/**
 * The queue a queue-triggered invocation came from: the binding's `queueName`
 * as the host reports it in `options.trigger`, unless that is a binding
 * expression (`%SETTING%`), or the function is not queue-triggered; then `fallback`.
 */
export function triggerQueueName(context: { readonly options?: { readonly trigger?: unknown } }, fallback: string): string {
  const name = (context.options?.trigger as { queueName?: unknown } | undefined)?.queueName;
  return typeof name === 'string' && name !== '' && !name.includes('%') ? name : fallback;
}

/** A trigger input as message text (for a poison entry): text as it came, an object as JSON. */
export function entryText(entry: unknown): string {
  if (typeof entry === 'string') return entry;
  if (Buffer.isBuffer(entry)) return entry.toString('utf8');
  return JSON.stringify(entry) ?? String(entry);
}

/** What a BlobCreated event says about the blob. */
export interface BlobCreated {
  readonly container: string;
  /** The blob name exactly as stored: NOT URL-decoded (see {@link parseBlobCreated}). */
  readonly key: string;
  /** The blob's ETag in the form the Blob service returns it in headers (quoted), so it equals a head's version. */
  readonly etag: string;
  /** The storage operation: PutBlob, PutBlockList, CopyBlob, FlushWithClose, CreateFile (ADLS, empty), ... */
  readonly api: string | undefined;
  readonly contentLength: number | undefined;
}

/**
 * Read a BlobCreated event (Event Grid schema, as the v4 Event Grid trigger
 * passes it). Throws InvalidEventError for anything else.
 *
 * The blob name comes from the subject,
 * `/blobServices/default/containers/<container>/blobs/<name>`, where Event
 * Grid writes the name as stored, unencoded: a blob named `a+b.tif` or
 * `a%2Fb.tif` appears literally. Decoding it the way S3 notification keys are
 * decoded (`+` as space, `%2F` as `/`) would name another blob and give a
 * different job key, so it is not decoded.
 *
 * Event Grid writes `data.eTag` without the quotes the Blob service puts
 * around ETag headers (`0x8D4BCC2E4835CD0`); it is quoted here so the version
 * token in job keys is the same whether it came from an event or a head.
 */
export function parseBlobCreated(event: EventGridEvent): BlobCreated {
  if (typeof event !== 'object' || event === null) throw new InvalidEventError('Event Grid event is not an object');
  if (event.eventType !== BLOB_CREATED) {
    throw new InvalidEventError(`Event Grid event ${event.id} is ${JSON.stringify(event.eventType)}, not ${BLOB_CREATED}`);
  }
  const m = typeof event.subject === 'string' ? SUBJECT.exec(event.subject) : null;
  if (!m) {
    throw new InvalidEventError(
      `Event Grid event ${event.id} has subject ${JSON.stringify(event.subject)}, not /blobServices/default/containers/<container>/blobs/<name>`,
    );
  }
  const data = (typeof event.data === 'object' && event.data !== null ? event.data : {}) as Record<string, unknown>;
  const raw = data.eTag;
  if (typeof raw !== 'string' || raw.length === 0)
    throw new InvalidEventError(`Event Grid event ${event.id} has no data.eTag; the job key needs it`);
  return {
    container: m[1] as string,
    key: m[2] as string,
    etag: quoteEtag(raw),
    api: typeof data.api === 'string' ? data.api : undefined,
    contentLength: typeof data.contentLength === 'number' ? data.contentLength : undefined,
  };
}

/**
 * The Event Grid event in a trigger's input. Infra delivers BlobCreated events
 * through Storage Queues (a subscription to a queue needs no function to exist
 * yet), so the input is usually a queue message: the v4 library hands JSON
 * text over parsed, and a string or Buffer is parsed here. A direct Event Grid
 * trigger passes the event object itself. Either way the result is checked by
 * {@link parseBlobCreated}.
 */
export function eventOf(entry: unknown): EventGridEvent {
  let value = entry;
  if (Buffer.isBuffer(value)) value = value.toString('utf8');
  if (typeof value === 'string') {
    const text = value;
    try {
      value = JSON.parse(text);
    } catch (cause) {
      throw new InvalidEventError(`queue message is not an Event Grid event (not JSON): ${JSON.stringify(text.slice(0, 80))}`, { cause });
    }
  }
  // Event Grid posts arrays to webhooks; a queue message holds one event. Accept a one-event array either way.
  if (Array.isArray(value) && value.length === 1) value = value[0];
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new InvalidEventError('trigger input is not one Event Grid event');
  return value as EventGridEvent;
}

/** `0x8D...` to `"0x8D..."`; an already quoted (or weak `W/"..."`) ETag is kept. */
export function quoteEtag(etag: string): string {
  return etag.startsWith('"') || etag.startsWith('W/"') ? etag : `"${etag}"`;
}
