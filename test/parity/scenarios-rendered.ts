import sharp from 'sharp';
import { renderTile } from '../../shared/app/render-tile.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { makeTileJob } from '../../shared/app/tile-job.js';
import { outputKeys, type ProcessingParams, sceneKey } from '../../shared/domain/job-key.js';
import { outputForFormat } from '../../shared/domain/render-params.js';
import { windowAt, windows } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { parseExpression } from '../../shared/raster/index.js';
import { MemoryObjectStore } from '../support/memory-object-store.js';
import { PARITY_GRID, PARITY_PARAMS, parityScene, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { allCommitted, outcome, type Scenario, WINDOWS } from './scenario-kit.js';

// Issue 26 section 2: rendered tiles for web maps. A PNG scene with a colormap is a scene like any other: its format
// is in the key, its tiles are written create-only and committed once whatever the duplicates, and the bytes are the
// render of the job, the same on every backend. docs/web-maps.md ("Rendered tiles"), docs/parity.md.

const PNG_PARAMS: ProcessingParams = {
  ...PARITY_PARAMS,
  version: 'parity-rendered-1',
  output: outputForFormat(PARITY_PARAMS.output as Record<string, unknown>, { format: 'PNG', rescale: [-1, 1], colormap: 'rdylgn' }),
};

/**
 * The bytes each window's job renders from the parity scene held in a store of its own (in memory, not the
 * backend's): what every backend's tile must equal, so equal on all four.
 */
async function referenceTiles(): Promise<Map<string, Buffer>> {
  const store = new MemoryObjectStore(() => 0);
  const put = await store.putIfAbsent('scene.tif', await parityScene());
  if (put.kind !== 'written') throw new Error('reference scene not written');
  const source = { bucket: 'reference', key: 'scene.tif', versionToken: put.version };
  const scene = sceneKey(source, PNG_PARAMS);
  const tiling = tilingParams(PNG_PARAMS);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  const out = new Map<string, Buffer>();
  for (const w of windows(PARITY_GRID)) {
    const job = makeTileJob(scene, source, PNG_PARAMS, PARITY_GRID, windowAt(PARITY_GRID, w.row, w.col));
    out.set(`${w.row}_${w.col}`, Buffer.from(await renderTile(store, job, tiling, expression)));
  }
  return out;
}

/** Per window: the decoded PNG (size, RGBA bands, transparent pixels) and whether its bytes are the reference render's. */
async function tileFacts(ctx: ScenarioContext, scene: string): Promise<Json> {
  const reference = await referenceTiles();
  const manifest = await readSceneManifest(ctx.backend.outputs, scene);
  const facts: Record<string, Json> = {};
  for (const w of windows(manifest.grid)) {
    const bytes = Buffer.from(await ctx.backend.outputs.get(outputKeys.tile(scene, w, undefined, 'PNG')));
    const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
    let transparent = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] === 0) transparent++;
    facts[`${w.row}_${w.col}`] = {
      png: `${info.width}x${info.height} ${info.channels} bands`,
      transparent,
      sameBytesAsReference: bytes.equals(reference.get(`${w.row}_${w.col}`) as Buffer),
    };
  }
  return facts;
}

export const RENDERED_SCENARIOS: readonly Scenario[] = [
  {
    id: '102',
    title:
      'rendered tiles: a PNG scene with the rdylgn colormap, every message delivered twice (a duplicate scene event, lost acks): each tile written once, bytes identical to an in-memory render on every backend; the VRT mosaic and STAC Item once',
    async run(ctx) {
      const source = await ctx.stage();
      // The scene event arrives twice: two fan-outs, two messages per tile.
      const fan = await ctx.fanOut('A', { source, params: PNG_PARAMS });
      await ctx.fanOut('A', { source, params: PNG_PARAMS });
      // And every tile message comes back once after its first handling: the ack was lost.
      const handled = new Map<string, number>();
      await ctx.drain('w1', {
        onResult: async (d, r) => {
          handled.set(d.deliveryId, (handled.get(d.deliveryId) ?? 0) + 1);
          if (r.kind === 'ack' && r.outcome.kind === 'written') await ctx.checkpoint([r.outcome.outputKey]);
        },
        settle: (d) => (handled.get(d.deliveryId) === 1 ? 'release' : undefined),
      });
      await ctx.mosaic(fan.sceneKey);
      ctx.fact('tiles', await tileFacts(ctx, fan.sceneKey));
      const vrt = new TextDecoder().decode(await ctx.backend.outputs.get(outputKeys.mosaic(fan.sceneKey)));
      ctx.fact(
        'mosaicBands',
        [...vrt.matchAll(/<ColorInterp>(\w+)<\/ColorInterp>/g)].map((m) => m[1] as string),
      );
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'fan-out:already-present': 1, 'ack:written': 4, 'ack:claim-rejected:done': 12, 'mosaic:written': 1 },
      // A rendered scene's quicklook (docs/web-maps.md, "TileJSON and quicklook"; row 104 checks its bytes).
      outputs: [
        'A/mosaic.quicklook.png',
        'A/mosaic.stac.json',
        'A/mosaic.vrt',
        'A/scene.json',
        ...WINDOWS.map((w) => `A/tiles/${w}.png`),
      ].sort(),
      versionsUnchanged: true,
      counters: { enqueued: 8, claimed: 4, written: 4, committed: 4, 'claim-rejected': 12 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: {
        tiles: {
          '0_0': { png: '32x32 4 bands', transparent: 0, sameBytesAsReference: true },
          '0_1': { png: '32x32 4 bands', transparent: 0, sameBytesAsReference: true },
          '1_0': { png: '32x16 4 bands', transparent: 0, sameBytesAsReference: true },
          '1_1': { png: '32x16 4 bands', transparent: 0, sameBytesAsReference: true },
        },
        mosaicBands: ['Red', 'Green', 'Blue', 'Alpha'],
      },
    }),
  },
];
