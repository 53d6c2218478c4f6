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

/** One band's object in a multi-file scene: its decoded key and the version token its reads are pinned to. */
export interface AssetRef {
  readonly key: string;
  readonly versionToken: string;
}

/**
 * The source of a scene, as the trigger saw it. `key` is already URL-decoded.
 *
 * A single-file scene is one object holding every band (`params.bands` maps names to its band indexes).
 * A multi-file scene also names each band's own object in `assets` (band name -> object and version, all in
 * `bucket`; `params.bands` then gives the band index inside each one): Sentinel-2 and Landsat publish one
 * COG per band. Its `key`/`versionToken` are the scene's anchor: the STAC Item it came from (whose bytes
 * are pinned too), or for band files given directly, the first band by name.
 */
export interface SourceRef {
  readonly bucket: string;
  readonly key: string;
  /** S3 ETag or versionId, GCS generation, Blob ETag, local content hash. */
  readonly versionToken: string;
  readonly assets?: Readonly<Record<string, AssetRef>> | undefined;
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
  const material = [source.bucket, source.key, source.versionToken, canonicalJson({ ...params, [CODE_VERSION_PARAM]: code })];
  // Every band object's decoded key and version, sorted by band name (canonical JSON sorts keys): a new
  // version of any one band is a new scene. A single-file scene adds nothing, so its keys are as before.
  if (source.assets !== undefined) material.push(canonicalJson(validAssets(source)));
  // The design notes' material (bucket, key, version, canonical params), with the build's code
  // version as one more canonical parameter: "a code change produces a genuinely new job".
  return sha256(material.join('\n'));
}

/** Band names are identifiers (tiling-params.ts); at most this many band objects make one scene. */
export const MAX_SCENE_ASSETS = 64;
const ASSET_BAND = /^[A-Za-z_][A-Za-z0-9_]{0,31}$/;

/** The assets of a multi-file scene, checked: identifier band names, valid keys, non-empty version tokens. */
export function validAssets(source: SourceRef): Readonly<Record<string, AssetRef>> {
  const assets = source.assets;
  if (typeof assets !== 'object' || assets === null || Array.isArray(assets)) {
    throw new InvalidEventError('source assets must map band names to {key, versionToken}');
  }
  const names = Object.keys(assets);
  if (names.length === 0 || names.length > MAX_SCENE_ASSETS) {
    throw new InvalidEventError(`a multi-file scene names 1 to ${MAX_SCENE_ASSETS} band objects, got ${names.length}`);
  }
  const out: Record<string, AssetRef> = {};
  for (const name of names.sort()) {
    const a = assets[name] as AssetRef | undefined;
    if (!ASSET_BAND.test(name))
      throw new InvalidEventError(`asset band name ${JSON.stringify(name)} must be an identifier (letters, digits, _)`);
    if (typeof a !== 'object' || a === null || typeof a.key !== 'string' || typeof a.versionToken !== 'string' || a.versionToken === '') {
      throw new InvalidEventError(`asset ${name} must be {key, versionToken} with a non-empty version token`);
    }
    validateObjectKey(a.key);
    out[name] = { key: a.key, versionToken: a.versionToken };
  }
  return out;
}

/** The parameter name under which the code version enters the scene key's canonical parameters. */
export const CODE_VERSION_PARAM = 'code_version';

/**
 * A tile job's key: the scene key and its window position; in a zoom pyramid (docs/pyramids.md) also the zoom, every
 * zoom's windows being counted from their own level's first tile. One zoom's scene keeps the key without it.
 */
export function tileJobKey(scene: string, window: Pick<Window, 'row' | 'col'>, zoom?: number): string {
  return sha256(zoom === undefined ? `${scene}\n${window.row}_${window.col}` : `${scene}\n${zoom}/${window.row}_${window.col}`);
}

/**
 * The claim id of a repair (`overwrite` backfill) of one tile: distinct from the
 * tile's own job key (whose claim row is COMMITTED for good) and bound to the
 * version being replaced, so a duplicate repair delivery finds it done.
 */
export function repairJobKey(tileKey: string, expectedVersion: string): string {
  return sha256(`${tileKey}\nrepair\n${expectedVersion}`);
}

export { outputKeys, type TmsTileIndex } from './key-layout.js';
