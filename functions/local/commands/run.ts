import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_PARAMS, ENV } from '../../../shared/domain/runtime-config.js';
import { parsePostgresUrl } from '../../postgres/connection.js';
import type { CliIo } from '../cli.js';
import { type MainJobSummary, runMainJob, type TileProfile } from '../main-job.js';
import { terminalProgress } from '../progress.js';
import { defaultWorkers } from '../worker-process.js';
import { DEFAULT_DIR, intOption, numberOption, outputProfileOption } from './options.js';

export const runHelp = `tessera run: the main job on the local backend

Generates (or takes) a multi-band scene, fans it out to tile jobs, runs them on
worker processes while injecting duplicate deliveries and one worker that
stalls past its lease, writes NDVI Cloud Optimized GeoTIFF tiles create-only,
assembles a VRT mosaic and prints a summary.

Options:
  --scene PATH        a GeoTIFF to process (default: a synthetic 2-band B04/B08 scene, EPSG:32631)
  --source-key KEY    tile an object already in the source store, e.g. the key \`tessera ingest\` published
  --size N            synthetic scene width and height in pixels (default 5120)
  --tile N            tile size in pixels (default 256: 400 windows at 5120)
  --compression C     tile compression: deflate, zstd or none (default: the output profile of
                      DEFAULT_PARAMS, shared/domain/runtime-config.ts); part of every job key
  --level N           its level: deflate 1-9, zstd 1-22 (default: the profile's, deflate 9; a
                      codec named alone takes its own, deflate 6 or zstd 9, as GDAL's)
  --workers N         worker processes, each with its own SQLite connections, pulling from the
                      queue (default: the cores this process may use, os.availableParallelism(): %CORES%
                      here); a worker killed mid-job (even kill -9) is survived by the others
  --duplicates R      fraction of jobs delivered twice (default 0.1)
  --no-steal          do not inject the stalled worker whose lease is stolen
  --seed N            seed for the synthetic scene and the duplicate choice (default 42)
  --dir PATH          backend directory (default .tessera)
  --fresh             forget the previous run first: claims, queue, outputs (npm start does this;
                      generated scenes under sources/ are kept)
  --profile           measure one tile job: print its seconds and peak memory, and the \`tessera choose\`
                      flags they give (defaults to 1 worker, no duplicates and no stalled worker, so the
                      tiles run one at a time; the memory is the process's peak, runtime included)
  --sink URL          also write one feature row per tile (NDVI count/mean/min/max, footprint in the
                      scene CRS and EPSG:4326) into PostGIS: postgis://user:password@host:5432/db
                      (table tile_features, created if absent; one row per tile whatever the retries:
                      docs/postgis.md). Workers get it as TESSERA_FEATURE_SINK
  --json              print the summary as one JSON object on the last line
  --verbose           print the structured logs (JSON lines) on stderr

Exit status: 0 when the mosaic holds exactly grid-count tiles, 1 otherwise.`.replace('%CORES%', String(defaultWorkers()));

export async function runCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      scene: { type: 'string' },
      'source-key': { type: 'string' },
      size: { type: 'string' },
      tile: { type: 'string' },
      compression: { type: 'string' },
      level: { type: 'string' },
      workers: { type: 'string' },
      duplicates: { type: 'string' },
      'no-steal': { type: 'boolean', default: false },
      seed: { type: 'string' },
      dir: { type: 'string', default: DEFAULT_DIR },
      fresh: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      sink: { type: 'string' },
    },
  });
  if (values.sink !== undefined) {
    // Checked here, so a typo fails before any tile runs; the workers (child processes) inherit the variable.
    parsePostgresUrl(values.sink);
    process.env[ENV.featureSink] = values.sink;
  }
  // Profiling measures tiles one at a time: no parallel workers sharing the CPU, no injected hazards.
  const profile = values.profile;
  const size = intOption('size', values.size, 5120, 16, 65_536);
  const tilePx = intOption('tile', values.tile, 256, 16, 8192);
  const output = outputProfileOption(values.compression, values.level);
  const summary = await runMainJob({
    dir: resolve(io.cwd, values.dir),
    scene: values.scene === undefined ? undefined : resolve(io.cwd, values.scene),
    sourceKey: values['source-key'],
    width: size,
    height: size,
    tilePx,
    params: output === undefined ? undefined : { ...DEFAULT_PARAMS, tile_px: tilePx, output },
    workers: intOption('workers', values.workers, profile ? 1 : defaultWorkers(), 1, 64),
    duplicateRate: numberOption('duplicates', values.duplicates, profile ? 0 : 0.1, 0, 1),
    injectSteal: !values['no-steal'] && !profile,
    profile,
    seed: intOption('seed', values.seed, 42, 0, 2 ** 31),
    fresh: values.fresh,
    progress: terminalProgress(process.stderr),
    log: values.verbose ? (line) => io.stderr(`${line}\n`) : () => {},
  });
  io.stdout(values.json ? `${JSON.stringify(summary)}\n` : formatSummary(summary) + formatProfile(summary.profile));
  return summary.ok ? 0 : 1;
}

/** The profile, and the `tessera choose` flags it gives (whole seconds and MB, rounded up). */
export function formatProfile(p: TileProfile | undefined): string {
  if (p === undefined) return '';
  const runtime = Math.max(1, Math.ceil(p.secondsPerTile));
  return (
    `\nprofile: ${p.secondsPerTile.toFixed(2)} s per tile (${p.tiles} tiles, ${p.workers} worker${p.workers === 1 ? '' : 's'}, ` +
    `tile phase ${(p.tilePhaseMs / 1000).toFixed(1)} s), peak memory ${p.peakMemoryMb} MB\n` +
    `for tessera choose: --runtime ${runtime}s --memory ${p.peakMemoryMb}MB (measured on this machine; a cloud vCPU may be slower)\n`
  );
}

export function formatSummary(s: MainJobSummary): string {
  const rows: [string, string | number][] = [
    ['scene', s.source],
    ['scene key', s.sceneKey],
    ['windows (grid count)', s.windows],
    ['tiles written', s.tilesWritten],
    ['duplicate deliveries injected', s.duplicatesDelivered],
    ['duplicates stopped at the claim', s.duplicatesStoppedAtClaim],
    ['duplicates stopped at the write', s.duplicatesStoppedAtWrite],
    ['leases taken over after lapsing', s.leasesTakenOver],
    ['leases stolen (commit refused, ERROR)', s.leasesStolen],
    ['dead-lettered', s.poison],
    ['manifest count / grid count', `${s.manifestCount} / ${s.gridCount}${s.ok ? '  OK' : '  MISMATCH'}`],
    ['mosaic', s.mosaicPath || '(not assembled)'],
    ['outputs', s.outputDir],
    ['elapsed', `${(s.elapsedMs / 1000).toFixed(1)} s`],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  return `${rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n')}\n`;
}
