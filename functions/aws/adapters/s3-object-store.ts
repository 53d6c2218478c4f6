import {
  DeleteObjectCommand,
  GetObjectCommand,
  type GetObjectCommandInput,
  type GetObjectCommandOutput,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  type PutObjectCommandInput,
  type S3Client,
} from '@aws-sdk/client-s3';
import {
  CONTENT_SHA256_METADATA,
  type ContentDigest,
  compareContent,
  contentDigest,
  type StoredContent,
} from '../../../shared/domain/content-digest.js';
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
import { awsFailure, backoffDelayMs, describeAwsFailure, isAwsFailure, isRetryableAws, sleep } from './aws-error.js';

/** The only part of an `S3Client` this adapter uses: inject a real client, or a wrapper around one. */
export type S3Sender = Pick<S3Client, 'send'>;

export interface S3ObjectStoreOptions {
  /**
   * How many times a write answered 409 ConditionalRequestConflict (a
   * concurrent conditional write to the same key was in flight) is sent again
   * before the store re-reads the key and decides. Default 4.
   */
  readonly conflictRetries?: number;
  /** Backoff base and cap for those retries (full jitter). Defaults 100 ms and 2,000 ms. */
  readonly conflictBaseDelayMs?: number;
  readonly conflictMaxDelayMs?: number;
  /** Keys per ListObjectsV2 page (1-1000). Default 1000, the S3 maximum. */
  readonly listPageSize?: number;
  /** Seams for tests: the random source of the jitter and the sleep. */
  readonly random?: () => number;
  readonly sleep?: (ms: number) => Promise<void>;
}

/** Keys per list page: the S3 maximum, so a prefix of a few thousand tiles costs a handful of requests. */
const MAX_LIST_PAGE_SIZE = 1000;

type Attempt<T> = { readonly done: T } | { readonly conflict: unknown };

/** An ETag as S3 returns it (quoted) or as an S3 event carries it (bare hex, `-N` for multipart). */
const ETAG = /^"?[0-9a-fA-F]{32}(-\d+)?"?$/;
const unquote = (etag: string): string => etag.replace(/^"|"$/g, '');
/** The ETag of a single-part upload without SSE-KMS: the MD5 of the bytes. */
const MD5_ETAG = /^"?([0-9a-fA-F]{32})"?$/;

/**
 * How S3 refuses a body that does not match what was sent with it: 400 BadDigest (the `x-amz-checksum-sha256`
 * every write carries, or a Content-MD5), XAmzContentSHA256Mismatch (the payload hash SigV4 signs), InvalidDigest
 * (a digest header that arrived damaged itself). Nothing is stored; the write is transient (CorruptUploadError).
 */
const S3_INTEGRITY_REFUSAL: IntegrityRefusal = { status: 400, codes: ['BadDigest', 'XAmzContentSHA256Mismatch', 'InvalidDigest'] };

/** A head with what S3 says about the bytes. */
interface Stored {
  readonly head: ObjectHead;
  readonly etag: string;
  readonly versionId: string | undefined;
  readonly content: StoredContent;
}

/**
 * The object store on Amazon S3 (one bucket).
 *
 * Every write is one PutObject carrying its precondition, which S3 evaluates
 * atomically with the write:
 * - create-only: `If-None-Match: *`. 412 PreconditionFailed means someone got
 *   there first: `already-present`, a success, and the existing object is untouched.
 * - repair: `If-Match: <etag>`. 412 is `version-mismatch` (the current ETag is
 *   read with one HeadObject so the caller can report it); 404 NoSuchKey is `absent`.
 * - 409 ConditionalRequestConflict (S3 answers it when a conflicting
 *   conditional write to the key is in flight) is retried a bounded number of
 *   times with full-jitter backoff; past that the key is re-read and the
 *   outcome decided from what is there.
 *
 * The version token is the `versionId` on a versioned bucket (what the S3
 * event names, and what a read can address for as long as the version lives),
 * else the ETag, quotes included, exactly as HeadObject and PutObject return
 * it. `putIfMatch` takes either: an ETag goes straight into `If-Match`; a
 * versionId is resolved by one HeadObject into the ETag of that version, which
 * then travels as `If-Match` (S3 has no precondition on a versionId, and an
 * ETag names the bytes, so the write still cannot replace other bytes).
 * `list` reports ETags (ListObjectsV2 has no versionIds).
 *
 * Every write carries the SHA-256 of its body twice: as `x-amz-checksum-sha256`
 * (S3 refuses a body that does not match, and keeps the checksum) and as user
 * metadata `tesserasha256`. When a write meets 412 the object in place is
 * compared with the body (size, then the SHA-256, or the ETag's MD5 for an
 * object Tessera did not write): equal bytes are this job's own output (a
 * duplicate, or an earlier attempt whose answer was lost and which the SDK or
 * the delivery retried), anything else is reported as foreign.
 *
 * Reads pinned to a version (`pin`, then `getRange` with the pin) address it by
 * `VersionId` on a versioned bucket (the old bytes stay readable after an
 * overwrite) or carry `If-Match: <etag>` otherwise (412 means the source changed).
 *
 * The client must use path-style addressing against moto (`forcePathStyle: true`);
 * on AWS either style works.
 *
 * @example
 * const store = new S3ObjectStore(new S3Client({}), 'my-tiles');
 * await store.putIfAbsent('tiles/ab12/0_0.tif', bytes, { contentType: 'image/tiff' }); // { kind: 'written', version: '"9b2c..."' }
 */
export class S3ObjectStore implements ObjectStore {
  readonly name = 's3';

  uriOf(key: string): string {
    return `s3://${this.bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
  }
  readonly #retries: number;
  readonly #baseMs: number;
  readonly #capMs: number;
  readonly #random: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #pageSize: number;

  /**
   * @param client an S3Client (or anything with its `send`)
   * @param bucket an existing bucket; infra/ creates it, tests create their own
   */
  constructor(
    private readonly client: S3Sender,
    readonly bucket: string,
    options: S3ObjectStoreOptions = {},
  ) {
    if (!bucket) throw new AdapterError('[object-store:s3] no bucket name given; set TESSERA_SOURCE_BUCKET / TESSERA_OUTPUT_BUCKET');
    this.#retries = options.conflictRetries ?? 4;
    this.#baseMs = options.conflictBaseDelayMs ?? 100;
    this.#capMs = options.conflictMaxDelayMs ?? 2000;
    this.#random = options.random ?? Math.random;
    this.#sleep = options.sleep ?? sleep;
    this.#pageSize = Math.max(1, Math.min(MAX_LIST_PAGE_SIZE, options.listPageSize ?? MAX_LIST_PAGE_SIZE));
  }

  async putIfAbsent(key: string, body: Uint8Array, options: PutOptions = {}): Promise<PutIfAbsentResult> {
    validateObjectKey(key);
    const digest = contentDigest(body);
    const occupied = async (): Promise<PutIfAbsentResult | undefined> => {
      const current = await this.#stored(key);
      if (current === undefined) return undefined;
      return { kind: 'already-present', sameBytes: compareContent(current.content, digest) === 'same', current: current.head };
    };
    return this.#withConflictRetry<PutIfAbsentResult>(
      `create-only write of ${JSON.stringify(key)}`,
      async () => {
        try {
          const out = await this.client.send(new PutObjectCommand(this.#put(key, body, digest, options, { IfNoneMatch: '*' })));
          return { done: { kind: 'written', version: this.#versionOf(out.VersionId, out.ETag, key) } };
        } catch (e) {
          if (isAwsFailure(e, 412)) {
            // Taken: say whose bytes are there. Gone again since the 412 (a lifecycle rule): not ours either.
            return { done: (await occupied()) ?? { kind: 'already-present', sameBytes: false } };
          }
          if (isConflict(e)) return { conflict: e };
          throw this.#writeFailed('create-only write', key, e);
        }
      },
      // After the retries, whatever is there decides: an object means another writer won.
      occupied,
    );
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options: PutOptions = {}): Promise<PutIfMatchResult> {
    validateObjectKey(key);
    const digest = contentDigest(body);
    const decideFromHead = async (): Promise<PutIfMatchResult | undefined> => {
      const current = await this.#stored(key);
      if (current === undefined) return { kind: 'absent' };
      // Its own bytes already in place (an earlier attempt landed, its answer was lost): written.
      if (compareContent(current.content, digest) === 'same') return { kind: 'written', version: current.head.version };
      return current.head.version === expectedVersion || current.etag === expectedVersion
        ? undefined
        : { kind: 'version-mismatch', current: current.head.version };
    };
    let ifMatch = expectedVersion;
    if (!ETAG.test(expectedVersion)) {
      // A versionId: S3 has no precondition on it, so name the bytes of that version by their ETag.
      const current = await this.#stored(key);
      if (current === undefined) return { kind: 'absent' };
      if (current.versionId !== expectedVersion) {
        if (compareContent(current.content, digest) === 'same') return { kind: 'written', version: current.head.version };
        return { kind: 'version-mismatch', current: current.head.version };
      }
      ifMatch = current.etag;
    } else if (!expectedVersion.startsWith('"')) {
      ifMatch = `"${expectedVersion}"`;
    }
    return this.#withConflictRetry<PutIfMatchResult>(
      `repair write of ${JSON.stringify(key)} under ${expectedVersion}`,
      async () => {
        try {
          const out = await this.client.send(new PutObjectCommand(this.#put(key, body, digest, options, { IfMatch: ifMatch })));
          return { done: { kind: 'written', version: this.#versionOf(out.VersionId, out.ETag, key) } };
        } catch (e) {
          if (isAwsFailure(e, 404)) return { done: { kind: 'absent' } };
          if (isAwsFailure(e, 412)) {
            // One head says what is there: our own bytes (a retry of a write that landed), or another version
            // for the caller's report; nothing was written by this request either way. If the object vanished
            // meanwhile, or (vanishingly unlikely) holds the expected ETag again, say so plainly.
            return { done: (await decideFromHead()) ?? { kind: 'version-mismatch', current: expectedVersion } };
          }
          if (isConflict(e)) return { conflict: e };
          throw this.#writeFailed('repair write', key, e);
        }
      },
      decideFromHead,
    );
  }

  /**
   * One DeleteObject with `If-Match: <etag>` (S3 conditional deletes): S3
   * removes the object only while that ETag is current. A versionId token is
   * resolved to the ETag of that version first, as in `putIfMatch`; the delete
   * still carries `If-Match`, so a new version written in between is never
   * removed. On a versioned bucket the delete is a delete marker (the
   * version itself expires with the bucket's noncurrent-version rule).
   * 412 is `version-mismatch` (one HeadObject names the current version);
   * 404 is `absent`, which also answers the SDK's retry of a delete that landed.
   */
  async deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult> {
    validateObjectKey(key);
    const decide = async (): Promise<DeleteIfVersionResult> => {
      const current = await this.#stored(key);
      return current === undefined ? { kind: 'absent' } : { kind: 'version-mismatch', current: current.head.version };
    };
    let ifMatch = version;
    if (!ETAG.test(version)) {
      const current = await this.#stored(key);
      if (current === undefined) return { kind: 'absent' };
      if (current.versionId !== version) return { kind: 'version-mismatch', current: current.head.version };
      ifMatch = current.etag;
    } else if (!version.startsWith('"')) {
      ifMatch = `"${version}"`;
    }
    return this.#withConflictRetry<DeleteIfVersionResult>(
      `conditional delete of ${JSON.stringify(key)} under ${version}`,
      async () => {
        try {
          await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key, IfMatch: ifMatch }));
          return { done: { kind: 'deleted' } };
        } catch (e) {
          if (isAwsFailure(e, 404) && !isAwsFailure(e, 404, 'NoSuchBucket')) return { done: { kind: 'absent' } };
          if (isAwsFailure(e, 412)) return { done: await decide() };
          if (isConflict(e)) return { conflict: e };
          throw this.#failed(`conditional delete of ${JSON.stringify(key)}`, e);
        }
      },
      async () => undefined,
    );
  }

  /**
   * The version named by a job key (a versionId, or an ETag quoted or bare)
   * must be the current one; the pin then addresses it by versionId where the
   * bucket keeps versions, else by its ETag.
   */
  async pin(key: string, version: string): Promise<ReadPin> {
    validateObjectKey(key);
    const current = await this.#stored(key);
    const named =
      current !== undefined && (version === current.versionId || (ETAG.test(version) && unquote(version) === unquote(current.etag)));
    if (named) return { version, handle: current.versionId ?? current.etag };
    // The event names a version id that is no longer the live one (a metadata change is a copy, so a new version,
    // with the same bytes; or new bytes uploaded since): on a versioned bucket the named version is still there, and
    // the event's scene is made of exactly it. Gone (expired, deleted): the event is stale.
    if (!ETAG.test(version) && (await this.#hasVersion(key, version))) return { version, handle: version };
    if (current === undefined) throw new ObjectNotFoundError(this.name, key);
    throw new SourceChangedError(this.name, key, version, current.head.version);
  }

  /** Whether the bucket still keeps version `versionId` of `key`. */
  async #hasVersion(key: string, versionId: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key, VersionId: versionId }));
      return true;
    } catch (e) {
      // 404: no such version; 400: not a version id of this bucket (an unversioned bucket, a malformed id).
      if (isAwsFailure(e, 404) || isAwsFailure(e, 400)) return false;
      throw this.#failed(`head of version ${versionId} of ${JSON.stringify(key)}`, e);
    }
  }

  async getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array> {
    validateObjectKey(key);
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
      throw new AdapterError(
        `[object-store:s3] byte range [${start}, ${end}) of ${JSON.stringify(key)} is not a valid range; pass 0 <= start <= end`,
      );
    }
    if (end === start) {
      // HTTP cannot ask for zero bytes; still honour "throws if missing" (and, pinned, "throws if changed").
      if (pin) {
        try {
          await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key, ...pinnedSelector(pin) }));
        } catch (e) {
          throw this.#readFailed(key, undefined, pin, e);
        }
      } else if ((await this.head(key)) === undefined) throw new ObjectNotFoundError(this.name, key);
      return new Uint8Array();
    }
    return this.#read(key, `bytes=${start}-${end - 1}`, pin);
  }

  async get(key: string): Promise<Uint8Array> {
    validateObjectKey(key);
    return this.#read(key, undefined, undefined);
  }

  async head(key: string): Promise<ObjectHead | undefined> {
    validateObjectKey(key);
    return (await this.#stored(key))?.head;
  }

  /** One HeadObject: the head, and what S3 knows about the bytes (checksum, metadata, ETag). */
  async #stored(key: string): Promise<Stored | undefined> {
    let out: HeadObjectCommandOutput;
    try {
      out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key, ChecksumMode: 'ENABLED' }));
    } catch (e) {
      if (isAwsFailure(e, 404)) return undefined;
      throw this.#failed(`head of ${JSON.stringify(key)}`, e);
    }
    const etag = this.#etag(out.ETag, key);
    const versionId = out.VersionId && out.VersionId !== 'null' ? out.VersionId : undefined;
    const size = out.ContentLength ?? 0;
    // A full-object SHA-256 checksum (S3 validated it at upload) beats our metadata; a multipart one ends in -N.
    const checksum =
      out.ChecksumSHA256 && !out.ChecksumSHA256.includes('-') ? Buffer.from(out.ChecksumSHA256, 'base64').toString('hex') : undefined;
    const sha256Hex = checksum ?? out.Metadata?.[CONTENT_SHA256_METADATA];
    // The ETag is the MD5 only for single-part uploads without SSE-KMS: use it only when no SHA-256 is known.
    const md5 = sha256Hex === undefined ? MD5_ETAG.exec(etag)?.[1] : undefined;
    return {
      head: { key, size, version: versionId ?? etag, lastModified: out.LastModified?.getTime() ?? 0 },
      etag,
      versionId,
      content: { size, sha256Hex, md5Base64: md5 === undefined ? undefined : Buffer.from(md5, 'hex').toString('base64') },
    };
  }

  /** ListObjectsV2, page by page, so a prefix of any size streams in constant memory. */
  async *list(prefix: string): AsyncIterable<ObjectHead> {
    if (typeof prefix !== 'string') throw new AdapterError('[object-store:s3] list needs a string prefix ("" lists the whole bucket)');
    let token: string | undefined;
    do {
      let page: ListObjectsV2CommandOutput;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, MaxKeys: this.#pageSize, ContinuationToken: token }),
        );
      } catch (e) {
        throw this.#failed(`listing of ${JSON.stringify(prefix)}`, e);
      }
      for (const o of page.Contents ?? []) {
        if (o.Key === undefined) continue;
        yield { key: o.Key, size: o.Size ?? 0, version: this.#etag(o.ETag, o.Key), lastModified: o.LastModified?.getTime() ?? 0 };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }

  #put(
    key: string,
    body: Uint8Array,
    digest: ContentDigest,
    options: PutOptions,
    condition: Pick<PutObjectCommandInput, 'IfMatch' | 'IfNoneMatch'>,
  ): PutObjectCommandInput {
    return {
      Bucket: this.bucket,
      Key: key,
      Body: body,
      ContentLength: body.byteLength,
      // S3 refuses the body if it does not hash to this, and keeps it (HeadObject ChecksumMode ENABLED).
      ChecksumSHA256: digest.sha256Base64,
      Metadata: { [CONTENT_SHA256_METADATA]: digest.sha256Hex },
      ...(options.contentType === undefined ? {} : { ContentType: options.contentType }),
      ...condition,
    };
  }

  async #read(key: string, range: string | undefined, pin: ReadPin | undefined): Promise<Uint8Array> {
    let out: GetObjectCommandOutput;
    try {
      out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range, ...(pin ? pinnedSelector(pin) : {}) }),
      );
    } catch (e) {
      // 416: the range starts at or past the end of an existing object; the port clips, so that is no bytes.
      if (range !== undefined && isAwsFailure(e, 416)) return new Uint8Array();
      throw this.#readFailed(key, range, pin, e);
    }
    if (!out.Body) return new Uint8Array();
    try {
      return await out.Body.transformToByteArray();
    } catch (e) {
      throw new AdapterError(`[object-store:s3] reading the body of ${JSON.stringify(key)} broke off; retry the delivery`, {
        cause: e,
        retryable: true,
      });
    }
  }

  /**
   * Send a conditional write; on 409 ConditionalRequestConflict send it again
   * after a full-jitter backoff, at most `conflictRetries` times. Then ask
   * `decide` what the key's state means; if it cannot tell, fail retryably so
   * the delivery comes back later rather than guess.
   */
  async #withConflictRetry<T>(what: string, attempt: () => Promise<Attempt<T>>, decide: () => Promise<T | undefined>): Promise<T> {
    let lastConflict: unknown;
    for (let i = 0; i <= this.#retries; i++) {
      if (i > 0) await this.#sleep(backoffDelayMs(i - 1, this.#baseMs, this.#capMs, this.#random));
      const r = await attempt();
      if ('done' in r) return r.done;
      lastConflict = r.conflict;
    }
    const decided = await decide();
    if (decided !== undefined) return decided;
    throw new AdapterError(
      `[object-store:s3] ${what} kept answering 409 ConditionalRequestConflict after ${this.#retries} retries; ` +
        'another writer of the same key is still in flight: let the delivery be retried',
      { cause: lastConflict, retryable: true },
    );
  }

  /** A failed GET or HEAD: with a pin, "that version is gone or was replaced" is SourceChanged, never NotFound. */
  #readFailed(key: string, range: string | undefined, pin: ReadPin | undefined, e: unknown): Error {
    if (pin) {
      const gone =
        isAwsFailure(e, 412) ||
        (isAwsFailure(e, 404) && !isAwsFailure(e, 404, 'NoSuchBucket')) ||
        // A versionId S3 cannot parse names no version of this object.
        (pinnedSelector(pin).VersionId !== undefined && isAwsFailure(e, 400, 'InvalidArgument'));
      if (gone) return new SourceChangedError(this.name, key, pin.version, undefined, { cause: e });
    } else if (isAwsFailure(e, 404) && !isAwsFailure(e, 404, 'NoSuchBucket')) {
      return new ObjectNotFoundError(this.name, key, { cause: e });
    }
    return this.#failed(`read of ${JSON.stringify(key)}${range ? ` (${range})` : ''}`, e);
  }

  /** The version token of a write's answer: the versionId where the bucket keeps versions, else the ETag. */
  #versionOf(versionId: string | undefined, etag: string | undefined, key: string): string {
    return versionId && versionId !== 'null' ? versionId : this.#etag(etag, key);
  }

  #etag(etag: string | undefined, key: string): string {
    if (!etag)
      throw new AdapterError(`[object-store:s3] S3 returned no ETag for ${JSON.stringify(key)}; is the endpoint really S3-compatible?`);
    return etag;
  }

  /** A failed PutObject: a body S3 refused as damaged is transient (CorruptUploadError), anything else as {@link #failed} says. */
  #writeFailed(what: string, key: string, error: unknown): Error {
    if (isIntegrityRefusal(awsFailure(error), S3_INTEGRITY_REFUSAL))
      return new CorruptUploadError(this.name, key, what, describeAwsFailure(error), { cause: error });
    return this.#failed(`${what} of ${JSON.stringify(key)}`, error);
  }

  #failed(what: string, error: unknown): AdapterError {
    const hint = isAwsFailure(error, 404, 'NoSuchBucket')
      ? `bucket ${this.bucket} does not exist: deploy the stack or fix the bucket name`
      : isAwsFailure(error, 403)
        ? `access to bucket ${this.bucket} was denied: grant the function role s3:GetObject, s3:GetObjectVersion, s3:PutObject and s3:ListBucket on it`
        : 'retry the delivery; if it persists check the bucket and the network';
    return new AdapterError(`[object-store:s3] ${what} in bucket ${this.bucket} failed (${describeAwsFailure(error)}); ${hint}`, {
      cause: error,
      retryable: isRetryableAws(error),
    });
  }
}

/** How a pinned read addresses its version: the versionId, or `If-Match` on the ETag (412 if it changed). */
function pinnedSelector(pin: ReadPin): Pick<GetObjectCommandInput, 'VersionId' | 'IfMatch'> {
  const handle = pin.handle ?? pin.version;
  if (ETAG.test(handle)) return { IfMatch: handle.startsWith('"') ? handle : `"${handle}"` };
  return { VersionId: handle };
}

function isConflict(error: unknown): boolean {
  return isAwsFailure(error, 409, 'ConditionalRequestConflict') || isAwsFailure(error, 409, 'OperationAborted');
}
