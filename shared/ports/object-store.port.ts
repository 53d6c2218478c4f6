export interface ObjectHead {
  readonly key: string;
  readonly size: number;
  /** S3 ETag (or versionId), GCS generation, Blob ETag, local version id. Opaque. */
  readonly version: string;
  readonly lastModified: number;
}

export interface PutOptions {
  readonly contentType?: string | undefined;
}

/** A create-only write: `already-present` is success (someone got there first). */
export type PutIfAbsentResult = { readonly kind: 'written'; readonly version: string } | { readonly kind: 'already-present' };

/** A repair write under a known version. */
export type PutIfMatchResult =
  | { readonly kind: 'written'; readonly version: string }
  | { readonly kind: 'version-mismatch'; readonly current: string | undefined }
  | { readonly kind: 'absent' };

/**
 * The object store port. There is no unconditional put: every write is
 * create-only (`putIfAbsent`) or conditional on a version (`putIfMatch`).
 * Keys are validated with `validateObjectKey` before any call.
 */
export interface ObjectStore {
  readonly name: string;
  putIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult>;
  putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options?: PutOptions): Promise<PutIfMatchResult>;
  /** Bytes `[start, end)`; `end` past the size is clipped. Throws ObjectNotFoundError. */
  getRange(key: string, start: number, end: number): Promise<Uint8Array>;
  /** The whole object. Throws ObjectNotFoundError. Use only for small objects (manifests). */
  get(key: string): Promise<Uint8Array>;
  head(key: string): Promise<ObjectHead | undefined>;
  /** Objects whose key starts with `prefix`, in any order. */
  list(prefix: string): AsyncIterable<ObjectHead>;
}
