import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend } from '../../../functions/local/compose.js';
import { assembleMosaic, sceneTiles } from '../../../shared/app/assemble-mosaic.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { processTile } from '../../../shared/app/process-tile.js';
import { renderTile } from '../../../shared/app/render-tile.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob, parseTileJob, type TileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { InvalidEventError, InvalidParamsError } from '../../../shared/domain/errors.js';
import { type ProcessingParams, type SourceRef, sceneKey } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { windowAt } from '../../../shared/domain/tile-grid.js';
import { tilingParams } from '../../../shared/domain/tiling-params.js';
import { crsFromEpsg } from '../../../shared/raster/crs.js';
import { evaluate, openGeoTiff, parseExpression, SENTINEL_LIKE_SCENE, writeSyntheticScene } from '../../../shared/raster/index.js';
import { tileMatrixSet, tileGrid as tmsTileGrid } from '../../../shared/raster/tile-matrix-set.js';
import { warpBand } from '../../../shared/raster/warp.js';
import { FakeClock } from '../../support/fake-clock.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';

/**
 * Issue 14, sections 1 and 3 on the local backend: a scene made of band files (each pinned to its own
 * version), resampled onto the finest band's grid, a CRS's or a tile matrix set's, tile by tile, with the
 * tiles equal to the same window of one warp of the whole band.
 */

const BUCKET = 'local-sources';
let dir: string;
let b: LocalBackend;
let red: SourceRef;
let nir20: SourceRef;

async function bandFile(name: string, band: 'B04' | 'B08', pixelSize: number, size: number): Promise<SourceRef> {
  const path = join(dir, `${name}.tif`);
  await writeSyntheticScene(path, { ...SENTINEL_LIKE_SCENE, width: size, height: size, bands: [band], pixelSize, seed: 3 });
  const key = `bands/${name}.tif`;
  const put = await b.sources.putIfAbsent(key, new Uint8Array(readFileSync(path)));
  return { bucket: BUCKET, key, versionToken: put.kind === 'written' ? put.version : ((await b.sources.head(key))?.version as string) };
}

const bandsScene = (a: SourceRef, c: SourceRef): SourceRef => ({
  bucket: BUCKET,
  key: a.key,
  versionToken: a.versionToken,
  assets: { B04: { key: a.key, versionToken: a.versionToken }, B08: { key: c.key, versionToken: c.versionToken } },
});

const params = (extra: Record<string, unknown> = {}): ProcessingParams => ({
  ...DEFAULT_PARAMS,
  tile_px: 128,
  bands: { B04: 1, B08: 1 },
  ...extra,
});

const settings = { owner: 'w1', leaseMs: 60_000, retentionMs: 3_600_000 };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tessera-scene-grid-'));
  b = createLocalBackend(join(dir, 'backend'), { clock: new FakeClock(), telemetry: new JsonTelemetry(() => {}) });
  red = await bandFile('red10', 'B04', 10, 300);
  nir20 = await bandFile('nir20', 'B08', 20, 150);
});

afterAll(() => {
  b.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a scene of band files', () => {
  it('keys every band object and version, whatever order they are named in; one file keeps its old key', () => {
    const p = params();
    const scene = bandsScene(red, nir20);
    const reordered: SourceRef = { ...scene, assets: { B08: scene.assets?.B08 as never, B04: scene.assets?.B04 as never } };
    expect(sceneKey(reordered, p)).toBe(sceneKey(scene, p));
    const newNir: SourceRef = { ...scene, assets: { ...scene.assets, B08: { key: nir20.key, versionToken: 'other' } } };
    expect(sceneKey(newNir, p)).not.toBe(sceneKey(scene, p));
    const single = { bucket: BUCKET, key: red.key, versionToken: red.versionToken };
    expect(sceneKey({ ...single, assets: undefined }, p)).toBe(sceneKey(single, p));
    expect(() => sceneKey({ ...scene, assets: { 'B 04': { key: red.key, versionToken: 'v' } } }, p)).toThrow(InvalidEventError);
    expect(() => sceneKey({ ...scene, assets: { B04: { key: '../x.tif', versionToken: 'v' } } }, p)).toThrow();
  });

  it('tiles a 10 m and a 20 m band on the finest grid, each tile the same window as one warp of the whole band', async () => {
    const p = params({ resampling: 'bilinear' });
    const fan = await fanOutScene(b, { source: bandsScene(red, nir20), params: p });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    expect(manifest.grid.width).toBe(300);
    expect(manifest.grid.target?.geoTransform).toEqual((await openGeoTiff(b.sources, red.key)).geoTransform);
    expect(Object.keys(manifest.pins ?? {}).sort()).toEqual(['B04', 'B08']);
    const tiling = tilingParams(p);
    const job = makeTileJob(
      fan.sceneKey,
      manifest.source,
      p,
      manifest.grid,
      windowAt(manifest.grid, 1, 1),
      { kind: 'create' },
      {
        pin: manifest.pin,
        pins: manifest.pins,
      },
    );
    // The wire round trip keeps the target and the pins.
    expect(parseTileJob(toJobMessage(job).body)).toEqual(job);
    const rendered = new MemoryObjectStore();
    await rendered.putIfAbsent('tile.tif', await renderTile(b.sources, job, tiling, parseExpression(tiling.expression, ['B04', 'B08'])));
    const tile = await openGeoTiff(rendered, 'tile.tif');
    const [got] = await tile.readWindow({ x: 0, y: 0, width: 128, height: 128 }, [1]);
    // The reference: the whole 20 m band warped onto the whole 10 m grid, then the band math.
    const r = await openGeoTiff(b.sources, red.key);
    const n = await openGeoTiff(b.sources, nir20.key);
    const [nAll] = await n.readWindow({ x: 0, y: 0, width: 150, height: 150 }, [1]);
    const warped = warpBand(
      { crs: crsFromEpsg(32631), geoTransform: n.geoTransform, width: 150, height: 150, values: nAll as never, noData: n.noData },
      { crs: crsFromEpsg(32631), geoTransform: r.geoTransform, width: 300, height: 300 },
      'bilinear',
    );
    const [rWin] = await r.readWindow({ x: 128, y: 128, width: 128, height: 128 }, [1]);
    const nWin = new Float64Array(128 * 128);
    for (let j = 0; j < 128; j++)
      for (let i = 0; i < 128; i++) nWin[j * 128 + i] = Math.floor((warped.values[(j + 128) * 300 + i + 128] as number) + 0.5);
    const redWin = Float64Array.from(rWin as ArrayLike<number>, (v) => (v === r.noData ? Number.NaN : v));
    const want = evaluate(parseExpression(tiling.expression, ['B04', 'B08']), { B04: redWin, B08: nWin }, 128 * 128, {
      noData: -9999,
      sourceNoData: Number.NaN,
    });
    expect(Array.from(got as Float32Array)).toEqual(Array.from(want));
  });

  it('settles a tile whose band was overwritten after fan-out as source-changed, writing nothing', async () => {
    const nir = await bandFile('nir-overwritten', 'B08', 20, 150);
    const p = params();
    const fan = await fanOutScene(b, { source: bandsScene(red, nir), params: p });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    const job = makeTileJob(
      fan.sceneKey,
      manifest.source,
      p,
      manifest.grid,
      windowAt(manifest.grid, 0, 0),
      { kind: 'create' },
      {
        pin: manifest.pin,
        pins: manifest.pins,
      },
    );
    const head = await b.sources.head(nir.key);
    await b.sources.putIfMatch(nir.key, new Uint8Array(readFileSync(join(dir, 'red10.tif'))), head?.version as string);
    const outcome = await processTile(b, settings, job);
    expect(outcome.kind).toBe('source-changed');
    expect(await b.outputs.head(job.outputKey)).toBeUndefined();
  });

  it('refuses a band object no band reads, a band beyond a file, and band files in two CRSs without --crs', async () => {
    const extra: SourceRef = {
      ...bandsScene(red, nir20),
      assets: { ...bandsScene(red, nir20).assets, B02: { key: red.key, versionToken: red.versionToken } },
    };
    await expect(fanOutScene(b, { source: extra, params: params() })).rejects.toThrow(/B02.*does not read/);
    await expect(fanOutScene(b, { source: bandsScene(red, nir20), params: params({ bands: { B04: 1, B08: 2 } }) })).rejects.toThrow(
      /band B08 is band 2, but bands\/nir20.tif has 1 band/,
    );
    const path = join(dir, 'utm32.tif');
    await writeSyntheticScene(path, { ...SENTINEL_LIKE_SCENE, width: 64, height: 64, bands: ['B08'], epsg: 32632, seed: 3 });
    await b.sources.putIfAbsent('bands/utm32.tif', new Uint8Array(readFileSync(path)));
    const other = { bucket: BUCKET, key: 'bands/utm32.tif', versionToken: (await b.sources.head('bands/utm32.tif'))?.version as string };
    await expect(fanOutScene(b, { source: bandsScene(red, other), params: params() })).rejects.toThrow(/different CRSs.*--crs/);
  });
});

describe('a target grid', () => {
  it('cuts WebMercatorQuad tiles covering the footprint, keyed {tms}/{z}/{x}/{y}, each on its tile of the set', async () => {
    const p = params({ tile_px: 256, tms: 'WebMercatorQuad', zoom: 14, resampling: 'nearest' });
    const fan = await fanOutScene(b, { source: bandsScene(red, nir20), params: p });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    const tms = manifest.grid.target?.tms;
    expect(tms?.id).toBe('WebMercatorQuad');
    const tiles = [...sceneTiles(manifest)];
    expect(tiles.length).toBe(fan.grid.count);
    const set = tileMatrixSet('WebMercatorQuad');
    for (const t of tiles) {
      expect(t.key).toBe(`tiles/${fan.sceneKey}/WebMercatorQuad/14/${t.tms?.x}/${t.tms?.y}.tif`);
      const want = tmsTileGrid(set, 14, t.tms?.x as number, t.tms?.y as number, 256).geoTransform;
      const gt = manifest.grid.target?.geoTransform as readonly number[];
      expect((gt[0] as number) + t.window.x * (gt[1] as number)).toBeCloseTo(want[0], 6);
      expect((gt[3] as number) + t.window.y * (gt[5] as number)).toBeCloseTo(want[3], 6);
    }
    // The job a worker renders names the same key; a 3 km scene at zoom 14 (9.55 m pixels) touches a few tiles.
    const job = makeTileJob(fan.sceneKey, manifest.source, p, manifest.grid, windowAt(manifest.grid, 0, 0), { kind: 'create' }, manifest);
    expect(job.outputKey).toBe(tiles[0]?.key);
    expect(tiles.length).toBeGreaterThanOrEqual(4);
  });

  it('refuses a tile job whose target grid is not the one its sources and parameters give (poison)', async () => {
    const p = params({ dst_crs: 'EPSG:3857' });
    const fan = await fanOutScene(b, { source: bandsScene(red, nir20), params: p });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    const target = manifest.grid.target;
    if (target === undefined) throw new Error('no target');
    const shifted = {
      ...manifest.grid,
      target: { ...target, geoTransform: [target.geoTransform[0] + 1000, ...target.geoTransform.slice(1)] as never },
    };
    const job: TileJob = makeTileJob(
      fan.sceneKey,
      manifest.source,
      p,
      shifted,
      windowAt(manifest.grid, 0, 0),
      { kind: 'create' },
      manifest,
    );
    const tiling = tilingParams(p);
    await expect(renderTile(b.sources, job, tiling, parseExpression(tiling.expression, ['B04', 'B08']))).rejects.toThrow(InvalidEventError);
    // The honest job renders.
    const honest = makeTileJob(
      fan.sceneKey,
      manifest.source,
      p,
      manifest.grid,
      windowAt(manifest.grid, 0, 0),
      { kind: 'create' },
      manifest,
    );
    expect((await renderTile(b.sources, honest, tiling, parseExpression(tiling.expression, ['B04', 'B08']))).length).toBeGreaterThan(0);
    expect((await assembleMosaic(b, fan.sceneKey).catch((e: Error) => e)) instanceof Error).toBe(true);
  });

  it('validates the grid parameters before any claim: codes, methods, tms with zoom, tile sizes of a set', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ dst_crs: '3857' }, /EPSG:<number>/],
      [{ dst_crs: 'EPSG:3857', resampling: 'gauss' }, /resampling "gauss"/],
      [{ tms: 'WebMercatorQuad' }, /tms and zoom go together/],
      [{ tms: 'WebMercatorQuad', zoom: 3.5 }, /zoom must be an integer/],
      [{ tms: 'WebMercatorQuad', zoom: 3, tile_px: 300 }, /tile_px must be 256 or 512/],
      [{ mosaic: 'png' }, /mosaic "png"/],
    ];
    for (const [extra, message] of bad) expect(() => tilingParams(params(extra)), JSON.stringify(extra)).toThrow(message);
    expect(() => tilingParams(params({ dst_crs: 'epsg:32631' }))).not.toThrow();
    expect(tilingParams(params({ dst_crs: 'epsg:32631' })).target).toEqual({ dstCrs: 'EPSG:32631', resampling: 'nearest' });
    expect(tilingParams(params({ tms: 'WebMercatorQuad', zoom: 3, tile_px: 512 })).target.tms).toEqual({ id: 'WebMercatorQuad', zoom: 3 });
  });

  it('refuses an unknown EPSG code or tile matrix set at fan-out with a typed error', async () => {
    await expect(fanOutScene(b, { source: bandsScene(red, nir20), params: params({ dst_crs: 'EPSG:99999' }) })).rejects.toThrow(
      InvalidParamsError,
    );
    await expect(
      fanOutScene(b, { source: bandsScene(red, nir20), params: params({ tms: 'GoogleQuad', zoom: 3, tile_px: 256 }) }),
    ).rejects.toThrow(/unknown tile matrix set "GoogleQuad"/);
  });
});
