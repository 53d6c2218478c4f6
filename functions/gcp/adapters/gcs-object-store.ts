import type { Bucket, File, FileMetadata } from '@google-cloud/storage';
import { AdapterError, ObjectNotFoundError } from '../../../shared/domain/errors.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import type { ObjectHead, ObjectStore, PutIfAbsentResult, PutIfMatchResult, PutOptions } from '../../../shared/ports/object-store.port.js';

const STORE = 'gcs';
/** Objects per list page: the JSON API's maximum. */
const LIST_PAGE_SIZE = 1000;
/** A GCS generation is a positive int64 written in decimal. Anything else cannot match an object. */
const GENERATION = /^[1-9][0-9]{0,18}$/;

/** HTTP status of an error from @google-cloud/storage (ApiError.code), if it carries one. */
function httpStatus(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'number') return code;
  if (typeof code === 'string' && /^\d{3}$/.test(code)) return Number(code);
  return undefined;
}

/** Throttling, server errors and dropped connections may pass on a retry of the same delivery. */
function isTransient(error: unknown): boolean {
  const status = httpStatus(error);
  if (status !== undefined) return status === 408 || status === 429 || status >= 500;
  return true; // no HTTP answer at all: a network failure
}

/**
 * The object store on Google Cloud Storage.
 *
 * - A create is ONE single-request upload (`resumable: false`, a multipart
 *   upload of the JSON API) with `ifGenerationMatch=0`: GCS refuses it with
 *   412 if any live generation exists, which is `already-present`. Resumable
 *   uploads are not used for create-only writes: their precondition travels
 *   with the session and is checked only when the last chunk finalises, after
 *   every byte was sent, and a session can outlive the instance that opened it.
 *   Tiles are a few MB; one request is cheaper and the answer is immediate.
 * - A repair write uses `ifGenerationMatch=<generation>`; the generation is the
 *   version token everywhere in Tessera (events carry it too).
 * - The SDK's retries (408/429/5xx/network only) never retry a 412. A retried
 *   create whose first attempt landed but whose answer was lost reads back as
 *   `already-present`: the output is in place either way, and the caller treats
 *   both answers as success.
 *
 * @example
 * const store = new GcsObjectStore(new Storage().bucket('tessera-outputs'));
 * await store.putIfAbsent('tiles/abc/0_0.tif', bytes); // { kind: 'written', version: '1718...' }
 */
export class GcsObjectStore implements ObjectStore {
  readonly name = STORE;

  /** @param bucket an SDK bucket handle; the bucket must exist. */
  constructor(private readonly bucket: Bucket) {}

  async putIfAbsent(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutIfAbsentResult> {
    const file = this.file(key);
    try {
      const generation = await this.upload(file, body, 0, options);
      return { kind: 'written', version: generation };
    } catch (error) {
      if (httpStatus(error) === 412) return { kind: 'already-present' };
      throw this.failure(`create-only upload of ${key}`, error);
    }
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options: PutOptions = {}): Promise<PutIfMatchResult> {
    const file = this.file(key);
    if (!GENERATION.test(expectedVersion)) {
      // Not a generation: no object can be at that version. Say what is there instead.
      const current = await this.head(key);
      return current ? { kind: 'version-mismatch', current: current.version } : { kind: 'absent' };
    }
    try {
      const generation = await this.upload(file, body, expectedVersion, options);
      return { kind: 'written', version: generation };
    } catch (error) {
      if (httpStatus(error) !== 412) throw this.failure(`repair upload of ${key} at generation ${expectedVersion}`, error);
      // GCS answers 412 both for "absent" and for "another generation": look, to say which.
      const current = await this.head(key);
      return current ? { kind: 'version-mismatch', current: current.version } : { kind: 'absent' };
    }
  }

  async getRange(key: string, start: number, end: number): Promise<Uint8Array> {
    const file = this.file(key);
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0) {
      throw new AdapterError(
        `[object-store:${STORE}] range [${start}, ${end}) of ${key} is not a range of whole bytes; pass 0 <= start <= end`,
      );
    }
    if (end <= start) {
      if (!(await this.head(key))) throw new ObjectNotFoundError(STORE, key);
      return new Uint8Array();
    }
    try {
      // `end` of the SDK is inclusive; GCS clips a range that runs past the object.
      const [bytes] = await file.download({ start, end: end - 1, validation: false });
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    } catch (error) {
      const status = httpStatus(error);
      if (status === 404) throw new ObjectNotFoundError(STORE, key, { cause: error });
      if (status === 416) return new Uint8Array(); // the range starts at or past the end
      throw this.failure(`range read [${start}, ${end}) of ${key}`, error);
    }
  }

  async get(key: string): Promise<Uint8Array> {
    const file = this.file(key);
    try {
      const [bytes] = await file.download();
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    } catch (error) {
      if (httpStatus(error) === 404) throw new ObjectNotFoundError(STORE, key, { cause: error });
      throw this.failure(`download of ${key}`, error);
    }
  }

  async head(key: string): Promise<ObjectHead | undefined> {
    const file = this.file(key);
    try {
      const [metadata] = await file.getMetadata();
      return toHead(key, metadata);
    } catch (error) {
      if (httpStatus(error) === 404) return undefined;
      throw this.failure(`metadata read of ${key}`, error);
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectHead> {
    let pageToken: string | undefined;
    do {
      let files: File[];
      let next: { pageToken?: string } | null | undefined;
      try {
        [files, next] = await this.bucket.getFiles({
          prefix,
          autoPaginate: false,
          maxResults: LIST_PAGE_SIZE,
          ...(pageToken ? { pageToken } : {}),
        });
      } catch (error) {
        throw this.failure(`listing of ${JSON.stringify(prefix)}`, error);
      }
      for (const file of files) yield toHead(file.name, file.metadata);
      pageToken = next?.pageToken;
    } while (pageToken);
  }

  private file(key: string): File {
    return this.bucket.file(validateObjectKey(key));
  }

  /** One multipart request, conditional on `generation` (0: the object must not exist). Returns the new generation. */
  private async upload(file: File, body: Uint8Array, generation: number | string, options: PutOptions): Promise<string> {
    await file.save(Buffer.from(body.buffer, body.byteOffset, body.byteLength), {
      resumable: false,
      preconditionOpts: { ifGenerationMatch: generation },
      ...(options.contentType ? { contentType: options.contentType } : {}),
    });
    const written = file.metadata.generation;
    if (written === undefined || written === null || String(written) === '') {
      throw new AdapterError(
        `[object-store:${STORE}] upload of ${file.name} returned no generation; the write landed but its version is unknown`,
      );
    }
    return String(written);
  }

  private failure(what: string, error: unknown): AdapterError {
    const status = httpStatus(error);
    const detail = error instanceof Error ? error.message : String(error);
    return new AdapterError(
      `[object-store:${STORE}] ${what} in bucket ${this.bucket.name} failed${status ? ` with HTTP ${status}` : ''}: ${detail}; ` +
        (isTransient(error)
          ? 'a retry may succeed'
          : 'check that the bucket exists and the function service account may read and create objects in it'),
      { cause: error, retryable: isTransient(error) },
    );
  }
}

function toHead(key: string, metadata: FileMetadata): ObjectHead {
  return {
    key,
    size: Number(metadata.size ?? 0),
    version: String(metadata.generation ?? ''),
    lastModified: Date.parse(String(metadata.updated ?? metadata.timeCreated ?? '')),
  };
}
