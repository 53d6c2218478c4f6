import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import { tileGrid, type Window } from '../../shared/domain/tile-grid.js';
import { OUTPUT_LEVELS, tilingParams } from '../../shared/domain/tiling-params.js';
import { libdeflateCodec } from '../../shared/raster/libdeflate.js';
import { canPin, run, runWorker } from '../lib/child.js';
import type { Gdal } from '../lib/gdal.js';
import { runGdalScript } from '../lib/gdal.js';
import { benchParams, spreadWindows } from '../lib/jobs.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { ensureScene, freshRunDir, SCENE } from '../lib/scenes.js';
import { fmt, fmtSummary, type Summary, summarize } from '../lib/stats.js';
import type { MemoryReading } from '../workers/common.js';
import type { CodecProfile } from '../workers/tile-worker.js';

type Codec = 'DEFLATE' | 'ZSTD';

/** An output profile: the codec and its level; everything else (predictor 3, 256 px blocks, averaged overviews) is common. */
interface Profile {
  readonly compression: Codec;
  readonly level: number;
}

export interface ThroughputConfig {
  /** Side of the square source scene, in pixels. */
  readonly sceneSize: number;
  /** Windows per repetition (spread over the grid). */
  readonly tiles: number;
  /** Repetitions of the equal-settings races. */
  readonly reps: number;
  /**
   * The Pareto table's other points (time per tile against bytes per tile), per
   * codec, each run `reps` times by Tessera and by GDAL's library; the raced
   * profiles are points already. Empty lists: the table holds just those.
   */
  readonly pareto: { readonly levels: Readonly<Record<Codec, readonly number[]>>; readonly reps: number };
}

/** GDAL's COG defaults for DEFLATE (LEVEL 6): the race the issue names. */
const EQUAL_DEFLATE: Profile = { compression: 'DEFLATE', level: OUTPUT_LEVELS.DEFLATE.default };

/** The project's default output profile (DEFAULT_PARAMS), as the tiler reads it. */
const DEFAULT_PROFILE = ((): Profile => {
  const t = tilingParams(DEFAULT_PARAMS);
  if (t.compression === 'NONE') throw new Error('the default output profile is uncompressed: the throughput race needs a codec');
  return { compression: t.compression, level: t.level };
})();

/** ZSTD raced at the default profile's level when the default is ZSTD, else at GDAL's ZSTD_LEVEL default. */
const EQUAL_ZSTD: Profile = {
  compression: 'ZSTD',
  level: DEFAULT_PROFILE.compression === 'ZSTD' ? DEFAULT_PROFILE.level : OUTPUT_LEVELS.ZSTD.default,
};

/** Largest difference accepted between two contenders' pixels (both compute in float64 and round to float32 once). */
const PIXEL_TOLERANCE = 1e-6;

const SECTION = '1 throughput';

const label = (p: Profile) => `${p.compression} ${p.level}`;

/** The default profile is raced on its own when it is neither equal-settings profile (e.g. DEFLATE 9). */
const DEFAULT_RACED_APART = label(DEFAULT_PROFILE) !== label(EQUAL_DEFLATE) && label(DEFAULT_PROFILE) !== label(EQUAL_ZSTD);

type Who = 'tessera' | 'gdal-cli' | 'gdal-warm';

/** One contender of a race: who, under which profile (the command line only writes DEFLATE 6). */
interface Contender {
  readonly who: Who;
  readonly profile: Profile;
}

const contenderId = (c: Contender) => `${c.who} ${label(c.profile)}`;

interface TesseraRun {
  elapsedMs: number;
  cpuMs: number;
  tiles: number;
  perTileMs: number[];
  outputs: string[];
  memory: MemoryReading;
  profile: CodecProfile[];
}

/** What one run of a contender gave: its time, its files and their sizes. */
interface RunResult {
  readonly ms: number;
  /** CPU time of the contender's process over the timed tiles; undefined for the command line (many processes). */
  readonly cpuMs?: number | undefined;
  readonly outputs: string[];
  readonly bytes: number[];
  readonly perTileMs?: number[] | undefined;
  readonly profile?: CodecProfile[] | undefined;
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
      `-co BLOCKSIZE=${blockSize} -co COMPRESS=DEFLATE -co PREDICTOR=YES -co LEVEL=${EQUAL_DEFLATE.level} -co RESAMPLING=AVERAGE`,
      quote(tmp),
      quote(out),
    ].join(' '),
    `rm -f ${quote(tmp)}`,
  ];
}

const outName = (w: Window) => `${w.row}_${w.col}.tif`;

/** One point of the Pareto table: a profile, both contenders' time and size per tile. */
interface ParetoPoint {
  readonly profile: Profile;
  readonly tessera: ParetoSide;
  readonly gdal: ParetoSide;
}

/** Wall time per tile (what tiles/s measures), CPU time per tile (the work, robust to a loaded core), bytes per tile. */
interface ParetoSide {
  readonly msPerTile: Summary;
  readonly cpuMsPerTile: Summary;
  readonly bytesPerTile: number;
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const kb = (bytes: number) => `${fmt(bytes / 1024)} KiB`;

/**
 * Section 1: tiles per second of Tessera's tile worker against GDAL doing the
 * same tiles, one core each, in rotating order, several repetitions: on equal
 * settings for DEFLATE (GDAL's COG default, level 6; also against the GDAL
 * command line) and for ZSTD (at the default profile's level); then a Pareto
 * table of both contenders on both codecs at a few levels, each level with its
 * own equal-settings row (ratio per repetition, median and range, from the race
 * that measured it). Every pair of outputs is compared pixel for pixel so every
 * race is a fair one.
 */
export async function throughput(cfg: ThroughputConfig, g: Gdal, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const scene = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const tiling = tilingParams(benchParams('throughput'));
  const grid = tileGrid(cfg.sceneSize, cfg.sceneSize, tiling.tilePx);
  const windows = spreadWindows(grid, cfg.tiles);
  const broken: string[] = [];
  const verification: { profile: string; pairs: ComparePair[] }[] = [];

  const paramsOf = (p: Profile) =>
    benchParams(`throughput-${p.compression}-${p.level}`, {
      output: { ...(DEFAULT_PARAMS.output as object), compression: p.compression, level: p.level },
    });

  async function runOnce(c: Contender, dir: string, profileTiles: boolean): Promise<RunResult> {
    switch (c.who) {
      case 'tessera': {
        const r = await runWorker<TesseraRun>(
          'tile-worker',
          { dir, scenePath: scene, params: paramsOf(c.profile), windows, profile: profileTiles },
          { pin: true, timeoutMs: 1_800_000 },
        );
        return {
          ms: r.elapsedMs,
          cpuMs: r.cpuMs,
          outputs: r.outputs,
          bytes: r.outputs.map((f) => statSync(f).size),
          perTileMs: r.perTileMs,
          profile: r.profile,
        };
      }
      case 'gdal-cli': {
        if (c.profile.compression !== 'DEFLATE' || c.profile.level !== EQUAL_DEFLATE.level)
          throw new Error('the GDAL command line races DEFLATE 6 only');
        const script = join(dir, 'tiles.sh');
        const lines = windows.flatMap((w) =>
          gdalCliCommands(g, scene, w, join(dir, outName(w)), join(dir, 'ndvi.tmp.tif'), tiling.blockSize, tiling.noData),
        );
        writeFileSync(script, ['set -e', ...lines, ''].join('\n'));
        // The whole loop runs pinned: the shell and every GDAL process on the same core.
        const ms = (await run('sh', [script], { pin: true, timeoutMs: 3_600_000 })).wallMs;
        const outputs = windows.map((w) => join(dir, outName(w)));
        return { ms, outputs, bytes: outputs.map((f) => statSync(f).size) };
      }
      case 'gdal-warm': {
        const spec = {
          scene,
          windows: windows.map((w) => ({ x: w.x, y: w.y, width: w.width, height: w.height, out: join(dir, outName(w)) })),
          noDataIn: SCENE.noData,
          noDataOut: tiling.noData,
          blockSize: tiling.blockSize,
          compression: c.profile.compression,
          level: c.profile.level,
        };
        const r = await runGdalScript<{ elapsedMs: number; cpuMs: number; bytes: number[] }>(g, 'warm_ndvi.py', spec, true);
        return { ms: r.elapsedMs, cpuMs: r.cpuMs, outputs: spec.windows.map((w) => w.out), bytes: r.bytes };
      }
      default: {
        const never: never = c.who;
        throw new Error(`unknown contender ${String(never)}`);
      }
    }
  }

  /** Same pixels, same layout (codec included), valid COGs: otherwise the race compares different work. */
  async function verify(profile: Profile, pairs: { name: string; reference: string[]; candidate: string[] }[]): Promise<void> {
    const input = pairs.flatMap((p) =>
      windows.map((w, i) => ({ name: `${p.name}/${outName(w)}`, reference: p.reference[i], candidate: p.candidate[i] })),
    );
    const checked = (await runGdalScript<{ pairs: ComparePair[] }>(g, 'compare_tiles.py', { pairs: input })).pairs;
    verification.push({ profile: label(profile), pairs: checked });
    for (const p of checked) {
      const problems = [
        ...(p.layoutDiffers.length ? [`layout differs (${p.layoutDiffers.join(', ')})`] : []),
        ...(p.maskMismatches !== 0 ? [`${p.maskMismatches} pixels differ in nodata`] : []),
        ...(p.maxAbsDiff > PIXEL_TOLERANCE ? [`pixels differ by up to ${p.maxAbsDiff}`] : []),
        ...(p.cogErrors.candidate.length ? [`Tessera's tile is not a valid COG: ${p.cogErrors.candidate.join('; ')}`] : []),
        ...(p.cogErrors.reference.length ? [`GDAL's tile is not a valid COG: ${p.cogErrors.reference.join('; ')}`] : []),
      ];
      if (problems.length) broken.push(`${label(profile)}: Tessera vs ${p.name}: ${problems.join('; ')}`);
    }
  }

  /**
   * Runs `contenders` `reps` times in rotating order (so neither always runs
   * first or last), verifying the first repetition's outputs against Tessera's;
   * tiles per second per contender, and the Tessera runs' per-tile data.
   */
  async function race(name: string, contenders: readonly Contender[], reps: number) {
    const tilesPerSec = new Map<string, number[]>(contenders.map((c) => [contenderId(c), []]));
    const bytes = new Map<string, number[]>(contenders.map((c) => [contenderId(c), []]));
    const cpuMsPerTile = new Map<string, number[]>(contenders.map((c) => [contenderId(c), []]));
    const perTileMs: number[] = [];
    const profiles = new Map<string, CodecProfile[]>();
    for (let rep = 0; rep < reps; rep++) {
      const order = [...contenders];
      for (let r = 0; r < rep % order.length; r++) order.push(order.shift() as Contender);
      const outputs = new Map<string, string[]>();
      for (const c of order) {
        const id = contenderId(c);
        const dir = freshRunDir(`throughput-${id.replace(/\W+/g, '-')}-${rep}`);
        const r = await runOnce(c, dir, rep === 0 && c.who === 'tessera');
        const tps = windows.length / (r.ms / 1000);
        tilesPerSec.get(id)?.push(tps);
        bytes.get(id)?.push(...r.bytes);
        if (r.cpuMs !== undefined) cpuMsPerTile.get(id)?.push(r.cpuMs / windows.length);
        if (r.perTileMs) perTileMs.push(...r.perTileMs);
        if (r.profile?.length) profiles.set(id, r.profile);
        outputs.set(id, r.outputs);
        const cpu = r.cpuMs === undefined ? '' : `, CPU ${fmt(r.cpuMs / windows.length)} ms per tile`;
        log(`  ${name} rep ${rep + 1}/${reps} ${id}: ${fmt(tps)} tiles/s${cpu}, ${kb(mean(r.bytes))} per tile`);
      }
      if (rep === 0) {
        for (const profile of new Set(contenders.map((c) => c.profile))) {
          const ours = outputs.get(contenderId({ who: 'tessera', profile })) ?? [];
          const theirs = contenders.filter((c) => c.who !== 'tessera' && c.profile === profile);
          await verify(
            profile,
            theirs.map((c) => ({ name: c.who, reference: outputs.get(contenderId(c)) ?? [], candidate: ours })),
          );
        }
      }
    }
    return { tilesPerSec, bytes, cpuMsPerTile, perTileMs, profiles };
  }

  // The equal-settings races: DEFLATE 6 against GDAL's command line and library, ZSTD against the library.
  const deflate = await race(
    'equal settings',
    [
      { who: 'tessera', profile: EQUAL_DEFLATE },
      { who: 'gdal-cli', profile: EQUAL_DEFLATE },
      { who: 'gdal-warm', profile: EQUAL_DEFLATE },
      { who: 'tessera', profile: EQUAL_ZSTD },
      { who: 'gdal-warm', profile: EQUAL_ZSTD },
      ...(DEFAULT_RACED_APART
        ? ([
            { who: 'tessera', profile: DEFAULT_PROFILE },
            { who: 'gdal-warm', profile: DEFAULT_PROFILE },
          ] as const)
        : []),
    ],
    cfg.reps,
  );
  type Race = Awaited<ReturnType<typeof race>>;
  /** Which race measured each profile: the equal-settings race, or the profile's own Pareto race. */
  const raceOf = new Map<string, Race>();
  for (const p of [EQUAL_DEFLATE, EQUAL_ZSTD, ...(DEFAULT_RACED_APART ? [DEFAULT_PROFILE] : [])]) raceOf.set(label(p), deflate);
  const series = (who: Who, p: Profile) => raceOf.get(label(p))?.tilesPerSec.get(contenderId({ who, profile: p })) ?? [];
  const ratios = (p: Profile, who: Who) => series('tessera', p).map((t, i) => t / (series(who, p)[i] as number));

  // The Pareto table: the raced profiles, then the other levels, Tessera and GDAL's library each.
  const points: ParetoPoint[] = [];
  const pointOf = (p: Profile, r: Race): ParetoPoint => {
    const side = (who: Who): ParetoSide => {
      const id = contenderId({ who, profile: p });
      return {
        msPerTile: summarize((r.tilesPerSec.get(id) ?? []).map((t) => 1000 / t)),
        cpuMsPerTile: summarize(r.cpuMsPerTile.get(id) ?? []),
        bytesPerTile: mean(r.bytes.get(id) ?? []),
      };
    };
    return { profile: p, tessera: side('tessera'), gdal: side('gdal-warm') };
  };
  points.push(pointOf(EQUAL_DEFLATE, deflate), pointOf(EQUAL_ZSTD, deflate));
  if (DEFAULT_RACED_APART) points.push(pointOf(DEFAULT_PROFILE, deflate));
  for (const compression of ['DEFLATE', 'ZSTD'] as const) {
    for (const level of cfg.pareto.levels[compression]) {
      if (points.some((p) => p.profile.compression === compression && p.profile.level === level)) continue;
      const profile: Profile = { compression, level };
      const r = await race(
        'pareto',
        [
          { who: 'tessera', profile },
          { who: 'gdal-warm', profile },
        ],
        cfg.pareto.reps,
      );
      raceOf.set(label(profile), r);
      points.push(pointOf(profile, r));
    }
  }
  points.sort((a, b) => a.profile.compression.localeCompare(b.profile.compression) || a.profile.level - b.profile.level);
  log('  Pareto (median wall and CPU ms per tile, mean KiB per tile):');
  const cell = (x: ParetoSide) =>
    `${fmt(x.msPerTile.median).padStart(6)} ms (CPU ${fmt(x.cpuMsPerTile.median).padStart(5)}) ${kb(x.bytesPerTile).padStart(10)}`;
  for (const p of points) log(`    ${label(p.profile).padEnd(10)} Tessera ${cell(p.tessera)}   GDAL ${cell(p.gdal)}`);

  // Where a Tessera tile goes under each raced profile (the untimed profile of the first repetition).
  const stagesOf = (p: Profile) => {
    const prof = deflate.profiles.get(contenderId({ who: 'tessera', profile: p })) ?? [];
    return {
      readMs: summarize(prof.map((x) => x.readMs)).median,
      mathMs: summarize(prof.map((x) => x.mathMs)).median,
      encodeMs: summarize(prof.map((x) => x.encodeMs)).median,
      compressMs: summarize(prof.map((x) => x.compressMs)).median,
      blocks: prof[0]?.blocks ?? 0,
    };
  };
  /** CPU time per tile, GDAL's over Tessera's, per repetition: the same race with the core's other load taken out. */
  const cpuRatio = (p: Profile) => {
    const measured = raceOf.get(label(p));
    const ours = measured?.cpuMsPerTile.get(contenderId({ who: 'tessera', profile: p })) ?? [];
    const theirs = measured?.cpuMsPerTile.get(contenderId({ who: 'gdal-warm', profile: p })) ?? [];
    const r = summarize(ours.map((t, i) => (theirs[i] as number) / t));
    return `CPU time per tile ${fmt(summarize(ours).median)} ms vs ${fmt(summarize(theirs).median)} ms: ${times(r.median)} (${times(r.min)}-${times(r.max)})`;
  };
  const rowsOf = (p: Profile, vs: Who, metric: string, target: string): Row => {
    const r = summarize(ratios(p, vs));
    return {
      section: SECTION,
      metric,
      backend: 'local',
      target,
      measured: `${fmtSummary(summarize(series('tessera', p)), 'tiles/s')} vs ${fmtSummary(summarize(series(vs, p)), 'tiles/s')}`,
      ratio: `${times(r.median)} (${times(r.min)}-${times(r.max)})`,
      status: target === 'context' ? 'INFO' : r.median >= 1 ? 'PASS' : 'MISS',
    };
  };
  const deflateStages = stagesOf(EQUAL_DEFLATE);
  const zstdStages = stagesOf(EQUAL_ZSTD);
  const gdalDeflateCpuMs = summarize(deflate.cpuMsPerTile.get(contenderId({ who: 'gdal-warm', profile: EQUAL_DEFLATE })) ?? []).median;
  const stageNote = (s: ReturnType<typeof stagesOf>) =>
    `read and decode ${fmt(s.readMs)} ms, band math ${fmt(s.mathMs)} ms, COG encode ${fmt(s.encodeMs)} ms ` +
    `(of which the compressor alone on the ${s.blocks} blocks ${fmt(s.compressMs)} ms of CPU)`;
  // The tile children load the compressor this process does: the native addon on linux-x64 and linux-arm64, else the
  // WebAssembly module (shared/raster/libdeflate.ts).
  const compressorName = libdeflateCodec().kind === 'native' ? `the native addon, ${process.platform}-${process.arch}` : 'WebAssembly';
  /**
   * One equal-settings row per measured profile (issue 30: DEFLATE 1, 6, 9 and ZSTD 1, 3, 9): tiles per second of
   * Tessera over GDAL's warm library per repetition (median and range), from the race that measured the profile.
   */
  const warmRow = (p: Profile): Row => {
    const row = rowsOf(p, 'gdal-warm', `tiles/s, Tessera vs GDAL library (warm), equal settings ${label(p)}`, '>= 1.0x');
    const raced = raceOf.get(label(p)) === deflate;
    const how = raced ? `raced with the equal-settings profiles` : `its Pareto race`;
    const base = `${cpuRatio(p)} (${how}, n=${series('tessera', p).length})`;
    if (label(p) === label(EQUAL_DEFLATE)) {
      return {
        ...row,
        note:
          `GDAL's Python bindings in one warm process (no start-up per tile, libdeflate): the strongest GDAL baseline. ` +
          `${base}. A Tessera tile: ${stageNote(deflateStages)}. ` +
          (row.status === 'PASS'
            ? 'Tessera keeps up with it.'
            : `The compressor (libdeflate: ${compressorName}) alone takes ${fmt(deflateStages.compressMs)} ms of CPU per tile against GDAL's whole ` +
              `tile's ${fmt(gdalDeflateCpuMs)} ms (native libdeflate, level 6) (docs/benchmarks.md, "The floor").`),
      };
    }
    if (label(p) === label(EQUAL_ZSTD))
      return { ...row, note: `the same libzstd on both sides; ${base}; a Tessera tile: ${stageNote(zstdStages)}` };
    if (DEFAULT_RACED_APART && label(p) === label(DEFAULT_PROFILE))
      return { ...row, note: `${base}; a Tessera tile: ${stageNote(stagesOf(DEFAULT_PROFILE))}` };
    return { ...row, note: `${p.compression === 'ZSTD' ? 'the same libzstd on both sides; ' : ''}${base}` };
  };
  const warmRows = points.map((p) => warmRow(p.profile));
  const warmDeflate = warmRow(EQUAL_DEFLATE);
  const warmZstd = warmRow(EQUAL_ZSTD);
  const cli = rowsOf(EQUAL_DEFLATE, 'gdal-cli', `tiles/s, Tessera vs GDAL command line, ${label(EQUAL_DEFLATE)}`, '>= 1.0x');
  const defaultRow = DEFAULT_RACED_APART ? warmRow(DEFAULT_PROFILE) : label(DEFAULT_PROFILE) === label(EQUAL_ZSTD) ? warmZstd : warmDeflate;
  const maxDiff = Math.max(0, ...verification.flatMap((v) => v.pairs.map((p) => p.maxAbsDiff)));
  const masks = verification.reduce((n, v) => n + v.pairs.reduce((m, p) => m + p.maskMismatches, 0), 0);
  const cogErrors = verification.reduce(
    (n, v) => n + v.pairs.reduce((m, p) => m + p.cogErrors.candidate.length + p.cogErrors.reference.length, 0),
    0,
  );
  const compared = verification.reduce((n, v) => n + v.pairs.length, 0);
  const pinNote = canPin() ? 'one core each (taskset -c 0)' : 'unpinned (no taskset)';
  const rows: Row[] = [
    {
      ...cli,
      note: cli.status === 'PASS' ? undefined : 'the command-line pipeline was faster per tile than the warm Tessera worker',
    },
    ...warmRows,
    {
      section: SECTION,
      metric: `default output profile (${label(DEFAULT_PROFILE)}), Tessera vs GDAL library (warm)`,
      backend: 'local',
      target: '>= 1.0x',
      measured: defaultRow.measured,
      ratio: defaultRow.ratio,
      status: defaultRow.status,
      note: `DEFAULT_PARAMS.output: what \`tessera run\` and a deployed stack write unless configured otherwise; the same race as its equal-settings row`,
    },
    ...points.map(
      (p): Row => ({
        section: SECTION,
        metric: `Pareto ${label(p.profile)}: ms and bytes per tile, Tessera vs GDAL library`,
        backend: 'local',
        target: 'context',
        measured:
          `Tessera ${fmt(p.tessera.msPerTile.median)} ms (CPU ${fmt(p.tessera.cpuMsPerTile.median)}), ${kb(p.tessera.bytesPerTile)}; ` +
          `GDAL ${fmt(p.gdal.msPerTile.median)} ms (CPU ${fmt(p.gdal.cpuMsPerTile.median)}), ${kb(p.gdal.bytesPerTile)} (n=${p.tessera.msPerTile.n})`,
        ratio: times(p.gdal.msPerTile.median / p.tessera.msPerTile.median),
        status: 'INFO',
        note: 'ratio: GDAL wall time per tile over Tessera wall time per tile (above 1x Tessera is faster); CPU: the same in CPU time',
      }),
    ),
    {
      section: SECTION,
      metric: 'outputs match GDAL',
      backend: 'local',
      target: `same layout and codec, same nodata mask, |diff| <= ${PIXEL_TOLERANCE}, valid COGs`,
      measured: `${compared} tile pairs over ${verification.length} profiles: max |diff| ${maxDiff}, ${masks} mask mismatches, ${cogErrors} COG errors`,
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
      defaultProfile: DEFAULT_PROFILE,
      tilesPerSec: Object.fromEntries(deflate.tilesPerSec),
      ratioVsCli: ratios(EQUAL_DEFLATE, 'gdal-cli'),
      ratioVsWarm: Object.fromEntries(points.map((p) => [label(p.profile), ratios(p.profile, 'gdal-warm')])),
      tesseraPerTileMs: summarize(deflate.perTileMs),
      stages: { [label(EQUAL_DEFLATE)]: deflateStages, [label(EQUAL_ZSTD)]: zstdStages },
      pareto: points,
      verification,
    },
    durationSec: (performance.now() - started) / 1000,
  };
}
