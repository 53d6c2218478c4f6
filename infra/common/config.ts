import * as pulumi from '@pulumi/pulumi';
import { CEILINGS, type LeaseConfig, type Platform, resolveLease } from '../../shared/domain/ceilings.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import { AREAS, DEFAULT_SOURCE_PREFIX, DEPLOYED_ROLES, type DeployedRole } from '../../shared/domain/key-layout.js';
import { parseHostPatterns, splitList } from '../../shared/domain/remote-hosts.js';
import { outputForFormat, TILE_FORMATS, type TileFormat } from '../../shared/domain/render-params.js';
import { DEFAULT_PARAMS, DEFAULT_RETENTION_SEC } from '../../shared/domain/runtime-config.js';
import { checkRuntime, deployedRuntime, type RuntimeCheck, runtimePlatformOf } from '../../shared/domain/runtimes.js';
import { parseStacSelection } from '../../shared/domain/stac-item.js';
import { OUTPUT_COMPRESSIONS, tilingParams, zoomRangeParams } from '../../shared/domain/tiling-params.js';
import { parseExpression } from '../../shared/raster/expression.js';
import { checkZoomRange } from '../../shared/raster/tile-matrix-set.js';
import { gcpFirestoreDatabaseId } from './naming.js';
import { parseTelemetry, TELEMETRY_CONFIG_DOC, TELEMETRY_HEADERS_DOC, type TelemetryConfig } from './telemetry.js';

/** Where ingest stages an attempt's download in the source bucket (shared/app/ingest.ts), outside the scene prefix. */
export const STAGING_PREFIX: string = AREAS.staging.prefix;

/**
 * The typed stack configuration (../../docs/deploy.md lists every key).
 * Everything a stack may set is read here, once, and validated before any
 * resource is declared, so a bad value fails `pulumi preview` with a message
 * that names the key and says what to set instead.
 */

export const CLOUDS = ['aws', 'gcp', 'azure'] as const;
export type Cloud = (typeof CLOUDS)[number];

export const AZURE_PLANS = ['consumption', 'flex'] as const;
export type AzurePlan = (typeof AZURE_PLANS)[number];

export const GCP_TILE_TRIGGERS = ['event', 'http'] as const;
export type GcpTileTrigger = (typeof GCP_TILE_TRIGGERS)[number];

/**
 * The functions every cloud deploys: the tiling pipeline (scene, tile, mosaic) and ingestion (design note 2):
 * `ingest`, triggered by the stack's ingest queue (staging, validation, promotion, manifest row), and `reconcile`,
 * a schedule that compares the promoted prefix with the manifest both ways.
 */
export const FUNCTION_ROLES = DEPLOYED_ROLES;
export type FunctionRole = DeployedRole;

/**
 * Timeout of the scene (fan-out) and mosaic functions. They read a header or
 * a listing and write one small object, so five minutes is generous, and it is
 * under every platform's ceiling (the smallest, event-driven GCF, is 540 s).
 */
export const SUPPORT_FUNCTION_TIMEOUT_SEC = 300;
/**
 * Timeout of the ingest function: a download to staging, its checksum, a header validation and one copy. 540 s
 * is under every platform's ceiling (event-driven GCF is the smallest); a download that needs longer is an
 * artefact for `tessera ingest` on a machine, not a function (docs/ingest.md).
 */
export const INGEST_FUNCTION_TIMEOUT_SEC = 540;
/**
 * The stream function (docs/feature-batches.md): one batch object a delivery, read whole, parsed and inserted in one PostGIS
 * transaction. 540 s is under every platform's ceiling; a 128 MiB Firehose object of ~1 M records takes well under a
 * minute at the benchmark's rate. Memory for the object, its text and its parsed records at once.
 */
export const STREAM_FUNCTION_TIMEOUT_SEC = 540;
export const STREAM_FUNCTION_MEMORY_MB = 2048;
/** Memory of the scene and mosaic functions (Azure: the app's plan decides). */
export const SUPPORT_FUNCTION_MEMORY_MB = 1024;
/** SQS caps a visibility timeout at 12 hours. */
export const SQS_MAX_VISIBILITY_SEC = 43_200;
/** AWS's advice for queues feeding Lambda: visibility of six times the function timeout. */
export const SQS_VISIBILITY_FACTOR = 6;
/** Pub/Sub caps an ack deadline (for push: the request timeout too) at 600 s. */
export const PUBSUB_MAX_ACK_DEADLINE_SEC = 600;
/** Deliveries before a message is dead-lettered, on every cloud (tessera:maxReceiveCount). */
export const DEFAULT_MAX_RECEIVE_COUNT = 5;
/** The tile event source mapping's maximumConcurrency: as many tile workers as GCP and Azure allow by default. */
export const DEFAULT_TILE_MAX_CONCURRENCY = 100;
/** Lambda refuses a maximumConcurrency below 2. */
export const LAMBDA_MIN_MAX_CONCURRENCY = 2;
/** The id GCP gives a project's default Firestore database. */
export const FIRESTORE_DEFAULT_DATABASE = '(default)';
/** Firestore database ids: 4-63 characters, lowercase letters, digits and hyphens, a letter first, no hyphen last. */
export const FIRESTORE_DATABASE_ID = /^[a-z][a-z0-9-]{2,61}[a-z0-9]$/;
/** Days a staging object (an ingest attempt's download, `staging/...`) is kept before the lifecycle rule deletes it. */
export const DEFAULT_STAGING_RETENTION_DAYS = 7;
/** Flex Consumption instance sizes, in MB. */
export const FLEX_INSTANCE_MEMORY_MB = [512, 2048, 4096] as const;

/** The keys this program reads, each with what it means; anything else under `tessera:` is refused as a typo. */
export const CONFIG_KEYS = {
  cloud: 'aws | gcp | azure (required)',
  region: "provider region code (required), e.g. eu-west-1; also set the provider's own key",
  functionTimeoutSeconds: 'tile worker timeout in seconds; at most the platform ceiling',
  leaseSeconds: 'claim lease in seconds; must be longer than the ceiling (default from shared/domain/ceilings.ts)',
  memoryMb: 'tile worker memory in MB',
  azurePlan: 'azure only: consumption | flex',
  azureStorageAccountName: 'azure only: storage account name override (3-24 lowercase letters and digits)',
  gcpTileTrigger: 'gcp only: event | http',
  claimsCollection: 'gcp only: Firestore collection holding claim rows',
  gcpFirestoreDatabase:
    'gcp only: Firestore database of the claims (default tessera-<stack>, created by the stack); "(default)" uses the project\'s existing default database',
  tileMaxConcurrency:
    'aws only: most tile functions the SQS event source runs at once (scalingConfig.maximumConcurrency, 2-1000; default 100)',
  sourcePrefix: 'only source objects under this prefix start a scene',
  sourceSuffix: 'only source objects with this suffix start a scene (default .tif; .json on a STAC stack)',
  stacAssets:
    'optional JSON band name -> STAC asset (asset key, ASSET:INDEX or eo:bands common name), e.g. {"B04":"red","B08":"nir"}: scenes then start on their STAC Item, docs/multi-file-scenes.md',
  tilePx: 'tile edge in pixels',
  tms: 'optional tile matrix set the tiles are cut from (with zoom): WebMercatorQuad | WorldCRS84Quad | UTMnnWGS84Quad',
  zoom: 'zoom of tms, or a range MIN-MAX (e.g. 8-14): a pyramid, every zoom its own tiles (docs/pyramids.md)',
  pipelineVersion: 'processing pipeline label; a bump changes every job key (keys bind the code build anyway)',
  expression: 'band-math expression evaluated per pixel',
  compression: 'tile compression: DEFLATE | ZSTD | NONE (default: the output profile of shared/domain/runtime-config.ts)',
  compressionLevel: 'level of the tile compression: DEFLATE 1-9, ZSTD 1-22 (default: DEFLATE 6, ZSTD 9, or the default profile)',
  format: 'tile format: COG (default, float32 for analysis) | PNG | WEBP | JPEG (rendered for web maps: docs/web-maps.md)',
  rescale: 'PNG/WEBP/JPEG: MIN,MAX, the values mapped onto the 256 levels, e.g. -1,1 for NDVI (required with those formats)',
  colormap: 'PNG/WEBP/JPEG: viridis | plasma | magma | inferno | rdylgn | greys (default: grey levels)',
  background: 'JPEG only (required there): R,G,B, the colour nodata and masked pixels get, JPEG having no transparency',
  mosaic:
    'vrt (default) | cog (also one COG mosaic, COG tiles) | pmtiles (also one PMTiles archive of every zoom: PNG/WEBP/JPEG on WebMercatorQuad, docs/web-maps.md)',
  maxReceiveCount:
    'deliveries before a message is dead-lettered (SQS maxReceiveCount / Pub/Sub maxDeliveryAttempts / Azure maxDequeueCount)',
  retentionSeconds: 'how long claim rows are kept (TTL) after their lease',
  stagingRetentionDays:
    'days an ingest staging object (staging/ in the source bucket) is kept before the lifecycle rule deletes it (1-3650; default 7)',
  ingestAllowedHosts:
    "optional comma-separated hosts the ingest function may fetch http(s) artefacts and remote STAC Items from (example.com, *.example.com); unset: any public host, an Item's assets from its own host only (docs/ingest.md)",
  alertEmail: 'optional address that receives the lease-stolen and dead-letter alarms',
  featureSinkUrl:
    'optional PostGIS feature sink of the tile function, postgis://user:password@host:5432/db; set it as a secret: `pulumi config set --secret tessera:featureSinkUrl ...` (docs/postgis.md)',
  outputCorsOrigins:
    'optional comma-separated origins (https://maps.example.org, or *) whose web pages may read the output bucket cross-origin (GET and HEAD, Range requests)',
  runtime:
    'Node.js runtime id override, e.g. nodejs24.x / nodejs24 / 22 (Flex) / Node|22 (Consumption); default and dates: shared/domain/runtimes.ts',
  archiveDir: 'folder holding the build:functions archives (default: dist/ at the repository root)',
  telemetry: TELEMETRY_CONFIG_DOC,
  telemetryHeaders: TELEMETRY_HEADERS_DOC,
} as const;
export type ConfigKey = keyof typeof CONFIG_KEYS;

/** The provider key that must agree with `tessera:region`, per cloud. */
export const PROVIDER_REGION_KEY: Readonly<Record<Cloud, string>> = {
  aws: 'aws:region',
  gcp: 'gcp:region',
  azure: 'azure-native:location',
};

interface CommonStackConfig {
  readonly stack: string;
  readonly region: string;
  /** The platform the tile worker runs on; its ceiling sizes the lease. */
  readonly platform: Platform;
  /** Tile worker timeout, its ceiling and the lease (validated by resolveLease). */
  readonly lease: LeaseConfig;
  readonly memoryMb: number;
  readonly maxReceiveCount: number;
  readonly source: { readonly prefix: string; readonly suffix: string };
  /** tessera:stacAssets: a STAC stack's band -> asset selection (TESSERA_STAC_ASSETS); undefined: one file per scene. */
  readonly stacAssets: Readonly<Record<string, string>> | undefined;
  readonly params: ProcessingParams;
  readonly retentionSec: number;
  /** Lifecycle expiry of `staging/` in the source bucket (tessera:stagingRetentionDays). */
  readonly stagingRetentionDays: number;
  /** tessera:ingestAllowedHosts, normalised (TESSERA_INGEST_ALLOWED_HOSTS); undefined: any public host. */
  readonly ingestAllowedHosts: readonly string[] | undefined;
  readonly alertEmail: string | undefined;
  /**
   * tessera:featureSinkUrl: the PostGIS sink's connection URL; a secret, kept in the cloud's secret store (docs/postgis.md).
   * A component may pass it as a (secret) Output, validated when its value is known.
   */
  readonly featureSinkUrl: pulumi.Input<string> | undefined;
  /** tessera:outputCorsOrigins: origins whose pages may GET the output bucket cross-origin; undefined: no CORS rule. */
  readonly outputCorsOrigins: readonly string[] | undefined;
  /** tessera:telemetry and tessera:telemetryHeaders: the OpenTelemetry export (infra/common/telemetry.ts); off by default. */
  readonly telemetry: TelemetryConfig;
  readonly archiveDir: string;
  /**
   * The Node.js runtime every function of the stack gets: the table's deployed
   * runtime, or `tessera:runtime`. `check` is never `refuse` here (parsing
   * refuses the stack instead); a `warn` is printed by readStackConfig.
   */
  readonly runtime: { readonly id: string; readonly nodeMajor: number; readonly check: RuntimeCheck };
}

export interface AwsStackConfig extends CommonStackConfig {
  readonly cloud: 'aws';
  readonly platform: 'aws-lambda';
  /** Visibility timeout of the tile queue: six times the function timeout, within SQS's 12 h cap. */
  readonly tileQueueVisibilitySec: number;
  /** scalingConfig.maximumConcurrency of the tile event source mapping (Lambda allows 2-1000). */
  readonly tileMaxConcurrency: number;
}

export interface GcpStackConfig extends CommonStackConfig {
  readonly cloud: 'gcp';
  readonly platform: 'gcf2-event' | 'gcf2-http';
  readonly project: string;
  readonly tileTrigger: GcpTileTrigger;
  readonly claimsCollection: string;
  /** The Firestore database id: a named one per stack, which the stack creates, or `(default)`, which it only uses. */
  readonly firestoreDatabase: string;
  /** Ack deadline of the tile push subscription (also its request timeout). */
  readonly ackDeadlineSec: number;
}

export interface AzureStackConfig extends CommonStackConfig {
  readonly cloud: 'azure';
  readonly platform: 'azure-consumption' | 'azure-flex';
  readonly plan: AzurePlan;
  readonly storageAccountName: string | undefined;
  /** The host's pause before retrying a failed queue message (host.json extensions.queues.visibilityTimeout). */
  readonly retryVisibilitySec: number;
}

/** The Functions host's retry pause that host.json ships with (functions/azure/host.json). */
export const AZURE_DEFAULT_RETRY_VISIBILITY_SEC = 330;

/**
 * The host retries a failed queue message after a fixed pause, not after the
 * lease. A message whose attempt died holding the lease is redelivered, at the
 * earliest, when that invocation timed out: with `lease - timeout` of the lease
 * left. The remaining `maxDequeueCount - 2` pauses must outlast it, or the
 * message reaches the poison queue while the lease still blocks it.
 */
export function azureRetryVisibilitySec(leaseSec: number, timeoutSec: number, maxDequeueCount: number): number {
  const rest = leaseSec - timeoutSec;
  return Math.max(AZURE_DEFAULT_RETRY_VISIBILITY_SEC, Math.ceil((rest + 1) / Math.max(1, maxDequeueCount - 2)));
}

export type StackConfig = AwsStackConfig | GcpStackConfig | AzureStackConfig;

/** A stack configuration that cannot be deployed. The message lists every problem and what to set. */
export class StackConfigError extends Error {
  readonly code = 'STACK_CONFIG';
  constructor(
    readonly stackName: string,
    readonly problems: readonly string[],
  ) {
    super(`stack ${stackName} cannot be deployed:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'StackConfigError';
  }
}

export interface ParseContext {
  /** The Pulumi stack name (used in messages and names). */
  readonly stack: string;
  /** Where `npm run build:functions` writes the archives, unless `tessera:archiveDir` says otherwise. */
  readonly defaultArchiveDir: string;
  /** The day runtime dates are checked against (shared/domain/runtimes.ts); default: now. */
  readonly today?: Date;
}

const TESSERA = 'tessera:';

/**
 * The settings of one configuration as text, whichever way the user wrote them: a stack file's `tessera:` keys
 * (infra/index.ts) or a component's args (infra/components/). Both go through {@link resolveSettings}, the one
 * validation that produces the {@link StackConfig} the tiling stacks consume.
 */
export interface Settings {
  /** Each setting's text: numbers as digits, lists comma-separated, `stacAssets` as JSON; unset or blank: the default. */
  readonly values: Readonly<Partial<Record<ConfigKey, string>>>;
  /** The region each cloud's provider is configured with (`aws:region`, `gcp:region`, `azure-native:location`). */
  readonly providerRegions: Readonly<Partial<Record<Cloud, string>>>;
  /** The GCP project to deploy into (`gcp:project`). */
  readonly project: string | undefined;
  /**
   * Secret settings a component got as Outputs (`config.requireSecret(...)`), known only when the deployment resolves
   * them: they stand in for the text of the same key. Their text checks are the caller's, on the resolved value.
   */
  readonly secrets?: Readonly<Partial<Record<SecretSetting, pulumi.Output<string>>>>;
}

/** The settings that hold credentials: the stack keeps them in the cloud's secret store. */
export type SecretSetting = 'featureSinkUrl' | 'telemetryHeaders';

/**
 * How a problem names a setting and says how to set it: `tessera:memoryMb` and `pulumi config set ...` for a stack
 * file, `memoryMb` and `memoryMb: 2048` for a component's args. Every message of the validation goes through it, so
 * the fix it names is one the reader can type where they are.
 */
export interface SettingsDialect {
  /** The setting as the reader writes it. */
  name(key: ConfigKey): string;
  /** How to set it to `example` (a number, a word, or the text a stack file would hold). */
  set(key: ConfigKey, example: string | number): string;
  /** How to set it as a secret. */
  setSecret(key: ConfigKey, placeholder: string): string;
  /** The problem with the provider's region, given the one Tessera deploys to; undefined when they agree. */
  providerRegionProblem(cloud: Cloud, region: string, providerRegion: string | undefined): string | undefined;
  /** The problem when a GCP configuration names no project. */
  projectMissing(): string;
}

/** Stack files: `tessera:<key>`, fixed with `pulumi config set`. */
export const STACK_DIALECT: SettingsDialect = {
  name: (k) => `${TESSERA}${k}`,
  set: (k, example) => `pulumi config set ${TESSERA}${k} ${example}`,
  setSecret: (k, placeholder) => `pulumi config set --secret ${TESSERA}${k} ${placeholder}`,
  providerRegionProblem(cloud, region, providerRegion) {
    const providerKey = PROVIDER_REGION_KEY[cloud];
    if (providerRegion === undefined || providerRegion === '') {
      return `${providerKey} is not set; set it to the same region as ${TESSERA}region: \`pulumi config set ${providerKey} ${region}\``;
    }
    if (providerRegion !== region) {
      return `${providerKey} is ${JSON.stringify(providerRegion)} but ${TESSERA}region is ${JSON.stringify(region)}; they must agree, e.g. \`pulumi config set ${providerKey} ${region}\``;
    }
    return undefined;
  },
  projectMissing: () => 'gcp:project is not set; set it to the project to deploy into: `pulumi config set gcp:project <project-id>`',
};

/**
 * Parse and validate a stack's whole configuration. Pure: takes the flat
 * key/value map Pulumi hands a program (`tessera:cloud` -> `aws`; numbers
 * arrive as strings) and collects every problem before throwing one
 * {@link StackConfigError}, so a newcomer fixes a stack file in one pass.
 *
 * @example
 * parseStackConfig({ 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1' },
 *   { stack: 'aws-eu-west-1', defaultArchiveDir: 'dist' }).lease.leaseSec // 1200
 */
export function parseStackConfig(values: Readonly<Record<string, string>>, ctx: ParseContext): StackConfig {
  const problems: string[] = [];
  const settings: Partial<Record<ConfigKey, string>> = {};
  for (const [k, v] of Object.entries(values)) {
    if (!k.startsWith(TESSERA)) continue;
    const name = k.slice(TESSERA.length);
    if (Object.hasOwn(CONFIG_KEYS, name)) {
      settings[name as ConfigKey] = v;
    } else {
      const hint = closestKey(name, Object.keys(CONFIG_KEYS));
      problems.push(`${k} is not a Tessera setting${hint ? `; did you mean ${TESSERA}${hint}?` : ''} (known keys: docs/deploy.md)`);
    }
  }
  const providerRegions = Object.fromEntries(CLOUDS.map((c) => [c, values[PROVIDER_REGION_KEY[c]]]));
  const resolved = resolveSettings({ values: settings, providerRegions, project: values['gcp:project'] }, STACK_DIALECT, ctx);
  problems.push(...resolved.problems);
  if (resolved.config === undefined || problems.length > 0) {
    throw new StackConfigError(ctx.stack, problems.length > 0 ? problems : ['the configuration is incomplete']);
  }
  return resolved.config;
}

/** The PostGIS sink URL's problem, if any; never echoes the value (it holds a password). */
export function featureSinkUrlProblem(url: string, dialect: SettingsDialect): string | undefined {
  if (/^(postgis|postgres|postgresql):\/\/[^/\s]+\/[^/\s?]+/.test(url)) return undefined;
  return `${dialect.name('featureSinkUrl')} must be postgis://user:password@host:5432/database (or postgres://); set it with \`${dialect.setSecret('featureSinkUrl', '<url>')}\``;
}

/**
 * The CORS rule of the output bucket when `tessera:outputCorsOrigins` is set: a web map on those origins may GET and
 * HEAD tiles and mosaics (with a signed URL or a token: CORS admits the origin, it never grants access), with Range
 * requests (COG readers) and revalidation, and may read the headers a tile reader needs.
 */
export const OUTPUT_CORS = {
  methods: ['GET', 'HEAD'],
  requestHeaders: ['Range', 'If-None-Match', 'If-Modified-Since'],
  responseHeaders: ['Content-Range', 'Accept-Ranges', 'ETag', 'Content-Length', 'Content-Type'],
  maxAgeSec: 3600,
} as const;

/** Most origins one CORS rule may list (Azure Storage's limit; S3 and GCS take more). */
export const MAX_CORS_ORIGINS = 64;

/** The problems of a list of CORS origins: each `*` or `http(s)://host[:port]`, no path, at most {@link MAX_CORS_ORIGINS}. */
export function corsOriginProblems(origins: readonly string[], dialect: SettingsDialect): string[] {
  const problems: string[] = [];
  const name = dialect.name('outputCorsOrigins');
  if (origins.length === 0)
    problems.push(
      `${name} is set but names no origin; remove it (no cross-origin reads) or list origins: \`${dialect.set('outputCorsOrigins', 'https://maps.example.org')}\``,
    );
  if (origins.length > MAX_CORS_ORIGINS)
    problems.push(
      `${name} lists ${origins.length} origins; Azure Storage takes at most ${MAX_CORS_ORIGINS} in a rule: use * or fewer origins`,
    );
  for (const origin of origins) {
    if (origin === '*') continue;
    let ok = false;
    try {
      const u = new URL(origin);
      ok = (u.protocol === 'https:' || u.protocol === 'http:') && u.origin === origin && !origin.includes('*');
    } catch {
      ok = false;
    }
    if (!ok)
      problems.push(
        `${name}: ${JSON.stringify(origin)} is not an origin; write scheme://host[:port] with no path or trailing slash (e.g. https://maps.example.org), or * for any origin`,
      );
  }
  return problems;
}

/**
 * The one validation of a configuration (stack file or component args): every setting is checked, every default
 * filled, and every problem collected in the reader's {@link SettingsDialect}. Returns the configuration when there
 * is no problem, else the problems (never both).
 */
export function resolveSettings(
  settings: Settings,
  dialect: SettingsDialect,
  ctx: ParseContext,
): { readonly config: StackConfig; readonly problems: readonly [] } | { readonly config: undefined; readonly problems: readonly string[] } {
  const problems: string[] = [];
  const key = (name: ConfigKey): string => dialect.name(name);
  const get = (name: ConfigKey): string | undefined => {
    const v = settings.values[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const set = (name: ConfigKey, example: string | number): string => dialect.set(name, example);
  const int = (name: ConfigKey, range: { min: number; max: number }, example: number): number | undefined => {
    const raw = get(name);
    if (raw === undefined) return undefined;
    const v = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(v) || v < range.min || v > range.max) {
      problems.push(
        `${key(name)} must be a whole number from ${range.min} to ${range.max}, got ${JSON.stringify(raw)}; e.g. \`${set(name, example)}\``,
      );
      return undefined;
    }
    return v;
  };
  const oneOf = <T extends string>(name: ConfigKey, allowed: readonly T[], fallback: T | undefined): T | undefined => {
    const raw = get(name);
    if (raw === undefined) return fallback;
    if ((allowed as readonly string[]).includes(raw)) return raw as T;
    problems.push(`${key(name)} must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}; e.g. \`${set(name, allowed[0] ?? '')}\``);
    return undefined;
  };

  const cloud = oneOf('cloud', CLOUDS, undefined);
  if (get('cloud') === undefined)
    problems.push(`${key('cloud')} is required: one of ${CLOUDS.join(', ')}; e.g. \`${set('cloud', 'aws')}\``);
  const region = get('region');
  if (region === undefined)
    problems.push(`${key('region')} is required (the provider region code); e.g. \`${set('region', 'eu-west-1')}\``);
  if (cloud && region) {
    const problem = dialect.providerRegionProblem(cloud, region, settings.providerRegions[cloud]);
    if (problem !== undefined) problems.push(problem);
  }
  for (const [name, only] of [
    ['azurePlan', 'azure'],
    ['azureStorageAccountName', 'azure'],
    ['gcpTileTrigger', 'gcp'],
    ['claimsCollection', 'gcp'],
    ['gcpFirestoreDatabase', 'gcp'],
    ['tileMaxConcurrency', 'aws'],
  ] as const) {
    if (cloud && cloud !== only && get(name) !== undefined)
      problems.push(`${key(name)} applies to ${only} stacks only; remove it from this ${cloud} stack`);
  }

  const azurePlan = cloud === 'azure' ? oneOf('azurePlan', AZURE_PLANS, 'consumption') : undefined;
  if (cloud === 'azure' && get('azurePlan') === 'premium') {
    // oneOf already refused it; say why premium is not on the list.
    problems.push(
      `${key('azurePlan')} premium is not deployed by this program (it needs an Azure Files content share); use flex for jobs longer than 10 minutes`,
    );
  }
  const gcpTrigger = cloud === 'gcp' ? oneOf('gcpTileTrigger', GCP_TILE_TRIGGERS, 'event') : undefined;
  const platform = platformOf(cloud, azurePlan, gcpTrigger);

  const timeout = int('functionTimeoutSeconds', { min: 1, max: 86_400 }, platform ? (CEILINGS[platform].ceilingSec ?? 1800) : 900);
  const leaseSec = int('leaseSeconds', { min: 1, max: 7 * 86_400 }, platform ? (CEILINGS[platform].defaultLeaseSec ?? 2100) : 1200);
  let lease: LeaseConfig | undefined;
  let visibility: number | undefined;
  if (platform && !problems.some((p) => p.includes(key('functionTimeoutSeconds')) || p.includes(key('leaseSeconds')))) {
    try {
      const plain = resolveLease({ platform, functionTimeoutSec: timeout, leaseSec });
      visibility = visibilityFor(platform, plain.functionTimeoutSec);
      lease = resolveLease({ platform, functionTimeoutSec: timeout, leaseSec, visibilityTimeoutSec: visibility });
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      // resolveLease refuses either a timeout above the ceiling ("exceeds") or a lease at or below it.
      const which: ConfigKey = /exceeds/.test(msg) ? 'functionTimeoutSeconds' : 'leaseSeconds';
      problems.push(`${key(which)}: ${msg}. Change it with \`${set(which, '<seconds>')}\` or remove it to use the default`);
    }
  }

  const memoryMb = int('memoryMb', { min: 128, max: 32_768 }, 2048) ?? defaultMemoryMb(platform);
  if (platform && memoryMb !== undefined) {
    const max = CEILINGS[platform].maxMemoryMb;
    if (memoryMb > max)
      problems.push(
        `${key('memoryMb')} ${memoryMb} exceeds the ${CEILINGS[platform].label} maximum of ${max} MB; set it to ${max} or less`,
      );
    if (platform === 'azure-flex' && !(FLEX_INSTANCE_MEMORY_MB as readonly number[]).includes(memoryMb)) {
      problems.push(
        `${key('memoryMb')} on Flex Consumption must be an instance size: ${FLEX_INSTANCE_MEMORY_MB.join(', ')}; got ${memoryMb}`,
      );
    }
  }

  // SQS allows 1-1000; Pub/Sub 5-100; the Azure host needs at least 3 (one retry after a lease-holding attempt died).
  const receiveRange = cloud === 'gcp' ? { min: 5, max: 100 } : cloud === 'aws' ? { min: 1, max: 1000 } : { min: 3, max: 100 };
  // Default 5 everywhere: Pub/Sub's minimum, Azure's own default, and AWS's advice for queues feeding Lambda
  // (at least 5, so a receive the Lambda poller makes while the function is throttled does not dead-letter a job).
  const maxReceiveCount = int('maxReceiveCount', receiveRange, 5) ?? DEFAULT_MAX_RECEIVE_COUNT;
  const tileMaxConcurrency =
    int('tileMaxConcurrency', { min: LAMBDA_MIN_MAX_CONCURRENCY, max: 1000 }, DEFAULT_TILE_MAX_CONCURRENCY) ?? DEFAULT_TILE_MAX_CONCURRENCY;

  const prefix = get('sourcePrefix') ?? DEFAULT_SOURCE_PREFIX;
  // A STAC stack's scenes start on their item (docs/multi-file-scenes.md): its trigger filters take `.json`.
  const stacText = get('stacAssets');
  let stacAssets: Record<string, string> | undefined;
  if (stacText !== undefined) {
    try {
      stacAssets = parseStacSelection(stacText, key('stacAssets'));
    } catch (e) {
      problems.push(`${e instanceof Error ? e.message : String(e)}; set it with \`${set('stacAssets', `'{"B04":"red","B08":"nir"}'`)}\``);
    }
  }
  const suffix = get('sourceSuffix') ?? (stacText === undefined ? '.tif' : '.json');
  if (stacText !== undefined && !suffix.toLowerCase().endsWith('.json')) {
    problems.push(
      `${key('sourceSuffix')} ${JSON.stringify(suffix)} would keep STAC Items (*.json) from the scene trigger of a STAC stack (${key('stacAssets')} is set); end it in .json or remove it`,
    );
  }
  if (prefix.startsWith('/'))
    problems.push(`${key('sourcePrefix')} must not start with "/" (object keys have no leading slash), got ${JSON.stringify(prefix)}`);
  if (prefix.startsWith(AREAS.tiles.prefix) || prefix.startsWith(AREAS.mosaics.prefix)) {
    problems.push(`${key('sourcePrefix')} ${JSON.stringify(prefix)} collides with an output prefix; pick another, e.g. scenes/`);
  }
  // Ingest stages downloads under staging/ in the source bucket: the scene trigger must never see one.
  if (prefix.startsWith(STAGING_PREFIX) || STAGING_PREFIX.startsWith(prefix)) {
    problems.push(
      `${key('sourcePrefix')} ${JSON.stringify(prefix)} overlaps the ingest staging prefix ${STAGING_PREFIX}, so half-validated downloads would start scenes; pick another, e.g. scenes/`,
    );
  }
  // Streams land batch objects under streams/ (docs/feature-batches.md): a batch must never start a scene, and S3 refuses two
  // notifications whose prefixes overlap for one event type.
  if (prefix.startsWith(AREAS.streams.prefix) || AREAS.streams.prefix.startsWith(prefix)) {
    problems.push(
      `${key('sourcePrefix')} ${JSON.stringify(prefix)} overlaps the feature streams' prefix ${AREAS.streams.prefix}, so batch objects would start scenes; pick another, e.g. scenes/`,
    );
  }

  const tilePx = int('tilePx', { min: 1, max: 1_000_000 }, 512) ?? (DEFAULT_PARAMS.tile_px as number);
  // The output profile is part of every job key, like the rest of the parameters. A codec named
  // without a level takes that codec's default level (OUTPUT_LEVELS), not the default profile's.
  const compression = oneOf('compression', OUTPUT_COMPRESSIONS, undefined);
  const compressionLevel = int('compressionLevel', { min: 1, max: 22 }, 3);
  const defaultOutput = DEFAULT_PARAMS.output as Readonly<Record<string, unknown>>;
  const output =
    compression === undefined && compressionLevel === undefined
      ? defaultOutput
      : {
          ...Object.fromEntries(Object.entries(defaultOutput).filter(([k]) => compression === undefined || k !== 'level')),
          ...(compression === undefined ? {} : { compression }),
          ...(compressionLevel === undefined ? {} : { level: compressionLevel }),
        };
  // tessera:format, rescale, colormap, background: rendered tiles for web maps, checked with the rest of the params below.
  const rendered = renderedOutput(output, get, key, compression !== undefined || compressionLevel !== undefined);
  if (rendered.problem !== undefined) problems.push(rendered.problem);
  // tessera:tms and tessera:zoom (a zoom, or a range MIN-MAX: a pyramid), checked against the set's own zooms.
  let tmsZoom: Record<string, unknown> = {};
  const [tmsId, zoomText] = [get('tms'), get('zoom')];
  if ((tmsId === undefined) !== (zoomText === undefined)) {
    problems.push(`${key('tms')} and ${key('zoom')} go together: e.g. \`${set('tms', 'WebMercatorQuad')}\` and \`${set('zoom', '8-14')}\``);
  } else if (tmsId !== undefined && zoomText !== undefined) {
    try {
      const zoom = zoomRangeParams(zoomText, key('zoom'));
      checkZoomRange(tmsId, zoom.min_zoom ?? zoom.zoom, zoom.zoom);
      tmsZoom = { tms: tmsId, ...zoom };
    } catch (e) {
      problems.push(`${key('tms')} / ${key('zoom')}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  const params: ProcessingParams = {
    ...DEFAULT_PARAMS,
    version: get('pipelineVersion') ?? DEFAULT_PARAMS.version,
    tile_px: tilePx,
    expression: get('expression') ?? DEFAULT_PARAMS.expression,
    output: rendered.output,
    ...tmsZoom,
    // tessera:mosaic: the mosaics every scene gets, a processing parameter like the rest (tilingParams checks it below).
    ...(get('mosaic') === undefined ? {} : { mosaic: (get('mosaic') as string).toLowerCase() }),
  };
  try {
    // On a STAC stack the bands are the selection's (their indexes come from each item at fan-out).
    const bands = stacAssets === undefined ? undefined : Object.fromEntries(Object.keys(stacAssets).map((b) => [b, 1]));
    const tiling = tilingParams(bands === undefined ? params : { ...params, bands });
    if (bands !== undefined) {
      try {
        parseExpression(tiling.expression, Object.keys(bands));
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        problems.push(
          `${key('expression')} must use only the bands ${key('stacAssets')} selects: ${why}; add the band to ${key('stacAssets')}`,
        );
      }
    }
  } catch (e) {
    problems.push(
      `processing parameters (${key('tilePx')}, ${key('expression')}, ${key('compression')}, ${key('compressionLevel')}${get('format') === undefined ? '' : `, ${key('format')}, ${key('rescale')}, ${key('colormap')}, ${key('background')}`}${get('mosaic') === undefined ? '' : `, ${key('mosaic')}`}): ${e instanceof Error ? e.message : String(e)}`,
    );
  }

  const retentionSec = int('retentionSeconds', { min: 60, max: 10 * 365 * 86_400 }, DEFAULT_RETENTION_SEC) ?? DEFAULT_RETENTION_SEC;
  if (lease && retentionSec <= lease.leaseSec) {
    problems.push(
      `${key('retentionSeconds')} ${retentionSec} must be longer than the lease of ${lease.leaseSec} s, or a live claim row could expire`,
    );
  }

  const stagingRetentionDays =
    int('stagingRetentionDays', { min: 1, max: 3650 }, DEFAULT_STAGING_RETENTION_DAYS) ?? DEFAULT_STAGING_RETENTION_DAYS;

  const allowedHostsText = get('ingestAllowedHosts');
  let ingestAllowedHosts: string[] | undefined;
  if (allowedHostsText !== undefined) {
    const parsed = parseHostPatterns(splitList(allowedHostsText));
    for (const p of parsed.problems) problems.push(`${key('ingestAllowedHosts')}: ${p}`);
    if (parsed.problems.length === 0 && parsed.hosts.length === 0)
      problems.push(
        `${key('ingestAllowedHosts')} is set but names no host; remove it (any public host) or list hosts: \`${set('ingestAllowedHosts', 'earth-search.aws.element84.com')}\``,
      );
    ingestAllowedHosts = parsed.hosts;
  }

  const alertEmail = get('alertEmail');
  if (alertEmail !== undefined && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(alertEmail)) {
    problems.push(`${key('alertEmail')} must be an e-mail address, got ${JSON.stringify(alertEmail)}`);
  }

  const sinkText = get('featureSinkUrl');
  const sinkProblem = sinkText === undefined ? undefined : featureSinkUrlProblem(sinkText, dialect);
  if (sinkProblem !== undefined) problems.push(sinkProblem);
  const featureSinkUrl: pulumi.Input<string> | undefined = settings.secrets?.featureSinkUrl ?? sinkText;

  const corsText = get('outputCorsOrigins');
  const outputCorsOrigins = corsText === undefined ? undefined : splitList(corsText);
  if (outputCorsOrigins !== undefined) problems.push(...corsOriginProblems(outputCorsOrigins, dialect));

  const telemetry = parseTelemetry(
    get('telemetry'),
    settings.secrets?.telemetryHeaders ?? get('telemetryHeaders'),
    cloud,
    dialect,
    problems,
  );
  const project = settings.project;
  if (cloud === 'gcp' && !project) problems.push(dialect.projectMissing());
  const claimsCollection = get('claimsCollection') ?? 'claims';
  if (cloud === 'gcp' && !/^[A-Za-z0-9_-]{1,100}$/.test(claimsCollection)) {
    problems.push(`${key('claimsCollection')} must be 1-100 letters, digits, _ or -, got ${JSON.stringify(claimsCollection)}`);
  }
  const firestoreDatabase = get('gcpFirestoreDatabase') ?? gcpFirestoreDatabaseId(ctx.stack);
  if (cloud === 'gcp' && firestoreDatabase !== FIRESTORE_DEFAULT_DATABASE && !FIRESTORE_DATABASE_ID.test(firestoreDatabase)) {
    problems.push(
      `${key('gcpFirestoreDatabase')} must be ${FIRESTORE_DEFAULT_DATABASE} or 4-63 lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen; got ${JSON.stringify(firestoreDatabase)}`,
    );
  }
  const storageAccountName = get('azureStorageAccountName');
  if (storageAccountName !== undefined && !/^[a-z0-9]{3,24}$/.test(storageAccountName)) {
    problems.push(`${key('azureStorageAccountName')} must be 3-24 lowercase letters and digits, got ${JSON.stringify(storageAccountName)}`);
  }

  // Runtime dates are checked against today: a stack that deployed last month may be refused now.
  const runtimePlatform = platform === undefined ? undefined : runtimePlatformOf(platform);
  const runtimeId = get('runtime') ?? (runtimePlatform === undefined ? undefined : deployedRuntime(runtimePlatform).runtimeId);
  const runtimeCheck =
    runtimePlatform === undefined || runtimeId === undefined
      ? undefined
      : checkRuntime(runtimePlatform, runtimeId, ctx.today ?? new Date());
  if (runtimeCheck?.level === 'refuse') {
    // The default itself refused means the table says its runtime is blocked: the table needs updating, not the stack.
    const fix =
      get('runtime') === undefined
        ? '; the default runtime is blocked too: update shared/domain/runtimes.ts'
        : `; remove ${key('runtime')} to deploy Tessera's default`;
    problems.push(`${key('runtime')}: ${runtimeCheck.message}${fix}`);
  }

  if (problems.length > 0 || !cloud || !region || !platform || !lease || memoryMb === undefined || !runtimeCheck?.row) {
    return { config: undefined, problems: problems.length > 0 ? problems : ['the configuration is incomplete'] };
  }
  const common = {
    stack: ctx.stack,
    region,
    lease,
    memoryMb,
    maxReceiveCount,
    source: { prefix, suffix },
    stacAssets,
    params,
    retentionSec,
    stagingRetentionDays,
    ingestAllowedHosts,
    alertEmail,
    featureSinkUrl,
    outputCorsOrigins,
    telemetry,
    archiveDir: get('archiveDir') ?? ctx.defaultArchiveDir,
    runtime: { id: runtimeCheck.row.runtimeId, nodeMajor: runtimeCheck.row.nodeMajor, check: runtimeCheck },
  };
  switch (cloud) {
    case 'aws':
      return {
        problems: [],
        config: {
          ...common,
          cloud,
          platform: 'aws-lambda',
          tileQueueVisibilitySec: visibility ?? lease.functionTimeoutSec,
          tileMaxConcurrency,
        },
      };
    case 'gcp':
      return {
        problems: [],
        config: {
          ...common,
          cloud,
          platform: platform as GcpStackConfig['platform'],
          project: project as string,
          tileTrigger: gcpTrigger ?? 'event',
          claimsCollection,
          firestoreDatabase,
          ackDeadlineSec: PUBSUB_MAX_ACK_DEADLINE_SEC,
        },
      };
    case 'azure':
      return {
        problems: [],
        config: {
          ...common,
          cloud,
          platform: platform as AzureStackConfig['platform'],
          plan: azurePlan ?? 'consumption',
          storageAccountName,
          retryVisibilitySec: azureRetryVisibilitySec(lease.leaseSec, lease.functionTimeoutSec, maxReceiveCount),
        },
      };
  }
}

/** The platform id (shared/domain/ceilings.ts) of a cloud's tile worker. */
export function platformOf(
  cloud: Cloud | undefined,
  plan: AzurePlan | undefined,
  trigger: GcpTileTrigger | undefined,
): Platform | undefined {
  switch (cloud) {
    case 'aws':
      return 'aws-lambda';
    case 'gcp':
      return trigger === 'http' ? 'gcf2-http' : trigger === 'event' ? 'gcf2-event' : undefined;
    case 'azure':
      return plan === 'flex' ? 'azure-flex' : plan === 'consumption' ? 'azure-consumption' : undefined;
    case undefined:
      return undefined;
  }
}

/**
 * The queue visibility the tile trigger gives a running job, where the
 * platform lets us choose one that resolveLease can check against the timeout.
 * - SQS: six times the timeout (AWS's advice, and room for Lambda's own retries), capped at 12 h.
 * - Pub/Sub push, event mode: the 600 s maximum ack deadline, which covers the 540 s ceiling.
 * - Pub/Sub push, HTTP mode (timeout up to 3,600 s) and Azure queues: no check here.
 *   Pub/Sub cannot hold a push longer than 600 s; the Functions host renews a queue message's
 *   visibility while the function runs. docs/deploy.md says what each means.
 */
export function visibilityFor(platform: Platform, timeoutSec: number): number | undefined {
  switch (platform) {
    case 'aws-lambda':
      return Math.min(SQS_VISIBILITY_FACTOR * timeoutSec, SQS_MAX_VISIBILITY_SEC);
    case 'gcf2-event':
      return PUBSUB_MAX_ACK_DEADLINE_SEC;
    default:
      return undefined;
  }
}

function defaultMemoryMb(platform: Platform | undefined): number | undefined {
  if (platform === undefined) return undefined;
  // Consumption has one size (1.5 GB); everywhere else 2 GB holds a 512 px float32 tile and its COG encoder with room.
  return platform === 'azure-consumption' ? 1536 : 2048;
}

/** The known name nearest to `name` (at most three edits away), to suggest for a typo. */
export function closestKey(name: string, known: readonly string[]): string | undefined {
  let best: { key: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d <= 3 && (!best || d < best.d)) best = { key: k, d };
  }
  return best?.key;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/**
 * Read the current stack's configuration from the Pulumi runtime and parse it.
 * A failure is raised as a `pulumi.RunError`, which the CLI prints without a
 * stack trace: the message is what the user needs.
 */
export function readStackConfig(defaultArchiveDir: string): StackConfig {
  const stack = pulumi.getStack();
  try {
    const cfg = parseStackConfig(pulumi.runtime.allConfig(), { stack, defaultArchiveDir, today: new Date() });
    if (cfg.runtime.check.level === 'warn') void pulumi.log.warn(`tessera:runtime: ${cfg.runtime.check.message}`);
    return cfg;
  } catch (e) {
    if (e instanceof StackConfigError) throw new pulumi.RunError(e.message);
    throw e;
  }
}

/**
 * The output of a stack's tiles with `tessera:format` (and rescale, colormap, background) applied to the COG profile
 * `output`: unchanged without a format; a rendered format drops the COG-only settings (outputForFormat). The shape of
 * each value is checked here, the rest (a missing rescale, a JPEG without background) by tilingParams with the other
 * parameters, so a stack and `tessera run --format` refuse the same things with the same words.
 */
function renderedOutput(
  output: Readonly<Record<string, unknown>>,
  get: (name: ConfigKey) => string | undefined,
  key: (name: ConfigKey) => string,
  cogProfile: boolean,
): { readonly output: Readonly<Record<string, unknown>>; readonly problem?: string } {
  const [formatText, rescaleText, colormap, backgroundText] = [get('format'), get('rescale'), get('colormap'), get('background')];
  if (formatText === undefined) {
    const given = (['rescale', 'colormap', 'background'] as const).filter((k) => get(k) !== undefined);
    return given.length === 0
      ? { output }
      : { output, problem: `${given.map(key).join(', ')} apply to rendered tiles only: set ${key('format')} to PNG, WEBP or JPEG too` };
  }
  const format = formatText.toUpperCase() as TileFormat;
  if (!(TILE_FORMATS as readonly string[]).includes(format))
    return { output, problem: `${key('format')} must be one of ${TILE_FORMATS.join(', ')}, got ${JSON.stringify(formatText)}` };
  if (format !== 'COG' && cogProfile)
    return {
      output,
      problem: `${key('compression')} and ${key('compressionLevel')} set the COG tiles' codec; ${format} tiles are encoded as ${format}: remove them`,
    };
  const numbers = (text: string | undefined) => text?.split(',').map((p) => (p.trim() === '' ? Number.NaN : Number(p.trim())));
  const rescale = numbers(rescaleText);
  const background = numbers(backgroundText);
  return {
    output: outputForFormat(output, {
      format,
      ...(rescale === undefined ? {} : { rescale: rescale as unknown as [number, number] }),
      ...(colormap === undefined ? {} : { colormap }),
      ...(background === undefined ? {} : { background: background as unknown as [number, number, number] }),
    }),
  };
}
