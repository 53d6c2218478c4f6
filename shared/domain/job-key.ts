import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import { codeVersion } from './code-version.js';
import { InvalidEventError, InvalidParamsError } from './errors.js';
import { validateObjectKey } from './object-key.js';
import type { Window } from './tile-grid.js';

/** Processing parameters. `pipeline` and `version` are required so a version bump changes every key. */
export interface ProcessingParams {
  readonly pipeline: string;
  readonly version: string;
  readonly [name: string]: unknown;
}

/** The source object of a scene, as the trigger saw it. `key` is already URL-decoded. */
export interface SourceRef {
  readonly bucket: string;
  readonly key: string;
  /** S3 ETag or versionId, GCS generation, Blob ETag, local content hash. */
  readonly versionToken: string;
}

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * The deterministic scene key: SHA-256 over bucket, decoded key, version
 * token and the canonical parameters with the code version among them. Two deliveries of the
 * same event give the same key; a changed object, a pipeline version bump or
 * a new build of the render path (code-version.ts) gives a new one.
 *
 * `code` defaults to the running build's: a key is always made for the code
 * that will render it. Only a test of another build's messages passes one.
 *
 * @example
 * sceneKey({ bucket: 'scenes', key: 'L2A/T31UDQ/B08.tif', versionToken: '"9b2c"' },
 *          { pipeline: 'ndvi-tiler', version: '3.2.0', tile_px: 512 })
 */
export function sceneKey(source: SourceRef, params: ProcessingParams, code: string = codeVersion()): string {
  if (typeof source.bucket !== 'string' || source.bucket.length === 0) {
    throw new InvalidEventError('source bucket is empty');
  }
  validateObjectKey(source.key);
  if (typeof source.versionToken !== 'string' || source.versionToken.length === 0) {
    throw new InvalidEventError(
      `source ${source.bucket}/${source.key} has no version token; the job key needs the ETag, generation or versionId of the object`,
    );
  }
  if (typeof params.pipeline !== 'string' || params.pipeline.length === 0) {
    throw new InvalidParamsError('params.pipeline must be a non-empty string');
  }
  if (typeof params.version !== 'string' || params.version.length === 0) {
    throw new InvalidParamsError('params.version must be a non-empty string so that a version bump changes every job key');
  }
  if (typeof code !== 'string' || code.length === 0)
    throw new InvalidParamsError('the code version of a scene key must be a non-empty string');
  if (CODE_VERSION_PARAM in params) {
    throw new InvalidParamsError(`params.${CODE_VERSION_PARAM} is set from the build (code-version.ts), never by configuration; remove it`);
  }
  // The design notes' material (bucket, key, version, canonical params), with the build's code
  // version as one more canonical parameter: "a code change produces a genuinely new job".
  return sha256([source.bucket, source.key, source.versionToken, canonicalJson({ ...params, [CODE_VERSION_PARAM]: code })].join('\n'));
}

/** The parameter name under which the code version enters the scene key's canonical parameters. */
export const CODE_VERSION_PARAM = 'code_version';

/** A tile job's key: the scene key and its window position. */
export function tileJobKey(scene: string, window: Pick<Window, 'row' | 'col'>): string {
  return sha256(`${scene}\n${window.row}_${window.col}`);
}

/**
 * The claim id of a repair (`overwrite` backfill) of one tile: distinct from the
 * tile's own job key (whose claim row is COMMITTED for good) and bound to the
 * version being replaced, so a duplicate repair delivery finds it done.
 */
export function repairJobKey(tileKey: string, expectedVersion: string): string {
  return sha256(`${tileKey}\nrepair\n${expectedVersion}`);
}

/** Deterministic output keys: no UUID, no timestamp. */
export const outputKeys = {
  tile: (scene: string, window: Pick<Window, 'row' | 'col'>): string => `tiles/${scene}/${window.row}_${window.col}.tif`,
  tilePrefix: (scene: string): string => `tiles/${scene}/`,
  sceneManifest: (scene: string): string => `scenes/${scene}/scene.json`,
  mosaic: (scene: string): string => `mosaics/${scene}.vrt`,
} as const;
