import { existsSync, statSync } from 'node:fs';
import { basename, dirname, posix, resolve } from 'node:path';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { AssetRef, SourceRef } from '../../shared/domain/job-key.js';
import { DEFAULT_SOURCE_PREFIX } from '../../shared/domain/key-layout.js';
import { validateObjectKey } from '../../shared/domain/object-key.js';
import { type ResolvedStacAsset, readStacItem, resolveStacAssets } from '../../shared/domain/stac-item.js';
import { LOCAL_SOURCE_BUCKET, type LocalBackend } from './compose.js';

/**
 * How `tessera run` names a scene's bands (issue 14, section 1):
 * - `--band NAME=INDEX`: band INDEX (1-based) of the scene file (`--scene`, `--source-key`, or the synthetic scene);
 * - `--band NAME=PATH` or `NAME=PATH:INDEX`: band 1 (or INDEX) of its own file, imported into the source store.
 * Several files make a multi-file scene (one object per band, each pinned to its own version); bands that
 * all come from one file make an ordinary single-file scene.
 */
export type BandSpec =
  | { readonly name: string; readonly index: number }
  | { readonly name: string; readonly path: string; readonly index: number };

const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,31}$/;

/** Parse repeated `--band` values. */
export function parseBandSpecs(values: readonly string[] | undefined, cwd: string): BandSpec[] {
  const specs: BandSpec[] = [];
  for (const raw of values ?? []) {
    const eq = raw.indexOf('=');
    const name = eq > 0 ? raw.slice(0, eq) : '';
    const value = eq > 0 ? raw.slice(eq + 1) : '';
    if (!NAME.test(name) || value === '') {
      throw new InvalidParamsError(
        `--band ${JSON.stringify(raw)}: write NAME=INDEX (a band of the scene file) or NAME=PATH[:INDEX] (a band file), e.g. --band B04=1 or --band B04=red.tif`,
      );
    }
    if (specs.some((s) => s.name === name)) throw new InvalidParamsError(`--band ${name} is given twice`);
    if (/^\d+$/.test(value)) {
      specs.push({ name, index: bandIndex(name, value) });
      continue;
    }
    const m = /^(.*):(\d+)$/.exec(value);
    const path = resolve(cwd, m ? (m[1] as string) : value);
    if (!existsSync(path) || !statSync(path).isFile()) {
      throw new InvalidParamsError(`--band ${name}=${value}: ${path} is not a file`);
    }
    specs.push({ name, path, index: m ? bandIndex(name, m[2] as string) : 1 });
  }
  return specs;
}

function bandIndex(name: string, text: string): number {
  const index = Number(text);
  if (!Number.isSafeInteger(index) || index < 1 || index > 65_535) {
    throw new InvalidParamsError(`--band ${name}: band index ${text} must be an integer from 1 to 65535`);
  }
  return index;
}

/** Parse repeated `--asset NAME=ASSET` values (a STAC Item's asset key, or an eo:bands common name or name). */
export function parseAssetSpecs(values: readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of values ?? []) {
    const eq = raw.indexOf('=');
    const name = eq > 0 ? raw.slice(0, eq) : '';
    const asset = eq > 0 ? raw.slice(eq + 1) : '';
    if (!NAME.test(name) || asset === '') {
      throw new InvalidParamsError(
        `--asset ${JSON.stringify(raw)}: write NAME=ASSET, e.g. --asset B04=red (an asset key or an eo:bands common name)`,
      );
    }
    if (name in out) throw new InvalidParamsError(`--asset ${name} is given twice`);
    out[name] = asset;
  }
  return out;
}

/** The scene the bands describe: its source (single- or multi-file) and `params.bands`. */
export interface StagedScene {
  readonly source: SourceRef;
  readonly bands: Readonly<Record<string, number>>;
}

/**
 * Import every band file into the local source store (key `scenes/<file name>`, create-only: the same
 * bytes again are found, other bytes under a used name are refused) and describe the scene. `scene` is the
 * scene file's object when some bands name only an index.
 */
export async function stageBandFiles(
  backend: LocalBackend,
  specs: readonly BandSpec[],
  scene: (() => Promise<SourceRef>) | undefined,
): Promise<StagedScene> {
  const keyOfPath = new Map<string, string>();
  const pathOfKey = new Map<string, string>();
  for (const spec of specs) {
    if (!('path' in spec) || keyOfPath.has(spec.path)) continue;
    const key = `${DEFAULT_SOURCE_PREFIX}${basename(spec.path)}`;
    const other = pathOfKey.get(key);
    if (other !== undefined) {
      throw new InvalidParamsError(
        `band files ${other} and ${spec.path} have the same name; rename one (each is stored as scenes/<file name>)`,
      );
    }
    keyOfPath.set(spec.path, key);
    pathOfKey.set(key, spec.path);
  }
  const refs = new Map<string, AssetRef>();
  for (const [path, key] of keyOfPath) {
    await backend.sources.importFile(key, path);
    const head = await backend.sources.head(key);
    if (!head) throw new Error(`staging ${key} failed`);
    refs.set(path, { key, versionToken: head.version });
  }
  let sceneRef: SourceRef | undefined;
  if (specs.some((s) => !('path' in s))) {
    if (scene === undefined)
      throw new InvalidParamsError('--band NAME=INDEX names a band of the scene file: give --scene PATH or --source-key KEY too');
    sceneRef = await scene();
  }
  const assets: Record<string, AssetRef> = {};
  const bands: Record<string, number> = {};
  for (const spec of specs) {
    const ref =
      'path' in spec
        ? (refs.get(spec.path) as AssetRef)
        : { key: (sceneRef as SourceRef).key, versionToken: (sceneRef as SourceRef).versionToken };
    assets[spec.name] = ref;
    bands[spec.name] = spec.index;
  }
  const objects = new Set(Object.values(assets).map((a) => `${a.key}\n${a.versionToken}`));
  const first = assets[Object.keys(assets).sort()[0] as string] as AssetRef;
  // One object holding every band is a single-file scene (the same key as `--scene FILE` with named bands).
  if (objects.size === 1) return { source: { bucket: LOCAL_SOURCE_BUCKET, key: first.key, versionToken: first.versionToken }, bands };
  return { source: { bucket: LOCAL_SOURCE_BUCKET, key: first.key, versionToken: first.versionToken, assets }, bands };
}

/**
 * `--stac ITEM --asset NAME=ASSET`: the scene is the Item's assets. ITEM is a local file (imported with
 * the asset files beside it, at `scenes/<folder>/<file>`, so relative hrefs resolve in the store as on
 * disk) or the key of an Item already in the source store (its assets must be there too). The Item is the
 * scene's anchor: pinned like every band, so its own bytes are part of the key.
 */
export async function stageStacItem(
  backend: LocalBackend,
  item: string,
  selection: Readonly<Record<string, string>>,
  progress: { phase(name: string): void },
): Promise<{ source: SourceRef; bands: Record<string, number>; stacBands: Record<string, ResolvedStacAsset> }> {
  if (Object.keys(selection).length === 0) {
    throw new InvalidParamsError('--stac needs at least one --asset NAME=ASSET (e.g. --asset B04=red --asset B08=nir)');
  }
  const onDisk = existsSync(item) && statSync(item).isFile();
  let itemKey: string;
  if (onDisk) {
    const path = resolve(item);
    itemKey = `${DEFAULT_SOURCE_PREFIX}${basename(dirname(path))}/${basename(path)}`;
    progress.phase('import');
    await backend.sources.importFile(itemKey, path);
  } else {
    itemKey = item;
    validateObjectKey(itemKey);
    if (!(await backend.sources.head(itemKey))) {
      throw new InvalidParamsError(
        `--stac ${JSON.stringify(item)}: neither a file nor an object in the source store (${backend.sources.root})`,
      );
    }
  }
  const itemHead = await backend.sources.head(itemKey);
  if (!itemHead) throw new Error(`staging ${itemKey} failed`);
  const parsed = readStacItem(await backend.sources.get(itemKey), itemKey);
  const resolved = resolveStacAssets(parsed, itemKey, selection);
  const assets: Record<string, AssetRef> = {};
  const bands: Record<string, number> = {};
  const folder = posix.dirname(itemKey);
  for (const [name, r] of Object.entries(resolved)) {
    if (onDisk && !(await backend.sources.head(r.key))) {
      // The asset's file sits where the href points, relative to the Item's file: import it under the key the href resolves to.
      const file = resolve(dirname(resolve(item)), posix.relative(folder, r.key));
      if (!existsSync(file)) {
        throw new InvalidParamsError(`--stac: asset ${r.asset} of ${basename(item)} (for ${name}) is ${file}, which does not exist`);
      }
      await backend.sources.importFile(r.key, file);
    }
    const head = await backend.sources.head(r.key);
    if (!head) throw new InvalidParamsError(`--stac: asset ${r.asset} (for ${name}) is ${r.key}, which is not in the source store`);
    assets[name] = { key: r.key, versionToken: head.version };
    bands[name] = r.index;
  }
  return { source: { bucket: LOCAL_SOURCE_BUCKET, key: itemKey, versionToken: itemHead.version, assets }, bands, stacBands: resolved };
}
