import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tileGrid, type Window } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { canPin, run, runWorker } from '../lib/child.js';
import type { Gdal } from '../lib/gdal.js';
import { runGdalScript } from '../lib/gdal.js';
import { benchParams, spreadWindows } from '../lib/jobs.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { ensureScene, freshRunDir, SCENE } from '../lib/scenes.js';
import { fmt, fmtSummary, summarize } from '../lib/stats.js';
import type { MemoryReading } from '../workers/common.js';

export interface ThroughputConfig {
  /** Side of the square source scene, in pixels. */
  readonly sceneSize: number;
  /** Windows per repetition (spread over the grid). */
  readonly tiles: number;
  readonly reps: number;
}

/** zlib level of both contenders' DEFLATE: Tessera's encodeCog default and GDAL's COG default. */
const DEFLATE_LEVEL = 6;
/** Largest difference accepted between two contenders' pixels (both compute in float64 and round to float32 once). */
const PIXEL_TOLERANCE = 1e-6;

const SECTION = '1 throughput';

type Contender = 'tessera' | 'gdal-cli' | 'gdal-warm';

interface TesseraRun {
  elapsedMs: number;
  tiles: number;
  perTileMs: number[];
  outputs: string[];
  memory: MemoryReading;
}

interface ComparePair {
  name: string;
  layoutDiffers: string[];
  maskMismatches: number;
  maxAbsDiff: number;
  validPixels: number;
  cogErrors: { reference: string[]; candidate: string[] };
  reference: Record<string, unknown>;
  candidate: Record<string, unknown>;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The GDAL command-line pipeline of one tile (see docs/benchmarks.md for why
 * this formulation): gdal_calc.py reads the window straight from the scene
 * with --projwin (no intermediate VRT process) and writes the float32 NDVI to
 * an uncompressed GTiff; gdal_translate turns it into the COG. gdal_calc.py
 * cannot write a COG itself (the COG driver has no Create()).
 *
 * --projwin's right and bottom edges sit half a pixel inside the window:
 * gdal_calc.py rounds the far edge outwards, so the exact edge would read a
 * 513th column and row (checked: the outputs are compared pixel for pixel).
 */
function gdalCliCommands(g: Gdal, scene: string, w: Window, out: string, tmp: string, blockSize: number, noDataOut: number): string[] {
  const px = SCENE.pixelSize;
  const ulx = SCENE.originX + w.x * px;
  const uly = SCENE.originY - w.y * px;
  const lrx = ulx + (w.width - 0.5) * px;
  const lry = uly - (w.height - 0.5) * px;
  const nd = SCENE.noData;
  // float64 arithmetic like Tessera's evaluator; the source nodata of either band gives the output nodata.
  const calc = `where((A == ${nd}) | (B == ${nd}), ${noDataOut}, (B.astype(float64) - A) / (B.astype(float64) + A))`;
  return [
    [
      quote(g.calc),
      '--quiet',
      '--hideNoData',
      `-A ${quote(scene)} --A_band=1`,
      `-B ${quote(scene)} --B_band=2`,
      `--projwin ${ulx} ${uly} ${lrx} ${lry}`,
      `--calc=${quote(calc)}`,
      '--type=Float32',
      `--NoDataValue=${noDataOut}`,
      '--format=GTiff',
      `--outfile=${quote(tmp)}`,
      '--overwrite',
      '2>/dev/null', // numpy's divide-by-zero warnings for the masked pixels
    ].join(' '),
    [
      quote(g.translate),
      '-q -of COG',
      `-co BLOCKSIZE=${blockSize} -co COMPRESS=DEFLATE -co PREDICTOR=YES -co LEVEL=${DEFLATE_LEVEL} -co RESAMPLING=AVERAGE`,
      quote(tmp),
      quote(out),
    ].join(' '),
    `rm -f ${quote(tmp)}`,
  ];
}

const outName = (w: Window) => `${w.row}_${w.col}.tif`;

/**
 * Section 1: tiles per second of Tessera's tile worker against GDAL doing
 * the same tiles, one core each, in alternating order, several repetitions;
 * then the outputs are compared pixel for pixel so the race is a fair one.
 */
export async function throughput(cfg: ThroughputConfig, g: Gdal, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const scene = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const params = benchParams('throughput');
  const tiling = tilingParams(params);
  const grid = tileGrid(cfg.sceneSize, cfg.sceneSize, tiling.tilePx);
  const windows = spreadWindows(grid, cfg.tiles);
  const tilesPerSec: Record<Contender, number[]> = { tessera: [], 'gdal-cli': [], 'gdal-warm': [] };
  const tesseraPerTileMs: number[] = [];
  const broken: string[] = [];
  let verification: ComparePair[] = [];

  for (let rep = 0; rep < cfg.reps; rep++) {
    const order: Contender[] = ['tessera', 'gdal-cli', 'gdal-warm'];
    for (let r = 0; r < rep % order.length; r++) order.push(order.shift() as Contender);
    const outputs: Partial<Record<Contender, string[]>> = {};
    for (const who of order) {
      const dir = freshRunDir(`throughput-${who}-${rep}`);
      let ms: number;
      switch (who) {
        case 'tessera': {
          const r = await runWorker<TesseraRun>(
            'tile-worker',
            { dir, scenePath: scene, params, windows },
            { pin: true, timeoutMs: 1_800_000 },
          );
          ms = r.elapsedMs;
          tesseraPerTileMs.push(...r.perTileMs);
          outputs.tessera = r.outputs;
          break;
        }
        case 'gdal-cli': {
          const script = join(dir, 'tiles.sh');
          const lines = windows.flatMap((w) =>
            gdalCliCommands(g, scene, w, join(dir, outName(w)), join(dir, 'ndvi.tmp.tif'), tiling.blockSize, tiling.noData),
          );
          writeFileSync(script, ['set -e', ...lines, ''].join('\n'));
          // The whole loop runs pinned: the shell and every GDAL process on the same core.
          ms = (await run('sh', [script], { pin: true, timeoutMs: 3_600_000 })).wallMs;
          outputs['gdal-cli'] = windows.map((w) => join(dir, outName(w)));
          break;
        }
        case 'gdal-warm': {
          const spec = {
            scene,
            windows: windows.map((w) => ({ x: w.x, y: w.y, width: w.width, height: w.height, out: join(dir, outName(w)) })),
            noDataIn: SCENE.noData,
            noDataOut: tiling.noData,
            blockSize: tiling.blockSize,
            level: DEFLATE_LEVEL,
          };
          ms = (await runGdalScript<{ elapsedMs: number }>(g, 'warm_ndvi.py', spec, true)).elapsedMs;
          outputs['gdal-warm'] = spec.windows.map((w) => w.out);
          break;
        }
        default: {
          const never: never = who;
          throw new Error(`unknown contender ${String(never)}`);
        }
      }
      tilesPerSec[who].push(windows.length / (ms / 1000));
      log(`  rep ${rep + 1}/${cfg.reps} ${who}: ${fmt(windows.length / (ms / 1000))} tiles/s`);
    }
    if (rep === 0) {
      // Same pixels, same layout, valid COGs: otherwise the race compares different work.
      const pairs = windows.flatMap((w, i) => [
        { name: `gdal-cli/${outName(w)}`, reference: outputs['gdal-cli']?.[i], candidate: outputs.tessera?.[i] },
        { name: `gdal-warm/${outName(w)}`, reference: outputs['gdal-warm']?.[i], candidate: outputs.tessera?.[i] },
      ]);
      verification = (await runGdalScript<{ pairs: ComparePair[] }>(g, 'compare_tiles.py', { pairs })).pairs;
      for (const p of verification) {
        const problems = [
          ...(p.layoutDiffers.length ? [`layout differs (${p.layoutDiffers.join(', ')})`] : []),
          ...(p.maskMismatches !== 0 ? [`${p.maskMismatches} pixels differ in nodata`] : []),
          ...(p.maxAbsDiff > PIXEL_TOLERANCE ? [`pixels differ by up to ${p.maxAbsDiff}`] : []),
          ...(p.cogErrors.candidate.length ? [`Tessera's tile is not a valid COG: ${p.cogErrors.candidate.join('; ')}`] : []),
          ...(p.cogErrors.reference.length ? [`GDAL's tile is not a valid COG: ${p.cogErrors.reference.join('; ')}`] : []),
        ];
        if (problems.length) broken.push(`Tessera vs ${p.name}: ${problems.join('; ')}`);
      }
    }
  }

  const ratiosCli = tilesPerSec.tessera.map((t, i) => t / (tilesPerSec['gdal-cli'][i] as number));
  const ratiosWarm = tilesPerSec.tessera.map((t, i) => t / (tilesPerSec['gdal-warm'][i] as number));
  const tess = summarize(tilesPerSec.tessera);
  const cli = summarize(tilesPerSec['gdal-cli']);
  const warm = summarize(tilesPerSec['gdal-warm']);
  const rCli = summarize(ratiosCli);
  const rWarm = summarize(ratiosWarm);
  const maxDiff = Math.max(0, ...verification.map((p) => p.maxAbsDiff));
  const masks = verification.reduce((n, p) => n + p.maskMismatches, 0);
  const cogErrors = verification.reduce((n, p) => n + p.cogErrors.candidate.length + p.cogErrors.reference.length, 0);
  const pinNote = canPin() ? 'one core each (taskset -c 0)' : 'unpinned (no taskset)';
  const rows: Row[] = [
    {
      section: SECTION,
      metric: 'tiles/s, Tessera vs GDAL command line',
      backend: 'local',
      target: '>= 1.0x',
      measured: `${fmtSummary(tess, 'tiles/s')} vs ${fmtSummary(cli, 'tiles/s')}`,
      ratio: `${times(rCli.median)} (${times(rCli.min)}-${times(rCli.max)})`,
      status: rCli.median >= 1 ? 'PASS' : 'MISS',
      note:
        rCli.median >= 1
          ? undefined
          : 'the command-line pipeline was faster per tile than the warm Tessera worker; see the per-tile breakdown in reports/bench.json',
    },
    {
      section: SECTION,
      metric: 'tiles/s, Tessera vs GDAL library (warm, one process)',
      backend: 'local',
      target: 'context',
      measured: `${fmtSummary(tess, 'tiles/s')} vs ${fmtSummary(warm, 'tiles/s')}`,
      ratio: `${times(rWarm.median)} (${times(rWarm.min)}-${times(rWarm.max)})`,
      status: 'INFO',
      note:
        `GDAL's Python bindings in one warm process, no start-up per tile: the strongest GDAL baseline. ` +
        (rWarm.median < 1
          ? `Tessera is ${times(1 / rWarm.median)} slower here. The gate section's stage timings show where a Tessera tile goes: ` +
            "mostly the COG encode (DEFLATE in node:zlib and the floating-point predictor in JavaScript; Debian's GDAL 3.6 links libdeflate)."
          : 'Tessera keeps up with it.'),
    },
    {
      section: SECTION,
      metric: 'outputs match GDAL',
      backend: 'local',
      target: `same layout and nodata mask, |diff| <= ${PIXEL_TOLERANCE}, valid COGs`,
      measured: `${verification.length / 2} tiles x 2 baselines: max |diff| ${maxDiff}, ${masks} mask mismatches, ${cogErrors} COG errors`,
      ratio: '-',
      status: broken.length === 0 ? 'PASS' : 'MISS',
      note: broken.length === 0 ? undefined : `the comparison is not fair while outputs differ: ${broken.slice(0, 3).join(' | ')}`,
    },
  ];
  return {
    name: 'throughput',
    rows,
    broken,
    details: {
      sceneSize: cfg.sceneSize,
      tilePx: tiling.tilePx,
      blockSize: tiling.blockSize,
      windows: windows.map((w) => `${w.row}_${w.col}`),
      reps: cfg.reps,
      pinning: pinNote,
      tilesPerSec,
      ratioVsCli: ratiosCli,
      ratioVsWarm: ratiosWarm,
      tesseraPerTileMs: summarize(tesseraPerTileMs),
      verification,
    },
    durationSec: (performance.now() - started) / 1000,
  };
}
