import { MissingTilesError } from '../domain/errors.js';
import { outputKeys, type TmsTileIndex } from '../domain/job-key.js';
import { type Window, windows } from '../domain/tile-grid.js';
import { tilingParams } from '../domain/tiling-params.js';
import { buildVrt, type GeoTransform, type RasterCrs } from '../raster/index.js';
import type { Backend } from './backend.js';
import { tmsTileOf } from './scene-grid.js';
import { readSceneManifest, type SceneManifest } from './scene-manifest.js';
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
  return { mosaicKey, manifestCount: sources.length, gridCount: manifest.grid.count, result: put.kind };
}
