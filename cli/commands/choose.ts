import { readFile, writeFile } from 'node:fs/promises';
import { isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { TesseraError } from '../../shared/domain/errors.js';
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
} from '../../shared/placement/catalog/index.js';
import {
  type Choice,
  type ChooseResult,
  chooseProvider,
  type DataLocation,
  DEFAULT_COST_WEIGHT,
  describeRequest,
  renderStackFile,
  stackFileName,
} from '../../shared/placement/choose-provider.js';
import type { CostLine } from '../../shared/placement/cost-model.js';
import {
  DTYPE_BYTES,
  type Dtype,
  parseBytes,
  parseLocation,
  type SceneGrid,
  type Workload,
  type WorkloadInput,
} from '../../shared/placement/workload.js';

/** What a command may touch: output streams and the directory stack files go to. */
export interface ChooseIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
}

const DEFAULT_LIMIT = 10;

export const chooseHelp = `tessera choose: rank provider + region + plan for a tile job, and write its stack file

Usage: tessera choose <region-code> --runtime <duration> --memory <size> [options]
       tessera choose --data CLOUD:REGION --runtime <duration> --memory <size> [workload] [options]
       tessera choose --lat <deg> --lon <deg> --runtime <duration> --memory <size> [options]
       tessera choose --workload <file.yaml|file.json> [options]

Where the data is (one of):
  <region-code>, --region <code>  a provider region: eu-west-1, europe-west1, westeurope
  --data CLOUD:REGION             the same with its cloud: aws:eu-west-1, gcp:europe-west1, azure:westeurope
  --data CLOUD:LAT,LON            a point whose store is on CLOUD (its nearest region is priced)
  --lat <deg> --lon <deg>         decimal degrees, e.g. --lat 52.37 --lon 4.90 (transfer from it not priced)

The job:
  --runtime <duration>    expected runtime of one tile job: 720 (seconds), 90s, 12m, 1h30m
  --memory <size>         peak memory of one tile job: 2048 (MB), 512MB, 3GB (1 GB = 1,024 MB)
  --trigger event|http    how the tile worker is invoked (default event: a queue or Pub/Sub trigger).
                          On GCP it picks the function type (event: 9 min ceiling, http: 60 min);
                          on Azure an HTTP execution must answer within 230 s.

The workload (priced at list prices, USD; default: the \`tessera run\` demo scene once a month):
  --scenes-per-month <n>  scenes processed a month (default 1)
  --scene-size <size>     bytes of one scene: 10GB, 512MB (1 GB = 2^30 bytes); or the grid:
  --width <px> --height <px> --bands <n> --dtype <${Object.keys(DTYPE_BYTES).join('|')}>
  --tiles <n>             tiles per scene; or --tile-px <px> with the grid (default 256 px)
  --duplicate-rate <0..1> share of tile jobs delivered twice (default 0.01)
  --retention <days>      how long tiles and mosaic are kept (default 30)
  --outputs CLOUD:REGION  where the outputs must live (priced: their transfer and storage there)
  --free-tier             apply the clouds' monthly free tiers (off: they are per account and shared)
  --workload <file>       YAML or JSON with the same fields (scenes-per-month: 1000, scene-size: 10GB,
                          runtime: 20s, memory: 2GB, data: aws:eu-west-1, ...); flags override it

Ranking and output:
  --clouds <list>         clouds to consider, comma-separated (default aws,gcp,azure)
  --cost-weight <0..1>    weight of cost against distance (default ${DEFAULT_COST_WEIGHT}; 0 = nearest first,
                          1 = cheapest first; the data's own region always comes first)
  --limit <n>             rows to print (default ${DEFAULT_LIMIT}; 0 = all; --json prints all unless given)
  --breakdown <n>         print the cost lines of the n-th choice (default 1, the top one)
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
  readonly workload: WorkloadInput;
  readonly limit: number | undefined;
  readonly breakdown: number;
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
  data: { type: 'string' },
  runtime: { type: 'string' },
  memory: { type: 'string' },
  trigger: { type: 'string' },
  clouds: { type: 'string' },
  'cost-weight': { type: 'string' },
  'scenes-per-month': { type: 'string' },
  'scene-size': { type: 'string' },
  width: { type: 'string' },
  height: { type: 'string' },
  bands: { type: 'string' },
  dtype: { type: 'string' },
  tiles: { type: 'string' },
  'tile-px': { type: 'string' },
  'duplicate-rate': { type: 'string' },
  retention: { type: 'string' },
  outputs: { type: 'string' },
  'free-tier': { type: 'boolean' },
  workload: { type: 'string' },
  limit: { type: 'string' },
  breakdown: { type: 'string' },
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

type Values = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'string' ? string : boolean };

/** `--data aws:eu-west-1` or `--data aws:53.35,-6.26`. */
function parseData(raw: string): DataLocation {
  const point = /^\s*([a-z]+)\s*:\s*([-+]?\d+(?:\.\d+)?)\s*,\s*([-+]?\d+(?:\.\d+)?)\s*$/i.exec(raw);
  if (point) {
    const { cloud } = parseLocation(`${point[1]}:x`, '--data');
    return { kind: 'coordinates', lat: Number(point[2]), lon: Number(point[3]), cloud };
  }
  const { cloud, region } = parseLocation(raw, '--data');
  return { kind: 'region', code: region, cloud };
}

function optionalWhole(values: Values, flag: 'scenes-per-month' | 'width' | 'height' | 'bands' | 'tiles' | 'tile-px'): number | undefined {
  const raw = values[flag];
  return raw === undefined ? undefined : wholeNumber(flag, raw, 1);
}

/** `30`, `30d`, `90 days`. */
function parseRetention(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(d|days?)?\s*$/i.exec(raw);
  if (!m) throw new ChooseUsageError(`--retention takes days (30, 30d, 90 days), got ${JSON.stringify(raw)}`);
  return Number(m[1]);
}

function workloadOf(values: Values): WorkloadInput {
  const gridFlags = (['width', 'height', 'bands', 'dtype'] as const).filter((f) => values[f] !== undefined);
  let grid: SceneGrid | undefined;
  if (gridFlags.length > 0) {
    if (gridFlags.length < 4) {
      throw new ChooseUsageError(
        `the grid needs --width, --height, --bands and --dtype together; got only ${gridFlags.map((f) => `--${f}`).join(', ')}`,
      );
    }
    const dtype = (values.dtype ?? '').toLowerCase();
    if (!Object.hasOwn(DTYPE_BYTES, dtype))
      throw new ChooseUsageError(`--dtype must be one of ${Object.keys(DTYPE_BYTES).join(', ')}, got ${JSON.stringify(values.dtype)}`);
    grid = {
      width: optionalWhole(values, 'width') as number,
      height: optionalWhole(values, 'height') as number,
      bands: optionalWhole(values, 'bands') as number,
      dtype: dtype as Dtype,
    };
  }
  return {
    scenesPerMonth: optionalWhole(values, 'scenes-per-month'),
    sceneBytes: values['scene-size'] === undefined ? undefined : parseBytes(values['scene-size']),
    grid,
    tiles: optionalWhole(values, 'tiles'),
    tilePx: optionalWhole(values, 'tile-px'),
    duplicateRate: values['duplicate-rate'] === undefined ? undefined : strictNumber('duplicate-rate', values['duplicate-rate']),
    retentionDays: values.retention === undefined ? undefined : parseRetention(values.retention),
    outputs: values.outputs === undefined ? undefined : parseLocation(values.outputs, '--outputs'),
    freeTier: values['free-tier'] ?? false,
  };
}

function parseOptions(values: Values, positionals: string[]): Options {
  if (positionals.length > 1)
    throw new ChooseUsageError(`one region code at most, got ${positionals.map((p) => JSON.stringify(p)).join(' ')}`);
  const code = values.region ?? positionals[0];
  if (values.region !== undefined && positionals[0] !== undefined)
    throw new ChooseUsageError('give the region either as an argument or with --region, not both');
  const hasCoords = values.lat !== undefined || values.lon !== undefined;
  let data: DataLocation;
  if (code !== undefined && hasCoords) throw new ChooseUsageError('give either a region code or --lat/--lon, not both');
  if (values.data !== undefined && (code !== undefined || hasCoords))
    throw new ChooseUsageError('give the data either with --data or as a region code or --lat/--lon, not both');
  if (values.data !== undefined) data = parseData(values.data);
  else if (code !== undefined) data = { kind: 'region', code };
  else if (values.lat !== undefined && values.lon !== undefined)
    data = { kind: 'coordinates', lat: strictNumber('lat', values.lat), lon: strictNumber('lon', values.lon) };
  else if (hasCoords) throw new ChooseUsageError('--lat and --lon go together');
  else
    throw new ChooseUsageError(
      'say where the data is: --data aws:eu-west-1, a region code (eu-west-1, europe-west1, westeurope) or --lat/--lon',
    );
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
    workload: workloadOf(values),
    limit: values.limit === undefined ? undefined : wholeNumber('limit', values.limit, 0),
    breakdown: values.breakdown === undefined ? 1 : wholeNumber('breakdown', values.breakdown, 1),
    json: values.json ?? false,
    writeStack: values['write-stack'] ?? false,
    pick: values.pick === undefined ? undefined : wholeNumber('pick', values.pick, 1),
    gcpProject: values['gcp-project'],
    outDir: values['out-dir'],
    force: values.force ?? false,
  };
}

/** Fields a workload file may set: the job, the data and the workload, not how the output is printed. */
const FILE_KEYS = [
  'region',
  'lat',
  'lon',
  'data',
  'runtime',
  'memory',
  'trigger',
  'clouds',
  'cost-weight',
  'scenes-per-month',
  'scene-size',
  'width',
  'height',
  'bands',
  'dtype',
  'tiles',
  'tile-px',
  'duplicate-rate',
  'retention',
  'outputs',
  'free-tier',
] as const;
const LOCATION_KEYS = ['region', 'lat', 'lon', 'data'] as const;

/**
 * Read a workload file (YAML, or JSON for `.json`) into flag values. Keys are
 * the flags' names, in kebab-case or camelCase (`scenes-per-month` or
 * `scenesPerMonth`); the grid may be a `grid:` map; `scene-bytes` is a bare
 * byte count for `scene-size`.
 */
async function loadWorkloadFile(path: string, cwd: string): Promise<Values> {
  const full = isAbsolute(path) ? path : resolve(cwd, path);
  const json = full.toLowerCase().endsWith('.json');
  let text: string;
  try {
    text = await readFile(full, 'utf8');
  } catch (error) {
    throw new ChooseUsageError(
      `--workload ${full} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)}); check the path`,
    );
  }
  let raw: unknown;
  try {
    raw = json ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new ChooseUsageError(
      `--workload ${full} is not valid ${json ? 'JSON' : 'YAML'}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ChooseUsageError(`--workload ${full} must hold a map of fields (scenes-per-month: 1000, scene-size: 10GB, ...)`);
  }
  const entries = Object.entries(raw as Record<string, unknown>).flatMap(([key, value]) =>
    key === 'grid' && typeof value === 'object' && value !== null && !Array.isArray(value)
      ? Object.entries(value)
      : [[key, value] as const],
  );
  const out: Record<string, string | boolean> = {};
  for (const [key, value] of entries) {
    const kebab = key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`).replace(/_/g, '-');
    const flag = kebab === 'scene-bytes' ? 'scene-size' : kebab;
    if (!(FILE_KEYS as readonly string[]).includes(flag)) {
      throw new ChooseUsageError(`--workload ${full}: unknown field ${JSON.stringify(key)}; the fields are ${FILE_KEYS.join(', ')}`);
    }
    if (flag === 'free-tier') {
      if (typeof value !== 'boolean') throw new ChooseUsageError(`--workload ${full}: ${key} must be true or false`);
      out[flag] = value;
    } else if (typeof value === 'string' || typeof value === 'number') {
      out[flag] = String(value);
    } else {
      throw new ChooseUsageError(`--workload ${full}: ${key} must be a string or a number, got ${JSON.stringify(value)}`);
    }
  }
  return out as Values;
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

/** `$1,234`, `$12.34`, `$0.123`, `$0.0012`; `<$0.0001` for crumbs. Figures rest on list prices: no more digits than they carry. */
export function formatUsd(x: number): string {
  if (x === 0) return '$0';
  if (x < 0.0001) return '<$0.0001';
  if (x >= 100) return `$${Math.round(x).toLocaleString('en-US')}`;
  if (x >= 1) return `$${x.toFixed(2)}`;
  if (x >= 0.01) return `$${x.toFixed(3)}`;
  return `$${x.toFixed(4)}`;
}

/** A unit price: `$0.023`, or per million units when a unit costs under a tenth of a cent (`$13.33 per 1M`). */
function formatUnitPrice(x: number): string {
  return x >= 0.001 || x === 0 ? `$${Number(x.toPrecision(4))}` : `$${Number((x * 1e6).toPrecision(4))} per 1M`;
}

function largestLine(lines: readonly CostLine[]): CostLine | undefined {
  return lines.reduce<CostLine | undefined>((best, l) => (best === undefined || l.cost > best.cost ? l : best), undefined);
}

function share(part: number, whole: number): string {
  return whole > 0 ? `${Math.round((100 * part) / whole)} %` : '-';
}

function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${units[i]}`;
}

/** One line saying what was priced. */
function describeWorkload(w: Workload): string {
  const grid = w.grid ? ` (${w.grid.width} x ${w.grid.height} px, ${w.grid.bands} ${w.grid.dtype} bands)` : '';
  const outputs = w.outputs ? `; outputs to ${w.outputs.cloud}:${w.outputs.region}` : '';
  return (
    `Priced for ${w.scenesPerMonth.toLocaleString('en-US')} scene${w.scenesPerMonth === 1 ? '' : 's'} a month of ${formatBytes(w.sceneBytes)}${grid}, ` +
    `${w.tiles.toLocaleString('en-US')} tiles each, ${Math.round(w.duplicateRate * 1000) / 10} % duplicates, outputs kept ${w.retentionDays} days${outputs}; ` +
    `list prices in USD${w.freeTier ? ', free tiers applied' : ', no free tier'}.`
  );
}

function renderBreakdown(c: Choice): string[] {
  const total = c.cost.costPerMonth;
  return [
    '',
    `Cost of #${c.rank} (${c.plan} in ${c.region.code}), a month:`,
    table(
      ['item', 'quantity', 'unit', 'unit price', 'cost', 'share'],
      c.cost.lines.map((l) => [
        `${l.item}${l.unconfirmed ? ' *' : ''}`,
        Number(l.quantity.toPrecision(6)).toLocaleString('en-US'),
        l.unit,
        formatUnitPrice(l.unitPrice),
        formatUsd(l.cost),
        share(l.cost, total),
      ]),
    )
      .split('\n')
      .map((line) => `  ${line}`)
      .join('\n'),
    `  total ${formatUsd(total)} a month, ${formatUsd(c.cost.costPerScene)} a scene${c.cost.lines.some((l) => l.unconfirmed) ? '; * unconfirmed price (shared/placement/prices/)' : ''}`,
    ...c.cost.notes.map((n) => `  note: ${n}`),
  ];
}

function renderText(result: ChooseResult, limit: number, breakdown: number): string {
  const shown = limit === 0 ? result.choices : result.choices.slice(0, limit);
  const out: string[] = [header(result), ''];
  if (shown.length === 0) {
    out.push('No provider, region and plan can run this job.');
  } else {
    out.push(
      table(
        [
          '#',
          'cloud',
          'region',
          'location',
          'plan',
          'distance',
          'timeout',
          'lease',
          'queue vis.',
          'memory',
          '$/scene',
          '$/month',
          'largest line',
          'notes',
        ],
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
          formatUsd(c.cost.costPerScene),
          formatUsd(c.cost.costPerMonth),
          ((l) => (l ? `${l.item} (${share(l.cost, c.cost.costPerMonth)})` : '-'))(largestLine(c.cost.lines)),
          [c.sameRegion ? 'same region' : '', c.warnings.length > 0 ? `${c.warnings.length} to check` : ''].filter(Boolean).join(', '),
        ]),
      ),
    );
    if (shown.length < result.choices.length)
      out.push(`(${shown.length} of ${result.choices.length} feasible choices; --limit 0 shows all)`);
    out.push(describeWorkload(result.request.workload));
    const explained = result.choices[breakdown - 1];
    if (explained) out.push(...renderBreakdown(explained));
    else out.push('', `(--breakdown ${breakdown}: there are ${result.choices.length} feasible choices)`);
    // The same warning on many rows is printed once, with every row it applies to.
    const ranksByWarning = new Map<string, number[]>();
    for (const c of shown) for (const w of c.warnings) ranksByWarning.set(w, [...(ranksByWarning.get(w) ?? []), c.rank]);
    const checks = [...ranksByWarning].map(([w, ranks]) => `  ${ranks.map((r) => `#${r}`).join(', ')}: ${w}`);
    if (checks.length > 0) out.push('', 'Check before deploying:', ...checks);
  }
  if (result.rejections.length > 0) out.push('', 'Ruled out:', ...result.rejections.map((r) => `  - ${r.reason}`));
  return `${out.join('\n')}\n`;
}

/** Costs in USD to a millionth of a dollar: list prices carry no more. */
function money(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}

function choiceJson(c: Choice) {
  return {
    cloud: c.cloud,
    region: c.region.code,
    plan: c.plan,
    feasible: true,
    costPerScene: money(c.cost.costPerScene),
    costPerMonth: money(c.cost.costPerMonth),
    lines: c.cost.lines.map((l) => ({ item: l.item, quantity: l.quantity, unit: l.unit, unitPrice: l.unitPrice, cost: money(l.cost) })),
    notes: [...c.warnings, ...c.cost.notes, ...c.cost.lines.filter((l) => l.unconfirmed).map((l) => `unconfirmed price: ${l.item}`)],
  };
}

/** The workload as priced, with the job and the data's place. */
function workloadJson(result: ChooseResult) {
  const req = result.request;
  const w = req.workload;
  const loc = result.location;
  const site = loc.site.kind === 'known' ? `${loc.site.region.cloud}:${loc.site.region.code}` : null;
  return {
    scenesPerMonth: w.scenesPerMonth,
    sceneBytes: w.sceneBytes,
    grid: w.grid ?? null,
    tiles: w.tiles,
    runtimeSec: req.runtimeSec,
    memoryMb: req.memoryMb,
    trigger: req.trigger,
    duplicateRate: w.duplicateRate,
    retentionDays: w.retentionDays,
    freeTier: w.freeTier,
    data: loc.kind === 'region' ? site : { lat: loc.point.lat, lon: loc.point.lon, pricedAs: site },
    outputs: result.outputs === undefined ? null : `${result.outputs.cloud}:${result.outputs.code}`,
    rangesPerTile: w.rangesPerTile,
    outputBytesPerScene: w.outputBytesPerScene,
    costWeight: req.costWeight,
    currency: 'USD',
  };
}

function renderJson(result: ChooseResult, limit: number | undefined): string {
  const choices = limit === undefined || limit === 0 ? result.choices : result.choices.slice(0, limit);
  return `${JSON.stringify({ workload: workloadJson(result), choices: choices.map(choiceJson), ruledOut: result.rejections }, null, 2)}\n`;
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
  return `${table(['cloud', 'code', 'location', 'lat, lon', 'offers'], rows)}\n\nSources and dates: shared/placement/catalog/regions.ts (CATALOG_SOURCES).\n`;
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
    let merged: Values = values;
    if (values.workload !== undefined) {
      const file: Record<string, unknown> = { ...(await loadWorkloadFile(values.workload, io.cwd)) };
      // A place given on the command line replaces the file's, whichever form each uses.
      const placeOnCommandLine = positionals.length > 0 || LOCATION_KEYS.some((k) => values[k] !== undefined);
      if (placeOnCommandLine) for (const k of LOCATION_KEYS) delete file[k];
      merged = { ...(file as Values), ...values };
    }
    opts = parseOptions(merged, positionals);
    result = chooseProvider({
      data: opts.data,
      runtimeSec: opts.runtimeSec,
      memoryMb: opts.memoryMb,
      trigger: opts.trigger,
      costWeight: opts.costWeight,
      clouds: opts.clouds,
      workload: opts.workload,
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
  if (opts.writeStack && result.choices.length > 0) {
    try {
      const written = await writeStack(result, opts, io);
      if (!written.ok) return written.exitCode;
    } catch (error) {
      if (error instanceof TesseraError) {
        io.stderr(`tessera choose: ${error.message}\n`);
        return 2;
      }
      throw error;
    }
  }
  io.stdout(opts.json ? renderJson(result, opts.limit) : renderText(result, opts.limit ?? DEFAULT_LIMIT, opts.breakdown));
  return result.choices.length > 0 ? 0 : 1;
}
