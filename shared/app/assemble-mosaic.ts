import { createHash } from 'node:crypto';
import { MissingTilesError, MosaicChangedError, SourceChangedError } from '../domain/errors.js';
import { outputKeys, type TmsTileIndex } from '../domain/job-key.js';
import { tileContentType, tileFormatOf } from '../domain/render-params.js';
import type { StacItemMetadata } from '../domain/stac-item.js';
import { type Window, windows } from '../domain/tile-grid.js';
import { type TilingParams, tilingParams } from '../domain/tiling-params.js';
import type { ObjectHead, ObjectStore } from '../ports/object-store.port.js';
import { renderedBands } from '../raster/image-encoder.js';
import { buildVrt, epsgFromWkt, type GeoTransform, type RasterCrs } from '../raster/index.js';
import type { Backend } from './backend.js';
import { buildCogMosaic, type CogMosaicInput } from './cog-mosaic.js';
import { type DerivedWrite, writeDerivedOutput } from './derived-output.js';
import { buildSceneArchive } from './pmtiles-archive.js';
import { lowerLevelTiles } from './pyramid-grid.js';
import { writeQuicklook } from './quicklook.js';
import { tmsTileOf } from './scene-grid.js';
import { readSceneManifest, type SceneManifest } from './scene-manifest.js';
import { type SceneStacItemInput, sceneStacItem, TILE_VERSIONS_PROPERTY, writeSceneStacItem } from './stac-output.js';
import { tileOutputKey } from './tile-job.js';
import { isWebMapScene, sceneTileJson, TILEJSON_CONTENT_TYPE, WEB_MAP_TMS, webMapExtent } from './tilejson.js';

/** One tile of a scene, from its manifest: its deterministic key and its window of the scene grid. */
export interface SceneTile {
  readonly key: string;
  readonly window: Window;
  readonly tms?: TmsTileIndex | undefined;
}

/**
 * Every tile a scene's grid makes, row by row, with its key: what the VRT, the COG mosaic and the STAC
 * Item list (never a listing, which would include a stray duplicate).
 */
export function* sceneTiles(manifest: SceneManifest): Generator<SceneTile> {
  for (const window of windows(manifest.grid)) {
    const tms = tmsTileOf(manifest.grid.target, window);
    const key = tileOutputKey(manifest.sceneKey, manifest.grid, window, tileFormatOf(manifest.params));
    yield { key, window, ...(tms === undefined ? {} : { tms }) };
  }
}

/** Where a scene's grid lies: its target grid's CRS and geotransform, or its single source's. */
export function sceneGeoref(manifest: SceneManifest): { crs: RasterCrs; geoTransform: GeoTransform } {
  const t = manifest.grid.target;
  return t === undefined
    ? { crs: manifest.raster.crs, geoTransform: manifest.raster.geoTransform }
    : { crs: t.crs, geoTransform: t.geoTransform };
}

export interface MosaicResult {
  readonly mosaicKey: string;
  /** The COG mosaic, when the parameters ask for one (`mosaic: cog`). */
  readonly cogMosaicKey?: string | undefined;
  /** The PMTiles archive, when the parameters ask for one (`mosaic: pmtiles`; rendered tiles on WebMercatorQuad). */
  readonly pmtilesKey?: string | undefined;
  /** The TileJSON of a rendered scene on WebMercatorQuad. */
  readonly tileJsonKey?: string | undefined;
  /** The quicklook PNG of a rendered scene (the STAC Item's thumbnail). */
  readonly quicklookKey?: string | undefined;
  /** The output's STAC Item; absent only for a scene with no CRS at all (a CRS without an EPSG code is written as proj:wkt2). */
  readonly stacItemKey?: string | undefined;
  /** Sources listed in the VRT: always the grid count when assembly succeeds. */
  readonly manifestCount: number;
  readonly gridCount: number;
  /**
   * The VRT's write (`written`, `already-present`), or `replaced` when the COG mosaic or the STAC Item in
   * place were this scene's from before a repair and were replaced (conditionally on the version read).
   */
  readonly result: 'written' | 'already-present' | 'replaced';
}

/**
 * Assemble a scene's mosaic as a GDAL VRT. The source list is built from the
 * grid's deterministic keys, never from a listing (a listing would happily
 * include a stray duplicate); the listing is used only to prove each expected
 * tile exists, and for the version of each (the item records them). Fails
 * loudly naming every missing tile. The VRT is written create-only, so
 * assembling twice is harmless. The COG mosaic and the STAC Item depend on the
 * tiles' bytes: after an overwrite repair of a tile, a re-assembly replaces
 * them, on condition of the versions it read ({@link staleOutputs}).
 *
 * The outputs, in the order they are written, each create-only: the COG mosaic (`mosaic: cog`), the PMTiles archive
 * (`mosaic: pmtiles`), the TileJSON (rendered tiles on WebMercatorQuad), the quicklook (rendered tiles), the STAC
 * Item, and the VRT last. The VRT is what tells the mosaic sweep a scene is assembled (mosaic-sweep.ts `isResolved`),
 * so a crash anywhere before it leaves the scene to the next sweep, which finds the outputs already written
 * `already-present` (the same bytes) and writes the rest: a crash can never leave an assembled scene without its
 * archive, TileJSON, quicklook or Item.
 */
export async function assembleMosaic(backend: Backend, sceneKey: string): Promise<MosaicResult> {
  const manifest = await readSceneManifest(backend.outputs, sceneKey);
  const heads = await listTiles(backend.outputs, sceneKey);
  const listed = new Map([...heads].map(([key, head]) => [key, head.version]));
  const sources = [];
  const missing: string[] = [];
  for (const { key, window: w } of sceneTiles(manifest)) {
    if (!listed.has(key)) missing.push(key);
    // Relative to mosaics/<scene>.vrt, so the mosaic works wherever the prefix is mounted (/vsis3/, /vsigs/, a folder).
    sources.push({ href: `../${key}`, window: { x: w.x, y: w.y, width: w.width, height: w.height } });
  }
  const tiling = tilingParams(manifest.params);
  // A pyramid is complete with every zoom's tiles; its mosaics are of the highest zoom, the scene grid (docs/pyramids.md).
  let needed = manifest.grid.count;
  for (const { key } of lowerLevelTiles(sceneKey, manifest.grid, tiling)) {
    needed++;
    if (!listed.has(key)) missing.push(key);
  }
  if (missing.length > 0) {
    backend.telemetry.log('ERROR', 'mosaic-missing-tiles', { sceneKey, missing: missing.length, first: missing.slice(0, 5) });
    throw new MissingTilesError(sceneKey, missing, needed);
  }
  const georef = sceneGeoref(manifest);
  const vrt = buildVrt({
    width: manifest.grid.width,
    height: manifest.grid.height,
    crs: georef.crs,
    geoTransform: georef.geoTransform,
    // Rendered tiles (PNG, WebP, JPEG) make an 8-bit mosaic of their bands, transparent where their alpha is 0.
    ...(tiling.render === undefined
      ? { dataType: 'Float32', noData: tiling.noData, blockSize: tiling.blockSize }
      : { dataType: 'Byte', colorInterp: renderedBands(tiling.render) }),
    sources,
  });
  const mosaicKey = outputKeys.mosaic(sceneKey);
  const tileVersions = tileVersionsDigest(manifest, listed);
  const stale = staleOutputs(backend.outputs, manifest, listed, tileVersions);
  let cogMosaicKey: string | undefined;
  let replaced = false;
  if (tiling.mosaic === 'cog') {
    const cog = await buildCogMosaic(backend.outputs, cogMosaicInputOf(manifest), backend.telemetry, { isStale: stale.cog });
    cogMosaicKey = cog.key;
    replaced = cog.kind === 'replaced';
  }
  const web = await writeWebMapOutputs(backend, manifest, tiling, heads, stale.cog);
  replaced ||= web.replaced;
  const item = await writeStacItem(backend, manifest, tiling, georef, mosaicKey, cogMosaicKey, tileVersions, stale.item, web.refs);
  // Last: the VRT marks the scene assembled for the sweep (see above).
  const put = await backend.outputs.putIfAbsent(mosaicKey, new TextEncoder().encode(vrt), { contentType: 'application/xml' });
  if (put.kind === 'already-present') {
    backend.telemetry.count('write-already-present');
    backend.telemetry.log('INFO', 'write-already-present', { sceneKey, outputKey: mosaicKey });
  }
  backend.telemetry.log('INFO', 'mosaic-assembled', { sceneKey, mosaicKey, sources: sources.length, result: put.kind });
  return {
    mosaicKey,
    ...(cogMosaicKey === undefined ? {} : { cogMosaicKey }),
    ...(web.refs.pmtiles === undefined ? {} : { pmtilesKey: web.refs.pmtiles }),
    ...(web.refs.tileJson === undefined ? {} : { tileJsonKey: web.refs.tileJson }),
    ...(web.refs.thumbnail === undefined ? {} : { quicklookKey: web.refs.thumbnail.key }),
    ...(item === undefined ? {} : { stacItemKey: item.key }),
    manifestCount: sources.length,
    gridCount: manifest.grid.count,
    result: replaced || item?.kind === 'replaced' ? 'replaced' : put.kind,
  };
}

type WebMapRefs = NonNullable<SceneStacItemInput['web']>;

/**
 * The web map outputs of a rendered scene, in this order: its PMTiles archive (`mosaic: pmtiles`), its TileJSON (on
 * WebMercatorQuad), its quicklook. The archive and the quicklook are made of the tiles' bytes, so `isStale` (the COG
 * mosaic's judgement: the item in place records other tile versions) lets a re-assembly after a repair replace them;
 * the TileJSON is made of the manifest alone. Nothing for a COG scene.
 */
async function writeWebMapOutputs(
  backend: Backend,
  manifest: SceneManifest,
  tiling: TilingParams,
  heads: ReadonlyMap<string, ObjectHead>,
  isStale: DerivedWrite['isStale'],
): Promise<{ readonly refs: WebMapRefs; readonly replaced: boolean }> {
  const render = tiling.render;
  if (render === undefined) return { refs: {}, replaced: false };
  let replaced = false;
  let pmtiles: string | undefined;
  if (tiling.mosaic === 'pmtiles') {
    const archive = await buildSceneArchive(backend.outputs, manifest, tiling, heads, backend.telemetry, { isStale });
    pmtiles = archive.key;
    replaced ||= archive.kind === 'replaced';
  }
  let tileJson: string | undefined;
  let xyz: WebMapRefs['xyz'];
  if (isWebMapScene(manifest, tiling)) {
    const doc = sceneTileJson(manifest, tiling, { pmtilesKey: pmtiles });
    await writeDerivedOutput(backend.outputs, backend.telemetry, {
      sceneKey: manifest.sceneKey,
      key: doc.key,
      body: doc.bytes,
      contentType: TILEJSON_CONTENT_TYPE,
    });
    tileJson = doc.key;
    const extent = webMapExtent(manifest, tiling);
    xyz = {
      template: outputKeys.tileTemplate(manifest.sceneKey, WEB_MAP_TMS, render.format),
      type: tileContentType(render.format),
      minZoom: extent.minZoom,
      maxZoom: extent.maxZoom,
    };
  }
  const quicklook = await writeQuicklook(backend.outputs, manifest, tiling, heads, backend.telemetry, { isStale });
  replaced ||= quicklook?.kind === 'replaced';
  return {
    refs: {
      ...(pmtiles === undefined ? {} : { pmtiles }),
      ...(tileJson === undefined ? {} : { tileJson, xyz }),
      ...(quicklook === undefined ? {} : { thumbnail: { key: quicklook.key, width: quicklook.width, height: quicklook.height } }),
    },
    replaced,
  };
}

/** Every tile under the scene's prefix and what the listing says of it (version token, size). */
async function listTiles(outputs: ObjectStore, sceneKey: string): Promise<Map<string, ObjectHead>> {
  const listed = new Map<string, ObjectHead>();
  for await (const head of outputs.list(outputKeys.tilePrefix(sceneKey))) listed.set(head.key, head);
  return listed;
}

/** Every tile under the scene's prefix and the version token the listing gives it. */
async function listTileVersions(outputs: ObjectStore, sceneKey: string): Promise<Map<string, string>> {
  return new Map([...(await listTiles(outputs, sceneKey))].map(([key, head]) => [key, head.version]));
}

/** SHA-256 (hex) over each tile key of the grid and its listed version, in grid order: which tiles a mosaic shows. */
function tileVersionsDigest(manifest: SceneManifest, listed: ReadonlyMap<string, string>): string {
  const hash = createHash('sha256');
  for (const { key } of sceneTiles(manifest)) hash.update(`${key}\t${listed.get(key) ?? ''}\n`);
  return hash.digest('hex');
}

/**
 * How an assembly tells this scene's COG mosaic or STAC Item from before a repair (stale: replace it) from
 * other bytes at their keys (an alarm). The COG's own bytes cannot say what they were made of; the item
 * beside it records the tile versions the mosaics were assembled from ({@link TILE_VERSIONS_PROPERTY}).
 *
 * - COG mosaic: stale when the item in place is this scene's and records other tile versions than the
 *   ones listed now. No item, or one without the record (written before it existed), or the same versions:
 *   other bytes cannot be shown stale, so they stay an alarm.
 * - STAC Item: stale when the object in place is this scene's item (its id is the scene key) with other
 *   bytes: other tile versions, or an item of an earlier format.
 *
 * Either way the assembly first lists the tiles again: if a repair landed after its first listing, what it
 * built is older than the tiles in place and would replace a newer mosaic, so it throws MosaicChangedError
 * (retryable) and replaces nothing. The replacement itself is conditional on the version the create-only
 * write's refusal read (derived-output.ts), so a concurrent assembly's write is never overwritten blindly.
 */
function staleOutputs(
  outputs: ObjectStore,
  manifest: SceneManifest,
  listed: ReadonlyMap<string, string>,
  tileVersions: string,
): { readonly cog: NonNullable<DerivedWrite['isStale']>; readonly item: NonNullable<DerivedWrite['isStale']> } {
  const { sceneKey } = manifest;
  const itemKey = outputKeys.stacItem(sceneKey);
  const ourView = async (): Promise<void> => {
    const now = await listTileVersions(outputs, sceneKey);
    const changed = [...sceneTiles(manifest)].map((t) => t.key).filter((key) => now.get(key) !== listed.get(key));
    if (changed.length > 0) throw new MosaicChangedError(sceneKey, changed);
  };
  return {
    cog: async () => {
      const head = await outputs.head(itemKey);
      const recorded = head === undefined ? undefined : await readSceneItem(outputs, itemKey, head, sceneKey);
      if (recorded?.tileVersions === undefined || recorded.tileVersions === tileVersions) return false;
      await ourView();
      return true;
    },
    item: async (current) => {
      if ((await readSceneItem(outputs, itemKey, current, sceneKey)) === undefined) return false;
      await ourView();
      return true;
    },
  };
}

/**
 * The object at `key` at exactly `version` (a pinned read), if it is this scene's STAC Item: what it
 * records of the tiles. Undefined for anything else (not JSON, another id): not ours to replace.
 */
async function readSceneItem(
  outputs: ObjectStore,
  key: string,
  version: ObjectHead,
  sceneKey: string,
): Promise<{ readonly tileVersions: string | undefined } | undefined> {
  let bytes: Uint8Array;
  try {
    bytes = await outputs.getRange(key, 0, version.size, { version: version.version });
  } catch (error) {
    // Replaced or removed since it was read (another assembly): decide again on the next run.
    if (error instanceof SourceChangedError) throw new MosaicChangedError(sceneKey, [key]);
    throw error;
  }
  let item: unknown;
  try {
    item = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
  if (typeof item !== 'object' || item === null) return undefined;
  const { id, properties } = item as { id?: unknown; properties?: unknown };
  if (id !== sceneKey || typeof properties !== 'object' || properties === null) return undefined;
  const recorded = (properties as Record<string, unknown>)[TILE_VERSIONS_PROPERTY];
  return { tileVersions: typeof recorded === 'string' ? recorded : undefined };
}

/** The COG mosaic of a scene (`mosaic: cog`): its grid, the tiles' codec and nodata, and the tiles from the manifest. */
export function cogMosaicInputOf(manifest: SceneManifest): CogMosaicInput {
  const tiling = tilingParams(manifest.params);
  const georef = sceneGeoref(manifest);
  return {
    sceneKey: manifest.sceneKey,
    mosaicKey: outputKeys.cogMosaic(manifest.sceneKey),
    vrtKey: outputKeys.mosaic(manifest.sceneKey),
    width: manifest.grid.width,
    height: manifest.grid.height,
    geoTransform: georef.geoTransform,
    crs: georef.crs,
    noData: tiling.noData,
    blockSize: tiling.blockSize,
    compression: tiling.compression,
    level: tiling.level,
    tiles: [...sceneTiles(manifest)],
  };
}

/**
 * The scene's source STAC Item for the output Item: its time, and a `derived_from` link where the source
 * store can name the Item by URI. A store that cannot still gives the time (no link rather than a wrong one).
 */
function sourceOf(
  backend: Backend,
  manifest: SceneManifest,
  item: StacItemMetadata,
): { source: { href: string; metadata: StacItemMetadata } } | { datetime: string } | Record<string, never> {
  const href = backend.sources.uriOf?.(manifest.source.key);
  if (href !== undefined) return { source: { href, metadata: item } };
  return item.datetime === null ? {} : { datetime: item.datetime };
}

/**
 * The output's STAC Item beside the mosaic, create-only, replaced only when `isStale` shows the one in place
 * is this scene's from before a repair (shared/app/stac-output.ts). Its time is the source item's, else the
 * manifest's `createdAt`; it records the tile versions the mosaics show; a CRS without an EPSG code is written
 * as `proj:wkt2`; a scene with no CRS at all gets none (logged).
 */
async function writeStacItem(
  backend: Backend,
  manifest: SceneManifest,
  tiling: TilingParams,
  georef: { crs: RasterCrs; geoTransform: GeoTransform },
  vrtKey: string,
  cogKey: string | undefined,
  tileVersions: string,
  isStale: DerivedWrite['isStale'],
  web: WebMapRefs,
): Promise<{ readonly key: string; readonly kind: 'written' | 'already-present' | 'replaced' } | undefined> {
  const epsg = georef.crs.epsg ?? (georef.crs.wkt === undefined ? undefined : epsgFromWkt(georef.crs.wkt));
  // A CRS without an EPSG code is described by its WKT2 (proj:wkt2); only a raster with no CRS at all gets no item.
  if (epsg === undefined && georef.crs.wkt === undefined) {
    backend.telemetry.log('WARN', 'stac-item-skipped', { sceneKey: manifest.sceneKey, why: 'the scene has no CRS' });
    return undefined;
  }
  const key = outputKeys.stacItem(manifest.sceneKey);
  const tms = manifest.grid.target?.tms;
  const item = sceneStacItem({
    sceneKey: manifest.sceneKey,
    itemKey: key,
    target: {
      ...(epsg === undefined ? { wkt2: georef.crs.wkt } : { epsg }),
      geoTransform: georef.geoTransform,
      width: manifest.grid.width,
      height: manifest.grid.height,
      ...(tms === undefined
        ? {}
        : { tms: { ...tms, ...(tiling.target.tms?.minZoom === undefined ? {} : { minZoom: tiling.target.tms.minZoom }) } }),
    },
    noData: tiling.noData,
    ...(tiling.render === undefined ? {} : { rendered: { format: tiling.render.format, bands: renderedBands(tiling.render) } }),
    assets: { vrt: vrtKey, ...(cogKey === undefined ? {} : { cog: cogKey }) },
    ...(Object.keys(web).length === 0 ? {} : { web }),
    expression: tiling.expression,
    // A manifest from before createdAt was recorded: the Unix epoch says "unknown" without inventing a time.
    datetime: manifest.createdAt ?? new Date(0).toISOString(),
    tileVersions,
    // The source Item's time, when there is one, is the output's.
    ...(manifest.sourceItem === undefined ? {} : sourceOf(backend, manifest, manifest.sourceItem)),
  });
  return writeSceneStacItem(backend.outputs, key, item, backend.telemetry, { isStale });
}
