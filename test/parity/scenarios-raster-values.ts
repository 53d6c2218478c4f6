import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { fanOutStacSceneEvent } from '../../shared/app/stac-scene.js';
import { TesseraError } from '../../shared/domain/errors.js';
import { outputKeys, type SourceRef } from '../../shared/domain/job-key.js';
import { openGeoTiff } from '../../shared/raster/index.js';
import { asRole } from '../support/function-role.js';
import { stacItemBytes } from '../support/stac-fixtures.js';
import { PARITY_PARAMS, parityScene, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { allCommitted, outcome, type Scenario, sceneOutputs } from './scenario-kit.js';

// Issue 29: physical values. A STAC Item's raster extension gives each band's scale and offset (Sentinel-2 L2A
// since processing baseline 04.00: DN * 0.0001 - 0.1); with `unscale` the scene trigger carries them into the
// parameters, so into the scene key, and every tile applies them before the band math. The trigger's rule runs
// against each backend's own store and queue, as in scenarios-stac.ts.

const DIR = 'incoming/S2B_T31UDQ_20240601_N0400';
const SELECTION = { B04: 'red', B08: 'nir' } as const;
/** Processing baseline 04.00's BOA offset, as Earth Search's Items give it. */
const N0400 = { scale: 0.0001, offset: -0.1 } as const;
const UNSCALED = { ...PARITY_PARAMS, version: 'parity-raster-values-1', unscale: true };
const RAW = { ...PARITY_PARAMS, version: 'parity-raster-values-1' };
const config = (params: typeof RAW) => ({ selection: SELECTION, params, platform: 'local', functionTimeoutSec: 900 }) as const;

/** The Item: `red` a one-band file, `nir` band 2 of a two-band file, each with its raster:bands scale and offset. */
function itemBytes(scale: unknown = N0400.scale): Uint8Array {
  const raster = (nodata: number) => ({ nodata, data_type: 'uint16', scale, offset: N0400.offset });
  return stacItemBytes({
    red: {
      href: './B04.tif',
      type: 'image/tiff; application=geotiff',
      'eo:bands': [{ name: 'B04', common_name: 'red' }],
      'raster:bands': [raster(0)],
    },
    pair: {
      href: './B04+B08.tif',
      type: 'image/tiff; application=geotiff',
      'eo:bands': [
        { name: 'B04', common_name: 'red' },
        { name: 'B08', common_name: 'nir' },
      ],
      'raster:bands': [raster(0), raster(0)],
    },
  });
}

async function stageBands(ctx: ScenarioContext): Promise<void> {
  for (const name of ['B04.tif', 'B04+B08.tif']) await ctx.stage(`${DIR}/${name}`, await parityScene());
}

/** One delivery of the item's event to the scene trigger's rule, noted `stac:fanned-out:<manifest>` or `stac:poison:<code>`. */
async function itemEvent(ctx: ScenarioContext, label: string, item: SourceRef, params: typeof RAW): Promise<string> {
  let kind: string;
  try {
    const fan = await asRole('scene', () => fanOutStacSceneEvent(ctx.backend, item, config(params)));
    if (fan.kind === 'fanned-out') {
      const manifest = await readSceneManifest(ctx.backend.outputs, fan.result.sceneKey);
      ctx.registerScene(label, manifest.source, manifest.params, fan.result.grid);
      kind = `fanned-out:${fan.result.manifest}`;
    } else kind = fan.kind;
  } catch (error) {
    if (!(error instanceof TesseraError)) throw error;
    kind = `${error.retryable ? 'retry' : 'poison'}:${error.code}`;
  }
  ctx.note(`stac:${kind}`);
  return kind;
}

const sceneKeyOf = async (ctx: ScenarioContext, label: string): Promise<string> => {
  for await (const h of ctx.backend.outputs.list('scenes/'))
    if (h.key.endsWith('/scene.json') && ctx.sceneLabel(h.key.split('/')[1] as string) === label) return h.key.split('/')[1] as string;
  throw new Error(`no scene ${label}`);
};

/**
 * What tile 0_0 of a scene holds at its first pixel, against the NDVI of the source's DN there: of the physical
 * values (DN * 0.0001 - 0.1, in float32 as gdal_translate -unscale -ot Float32 gives them) or of the raw DN.
 */
async function firstPixel(ctx: ScenarioContext, sceneKey: string): Promise<Json> {
  const tile = await openGeoTiff(ctx.backend.outputs, outputKeys.tile(sceneKey, { row: 0, col: 0 }));
  const [pixels] = await tile.readWindow({ x: 0, y: 0, width: 1, height: 1 }, [1]);
  const at = async (key: string, band: number) =>
    (await (await openGeoTiff(ctx.backend.sources, key)).readWindow({ x: 0, y: 0, width: 1, height: 1 }, [band]))[0]?.[0] as number;
  const red = await at(`${DIR}/B04.tif`, 1);
  const nir = await at(`${DIR}/B04+B08.tif`, 2);
  const r = Math.fround(red * N0400.scale + N0400.offset);
  const n = Math.fround(nir * N0400.scale + N0400.offset);
  const value = pixels?.[0] as number;
  return { physical: value === Math.fround((n - r) / (n + r)), raw: value === Math.fround((nir - red) / (nir + red)) };
}

export const RASTER_VALUE_SCENARIOS: readonly Scenario[] = [
  {
    id: '82',
    title:
      "an unscaled STAC scene: the item's raster:bands scale and offset enter its key; duplicate item events make one scene, each tile written once with physical values",
    async run(ctx) {
      await stageBands(ctx);
      const item = await ctx.stage(`${DIR}/item.json`, itemBytes());
      await itemEvent(ctx, 'A', item, UNSCALED);
      // The item's event again (a redelivery): the same scene key, every tile job enqueued again and stopped at its claim.
      await itemEvent(ctx, 'A', item, UNSCALED);
      await ctx.drain('w1');
      const scene = await sceneKeyOf(ctx, 'A');
      await ctx.mosaic(scene);
      const manifest = await readSceneManifest(ctx.backend.outputs, scene);
      ctx.fact('params', { unscale: manifest.params.unscale as Json, scale_offset: manifest.params.scale_offset as Json });
      ctx.fact('tile0_0', await firstPixel(ctx, scene));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'stac:fanned-out:written': 1,
        'stac:fanned-out:already-present': 1,
        'ack:written': 4,
        'ack:claim-rejected:done': 4,
        'mosaic:written': 1,
      },
      outputs: sceneOutputs('A', true),
      counters: { enqueued: 8, claimed: 4, written: 4, committed: 4, 'claim-rejected': 4 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: {
        params: { unscale: true, scale_offset: { B04: N0400, B08: N0400 } },
        tile0_0: { physical: true, raw: false },
      },
    }),
  },
  {
    id: '83',
    title: 'the same item version with and without unscale: two scenes under two keys, each tile of each written once, with other values',
    async run(ctx) {
      await stageBands(ctx);
      const item = await ctx.stage(`${DIR}/item.json`, itemBytes());
      await itemEvent(ctx, 'A', item, UNSCALED);
      await itemEvent(ctx, 'B', item, RAW);
      await ctx.drain('w1');
      const a = await sceneKeyOf(ctx, 'A');
      const b = await sceneKeyOf(ctx, 'B');
      ctx.fact('differentScenes', a !== b);
      ctx.fact('tile0_0', { A: await firstPixel(ctx, a), B: await firstPixel(ctx, b) });
      return ctx.record();
    },
    expected: outcome({
      calls: { 'stac:fanned-out:written': 2, 'ack:written': 8 },
      outputs: [...sceneOutputs('A', false), ...sceneOutputs('B', false)].sort(),
      counters: { enqueued: 8, claimed: 8, written: 8, committed: 8 },
      claims: [...allCommitted('A', 'w1'), ...allCommitted('B', 'w1')],
      facts: {
        differentScenes: true,
        tile0_0: { A: { physical: true, raw: false }, B: { physical: false, raw: true } },
      },
    }),
  },
  {
    id: '84',
    title:
      'with unscale, an item whose raster:bands scale is not a number is poison at its first delivery, before any band is pinned; without unscale it fans out',
    async run(ctx) {
      await stageBands(ctx);
      const item = await ctx.stage(`${DIR}/item.json`, itemBytes('0.0001'));
      const verdicts = [await itemEvent(ctx, 'X', item, UNSCALED), await itemEvent(ctx, 'B', item, RAW)];
      await ctx.drain('w1');
      ctx.fact('verdicts', verdicts);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'stac:poison:INVALID_EVENT': 1, 'stac:fanned-out:written': 1, 'ack:written': 4 },
      outputs: sceneOutputs('B', false),
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 4 },
      claims: allCommitted('B', 'w1'),
      facts: { verdicts: ['poison:INVALID_EVENT', 'fanned-out:written'] },
    }),
  },
];
