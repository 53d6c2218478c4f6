import {
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  type PutObjectCommandInput,
  type S3Client,
} from '@aws-sdk/client-s3';
import { AdapterError, ObjectNotFoundError } from '../../../shared/domain/errors.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import type { ObjectHead, ObjectStore, PutIfAbsentResult, PutIfMatchResult, PutOptions } from '../../../shared/ports/object-store.port.js';
import { backoffDelayMs, describeAwsFailure, isAwsFailure, isRetryableAws, sleep } from './aws-error.js';

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
 * The version token is the ETag, quotes included, exactly as HeadObject and
 * PutObject return it: it is what `If-Match` compares, so a token read by
 * `head` always works as the precondition of a repair. We do not use
 * `versionId` even on versioned buckets: S3 has no precondition on it, so a
 * versionId token would need a read-then-write with a gap in between.
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
    return this.#withConflictRetry<PutIfAbsentResult>(
      `create-only write of ${JSON.stringify(key)}`,
      async () => {
        try {
          const out = await this.client.send(new PutObjectCommand(this.#put(key, body, options, { IfNoneMatch: '*' })));
          return { done: { kind: 'written', version: this.#etag(out.ETag, key) } };
        } catch (e) {
          if (isAwsFailure(e, 412)) return { done: { kind: 'already-present' } };
          if (isConflict(e)) return { conflict: e };
          throw this.#failed(`create-only write of ${JSON.stringify(key)}`, e);
        }
      },
      // After the retries, whatever is there decides: an object means another writer won.
      async () => ((await this.head(key)) === undefined ? undefined : { kind: 'already-present' }),
    );
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options: PutOptions = {}): Promise<PutIfMatchResult> {
    validateObjectKey(key);
    const decideFromHead = async (): Promise<PutIfMatchResult | undefined> => {
      const current = await this.head(key);
      if (current === undefined) return { kind: 'absent' };
      return current.version === expectedVersion ? undefined : { kind: 'version-mismatch', current: current.version };
    };
    return this.#withConflictRetry<PutIfMatchResult>(
      `repair write of ${JSON.stringify(key)} under ${expectedVersion}`,
      async () => {
        try {
          const out = await this.client.send(new PutObjectCommand(this.#put(key, body, options, { IfMatch: expectedVersion })));
          return { done: { kind: 'written', version: this.#etag(out.ETag, key) } };
        } catch (e) {
          if (isAwsFailure(e, 404)) return { done: { kind: 'absent' } };
          if (isAwsFailure(e, 412)) {
            // One head names the current version for the caller's report; nothing was written either way.
            // If the object vanished meanwhile, or (vanishingly unlikely) holds the expected ETag again, say so plainly.
            return { done: (await decideFromHead()) ?? { kind: 'version-mismatch', current: expectedVersion } };
          }
          if (isConflict(e)) return { conflict: e };
          throw this.#failed(`repair write of ${JSON.stringify(key)}`, e);
        }
      },
      decideFromHead,
    );
  }

  async getRange(key: string, start: number, end: number): Promise<Uint8Array> {
    validateObjectKey(key);
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
      throw new AdapterError(
        `[object-store:s3] byte range [${start}, ${end}) of ${JSON.stringify(key)} is not a valid range; pass 0 <= start <= end`,
      );
    }
    if (end === start) {
      // HTTP cannot ask for zero bytes; still honour "throws if missing".
      if ((await this.head(key)) === undefined) throw new ObjectNotFoundError(this.name, key);
      return new Uint8Array();
    }
    return this.#read(key, `bytes=${start}-${end - 1}`);
  }

  async get(key: string): Promise<Uint8Array> {
    validateObjectKey(key);
    return this.#read(key, undefined);
  }

  async head(key: string): Promise<ObjectHead | undefined> {
    validateObjectKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { key, size: out.ContentLength ?? 0, version: this.#etag(out.ETag, key), lastModified: out.LastModified?.getTime() ?? 0 };
    } catch (e) {
      if (isAwsFailure(e, 404)) return undefined;
      throw this.#failed(`head of ${JSON.stringify(key)}`, e);
    }
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
    options: PutOptions,
    condition: Pick<PutObjectCommandInput, 'IfMatch' | 'IfNoneMatch'>,
  ): PutObjectCommandInput {
    return {
      Bucket: this.bucket,
      Key: key,
      Body: body,
      ContentLength: body.byteLength,
      ...(options.contentType === undefined ? {} : { ContentType: options.contentType }),
      ...condition,
    };
  }

  async #read(key: string, range: string | undefined): Promise<Uint8Array> {
    let out: GetObjectCommandOutput;
    try {
      out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range }));
    } catch (e) {
      if (isAwsFailure(e, 404) && !isAwsFailure(e, 404, 'NoSuchBucket')) throw new ObjectNotFoundError(this.name, key, { cause: e });
      // 416: the range starts at or past the end of an existing object; the port clips, so that is no bytes.
      if (range !== undefined && isAwsFailure(e, 416)) return new Uint8Array();
      throw this.#failed(`read of ${JSON.stringify(key)}${range ? ` (${range})` : ''}`, e);
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

  #etag(etag: string | undefined, key: string): string {
    if (!etag)
      throw new AdapterError(`[object-store:s3] S3 returned no ETag for ${JSON.stringify(key)}; is the endpoint really S3-compatible?`);
    return etag;
  }

  #failed(what: string, error: unknown): AdapterError {
    const hint = isAwsFailure(error, 404, 'NoSuchBucket')
      ? `bucket ${this.bucket} does not exist: deploy the stack or fix the bucket name`
      : isAwsFailure(error, 403)
        ? `access to bucket ${this.bucket} was denied: grant the function role s3:GetObject, s3:PutObject and s3:ListBucket on it`
        : 'retry the delivery; if it persists check the bucket and the network';
    return new AdapterError(`[object-store:s3] ${what} in bucket ${this.bucket} failed (${describeAwsFailure(error)}); ${hint}`, {
      cause: error,
      retryable: isRetryableAws(error),
    });
  }
}

function isConflict(error: unknown): boolean {
  return isAwsFailure(error, 409, 'ConditionalRequestConflict') || isAwsFailure(error, 409, 'OperationAborted');
}
