import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { MainJobSummary } from '../../functions/local/main-job.js';
import { COLORMAP_HEX } from '../../shared/raster/colormaps.generated.js';
import { REPO_ROOT } from '../lib/child.js';
import { BenchSetupError, type Gdal, gdalScript } from '../lib/gdal.js';
import { measureTree, type TreeCost } from '../lib/measure.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { ensureRioTiler } from '../lib/rio-tiler.js';
import { BENCH_DIR, ensureScene, SCENE } from '../lib/scenes.js';
import { fmt, fmtSummary, type Summary, summarize } from '../lib/stats.js';

export interface PyramidConfig {
  /** Side of the square synthetic scene (two uint16 bands, 10 m, EPSG:32631), in pixels. */
  readonly sceneSize: number;
  /** The zoom range of WebMercatorQuad, 256 px tiles. */
  readonly minZoom: number;
  readonly maxZoom: number;
  readonly reps: number;
}

/** Processes on every side: the issue's `gdal2tiles.py --processes 2`, Tessera's `--workers 2`, two rio-tiler processes. */
const PROCESSES = 2;
/** Tessera's wall time against the faster baseline's: at least as fast. */
const TARGET = 1.0;
/** NDVI's range and its usual colormap (docs/web-maps.md). */
const RESCALE = [-1, 1] as const;
const COLORMAP = 'rdylgn';
/** Tessera's default band math, (B08 - B04) / (B08 + B04), in rio-tiler's band names (b1 = B04, b2 = B08). */
const RIO_EXPRESSION = '(b2-b1)/(b2+b1)';
/**
 * Share of pixels whose alpha must agree between two contenders' tile of the same z/x/y: they cover the same ground.
 * Not 1: each samples the nearest pixel at its own points, so the footprint's edge moves by a pixel here and there, and
 * a lower zoom's parent reduces its children each its own way (measured: 98.6 % to 100 %).
 */
const ALPHA_AGREE = 0.95;

const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
const CLI = join(REPO_ROOT, 'cli/main.ts');

type Contender = 'tessera' | 'gdal2tiles' | 'rio-tiler';
const CONTENDERS: readonly Contender[] = ['tessera', 'gdal2tiles', 'rio-tiler'];

export interface PyramidRun {
  readonly contender: Contender;
  readonly rep: number;
  readonly tiles: number;
  readonly wallMs: number;
  readonly cpuSec: number;
  readonly peakTreeRssMb: number;
  /** gdal2tiles: the colour-mapped NDVI raster written first (bench/gdal/ndvi_rgba.py), included in wallMs and cpuSec. */
  readonly prepMs?: number;
  /** rio-tiler: the warm loop alone (pool start to last tile), without the interpreter's start and imports. */
  readonly loopMs?: number;
}

/** gdal2tiles from Debian's GDAL (python3-gdal ships it as gdal2tiles.py; newer packagings as gdal2tiles). */
function gdal2tiles(): string {
  for (const name of ['gdal2tiles.py', 'gdal2tiles']) {
    const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  throw new BenchSetupError("gdal2tiles is not on the PATH: install Debian's python3-gdal (apt-get install -y gdal-bin python3-gdal)");
}

/** Every `z/x/y` under a folder of `{z}/{x}/{y}.png` tiles. */
function listTiles(root: string): Set<string> {
  const out = new Set<string>();
  if (!existsSync(root)) return out;
  for (const z of readdirSync(root)) {
    if (!/^\d+$/.test(z)) continue;
    for (const x of readdirSync(join(root, z))) {
      if (!/^\d+$/.test(x)) continue;
      for (const f of readdirSync(join(root, z, x))) {
        const m = /^(\d+)\.png$/.exec(f);
        if (m) out.add(`${z}/${x}/${m[1]}`);
      }
    }
  }
  return out;
}

function perZoom(tiles: ReadonlySet<string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of tiles) {
    const z = t.split('/', 1)[0] as string;
    out[z] = (out[z] ?? 0) + 1;
  }
  return out;
}

const lastJson = <T>(cost: TreeCost): T => JSON.parse(cost.stdout.trim().split('\n').pop() ?? '{}') as T;

/**
 * Two contenders' PNGs of one tile, decoded by sharp to RGBA: the share of pixels with the same alpha, of identical
 * pixels (two transparent ones are identical), and the mean |difference| of the colour channels where both are opaque.
 */
async function agreement(a: string, b: string): Promise<{ alphaAgree: number; identical: number; meanColourDiff: number }> {
  const sharp = (await import('sharp')).default;
  const read = (p: string) => sharp(p).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const [x, y] = await Promise.all([read(a), read(b)]);
  if (x.info.width !== y.info.width || x.info.height !== y.info.height) return { alphaAgree: 0, identical: 0, meanColourDiff: 255 };
  const n = x.info.width * x.info.height;
  let alpha = 0;
  let same = 0;
  let opaque = 0;
  let diff = 0;
  for (let k = 0; k < n; k++) {
    const o = k * 4;
    if (x.data[o + 3] === y.data[o + 3]) alpha++;
    // Two transparent pixels are the same pixel whatever colour they carry (rio-tiler keeps the colormap's).
    if (x.data.readUInt32LE(o) === y.data.readUInt32LE(o) || (x.data[o + 3] === 0 && y.data[o + 3] === 0)) same++;
    if (x.data[o + 3] === 255 && y.data[o + 3] === 255) {
      opaque++;
      for (let c = 0; c < 3; c++) diff += Math.abs((x.data[o + c] as number) - (y.data[o + c] as number));
    }
  }
  return { alphaAgree: alpha / n, identical: same / n, meanColourDiff: opaque === 0 ? 0 : diff / (3 * opaque) };
}

/**
 * Issue 26 section 7: a whole scene to a web map's PNG pyramid, Tessera against the two tools a user would
 * otherwise pick, on the same cores, in rotating order.
 *
 * - **Tessera**: `tessera run --tms WebMercatorQuad --zoom MIN-MAX --tile 256 --format png --rescale=-1,1
 *   --colormap rdylgn --workers 2`, the real run path: staging, fan-out, every tile of every zoom a job (claimed,
 *   written create-only, committed; the highest zoom read from the scene, each lower one built from its four
 *   children), the mosaic and what a rendered scene gets beside it (TileJSON, quicklook, STAC Item).
 * - **gdal2tiles** (Debian's GDAL): it has no band math, rescale or colormap, so the scene is first rendered
 *   to an 8-bit RGBA raster by bench/gdal/ndvi_rgba.py (the same NDVI, levels and 256-entry colormap, two
 *   processes), counted in its total; then `gdal2tiles.py --processes 2 -z MIN-MAX --xyz -r near -w none`.
 * - **rio-tiler** (PyPI, the library behind TiTiler): bench/gdal/rio_tiler_pyramid.py, two warm processes
 *   rendering every tile of the range in a loop: Reader.tile with the NDVI expression, rescale, PNG with the
 *   same colormap.
 *
 * Nearest everywhere (Tessera's and rio-tiler's default; gdal2tiles' `-r near`). The three tile sets are
 * compared (every z/x/y), and a few tiles of each pair pixel by pixel for their footprint (alpha).
 */
export async function pyramid(cfg: PyramidConfig, gdal: Gdal, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const loadAtStart = loadavg().map((l) => Math.round(l * 100) / 100);
  const broken: string[] = [];
  const zooms = `${cfg.minZoom}-${cfg.maxZoom}`;
  const scene = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const rio = await ensureRioTiler(log);
  const g2t = gdal2tiles();
  log(`  rio-tiler ${rio.versions['rio-tiler']} (rasterio ${rio.versions.rasterio}); ${g2t}`);
  // Its own scratch folder (as the scaling section's): another run's clearRuns() must not delete it mid-run.
  const scratch = join(BENCH_DIR, `pyramid-${process.pid}`);
  const fresh = (name: string): string => {
    const dir = join(scratch, name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  const runs: PyramidRun[] = [];
  const roots: Partial<Record<Contender, string>> = {};
  let sameSets = false;
  try {
    for (let rep = 0; rep < cfg.reps; rep++) {
      const order = [...CONTENDERS.slice(rep % 3), ...CONTENDERS.slice(0, rep % 3)];
      for (const contender of order) {
        const dir = fresh(contender);
        if (contender === 'tessera') {
          const command = [
            process.execPath,
            ...['--import', TSX_LOADER, CLI, 'run', '--scene', scene, '--band', 'B04=1', '--band', 'B08=2'],
            ...['--tms', 'WebMercatorQuad', '--zoom', zooms, '--tile', '256'],
            ...['--format', 'png', `--rescale=${RESCALE.join(',')}`, '--colormap', COLORMAP],
            ...['--workers', String(PROCESSES), '--json', '--fresh', '--dir', dir],
          ];
          const cost = await measureTree(gdal.python, command, { cwd: REPO_ROOT });
          const s = lastJson<MainJobSummary>(cost);
          if (!s.ok) broken.push(`tessera run: manifest ${s.manifestCount} / grid ${s.gridCount}, ${s.failed} failed`);
          roots.tessera = join(s.outputDir, 'tiles', s.sceneKey, 'WebMercatorQuad');
          runs.push({ contender, rep, tiles: s.pyramidTiles ?? s.tilesWritten, ...costOf(cost) });
        } else if (contender === 'gdal2tiles') {
          const spec = {
            scene,
            outDir: join(dir, 'prep'),
            processes: PROCESSES,
            rescale: RESCALE,
            colormapHex: COLORMAP_HEX[COLORMAP],
            noDataIn: SCENE.noData,
          };
          const prep = await measureTree(gdal.python, [gdal.python, gdalScript('ndvi_rgba.py'), JSON.stringify(spec)]);
          const { vrt } = lastJson<{ vrt: string }>(prep);
          const out = join(dir, 'tiles');
          const tiling = await measureTree(gdal.python, [
            g2t,
            ...['--processes', String(PROCESSES), '-z', zooms, '--xyz', '-r', 'near', '-w', 'none', '-q', vrt, out],
          ]);
          roots.gdal2tiles = out;
          // gdal2tiles prints no count: its folder is listed.
          runs.push({
            contender,
            rep,
            tiles: listTiles(out).size,
            wallMs: prep.wallMs + tiling.wallMs,
            cpuSec: prep.cpuSec + tiling.cpuSec,
            peakTreeRssMb: Math.max(prep.peakTreeRssMb, tiling.peakTreeRssMb),
            prepMs: prep.wallMs,
          });
          // The intermediate raster is the size of the scene's pixels x 4 bytes: gone before the next contender.
          rmSync(join(dir, 'prep'), { recursive: true, force: true });
        } else {
          const spec = {
            scene,
            outDir: join(dir, 'tiles'),
            processes: PROCESSES,
            minZoom: cfg.minZoom,
            maxZoom: cfg.maxZoom,
            expression: RIO_EXPRESSION,
            rescale: RESCALE,
            colormapHex: COLORMAP_HEX[COLORMAP],
          };
          const cost = await measureTree(gdal.python, [rio.python, gdalScript('rio_tiler_pyramid.py'), JSON.stringify(spec)]);
          const r = lastJson<{ tiles: number; renderMs: number; outsideFootprint: number }>(cost);
          roots['rio-tiler'] = spec.outDir;
          runs.push({ contender, rep, tiles: r.tiles, loopMs: r.renderMs, ...costOf(cost) });
        }
        const last = runs.at(-1) as PyramidRun;
        log(
          `  rep ${rep + 1}, ${contender}: ${last.tiles} tiles, wall ${fmt(last.wallMs / 1000)} s` +
            `${last.prepMs === undefined ? '' : ` (NDVI RGBA raster ${fmt(last.prepMs / 1000)} s of it)`}` +
            `${last.loopMs === undefined ? '' : ` (warm loop ${fmt(last.loopMs / 1000)} s of it)`}, CPU ${fmt(last.cpuSec)} s, ` +
            `peak RSS ${fmt(last.peakTreeRssMb)} MB; load average ${loadavg()
              .map((l) => l.toFixed(2))
              .join(' ')}`,
        );
      }
      // The first repetition's outputs are the ones checked: the same tile set, the same footprint.
      if (rep === 0) {
        const checked = await checkOutputs(roots, log);
        broken.push(...checked.broken);
        sameSets = checked.sameSets;
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const loadAtEnd = loadavg().map((l) => Math.round(l * 100) / 100);
  const ratios = ratiosOf(cfg, runs);
  return {
    name: 'pyramid',
    rows: pyramidRows({ cfg, runs, loadAtStart, loadAtEnd, sameSets }),
    broken,
    details: {
      processes: PROCESSES,
      zooms,
      sceneSize: cfg.sceneSize,
      loadAverage: { start: loadAtStart, end: loadAtEnd },
      rioTiler: rio.versions,
      gdal2tiles: g2t,
      sameSets,
      runs,
      ratios,
    },
    durationSec: (performance.now() - started) / 1000,
  };
}

/** What the section measured: everything its rows are made of. */
export interface PyramidMeasurements {
  readonly cfg: PyramidConfig;
  readonly runs: readonly PyramidRun[];
  readonly loadAtStart: readonly number[];
  readonly loadAtEnd: readonly number[];
  readonly sameSets: boolean;
}

/** Per repetition, a baseline's wall time over Tessera's in the same rotation: the faster one's, and each one's. */
function ratiosOf(cfg: PyramidConfig, runs: readonly PyramidRun[]) {
  const wallOf = (c: Contender, rep: number) => {
    const r = runs.find((x) => x.contender === c && x.rep === rep);
    if (r === undefined) throw new Error(`[bench] pyramid: no ${c} run in repetition ${rep + 1}`);
    return r.wallMs;
  };
  const perRep = (baseline: (rep: number) => number): Summary =>
    summarize(Array.from({ length: cfg.reps }, (_, rep) => baseline(rep) / wallOf('tessera', rep)));
  return {
    vsFaster: perRep((rep) => Math.min(wallOf('gdal2tiles', rep), wallOf('rio-tiler', rep))),
    vsGdal2tiles: perRep((rep) => wallOf('gdal2tiles', rep)),
    vsRioTiler: perRep((rep) => wallOf('rio-tiler', rep)),
  };
}

/** The section's rows from its measurements (exported so a report's rows can be rendered again from bench.json's details). */
export function pyramidRows(m: PyramidMeasurements): Row[] {
  const { cfg, runs } = m;
  const zooms = `${cfg.minZoom}-${cfg.maxZoom}`;
  const of = (c: Contender) => runs.filter((r) => r.contender === c);
  const wall = (c: Contender): Summary => summarize(of(c).map((r) => r.wallMs / 1000));
  const cpu = (c: Contender): Summary => summarize(of(c).map((r) => r.cpuSec));
  /** Cores busy on average over a run (its CPU time over its wall time), as the range over the repetitions. */
  const cores = (c: Contender): string => {
    const s = summarize(of(c).map((r) => r.cpuSec / (r.wallMs / 1000)));
    return s.n > 1 ? `${fmt(s.min, 2)}-${fmt(s.max, 2)} cores` : `${fmt(s.median, 2)} cores`;
  };
  const { vsFaster, vsGdal2tiles, vsRioTiler } = ratiosOf(cfg, runs);
  const faster: Contender = wall('gdal2tiles').median <= wall('rio-tiler').median ? 'gdal2tiles' : 'rio-tiler';
  const range = (s: Summary) => (s.n > 1 ? `${times(s.median)} (${times(s.min)}-${times(s.max)})` : times(s.median));
  const counts = Object.fromEntries(CONTENDERS.map((c) => [c, of(c)[0]?.tiles ?? 0])) as Record<Contender, number>;
  const load = `load average ${m.loadAtStart.join(' / ')} at the start of the section, ${m.loadAtEnd.join(' / ')} at its end`;
  const scale = `${cfg.sceneSize}^2 x 2 bands -> PNG pyramid z${zooms} (${counts.tessera.toLocaleString('en-US')} tiles, NDVI, ${COLORMAP})`;
  const cpuRatio = Math.min(cpu('gdal2tiles').median, cpu('rio-tiler').median) / cpu('tessera').median;
  const whereCpuGoes = 'where its CPU goes: docs/benchmarks.md, section 9';
  return [
    {
      section: '9 pyramid',
      metric: `${scale} on ${PROCESSES} processes, wall time vs the faster baseline of each repetition (by median: ${faster})`,
      backend: 'local',
      target: `>= ${fmt(TARGET)}x`,
      measured:
        `tessera ${fmtSummary(wall('tessera'), 's')}; gdal2tiles ${fmtSummary(wall('gdal2tiles'), 's')} ` +
        `(its NDVI RGBA raster ${fmt(summarize(of('gdal2tiles').map((r) => (r.prepMs ?? 0) / 1000)).median)} s included); ` +
        `rio-tiler ${fmtSummary(wall('rio-tiler'), 's')}`,
      ratio: range(vsFaster),
      status: vsFaster.median >= TARGET ? 'PASS' : 'MISS',
      note:
        `per repetition the faster baseline's wall time / Tessera's, rotating order; ${load}` +
        (cpuRatio < 1
          ? `; Tessera spends more CPU than the lower baseline (the CPU row)${vsFaster.median >= TARGET ? ', and is ahead on wall time by keeping both cores busier' : ''}; ${whereCpuGoes}`
          : vsFaster.median >= TARGET
            ? ''
            : `; Tessera spends the least CPU, so the machine's load decided: run it again on a quieter machine`),
    },
    {
      section: '9 pyramid',
      metric: `${scale}, wall time vs gdal2tiles --processes ${PROCESSES} (Debian's GDAL)`,
      backend: 'local',
      target: 'context',
      measured: `tessera ${fmt(wall('tessera').median)} s, gdal2tiles ${fmt(wall('gdal2tiles').median)} s`,
      ratio: range(vsGdal2tiles),
      status: 'INFO',
      note: "gdal2tiles' total includes writing the colour-mapped NDVI raster it needs as input (it has no band math or colormap)",
    },
    {
      section: '9 pyramid',
      metric: `${scale}, wall time vs rio-tiler (${PROCESSES} warm processes, the same tiles in a loop)`,
      backend: 'local',
      target: 'context',
      measured:
        `tessera ${fmt(wall('tessera').median)} s, rio-tiler ${fmt(wall('rio-tiler').median)} s ` +
        `(its warm loop ${fmt(summarize(of('rio-tiler').map((r) => (r.loopMs ?? 0) / 1000)).median)} s)`,
      ratio: range(vsRioTiler),
      status: 'INFO',
      note: 'rio-tiler reads every tile from the scene (it has no internal overviews), as TiTiler does per request',
    },
    {
      section: '9 pyramid',
      metric: `${scale}, CPU time of every process (and cores busy on average)`,
      backend: 'local',
      target: 'context',
      measured:
        `tessera ${fmt(cpu('tessera').median)} s (${cores('tessera')}), gdal2tiles ${fmt(cpu('gdal2tiles').median)} s ` +
        `(${cores('gdal2tiles')}), rio-tiler ${fmt(cpu('rio-tiler').median)} s (${cores('rio-tiler')})`,
      ratio: times(cpuRatio),
      status: 'INFO',
      note:
        "the lower baseline's CPU time / Tessera's: what the work costs, whatever else the machine ran; cores busy = CPU / wall " +
        `(${PROCESSES} at most). ${cpuRatio < 1 ? `Tessera spends more; ${whereCpuGoes}` : 'Tessera spends the least'}`,
    },
    {
      section: '9 pyramid',
      metric: `tiles written, z${zooms}`,
      backend: 'local',
      target: 'the same z/x/y set',
      measured: `tessera ${counts.tessera}, gdal2tiles ${counts.gdal2tiles}, rio-tiler ${counts['rio-tiler']}`,
      ratio: '-',
      status: m.sameSets ? 'PASS' : 'MISS',
      note: 'every z/x/y of the first repetition compared; the footprint of a few tiles of each pair compared pixel by pixel',
    },
  ];
}

function costOf(c: TreeCost): Pick<PyramidRun, 'wallMs' | 'cpuSec' | 'peakTreeRssMb'> {
  return { wallMs: c.wallMs, cpuSec: c.cpuSec, peakTreeRssMb: c.peakTreeRssMb };
}

/**
 * The three outputs hold the same tiles: the same z/x/y set (per zoom counts logged), and for the first, middle and
 * last tile of the highest zoom and one of the lowest, the same footprint (alpha) on at least {@link ALPHA_AGREE} of
 * the pixels. Colours are not compared: gdal2tiles and rio-tiler sample the nearest pixel at other points, and
 * rio-tiler's rescale rounds differently (floor(v * 255) against matplotlib's floor(v * 256)).
 */
async function checkOutputs(
  roots: Partial<Record<Contender, string>>,
  log: (line: string) => void,
): Promise<{ broken: string[]; sameSets: boolean }> {
  const broken: string[] = [];
  const sets = Object.fromEntries(CONTENDERS.map((c) => [c, listTiles(roots[c] ?? '')])) as Record<Contender, Set<string>>;
  for (const c of CONTENDERS) log(`  ${c}: ${sets[c].size} tiles, per zoom ${JSON.stringify(perZoom(sets[c]))}`);
  for (const c of ['gdal2tiles', 'rio-tiler'] as const) {
    const missing = [...sets.tessera].filter((t) => !sets[c].has(t));
    const extra = [...sets[c]].filter((t) => !sets.tessera.has(t));
    if (missing.length || extra.length || sets.tessera.size === 0)
      broken.push(
        `${c} wrote another tile set than Tessera: ${missing.length} of Tessera's missing (${missing.slice(0, 3).join(', ')}), ` +
          `${extra.length} more (${extra.slice(0, 3).join(', ')})`,
      );
  }
  const ordered = [...sets.tessera].sort((a, b) => {
    const [za, xa, ya] = a.split('/').map(Number) as [number, number, number];
    const [zb, xb, yb] = b.split('/').map(Number) as [number, number, number];
    return za - zb || xa - xb || ya - yb;
  });
  const top = ordered.filter((t) => t.split('/', 1)[0] === ordered.at(-1)?.split('/', 1)[0]);
  const picks = [...new Set([top[0], top[Math.floor(top.length / 2)], top.at(-1), ordered[0]])].filter(
    (t): t is string => t !== undefined && sets.gdal2tiles.has(t) && sets['rio-tiler'].has(t),
  );
  for (const t of picks) {
    const tessera = join(roots.tessera as string, `${t}.png`);
    for (const c of ['gdal2tiles', 'rio-tiler'] as const) {
      const a = await agreement(tessera, join(roots[c] as string, `${t}.png`));
      log(
        `  tile ${t}, tessera vs ${c}: alpha agrees on ${fmt(a.alphaAgree * 100)} %, identical RGBA ${fmt(a.identical * 100)} %, ` +
          `mean |colour difference| ${fmt(a.meanColourDiff)} of 255 where both are opaque`,
      );
      if (a.alphaAgree < ALPHA_AGREE)
        broken.push(`tile ${t}: Tessera's and ${c}'s footprints differ (alpha agrees on ${fmt(a.alphaAgree * 100)} % of the pixels)`);
    }
  }
  return { broken, sameSets: broken.length === 0 };
}
