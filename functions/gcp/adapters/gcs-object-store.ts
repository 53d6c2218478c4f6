import type { Bucket, File, FileMetadata } from '@google-cloud/storage';
import { CONTENT_SHA256_METADATA, type ContentDigest, compareContent, contentDigest } from '../../../shared/domain/content-digest.js';
import {
  AdapterError,
  CorruptUploadError,
  type IntegrityRefusal,
  isIntegrityRefusal,
  ObjectNotFoundError,
  SourceChangedError,
} from '../../../shared/domain/errors.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import type {
  DeleteIfVersionResult,
  ObjectHead,
  ObjectStore,
  PutIfAbsentResult,
  PutIfMatchResult,
  PutOptions,
  ReadPin,
} from '../../../shared/ports/object-store.port.js';

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

/**
 * How GCS refuses an upload whose body does not match the `md5Hash` (or a `crc32c`) sent in its metadata:
 * 400 with reason `invalid`, which GCS uses for many other things, so the message tells it apart
 * ("Provided MD5 hash ... doesn't match calculated MD5 hash ...", the same words from fake-gcs-server).
 * Nothing is stored; the write is transient (CorruptUploadError).
 */
const GCS_INTEGRITY_REFUSAL: IntegrityRefusal = { status: 400, message: /doesn't match calculated (MD5 hash|CRC32C)/i };

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
 * - The SDK's own upload validation is OFF (`validation: false`): with it on,
 *   `file.save` DELETES the object, with no generation precondition, when the
 *   answer's crc32c/md5 differs from the local one or is missing, which on a
 *   repair deletes the new tile, or another writer's. Instead every upload
 *   sends the body's `md5Hash` in the object resource, so GCS itself refuses a
 *   corrupt body (400) before anything is stored, and the SHA-256 as custom
 *   metadata `tesserasha256`.
 * - The SDK retries a conditional upload (408/429/5xx/network, never a 412).
 *   A retry whose first attempt landed but whose answer was lost meets 412; the
 *   object in place is then compared with the body (size and md5Hash, which GCS
 *   computes itself): the same bytes are this job's own write (`already-present`
 *   with `sameBytes`, or `written` for a repair), other bytes are reported as foreign.
 * - Pinned reads name the generation (`?generation=`): the bytes of exactly
 *   that generation, or 404, which with a pin is SourceChanged (the generation
 *   was replaced and, without bucket versioning, is gone).
 *
 * @example
 * const store = new GcsObjectStore(new Storage().bucket('tessera-outputs'));
 * await store.putIfAbsent('tiles/abc/0_0.tif', bytes); // { kind: 'written', version: '1718...' }
 */
export class GcsObjectStore implements ObjectStore {
  readonly name = STORE;

  /** @param bucket an SDK bucket handle; the bucket must exist. */
  constructor(private readonly bucket: Bucket) {}

  uriOf(key: string): string {
    return `gs://${this.bucket.name}/${key.split('/').map(encodeURIComponent).join('/')}`;
  }

  async putIfAbsent(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutIfAbsentResult> {
    const file = this.file(key);
    const digest = contentDigest(body);
    try {
      const generation = await this.upload(file, body, digest, 0, options);
      return { kind: 'written', version: generation };
    } catch (error) {
      if (httpStatus(error) !== 412) throw this.writeFailure('create-only upload', key, error);
      // Taken: say whose bytes are there. Gone again since the 412: not ours either.
      const current = await this.stored(key);
      if (!current) return { kind: 'already-present', sameBytes: false };
      return { kind: 'already-present', sameBytes: current.same(digest), current: current.head };
    }
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options: PutOptions = {}): Promise<PutIfMatchResult> {
    const file = this.file(key);
    const digest = contentDigest(body);
    // GCS answers 412 both for "absent" and for "another generation": look, to say which, and whether
    // the other generation is exactly our bytes (an earlier attempt landed, its answer was lost): written.
    const decide = async (): Promise<PutIfMatchResult> => {
      const current = await this.stored(key);
      if (!current) return { kind: 'absent' };
      if (current.same(digest)) return { kind: 'written', version: current.head.version };
      return { kind: 'version-mismatch', current: current.head.version };
    };
    // Not a generation: no object can be at that version. Say what is there instead.
    if (!GENERATION.test(expectedVersion)) return decide();
    try {
      const generation = await this.upload(file, body, digest, expectedVersion, options);
      return { kind: 'written', version: generation };
    } catch (error) {
      if (httpStatus(error) !== 412) throw this.writeFailure(`repair upload at generation ${expectedVersion}`, key, error);
      return decide();
    }
  }

  /**
   * One DELETE with `ifGenerationMatch=<generation>`: GCS removes the live
   * object only at that generation, atomically. 412 (another generation, or
   * none) is told apart by one metadata read; 404 is `absent`. The SDK may
   * retry the DELETE (its precondition makes it idempotent); a retry whose
   * first attempt landed meets 404 or 412 on a missing object: `absent`.
   */
  async deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult> {
    const file = this.file(key);
    const decide = async (): Promise<DeleteIfVersionResult> => {
      const current = await this.head(key);
      return current ? { kind: 'version-mismatch', current: current.version } : { kind: 'absent' };
    };
    if (!GENERATION.test(version)) return decide();
    try {
      await file.delete({ ifGenerationMatch: version });
      return { kind: 'deleted' };
    } catch (error) {
      const status = httpStatus(error);
      if (status === 404) return { kind: 'absent' };
      if (status !== 412) throw this.failure(`conditional delete of ${key} at generation ${version}`, error);
      return decide();
    }
  }

  /** The generation named by a job key must be the live one. */
  async pin(key: string, version: string): Promise<ReadPin> {
    const current = await this.head(key);
    if (current?.version === version && GENERATION.test(version)) return { version };
    // An event's generation that is no longer live (new bytes uploaded since; a metadata change only bumps the
    // metageneration, so it never lands here): a versioned bucket keeps it, and the event's scene is made of exactly
    // that generation. Gone: the event is stale.
    if (GENERATION.test(version) && (await this.hasGeneration(key, version))) return { version };
    if (!current) throw new ObjectNotFoundError(STORE, key);
    throw new SourceChangedError(STORE, key, version, current.version);
  }

  /** Whether the bucket still keeps `generation` of `key`. */
  private async hasGeneration(key: string, generation: string): Promise<boolean> {
    try {
      await this.bucket.file(validateObjectKey(key), { generation }).getMetadata();
      return true;
    } catch (error) {
      if (httpStatus(error) === 404) return false;
      throw this.failure(`metadata read of generation ${generation} of ${key}`, error);
    }
  }

  async getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array> {
    validateObjectKey(key);
    if (pin && !GENERATION.test(pin.version)) throw new SourceChangedError(STORE, key, pin.version, undefined);
    // Pinned: exactly that generation; GCS answers 404 once it is replaced (and, unversioned, gone).
    const file = pin ? this.bucket.file(key, { generation: pin.version }) : this.file(key);
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0) {
      throw new AdapterError(
        `[object-store:${STORE}] range [${start}, ${end}) of ${key} is not a range of whole bytes; pass 0 <= start <= end`,
      );
    }
    if (end <= start) {
      const there = await file.getMetadata().then(
        () => true,
        (error: unknown) => {
          if (httpStatus(error) === 404) return false;
          throw this.failure(`metadata read of ${key}`, error);
        },
      );
      if (!there) throw pin ? new SourceChangedError(STORE, key, pin.version, undefined) : new ObjectNotFoundError(STORE, key);
      return new Uint8Array();
    }
    try {
      // `end` of the SDK is inclusive; GCS clips a range that runs past the object.
      const [bytes] = await file.download({ start, end: end - 1, validation: false });
      return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    } catch (error) {
      const status = httpStatus(error);
      if (status === 404 && pin) throw new SourceChangedError(STORE, key, pin.version, undefined, { cause: error });
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
    return (await this.stored(key))?.head;
  }

  /** The head, and a comparison of the live object's bytes with a body (size, md5Hash, our SHA-256 metadata). */
  private async stored(key: string): Promise<{ head: ObjectHead; same(digest: ContentDigest): boolean } | undefined> {
    const file = this.file(key);
    let metadata: FileMetadata;
    try {
      [metadata] = await file.getMetadata();
    } catch (error) {
      if (httpStatus(error) === 404) return undefined;
      throw this.failure(`metadata read of ${key}`, error);
    }
    const custom = metadata.metadata?.[CONTENT_SHA256_METADATA];
    const content = {
      size: Number(metadata.size ?? -1),
      md5Base64: typeof metadata.md5Hash === 'string' ? metadata.md5Hash : undefined,
      sha256Hex: typeof custom === 'string' ? custom : undefined,
    };
    return { head: toHead(key, metadata), same: (digest) => compareContent(content, digest) === 'same' };
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

  /**
   * One multipart request, conditional on `generation` (0: the object must not
   * exist), carrying the body's MD5 so GCS refuses a corrupt body. The SDK's
   * validation is off: it would answer a checksum doubt with an unconditional
   * DELETE. Returns the new generation.
   */
  private async upload(
    file: File,
    body: Uint8Array,
    digest: ContentDigest,
    generation: number | string,
    options: PutOptions,
  ): Promise<string> {
    await file.save(Buffer.from(body.buffer, body.byteOffset, body.byteLength), {
      resumable: false,
      validation: false,
      preconditionOpts: { ifGenerationMatch: generation },
      metadata: {
        md5Hash: digest.md5Base64,
        metadata: { [CONTENT_SHA256_METADATA]: digest.sha256Hex },
        ...(options.contentType ? { contentType: options.contentType } : {}),
      },
    });
    const written = file.metadata.generation;
    if (written === undefined || written === null || String(written) === '') {
      throw new AdapterError(
        `[object-store:${STORE}] upload of ${file.name} returned no generation; the write landed but its version is unknown`,
      );
    }
    return String(written);
  }

  /** A failed upload: a body GCS refused as damaged is transient (CorruptUploadError), anything else as {@link failure} says. */
  private writeFailure(what: string, key: string, error: unknown): Error {
    const message = error instanceof Error ? error.message : String(error);
    if (isIntegrityRefusal({ status: httpStatus(error), message }, GCS_INTEGRITY_REFUSAL))
      return new CorruptUploadError(STORE, key, what, `HTTP 400: ${message}`, { cause: error });
    return this.failure(`${what} of ${key}`, error);
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
