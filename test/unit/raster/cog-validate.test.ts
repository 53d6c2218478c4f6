import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend } from '../../../functions/local/compose.js';
import { cogMosaicInputOf, sceneGeoref, sceneTiles } from '../../../shared/app/assemble-mosaic.js';
import { buildCogMosaic } from '../../../shared/app/cog-mosaic.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { processTile } from '../../../shared/app/process-tile.js';
import { readSceneManifest, type SceneManifest } from '../../../shared/app/scene-manifest.js';
import { sceneStacItem } from '../../../shared/app/stac-output.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob } from '../../../shared/app/tile-job.js';
import { outputKeys } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { windows } from '../../../shared/domain/tile-grid.js';
import { FakeClock } from '../../support/fake-clock.js';
import { putSyntheticScene } from '../../support/local-scene.js';
import { fixtureSettings } from '../../support/tile-fixture.js';
import { scratchDir } from './gdal-harness.js';

/**
 * What the pipeline writes is a Cloud Optimized GeoTIFF by GDAL's own rules:
 * a tile rendered and written by processTile (render-tile.ts encodeTile ->
 * encodeCogAsync) and the COG mosaic built from those tiles pass GDAL's
 * validate_cloud_optimized_geotiff.py (--full-check=yes: block leaders and
 * trailers too, no warnings), and gdalinfo shows their internal overviews.
 * Debian's GDAL 3.6 (gdal-bin, python3-gdal: .ci/run installs them).
 */

/** Debian's python3 has osgeo.gdal; a pyenv or venv python on PATH may not. */
const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');

/** GDAL's COG validator on a file: its full output and exit status. */
function validateCog(path: string): { ok: boolean; output: string } {
  try {
    const output = execFileSync(PYTHON, ['-m', 'osgeo_utils.samples.validate_cloud_optimized_geotiff', '--full-check=yes', path], {
      encoding: 'utf8',
    });
    return { ok: true, output };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

interface GdalInfoJson {
  size: [number, number];
  geoTransform: number[];
  metadata: Record<string, Record<string, string>>;
  stac?: Record<string, unknown>;
  bands: { block: [number, number]; type: string; noDataValue?: number; overviews?: { size: [number, number] }[] }[];
}

const gdalinfo = (path: string): GdalInfoJson =>
  JSON.parse(execFileSync('gdalinfo', ['-json', path], { encoding: 'utf8' })) as GdalInfoJson;

/** True when GDAL reads the same float32 pixels from `tile` as from `window` of `mosaic` (no Tessera code involved). */
function gdalSamePixels(mosaic: string, tile: string, window: { x: number; y: number; width: number; height: number }): boolean {
  const script = [
    'import json, sys',
    'from osgeo import gdal',
    'm, t, w = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])',
    'gdal.UseExceptions()',
    // The datasets stay in variables: a band of a dataset Python has already freed crashes GDAL.
    'mds, tds = gdal.Open(m), gdal.Open(t)',
    'a = mds.GetRasterBand(1).ReadRaster(w["x"], w["y"], w["width"], w["height"], buf_type=gdal.GDT_Float32)',
    'b = tds.GetRasterBand(1).ReadRaster(0, 0, w["width"], w["height"], buf_type=gdal.GDT_Float32)',
    'print(json.dumps(a == b))',
  ].join('\n');
  const out = execFileSync(PYTHON, ['-c', script, mosaic, tile, JSON.stringify(window)], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return JSON.parse(out) as boolean;
}

describe('outputs are COGs by GDAL’s rules', () => {
  const scratch = scratchDir();
  const telemetry = new JsonTelemetry();
  let b: LocalBackend;
  let manifest: SceneManifest;
  const files = new Map<string, string>();

  /** Copies an output object to a scratch file for GDAL. */
  const fileOf = async (key: string): Promise<string> => {
    const known = files.get(key);
    if (known) return known;
    const path = join(scratch.dir, key.replaceAll('/', '_'));
    writeFileSync(path, await b.outputs.get(key));
    files.set(key, path);
    return path;
  };

  beforeAll(async () => {
    b = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-cog-validate-')), { clock: new FakeClock(), telemetry });
    // The default parameters: 512-pixel tiles in 256-pixel blocks, DEFLATE 9, nodata -9999.
    const params = DEFAULT_PARAMS;
    const source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', { width: 1100, height: 700 });
    const fan = await fanOutScene(b, { source, params });
    manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    for (const window of windows(manifest.grid)) {
      const job = makeTileJob(fan.sceneKey, source, params, manifest.grid, window);
      const outcome = await processTile(b, fixtureSettings('validate'), job);
      expect(outcome.kind).toBe('written');
    }
  }, 60_000);
  afterAll(() => {
    b?.close();
    scratch.remove();
  });

  it('a full 512-pixel tile in 256-pixel blocks is a valid COG with a 256-pixel internal overview', async () => {
    const first = sceneTiles(manifest).next().value;
    expect(first?.window).toMatchObject({ x: 0, y: 0, width: 512, height: 512 });
    const path = await fileOf(first?.key as string);
    const verdict = validateCog(path);
    expect(verdict.output).toContain('is a valid cloud optimized GeoTIFF');
    expect(verdict.output).not.toContain('warnings');
    expect(verdict.ok).toBe(true);
    const info = gdalinfo(path);
    expect(info.size).toEqual([512, 512]);
    expect(info.metadata.IMAGE_STRUCTURE).toMatchObject({ LAYOUT: 'COG', COMPRESSION: 'DEFLATE' });
    expect(info.bands[0]).toMatchObject({ block: [256, 256], type: 'Float32', noDataValue: -9999, overviews: [{ size: [256, 256] }] });
  });

  it('an edge tile (76 x 188 px) is a valid COG too: one block, so no overview (as GDAL’s COG driver)', async () => {
    const edge = [...sceneTiles(manifest)].at(-1);
    expect(edge?.window).toMatchObject({ width: 1100 - 1024, height: 700 - 512 });
    const path = await fileOf(edge?.key as string);
    expect(validateCog(path)).toMatchObject({ ok: true });
    expect(gdalinfo(path).bands[0]?.overviews ?? []).toEqual([]);
  });

  it('the COG mosaic of those tiles is a valid COG with internal overviews, holding exactly the tiles’ pixels', async () => {
    const input = cogMosaicInputOf(manifest);
    const result = await buildCogMosaic(b.outputs, input, telemetry);
    const georef = sceneGeoref(manifest);
    const path = await fileOf(result.key);
    const verdict = validateCog(path);
    expect(verdict.output).toContain('is a valid cloud optimized GeoTIFF');
    expect(verdict.output).not.toContain('warnings');
    const info = gdalinfo(path);
    expect(info.size).toEqual([1100, 700]);
    expect(info.metadata.IMAGE_STRUCTURE).toMatchObject({ LAYOUT: 'COG' });
    expect(info.bands[0]).toMatchObject({ block: [256, 256], type: 'Float32', noDataValue: -9999 });
    expect(info.bands[0]?.overviews).toEqual([{ size: [550, 350] }, { size: [275, 175] }, { size: [138, 88] }]);
    for (const tile of sceneTiles(manifest)) {
      expect(gdalSamePixels(path, await fileOf(tile.key), tile.window)).toBe(true);
    }

    // The output STAC item describes the grid GDAL reads from the COG mosaic.
    const epsg = georef.crs.epsg as number;
    const item = sceneStacItem({
      sceneKey: manifest.sceneKey,
      itemKey: outputKeys.stacItem(manifest.sceneKey),
      target: { epsg, geoTransform: georef.geoTransform, width: manifest.grid.width, height: manifest.grid.height },
      noData: input.noData,
      assets: { vrt: outputKeys.mosaic(manifest.sceneKey), cog: result.key },
      datetime: '2024-06-01T10:30:00Z',
    }) as { properties: Record<string, unknown> };
    const gt = info.geoTransform;
    expect(item.properties['proj:shape']).toEqual([info.size[1], info.size[0]]);
    expect(item.properties['proj:transform']).toEqual([gt[1], gt[2], gt[0], gt[4], gt[5], gt[3]]);
    expect(item.properties['proj:code']).toBe('EPSG:32631');
  });
});
