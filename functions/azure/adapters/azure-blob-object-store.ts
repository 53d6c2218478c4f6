import type { BlobDownloadResponseParsed, ContainerClient } from '@azure/storage-blob';
import { AdapterError, ObjectNotFoundError } from '../../../shared/domain/errors.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import type { ObjectHead, ObjectStore, PutIfAbsentResult, PutIfMatchResult, PutOptions } from '../../../shared/ports/object-store.port.js';
import { isFailure, storageFailure } from './rest-error.js';

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
 * @example
 * const container = BlobServiceClient.fromConnectionString(cs).getContainerClient('tiles');
 * const store = new AzureBlobObjectStore(container);
 * await store.putIfAbsent('tiles/ab12/0_0.tif', bytes, { contentType: 'image/tiff' });
 */
export class AzureBlobObjectStore implements ObjectStore {
  readonly name = 'azure-blob';

  /** @param container a client for an existing container (infra/ creates it; tests create their own). */
  constructor(private readonly container: ContainerClient) {}

  async putIfAbsent(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutIfAbsentResult> {
    const blob = this.blob(key);
    try {
      const r = await blob.upload(body, body.byteLength, {
        conditions: { ifNoneMatch: '*' },
        ...(options.contentType === undefined ? {} : { blobHTTPHeaders: { blobContentType: options.contentType } }),
      });
      return { kind: 'written', version: this.etagOf(r.etag, key) };
    } catch (e) {
      if (isFailure(e, 409, 'BlobAlreadyExists') || isFailure(e, 412)) return { kind: 'already-present' };
      throw this.failed(`create-only write of ${JSON.stringify(key)}`, e);
    }
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options: PutOptions = {}): Promise<PutIfMatchResult> {
    const blob = this.blob(key);
    try {
      const r = await blob.upload(body, body.byteLength, {
        conditions: { ifMatch: expectedVersion },
        ...(options.contentType === undefined ? {} : { blobHTTPHeaders: { blobContentType: options.contentType } }),
      });
      return { kind: 'written', version: this.etagOf(r.etag, key) };
    } catch (e) {
      if (isFailure(e, 404)) return { kind: 'absent' };
      if (isFailure(e, 412)) {
        // A 412 does not say whether the blob is missing or at another version (Azurite answers 412 for a
        // missing blob; Azure may answer 404). One head settles it; nothing was written either way.
        const current = await this.head(key);
        return current === undefined ? { kind: 'absent' } : { kind: 'version-mismatch', current: current.version };
      }
      throw this.failed(`repair write of ${JSON.stringify(key)} under ${expectedVersion}`, e);
    }
  }

  async getRange(key: string, start: number, end: number): Promise<Uint8Array> {
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
      throw new AdapterError(`[object-store:${this.name}] byte range [${start}, ${end}) of ${JSON.stringify(key)} is not a valid range`);
    }
    if (end === start) {
      // An empty range would be a zero-length x-ms-range, which the service refuses; still honour "throws if missing".
      if ((await this.head(key)) === undefined) throw new ObjectNotFoundError(this.name, key);
      return new Uint8Array();
    }
    try {
      return await this.download(key, start, end - start);
    } catch (e) {
      // 416: the range starts at or past the end of the blob. The port clips, so that is an empty read.
      if (isFailure(e, 416)) return new Uint8Array();
      throw e;
    }
  }

  async get(key: string): Promise<Uint8Array> {
    return this.download(key, 0, undefined);
  }

  async head(key: string): Promise<ObjectHead | undefined> {
    const blob = this.blob(key);
    try {
      const p = await blob.getProperties();
      return {
        key,
        size: p.contentLength ?? 0,
        version: this.etagOf(p.etag, key),
        lastModified: p.lastModified?.getTime() ?? 0,
      };
    } catch (e) {
      if (isFailure(e, 404)) return undefined;
      throw this.failed(`head of ${JSON.stringify(key)}`, e);
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectHead> {
    validatePrefix(prefix);
    try {
      for await (const page of this.container.listBlobsFlat({ prefix }).byPage({ maxPageSize: LIST_PAGE_SIZE })) {
        for (const item of page.segment.blobItems) {
          yield {
            key: item.name,
            size: item.properties.contentLength ?? 0,
            version: this.etagOf(item.properties.etag, item.name),
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

  private async download(key: string, offset: number, count: number | undefined): Promise<Uint8Array> {
    const blob = this.blob(key);
    let response: BlobDownloadResponseParsed;
    try {
      response = await blob.download(offset, count);
    } catch (e) {
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
