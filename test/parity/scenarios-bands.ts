import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import type { ProcessingParams, SourceRef } from '../../shared/domain/job-key.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { PARITY_SOURCE_BUCKET } from './backends.js';
import { PARITY_PARAMS, type ScenarioContext } from './harness.js';
import { allCommitted, committed, outcome, type Scenario, tiles, WINDOWS } from './scenario-kit.js';

// Issue 14: scenes made of band files, and tiles on a tile matrix set. See docs/parity.md.

/**
 * The parity scene's red band as its own 10 m file and a near infrared band as a 20 m file over a wider
 * area (as Sentinel-2 L2A publishes B04 and B8A), the latter larger than the first range read of a
 * header, so its pixels are read by pinned block reads.
 */
const nirBytes = (seed: number) => syntheticSceneBytes({ width: 256, height: 192, bands: ['B08'], pixelSize: 20, seed });
const NIR = 'incoming/T31UDQ/B08.tif';

async function stageBandFiles(ctx: ScenarioContext): Promise<SourceRef> {
  const red = await ctx.stage('incoming/T31UDQ/B04.tif', await syntheticSceneBytes({ width: 64, height: 48, bands: ['B04'] }));
  const nir = await ctx.stage(NIR, await nirBytes(7));
  return bandScene(red, nir);
}

const bandScene = (red: SourceRef, nir: SourceRef): SourceRef => ({
  bucket: PARITY_SOURCE_BUCKET,
  key: red.key,
  versionToken: red.versionToken,
  assets: { B04: { key: red.key, versionToken: red.versionToken }, B08: { key: nir.key, versionToken: nir.versionToken } },
});

const BAND_PARAMS: ProcessingParams = { ...PARITY_PARAMS, bands: { B04: 1, B08: 1 }, resampling: 'bilinear' };

export const BAND_SCENARIOS: readonly Scenario[] = [
  {
    id: '80',
    title:
      'a scene of two band files (10 m and 20 m), each pinned to its own version: the 20 m band uploaded again after fan-out settles every tile source-changed, nothing written; the new version is a new scene that completes',
    async run(ctx: ScenarioContext) {
      const source = await stageBandFiles(ctx);
      const fan = await ctx.fanOut('A', { source, params: BAND_PARAMS });
      const manifest = await readSceneManifest(ctx.backend.outputs, fan.sceneKey);
      ctx.fact('grid', {
        width: manifest.grid.width,
        height: manifest.grid.height,
        onFinestBand: manifest.grid.target?.geoTransform[1] === 10,
      });
      ctx.fact('pinnedBands', Object.keys(manifest.pins ?? {}).sort());
      // The 20 m band is uploaded again before any tile runs; the store keeps no old version.
      const nir = await ctx.overwriteSource(NIR, await nirBytes(8));
      await ctx.drain('w1');
      ctx.fact('oldSceneTiles', (await ctx.outputs()).filter((k) => k.startsWith('A/tiles/')).length);
      // The new band version's scene is another key, and completes.
      const red = { bucket: PARITY_SOURCE_BUCKET, key: source.key, versionToken: source.versionToken };
      await ctx.fanOut('B', { source: bandScene(red, nir), params: BAND_PARAMS });
      await ctx.drain('w1');
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 2, 'ack:source-changed': 4, 'ack:written': 4 },
      outputs: ['A/scene.json', 'A/superseded.json', 'B/scene.json', ...tiles('B', ...WINDOWS)].sort(),
      counters: { enqueued: 8, claimed: 8, 'source-changed': 4, written: 4, committed: 4 },
      // The old-key claims were given back (lease in the past), never committed: nothing was written under them.
      claims: [
        ...WINDOWS.map((w) => ({ job: `A/${w}`, state: 'CLAIMED' as const, owner: `A/${w}#m1@w1`, lapsed: true })),
        ...allCommitted('B', 'w1'),
      ],
      facts: { grid: { width: 64, height: 48, onFinestBand: true }, pinnedBands: ['B04', 'B08'], oldSceneTiles: 0 },
    }),
  },
  {
    id: '81',
    title:
      'a scene reprojected onto WebMercatorQuad tiles, every job delivered twice: each {tms}/{z}/{x}/{y} tile written once, the duplicates stopped at the claim',
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      const params: ProcessingParams = { ...PARITY_PARAMS, tile_px: 256, tms: 'WebMercatorQuad', zoom: 15, resampling: 'cubic' };
      const fan = await ctx.fanOut('A', { source, params });
      ctx.fact('tiles', fan.grid.count);
      // Every job again, as a redelivered scene event's fan-out sends them.
      await ctx.fanOut('A', { source, params });
      await ctx.drain('w1');
      await ctx.mosaic(fan.sceneKey);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'fan-out:already-present': 1, 'ack:written': 2, 'ack:claim-rejected:done': 2, 'mosaic:written': 1 },
      outputs: [
        'A/mosaic.stac.json',
        'A/mosaic.vrt',
        'A/scene.json',
        'A/tiles/WebMercatorQuad/15/16657/10904.tif',
        'A/tiles/WebMercatorQuad/15/16657/10905.tif',
      ],
      counters: { enqueued: 4, claimed: 2, written: 2, committed: 2, 'claim-rejected': 2 },
      manifestCount: 2,
      claims: [committed('A/0_0', 'A/0_0#m1@w1'), committed('A/1_0', 'A/1_0#m1@w1')],
      facts: { tiles: 2 },
    }),
  },
];
