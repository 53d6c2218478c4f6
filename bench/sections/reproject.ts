import { join } from 'node:path';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import { type Resampling, tilingParams } from '../../shared/domain/tiling-params.js';
import { canPin, REPO_ROOT, run, runWorker } from '../lib/child.js';
import { type Gdal, runGdalScript } from '../lib/gdal.js';
import { benchParams } from '../lib/jobs.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { ensureScene, freshRunDir, SCENE } from '../lib/scenes.js';
import { fmt, fmtSummary, summarize } from '../lib/stats.js';
import type { ReprojectWorkerInput, ReprojectWorkerOutput } from '../workers/reproject.js';

export interface ReprojectConfig {
  /** Side of the square synthetic source scene (EPSG:32631, 10 m), in pixels. */
  readonly sceneSize: number;
  /** Tiles per repetition, spread over the tile matrix set's tiles inside the scene. */
  readonly tiles: number;
  readonly reps: number;
  /** WebMercatorQuad zoom; with 512 px tiles. */
  readonly zoom: number;
  readonly resamplings: readonly Resampling[];
}

/** The tile matrix set and tile size the section reprojects onto: web map tiles at 512 px (issue 14's `tile_px: 512`). */
const TMS = 'WebMercatorQuad';
const TILE_PX = 512;
/** Tiles written by both contenders and compared pixel for pixel, per resampling. */
const COMPARED = 3;
/** The agreement with gdalwarp (section 5): masks on 99.5% of pixels; bilinear and cubic within 1e-3 on 99%. */
const MASKS_AGREE = 0.995;
const WITHIN_TOLERANCE_PCT = 99;
const WARP_COMPARE = join(REPO_ROOT, 'test/support/gdal-warp-compare.py');
const STEP = { readMs: 'read + resample', mathMs: 'band math', encodeMs: 'COG encode' } as const;

/** What test/support/gdal-warp-compare.py prints (the fields read here). */
interface WarpAgreement {
  readonly reference: string;
  readonly validBoth: number;
  readonly identical: number;
  readonly identicalPct: number;
  readonly withinTolerancePct: number;
  readonly maxAbsDiff: number;
  readonly maskAgreePct: number;
}

/**
 * A Tessera tile against gdalwarp of the scene's bands onto the whole target grid, at the tile's window, then
 * the NDVI: the reference test/e2e/reproject-gdal.test.ts uses for mosaics. (GDAL's own per-tile warps, the
 * race's baseline, approximate the transform across the tile alone and so sample up to 0.125 px elsewhere.)
 */
async function warpAgreement(
  g: Gdal,
  tile: string,
  scene: string,
  resampling: Resampling,
  grid: ReprojectWorkerOutput['grid'],
): Promise<WarpAgreement> {
  const { stdout } = await run(g.python, [
    WARP_COMPARE,
    ...['--mosaic', tile, '--band', `B04=${scene}:1`, '--band', `B08=${scene}:2`],
    ...['--expression', '(B08 - B04) / (B08 + B04)', '--resampling', resampling],
    ...['--whole-grid', JSON.stringify({ geoTransform: grid.geoTransform, width: grid.width, height: grid.height })],
  ]);
  return JSON.parse(stdout) as WarpAgreement;
}

interface GdalRun {
  readonly elapsedMs: number;
  readonly cpuMs: number;
  readonly tiles: number;
  readonly bytes: number[];
}

interface ComparePair {
  name: string;
  layoutDiffers: string[];
  maskMismatches: number;
  maxAbsDiff: number;
  validPixels: number;
  cogErrors: { reference: string[]; candidate: string[] };
}

/**
 * Issue 14, section 6: reprojected tiles per second, Tessera against GDAL's library, warm, one process each,
 * pinned to the same core, on the same target grids (the tile matrix set's tiles fan-out makes), the same
 * resampling and the same output (the default profile: float32 COG, its codec, level and block size,
 * floating-point predictor, averaged overviews).
 *
 * - Tessera (bench/workers/reproject.ts): renderTile on the jobs fanOutScene makes, gates left out (the
 *   raster work against the raster work: section 3 prices the gates).
 * - GDAL (bench/gdal/reproject_tiles.py): per tile, gdalwarp of the scene's two bands to a MEM dataset on the
 *   tile's grid, the NDVI in numpy, the COG driver's CreateCopy to /vsimem.
 *
 * Alternating order per repetition. The first repetition's first tiles are checked with GDAL as the reader:
 * both contenders' tiles have the same layout and are COGs GDAL validates, their nodata masks agree on at
 * least 99.5% of pixels (bench/gdal/compare_tiles.py), and Tessera's pixels are gdalwarp's on the scene's
 * grid by the thresholds (test/support/gdal-warp-compare.py --whole-grid). The two contenders'
 * values are not required to be equal: each of GDAL's per-tile warps approximates the transform across that
 * tile alone (gdalwarp -et 0.125), Tessera's tiles are windows of the scene grid's warp, so sample points
 * differ by up to 0.125 px (nearest then picks another neighbour for a few per cent of pixels).
 */
export async function reproject(cfg: ReprojectConfig, g: Gdal, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const scene = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const broken: string[] = [];
  const rows: Row[] = [];
  const details: Record<string, unknown> = { tms: TMS, zoom: cfg.zoom, tilePx: TILE_PX, scene: `${cfg.sceneSize}^2 EPSG:${SCENE.epsg}` };
  const output = DEFAULT_PARAMS.output as { compression: string; blocksize: number; nodata: number };
  const level = tilingParams(DEFAULT_PARAMS).level;

  for (const resampling of cfg.resamplings) {
    const params = benchParams(`reproject-${resampling}`, { tile_px: TILE_PX, tms: TMS, zoom: cfg.zoom, resampling });
    const tessera: ReprojectWorkerOutput[] = [];
    const gdal: GdalRun[] = [];
    let pairs: { name: string; reference: string; candidate: string }[] = [];
    // GDAL warps onto the grids Tessera's jobs name (the same every repetition: the same scene and parameters), so
    // the first repetition runs Tessera first to learn them; after that the order alternates.
    let grids: ReprojectWorkerOutput['tiles'] | undefined;
    for (let rep = 0; rep < cfg.reps; rep++) {
      const dir = freshRunDir(`reproject-${resampling}-${rep}`);
      for (const who of rep % 2 === 0 ? (['tessera', 'gdal'] as const) : (['gdal', 'tessera'] as const)) {
        if (who === 'tessera') {
          const input: ReprojectWorkerInput = {
            dir: join(dir, 'tessera'),
            scenePath: scene,
            params,
            tiles: cfg.tiles,
            keep: rep === 0 ? COMPARED : 0,
            outDir: join(dir, 'tessera-tiles'),
          };
          const r = await runWorker<ReprojectWorkerOutput>('reproject', input, { pin: true, timeoutMs: 1_800_000 });
          tessera.push(r);
          grids ??= r.tiles;
          log(`  ${resampling} rep ${rep + 1}, tessera: ${r.tiles.length} tiles in ${fmt(r.elapsedMs)} ms (CPU ${fmt(r.cpuMs)} ms)`);
          continue;
        }
        const tiles = grids as ReprojectWorkerOutput['tiles'];
        const spec = {
          scene,
          dstSrs: `EPSG:${tiles[0]?.epsg}`,
          resampling,
          noDataIn: SCENE.noData,
          noDataOut: output.nodata,
          blockSize: output.blocksize,
          compression: output.compression,
          level,
          tiles: tiles.map((t) => ({
            geoTransform: t.geoTransform,
            width: t.width,
            height: t.height,
            ...(rep === 0 && t.out ? { out: join(dir, `gdal-${t.name}.tif`) } : {}),
          })),
        };
        const r = await runGdalScript<GdalRun>(g, 'reproject_tiles.py', spec, true);
        gdal.push(r);
        log(`  ${resampling} rep ${rep + 1}, gdal: ${r.tiles} tiles in ${fmt(r.elapsedMs)} ms (CPU ${fmt(r.cpuMs)} ms)`);
        if (rep === 0) {
          pairs = tiles
            .filter((t) => t.out)
            .map((t) => ({ name: t.name, reference: join(dir, `gdal-${t.name}.tif`), candidate: t.out as string }));
        }
      }
    }

    // --- the same tiles: the same layout (COGs GDAL validates), and Tessera's pixels are gdalwarp's
    const verification = pairs.length ? (await runGdalScript<{ pairs: ComparePair[] }>(g, 'compare_tiles.py', { pairs })).pairs : [];
    const pixels = TILE_PX * TILE_PX;
    for (const p of verification) {
      const cog = [...p.cogErrors.reference, ...p.cogErrors.candidate];
      if (p.layoutDiffers.length || p.maskMismatches > (1 - MASKS_AGREE) * pixels || cog.length) {
        broken.push(
          `${resampling} tile ${p.name}: Tessera's and GDAL's differ (layout: ${p.layoutDiffers.join(',') || 'same'}, ` +
            `mask mismatches ${p.maskMismatches} of ${pixels}, COG errors ${cog.join('; ') || 'none'})`,
        );
      }
    }
    if (verification.length === 0) broken.push(`${resampling}: no tiles were compared`);
    const whole = (tessera[0] as ReprojectWorkerOutput).grid;
    const agreement: (WarpAgreement & { name: string })[] = [];
    for (const t of (grids ?? []).filter((t) => t.out)) {
      const a = await warpAgreement(g, t.out as string, scene, resampling, whole);
      agreement.push({ name: t.name, ...a });
      const ok =
        a.maskAgreePct >= 100 * MASKS_AGREE &&
        (resampling === 'nearest' ? a.identical === a.validBoth : a.withinTolerancePct >= WITHIN_TOLERANCE_PCT);
      if (!ok) {
        broken.push(
          `${resampling} tile ${t.name}: Tessera's pixels are not gdalwarp's (${a.reference}): identical ${fmt(a.identicalPct)}%, ` +
            `within 1e-3 ${fmt(a.withinTolerancePct)}%, masks agree ${fmt(a.maskAgreePct)}%`,
        );
      }
    }

    const n = cfg.tiles;
    const tRate = summarize(tessera.map((r) => r.tiles.length / (r.elapsedMs / 1000)));
    const gRate = summarize(gdal.map((r) => r.tiles / (r.elapsedMs / 1000)));
    const ratios = summarize(tessera.map((t, i) => (gdal[i] as GdalRun).elapsedMs / t.elapsedMs));
    const tCpu = summarize(tessera.map((r) => r.cpuMs / r.tiles.length));
    const gCpu = summarize(gdal.map((r) => r.cpuMs / r.tiles));
    const worst = verification.reduce((m, p) => Math.max(m, p.maxAbsDiff), 0);
    const masks = verification.reduce((m, p) => m + p.maskMismatches, 0);
    const agreeing = (f: (a: WarpAgreement) => number) => fmt(Math.min(...agreement.map(f)));
    rows.push(
      {
        section: '7 reproject',
        metric: `reprojected tiles per second vs GDAL library (warm, one core): ${TMS} z${cfg.zoom}, ${TILE_PX} px, ${resampling}, 2 bands -> NDVI COG`,
        backend: 'local',
        target: 'context',
        measured: `tessera ${fmtSummary(tRate, 'tiles/s')}, GDAL ${fmtSummary(gRate, 'tiles/s')}`,
        ratio: times(ratios.median),
        status: 'INFO',
        note:
          `GDAL time / Tessera time per repetition (median of ${ratios.n}, range ${fmt(ratios.min)}-${fmt(ratios.max)}); ${n} tiles each; ` +
          `${canPin() ? 'both pinned to core 0' : 'taskset unavailable: not pinned'}; the issue names no target. ` +
          `Checked on ${agreement.length} tiles: Tessera's are gdalwarp's on the scene grid (identical >= ${agreeing((a) => a.identicalPct)}%, ` +
          `within 1e-3 >= ${agreeing((a) => a.withinTolerancePct)}%, masks >= ${agreeing((a) => a.maskAgreePct)}%); ` +
          `GDAL's per-tile warps against Tessera's tiles: max |diff| ${fmt(worst)}, ${masks} mask mismatches (each tile's own row approximation)`,
      },
      {
        section: '7 reproject',
        metric: `CPU time per reprojected tile, ${resampling}`,
        backend: 'local',
        target: 'context',
        measured: `tessera ${fmtSummary(tCpu, 'ms')}, GDAL ${fmtSummary(gCpu, 'ms')}`,
        ratio: times(gCpu.median / tCpu.median),
        status: 'INFO',
        note: 'GDAL CPU / Tessera CPU: the race with whatever else the core ran taken out',
      },
      {
        section: '7 reproject',
        metric: `where a reprojected Tessera tile goes, ${resampling} (renderTile's steps, untimed by the race)`,
        backend: 'local',
        target: 'context',
        measured: (['readMs', 'mathMs', 'encodeMs'] as const)
          .map((k) => `${STEP[k]} ${fmtSummary(summarize(tessera.flatMap((r) => r.profile.map((p) => p[k]))), 'ms')}`)
          .join(', '),
        ratio: '-',
        status: 'INFO',
        note: 'read + resample: the pinned window reads of both bands and their warp onto the tile (shared/raster/warp.ts)',
      },
    );
    details[resampling] = { tessera, gdal, verification, agreement };
  }
  return { name: 'reproject', rows, broken, details, durationSec: (performance.now() - started) / 1000 };
}
