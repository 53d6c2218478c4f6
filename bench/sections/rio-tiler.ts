import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import type { Resampling } from '../../shared/domain/tiling-params.js';
import { canPin, runWorker } from '../lib/child.js';
import { benchParams } from '../lib/jobs.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { ensureRioTiler, runRioTilerScript } from '../lib/rio-tiler.js';
import { BENCH_DIR, ensureScene, SCENE } from '../lib/scenes.js';
import { fmt, fmtSummary, type Summary, summarize } from '../lib/stats.js';
import type { ReprojectWorkerInput, ReprojectWorkerOutput } from '../workers/reproject.js';

export interface RioTilerConfig {
  /** Side of the square synthetic source scene (EPSG:32631, 10 m), in pixels. */
  readonly sceneSize: number;
  /** Tiles per repetition, spread over the tile matrix set's tiles inside the scene. */
  readonly tiles: number;
  readonly reps: number;
  /** WebMercatorQuad zoom, 256 px tiles. */
  readonly zoom: number;
  readonly resampling: Resampling;
}

/** The row: WebMercatorQuad, 256 px, GTiff DEFLATE 6. */
const TMS = 'WebMercatorQuad';
const TILE_PX = 256;
const LEVEL = 6;
/** Tessera's time per tile against rio-tiler's: at least as fast. */
const TARGET = 1.0;
/** Tessera's default band math, (B08 - B04) / (B08 + B04), in rio-tiler's band names (b1 = B04, b2 = B08). */
const RIO_EXPRESSION = '(b2-b1)/(b2+b1)';
/** Tiles of the first repetition written by both and compared pixel for pixel. */
const COMPARED = 8;
/**
 * What the compared tiles must share: the nodata mask on 99.5 % of the pixels (section 7's threshold against GDAL's
 * per-tile warps); 99 % of the pixels valid in both within {@link P99_DIFF} of each other; with nearest, the same value
 * on {@link NEAREST_IDENTICAL} of them. Not every value: Tessera's tile is a window of the scene grid's warp, whose
 * approximate transformer (GDAL's 0.125 px, as gdalwarp of the whole grid) runs along the grid's whole row, while
 * rio-tiler warps each tile alone (a WarpedVRT of the tile), so a few per cent of the sample points land on the other
 * side of a source pixel's edge and take its neighbour (measured: 92 % to 98.5 % identical, the 99th percentile of
 * |difference| 0.0017 to 0.0095 NDVI; an exact transform on rio-tiler's side moves its agreement by 0.3 points, so
 * the difference is mostly the approximation along the whole row on Tessera's side).
 */
const MASKS_AGREE = 0.995;
const P99_DIFF = 0.02;
const NEAREST_IDENTICAL = 0.9;
/** Reported: the share of values within 1e-3 (section 7's tolerance against gdalwarp of the whole grid). */
const TOLERANCE = 1e-3;

interface RioRun {
  readonly elapsedMs: number;
  readonly cpuMs: number;
  readonly tiles: number;
  readonly bytes: number[];
  readonly perTileMs: number[];
  /** Reader.tile (the warp of both bands and the expression) per tile. */
  readonly tileMs: number[];
  /** The float32 fill and the GTiff encode per tile. */
  readonly encodeMs: number[];
  readonly tileSet: string[];
  /** Tiles of the set rio-tiler answers TileOutsideBounds for (TiTiler's 404). */
  readonly outsideFootprint: string[];
  readonly versions: Record<string, string>;
}

interface TileAgreement {
  readonly name: string;
  readonly layoutDiffers: string[];
  readonly pixels: number;
  readonly maskMismatches: number;
  readonly validBoth: number;
  readonly identical: number;
  readonly maxAbsDiff: number;
  readonly meanAbsDiff: number;
  /** The 99th percentile of |difference| over the pixels valid in both. */
  readonly p99AbsDiff: number;
  readonly withinTolerance: number;
}

/** `{z}-{x}-{y}` as the reproject worker names a tile matrix set's tile. */
function parseName(name: string): { z: number; x: number; y: number } {
  const [z, x, y] = name.split('-').map(Number) as [number, number, number];
  return { z, x, y };
}

/**
 * Issue 30 target 3: reprojected NDVI tiles, Tessera against rio-tiler from PyPI (the library behind TiTiler), per
 * tile, warm, one process each, both pinned to the same core, the same tiles, in alternating order.
 *
 * - Tessera (bench/workers/reproject.ts): renderTile on the jobs fanOutScene makes for WebMercatorQuad at 256 px,
 *   float32 COG tiles with DEFLATE 6 (one 256 px block, floating-point predictor, nodata -9999), gates left out.
 * - rio-tiler (bench/gdal/rio_tiler_ndvi.py): the scene opened once; per tile Reader.tile with the NDVI expression,
 *   then the same tile as a GTiff (float32, nodata -9999, one 256 px DEFLATE 6 block, PREDICTOR=3).
 *
 * Both skip one untimed warm-up tile first. Checked on the first repetition: rio-tiler's tile set at the zoom is
 * Tessera's fan-out, and the first tiles of both have the same layout, masks and (by the thresholds above) values.
 */
export async function rioTiler(cfg: RioTilerConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const loadAtStart = loadavg().map((l) => Math.round(l * 100) / 100);
  const cached = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const rio = await ensureRioTiler(log);
  log(`  rio-tiler ${rio.versions['rio-tiler']} (rasterio ${rio.versions.rasterio}, numpy ${rio.versions.numpy})`);
  // The default profile's float32, nodata and 256 px blocks, at the DEFLATE 6 (the default profile is DEFLATE 9).
  const defaults = DEFAULT_PARAMS.output as { nodata: number; blocksize: number };
  const output = { ...defaults, compression: 'DEFLATE', level: LEVEL };
  const params = benchParams(`rio-tiler-${cfg.resampling}`, {
    tile_px: TILE_PX,
    tms: TMS,
    zoom: cfg.zoom,
    resampling: cfg.resampling,
    output,
  });
  const noData = output.nodata;
  const blockSize = output.blocksize;
  const broken: string[] = [];
  const tessera: ReprojectWorkerOutput[] = [];
  const rioRuns: RioRun[] = [];
  let agreement: TileAgreement[] = [];
  let setCheck = { tessera: 0, rioTiler: 0, outsideFootprint: 0, missing: [] as string[], extra: [] as string[] };
  // Its own scratch folder (as the pyramid section's): another run's clearRuns() must not delete it mid-run.
  const scratch = join(BENCH_DIR, `rio-tiler-${process.pid}`);
  try {
    // A private copy of the scene (its own inode): Tessera's local store links the file it imports, which changes the
    // inode's ctime, and a pinned read that sees the ctime move refuses the bytes (SourceChangedError). Another benchmark
    // importing the cached scene at the same time would otherwise break this one.
    mkdirSync(scratch, { recursive: true });
    const scene = join(scratch, 'scene.tif');
    copyFileSync(cached, scene);
    // rio-tiler renders the tiles Tessera's jobs name (the same every repetition: the same scene and parameters), so
    // the first repetition runs Tessera first to learn them; after that the order alternates.
    let names: string[] | undefined;
    for (let rep = 0; rep < cfg.reps; rep++) {
      const dir = join(scratch, `rep-${rep}`);
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      for (const who of rep % 2 === 0 ? (['tessera', 'rio-tiler'] as const) : (['rio-tiler', 'tessera'] as const)) {
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
          names ??= r.tiles.map((t) => t.name);
          log(
            `  rep ${rep + 1}, tessera: ${r.tiles.length} tiles in ${fmt(r.elapsedMs)} ms (CPU ${fmt(r.cpuMs)} ms); ` +
              `load average ${loadavg()
                .map((l) => l.toFixed(2))
                .join(' ')}`,
          );
          continue;
        }
        const tiles = (names as string[]).map((name, k) => ({
          ...parseName(name),
          ...(rep === 0 && k < COMPARED ? { out: join(dir, `rio-${name}.tif`) } : {}),
        }));
        const first = tiles[0] as { x: number; y: number };
        const spec = {
          mode: 'render',
          scene,
          zoom: cfg.zoom,
          expression: RIO_EXPRESSION,
          resampling: cfg.resampling,
          noData,
          level: LEVEL,
          blockSize,
          warmup: [first.x, first.y],
          tiles,
        };
        const r = await runRioTilerScript<RioRun>(rio, 'rio_tiler_ndvi.py', spec, true);
        rioRuns.push(r);
        log(
          `  rep ${rep + 1}, rio-tiler: ${r.tiles} tiles in ${fmt(r.elapsedMs)} ms (CPU ${fmt(r.cpuMs)} ms); ` +
            `load average ${loadavg()
              .map((l) => l.toFixed(2))
              .join(' ')}`,
        );
      }
      if (rep === 0) {
        const t = tessera[0] as ReprojectWorkerOutput;
        const r = rioRuns[0] as RioRun;
        const ours = new Set(t.gridTileNames);
        const theirs = new Set(r.tileSet);
        setCheck = {
          tessera: ours.size,
          rioTiler: theirs.size,
          outsideFootprint: r.outsideFootprint.length,
          missing: [...ours].filter((n) => !theirs.has(n)),
          extra: [...theirs].filter((n) => !ours.has(n)),
        };
        if (setCheck.missing.length || setCheck.extra.length || ours.size === 0)
          broken.push(
            `rio-tiler serves another tile set at z${cfg.zoom} than Tessera's fan-out: ${setCheck.missing.length} of Tessera's ` +
              `${ours.size} missing (${setCheck.missing.slice(0, 3).join(', ')}), ${setCheck.extra.length} more (${setCheck.extra.slice(0, 3).join(', ')})`,
          );
        log(
          `  tile set at z${cfg.zoom}: tessera ${ours.size}, rio-tiler ${theirs.size} (${setCheck.outsideFootprint} of them TileOutsideBounds, ` +
            `written all nodata by Tessera), equal: ${setCheck.missing.length + setCheck.extra.length === 0}`,
        );
        const pairs = t.tiles
          .filter((x) => x.out)
          .map((x) => ({ name: x.name, reference: x.out as string, candidate: join(dir, `rio-${x.name}.tif`) }));
        const compared = await runRioTilerScript<{ pairs: TileAgreement[] }>(rio, 'rio_tiler_ndvi.py', {
          mode: 'compare',
          pairs,
          noData,
          tolerance: TOLERANCE,
        });
        agreement = compared.pairs;
        broken.push(...checkAgreement(agreement, cfg.resampling));
        for (const a of agreement)
          log(
            `  tile ${a.name}: layout ${a.layoutDiffers.join(',') || 'same'}, masks agree ${fmt((100 * (a.pixels - a.maskMismatches)) / a.pixels)} %, ` +
              `identical ${fmt((100 * a.identical) / Math.max(1, a.validBoth))} %, within ${TOLERANCE} ${fmt((100 * a.withinTolerance) / Math.max(1, a.validBoth))} %, ` +
              `p99 |diff| ${fmt(a.p99AbsDiff)}, max |diff| ${fmt(a.maxAbsDiff)}`,
          );
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const loadAtEnd = loadavg().map((l) => Math.round(l * 100) / 100);
  return {
    name: 'rio-tiler',
    rows: rioTilerRows({ cfg, tessera, rio: rioRuns, agreement, loadAtStart, loadAtEnd }),
    broken,
    details: {
      tms: TMS,
      zoom: cfg.zoom,
      tilePx: TILE_PX,
      level: LEVEL,
      resampling: cfg.resampling,
      scene: `${cfg.sceneSize}^2 EPSG:${SCENE.epsg}`,
      rioTiler: rio.versions,
      gdal: rioRuns[0]?.versions.gdal,
      loadAverage: { start: loadAtStart, end: loadAtEnd },
      tileSet: setCheck,
      agreement,
      tessera: tessera.map(({ tiles, gridTileNames, ...rest }) => ({ ...rest, tiles: tiles.map((t) => t.name) })),
      rio: rioRuns.map(({ tileSet, outsideFootprint, ...rest }) => rest),
    },
    durationSec: (performance.now() - started) / 1000,
  };
}

/** What is wrong with the compared tiles, by the thresholds above (empty: they are the same tiles). */
function checkAgreement(agreement: readonly TileAgreement[], resampling: Resampling): string[] {
  const broken: string[] = [];
  if (agreement.length === 0) broken.push('no tiles were compared');
  for (const a of agreement) {
    const masks = (a.pixels - a.maskMismatches) / a.pixels;
    const identical = a.identical / Math.max(1, a.validBoth);
    const nearestOk = resampling !== 'nearest' || identical >= NEAREST_IDENTICAL;
    if (a.layoutDiffers.length || masks < MASKS_AGREE || a.p99AbsDiff > P99_DIFF || !nearestOk || a.validBoth === 0)
      broken.push(
        `tile ${a.name}: Tessera's and rio-tiler's differ (layout: ${a.layoutDiffers.join(',') || 'same'}, masks agree on ` +
          `${fmt(100 * masks)} %, identical ${fmt(100 * identical)} % and p99 |difference| ${fmt(a.p99AbsDiff)} of ${a.validBoth} pixels valid in both)`,
      );
  }
  return broken;
}

interface RioTilerMeasurements {
  readonly cfg: RioTilerConfig;
  readonly tessera: readonly ReprojectWorkerOutput[];
  readonly rio: readonly RioRun[];
  readonly agreement: readonly TileAgreement[];
  readonly loadAtStart: readonly number[];
  readonly loadAtEnd: readonly number[];
}

function rioTilerRows(m: RioTilerMeasurements): Row[] {
  const { cfg, tessera, rio } = m;
  const range = (s: Summary) => (s.n > 1 ? `${times(s.median)} (${times(s.min)}-${times(s.max)})` : times(s.median));
  const perTile = (ms: number, tiles: number) => ms / tiles;
  const tWall = summarize(tessera.map((r) => perTile(r.elapsedMs, r.tiles.length)));
  const rWall = summarize(rio.map((r) => perTile(r.elapsedMs, r.tiles)));
  const tCpu = summarize(tessera.map((r) => perTile(r.cpuMs, r.tiles.length)));
  const rCpu = summarize(rio.map((r) => perTile(r.cpuMs, r.tiles)));
  // Per repetition: rio-tiler's time per tile over Tessera's (the same tiles, one after the other on the same core).
  const wallRatio = summarize(
    tessera.map((t, i) => perTile((rio[i] as RioRun).elapsedMs, (rio[i] as RioRun).tiles) / perTile(t.elapsedMs, t.tiles.length)),
  );
  const cpuRatio = summarize(
    tessera.map((t, i) => perTile((rio[i] as RioRun).cpuMs, (rio[i] as RioRun).tiles) / perTile(t.cpuMs, t.tiles.length)),
  );
  const step = (values: number[]) => fmt(summarize(values).median);
  const load = `load average ${m.loadAtStart.join(' / ')} at the start, ${m.loadAtEnd.join(' / ')} at the end`;
  const checked = m.agreement;
  const pct = (f: (a: TileAgreement) => number) => fmt(Math.min(...checked.map(f)) * 100);
  const what = `${TMS} z${cfg.zoom}, ${TILE_PX} px, ${cfg.resampling}, NDVI -> float32 GTiff DEFLATE ${LEVEL}`;
  return [
    {
      section: '7 reproject',
      metric: `reprojected NDVI tiles vs rio-tiler (warm, one core), time per tile: ${what}`,
      backend: 'local',
      target: `>= ${fmt(TARGET)}x`,
      measured: `tessera ${fmtSummary(tWall, 'ms')}, rio-tiler ${fmtSummary(rWall, 'ms')}`,
      ratio: range(wallRatio),
      status: wallRatio.median >= TARGET ? 'PASS' : 'MISS',
      note:
        `rio-tiler's time per tile / Tessera's, per repetition (median, range over ${wallRatio.n}); ${cfg.tiles} tiles each; ` +
        `${canPin() ? 'both pinned to core 0' : 'taskset unavailable: not pinned'}; ${load}. ` +
        (checked.length
          ? `Checked on ${checked.length} tiles: the same layout, masks agree >= ${pct((a) => (a.pixels - a.maskMismatches) / a.pixels)} %, ` +
            `identical >= ${pct((a) => a.identical / Math.max(1, a.validBoth))} %, within ${TOLERANCE} >= ${pct((a) => a.withinTolerance / Math.max(1, a.validBoth))} %, ` +
            `p99 |difference| <= ${fmt(Math.max(...checked.map((a) => a.p99AbsDiff)))} (each warp's own transform approximation: docs/benchmarks.md, section 7)`
          : 'no tiles compared'),
    },
    {
      section: '7 reproject',
      metric: `CPU time per reprojected NDVI tile vs rio-tiler, ${cfg.resampling}`,
      backend: 'local',
      target: 'context',
      measured: `tessera ${fmtSummary(tCpu, 'ms')}, rio-tiler ${fmtSummary(rCpu, 'ms')}`,
      ratio: range(cpuRatio),
      status: 'INFO',
      note: "rio-tiler's CPU / Tessera's per repetition: the race with whatever else the core ran taken out",
    },
    {
      section: '7 reproject',
      metric: `where a ${TILE_PX} px reprojected NDVI tile goes, ${cfg.resampling}: Tessera (renderTile's steps, untimed) and rio-tiler (timed loop)`,
      backend: 'local',
      target: 'context',
      measured:
        `tessera read + resample ${step(tessera.flatMap((r) => r.profile.map((p) => p.readMs)))} ms, band math ` +
        `${step(tessera.flatMap((r) => r.profile.map((p) => p.mathMs)))} ms, COG encode ${step(tessera.flatMap((r) => r.profile.map((p) => p.encodeMs)))} ms; ` +
        `rio-tiler Reader.tile (warp + expression) ${step(rio.flatMap((r) => r.tileMs))} ms, GTiff encode ${step(rio.flatMap((r) => r.encodeMs))} ms`,
      ratio: '-',
      status: 'INFO',
      note: 'medians over every tile of every repetition; where Tessera’s CPU goes in detail: docs/benchmarks.md, section 7',
    },
  ];
}
