import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as pulumi from '@pulumi/pulumi';
import type { Platform } from '../../shared/domain/ceilings.js';
import type { ColormapName, TileFormat } from '../../shared/domain/render-params.js';
import type { OutputCompression } from '../../shared/domain/tiling-params.js';
import {
  type Cloud,
  type ConfigKey,
  closestKey,
  featureSinkUrlProblem,
  PROVIDER_REGION_KEY,
  resolveSettings,
  type SecretSetting,
  type SettingsDialect,
  type StackConfig,
} from '../common/config.js';
import { archivesFor, type CloudArchives, MissingArchiveError } from '../common/packaging.js';
import { type StandardTags, standardTags } from '../common/tags.js';

/**
 * What the three components share: their args (one validation with the stack files, infra/common/config.ts), the
 * typed error a bad arg gets, where the function archives are found, and what they publish.
 */

/**
 * The settings every Tessera component takes (`TesseraAws`, `TesseraGcp`, `TesseraAzure`). Every one is optional:
 * the defaults are those of a stack file (docs/deploy.md, "Configuration keys"), and each arg is validated as
 * `tessera preflight` validates a stack file, before any resource is registered.
 */
export interface TesseraArgs {
  /**
   * The region Tessera deploys to (the provider's region code, e.g. `eu-west-1`). On AWS it must be the region of the provider the resources use (`aws:region` or `AWS_REGION`, unless the options pass a `provider`); GCP and Azure resources name their region themselves.
   * @defaultValue the provider's region (`aws:region` or `AWS_REGION`; `gcp:region`; `azure-native:location`)
   */
  readonly region?: string | undefined;
  /**
   * Tile worker timeout in seconds; refused above the platform's ceiling.
   * @defaultValue the platform ceiling: Lambda 900, GCF event 540, GCF http 3600, Consumption 600, Flex 1800
   */
  readonly functionTimeoutSeconds?: number | undefined;
  /**
   * Claim lease in seconds; refused at or below the ceiling (Flex: at or below the timeout).
   * @defaultValue Lambda 1200, GCF event 840, GCF http 3900, Consumption 900, Flex timeout + 300
   */
  readonly leaseSeconds?: number | undefined;
  /**
   * Tile worker memory in MB (Flex: an instance size, 512, 2048 or 4096).
   * @defaultValue 2048 (Azure Consumption: 1536)
   */
  readonly memoryMb?: number | undefined;
  /**
   * Deliveries before a message is dead-lettered (SQS 1-1000, Pub/Sub 5-100, Azure 3-100).
   * @defaultValue 5
   */
  readonly maxReceiveCount?: number | undefined;
  /**
   * Only source objects under this prefix start a scene; it may not overlap `staging/`, `streams/` or an output prefix.
   * @defaultValue `scenes/`
   */
  readonly sourcePrefix?: string | undefined;
  /**
   * Only source objects with this suffix start a scene (a STAC stack's ends in `.json`).
   * @defaultValue `.tif` (`.json` when `stacAssets` is set)
   */
  readonly sourceSuffix?: string | undefined;
  /**
   * A STAC stack: band name -> STAC asset (asset key, `ASSET:INDEX` or an `eo:bands` name), e.g. `{ B04: 'red', B08: 'nir' }`; scenes then start on their STAC Item.
   * @defaultValue none: one file per scene
   */
  readonly stacAssets?: Readonly<Record<string, string>> | undefined;
  /**
   * Tile edge in pixels.
   * @defaultValue 512
   */
  readonly tilePx?: number | undefined;
  /**
   * Tile matrix set the tiles are cut from, with `zoom`: `WebMercatorQuad`, `WorldCRS84Quad` or `UTMnnWGS84Quad`.
   * @defaultValue none: tiles of `tilePx` in the scene's own grid
   */
  readonly tms?: string | undefined;
  /**
   * Zoom of `tms`, or a range `[min, max]`: a pyramid, every zoom its own tiles (docs/pyramids.md).
   * @defaultValue none (set with `tms`)
   */
  readonly zoom?: number | readonly [min: number, max: number] | undefined;
  /**
   * Pipeline version in the processing parameters; changing it changes every job key.
   * @defaultValue `1.0.0`
   */
  readonly pipelineVersion?: string | undefined;
  /**
   * Band-math expression evaluated per pixel.
   * @defaultValue `(B08 - B04) / (B08 + B04)`
   */
  readonly expression?: string | undefined;
  /**
   * Tile compression: `DEFLATE`, `ZSTD` or `NONE`; part of every job key.
   * @defaultValue the default output profile (DEFLATE 9)
   */
  readonly compression?: OutputCompression | undefined;
  /**
   * Level of the tile compression: DEFLATE 1-9, ZSTD 1-22; part of every job key.
   * @defaultValue the profile's; a codec named alone: DEFLATE 6, ZSTD 9
   */
  readonly compressionLevel?: number | undefined;
  /**
   * Tile format: `COG` (float32, for analysis) or `PNG`, `WEBP`, `JPEG` (rendered for web maps, docs/web-maps.md).
   * @defaultValue `COG`
   */
  readonly format?: TileFormat | undefined;
  /**
   * Rendered formats: the values `[min, max]` mapped onto the 256 levels, e.g. `[-1, 1]` for NDVI (required with them).
   * @defaultValue none
   */
  readonly rescale?: readonly [min: number, max: number] | undefined;
  /**
   * Rendered formats: `viridis`, `plasma`, `magma`, `inferno`, `rdylgn` or `greys`.
   * @defaultValue grey levels
   */
  readonly colormap?: ColormapName | undefined;
  /**
   * JPEG only (required there): the colour `[r, g, b]` nodata and masked pixels get, JPEG having no transparency.
   * @defaultValue none
   */
  readonly background?: readonly [r: number, g: number, b: number] | undefined;
  /**
   * The mosaics of every scene: `vrt` (the VRT), `cog` (also one COG mosaic of COG tiles) or `pmtiles` (also one PMTiles
   * archive of every zoom of rendered tiles on WebMercatorQuad: docs/web-maps.md).
   * @defaultValue `vrt`
   */
  readonly mosaic?: 'vrt' | 'cog' | 'pmtiles' | undefined;
  /**
   * How long claim rows are kept (TTL) after their lease, in seconds; must exceed the lease.
   * @defaultValue 604800 (7 days)
   */
  readonly retentionSeconds?: number | undefined;
  /**
   * Days an ingest staging object (`staging/` of the source bucket) is kept before the lifecycle rule deletes it (1-3650).
   * @defaultValue 7
   */
  readonly stagingRetentionDays?: number | undefined;
  /**
   * Hosts the ingest function may fetch from (`example.com`, `*.example.com`).
   * @defaultValue none: any public host, a remote Item's assets on its own host only
   */
  readonly ingestAllowedHosts?: readonly string[] | undefined;
  /**
   * Address that receives the lease-stolen and dead-letter alarms.
   * @defaultValue none
   */
  readonly alertEmail?: string | undefined;
  /**
   * PostGIS feature sink of the tile function, `postgis://user:password@host:5432/db`; pass a secret (`config.requireSecret(...)`): the component keeps it in the cloud's secret store, readable by the tile function only.
   * @defaultValue none
   */
  readonly featureSinkUrl?: pulumi.Input<string> | undefined;
  /**
   * Origins (`https://maps.example.org`, or `*`) whose web pages may read the output bucket cross-origin: GET and HEAD with Range. CORS admits an origin; it grants no access.
   * @defaultValue none: no CORS rule
   */
  readonly outputCorsOrigins?: readonly string[] | undefined;
  /**
   * OpenTelemetry export of traces and metrics (docs/telemetry.md): `off`, `cloud` (AWS: ADOT to X-Ray and CloudWatch; GCP: Cloud Trace and Monitoring; Azure: Application Insights), or `{ exporter: 'otlp', endpoint: 'https://collector:4318', sampling: 0.1 }`.
   * @defaultValue `off`
   */
  readonly telemetry?: 'off' | 'cloud' | TelemetryArgs | undefined;
  /**
   * Headers of the otlp exporter (`key=value,...`, an API key); pass a secret: the component keeps it in the cloud's secret store.
   * @defaultValue none
   */
  readonly telemetryHeaders?: pulumi.Input<string> | undefined;
  /**
   * Node.js runtime id of every function, checked against the dated table in `shared/domain/runtimes.ts`.
   * @defaultValue `nodejs24.x` / `nodejs24` / `Node|22` (Consumption) / `22` (Flex)
   */
  readonly runtime?: string | undefined;
  /**
   * Folder holding the function archives (`npm run build:functions` output: `aws/*.zip`, `gcp/source.zip`, `azure/app.zip`).
   * @defaultValue `$TESSERA_ARCHIVE_DIR`, else `dist/` of the package root (the repository in a clone, `node_modules/tessera` when installed)
   */
  readonly archiveDir?: string | undefined;
  /**
   * More tags (AWS, Azure) or labels (GCP) for every resource that takes them, beside `project`, `stack`, `cloud`, `managed-by` and `tessera-component`.
   * @defaultValue none
   */
  readonly tags?: Readonly<Record<string, string>> | undefined;
}

/** `telemetry` as an object: the exporter and its settings (docs/telemetry.md). */
export interface TelemetryArgs {
  readonly exporter: 'off' | 'cloud' | 'otlp';
  /** otlp: the OTLP/HTTP base URL (the SDK adds /v1/traces and /v1/metrics). */
  readonly endpoint?: string | undefined;
  /** The share of deliveries traced, above 0 and at most 1. */
  readonly sampling?: number | undefined;
  /** cloud, AWS: the ADOT collector layer version ARN to use. */
  readonly collectorLayerArn?: string | undefined;
}

/** How an arg is written, and the setting of the shared validation it feeds. */
interface ArgSpec {
  readonly kind: 'number' | 'string' | 'strings' | 'numbers' | 'zoom' | 'record' | 'json' | 'secret';
  /** The setting (infra/common/config.ts) it is; `gcp:project` and `tags` are not settings. */
  readonly setting: ConfigKey | 'gcp:project' | 'tags';
}

/** Every common arg and its setting; the cloud specs add their own ({@link ArgSpecs} keeps each complete). */
export const COMMON_ARGS = {
  region: { kind: 'string', setting: 'region' },
  functionTimeoutSeconds: { kind: 'number', setting: 'functionTimeoutSeconds' },
  leaseSeconds: { kind: 'number', setting: 'leaseSeconds' },
  memoryMb: { kind: 'number', setting: 'memoryMb' },
  maxReceiveCount: { kind: 'number', setting: 'maxReceiveCount' },
  sourcePrefix: { kind: 'string', setting: 'sourcePrefix' },
  sourceSuffix: { kind: 'string', setting: 'sourceSuffix' },
  stacAssets: { kind: 'record', setting: 'stacAssets' },
  tilePx: { kind: 'number', setting: 'tilePx' },
  tms: { kind: 'string', setting: 'tms' },
  zoom: { kind: 'zoom', setting: 'zoom' },
  pipelineVersion: { kind: 'string', setting: 'pipelineVersion' },
  expression: { kind: 'string', setting: 'expression' },
  compression: { kind: 'string', setting: 'compression' },
  compressionLevel: { kind: 'number', setting: 'compressionLevel' },
  format: { kind: 'string', setting: 'format' },
  rescale: { kind: 'numbers', setting: 'rescale' },
  colormap: { kind: 'string', setting: 'colormap' },
  background: { kind: 'numbers', setting: 'background' },
  mosaic: { kind: 'string', setting: 'mosaic' },
  retentionSeconds: { kind: 'number', setting: 'retentionSeconds' },
  stagingRetentionDays: { kind: 'number', setting: 'stagingRetentionDays' },
  ingestAllowedHosts: { kind: 'strings', setting: 'ingestAllowedHosts' },
  alertEmail: { kind: 'string', setting: 'alertEmail' },
  featureSinkUrl: { kind: 'secret', setting: 'featureSinkUrl' },
  outputCorsOrigins: { kind: 'strings', setting: 'outputCorsOrigins' },
  telemetry: { kind: 'json', setting: 'telemetry' },
  telemetryHeaders: { kind: 'secret', setting: 'telemetryHeaders' },
  runtime: { kind: 'string', setting: 'runtime' },
  archiveDir: { kind: 'string', setting: 'archiveDir' },
  tags: { kind: 'record', setting: 'tags' },
} as const satisfies ArgSpecs<TesseraArgs>;

/** One spec per arg of `A`, no more, no fewer: an arg added to an Args type without a spec fails to compile. */
export type ArgSpecs<A> = { readonly [K in keyof Required<A>]: ArgSpec };

/** The args only one cloud's component takes, and their settings; each component's spec is COMMON_ARGS and its own. */
export const CLOUD_ARGS = {
  aws: { tileMaxConcurrency: { kind: 'number', setting: 'tileMaxConcurrency' } },
  gcp: {
    project: { kind: 'string', setting: 'gcp:project' },
    tileTrigger: { kind: 'string', setting: 'gcpTileTrigger' },
    claimsCollection: { kind: 'string', setting: 'claimsCollection' },
    firestoreDatabase: { kind: 'string', setting: 'gcpFirestoreDatabase' },
  },
  azure: {
    plan: { kind: 'string', setting: 'azurePlan' },
    storageAccountName: { kind: 'string', setting: 'azureStorageAccountName' },
  },
} as const satisfies Record<Cloud, Readonly<Record<string, ArgSpec>>>;

/** The component class names, by cloud. */
export const COMPONENT_NAMES = { aws: 'TesseraAws', gcp: 'TesseraGcp', azure: 'TesseraAzure' } as const satisfies Record<Cloud, string>;
export type ComponentName = (typeof COMPONENT_NAMES)[Cloud];

/** Pulumi type token of a component: `tessera:index:TesseraAws`. */
export function componentType(cloud: Cloud): string {
  return `tessera:index:${COMPONENT_NAMES[cloud]}`;
}

/**
 * Args a component cannot deploy: the message lists every problem, each naming the arg and what to write instead.
 * A `pulumi.RunError`, so `pulumi preview` prints the message alone, without a stack trace.
 */
export class TesseraArgsError extends pulumi.RunError {
  readonly code = 'TESSERA_ARGS';
  constructor(
    readonly component: ComponentName,
    readonly resourceName: string,
    readonly problems: readonly string[],
    options?: { readonly cause?: unknown },
  ) {
    super(
      `${component} ${JSON.stringify(resourceName)} cannot be deployed with these args:\n${problems.map((p) => `  - ${p}`).join('\n')}`,
      options,
    );
    this.name = 'TesseraArgsError';
  }
}

/**
 * The folder the function archives are read from by default: `dist/` beside the nearest package.json above this
 * module. In a clone that is the repository's `dist/` (where `npm run build:functions` writes); in an installed
 * package, `node_modules/tessera/dist/`, wherever the bundler put this module below it.
 */
export function packageArchiveDir(from: string = dirname(fileURLToPath(import.meta.url))): string {
  let dir = from;
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'dist');
    const up = dirname(dir);
    if (up === dir) return join(from, 'dist');
    dir = up;
  }
}

/** The environment variable that points every component without `archiveDir` at prebuilt archives (a CI job's). */
export const ARCHIVE_DIR_ENV = 'TESSERA_ARCHIVE_DIR';

/** Where a component without `archiveDir` reads the archives: `$TESSERA_ARCHIVE_DIR`, else {@link packageArchiveDir}. */
export function defaultArchiveDir(): string {
  const fromEnv = process.env[ARCHIVE_DIR_ENV]?.trim();
  return fromEnv ? fromEnv : packageArchiveDir();
}

/** Marks args that are a configuration infra/index.ts has already validated from a stack file. */
const PARSED = Symbol.for('tessera.parsedStackConfig');

/** A stack file's configuration, already validated (infra/index.ts): the component then takes it as it is. */
export interface ParsedStackConfig<C extends StackConfig> {
  readonly [PARSED]: C;
}

/**
 * Wrap a configuration parsed from stack config (readStackConfig) so that a component takes it instead of args: how
 * infra/index.ts, the repository's program, is one consumer of the components.
 */
export function fromStackConfig<C extends StackConfig>(config: C): ParsedStackConfig<C> {
  return { [PARSED]: config };
}

/** The package whose provider the component's resources use, by cloud. */
const PROVIDER_PACKAGE: Readonly<Record<Cloud, string>> = { aws: 'aws', gcp: 'gcp', azure: 'azure-native' };

/** Environment variables the provider reads its region from when its config key is unset. */
const REGION_ENV: Readonly<Record<Cloud, readonly string[]>> = {
  aws: ['AWS_REGION', 'AWS_DEFAULT_REGION'],
  gcp: ['GOOGLE_REGION', 'GCLOUD_REGION', 'CLOUDSDK_COMPUTE_REGION'],
  azure: ['ARM_LOCATION'],
};
const PROJECT_ENV = ['GOOGLE_PROJECT', 'GOOGLE_CLOUD_PROJECT', 'GCLOUD_PROJECT', 'CLOUDSDK_CORE_PROJECT'] as const;

/** Tags Tessera sets itself; an arg may not replace them. */
const RESERVED_TAGS = ['project', 'stack', 'cloud', 'managed-by', 'tessera-component'] as const;

/** True when the options give the component an explicit provider of the package (its region is then the user's to keep). */
function explicitProvider(opts: pulumi.ComponentResourceOptions | undefined, pkg: string): boolean {
  const packageOf = (p: unknown): string | undefined => (p as { getPackage?: () => string } | undefined)?.getPackage?.();
  if (opts?.provider !== undefined && packageOf(opts.provider) === pkg) return true;
  const providers = opts?.providers;
  if (Array.isArray(providers)) return providers.some((p) => packageOf(p) === pkg);
  return providers !== undefined && Object.hasOwn(providers, pkg);
}

/** The region the default provider deploys to: its config key, else the environment variables it reads. */
function ambientRegion(cloud: Cloud): { readonly value: string; readonly from: string } | undefined {
  const configKey = PROVIDER_REGION_KEY[cloud];
  const [ns, name] = configKey.split(':') as [string, string];
  const configured = new pulumi.Config(ns).get(name);
  if (configured) return { value: configured, from: configKey };
  for (const v of REGION_ENV[cloud]) {
    const value = process.env[v];
    if (value) return { value, from: v };
  }
  return undefined;
}

function ambientProject(): string | undefined {
  const configured = new pulumi.Config('gcp').get('project');
  if (configured) return configured;
  for (const v of PROJECT_ENV) if (process.env[v]) return process.env[v];
  return undefined;
}

/** An example value written as TypeScript: `2048`, `'consumption'`, `['a.example.org']`, `{ B04: 'red' }`, `[8, 14]`. */
function literal(kind: ArgSpec['kind'], example: string | number): string {
  if (typeof example === 'number' || /^<.*>$/.test(example)) return String(example);
  const unquoted = example.replace(/^'(.*)'$/, '$1');
  switch (kind) {
    case 'number':
      return example;
    case 'strings':
      return `[${tsLiteral(example)}]`;
    case 'numbers':
      return `[${example.split(',').join(', ')}]`;
    case 'zoom':
      return /^\d+-\d+$/.test(example) ? `[${example.replace('-', ', ')}]` : example;
    case 'record':
    case 'json':
      try {
        return tsLiteral(JSON.parse(unquoted));
      } catch {
        return tsLiteral(unquoted);
      }
    case 'string':
    case 'secret':
      return tsLiteral(unquoted);
  }
}

/** A JSON value as a TypeScript literal, the way the README writes them: `{ exporter: 'otlp' }`. */
function tsLiteral(value: unknown): string {
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (Array.isArray(value)) return `[${value.map(tsLiteral).join(', ')}]`;
  if (typeof value === 'object' && value !== null)
    return `{ ${Object.entries(value)
      .map(([k, v]) => `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : tsLiteral(k)}: ${tsLiteral(v)}`)
      .join(', ')} }`;
  return String(value);
}

/** What every component publishes: where it runs, and the lease arithmetic `tessera verify` checks. */
export interface TesseraOutputs {
  readonly cloud: Cloud;
  readonly region: string;
  /** The platform the tile worker runs on (shared/domain/ceilings.ts). */
  readonly platform: Platform;
  readonly functionTimeoutSeconds: number;
  readonly leaseSeconds: number;
  /** The platform ceiling the lease must exceed. */
  readonly leaseMustExceedSeconds: number;
  /** Where a new scene starts (tessera verify uploads its smoke scene there). */
  readonly sourcePrefix: string;
}

/** The outputs every cloud publishes, from the validated configuration. */
export function commonOutputs(config: StackConfig): TesseraOutputs {
  return {
    cloud: config.cloud,
    region: config.region,
    platform: config.platform,
    functionTimeoutSeconds: config.lease.functionTimeoutSec,
    leaseSeconds: config.lease.leaseSec,
    leaseMustExceedSeconds: config.lease.ceilingSec,
    sourcePrefix: config.source.prefix,
  };
}

/** What a component hands its tiling stack, once its args are valid. */
export interface Prepared<C extends Cloud> {
  readonly config: Extract<StackConfig, { cloud: C }>;
  readonly archives: CloudArchives[C];
  readonly tags: StandardTags;
}

/**
 * Validate a component's args (or take a stack file's parsed configuration) and find its archives. Throws
 * {@link TesseraArgsError} naming every problem, before the component registers anything.
 */
export function prepare<C extends Cloud>(
  cloud: C,
  name: string,
  args: object | ParsedStackConfig<Extract<StackConfig, { cloud: C }>>,
  specs: Readonly<Record<string, ArgSpec>>,
  opts: pulumi.ComponentResourceOptions | undefined,
): Prepared<C> {
  const component = COMPONENT_NAMES[cloud];
  if (PARSED in args) {
    // A stack file, validated by readStackConfig: its tags and archive error are the program's as they always were.
    const config = args[PARSED];
    if (config.cloud !== cloud) throw new Error(`${component} was given the configuration of a ${config.cloud} stack`);
    try {
      return { config, archives: archivesFor(cloud, config.archiveDir), tags: standardTags(config.stack, config.cloud) };
    } catch (e) {
      if (e instanceof MissingArchiveError) throw new pulumi.RunError(e.message);
      throw e;
    }
  }

  const problems: string[] = [];
  const values: Partial<Record<ConfigKey, string>> = { cloud };
  const argOf = new Map<string, string>(Object.entries(specs).map(([arg, spec]) => [spec.setting, arg]));
  const specOf = (key: ConfigKey): ArgSpec | undefined => {
    const arg = argOf.get(key);
    return arg === undefined ? undefined : specs[arg];
  };
  let project: string | undefined;
  const secretOutputs: Partial<Record<SecretSetting, pulumi.Output<string>>> = {};
  let extraTags: Record<string, string> = {};
  const given = args as Readonly<Record<string, unknown>>;

  for (const [arg, value] of Object.entries(given)) {
    const spec = specs[arg];
    if (spec === undefined) {
      const other = (Object.keys(CLOUD_ARGS) as Cloud[]).find((c) => c !== cloud && Object.hasOwn(CLOUD_ARGS[c], arg));
      const hint = closestKey(arg, Object.keys(specs));
      problems.push(
        other !== undefined
          ? `${arg} is an arg of ${COMPONENT_NAMES[other]}, not of ${component}; remove it`
          : `${arg} is not an arg of ${component}${hint ? `; did you mean ${hint}?` : ''} (args: docs/deploy.md, "Tessera in your own Pulumi program")`,
      );
      continue;
    }
    if (value === undefined) continue;
    const text = argText(arg, spec, value, problems);
    if (text === undefined) {
      if (spec.kind === 'secret' && pulumi.Output.isInstance(value))
        secretOutputs[spec.setting as SecretSetting] = value as pulumi.Output<string>;
      continue;
    }
    if (spec.setting === 'gcp:project') project = text;
    else if (spec.setting === 'tags') extraTags = tagProblems(value as Record<string, string>, problems);
    else values[spec.setting] = text;
  }

  const explicit = explicitProvider(opts, PROVIDER_PACKAGE[cloud]);
  const ambient = explicit ? undefined : ambientRegion(cloud);
  if (values.region === undefined && ambient !== undefined) values.region = ambient.value;
  const dialect: SettingsDialect = {
    name: (key) => argOf.get(key) ?? key,
    set: (key, example) => `${argOf.get(key) ?? key}: ${literal(specOf(key)?.kind ?? 'string', example)}`,
    setSecret: (key) => `${argOf.get(key) ?? key}: new pulumi.Config().requireSecret('${argOf.get(key) ?? key}')`,
    providerRegionProblem(c, region) {
      // AWS resources take their region from the provider; GCP and Azure resources here name theirs.
      if (explicit || c !== 'aws') return undefined;
      const key = PROVIDER_REGION_KEY[c];
      if (ambient === undefined)
        return `region is ${JSON.stringify(region)} but the aws provider has no region; set it (\`pulumi config set ${key} ${region}\`) or pass a provider for ${region} in the component's options ({ provider })`;
      if (ambient.value === region) return undefined;
      return `region is ${JSON.stringify(region)} but the default ${PROVIDER_PACKAGE[c]} provider deploys to ${JSON.stringify(ambient.value)} (${ambient.from}); pass region: '${ambient.value}', set ${key} to ${region}, or pass a provider for ${region} in the component's options ({ provider })`;
    },
    projectMissing: () =>
      "project is not set and the gcp provider has none (gcp:project, GOOGLE_PROJECT); pass project: '<project-id>' or `pulumi config set gcp:project <project-id>`",
  };

  // A secret Output is known only once the deployment resolves it: the sink URL's check runs then, with the same
  // words and the same typed error; it stays secret whatever the caller passed.
  const sink = secretOutputs.featureSinkUrl;
  const secrets: Partial<Record<SecretSetting, pulumi.Output<string>>> = {
    ...secretOutputs,
    ...(sink === undefined
      ? {}
      : {
          featureSinkUrl: checkedSecret(
            sink,
            (url) => featureSinkUrlProblem(url, dialect),
            (p) => new TesseraArgsError(component, name, [p]),
          ),
        }),
    ...(secretOutputs.telemetryHeaders === undefined ? {} : { telemetryHeaders: pulumi.secret(secretOutputs.telemetryHeaders) }),
  };
  const stack = `${pulumi.getStack()}-${name}`;
  const resolved = resolveSettings(
    {
      values,
      providerRegions: { [cloud]: ambient?.value },
      project: project ?? (cloud === 'gcp' ? ambientProject() : undefined),
      secrets,
    },
    dialect,
    { stack, defaultArchiveDir: defaultArchiveDir(), today: new Date() },
  );
  problems.push(...resolved.problems);
  if (resolved.config === undefined || problems.length > 0) throw new TesseraArgsError(component, name, problems);
  const config = resolved.config as Extract<StackConfig, { cloud: C }>;
  if (config.runtime.check.level === 'warn') void pulumi.log.warn(`${component} ${name}: runtime: ${config.runtime.check.message}`);

  let archives: CloudArchives[C];
  try {
    archives = archivesFor(cloud, config.archiveDir);
  } catch (e) {
    if (!(e instanceof MissingArchiveError)) throw e;
    throw new TesseraArgsError(
      component,
      name,
      [
        `function archive${e.missing.length > 1 ? 's' : ''} not found: ${e.missing.join(', ')}; set archiveDir to the folder that holds them, or build them with \`npm run build:functions\` in a Tessera checkout`,
      ],
      { cause: e },
    );
  }
  const tags: StandardTags = { ...extraTags, ...standardTags(pulumi.getStack(), cloud), 'tessera-component': name };
  return { config, archives, tags };
}

/**
 * A secret Output checked when the deployment resolves it: the value, still secret, or (a problem) the error `fail`
 * makes, thrown inside the apply. Pulumi then fails every resource that takes the value (none is created with it),
 * and prints a RunError's message alone.
 */
export function checkedSecret(
  value: pulumi.Output<string>,
  problemOf: (value: string) => string | undefined,
  fail: (problem: string) => Error,
): pulumi.Output<string> {
  // The check runs on the secret (an apply keeps it secret): wrapping the apply in pulumi.secret instead would leave
  // the apply's own isSecret promise, which carries the failure, with nobody awaiting it (an unhandled rejection).
  return pulumi.secret(value).apply((v) => {
    const problem = problemOf(v);
    if (problem !== undefined) throw fail(problem);
    return v;
  });
}

/** An arg's value as the text the shared validation reads, or undefined with a problem (or for a secret Output). */
function argText(arg: string, spec: ArgSpec, value: unknown, problems: string[]): string | undefined {
  const got = (v: unknown) => `got ${JSON.stringify(v) ?? String(v)} (${Array.isArray(v) ? 'an array' : v === null ? 'null' : typeof v})`;
  switch (spec.kind) {
    case 'number':
      if (typeof value === 'number' && Number.isFinite(value)) return String(value);
      problems.push(`${arg} must be a number, ${got(value)}`);
      return undefined;
    case 'string':
      if (typeof value === 'string' && value.trim() !== '') return value;
      problems.push(typeof value === 'string' ? `${arg} is empty; leave it out for the default` : `${arg} must be a string, ${got(value)}`);
      return undefined;
    case 'secret':
      if (pulumi.Output.isInstance(value)) return undefined;
      if (typeof value === 'string' && value.trim() !== '') return value;
      // Never echo the value: it holds a password.
      problems.push(`${arg} must be a string or a secret Output (config.requireSecret), got ${typeof value}`);
      return undefined;
    case 'strings':
      if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
        problems.push(`${arg} must be an array of strings, ${got(value)}`);
        return undefined;
      }
      if (value.length === 0) {
        problems.push(`${arg} is an empty list; leave it out for the default, or list at least one`);
        return undefined;
      }
      for (const v of value as string[]) {
        if (v.trim() === '' || /[\s,]/.test(v.trim())) {
          problems.push(
            `${arg}: ${JSON.stringify(v)} must be one non-empty item without spaces or commas; give each its own array element`,
          );
          return undefined;
        }
      }
      return (value as string[]).map((v) => v.trim()).join(',');
    case 'numbers':
      if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'number' && Number.isFinite(v))) {
        problems.push(`${arg} must be an array of numbers, ${got(value)}`);
        return undefined;
      }
      return value.join(',');
    case 'zoom':
      if (typeof value === 'number' && Number.isFinite(value)) return String(value);
      if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'number' && Number.isFinite(v)))
        return `${value[0]}-${value[1]}`;
      problems.push(`${arg} must be a zoom or a range [min, max], ${got(value)}`);
      return undefined;
    case 'json':
      if (typeof value === 'string' && value.trim() !== '') return value;
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) return JSON.stringify(value);
      problems.push(`${arg} must be a word or an object, ${got(value)}`);
      return undefined;
    case 'record':
      if (
        typeof value !== 'object' ||
        value === null ||
        Array.isArray(value) ||
        !Object.values(value as object).every((v) => typeof v === 'string')
      ) {
        problems.push(`${arg} must be an object of strings, ${got(value)}`);
        return undefined;
      }
      return JSON.stringify(value);
  }
}

/** The user's extra tags, with a problem for each one Tessera cannot take. */
function tagProblems(tags: Readonly<Record<string, string>>, problems: string[]): Record<string, string> {
  for (const [k, v] of Object.entries(tags)) {
    if ((RESERVED_TAGS as readonly string[]).includes(k)) problems.push(`tags.${k} is set by Tessera; pick another key`);
    else if (k.length === 0 || k.length > 128 || /[<>%&\\?/]/.test(k))
      problems.push(`tags: ${JSON.stringify(k)} must be 1-128 characters without < > % & \\ ? / (Azure refuses them)`);
    else if (v.length > 256) problems.push(`tags.${k} is ${v.length} characters; AWS and Azure take at most 256`);
  }
  return { ...tags };
}
