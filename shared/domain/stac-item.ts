import { InvalidEventError, InvalidParamsError } from './errors.js';
import type { ProcessingParams } from './job-key.js';
import { validateObjectKey } from './object-key.js';
import type { ScaleOffset } from './tiling-params.js';

/**
 * STAC Item input (STAC 1.0 and 1.1): the one document that names every band
 * file of a multi-file scene. Parsing is strict about what Tessera reads
 * (type, version, assets, hrefs, bands) and ignores the rest (geometry, links,
 * other extensions), so a publisher's extra fields never make an item poison.
 *
 * Errors: a document that is not a usable STAC Item is `InvalidEventError`
 * (poison on a trigger: the same bytes fail every time); a selection that the
 * item cannot satisfy (no such asset or band, ambiguous common name) is
 * `InvalidParamsError` (the configuration must change). Neither is retryable.
 */

/** One band of an asset, as `eo:bands` (STAC 1.0) or `bands` (STAC 1.1) lists it. */
export interface StacBand {
  /** `name` (e.g. `B04`, `OLI_B4`, `band3`). */
  readonly name?: string;
  /** `common_name` (eo 1.x) or `eo:common_name` (STAC 1.1 `bands`), e.g. `red`, `nir`. */
  readonly commonName?: string;
}

export interface StacAsset {
  /** The asset's key in the item's `assets` object (`red`, `B04`, `visual`). */
  readonly name: string;
  /** The href exactly as the item gives it (a URI reference; resolved by resolveStacAssets). */
  readonly href: string;
  /** Media type, when the item gives one. */
  readonly type?: string;
  readonly roles: readonly string[];
  /** The asset's bands in file order (band i is 1-based index i + 1); empty when the item lists none. */
  readonly bands: readonly StacBand[];
  /**
   * Per band in file order, the raster extension's `scale` and `offset` where the item gives either (STAC 1.0
   * `raster:bands[i].scale/offset`, STAC 1.1 `bands[i]["raster:scale"]/["raster:offset"]`): what `unscale`
   * applies for that band instead of the file's own metadata.
   */
  readonly scaleOffsets?: readonly (StacScaleOffset | undefined)[];
  /**
   * The CRS the item declares for this asset (projection extension: the asset's own `proj:code`, `proj:epsg`,
   * `proj:wkt2` or `proj:projjson`, else the item's properties'), checked against the file's own GeoKeys at fan-out.
   */
  readonly crs?: StacCrs;
}

/**
 * A CRS an item declares (projection extension 1.x and 2.0): its text as the CRS readers take it (`EPSG:<n>`, WKT2,
 * or PROJJSON as JSON text), or why the fields cannot be read. The domain keeps the text; shared/raster/crs.ts reads it.
 */
export type StacCrs = { readonly text: string } | { readonly problem: string };

/** A band's raster-extension scale and offset, or why they cannot be used (refused only when `unscale` needs them). */
export type StacScaleOffset = ScaleOffset | { readonly problem: string };

/** What the output STAC item copies from the input, under STAC's own property names. */
export interface StacItemMetadata {
  readonly id: string;
  readonly collection?: string;
  /** RFC 3339, or null for a range (then start_datetime and end_datetime are set). */
  readonly datetime: string | null;
  readonly start_datetime?: string;
  readonly end_datetime?: string;
}

export interface StacItemInput {
  /** The item's key in the source store (decoded); hrefs are relative to it. */
  readonly itemKey: string;
  readonly stacVersion: string;
  readonly metadata: StacItemMetadata;
  /** By asset key. Look assets up with Object.hasOwn (an asset may be called `constructor`). */
  readonly assets: Readonly<Record<string, StacAsset>>;
}

/** One resolved band of a scene: the object key of its asset and the 1-based band index inside it. */
export interface ResolvedStacAsset {
  /** Object key in the source store (decoded, validated by validateObjectKey). */
  readonly key: string;
  /** 1-based band index inside that object. */
  readonly index: number;
  /** The asset key in the item it came from (for messages and the output item). */
  readonly asset: string;
  /** The band's scale and offset from the item's raster extension, when it gives them (see StacAsset.scaleOffsets). */
  readonly scaleOffset?: StacScaleOffset;
  /** The CRS the item declares for the asset (see StacAsset.crs). */
  readonly crs?: StacCrs;
}

/** A STAC Item is a few tens of KB; anything this large is not one, and would only cost memory. */
export const MAX_STAC_ITEM_BYTES = 8 * 1024 * 1024;

/** STAC 1.0.x and 1.1.x, their release candidates and betas included. */
const SUPPORTED_STAC_VERSION = /^1\.[01]\.\d+(?:-[0-9A-Za-z.-]+)?$/;
/** RFC 3339 date-time as STAC requires it (the `T` or a space, seconds, fraction, `Z` or an offset). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;
/** A URI scheme (RFC 3986 section 3.1): `s3:`, `gs:`, `https:`, `az:`, `file:`, ... */
const URI_SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const quote = (text: string): string => JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}...` : text);

/**
 * Decode an item's bytes (UTF-8 JSON) and parse it. The size cap and the JSON
 * error are typed like the rest: an item that does not decode is poison.
 */
export function readStacItem(bytes: Uint8Array, itemKey: string): StacItemInput {
  if (bytes.byteLength > MAX_STAC_ITEM_BYTES) {
    throw new InvalidEventError(
      `STAC item ${quote(itemKey)} is ${bytes.byteLength} bytes, over the ${MAX_STAC_ITEM_BYTES}-byte limit; a STAC Item is one Feature, not a collection or a search result`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (cause) {
    throw new InvalidEventError(`STAC item ${quote(itemKey)} is not UTF-8 JSON; upload the item's JSON document (a GeoJSON Feature)`, {
      cause,
    });
  }
  return parseStacItem(json, itemKey);
}

/**
 * Check a parsed JSON value is a STAC 1.0 / 1.1 Item Tessera can use and keep
 * what it needs: its assets (href, type, roles, bands) and the metadata the
 * output item copies. `itemKey` (the decoded key it was read from) is kept for
 * resolving hrefs and named in every message.
 *
 * @example
 * const item = parseStacItem(JSON.parse(text), 'S2/T31UDQ/2024-06-01/item.json');
 * item.assets.red?.href // './B04.tif'
 */
export function parseStacItem(json: unknown, itemKey: string): StacItemInput {
  const fail = (why: string): never => {
    throw new InvalidEventError(`STAC item ${quote(itemKey)} ${why}`);
  };
  if (!isObject(json))
    fail(
      `is ${Array.isArray(json) ? 'a JSON array' : `JSON ${json === null ? 'null' : typeof json}`}, not a STAC Item (a GeoJSON Feature object)`,
    );
  const doc = json as Json;
  if (doc.type !== 'Feature') {
    const found = typeof doc.type === 'string' ? `"${doc.type}"` : 'missing';
    const hint =
      doc.type === 'Collection' || doc.type === 'Catalog' || doc.type === 'FeatureCollection'
        ? `; point Tessera at one of its Items, not the ${doc.type}`
        : '';
    fail(`is not a STAC Item: its "type" is ${found}, not "Feature"${hint}`);
  }
  const version = doc.stac_version;
  if (typeof version !== 'string') fail('has no "stac_version"; Tessera reads STAC 1.0 and 1.1 Items');
  if (!SUPPORTED_STAC_VERSION.test(version as string)) {
    fail(`is STAC ${quote(String(version))}; Tessera reads STAC 1.0 and 1.1 Items: migrate it (pystac or stac-node-validator can)`);
  }
  const id = doc.id;
  if (typeof id !== 'string' || id.length === 0) fail('has no "id" (a non-empty string)');
  const collection = doc.collection;
  if (collection !== undefined && typeof collection !== 'string') fail('has a "collection" that is not a string');

  const properties = doc.properties;
  if (!isObject(properties)) fail('has no "properties" object');
  const props = properties as Json;
  const datetimeOf = (name: string): string | undefined => {
    const value = props[name];
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || !RFC3339.test(value))
      fail(`has properties.${name} ${JSON.stringify(value)}, which is not an RFC 3339 date-time`);
    return value as string;
  };
  if (!('datetime' in props)) fail('has no properties.datetime (required: a date-time, or null with start_datetime and end_datetime)');
  const datetime = props.datetime === null ? null : datetimeOf('datetime');
  const start = datetimeOf('start_datetime');
  const end = datetimeOf('end_datetime');
  if (datetime === null && (start === undefined || end === undefined)) {
    fail('has properties.datetime null but not both start_datetime and end_datetime; STAC needs one or the other');
  }

  const rawAssets = doc.assets;
  if (!isObject(rawAssets) || Object.keys(rawAssets).length === 0) {
    fail('has no assets; a scene needs the band files its "assets" object names');
  }
  const assets: Record<string, StacAsset> = {};
  const itemCrs = declaredCrs(props, 'properties');
  for (const [name, raw] of Object.entries(rawAssets as Json)) {
    const asset = parseAsset(name, raw, fail);
    // The projection extension: an asset's own proj: fields override the item's.
    const crs = (isObject(raw) ? declaredCrs(raw, `asset ${quote(name)}`) : undefined) ?? itemCrs;
    Object.defineProperty(assets, name, { value: crs === undefined ? asset : { ...asset, crs }, enumerable: true });
  }

  const metadata: StacItemMetadata = {
    id: id as string,
    ...(typeof collection === 'string' ? { collection } : {}),
    datetime: datetime ?? null,
    ...(start === undefined ? {} : { start_datetime: start }),
    ...(end === undefined ? {} : { end_datetime: end }),
  };
  return { itemKey, stacVersion: version as string, metadata, assets };
}

function parseAsset(name: string, raw: unknown, fail: (why: string) => never): StacAsset {
  const where = `asset ${quote(name)}`;
  if (!isObject(raw)) return fail(`has ${where} that is not an object`);
  const href = raw.href;
  if (typeof href !== 'string' || href.trim().length === 0) return fail(`has ${where} without an "href"`);
  if (!href.isWellFormed()) return fail(`has ${where} whose href holds a lone UTF-16 surrogate`);
  const type = raw.type;
  if (type !== undefined && typeof type !== 'string') return fail(`has ${where} whose "type" is not a string`);
  const roles = raw.roles ?? [];
  if (!Array.isArray(roles) || !roles.every((r) => typeof r === 'string'))
    return fail(`has ${where} whose "roles" is not an array of strings`);
  // STAC 1.1 moved eo:bands and raster:bands into one `bands` array (common
  // name as `eo:common_name`); 1.0 items use the eo extension's `eo:bands`
  // (`common_name`), or only the raster extension's `raster:bands`, which
  // names no band but still says how many the file holds. `bands` first.
  const field = raw.bands !== undefined ? 'bands' : raw['eo:bands'] !== undefined ? 'eo:bands' : 'raster:bands';
  const listed = { field, value: raw[field] };
  const bands: StacBand[] = [];
  if (listed.value !== undefined) {
    if (!Array.isArray(listed.value)) return fail(`has ${where} whose "${listed.field}" is not an array`);
    for (const [i, band] of (listed.value as unknown[]).entries()) {
      if (!isObject(band)) return fail(`has ${where} whose ${listed.field}[${i}] is not an object`);
      const bandName = band.name;
      const common = band['eo:common_name'] ?? band.common_name;
      if (bandName !== undefined && typeof bandName !== 'string')
        return fail(`has ${where} whose ${listed.field}[${i}].name is not a string`);
      if (common !== undefined && typeof common !== 'string')
        return fail(`has ${where} whose ${listed.field}[${i}] common name is not a string`);
      bands.push({ ...(bandName === undefined ? {} : { name: bandName }), ...(common === undefined ? {} : { commonName: common }) });
    }
  }
  const scaleOffsets = parseScaleOffsets(raw, where);
  return {
    name,
    href,
    ...(type === undefined ? {} : { type }),
    roles: roles as string[],
    bands,
    ...(scaleOffsets === undefined ? {} : { scaleOffsets }),
  };
}

/**
 * The CRS a set of projection-extension fields declares: `proj:code` (2.0, e.g. "EPSG:32631"), else `proj:epsg`
 * (1.x), else `proj:wkt2`, else `proj:projjson`; a null field says "none in this form" and the next is tried.
 * Undefined when the fields declare none. A field of the wrong type is kept as a problem: refused only where the
 * CRS is checked, so an item with a malformed field we do not need still processes.
 */
function declaredCrs(fields: Json, where: string): StacCrs | undefined {
  const has = ['proj:code', 'proj:epsg', 'proj:wkt2', 'proj:projjson'].some((k) => fields[k] !== undefined);
  if (!has) return undefined;
  const code = fields['proj:code'];
  if (code !== undefined && code !== null) {
    return typeof code === 'string' && code.trim() !== ''
      ? { text: code.trim() }
      : { problem: `${where} proj:code ${JSON.stringify(code)} is not a string` };
  }
  const epsg = fields['proj:epsg'];
  if (epsg !== undefined && epsg !== null) {
    return typeof epsg === 'number' && Number.isInteger(epsg) && epsg > 0
      ? { text: `EPSG:${epsg}` }
      : { problem: `${where} proj:epsg ${JSON.stringify(epsg)} is not a positive integer` };
  }
  const wkt2 = fields['proj:wkt2'];
  if (wkt2 !== undefined && wkt2 !== null) {
    return typeof wkt2 === 'string' && wkt2.trim() !== '' ? { text: wkt2 } : { problem: `${where} proj:wkt2 is not a WKT2 string` };
  }
  const projjson = fields['proj:projjson'];
  if (projjson !== undefined && projjson !== null) {
    return isObject(projjson) ? { text: JSON.stringify(projjson) } : { problem: `${where} proj:projjson is not a PROJJSON object` };
  }
  return undefined;
}

/**
 * The raster extension's scale and offset per band: STAC 1.1 puts them in `bands[i]` as `raster:scale` and
 * `raster:offset`, STAC 1.0 in `raster:bands[i]` as `scale` and `offset`. A band giving one gets the other's
 * default (scale 1, offset 0), as the extension defines; a band giving neither has none. A value that is not a
 * finite number (or a zero scale) is kept as a problem: a scene that unscales that band is refused (its values
 * would be wrong under a key that looks right); one that does not is unaffected.
 */
function parseScaleOffsets(raw: Json, where: string): (StacScaleOffset | undefined)[] | undefined {
  const sources: [string, unknown, string, string][] = [
    ['bands', raw.bands, 'raster:scale', 'raster:offset'],
    ['raster:bands', raw['raster:bands'], 'scale', 'offset'],
  ];
  for (const [field, list, scaleKey, offsetKey] of sources) {
    if (!Array.isArray(list)) continue;
    const out: (StacScaleOffset | undefined)[] = [];
    let any = false;
    for (const [i, band] of list.entries()) {
      // Not this function's to refuse: the band list's own parse (above) says what a malformed entry means.
      if (!isObject(band)) {
        out.push(undefined);
        continue;
      }
      const scale = band[scaleKey];
      const offset = band[offsetKey];
      if (scale === undefined && offset === undefined) {
        out.push(undefined);
        continue;
      }
      any = true;
      if (scale !== undefined && (typeof scale !== 'number' || !Number.isFinite(scale) || scale === 0)) {
        out.push({ problem: `${where} ${field}[${i}].${scaleKey} ${JSON.stringify(scale)} is not a finite non-zero number` });
        continue;
      }
      if (offset !== undefined && (typeof offset !== 'number' || !Number.isFinite(offset))) {
        out.push({ problem: `${where} ${field}[${i}].${offsetKey} ${JSON.stringify(offset)} is not a finite number` });
        continue;
      }
      out.push({ scale: (scale as number | undefined) ?? 1, offset: (offset as number | undefined) ?? 0 });
    }
    if (any) return out;
  }
  return undefined;
}

/**
 * The parameters of a STAC scene with `unscale`: `scale_offset` gets each band's scale and offset from the item's
 * raster extension where it gives them (the other bands keep their file's GDAL metadata). Without `unscale`, or
 * with no such values, the parameters are returned as they are, so existing scene keys do not change. The values
 * come from the item's pinned bytes, whose version is in the scene key: the same item version always gives the
 * same parameters.
 */
export function withStacScaleOffsets(
  params: ProcessingParams,
  resolved: Readonly<Record<string, ResolvedStacAsset>>,
  itemKey: string,
): ProcessingParams {
  if (params.unscale !== true) return params;
  const configured = (params.scale_offset ?? {}) as Record<string, ScaleOffset>;
  const fromItem: Record<string, ScaleOffset> = {};
  for (const [band, r] of Object.entries(resolved)) {
    const so = r.scaleOffset;
    if (so === undefined || Object.hasOwn(configured, band)) continue;
    if ('problem' in so)
      throw new InvalidEventError(
        `STAC item ${quote(itemKey)} has ${so.problem}, so band ${quote(band)} cannot be unscaled; fix the item's raster extension, or name the band's scale and offset in params.scale_offset`,
      );
    fromItem[band] = so;
  }
  if (Object.keys(fromItem).length === 0) return params;
  // A scale the configuration names for a band is its own choice; the item's fills in the others.
  return { ...params, scale_offset: { ...fromItem, ...configured } };
}

/**
 * Resolve an asset href to a key in the source store, like a URL reference
 * against the item's own key (RFC 3986 section 5.2, path only):
 * - `B04.tif`, `./B04.tif`, `../20m/B8A.tif`: relative to the item's folder;
 * - `/L2A/T31UDQ/B04.tif`: a key from the store's root;
 * - each segment is percent-decoded after `.` and `..` are applied (`%20` is a
 *   space, `+` stays a plus: hrefs are URIs, not form data); a decoded
 *   segment that makes a `..` or an empty segment is refused by validateObjectKey.
 * Refused, with a typed error: `..` above the store's root; a URL with a
 * scheme or an authority (`s3://`, `gs://`, `https://`, `az://`, `//host/`):
 * Tessera reads every asset from the stack's source store, pinned to a version
 * it can check, never from another bucket or the web; a query or fragment
 * (`?`, `#`), which an object key cannot carry (encode them as %3F, %23).
 *
 * @example
 * resolveAssetHref('S2/T31UDQ/item.json', '../B04.tif')   // 'S2/B04.tif'
 * resolveAssetHref('S2/T31UDQ/item.json', '/other/B04.tif') // 'other/B04.tif'
 */
export function resolveAssetHref(itemKey: string, href: string, asset = '(href)'): string {
  const fail = (why: string, cause?: unknown): never => {
    throw new InvalidEventError(
      `STAC item ${quote(itemKey)} asset ${quote(asset)} href ${quote(href)} ${why}`,
      cause === undefined ? {} : { cause },
    );
  };
  if (URI_SCHEME.test(href) || href.startsWith('//')) {
    fail(
      "is a URL; Tessera reads assets from the stack's source store only: copy the asset beside the item and give its href relative to the item (./B04.tif) or as a key in the source store (/path/B04.tif)",
    );
  }
  if (href.includes('?') || href.includes('#'))
    fail('has a query or fragment, which an object key cannot carry; percent-encode "?" as %3F and "#" as %23');
  const absolute = href.startsWith('/');
  const segments = absolute ? [] : itemKey.split('/').slice(0, -1);
  const parts = (absolute ? href.slice(1) : href).split('/');
  for (const [i, part] of parts.entries()) {
    const last = i === parts.length - 1;
    if (part === '.') {
      if (last) fail('names a folder, not a file');
    } else if (part === '..') {
      if (segments.length === 0) fail(`climbs above the root of the source store (the item is at ${quote(itemKey)})`);
      segments.pop();
      if (last) fail('names a folder, not a file');
    } else {
      segments.push(decodeSegment(part, fail));
    }
  }
  const key = segments.join('/');
  try {
    return validateObjectKey(key);
  } catch (cause) {
    return fail(
      `resolves to ${quote(key)}, which is not a valid object key: ${cause instanceof Error ? cause.message : String(cause)}`,
      cause,
    );
  }
}

function decodeSegment(part: string, fail: (why: string, cause?: unknown) => never): string {
  try {
    return decodeURIComponent(part);
  } catch (cause) {
    return fail('is not valid percent-encoding', cause);
  }
}

/** `ASSET:INDEX`: band INDEX (1-based) of asset ASSET, for an asset that holds several bands. */
const ASSET_AND_INDEX = /^(.+):([1-9]\d{0,5})$/;

/**
 * Pick each scene band's object and band index from the item. A selection
 * value is, in this order:
 * 1. an asset key (`red` -> assets.red, band 1); an asset that lists several
 *    bands must say which (`visual:2`), since band 1 of it is a guess;
 * 2. `ASSET:INDEX` (`visual:3`);
 * 3. a band's `name` or common name (`B04`, `red`; eo:bands in STAC 1.0,
 *    bands[] in 1.1), which picks that asset and the band's 1-based index.
 *    Several assets may carry it (Sentinel-2: red, red_20m, red_60m and
 *    visual all hold `red`): an asset of exactly one band wins over a
 *    multi-band one (visual); two or more left is an error that lists them,
 *    so the choice is the configuration's, never ours.
 * Every href is resolved by resolveAssetHref. An asset whose media type is
 * given and is not TIFF (a JPEG thumbnail, the MTL metadata) is refused.
 *
 * @example
 * resolveStacAssets(item, item.itemKey, { B04: 'red', B08: 'nir' })
 * // { B04: { key: '.../B04_10m.tif', index: 1, asset: 'red' }, B08: { key: '.../B08_10m.tif', index: 1, asset: 'nir' } }
 */
export function resolveStacAssets(
  item: StacItemInput,
  itemKey: string,
  selection: Readonly<Record<string, string>>,
): Record<string, ResolvedStacAsset> {
  const entries = Object.entries(selection);
  if (entries.length === 0) {
    throw new InvalidParamsError(`no assets selected from STAC item ${quote(itemKey)}; name each band, e.g. {"B04":"red","B08":"nir"}`);
  }
  const resolved: Record<string, ResolvedStacAsset> = {};
  for (const [band, wanted] of entries) {
    if (band.length === 0) throw new InvalidParamsError(`a band selected from STAC item ${quote(itemKey)} has an empty name`);
    if (typeof wanted !== 'string' || wanted.length === 0) {
      throw new InvalidParamsError(
        `band ${quote(band)} of STAC item ${quote(itemKey)} names no asset; give an asset key or a band's common name`,
      );
    }
    const choice = chooseAsset(item, itemKey, band, wanted);
    const asset = choice.asset;
    if (asset.type !== undefined && !/tiff/i.test(asset.type)) {
      throw new InvalidParamsError(
        `band ${quote(band)} = ${quote(wanted)} picks asset ${quote(asset.name)} of STAC item ${quote(itemKey)}, which is ${quote(asset.type)}, not a GeoTIFF; choose a data asset`,
      );
    }
    const scaleOffset = asset.scaleOffsets?.[choice.index - 1];
    Object.defineProperty(resolved, band, {
      value: {
        key: resolveAssetHref(itemKey, asset.href, asset.name),
        index: choice.index,
        asset: asset.name,
        ...(scaleOffset === undefined ? {} : { scaleOffset }),
        ...(asset.crs === undefined ? {} : { crs: asset.crs }),
      },
      enumerable: true,
    });
  }
  return resolved;
}

const bandLabel = (b: StacBand): string => [b.name, b.commonName].filter((x) => x !== undefined).join('/') || '(unnamed)';

function chooseAsset(item: StacItemInput, itemKey: string, band: string, wanted: string): { asset: StacAsset; index: number } {
  const where = `band ${quote(band)} = ${quote(wanted)} of STAC item ${quote(itemKey)}`;
  const byKey = (name: string): StacAsset | undefined => (Object.hasOwn(item.assets, name) ? item.assets[name] : undefined);

  const direct = byKey(wanted);
  if (direct !== undefined) {
    if (direct.bands.length > 1) {
      throw new InvalidParamsError(
        `${where}: asset ${quote(direct.name)} holds ${direct.bands.length} bands (${direct.bands.map(bandLabel).join(', ')}); ` +
          `say which: ${quote(`${direct.name}:1`)} .. ${quote(`${direct.name}:${direct.bands.length}`)}, or a band's common name`,
      );
    }
    return { asset: direct, index: 1 };
  }

  const indexed = ASSET_AND_INDEX.exec(wanted);
  const indexedAsset = indexed?.[1] === undefined ? undefined : byKey(indexed[1]);
  if (indexed !== null && indexedAsset !== undefined) {
    const index = Number(indexed[2]);
    if (indexedAsset.bands.length > 0 && index > indexedAsset.bands.length) {
      throw new InvalidParamsError(
        `${where}: asset ${quote(indexedAsset.name)} lists ${indexedAsset.bands.length} bands, so there is no band ${index}`,
      );
    }
    return { asset: indexedAsset, index };
  }

  const candidates: { asset: StacAsset; index: number }[] = [];
  for (const asset of Object.values(item.assets)) {
    for (const [i, b] of asset.bands.entries()) {
      if (b.name === wanted || b.commonName === wanted) candidates.push({ asset, index: i + 1 });
    }
  }
  if (candidates.length === 0) {
    const names = Object.values(item.assets)
      .filter((a) => a.type === undefined || /tiff/i.test(a.type))
      .map((a) => (a.bands.some((b) => b.name ?? b.commonName) ? `${a.name} (${a.bands.map(bandLabel).join(', ')})` : a.name));
    throw new InvalidParamsError(
      `${where}: no asset is called ${quote(wanted)} and no band has that name or common name; the item's raster assets: ${names.slice(0, 40).join('; ')}${names.length > 40 ? '; ...' : ''}`,
    );
  }
  const single = candidates.filter((c) => c.asset.bands.length === 1);
  const pool = single.length > 0 ? single : candidates;
  const [only, ...others] = pool;
  if (only !== undefined && others.length === 0) return only;
  const listed = pool.map((c) => (c.asset.bands.length === 1 ? quote(c.asset.name) : quote(`${c.asset.name}:${c.index}`)));
  throw new InvalidParamsError(
    `${where} is ambiguous: ${listed.join(', ')} all hold it; select one by its asset key, e.g. {${JSON.stringify(band)}:${listed[0]}}`,
  );
}

/**
 * A STAC asset selection as configuration spells it (`tessera:stacAssets`,
 * TESSERA_STAC_ASSETS): a JSON object of band name -> asset key, `ASSET:INDEX`
 * or band (common) name, e.g. `{"B04":"red","B08":"nir"}`. Which names the
 * expression may use is the processing parameters' rule (tiling-params.ts).
 */
export function parseStacSelection(text: string, where: string): Record<string, string> {
  const example = 'e.g. {"B04":"red","B08":"nir"}';
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (cause) {
    throw new InvalidParamsError(`${where} is not JSON; give a JSON object of band name -> STAC asset, ${example}`, { cause });
  }
  if (!isObject(raw) || Object.keys(raw).length === 0) {
    throw new InvalidParamsError(`${where} must be a non-empty JSON object of band name -> STAC asset, ${example}`);
  }
  const selection: Record<string, string> = {};
  for (const [band, asset] of Object.entries(raw)) {
    if (typeof asset !== 'string' || asset.length === 0) {
      throw new InvalidParamsError(`${where}: band ${quote(band)} must name a STAC asset (a non-empty string), ${example}`);
    }
    Object.defineProperty(selection, band, { value: asset, enumerable: true });
  }
  return selection;
}
