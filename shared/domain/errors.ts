/**
 * Every unexpected failure in Tessera is a `TesseraError` with a fixed `code`,
 * an optional `cause`, and a message that says what to do about it.
 *
 * Expected outcomes of conditional operations (a lost claim, an output that is
 * already present) are *values*, never errors: see the port result types.
 */
export type TesseraErrorCode =
  | 'INVALID_OBJECT_KEY'
  | 'INVALID_PARAMS'
  | 'INVALID_GRID'
  | 'INVALID_EVENT'
  | 'INVALID_EXPRESSION'
  | 'INVALID_LEASE_CONFIG'
  | 'INVALID_MANIFEST_ENTRY'
  | 'NOT_A_RASTER'
  | 'RASTER_WITHOUT_CRS'
  | 'UNSUPPORTED_RASTER'
  | 'OBJECT_NOT_FOUND'
  | 'SOURCE_CHANGED'
  | 'OUTPUT_OCCUPIED'
  | 'OBJECT_KEY_CONFLICT'
  | 'CODE_VERSION_MISMATCH'
  | 'LEASE_UNCONFIRMED'
  | 'LEASE_STOLEN'
  | 'VERSION_MISMATCH'
  | 'MISSING_TILES'
  | 'VERIFY_TIMEOUT'
  | 'ADAPTER_FAILURE'
  | 'WORKER_FAILED'
  | 'INVALID_INGEST_REQUEST'
  | 'ARTEFACT_NOT_FOUND'
  | 'ARTEFACT_REFUSED'
  | 'INGEST_OCCUPIED'
  | 'HREF_REFUSED'
  | 'MOSAIC_TOO_LARGE'
  | 'MOSAIC_CHANGED'
  | 'UPLOAD_CORRUPTED'
  | 'SCENE_INCOMPLETE'
  | 'BATCH_UNREADABLE'
  | 'IMAGE_ENCODER_UNAVAILABLE';

export class TesseraError extends Error {
  readonly code: TesseraErrorCode;
  /** True when a retry of the same delivery may succeed (network, throttling). */
  readonly retryable: boolean;

  constructor(code: TesseraErrorCode, message: string, options: { cause?: unknown; retryable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.name = new.target.name;
  }
}

/** An object key that is empty, too long, has empty / `.` / `..` segments or control characters. */
export class InvalidObjectKeyError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('INVALID_OBJECT_KEY', message, options);
  }
}

/** Processing parameters that cannot be serialised canonically, or are out of range. */
export class InvalidParamsError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('INVALID_PARAMS', message, options);
  }
}

/** A raster size or tile size that is not a positive integer or is absurdly large. */
export class InvalidGridError extends TesseraError {
  constructor(message: string) {
    super('INVALID_GRID', message);
  }
}

/** A trigger payload (S3 notification, CloudEvent, Event Grid event, queue message) that cannot be parsed. Never retryable: it is poison. */
export class InvalidEventError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('INVALID_EVENT', message, options);
  }
}

/** A band-math expression that does not parse; `position` is the 0-based offset of the error. */
export class InvalidExpressionError extends TesseraError {
  readonly position: number;
  constructor(message: string, position: number) {
    super('INVALID_EXPRESSION', `${message} at position ${position}`);
    this.position = position;
  }
}

/** A lease, function timeout or queue visibility timeout that would let a live worker lose its lease. */
export class LeaseConfigError extends TesseraError {
  constructor(message: string) {
    super('INVALID_LEASE_CONFIG', message);
  }
}

/** The source object is not a TIFF/GeoTIFF we can read. */
export class NotARasterError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('NOT_A_RASTER', message, options);
  }
}

/** The raster carries no coordinate reference system, so its tiles could not be georeferenced. */
export class RasterWithoutCrsError extends TesseraError {
  constructor(message: string) {
    super('RASTER_WITHOUT_CRS', message);
  }
}

/** A readable TIFF whose layout (sample format, compression, planar config) Tessera does not support. */
export class UnsupportedRasterError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('UNSUPPORTED_RASTER', message, options);
  }
}

export class ObjectNotFoundError extends TesseraError {
  constructor(store: string, key: string, options: { cause?: unknown } = {}) {
    super('OBJECT_NOT_FOUND', `[object-store:${store}] object ${JSON.stringify(key)} does not exist`, options);
  }
}

/**
 * The source object no longer has the version named in the job key (it was
 * overwritten or deleted since its event), or that version can no longer be
 * read. Not retryable: the job is settled once (acked, counted
 * `source-changed`, its scene marked superseded); the new version's own event
 * makes the new scene.
 */
export class SourceChangedError extends TesseraError {
  readonly key: string;
  readonly expectedVersion: string;
  readonly currentVersion: string | undefined;

  constructor(store: string, key: string, expectedVersion: string, currentVersion: string | undefined, options: { cause?: unknown } = {}) {
    super(
      'SOURCE_CHANGED',
      `[object-store:${store}] source ${JSON.stringify(key)} no longer has version ${expectedVersion}` +
        ` (now ${currentVersion ?? 'absent or unreadable'}); the job for the old version is settled, the new version's event makes a new scene`,
      options,
    );
    this.key = key;
    this.expectedVersion = expectedVersion;
    this.currentVersion = currentVersion;
  }
}

/**
 * The committer no longer owns the claim row: its lease lapsed and another
 * worker took the job. This is an alarm (log at ERROR), never a normal path.
 */
export class LeaseStolenError extends TesseraError {
  readonly jobId: string;
  readonly holder: string | undefined;
  constructor(store: string, jobId: string, owner: string, holder: string | undefined) {
    super(
      'LEASE_STOLEN',
      `[claim-store:${store}] lease for job ${jobId} held by ${owner} was taken by ${holder ?? 'another worker'}; ` +
        'the job ran longer than its lease: raise the lease above the function timeout or heartbeat more often',
    );
    this.jobId = jobId;
    this.holder = holder;
  }
}

/** A repair write (`overwrite` backfill) found the object changed since its version was recorded. */
export class VersionMismatchError extends TesseraError {
  constructor(store: string, key: string, expected: string, actual: string | undefined) {
    super(
      'VERSION_MISMATCH',
      `[object-store:${store}] ${key} is at version ${actual ?? '(absent)'}, not the expected ${expected}; ` +
        'something else wrote it meanwhile: re-read its version and decide again',
    );
  }
}

/** Mosaic assembly found tiles of the grid missing. */
export class MissingTilesError extends TesseraError {
  readonly missing: readonly string[];
  readonly gridCount: number;
  constructor(sceneKey: string, missing: readonly string[], gridCount: number) {
    const shown = missing.slice(0, 10).join(', ');
    super(
      'MISSING_TILES',
      `mosaic for scene ${sceneKey} needs ${gridCount} tiles but ${missing.length} are missing: ${shown}` +
        `${missing.length > 10 ? ', ...' : ''}; re-deliver their tile jobs (tessera backfill --policy skip) and assemble again`,
    );
    this.missing = missing;
    this.gridCount = gridCount;
  }
}

/**
 * A zoom pyramid's parent tile found a child tile not written yet (docs/pyramids.md). Retryable: a parent is enqueued
 * only once its children are written, so only one enqueued by hand (a replay) meets this, and its children may come.
 */
export class PyramidChildMissingError extends TesseraError {
  constructor(parentKey: string, childKey: string, options: { cause?: unknown } = {}) {
    super(
      'MISSING_TILES',
      `pyramid tile ${parentKey} is built from its children, and ${childKey} is not written yet; its own job writes it (tessera backfill --policy skip re-sends missing ones)`,
      { ...options, retryable: true },
    );
  }
}

/**
 * A local worker process could not start, or exited with an error of its own
 * (not a signal: a worker killed with SIGKILL is a crash the others survive).
 * Its stderr, inherited, says why.
 */
export class WorkerProcessError extends TesseraError {
  readonly owner: string;
  constructor(owner: string, message: string, options: { cause?: unknown } = {}) {
    super('WORKER_FAILED', message, options);
    this.owner = owner;
  }
}

/** An adapter call failed in a way the adapter did not expect (network, auth, throttling). */
export class AdapterError extends TesseraError {
  constructor(message: string, options: { cause?: unknown; retryable?: boolean } = {}) {
    super('ADAPTER_FAILURE', message, options);
  }
}

/**
 * A tile job (or a backfill of a scene) made by another build of the render
 * path than the one running. Its key names that build: running it here would
 * put this build's pixels under that key, and one scene key would then mix
 * tiles of two code versions. Never retryable on this build: poison.
 */
export class CodeVersionMismatchError extends TesseraError {
  readonly expected: string;
  readonly found: string | undefined;
  constructor(what: string, found: string | undefined, expected: string) {
    super(
      'CODE_VERSION_MISMATCH',
      `${what} was made by code version ${found ?? '(none named: made before code versions were bound to keys, or by another build)'}, but this worker runs ${expected}; ` +
        "its key promises that build's pixels, so it is refused (dead-lettered) rather than run under the wrong key. " +
        'Let the scene be made again under this build (its source event, or `tessera run` / a new fan-out), which gives it a new scene key; ' +
        'a message from a newer build that reached an old instance during a rollout can be redriven from the dead-letter queue once the rollout is done.',
    );
    this.expected = expected;
    this.found = found;
  }
}

/**
 * A repair (overwrite) could not confirm it still holds its claim right before
 * its write: the heartbeat failed with a transient error. Overwriting without
 * the lease could race another repair of the same tile, so the write is not
 * made; a redelivery retries the repair.
 */
export class LeaseUnconfirmedError extends TesseraError {
  constructor(store: string, jobId: string, owner: string, cause: unknown) {
    super(
      'LEASE_UNCONFIRMED',
      `[claim-store:${store}] the repair of ${jobId} by ${owner} could not renew its lease before the overwrite; nothing was written, and a redelivery retries it`,
      { cause, retryable: true },
    );
  }
}

/**
 * A create-only write found the key taken by an object whose bytes are not the
 * ones this deterministic job makes: a foreign object, a truncated one, or one
 * whose content cannot be verified. Never success (committing would call it
 * good for ever): an alarm, not retryable, so the delivery is dead-lettered for
 * an operator. Nothing was overwritten.
 */
export class OutputOccupiedError extends TesseraError {
  readonly key: string;
  constructor(
    store: string,
    key: string,
    expected: { size: number; sha256Hex: string },
    found: { size: number; version: string } | undefined,
  ) {
    super(
      'OUTPUT_OCCUPIED',
      `[object-store:${store}] ${JSON.stringify(key)} holds ${found ? `${found.size} bytes at version ${found.version}` : 'an object that vanished'}` +
        ` that are not this job's output (${expected.size} bytes, sha256 ${expected.sha256Hex.slice(0, 16)}...); nothing was overwritten and the job is not committed. ` +
        'Find out who wrote it; to replace it, run a backfill with --policy overwrite --expected <that version>',
    );
    this.key = key;
  }
}

/**
 * The local store cannot hold an object at this key because the filesystem
 * already uses the name otherwise: a directory is at the key (other keys live
 * under it), or a file sits where a parent directory of the key should be.
 * Object stores allow both (`a/b` and `a/b/c`); a directory tree cannot.
 */
export class ObjectKeyConflictError extends TesseraError {
  readonly key: string;
  constructor(store: string, key: string, what: 'directory-at-key' | 'file-at-parent', path: string, options: { cause?: unknown } = {}) {
    super(
      'OBJECT_KEY_CONFLICT',
      `[object-store:${store}] cannot store ${JSON.stringify(key)}: ` +
        (what === 'directory-at-key'
          ? `${path} is a directory (other keys live under this one)`
          : `${path} is a file where a parent directory of the key must be`) +
        '; on the local backend a key may not be both an object and a prefix of other keys: choose keys that do not nest',
      options,
    );
    this.key = key;
  }
}

/**
 * A multi-file scene whose STAC Item names band objects that are not in the
 * source store yet (publishers upload the item after its bands, but events may
 * arrive out of order, and an upload may still be running). Retryable: the
 * item event is retried on the platform's own schedule, so a band that lands a
 * little later completes it. `final` once the item has waited long enough
 * (its last allowed delivery, or the completion window after its event): then
 * not retryable, so the trigger dead-letters it with this code and message.
 */
export class SceneIncompleteError extends TesseraError {
  readonly itemKey: string;
  readonly missing: readonly string[];
  constructor(itemKey: string, missing: readonly string[], final?: string) {
    const shown = missing
      .slice(0, 10)
      .map((k) => JSON.stringify(k))
      .join(', ');
    super(
      'SCENE_INCOMPLETE',
      `STAC item ${JSON.stringify(itemKey)} names ${missing.length} band object(s) not in the source store: ${shown}${missing.length > 10 ? ', ...' : ''}; ` +
        (final === undefined
          ? 'retried, so a band that lands meanwhile completes the scene'
          : `${final}: upload the missing band(s), then redrive this event from the dead-letter queue or upload the item again`),
      { retryable: final === undefined },
    );
    this.itemKey = itemKey;
    this.missing = missing;
  }
}

/**
 * How one store says "the body I received does not match the checksum sent with it": the HTTP status and
 * the store's own error codes, or, where the store has no code of its own for it (GCS answers 400 `invalid`
 * for many things), a pattern of its message. Each object store adapter keeps its cloud's mapping beside
 * its other error handling; the rule that such a refusal is transient lives once, in {@link CorruptUploadError}.
 */
export interface IntegrityRefusal {
  readonly status: number;
  readonly codes?: readonly string[] | undefined;
  readonly message?: RegExp | undefined;
}

/** Whether a store failure (its status, error code and message, as the adapter read them) is an integrity refusal. */
export function isIntegrityRefusal(
  failure: { readonly status: number | undefined; readonly code?: string | undefined; readonly message?: string | undefined },
  refusal: IntegrityRefusal,
): boolean {
  if (failure.status !== refusal.status) return false;
  if (refusal.codes !== undefined && failure.code !== undefined && refusal.codes.includes(failure.code)) return true;
  return refusal.message !== undefined && failure.message !== undefined && refusal.message.test(failure.message);
}

/**
 * A write the store refused because the bytes it received do not hash to the checksum the adapter sent
 * with them (S3 400 BadDigest, GCS 400 "doesn't match calculated MD5 hash", Azure 400 Md5Mismatch): the
 * body was damaged between this process and the store (a NIC, a proxy, a bit flip). Nothing was stored,
 * and the job's own bytes are still good, so it is transient, never poison: the next delivery renders
 * again and sends them again. Dead-lettering it, as a 400 otherwise would be, lost the tile or the repair.
 */
export class CorruptUploadError extends TesseraError {
  readonly key: string;
  constructor(store: string, key: string, what: string, detail: string, options: { cause?: unknown } = {}) {
    super(
      'UPLOAD_CORRUPTED',
      `[object-store:${store}] ${what} of ${JSON.stringify(key)} was refused because the body the store received does not match its checksum ` +
        `(${detail}): it was damaged on the way and nothing was stored. The delivery is retried and sends it again; ` +
        'if this keeps happening, look at the network path to the store (a proxy rewriting bodies, a faulty host)',
      { ...options, retryable: true },
    );
    this.key = key;
  }
}

/**
 * A mosaic assembly about to replace a stale COG mosaic or STAC Item found that something changed while
 * it ran: a tile (a repair landed after its listing, so what it built is not the mosaic of the tiles now in
 * place) or the output itself (another assembly replaced it first). It replaced nothing more. Retryable:
 * the next assembly reads everything again.
 */
export class MosaicChangedError extends TesseraError {
  readonly sceneKey: string;
  constructor(sceneKey: string, changed: readonly string[]) {
    super(
      'MOSAIC_CHANGED',
      `mosaic of scene ${sceneKey}: ${changed.slice(0, 3).join(', ')}${changed.length > 3 ? `, ... (${changed.length} in all)` : ''} ` +
        'changed while it was assembled, so it replaced nothing more; assemble it again (once a repair in progress is done)',
      { retryable: true },
    );
    this.sceneKey = sceneKey;
  }
}

/**
 * The image encoder of rendered tiles (sharp, libvips' Node binding: shared/raster/image-encoder.ts) cannot be
 * loaded, or is another version than the one this build's keys promise bytes of. A deployment fault, never the
 * job's: not retryable, so the delivery is dead-lettered with this message, which names the fix.
 */
export class ImageEncoderUnavailableError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('IMAGE_ENCODER_UNAVAILABLE', message, options);
  }
}
