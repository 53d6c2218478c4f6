import { PMTiles, type Source } from 'pmtiles';
import { assembleMosaic } from '../../shared/app/assemble-mosaic.js';
import { buildSceneArchive } from '../../shared/app/pmtiles-archive.js';
import { renderParentTile } from '../../shared/app/pyramid.js';
import { levelGrid } from '../../shared/app/pyramid-grid.js';
import { writeQuicklook } from '../../shared/app/quicklook.js';
import { renderTile } from '../../shared/app/render-tile.js';
import { tmsTileOf } from '../../shared/app/scene-grid.js';
import { readSceneManifest, type SceneManifest } from '../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { makeTileJob } from '../../shared/app/tile-job.js';
import { sceneTileJson } from '../../shared/app/tilejson.js';
import { outputKeys, type ProcessingParams } from '../../shared/domain/job-key.js';
import { outputForFormat } from '../../shared/domain/render-params.js';
import { windows } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectHead, ObjectStore, PutOptions } from '../../shared/ports/object-store.port.js';
import { parseExpression } from '../../shared/raster/index.js';
import { asRole } from '../support/function-role.js';
import { MemoryObjectStore } from '../support/memory-object-store.js';
import { PARITY_PARAMS, parityScene, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { committed, outcome, type Scenario } from './scenario-kit.js';

// Issue 26 sections 3 and 4: the PMTiles archive, the TileJSON and the quicklook of a rendered pyramid. Every output is
// a function of the tiles and the manifest, so the same on every backend: each is compared with what the same code
// makes in memory from tiles rendered in memory (not the backend's), as row 102 compares tiles. docs/web-maps.md.

/** The parity scene as PNG tiles with a colormap on WebMercatorQuad zooms 15-16 (six tiles of 16, two of 15), archived. */
const WEB_PARAMS: ProcessingParams = {
  ...PARITY_PARAMS,
  version: 'parity-web-maps-1',
  tile_px: 256,
  tms: 'WebMercatorQuad',
  zoom: 16,
  min_zoom: 15,
  resampling: 'bilinear',
  mosaic: 'pmtiles',
  output: outputForFormat(PARITY_PARAMS.output as Record<string, unknown>, { format: 'PNG', rescale: [-1, 1], colormap: 'rdylgn' }),
};

/** Thrown where an assembly's process dies: nothing after it runs. */
class AssemblyCrash extends Error {}

/** The outputs store of an assembly that dies right after its create-only write of `key` landed. */
function dyingAfter(inner: ObjectStore, key: string): ObjectStore {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'putIfAbsent')
        return async (k: string, body: Uint8Array, options?: PutOptions) => {
          const r = await target.putIfAbsent(k, body, options);
          if (k === key) throw new AssemblyCrash(`the mosaic function died after writing ${k}`);
          return r;
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The scene's outputs made in memory: every tile rendered from the parity scene held in a store of its own (zoom 16 from
 * the source, zoom 15 from those children), then the archive, the TileJSON and the quicklook by the same functions the
 * assembly calls. Keys are the backend's scene's (from its manifest), so the archive can be compared byte for byte.
 */
async function reference(manifest: SceneManifest): Promise<{ tiles: Map<string, Buffer>; outputs: Map<string, Buffer> }> {
  const sources = new MemoryObjectStore(() => 0);
  const put = await sources.putIfAbsent('scene.tif', await parityScene());
  if (put.kind !== 'written') throw new Error('reference scene not written');
  const source = { bucket: 'reference', key: 'scene.tif', versionToken: put.version };
  const tiling = tilingParams(WEB_PARAMS);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  const outputs = new MemoryObjectStore(() => 0);
  const tiles = new Map<string, Buffer>();
  const top = manifest.grid.target?.tms?.zoom as number;
  for (let z = top; z >= (WEB_PARAMS.min_zoom as number); z--) {
    const level = levelGrid(manifest.grid, tiling.tilePx, z);
    for (const w of windows(level)) {
      const job = makeTileJob(manifest.sceneKey, source, WEB_PARAMS, manifest.grid, w, { kind: 'create' }, undefined, undefined, z);
      const bytes =
        z === top ? await renderTile(sources, job, tiling, expression) : (await renderParentTile(outputs, job, tiling, manifest)).cog;
      const key = outputKeys.tile(manifest.sceneKey, w, tmsTileOf(level.target, w), 'PNG');
      await outputs.putIfAbsent(key, bytes);
      tiles.set(key, Buffer.from(bytes));
    }
  }
  const heads = new Map<string, ObjectHead>();
  for await (const h of outputs.list(outputKeys.tilePrefix(manifest.sceneKey))) heads.set(h.key, h);
  const quiet = new JsonTelemetry(() => {});
  const archive = await buildSceneArchive(outputs, manifest, tiling, heads, quiet);
  const quicklook = await writeQuicklook(outputs, manifest, tiling, heads, quiet);
  if (quicklook === undefined) throw new Error('the reference quicklook was skipped');
  const tileJson = sceneTileJson(manifest, tiling, { pmtilesKey: archive.key });
  return {
    tiles,
    outputs: new Map([
      [archive.key, Buffer.from(await outputs.get(archive.key))],
      [quicklook.key, Buffer.from(await outputs.get(quicklook.key))],
      [tileJson.key, Buffer.from(tileJson.bytes)],
    ]),
  };
}

/** What the backend's outputs are, judged against the in-memory reference, and the archive as the pmtiles reader reads it. */
async function webMapFacts(ctx: ScenarioContext, scene: string): Promise<Json> {
  const manifest = await readSceneManifest(ctx.backend.outputs, scene);
  const ref = await reference(manifest);
  let tilesSame = 0;
  for (const [key, bytes] of ref.tiles) if (Buffer.from(await ctx.backend.outputs.get(key)).equals(bytes)) tilesSame++;
  const same = async (key: string) => Buffer.from(await ctx.backend.outputs.get(key)).equals(ref.outputs.get(key) as Buffer);
  const archiveBytes = await ctx.backend.outputs.get(outputKeys.pmtiles(scene));
  const archive = new PMTiles({
    getKey: () => 'parity',
    getBytes: async (o, l) => ({ data: archiveBytes.slice(o, o + l).buffer }),
  } satisfies Source);
  const h = await archive.getHeader();
  const item = JSON.parse(new TextDecoder().decode(await ctx.backend.outputs.get(outputKeys.stacItem(scene)))) as {
    assets: Record<string, unknown>;
    links: { rel: string }[];
  };
  return {
    tiles: `${tilesSame} of ${ref.tiles.size} the reference's bytes`,
    pmtilesSameAsReference: await same(outputKeys.pmtiles(scene)),
    tileJsonSameAsReference: await same(outputKeys.tileJson(scene)),
    quicklookSameAsReference: await same(outputKeys.quicklook(scene)),
    archive: { tileType: h.tileType, minZoom: h.minZoom, maxZoom: h.maxZoom, addressedTiles: h.numAddressedTiles, clustered: h.clustered },
    itemAssets: Object.keys(item.assets).sort(),
    itemLinks: item.links.map((l) => l.rel),
  };
}

export const WEB_MAP_SCENARIOS: readonly Scenario[] = [
  {
    id: '104',
    title:
      'web map outputs: a PNG pyramid (zooms 15-16, rdylgn) with every message delivered twice, the mosaic function dead right after writing the PMTiles archive, then a re-assembly and a duplicate one: the archive, the TileJSON and the quicklook are the in-memory reference’s bytes on every backend, each written once',
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      // The scene event twice, and every tile message (parents too) handled twice: its first ack lost.
      const fan = await ctx.fanOut('A', { source, params: WEB_PARAMS });
      await ctx.fanOut('A', { source, params: WEB_PARAMS });
      const handled = new Map<string, number>();
      await ctx.drain('w1', {
        settle: (d) => {
          const n = (handled.get(d.deliveryId) ?? 0) + 1;
          handled.set(d.deliveryId, n);
          return n === 1 ? 'release' : undefined;
        },
      });
      const scene = fan.sceneKey;
      // The first assembly dies right after its archive's create-only write: no TileJSON, quicklook, Item or VRT yet.
      const dying = { ...ctx.backend, outputs: dyingAfter(ctx.backend.outputs, outputKeys.pmtiles(scene)) };
      const died = await asRole('mosaic', () => assembleMosaic(dying, scene)).then(
        () => false,
        (e: unknown) => e instanceof AssemblyCrash,
      );
      ctx.note(died ? 'mosaic:crashed' : 'mosaic:survived');
      ctx.fact(
        'afterCrash',
        (await ctx.outputs()).filter((o) => o.startsWith('A/mosaic')),
      );
      // The sweep (or a request) assembles again: the archive already present, the rest written; then a duplicate.
      await ctx.mosaic(scene);
      await ctx.mosaic(scene);
      ctx.fact('outputs', await webMapFacts(ctx, scene));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'fan-out:already-present': 1,
        'ack:written': 8,
        'ack:claim-rejected:done': 20,
        'mosaic:crashed': 1,
        'mosaic:written': 1,
        'mosaic:already-present': 1,
      },
      outputs: [
        'A/mosaic.pmtiles',
        'A/mosaic.quicklook.png',
        'A/mosaic.stac.json',
        'A/mosaic.tilejson.json',
        'A/mosaic.vrt',
        'A/scene.json',
        ...[
          '15/16657/10904',
          '15/16657/10905',
          '16/33314/21808',
          '16/33314/21809',
          '16/33314/21810',
          '16/33315/21808',
          '16/33315/21809',
          '16/33315/21810',
        ].map((t) => `A/tiles/WebMercatorQuad/${t}.png`),
      ],
      // 12 messages of zoom 16 (two fan-outs) and the two parents, each handled twice; every tile written once.
      counters: {
        enqueued: 14,
        claimed: 8,
        written: 8,
        committed: 8,
        'claim-rejected': 20,
        // The re-assembly's archive (1), and the duplicate assembly's VRT, archive, TileJSON, quicklook and Item (5).
        'write-already-present': 6,
      },
      manifestCount: 6,
      claims: [
        committed('A/z15/0_0', 'A/z15/0_0#m1@w1'),
        committed('A/z15/1_0', 'A/z15/1_0#m1@w1'),
        ...['0_0', '0_1', '1_0', '1_1', '2_0', '2_1'].map((w) => committed(`A/z16/${w}`, `A/z16/${w}#m1@w1`)),
      ],
      facts: {
        // The crash left the archive alone: no TileJSON, quicklook, Item or VRT (written last, so the sweep retries).
        afterCrash: ['A/mosaic.pmtiles'],
        outputs: {
          tiles: "8 of 8 the reference's bytes",
          pmtilesSameAsReference: true,
          tileJsonSameAsReference: true,
          quicklookSameAsReference: true,
          archive: { tileType: 2, minZoom: 15, maxZoom: 16, addressedTiles: 8, clustered: true },
          itemAssets: ['mosaic', 'pmtiles', 'thumbnail', 'tilejson'],
          itemLinks: ['pmtiles', 'tilejson', 'xyz'],
        },
      },
    }),
  },
];
