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
  | 'NOT_A_RASTER'
  | 'RASTER_WITHOUT_CRS'
  | 'UNSUPPORTED_RASTER'
  | 'OBJECT_NOT_FOUND'
  | 'SOURCE_CHANGED'
  | 'LEASE_STOLEN'
  | 'VERSION_MISMATCH'
  | 'MISSING_TILES'
  | 'ADAPTER_FAILURE';

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
  constructor(sceneKey: string, missing: readonly string[], gridCount: number) {
    const shown = missing.slice(0, 10).join(', ');
    super(
      'MISSING_TILES',
      `mosaic for scene ${sceneKey} needs ${gridCount} tiles but ${missing.length} are missing: ${shown}` +
        `${missing.length > 10 ? ', ...' : ''}; re-deliver their tile jobs (tessera backfill --policy skip) and assemble again`,
    );
    this.missing = missing;
  }
}

/** An adapter call failed in a way the adapter did not expect (network, auth, throttling). */
export class AdapterError extends TesseraError {
  constructor(message: string, options: { cause?: unknown; retryable?: boolean } = {}) {
    super('ADAPTER_FAILURE', message, options);
  }
}
