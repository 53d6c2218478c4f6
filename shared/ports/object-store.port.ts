export interface ObjectHead {
  readonly key: string;
  readonly size: number;
  /** S3 ETag (or versionId), GCS generation, Blob ETag, local version id. Opaque. */
  readonly version: string;
  readonly lastModified: number;
}

/**
 * A read pinned to one version of a source object: every byte a tile job reads
 * comes from the version named in its job key, or the read fails with
 * SourceChangedError. Made once per scene by `ObjectStore.pin` at fan-out and
 * carried in every tile message (and the scene manifest, for backfills).
 *
 * - `version`: the version token of the job key (S3 versionId or ETag, GCS
 *   generation, Blob version/ETag, local content hash).
 * - `handle`: what the adapter needs to address exactly that version, if it is
 *   not the token itself (an Azure snapshot time or versionId, an S3 versionId
 *   when the key names the ETag). Opaque to the core; never part of a key.
 *
 * Per store: S3 reads by `VersionId` where the bucket keeps versions (the old
 * bytes stay readable after an overwrite, until a lifecycle rule drops them),
 * else under `If-Match: <etag>`; GCS names the generation; Azure reads a
 * snapshot taken by `pin` (a metadata update changes a blob's ETag, not its
 * bytes); local checks the content hash on the descriptor it reads from. A pin
 * without a handle still works (the version alone: If-Match, generation, hash).
 * A second `pin` of the same version may give another handle (Azure reuses the
 * oldest snapshot of that ETag, so a retried fan-out usually gives the same).
 */
export interface ReadPin {
  readonly version: string;
  readonly handle?: string | undefined;
}

export interface PutOptions {
  readonly contentType?: string | undefined;
}

/**
 * A create-only write. `already-present`: the key was taken, and the store
 * compared what is there with `body` (size, and the content hash stored with
 * every write or computed by the store: see shared/domain/content-digest.ts).
 * - `sameBytes: true`: exactly these bytes are in place (a duplicate of the same
 *   deterministic job got there first, or this caller's own earlier attempt
 *   landed and its answer was lost): success.
 * - `sameBytes: false`: a foreign, truncated or unverifiable object holds the
 *   key. Never success: an alarm, and a tile job is not committed on it.
 */
export type PutIfAbsentResult =
  | { readonly kind: 'written'; readonly version: string }
  | { readonly kind: 'already-present'; readonly sameBytes: boolean; readonly current?: ObjectHead | undefined };

/**
 * A repair write under a known version. `written` also answers a retry that
 * meets a precondition failure with exactly its own bytes in place (the first
 * attempt landed, its answer was lost, the SDK or the delivery retried):
 * outputs are deterministic, so equal content means this write is done;
 * `version` is then the version found.
 */
export type PutIfMatchResult =
  | { readonly kind: 'written'; readonly version: string }
  | { readonly kind: 'version-mismatch'; readonly current: string | undefined }
  | { readonly kind: 'absent' };

/**
 * A delete conditional on the version the caller saw (`head`, `list`, or the
 * answer of its own write). There is no unconditional delete.
 * - `deleted`: the object was at `version` and is gone (on a versioned S3
 *   bucket a delete marker hides it; the noncurrent version expires with the
 *   bucket's lifecycle rule).
 * - `version-mismatch`: another version is in place (someone wrote since the
 *   caller looked); nothing was deleted. `current` names it.
 * - `absent`: nothing at the key. Also the answer to a delete whose first
 *   attempt landed and whose answer was lost (the SDK resent it): the key is
 *   gone either way, and the caller cannot have deleted anything but `version`.
 */
export type DeleteIfVersionResult =
  | { readonly kind: 'deleted' }
  | { readonly kind: 'version-mismatch'; readonly current: string }
  | { readonly kind: 'absent' };

/**
 * The object store port. There is no unconditional put: every write is
 * create-only (`putIfAbsent`) or conditional on a version (`putIfMatch`), and
 * every delete is conditional on a version (`deleteIfVersion`).
 * Keys are validated with `validateObjectKey` before any call.
 */
export interface ObjectStore {
  readonly name: string;
  /**
   * An absolute URI of the object that tools outside Tessera open (`s3://bucket/key`, `gs://bucket/key`,
   * the blob's `https://` URL, a `file://` URL), for links in output metadata (the STAC Item's
   * `derived_from`). Path segments percent-encoded. Optional: a store without one gets no such link.
   */
  uriOf?(key: string): string;
  putIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult>;
  putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options?: PutOptions): Promise<PutIfMatchResult>;
  /**
   * Delete `key` only while its current version is `version` (a token from
   * `head`, `list` or a write's answer): S3 DeleteObject `If-Match: <etag>`
   * (a versionId is resolved to its ETag first, as in `putIfMatch`), GCS
   * `ifGenerationMatch`, Azure Delete Blob `If-Match`, local compare-and-unlink.
   */
  deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult>;
  /**
   * Resolve the version named in a job key (the event's own version token) into a read pin, at fan-out:
   * the current version, or a replaced one the store still keeps (an S3 version id, a GCS generation, an
   * Azure snapshot or blob version), so a redelivered event makes the scene of exactly the bytes it named
   * whatever happened to the object since (a metadata update, a newer upload). Throws SourceChangedError
   * when the store no longer keeps `version` (the event is stale), ObjectNotFoundError when nothing of the
   * object is left.
   */
  pin(key: string, version: string): Promise<ReadPin>;
  /**
   * Bytes `[start, end)`; `end` past the size is clipped. Throws ObjectNotFoundError.
   * With `pin`, the bytes come from exactly that version or the call throws
   * SourceChangedError (never ObjectNotFoundError for a version that is gone).
   */
  getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array>;
  /** The whole object. Throws ObjectNotFoundError. Use only for small objects (manifests). */
  get(key: string): Promise<Uint8Array>;
  head(key: string): Promise<ObjectHead | undefined>;
  /** Objects whose key starts with `prefix`, in any order. */
  list(prefix: string): AsyncIterable<ObjectHead>;
}
