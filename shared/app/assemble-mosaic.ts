import { MissingTilesError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import { windows } from '../domain/tile-grid.js';
import { tilingParams } from '../domain/tiling-params.js';
import { buildVrt } from '../raster/index.js';
import type { Backend } from './backend.js';
import { readSceneManifest } from './scene-manifest.js';

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
  for (const w of windows(manifest.grid)) {
    const key = outputKeys.tile(sceneKey, w);
    if (!present.has(key)) missing.push(key);
    // Relative to mosaics/<scene>.vrt, so the mosaic works wherever the prefix is mounted (/vsis3/, /vsigs/, a folder).
    sources.push({ href: `../${key}`, window: { x: w.x, y: w.y, width: w.width, height: w.height } });
  }
  if (missing.length > 0) {
    backend.telemetry.log('ERROR', 'mosaic-missing-tiles', { sceneKey, missing: missing.length, first: missing.slice(0, 5) });
    throw new MissingTilesError(sceneKey, missing, manifest.grid.count);
  }
  const tiling = tilingParams(manifest.params);
  const vrt = buildVrt({
    width: manifest.grid.width,
    height: manifest.grid.height,
    crs: manifest.raster.crs,
    geoTransform: manifest.raster.geoTransform,
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
