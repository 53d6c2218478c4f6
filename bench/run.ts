/**
 * `npm run bench` / `npm run bench:smoke`: Tessera's benchmarks, each a ratio
 * against a baseline measured side by side in the same run (see
 * docs/benchmarks.md). Writes reports/bench.json and reports/bench.md (the
 * smoke run writes under the system's temporary folder instead, so it never
 * replaces a real measurement) and prints the table.
 *
 * Exit status: 0 when every section ran, whatever the targets say; 1 when
 * the benchmark itself broke (a section threw, outputs that should match did
 * not); 2 when it cannot set itself up (GDAL missing and not installable).
 *
 * Options: --smoke, --only=throughput,duplicates,gates,memory,scale,scaling,reproject,rio-tiler,streams,tracing,startup,pyramid,compressor,
 * --clouds=aws,gcp,azure|none, --out=<dir>.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canPin, REPO_ROOT } from './lib/child.js';
import { CLOUDS, type CloudName } from './lib/clouds.js';
import { BenchSetupError, ensureGdal, type Gdal } from './lib/gdal.js';
import { type BenchReport, machineInfo, type Row, renderTable, type SectionResult, writeReport } from './lib/report.js';
import { clearRuns } from './lib/scenes.js';
import { type CompressorConfig, compressor } from './sections/compressor.js';
import { type DuplicatesConfig, duplicates } from './sections/duplicates.js';
import { type GatesConfig, gates } from './sections/gates.js';
import { type MemoryConfig, memoryFootprint } from './sections/memory.js';
import { type PyramidConfig, pyramid } from './sections/pyramid.js';
import { type ReprojectConfig, reproject } from './sections/reproject.js';
import { type RioTilerConfig, rioTiler } from './sections/rio-tiler.js';
import { type ScaleConfig, scale } from './sections/scale.js';
import { type ScalingConfig, scaling } from './sections/scaling.js';
import { type StartupConfig, startup } from './sections/startup.js';
import { type StreamsConfig, streams } from './sections/streams.js';
import { type ThroughputConfig, throughput } from './sections/throughput.js';
import { type TracingConfig, tracing } from './sections/tracing.js';

const SECTIONS = [
  'throughput',
  'duplicates',
  'gates',
  'memory',
  'scale',
  'scaling',
  'reproject',
  'rio-tiler',
  'streams',
  'tracing',
  'startup',
  'pyramid',
  'compressor',
] as const;
type SectionName = (typeof SECTIONS)[number];

interface Plan {
  readonly throughput: ThroughputConfig;
  readonly duplicates: Omit<DuplicatesConfig, 'clouds'>;
  readonly gates: GatesConfig;
  readonly memory: MemoryConfig;
  readonly scale: ScaleConfig;
  readonly scaling: ScalingConfig;
  readonly reproject: ReprojectConfig;
  readonly 'rio-tiler': RioTilerConfig;
  readonly streams: StreamsConfig;
  readonly tracing: TracingConfig;
  readonly startup: StartupConfig;
  readonly pyramid: PyramidConfig;
  readonly compressor: CompressorConfig;
  /** Rough duration on a quiet 2-core machine, scenes already cached. */
  readonly expected: string;
}

/** The sizes the issue asks for. */
const FULL: Plan = {
  throughput: { sceneSize: 4096, tiles: 16, reps: 5, pareto: { levels: { DEFLATE: [1, 6, 9], ZSTD: [1, 3, 9] }, reps: 3 } },
  duplicates: { sceneSize: 2048, reps: 3 },
  gates: { sceneSize: 4096, tiles: 8, rounds: 6, reps: 3 },
  memory: { sizes: [4096, 8192, 16384], reps: 3 },
  scale: { windows: [400, 4_000, 40_000], reps: 3 },
  scaling: { scalingScene: 8192, scalingTilePx: 512, scalingReps: 3, wholeScene: 10980, wholeTilePx: 512, wholeReps: 2 },
  reproject: { sceneSize: 4096, tiles: 16, reps: 3, zoom: 13, resamplings: ['nearest', 'bilinear', 'cubic'] },
  // The same scene onto WebMercatorQuad z14 at 256 px (9.55 m cells), against rio-tiler from PyPI: about 45 s.
  'rio-tiler': { sceneSize: 4096, tiles: 96, reps: 5, zoom: 14, resampling: 'nearest' },
  // 100,000 records in batch objects of 1,000 (the issue's one claim per thousand); the baseline's rate over 10,000.
  streams: { batches: 100, recordsPerBatch: 1000, baselineBatches: 10, reps: 5, concurrency: 2 },
  tracing: { sceneSize: 4096, pairs: 24, noopSpans: 200_000 },
  // The built CLI against the tsx dev path, alternating: about 30 s.
  startup: { helpReps: 9, runReps: 7 },
  // A Sentinel-2-sized scene to a z8-14 PNG pyramid (7,208 tiles), three contenders a repetition: about 4.5 minutes each on a quiet machine.
  pyramid: { sceneSize: 10980, minZoom: 8, maxZoom: 14, reps: 3 },
  // The DEFLATE block compressor alone, libdeflate (the native addon where one exists, and the WebAssembly module) against node:zlib: a few seconds.
  compressor: { sceneSize: 4096, tiles: 8, rounds: 5, levels: [1, 6, 9] },
  expected:
    'about 9 minutes on a quiet machine, plus about 14 for the pyramid section (plus about 5 the first time, to write the 4096^2 to 16384^2 and 10980^2 scenes)',
};

/** Every section at tiny sizes: proves the benchmark still works (CI), measures nothing worth reading. */
const SMOKE: Plan = {
  throughput: { sceneSize: 1024, tiles: 2, reps: 1, pareto: { levels: { DEFLATE: [], ZSTD: [] }, reps: 1 } },
  duplicates: { sceneSize: 1024, reps: 1 },
  gates: { sceneSize: 1024, tiles: 2, rounds: 2, reps: 1 },
  memory: { sizes: [1024, 2048], reps: 1 },
  scale: { windows: [40, 400, 4_000], reps: 1 },
  scaling: { scalingScene: 1024, scalingTilePx: 256, scalingReps: 1, wholeScene: 1280, wholeTilePx: 256, wholeReps: 1 },
  reproject: { sceneSize: 1024, tiles: 2, reps: 1, zoom: 13, resamplings: ['bilinear'] },
  'rio-tiler': { sceneSize: 1024, tiles: 4, reps: 1, zoom: 14, resampling: 'nearest' },
  streams: { batches: 4, recordsPerBatch: 250, baselineBatches: 2, reps: 1, concurrency: 2 },
  tracing: { sceneSize: 1024, pairs: 2, noopSpans: 10_000 },
  startup: { helpReps: 1, runReps: 1 },
  pyramid: { sceneSize: 1024, minZoom: 12, maxZoom: 14, reps: 1 },
  compressor: { sceneSize: 1024, tiles: 1, rounds: 1, levels: [6] },
  expected: 'about 40 seconds (plus a minute if it has to install GDAL, 20 s if it has to install rio-tiler)',
};

interface Options {
  readonly smoke: boolean;
  readonly only: readonly SectionName[];
  readonly clouds: readonly CloudName[];
  readonly out: string | undefined;
}

function parseArgs(argv: readonly string[]): Options {
  let smoke = false;
  let only: SectionName[] = [...SECTIONS];
  let clouds: CloudName[] = [...CLOUDS];
  let out: string | undefined;
  const list = <T extends string>(flag: string, value: string, allowed: readonly T[]): T[] => {
    if (value === 'none') return [];
    const items = value.split(',').map((s) => s.trim());
    const bad = items.filter((s) => !allowed.includes(s as T));
    if (bad.length) throw new BenchSetupError(`${flag}: unknown ${bad.join(', ')}; choose from ${allowed.join(', ')}`);
    return items as T[];
  };
  for (const arg of argv) {
    const [flag, value = ''] = arg.split('=', 2) as [string, string | undefined];
    if (flag === '--smoke') smoke = true;
    else if (flag === '--only') only = list('--only', value, SECTIONS);
    else if (flag === '--clouds') clouds = list('--clouds', value, CLOUDS);
    else if (flag === '--out' && value) out = value;
    else
      throw new BenchSetupError(
        `unknown option ${arg}: use --smoke, --only=${SECTIONS.join(',')}, --clouds=${CLOUDS.join(',')}|none, --out=<dir>`,
      );
  }
  return { smoke, only, clouds, out };
}

const log = (line: string) => process.stdout.write(`${line}\n`);

async function runSection(name: SectionName, plan: Plan, options: Options, gdal: Gdal | undefined): Promise<SectionResult> {
  switch (name) {
    case 'throughput':
      if (!gdal) throw new Error('GDAL was not set up');
      return throughput(plan.throughput, gdal, log);
    case 'duplicates':
      return duplicates({ ...plan.duplicates, clouds: options.clouds }, log);
    case 'gates':
      return gates(plan.gates, log);
    case 'memory':
      return memoryFootprint(plan.memory, log);
    case 'scale':
      return scale(plan.scale, log);
    case 'scaling':
      if (!gdal) throw new Error('GDAL was not set up');
      return scaling(plan.scaling, gdal, log);
    case 'reproject':
      if (!gdal) throw new Error('GDAL was not set up');
      return reproject(plan.reproject, gdal, log);
    case 'rio-tiler':
      return rioTiler(plan['rio-tiler'], log);
    case 'streams':
      return streams(plan.streams, log);
    case 'tracing':
      return tracing(plan.tracing, log);
    case 'startup':
      return startup(plan.startup, log);
    case 'pyramid':
      if (!gdal) throw new Error('GDAL was not set up');
      return pyramid(plan.pyramid, gdal, log);
    case 'compressor':
      return compressor(plan.compressor, log);
    default: {
      const never: never = name;
      throw new Error(`unknown section ${String(never)}`);
    }
  }
}

async function main(): Promise<number> {
  const options = parseArgs(process.argv.slice(2));
  const plan = options.smoke ? SMOKE : FULL;
  const command = `npm run ${options.smoke ? 'bench:smoke' : 'bench'}${
    process.argv.length > 2
      ? ` -- ${process.argv
          .slice(2)
          .filter((a) => a !== '--smoke')
          .join(' ')}`
      : ''
  }`.trim();
  // Smoke reports go outside the repository: they measure nothing worth keeping, and the linter formats what it finds in the tree.
  const outDir = options.out ?? (options.smoke ? join(tmpdir(), 'tessera-bench-smoke') : join(REPO_ROOT, 'reports'));
  const started = performance.now();
  log(
    `tessera bench (${options.smoke ? 'smoke' : 'full'}): ${options.only.join(', ')}; clouds: ${options.clouds.join(', ') || 'none'}; expect ${plan.expected}`,
  );
  if (!canPin()) log('taskset is not available: timings run on any core (install util-linux to pin them to one)');

  let gdal: Gdal | undefined;
  if (options.only.some((s) => s === 'throughput' || s === 'scaling' || s === 'reproject' || s === 'pyramid')) {
    gdal = await ensureGdal(log);
    log(`GDAL: ${gdal.version} (${gdal.calc}, ${gdal.python})`);
  }
  const machine = machineInfo(gdal?.version, canPin());
  const rows: Row[] = [];
  const sections: BenchReport['sections'] = {};
  for (const name of options.only) {
    const t = performance.now();
    log(`\n== ${name}`);
    try {
      const r = await runSection(name, plan, options, gdal);
      rows.push(...r.rows);
      sections[name] = { durationSec: r.durationSec, broken: r.broken, details: r.details };
      log(`   ${name} done in ${Math.round(r.durationSec)} s${r.broken.length ? `; BROKEN: ${r.broken.join(' | ')}` : ''}`);
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      sections[name] = { durationSec: (performance.now() - t) / 1000, broken: [`the section failed: ${message}`], details: {} };
      log(`   ${name} FAILED: ${message}`);
    }
  }
  clearRuns();
  // Sections report in run order; the table reads by section number (the duplicate section also fills section 3's round trips).
  rows.sort((a, b) => a.section.localeCompare(b.section));

  const report: BenchReport = {
    generatedAt: new Date().toISOString(),
    mode: options.smoke ? 'smoke' : 'full',
    only: options.only.length < SECTIONS.length ? options.only : undefined,
    command,
    durationSec: (performance.now() - started) / 1000,
    machine,
    loadAverageAtEnd: machineInfo(undefined, false).loadAverageAtStart,
    rows,
    sections,
  };
  const json = join(outDir, 'bench.json');
  const md = join(outDir, 'bench.md');
  writeReport(report, json, md);
  log(`\n${renderTable(rows)}\n`);
  const misses = rows.filter((r) => r.status === 'MISS');
  for (const r of misses) log(`MISS ${r.section} / ${r.metric}${r.backend ? ` (${r.backend})` : ''}: ${r.note ?? ''}`);
  const broken = Object.entries(sections).flatMap(([n, s]) => s.broken.map((b) => `${n}: ${b}`));
  log(
    `\n${rows.filter((r) => r.status === 'PASS').length} targets met, ${misses.length} missed, ${broken.length} benchmark failures; ` +
      `${Math.round(report.durationSec)} s. Wrote ${json} and ${md}.`,
  );
  if (broken.length) {
    log(`The benchmark itself failed:\n${broken.map((b) => `  - ${b.split('\n')[0]}`).join('\n')}`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof BenchSetupError) {
      process.stderr.write(`bench: ${error.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
