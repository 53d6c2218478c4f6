import { writeFile } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type Choice,
  type ChooseResult,
  chooseProvider,
  type DataLocation,
  DEFAULT_COST_WEIGHT,
  describeRequest,
  renderStackFile,
  stackFileName,
} from '../../../shared/app/choose-provider.js';
import { TesseraError } from '../../../shared/domain/errors.js';
import {
  ALL_REGIONS,
  CLOUDS,
  type Cloud,
  formatKm,
  formatMemory,
  OFFER_LABELS,
  type OfferKey,
  parseDuration,
  parseMemory,
  type Region,
} from '../../../shared/domain/provider-catalog/index.js';

/** What a command may touch: output streams and the directory stack files go to. */
export interface ChooseIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
}

const DEFAULT_LIMIT = 10;

export const chooseHelp = `tessera choose: rank provider + region + plan for a tile job, and write its stack file

Usage: tessera choose <region-code> --runtime <duration> --memory <size> [options]
       tessera choose --lat <deg> --lon <deg> --runtime <duration> --memory <size> [options]

Where the data is (one of):
  <region-code>, --region <code>  a provider region: eu-west-1, europe-west1, westeurope
  --lat <deg> --lon <deg>         decimal degrees, e.g. --lat 52.37 --lon 4.90

The job:
  --runtime <duration>    expected runtime of one tile job: 720 (seconds), 90s, 12m, 1h30m
  --memory <size>         peak memory of one tile job: 2048 (MB), 512MB, 3GB (1 GB = 1,024 MB)
  --trigger event|http    how the tile worker is invoked (default event: a queue or Pub/Sub trigger).
                          On GCP it picks the function type (event: 9 min ceiling, http: 60 min);
                          on Azure an HTTP execution must answer within 230 s.

Ranking and output:
  --clouds <list>         clouds to consider, comma-separated (default aws,gcp,azure)
  --cost-weight <0..1>    weight of cost against distance (default ${DEFAULT_COST_WEIGHT}; 0 = nearest first)
  --limit <n>             rows to print (default ${DEFAULT_LIMIT}; 0 = all; --json prints all unless given)
  --json                  machine-readable output
  --list-regions          print the region catalog and exit

Stack file (Pulumi.<cloud>-<region>.yaml):
  --write-stack           write the stack file of the top choice
  --pick <n>              write the n-th choice instead (1-based, as ranked)
  --gcp-project <id>      GCP project id (required when the pick is on GCP)
  --out-dir <dir>         where to write it (default: the current directory)
  --force                 overwrite an existing stack file

Exit status: 0 choices found, 1 nothing can run the job or the stack file exists, 2 bad input.
Details and an example run: docs/choose.md.`;

/** A command-line mistake: reported with the usage, exit status 2. */
export class ChooseUsageError extends Error {
  override readonly name = 'ChooseUsageError';
}

interface Options {
  readonly data: DataLocation;
  readonly runtimeSec: number;
  readonly memoryMb: number;
  readonly trigger: 'event' | 'http';
  readonly costWeight: number | undefined;
  readonly clouds: readonly Cloud[] | undefined;
  readonly limit: number | undefined;
  readonly json: boolean;
  readonly writeStack: boolean;
  readonly pick: number | undefined;
  readonly gcpProject: string | undefined;
  readonly outDir: string | undefined;
  readonly force: boolean;
}

const OPTIONS = {
  region: { type: 'string' },
  lat: { type: 'string' },
  lon: { type: 'string' },
  runtime: { type: 'string' },
  memory: { type: 'string' },
  trigger: { type: 'string' },
  clouds: { type: 'string' },
  'cost-weight': { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  'list-regions': { type: 'boolean' },
  'write-stack': { type: 'boolean' },
  pick: { type: 'string' },
  'gcp-project': { type: 'string' },
  'out-dir': { type: 'string' },
  force: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

function strictNumber(flag: string, raw: string): number {
  // Number('') is 0 and Number('0x10') is 16: accept plain decimals only.
  if (!/^[-+]?(\d+(\.\d*)?|\.\d+)$/.test(raw.trim())) throw new ChooseUsageError(`--${flag} must be a number, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

function wholeNumber(flag: string, raw: string, min: number): number {
  const n = strictNumber(flag, raw);
  if (!Number.isInteger(n) || n < min) throw new ChooseUsageError(`--${flag} must be a whole number >= ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

function parseClouds(raw: string): Cloud[] {
  const names = raw
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const unknown = names.filter((n) => !(CLOUDS as readonly string[]).includes(n));
  if (names.length === 0 || unknown.length > 0) {
    throw new ChooseUsageError(`--clouds takes a comma-separated list of ${CLOUDS.join(', ')}; got ${JSON.stringify(raw)}`);
  }
  return names as Cloud[];
}

function parseOptions(
  values: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'string' ? string : boolean },
  positionals: string[],
): Options {
  if (positionals.length > 1)
    throw new ChooseUsageError(`one region code at most, got ${positionals.map((p) => JSON.stringify(p)).join(' ')}`);
  const code = values.region ?? positionals[0];
  if (values.region !== undefined && positionals[0] !== undefined)
    throw new ChooseUsageError('give the region either as an argument or with --region, not both');
  const hasCoords = values.lat !== undefined || values.lon !== undefined;
  let data: DataLocation;
  if (code !== undefined && hasCoords) throw new ChooseUsageError('give either a region code or --lat/--lon, not both');
  if (code !== undefined) data = { kind: 'region', code };
  else if (values.lat !== undefined && values.lon !== undefined)
    data = { kind: 'coordinates', lat: strictNumber('lat', values.lat), lon: strictNumber('lon', values.lon) };
  else if (hasCoords) throw new ChooseUsageError('--lat and --lon go together');
  else throw new ChooseUsageError('say where the data is: a region code (eu-west-1, europe-west1, westeurope) or --lat/--lon');
  if (values.runtime === undefined) throw new ChooseUsageError('--runtime is required (e.g. --runtime 12m)');
  if (values.memory === undefined) throw new ChooseUsageError('--memory is required (e.g. --memory 3GB)');
  const trigger = values.trigger ?? 'event';
  if (trigger !== 'event' && trigger !== 'http')
    throw new ChooseUsageError(`--trigger must be event or http, got ${JSON.stringify(trigger)}`);
  if (!values['write-stack'] && (values.pick !== undefined || values.force || values['out-dir'] !== undefined)) {
    throw new ChooseUsageError('--pick, --force and --out-dir go with --write-stack');
  }
  return {
    data,
    runtimeSec: parseDuration(values.runtime),
    memoryMb: parseMemory(values.memory),
    trigger,
    costWeight: values['cost-weight'] === undefined ? undefined : strictNumber('cost-weight', values['cost-weight']),
    clouds: values.clouds === undefined ? undefined : parseClouds(values.clouds),
    limit: values.limit === undefined ? undefined : wholeNumber('limit', values.limit, 0),
    json: values.json ?? false,
    writeStack: values['write-stack'] ?? false,
    pick: values.pick === undefined ? undefined : wholeNumber('pick', values.pick, 1),
    gcpProject: values['gcp-project'],
    outDir: values['out-dir'],
    force: values.force ?? false,
  };
}

/** Options whose value may be a negative number. */
const SIGNED_OPTIONS = new Set(['--lat', '--lon']);

/**
 * `--lon -6.3` would read `-6.3` as a flag; join such pairs into `--lon=-6.3`
 * so western and southern coordinates can be typed the obvious way.
 */
function joinNegativeValues(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const next = argv[i + 1];
    if (SIGNED_OPTIONS.has(arg) && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i += 1;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** Left-aligned columns, two spaces apart. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

function header(result: ChooseResult): string {
  const loc = result.location;
  const where = loc.kind === 'region' ? ` (${loc.region.cloud}: ${loc.region.name})` : '';
  return `Choosing for: ${describeRequest(result.request)}${where}; cost weight ${result.request.costWeight}.`;
}

function renderText(result: ChooseResult, limit: number): string {
  const shown = limit === 0 ? result.choices : result.choices.slice(0, limit);
  const out: string[] = [header(result), ''];
  if (shown.length === 0) {
    out.push('No provider, region and plan can run this job.');
  } else {
    out.push(
      table(
        ['#', 'cloud', 'region', 'location', 'plan', 'distance', 'timeout', 'lease', 'queue vis.', 'memory', 'notes'],
        shown.map((c) => [
          String(c.rank),
          c.cloud,
          c.region.code,
          c.region.name,
          c.plan,
          formatKm(c.distanceKm),
          `${c.lease.functionTimeoutSec} s`,
          `${c.lease.leaseSec} s`,
          c.lease.visibilityTimeoutSec === undefined ? '-' : `${c.lease.visibilityTimeoutSec} s`,
          formatMemory(c.memoryMb),
          [c.sameRegion ? 'same region' : '', c.warnings.length > 0 ? `${c.warnings.length} to check` : ''].filter(Boolean).join(', '),
        ]),
      ),
    );
    if (shown.length < result.choices.length)
      out.push(`(${shown.length} of ${result.choices.length} feasible choices; --limit 0 shows all)`);
    // The same warning on many rows is printed once, with every row it applies to.
    const ranksByWarning = new Map<string, number[]>();
    for (const c of shown) for (const w of c.warnings) ranksByWarning.set(w, [...(ranksByWarning.get(w) ?? []), c.rank]);
    const checks = [...ranksByWarning].map(([w, ranks]) => `  ${ranks.map((r) => `#${r}`).join(', ')}: ${w}`);
    if (checks.length > 0) out.push('', 'Check before deploying:', ...checks);
  }
  if (result.rejections.length > 0) out.push('', 'Ruled out:', ...result.rejections.map((r) => `  - ${r.reason}`));
  return `${out.join('\n')}\n`;
}

function choiceJson(c: Choice) {
  return {
    rank: c.rank,
    cloud: c.cloud,
    region: { code: c.region.code, name: c.region.name, lat: c.region.lat, lon: c.region.lon },
    platform: c.platform,
    plan: c.plan,
    sameRegion: c.sameRegion,
    distanceKm: Math.round(c.distanceKm * 10) / 10,
    functionTimeoutSec: c.lease.functionTimeoutSec,
    leaseSec: c.lease.leaseSec,
    visibilityTimeoutSec: c.lease.visibilityTimeoutSec ?? null,
    memoryMb: c.memoryMb,
    score: Math.round(c.score * 1e6) / 1e6,
    warnings: c.warnings,
    stack: { file: stackFileName(c), ...c.settings },
  };
}

function renderJson(result: ChooseResult, limit: number | undefined, stackFile: string | undefined): string {
  const loc = result.location;
  const choices = limit === undefined || limit === 0 ? result.choices : result.choices.slice(0, limit);
  return `${JSON.stringify(
    {
      request: result.request,
      location:
        loc.kind === 'region'
          ? { kind: 'region', cloud: loc.region.cloud, code: loc.region.code, name: loc.region.name, ...loc.point }
          : { kind: 'coordinates', ...loc.point },
      choices: choices.map(choiceJson),
      feasibleCount: result.choices.length,
      rejections: result.rejections,
      ...(stackFile === undefined ? {} : { stackFile }),
    },
    null,
    2,
  )}\n`;
}

const OFFER_KEYS_BY_CLOUD: Readonly<Record<Cloud, readonly OfferKey[]>> = {
  aws: ['lambda', 'dynamodb'],
  gcp: ['gcf2', 'firestore'],
  azure: ['consumption', 'flex', 'premium', 'tableStorage'],
};

function renderRegions(regions: readonly Region[], json: boolean): string {
  if (json) return `${JSON.stringify(regions, null, 2)}\n`;
  const rows = regions.map((r) => {
    const offers = r.offers as unknown as Record<OfferKey, string>;
    const listed = OFFER_KEYS_BY_CLOUD[r.cloud].map((k) => `${OFFER_LABELS[k].replace(/^Azure (Functions )?/, '')}: ${offers[k]}`);
    return [r.cloud, r.code, r.name, `${r.lat}, ${r.lon}`, listed.join('; ')];
  });
  return `${table(['cloud', 'code', 'location', 'lat, lon', 'offers'], rows)}\n\nSources and dates: shared/domain/provider-catalog/regions.ts (CATALOG_SOURCES).\n`;
}

/** Write the stack file create-only (or over an existing one with --force). */
async function writeStack(
  result: ChooseResult,
  opts: Options,
  io: ChooseIo,
): Promise<{ ok: true; path: string } | { ok: false; exitCode: number }> {
  const index = (opts.pick ?? 1) - 1;
  const choice = result.choices[index];
  if (!choice) {
    io.stderr(`tessera choose: --pick ${index + 1} but there are ${result.choices.length} feasible choices\n`);
    return { ok: false, exitCode: 2 };
  }
  const text = renderStackFile(result, choice, { gcpProject: opts.gcpProject });
  const dir = opts.outDir === undefined ? io.cwd : isAbsolute(opts.outDir) ? opts.outDir : resolve(io.cwd, opts.outDir);
  const path = join(dir, stackFileName(choice));
  try {
    // 'wx' fails if the file exists: the check and the write are one step, so two runs cannot both win.
    await writeFile(path, text, { encoding: 'utf8', flag: opts.force ? 'w' : 'wx' });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      io.stderr(
        `tessera choose: ${path} already exists; not overwriting it (pass --force to replace it, or --out-dir to write elsewhere)\n`,
      );
      return { ok: false, exitCode: 1 };
    }
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      io.stderr(`tessera choose: --out-dir ${dir} does not exist or is not a directory; create it first\n`);
      return { ok: false, exitCode: 2 };
    }
    throw error;
  }
  io.stderr(`wrote ${path} (stack ${choice.cloud}-${choice.region.code}: ${choice.plan}, choice #${choice.rank})\n`);
  return { ok: true, path };
}

/**
 * `tessera choose`: parse the arguments strictly, rank the choices, print
 * them (table or JSON) and optionally write the stack file of one.
 *
 * @returns the exit status: 0 found, 1 nothing feasible or the stack file exists, 2 bad input.
 */
export async function chooseCommand(argv: string[], io: ChooseIo): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: joinNegativeValues(argv), options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    io.stderr(`tessera choose: ${error instanceof Error ? error.message : String(error)}\n\n${chooseHelp}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.stdout(`${chooseHelp}\n`);
    return 0;
  }
  if (values['list-regions']) {
    io.stdout(renderRegions(ALL_REGIONS, values.json ?? false));
    return 0;
  }
  let opts: Options;
  let result: ChooseResult;
  try {
    opts = parseOptions(values, positionals);
    result = chooseProvider({
      data: opts.data,
      runtimeSec: opts.runtimeSec,
      memoryMb: opts.memoryMb,
      trigger: opts.trigger,
      costWeight: opts.costWeight,
      clouds: opts.clouds,
    });
  } catch (error) {
    if (error instanceof ChooseUsageError) {
      io.stderr(`tessera choose: ${error.message}\n\nRun \`tessera choose --help\` for the options.\n`);
      return 2;
    }
    if (error instanceof TesseraError) {
      io.stderr(`tessera choose: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  let stackPath: string | undefined;
  if (opts.writeStack && result.choices.length > 0) {
    try {
      const written = await writeStack(result, opts, io);
      if (!written.ok) return written.exitCode;
      stackPath = written.path;
    } catch (error) {
      if (error instanceof TesseraError) {
        io.stderr(`tessera choose: ${error.message}\n`);
        return 2;
      }
      throw error;
    }
  }
  io.stdout(opts.json ? renderJson(result, opts.limit, stackPath) : renderText(result, opts.limit ?? DEFAULT_LIMIT));
  return result.choices.length > 0 ? 0 : 1;
}
