import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { outputKeys, type ProcessingParams } from '../../shared/domain/job-key.js';
import { windows } from '../../shared/domain/tile-grid.js';
import { canonicalCrsText, crsOfRaster, crsWkt2, parseCrs } from '../../shared/raster/crs.js';
import { encodeGeoTiff, type GeoTransform, openGeoTiff, type RasterCrs } from '../../shared/raster/index.js';
import { PARITY_PARAMS, SCENE_SIZE, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { allCommitted, outcome, type Scenario, sceneOutputs } from './scenario-kit.js';

// Issue 29, sections 2 and 3: a scene in a CRS without an EPSG code, and a scene across the antimeridian, on every
// backend. The CRS enters the job key as the canonical form of its definition; the antimeridian scene's tiles are
// the two ends of the matrix's columns. See docs/reprojection.md.

/** The ETRS89-LAEA parameters as a user-defined projection (no EPSG code): the CRS of scene 76's file. */
const LAEA = '+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m +no_defs';
/** A European Albers equal-area without an EPSG code: scene 76's second target, a canonical PROJ string in its key. */
const ALBERS = canonicalCrsText('+proj=aea +lat_0=30 +lon_0=10 +lat_1=43 +lat_2=62 +ellps=GRS80 +units=m');

/** A two-band (B04, B08) uint16 scene of the parity size, deterministic ramps, in `crs` at `geoTransform`. */
function twoBandScene(crs: RasterCrs, geoTransform: GeoTransform): Uint8Array {
  const n = SCENE_SIZE.width * SCENE_SIZE.height;
  const red = new Uint16Array(n);
  const nir = new Uint16Array(n);
  for (let k = 0; k < n; k++) {
    const x = k % SCENE_SIZE.width;
    const y = Math.floor(k / SCENE_SIZE.width);
    red[k] = 1000 + 3 * x + 5 * y;
    nir[k] = 3000 + 7 * x + 2 * y;
  }
  return encodeGeoTiff({ ...SCENE_SIZE, dataType: 'uint16', bandCount: 2, bands: [red, nir], geoTransform, crs, blockSize: 16 });
}

/** The CRS tile 0_0 (or a tile matrix set tile) of a scene carries, as Tessera reads it back: its id. */
async function tileCrs(ctx: ScenarioContext, key: string): Promise<string> {
  const tile = await openGeoTiff(ctx.backend.outputs, key);
  return crsOfRaster(tile.crs, key).id;
}

/** What the output STAC Item says of a scene's CRS and footprint. */
async function stacFacts(ctx: ScenarioContext, scene: string): Promise<Json> {
  const item = JSON.parse(new TextDecoder().decode(await ctx.backend.outputs.get(outputKeys.stacItem(scene)))) as {
    bbox: number[];
    geometry: { type: string };
    properties: Record<string, unknown>;
  };
  return {
    code: item.properties['proj:code'] as Json,
    wkt2: typeof item.properties['proj:wkt2'] === 'string',
    geometry: item.geometry.type,
    bboxWestOfEast: (item.bbox[0] as number) < (item.bbox[2] as number),
  };
}

/** UTM 60N (central meridian 177 E), 52 N, 64 x 48 km at 1 km: about 179.3 E to 179.6 W, across 180 degrees. */
const ANTIMERIDIAN_GT: GeoTransform = [673_000, 1000, 0, 5_790_000, 0, -1000];
const CRS84_PARAMS: ProcessingParams = { ...PARITY_PARAMS, tile_px: 256, tms: 'WorldCRS84Quad', zoom: 7, resampling: 'bilinear' };

export const CRS_SCENARIOS: readonly Scenario[] = [
  {
    id: '76',
    title:
      'a scene in a user-defined projection (no EPSG code): on its own grid, and onto another CRS without a code named by its canonical PROJ string; every job delivered twice, each tile written once, in that CRS',
    async run(ctx) {
      const source = await ctx.stage(
        'incoming/laea.tif',
        twoBandScene({ wkt: crsWkt2(parseCrs(LAEA)) }, [4_300_000, 500, 0, 3_220_000, 0, -500]),
      );
      const own = await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      // The scene event again: the same key, every job again, stopped at its claim.
      await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      const albers: ProcessingParams = { ...PARITY_PARAMS, dst_crs: ALBERS };
      const other = await ctx.fanOut('B', { source, params: albers });
      await ctx.fanOut('B', { source, params: albers });
      await ctx.drain('w1');
      await ctx.mosaic(own.sceneKey);
      const manifest = await readSceneManifest(ctx.backend.outputs, other.sceneKey);
      ctx.fact('keys', { differ: own.sceneKey !== other.sceneKey, dstCrs: manifest.params.dst_crs as Json });
      ctx.fact('grids', { A: own.grid.count, B: other.grid.count, targetCode: manifest.grid.target?.crs.epsg ?? null });
      ctx.fact('tileCrs', {
        A: await tileCrs(ctx, outputKeys.tile(own.sceneKey, { row: 0, col: 0 })),
        B: await tileCrs(ctx, outputKeys.tile(other.sceneKey, { row: 0, col: 0 })),
      });
      ctx.fact('stac', await stacFacts(ctx, own.sceneKey));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 2, 'fan-out:already-present': 2, 'ack:written': 8, 'ack:claim-rejected:done': 8, 'mosaic:written': 1 },
      outputs: [...sceneOutputs('A', true), ...sceneOutputs('B', false)].sort(),
      counters: { enqueued: 16, claimed: 8, written: 8, committed: 8, 'claim-rejected': 8 },
      manifestCount: 4,
      claims: [...allCommitted('A', 'w1'), ...allCommitted('B', 'w1')],
      facts: {
        keys: { differ: true, dstCrs: ALBERS },
        grids: { A: 4, B: 4, targetCode: null },
        tileCrs: { A: canonicalCrsText(LAEA), B: ALBERS },
        stac: { code: null, wkt2: true, geometry: 'Polygon', bboxWestOfEast: true },
      },
    }),
  },
  {
    id: '77',
    title:
      'a scene across the antimeridian onto WorldCRS84Quad: tiles at both ends of the matrix (columns 255 and 0, rows 26-27), none between; every job delivered twice, each tile written once; a MultiPolygon footprint',
    async run(ctx) {
      const source = await ctx.stage('incoming/utm60.tif', twoBandScene({ epsg: 32660 }, ANTIMERIDIAN_GT));
      const fan = await ctx.fanOut('A', { source, params: CRS84_PARAMS });
      await ctx.fanOut('A', { source, params: CRS84_PARAMS });
      await ctx.drain('w1');
      await ctx.mosaic(fan.sceneKey);
      const manifest = await readSceneManifest(ctx.backend.outputs, fan.sceneKey);
      const tms = manifest.grid.target?.tms;
      ctx.fact('grid', { count: fan.grid.count, minCol: tms?.minCol ?? null, cols: manifest.grid.cols });
      // Column 0's tile is georeferenced at the west edge of the world, where its index puts it.
      const zero = [...windows(manifest.grid)].find((w) => (tms?.minCol ?? 0) + w.col === 256);
      if (zero === undefined) throw new Error('no tile past the last column');
      const key = outputKeys.tile(fan.sceneKey, zero, { tms: 'WorldCRS84Quad', z: 7, x: 0, y: (tms?.minRow ?? 0) + zero.row });
      ctx.fact('columnZeroWest', (await openGeoTiff(ctx.backend.outputs, key)).geoTransform[0]);
      ctx.fact('stac', await stacFacts(ctx, fan.sceneKey));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'fan-out:already-present': 1, 'ack:written': 4, 'ack:claim-rejected:done': 4, 'mosaic:written': 1 },
      outputs: [
        'A/mosaic.stac.json',
        'A/mosaic.vrt',
        'A/scene.json',
        'A/tiles/WorldCRS84Quad/7/0/26.tif',
        'A/tiles/WorldCRS84Quad/7/0/27.tif',
        'A/tiles/WorldCRS84Quad/7/255/26.tif',
        'A/tiles/WorldCRS84Quad/7/255/27.tif',
      ],
      counters: { enqueued: 8, claimed: 4, written: 4, committed: 4, 'claim-rejected': 4 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: {
        grid: { count: 4, minCol: 255, cols: 2 },
        columnZeroWest: -180,
        stac: { code: 'EPSG:4326', wkt2: false, geometry: 'MultiPolygon', bboxWestOfEast: false },
      },
    }),
  },
];
