import { MissingTilesError } from '../domain/errors.js';
import { outputKeys, type TmsTileIndex } from '../domain/job-key.js';
import type { StacItemMetadata } from '../domain/stac-item.js';
import { type Window, windows } from '../domain/tile-grid.js';
import { type TilingParams, tilingParams } from '../domain/tiling-params.js';
import { buildVrt, epsgFromWkt, type GeoTransform, type RasterCrs } from '../raster/index.js';
import type { Backend } from './backend.js';
import { buildCogMosaic, type CogMosaicInput } from './cog-mosaic.js';
import { tmsTileOf } from './scene-grid.js';
import { readSceneManifest, type SceneManifest } from './scene-manifest.js';
import { sceneStacItem, writeSceneStacItem } from './stac-output.js';
import { tileOutputKey } from './tile-job.js';

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
    yield { key: tileOutputKey(manifest.sceneKey, manifest.grid, window), window, ...(tms === undefined ? {} : { tms }) };
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
  /** The output's STAC Item; absent for a scene whose CRS has no EPSG code (STAC's proj:code needs one). */
  readonly stacItemKey?: string | undefined;
  /** Sources listed in the VRT: always the grid count when assembly succeeds. */
  readonly manifestCount: number;
  readonly gridCount: number;
  readonly result: 'written' | 'already-present';
}

/**
 * Assemble a scene's mosaic as a GDAL VRT. The source list is built from the
 * grid's deterministic keys, never from a listing (a listing would happily
 * include a stray duplicate); the listing is used only to prove each expected
 * tile exists. Fails loudly naming every missing tile. The VRT is written
 * create-only, so assembling twice is harmless.
 */
export async function assembleMosaic(backend: Backend, sceneKey: string): Promise<MosaicResult> {
  const manifest = await readSceneManifest(backend.outputs, sceneKey);
  const present = new Set<string>();
  for await (const head of backend.outputs.list(outputKeys.tilePrefix(sceneKey))) present.add(head.key);
  const sources = [];
  const missing: string[] = [];
  for (const { key, window: w } of sceneTiles(manifest)) {
    if (!present.has(key)) missing.push(key);
    // Relative to mosaics/<scene>.vrt, so the mosaic works wherever the prefix is mounted (/vsis3/, /vsigs/, a folder).
    sources.push({ href: `../${key}`, window: { x: w.x, y: w.y, width: w.width, height: w.height } });
  }
  if (missing.length > 0) {
    backend.telemetry.log('ERROR', 'mosaic-missing-tiles', { sceneKey, missing: missing.length, first: missing.slice(0, 5) });
    throw new MissingTilesError(sceneKey, missing, manifest.grid.count);
  }
  const tiling = tilingParams(manifest.params);
  const georef = sceneGeoref(manifest);
  const vrt = buildVrt({
    width: manifest.grid.width,
    height: manifest.grid.height,
    crs: georef.crs,
    geoTransform: georef.geoTransform,
    dataType: 'Float32',
    noData: tiling.noData,
    blockSize: tiling.blockSize,
    sources,
  });
  const mosaicKey = outputKeys.mosaic(sceneKey);
  const put = await backend.outputs.putIfAbsent(mosaicKey, new TextEncoder().encode(vrt), { contentType: 'application/xml' });
  if (put.kind === 'already-present') {
    backend.telemetry.count('write-already-present');
    backend.telemetry.log('INFO', 'write-already-present', { sceneKey, outputKey: mosaicKey });
  }
  backend.telemetry.log('INFO', 'mosaic-assembled', { sceneKey, mosaicKey, sources: sources.length, result: put.kind });
  let cogMosaicKey: string | undefined;
  if (tiling.mosaic === 'cog') {
    const cog = await buildCogMosaic(backend.outputs, cogMosaicInputOf(manifest), backend.telemetry);
    cogMosaicKey = cog.key;
  }
  const stacItemKey = await writeStacItem(backend, manifest, tiling, georef, mosaicKey, cogMosaicKey);
  return {
    mosaicKey,
    ...(cogMosaicKey === undefined ? {} : { cogMosaicKey }),
    ...(stacItemKey === undefined ? {} : { stacItemKey }),
    manifestCount: sources.length,
    gridCount: manifest.grid.count,
    result: put.kind,
  };
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
 * The output's STAC Item beside the mosaic, create-only (shared/app/stac-output.ts). Its time is the
 * source item's, else the manifest's `createdAt`; a scene whose CRS has no EPSG code gets none (logged).
 */
async function writeStacItem(
  backend: Backend,
  manifest: SceneManifest,
  tiling: TilingParams,
  georef: { crs: RasterCrs; geoTransform: GeoTransform },
  vrtKey: string,
  cogKey: string | undefined,
): Promise<string | undefined> {
  const epsg = georef.crs.epsg ?? (georef.crs.wkt === undefined ? undefined : epsgFromWkt(georef.crs.wkt));
  if (epsg === undefined) {
    backend.telemetry.log('WARN', 'stac-item-skipped', { sceneKey: manifest.sceneKey, why: 'the scene CRS has no EPSG code' });
    return undefined;
  }
  const key = outputKeys.stacItem(manifest.sceneKey);
  const tms = manifest.grid.target?.tms;
  const item = sceneStacItem({
    sceneKey: manifest.sceneKey,
    itemKey: key,
    target: {
      epsg,
      geoTransform: georef.geoTransform,
      width: manifest.grid.width,
      height: manifest.grid.height,
      ...(tms === undefined ? {} : { tms }),
    },
    noData: tiling.noData,
    assets: { vrt: vrtKey, ...(cogKey === undefined ? {} : { cog: cogKey }) },
    expression: tiling.expression,
    // A manifest from before createdAt was recorded: the Unix epoch says "unknown" without inventing a time.
    datetime: manifest.createdAt ?? new Date(0).toISOString(),
    // The source Item's time, when there is one, is the output's.
    ...(manifest.sourceItem === undefined ? {} : sourceOf(backend, manifest, manifest.sourceItem)),
  });
  await writeSceneStacItem(backend.outputs, key, item, backend.telemetry);
  return key;
}
