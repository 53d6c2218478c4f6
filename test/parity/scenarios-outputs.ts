import { sceneTiles } from '../../shared/app/assemble-mosaic.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { outputKeys, type ProcessingParams } from '../../shared/domain/job-key.js';
import { openGeoTiff } from '../../shared/raster/index.js';
import { PARITY_PARAMS, type ScenarioContext } from './harness.js';
import { allCommitted, outcome, type Scenario, tiles, WINDOWS } from './scenario-kit.js';

// Issue 14 section 4: the outputs users open (COG mosaic, STAC Item). See docs/outputs.md and docs/parity.md.

const COG_PARAMS: ProcessingParams = { ...PARITY_PARAMS, mosaic: 'cog' };

/** Whether every tile's pixels are the COG mosaic's pixels at the tile's window (read through the output store, pinned to no version). */
async function mosaicHoldsTiles(ctx: ScenarioContext, sceneKey: string): Promise<boolean> {
  const manifest = await readSceneManifest(ctx.backend.outputs, sceneKey);
  const mosaic = await openGeoTiff(ctx.backend.outputs, outputKeys.cogMosaic(sceneKey));
  for (const tile of sceneTiles(manifest)) {
    const source = await openGeoTiff(ctx.backend.outputs, tile.key);
    const [want] = await source.readWindow({ x: 0, y: 0, width: tile.window.width, height: tile.window.height }, [1]);
    const [got] = await mosaic.readWindow(tile.window, [1]);
    if (!want || !got || want.length !== got.length || want.some((v, i) => !Object.is(v, got[i]))) return false;
  }
  return true;
}

export const OUTPUT_SCENARIOS: readonly Scenario[] = [
  {
    id: '90',
    title:
      'mosaic: cog: the VRT, one COG mosaic of the tiles (with overviews) and the STAC Item, each written once; a crash before the item (it is missing) and a re-assembly find the VRT and the COG already-present and unchanged, and write the same item bytes',
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      const fan = await ctx.fanOut('A', { source, params: COG_PARAMS });
      await ctx.drain('w1');
      const first = await ctx.mosaic(fan.sceneKey);
      const scene = fan.sceneKey;
      const cog = await openGeoTiff(ctx.backend.outputs, outputKeys.cogMosaic(scene));
      ctx.fact('cogMosaic', {
        key: first.cogMosaicKey === outputKeys.cogMosaic(scene),
        width: cog.width,
        height: cog.height,
        blocks: [cog.blockWidth, cog.blockHeight],
        overviews: (await cog.overviews()).map((o) => `${o.width}x${o.height}`),
        holdsTiles: await mosaicHoldsTiles(ctx, scene),
      });
      const itemBytes = await ctx.backend.outputs.get(outputKeys.stacItem(scene));
      const item = JSON.parse(new TextDecoder().decode(itemBytes)) as {
        id: string;
        properties: Record<string, unknown>;
        assets: Record<string, { href: string; type?: string }>;
      };
      ctx.fact('stacItem', {
        idIsScene: item.id === scene,
        code: item.properties['proj:code'] as string,
        shape: item.properties['proj:shape'] as number[],
        assets: Object.keys(item.assets).sort(),
        hrefsRelative: item.assets.mosaic?.href === `./${scene}.vrt` && item.assets.cog?.href === `./${scene}.tif`,
        cogType: item.assets.cog?.type ?? null,
      });
      // What a crash after the COG write and before the item's leaves: the VRT and the COG, no item.
      await ctx.checkpoint([outputKeys.mosaic(scene), outputKeys.cogMosaic(scene)]);
      await ctx.deleteOutput(outputKeys.stacItem(scene));
      await ctx.mosaic(scene);
      const again = await ctx.backend.outputs.get(outputKeys.stacItem(scene));
      ctx.fact('sameItemBytes', Buffer.from(again).equals(Buffer.from(itemBytes)));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'ack:written': 4, 'mosaic:written': 1, 'mosaic:already-present': 1 },
      outputs: ['A/mosaic.stac.json', 'A/mosaic.tif', 'A/mosaic.vrt', 'A/scene.json', ...tiles('A', ...WINDOWS)].sort(),
      versionsUnchanged: true,
      // The VRT and the COG mosaic of the re-assembly.
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 4, 'write-already-present': 2 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: {
        cogMosaic: { key: true, width: 64, height: 48, blocks: [16, 16], overviews: ['32x24', '16x12'], holdsTiles: true },
        stacItem: {
          idIsScene: true,
          code: 'EPSG:32631',
          shape: [48, 64],
          assets: ['cog', 'mosaic'],
          hrefsRelative: true,
          cogType: 'image/tiff; application=geotiff; profile=cloud-optimized',
        },
        sameItemBytes: true,
      },
    }),
  },
];
