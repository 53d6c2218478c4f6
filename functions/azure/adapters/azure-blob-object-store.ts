import type {
  BlobClient,
  BlobDownloadResponseParsed,
  BlobGetPropertiesResponse,
  BlockBlobUploadOptions,
  ContainerClient,
} from '@azure/storage-blob';
import { CONTENT_SHA256_METADATA, type ContentDigest, compareContent, contentDigest } from '../../../shared/domain/content-digest.js';
import { AdapterError, CorruptUploadError, ObjectNotFoundError, SourceChangedError } from '../../../shared/domain/errors.js';
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
import { describeFailure, isFailure, isIntegrityFailure, storageFailure } from './rest-error.js';

/** A pin handle naming a blob version (versioning) rather than a snapshot time: `version:<versionId>`. */
const VERSION_HANDLE = 'version:';
/** Blobs per list page: the service maximum, so a prefix of a few thousand tiles costs a handful of requests. */
const LIST_PAGE_SIZE = 5000;

/**
 * The object store on Azure Blob Storage (one container).
 *
 * Every write is a single Put Blob carrying its precondition, so the check and
 * the write are one request the service evaluates under its own lock:
 * - create-only: `If-None-Match: *`. Azure answers a lost race with
 *   409 BlobAlreadyExists; 412 ConditionNotMet is also accepted as
 *   already-present because a conditional-header failure on a create means the
 *   same thing (handling only one of the two leaves the other path to throw
 *   into the Functions host, which would retry a job that already succeeded).
 * - repair: `If-Match: <etag>`. 412 is a version mismatch and 404 means absent.
 *
 * The blob ETag (quotes included, as the service returns it) is the version token.
 *
 * Every Put Blob carries the body's MD5 as `Content-MD5` (the service refuses a
 * body that does not match, 400 Md5Mismatch) and as the blob's stored
 * Content-MD5 property, and its SHA-256 as metadata `tesserasha256`. When a
 * write meets 409/412, the blob in place is compared with the body: the same
 * bytes are this job's own write (a duplicate, or an earlier attempt whose
 * answer was lost), other bytes are reported as foreign.
 *
 * Pinned reads do not use `If-Match` on the ETag: Set Blob Metadata or
 * Properties changes the ETag and not the bytes, so a tag or a content-type fix
 * would fail every tile. `pin` takes (or reuses) a SNAPSHOT of the blob,
 * conditional on the ETag named by the job key, and the handle is the snapshot
 * time: a snapshot is read-only and keeps exactly those bytes whatever happens
 * to the base blob. Snapshots are not deleted on their own by Tessera (that
 * would be a delete without a precondition on the data it names); a lifecycle
 * rule expires them, and `deleteIfVersion` takes them with the base blob.
 *
 * A delete is one Delete Blob with `If-Match: <etag>` and
 * `x-ms-delete-snapshots: include`: a blob with snapshots cannot be deleted
 * alone (409 SnapshotsPresent), and its snapshots are the pins of its
 * versions; a job still reading one fails with SourceChanged, as it would
 * for any source removed mid-scene.
 *
 * @example
 * const container = BlobServiceClient.fromConnectionString(cs).getContainerClient('tiles');
 * const store = new AzureBlobObjectStore(container);
 * await store.putIfAbsent('tiles/ab12/0_0.tif', bytes, { contentType: 'image/tiff' });
 */
export class AzureBlobObjectStore implements ObjectStore {
  readonly name = 'azure-blob';

  /** @param container a client for an existing container (infra/ creates it; tests create their own). */
  constructor(private readonly container: ContainerClient) {}

  uriOf(key: string): string {
    return `${this.container.url}/${key.split('/').map(encodeURIComponent).join('/')}`;
  }

  async putIfAbsent(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutIfAbsentResult> {
    const blob = this.blob(key);
    const digest = contentDigest(body);
    try {
      const r = await blob.upload(body, body.byteLength, this.uploadOptions(digest, options, { ifNoneMatch: '*' }));
      return { kind: 'written', version: this.etagOf(r.etag, key) };
    } catch (e) {
      if (!(isFailure(e, 409, 'BlobAlreadyExists') || isFailure(e, 412))) throw this.writeFailed('create-only write', key, e);
      // Taken: say whose bytes are there. Gone again since the refusal: not ours either.
      const current = await this.stored(key);
      if (!current) return { kind: 'already-present', sameBytes: false };
      return { kind: 'already-present', sameBytes: current.same(digest), current: current.head };
    }
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options: PutOptions = {}): Promise<PutIfMatchResult> {
    const blob = this.blob(key);
    const digest = contentDigest(body);
    try {
      const r = await blob.upload(body, body.byteLength, this.uploadOptions(digest, options, { ifMatch: expectedVersion }));
      return { kind: 'written', version: this.etagOf(r.etag, key) };
    } catch (e) {
      if (isFailure(e, 404)) return { kind: 'absent' };
      if (isFailure(e, 412)) {
        // A 412 does not say whether the blob is missing or at another version (Azurite answers 412 for a
        // missing blob; Azure may answer 404). One head settles it, and says whether the other version is
        // exactly our bytes (an earlier attempt landed, its answer was lost): written. This request wrote nothing.
        const current = await this.stored(key);
        if (current === undefined) return { kind: 'absent' };
        if (current.same(digest)) return { kind: 'written', version: current.head.version };
        return { kind: 'version-mismatch', current: current.head.version };
      }
      throw this.writeFailed(`repair write under ${expectedVersion}`, key, e);
    }
  }

  async deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult> {
    const blob = this.blob(key);
    try {
      await blob.delete({ deleteSnapshots: 'include', conditions: { ifMatch: quoted(version) } });
      return { kind: 'deleted' };
    } catch (e) {
      if (isFailure(e, 404)) return { kind: 'absent' };
      if (isFailure(e, 412)) {
        // Another version, or (Azurite) none: one head says which. This request deleted nothing.
        const current = await this.head(key);
        return current === undefined ? { kind: 'absent' } : { kind: 'version-mismatch', current: current.version };
      }
      throw this.failed(`conditional delete of ${JSON.stringify(key)} under ${version}`, e);
    }
  }

  /**
   * The bytes whose ETag the job key names, whatever happened to the blob since: a metadata or property update
   * changes a blob's ETag with the same bytes and sends no event, so a redelivered event's ETag may no longer be
   * the live one. In order:
   * 1. a snapshot of `key` with that ETag (the first fan-out's pin made one): reused, so every delivery and every
   *    tile of the scene reads the same snapshot;
   * 2. the live blob, if it still has that ETag: a snapshot of it, created with `If-Match: <etag>`;
   * 3. a blob version with that ETag (versioning is on in every stack, infra/azure): read by its version id;
   * 4. otherwise the ETag names no stored state: SourceChangedError (the event is stale), or ObjectNotFoundError
   *    when nothing of the blob is left.
   * Azurite keeps no blob versions, so step 3 finds nothing there (docs/emulator-fidelity.md).
   */
  async pin(key: string, version: string): Promise<ReadPin> {
    const blob = this.blob(key);
    const existing = await this.snapshotOf(key, version);
    if (existing !== undefined) return { version, handle: existing };
    const current = await this.head(key);
    // Event Grid carries the ETag without quotes; the headers put them around it.
    if (current !== undefined && quoted(current.version) === quoted(version)) {
      try {
        const r = await blob.createSnapshot({ conditions: { ifMatch: quoted(version) } });
        if (!r.snapshot) throw new AdapterError(`[object-store:${this.name}] snapshot of ${JSON.stringify(key)} returned no snapshot time`);
        return { version, handle: r.snapshot };
      } catch (e) {
        if (!(isFailure(e, 412) || isFailure(e, 404)))
          throw e instanceof AdapterError ? e : this.failed(`snapshot of ${JSON.stringify(key)}`, e);
        // Changed between the head and the snapshot: a version may still hold it.
      }
    }
    const versionId = await this.versionOf(key, version);
    if (versionId !== undefined) return { version, handle: `${VERSION_HANDLE}${versionId}` };
    const now = await this.head(key);
    if (now === undefined && current === undefined) throw new ObjectNotFoundError(this.name, key);
    throw new SourceChangedError(this.name, key, version, now?.version);
  }

  async getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array> {
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
      throw new AdapterError(`[object-store:${this.name}] byte range [${start}, ${end}) of ${JSON.stringify(key)} is not a valid range`);
    }
    if (end === start) {
      // An empty range would be a zero-length x-ms-range, which the service refuses; still honour "throws if missing".
      if (pin) {
        try {
          await this.pinned(key, pin).client.getProperties({ conditions: this.pinned(key, pin).conditions });
        } catch (e) {
          if (isFailure(e, 404) || isFailure(e, 412)) throw new SourceChangedError(this.name, key, pin.version, undefined, { cause: e });
          throw this.failed(`head of ${JSON.stringify(key)}`, e);
        }
      } else if ((await this.head(key)) === undefined) throw new ObjectNotFoundError(this.name, key);
      return new Uint8Array();
    }
    try {
      return await this.download(key, start, end - start, pin);
    } catch (e) {
      // 416: the range starts at or past the end of the blob. The port clips, so that is an empty read.
      if (isFailure(e, 416)) return new Uint8Array();
      throw e;
    }
  }

  async get(key: string): Promise<Uint8Array> {
    return this.download(key, 0, undefined, undefined);
  }

  async head(key: string): Promise<ObjectHead | undefined> {
    return (await this.stored(key))?.head;
  }

  /** The head, and a comparison of the blob's bytes with a body (size, Content-MD5, our SHA-256 metadata). */
  private async stored(key: string): Promise<{ head: ObjectHead; same(digest: ContentDigest): boolean } | undefined> {
    const blob = this.blob(key);
    let p: BlobGetPropertiesResponse;
    try {
      p = await blob.getProperties();
    } catch (e) {
      if (isFailure(e, 404)) return undefined;
      throw this.failed(`head of ${JSON.stringify(key)}`, e);
    }
    const head = { key, size: p.contentLength ?? 0, version: this.etagOf(p.etag, key), lastModified: p.lastModified?.getTime() ?? 0 };
    const content = {
      size: head.size,
      md5Base64: p.contentMD5 ? Buffer.from(p.contentMD5).toString('base64') : undefined,
      sha256Hex: p.metadata?.[CONTENT_SHA256_METADATA],
    };
    return { head, same: (digest) => compareContent(content, digest) === 'same' };
  }

  /**
   * Content-MD5 checked by the service and kept as the blob's MD5; the SHA-256 as metadata; the precondition.
   * `transactionalContentMD5` is read by the SDK's upload (setUploadChecksumParameters, under the
   * `Customized` checksum algorithm, its default) but missing from its declared options type; the wire
   * test (test/azure/azure-blob-object-store.test.ts) shows the Content-MD5 header leaving.
   */
  private uploadOptions(
    digest: ContentDigest,
    options: PutOptions,
    conditions: { ifNoneMatch: string } | { ifMatch: string },
  ): BlockBlobUploadOptions & { transactionalContentMD5: Uint8Array } {
    const md5 = Buffer.from(digest.md5Base64, 'base64');
    return {
      conditions,
      contentChecksumAlgorithm: 'Customized',
      transactionalContentMD5: md5,
      blobHTTPHeaders: { blobContentMD5: md5, ...(options.contentType === undefined ? {} : { blobContentType: options.contentType }) },
      metadata: { [CONTENT_SHA256_METADATA]: digest.sha256Hex },
    };
  }

  /** An existing snapshot of `key` whose ETag is `etag` (the oldest), so repeated pins of one version share it. */
  private async snapshotOf(key: string, etag: string): Promise<string | undefined> {
    try {
      let found: string | undefined;
      for await (const item of this.container.listBlobsFlat({ prefix: key, includeSnapshots: true })) {
        // Listings give the ETag without the quotes that Get Blob Properties puts around it.
        if (item.name !== key || !item.snapshot || quoted(item.properties.etag) !== quoted(etag)) continue;
        if (found === undefined || item.snapshot < found) found = item.snapshot;
      }
      return found;
    } catch (e) {
      throw this.failed(`listing of the snapshots of ${JSON.stringify(key)}`, e);
    }
  }

  /** The id of a kept version of `key` whose ETag is `etag` (blob versioning), if any. */
  private async versionOf(key: string, etag: string): Promise<string | undefined> {
    try {
      for await (const item of this.container.listBlobsFlat({ prefix: key, includeVersions: true })) {
        if (item.name === key && item.versionId && !item.snapshot && quoted(item.properties.etag) === quoted(etag)) return item.versionId;
      }
      return undefined;
    } catch (e) {
      throw this.failed(`listing of the versions of ${JSON.stringify(key)}`, e);
    }
  }

  /**
   * How a pinned read addresses its bytes: the snapshot or the blob version named by the handle, or, for a pin
   * without one, the base blob under `If-Match` (a metadata update then reads as a change: the snapshot is the
   * faithful path).
   */
  private pinned(key: string, pin: ReadPin): { client: BlobClient; conditions: { ifMatch?: string } } {
    const blob = this.blob(key);
    if (pin.handle?.startsWith(VERSION_HANDLE))
      return { client: blob.withVersion(pin.handle.slice(VERSION_HANDLE.length)), conditions: {} };
    if (pin.handle) return { client: blob.withSnapshot(pin.handle), conditions: {} };
    return { client: blob, conditions: { ifMatch: quoted(pin.version) } };
  }

  async *list(prefix: string): AsyncIterable<ObjectHead> {
    validatePrefix(prefix);
    try {
      for await (const page of this.container.listBlobsFlat({ prefix }).byPage({ maxPageSize: LIST_PAGE_SIZE })) {
        for (const item of page.segment.blobItems) {
          yield {
            key: item.name,
            size: item.properties.contentLength ?? 0,
            // Quoted as Get Blob Properties and Put Blob return it, so a listed version works as a precondition.
            version: quoted(this.etagOf(item.properties.etag, item.name)),
            lastModified: item.properties.lastModified.getTime(),
          };
        }
      }
    } catch (e) {
      throw this.failed(`listing of prefix ${JSON.stringify(prefix)}`, e);
    }
  }

  private blob(key: string) {
    return this.container.getBlockBlobClient(validateObjectKey(key));
  }

  private async download(key: string, offset: number, count: number | undefined, pin: ReadPin | undefined): Promise<Uint8Array> {
    const target = pin ? this.pinned(key, pin) : { client: this.blob(key), conditions: {} };
    let response: BlobDownloadResponseParsed;
    try {
      response = await target.client.download(offset, count, { conditions: target.conditions });
    } catch (e) {
      // Pinned: the snapshot is gone or the base blob changed. Never "not found" for a version that is gone.
      if (pin && (isFailure(e, 404) || isFailure(e, 412)))
        throw new SourceChangedError(this.name, key, pin.version, undefined, { cause: e });
      if (isFailure(e, 404)) throw new ObjectNotFoundError(this.name, key, { cause: e });
      if (isFailure(e, 416)) throw e; // getRange turns this into an empty read
      throw this.failed(`read of ${JSON.stringify(key)}`, e);
    }
    const stream = response.readableStreamBody;
    if (!stream)
      throw new AdapterError(`[object-store:${this.name}] read of ${JSON.stringify(key)} returned no body stream (not Node.js?)`);
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    } catch (e) {
      throw this.failed(`read of ${JSON.stringify(key)} (body stream)`, e);
    }
    return new Uint8Array(Buffer.concat(chunks));
  }

  private etagOf(etag: string | undefined, key: string): string {
    if (!etag)
      throw new AdapterError(
        `[object-store:${this.name}] the service returned no ETag for ${JSON.stringify(key)}; the ETag is the version token`,
      );
    return etag;
  }

  /** A failed Put Blob: a body the service refused as damaged is transient (CorruptUploadError), anything else as {@link failed} says. */
  private writeFailed(what: string, key: string, cause: unknown): Error {
    if (isIntegrityFailure(cause)) return new CorruptUploadError(this.name, key, what, describeFailure(cause), { cause });
    return this.failed(`${what} of ${JSON.stringify(key)}`, cause);
  }

  private failed(what: string, cause: unknown): AdapterError {
    return storageFailure(cause, what, {
      tag: `object-store:${this.name}`,
      kind: 'container',
      resource: this.container.containerName,
      missingCode: 'ContainerNotFound',
      role: 'Storage Blob Data Contributor',
    });
  }
}

/**
 * A list prefix is a key that may end in `/` (or be empty). It is checked with
 * the key rules by completing its last segment, so the same characters are refused.
 */
function validatePrefix(prefix: string): void {
  if (prefix === '') return;
  validateObjectKey(prefix.endsWith('/') ? `${prefix}_` : prefix);
}

/** An ETag in the quoted form the service's headers use (listings leave the quotes off). */
function quoted(etag: string | undefined): string {
  if (etag === undefined) return '';
  return etag.startsWith('"') ? etag : `"${etag}"`;
}
