import { canonicalJson } from './canonical-json.js';
import { isPlatform, type Platform, resolveLease } from './ceilings.js';
import { LeaseConfigError } from './errors.js';
import type { ProcessingParams } from './job-key.js';
import type { DeployedRole } from './key-layout.js';
import { addressPatternProblem, parseHostPatterns, splitList } from './remote-hosts.js';
import { parseStacSelection } from './stac-item.js';

/**
 * The environment contract between infra/ (which sets these variables on every
 * function) and functions/ (which reads them in each cloud's compose.ts).
 * Both import the names from here so they cannot drift.
 */
export const ENV = {
  platform: 'TESSERA_PLATFORM',
  /** DynamoDB table / Firestore collection / Azure table holding claim rows. */
  claimsTable: 'TESSERA_CLAIMS_TABLE',
  sourceBucket: 'TESSERA_SOURCE_BUCKET',
  outputBucket: 'TESSERA_OUTPUT_BUCKET',
  /** SQS queue URL / Pub/Sub topic name / Azure queue name for tile jobs. */
  tileQueue: 'TESSERA_TILE_QUEUE',
  /** SQS DLQ URL / Pub/Sub dead-letter topic / Azure poison queue. */
  deadLetterQueue: 'TESSERA_DEAD_LETTER_QUEUE',
  /**
   * Deliveries before the trigger's queue dead-letters a message (SQS maxReceiveCount,
   * Pub/Sub maxDeliveryAttempts): the redelivery schedule shared/app/redelivery.ts reads.
   * Azure reads the host's own maxDequeueCount setting instead.
   */
  maxDeliveries: 'TESSERA_MAX_DELIVERIES',
  sourcePrefix: 'TESSERA_SOURCE_PREFIX',
  sourceSuffix: 'TESSERA_SOURCE_SUFFIX',
  functionTimeoutSeconds: 'TESSERA_FUNCTION_TIMEOUT_SECONDS',
  leaseSeconds: 'TESSERA_LEASE_SECONDS',
  retentionSeconds: 'TESSERA_RETENTION_SECONDS',
  /** How far apart two workers' clocks may be (whole seconds, 0 allowed): see shared/app/clock-skew.ts. */
  clockSkewMarginSeconds: 'TESSERA_CLOCK_SKEW_MARGIN_SECONDS',
  /** Canonical JSON of the ProcessingParams (pipeline, version, tile_px, expression, bands...). */
  params: 'TESSERA_PARAMS',
  /** Azure: storage account name (identity-based access) or a connection string for Azurite. */
  azureStorageAccount: 'TESSERA_AZURE_STORAGE_ACCOUNT',
  /**
   * Azure: the client id of the user-assigned identity each function's SDK clients authenticate as, one setting per
   * role (one app hosts every function, so one environment names them all; infra/azure sets them, docs/iam.md).
   */
  azureClientIdScene: 'TESSERA_AZURE_CLIENT_ID_SCENE',
  azureClientIdTile: 'TESSERA_AZURE_CLIENT_ID_TILE',
  azureClientIdMosaic: 'TESSERA_AZURE_CLIENT_ID_MOSAIC',
  azureClientIdIngest: 'TESSERA_AZURE_CLIENT_ID_INGEST',
  azureClientIdReconcile: 'TESSERA_AZURE_CLIENT_ID_RECONCILE',
  azureClientIdStream: 'TESSERA_AZURE_CLIENT_ID_STREAM',
  gcpProject: 'TESSERA_GCP_PROJECT',
  /** GCP: the Firestore database holding the claims collection (a named database per stack; absent: `(default)`). */
  firestoreDatabase: 'TESSERA_FIRESTORE_DATABASE',
  /** The ingest manifest: DynamoDB table / Firestore collection / Azure table (set on the ingest and reconcile functions). */
  manifestTable: 'TESSERA_MANIFEST_TABLE',
  /** SQS queue URL / Pub/Sub topic name / Azure queue name of ingest requests (`tessera ingest --cloud` enqueues there). */
  ingestQueue: 'TESSERA_INGEST_QUEUE',
  /**
   * The optional PostGIS feature sink of the tile function: `postgis://user:password@host:5432/db`; absent: no
   * feature rows (docs/postgis.md). The deployed stacks never write the URL into a function's configuration: on GCP
   * the platform fills this variable from Secret Manager, on Azure it resolves a Key Vault reference into it, and on
   * AWS it stays unset ({@link ENV.featureSinkSecret} instead). The local backend takes the URL itself.
   */
  featureSink: 'TESSERA_FEATURE_SINK',
  /**
   * AWS: the ARN of the Secrets Manager secret holding the feature sink URL. The tile function reads it at cold
   * start, since Lambda has no secret environment variables and its environment is readable by anyone allowed
   * `lambda:GetFunctionConfiguration`.
   */
  featureSinkSecret: 'TESSERA_FEATURE_SINK_SECRET',
  /**
   * AWS: the version of {@link ENV.featureSinkSecret} the stack wrote. Pinned so that a rotation through `pulumi up`
   * changes the function's configuration, which replaces every warm instance holding the old URL.
   */
  featureSinkSecretVersion: 'TESSERA_FEATURE_SINK_SECRET_VERSION',
  /**
   * AWS: the ARN of the Secrets Manager secret holding the OTLP exporter's headers (`tessera:telemetryHeaders`, an
   * API key), and the version the stack wrote: read at cold start, as the sink URL is (docs/telemetry.md).
   */
  otelHeadersSecret: 'TESSERA_OTEL_HEADERS_SECRET',
  otelHeadersSecretVersion: 'TESSERA_OTEL_HEADERS_SECRET_VERSION',
  /**
   * A STAC stack's asset selection (stack config `tessera:stacAssets`): JSON band name -> STAC asset,
   * e.g. {"B04":"red","B08":"nir"}. Set: a scene starts on its STAC Item (docs/multi-file-scenes.md).
   */
  stacAssets: 'TESSERA_STAC_ASSETS',
  /**
   * The hosts an ingest's http(s) hrefs may name (stack config `tessera:ingestAllowedHosts`), comma-separated:
   * `example.com`, `*.example.com`. Unset: any public host, a remote STAC Item's assets on its own host only.
   */
  ingestAllowedHosts: 'TESSERA_INGEST_ALLOWED_HOSTS',
  /**
   * Non-public addresses an ingest may fetch from all the same (comma-separated addresses or CIDR blocks).
   * infra/ never sets it: a test's environment does, for its own server on 127.0.0.1 (docs/ingest.md).
   */
  ingestAllowPrivateAddresses: 'TESSERA_INGEST_ALLOW_PRIVATE_ADDRESSES',
  /**
   * A tile process's garbage-collector setting, V8's heap growing percentage (shared/raster/heap-tuning.ts): unset,
   * 300; `0` keeps V8's own. infra/ never sets it: an operator may, on the tile function (or a local worker's
   * environment), to trade the tile's CPU time for memory the other way.
   */
  tileHeapGrowingPercent: 'TESSERA_TILE_HEAP_GROWING_PERCENT',
} as const;

/** The app setting naming each Azure function's own identity ({@link ENV} azureClientId*). */
export const AZURE_CLIENT_ID_SETTINGS: Readonly<Record<DeployedRole, string>> = {
  scene: ENV.azureClientIdScene,
  tile: ENV.azureClientIdTile,
  mosaic: ENV.azureClientIdMosaic,
  ingest: ENV.azureClientIdIngest,
  reconcile: ENV.azureClientIdReconcile,
  stream: ENV.azureClientIdStream,
};

export interface RuntimeConfig {
  readonly platform: Platform;
  readonly claimsTable: string;
  readonly sourceBucket: string;
  readonly outputBucket: string;
  readonly tileQueue: string;
  readonly deadLetterQueue: string | undefined;
  /** {@link ENV.maxDeliveries}; `undefined` when unset (each cloud's compose then assumes what infra/ deploys). */
  readonly maxDeliveries?: number | undefined;
  readonly sourcePrefix: string;
  readonly sourceSuffix: string;
  readonly functionTimeoutSec: number;
  readonly leaseSec: number;
  readonly retentionSec: number;
  /** {@link ENV.clockSkewMarginSeconds}: a lease is taken over only once it lapsed by more than this (default {@link DEFAULT_CLOCK_SKEW_MARGIN_SEC}). */
  readonly clockSkewMarginSec?: number | undefined;
  readonly params: ProcessingParams;
  /** {@link ENV.manifestTable}; only the ingest and reconcile functions have one. */
  readonly manifestTable?: string | undefined;
  /** {@link ENV.ingestQueue}; only the ingest function has one. */
  readonly ingestQueue?: string | undefined;
  /** {@link ENV.featureSink}; only a tile function of a stack with a sink has one. Never logged (it holds a password). */
  readonly featureSinkUrl?: string | undefined;
  /** {@link ENV.featureSinkSecret} and its version: where an AWS tile function reads its sink URL from. */
  readonly featureSinkSecret?: { readonly secretId: string; readonly versionId: string | undefined } | undefined;
  /** {@link ENV.stacAssets}: set on a STAC stack, whose scene trigger reads STAC Items (shared/app/stac-scene.ts). */
  readonly stacAssets?: Readonly<Record<string, string>> | undefined;
  /** {@link ENV.ingestAllowedHosts}, normalised; undefined when unset. */
  readonly ingestAllowedHosts?: readonly string[] | undefined;
  /** {@link ENV.ingestAllowPrivateAddresses}; undefined when unset (nothing non-public is reached). */
  readonly ingestAllowPrivateAddresses?: readonly string[] | undefined;
}

export const DEFAULT_RETENTION_SEC = 7 * 24 * 3600;

/** How an Azure app setting names a Key Vault secret for the platform to resolve: `@Microsoft.KeyVault(SecretUri=...)`. */
export const KEY_VAULT_REFERENCE_PREFIX = '@Microsoft.KeyVault(';

/**
 * The clock skew margin (docs/architecture.md, "Clocks"): NTP-synchronised hosts are within milliseconds;
 * 30 s covers a host whose sync broke, and costs a dead worker's job 30 s more of waiting.
 */
export const DEFAULT_CLOCK_SKEW_MARGIN_SEC = 30;

/**
 * The default processing parameters: NDVI from Sentinel-2 style bands.
 *
 * The output profile is DEFLATE 9 (issue 15: the default is the profile where
 * Tessera's tile worker is ahead of GDAL's warm library on equal settings). On
 * one core Tessera wrote 1.31x GDAL's tiles per second at DEFLATE 9 and 0.73x
 * at GDAL's own default, DEFLATE 6 (docs/benchmarks.md). Any DEFLATE reader
 * reads it; a codec named without a level (`--compression deflate`,
 * `tessera:compression DEFLATE`) still takes that codec's default (6).
 */
export const DEFAULT_PARAMS: ProcessingParams = {
  pipeline: 'ndvi-tiler',
  version: '1.0.0',
  tile_px: 512,
  expression: '(B08 - B04) / (B08 + B04)',
  bands: { B04: 1, B08: 2 },
  output: { format: 'COG', dtype: 'float32', nodata: -9999, compression: 'DEFLATE', level: 9, blocksize: 256 },
};

/** The skew margin a runtime claims with, in ms: the configured one, else the default capped at a quarter of the lease. */
export function clockSkewMarginMs(config: Pick<RuntimeConfig, 'clockSkewMarginSec' | 'leaseSec'>): number {
  return (config.clockSkewMarginSec ?? Math.min(DEFAULT_CLOCK_SKEW_MARGIN_SEC, Math.floor(config.leaseSec / 4))) * 1000;
}

/**
 * Parse the function environment. Pure: takes the record (so shared/ never
 * touches process.env) and throws one error naming every missing or bad variable.
 */
export function parseRuntimeConfig(env: Readonly<Record<string, string | undefined>>): RuntimeConfig {
  const problems: string[] = [];
  const need = (name: string): string => {
    const v = env[name];
    if (v === undefined || v === '') problems.push(`${name} is not set`);
    return v ?? '';
  };
  const int = (name: string, fallback: number | undefined): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const v = Number(raw);
    if (!Number.isInteger(v) || v <= 0) problems.push(`${name} must be a positive whole number, got ${JSON.stringify(raw)}`);
    return v;
  };
  const platform = env[ENV.platform] ?? '';
  if (!isPlatform(platform))
    problems.push(
      `${ENV.platform} must be one of aws-lambda, gcf2-event, gcf2-http, azure-consumption, azure-flex, azure-premium, local; got ${JSON.stringify(platform)}`,
    );
  let params: ProcessingParams = DEFAULT_PARAMS;
  const rawParams = env[ENV.params];
  if (rawParams) {
    try {
      const parsed = JSON.parse(rawParams) as ProcessingParams;
      canonicalJson(parsed);
      params = parsed;
    } catch (e) {
      problems.push(`${ENV.params} is not valid canonical JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  let stacAssets: Record<string, string> | undefined;
  if (env[ENV.stacAssets]) {
    try {
      stacAssets = parseStacSelection(env[ENV.stacAssets] as string, ENV.stacAssets);
    } catch (e) {
      problems.push(e instanceof Error ? e.message : String(e));
    }
  }
  let ingestAllowedHosts: string[] | undefined;
  if (env[ENV.ingestAllowedHosts]) {
    const parsed = parseHostPatterns(splitList(env[ENV.ingestAllowedHosts] as string));
    for (const p of parsed.problems) problems.push(`${ENV.ingestAllowedHosts}: ${p}`);
    ingestAllowedHosts = parsed.hosts;
  }
  let ingestAllowPrivateAddresses: string[] | undefined;
  if (env[ENV.ingestAllowPrivateAddresses]) {
    ingestAllowPrivateAddresses = splitList(env[ENV.ingestAllowPrivateAddresses] as string);
    for (const a of ingestAllowPrivateAddresses) {
      const problem = addressPatternProblem(a);
      if (problem !== undefined) problems.push(`${ENV.ingestAllowPrivateAddresses}: ${problem}`);
    }
  }
  const config = {
    claimsTable: need(ENV.claimsTable),
    sourceBucket: need(ENV.sourceBucket),
    outputBucket: need(ENV.outputBucket),
    tileQueue: need(ENV.tileQueue),
    deadLetterQueue: env[ENV.deadLetterQueue] || undefined,
    maxDeliveries: int(ENV.maxDeliveries, undefined),
    sourcePrefix: env[ENV.sourcePrefix] ?? '',
    sourceSuffix: env[ENV.sourceSuffix] ?? '',
    timeout: int(ENV.functionTimeoutSeconds, undefined),
    lease: int(ENV.leaseSeconds, undefined),
    retention: int(ENV.retentionSeconds, DEFAULT_RETENTION_SEC) ?? DEFAULT_RETENTION_SEC,
    clockSkewMargin: ((raw) => {
      if (raw === undefined || raw === '') return undefined;
      const v = Number(raw);
      if (!Number.isInteger(v) || v < 0)
        problems.push(`${ENV.clockSkewMarginSeconds} must be a whole number of seconds >= 0, got ${JSON.stringify(raw)}`);
      return v;
    })(env[ENV.clockSkewMarginSeconds]),
  };
  // The sink URL has one source per function: two would leave which one wins to the reader.
  const sinkSecret = env[ENV.featureSinkSecret] || undefined;
  const sinkSecretVersion = env[ENV.featureSinkSecretVersion] || undefined;
  if (sinkSecret !== undefined && env[ENV.featureSink])
    problems.push(`${ENV.featureSink} and ${ENV.featureSinkSecret} are both set; set only one (the stacks set the secret on AWS)`);
  if (sinkSecretVersion !== undefined && sinkSecret === undefined)
    problems.push(`${ENV.featureSinkSecretVersion} is set without ${ENV.featureSinkSecret}; set the secret's ARN too`);
  // Azure leaves the reference itself in the setting when it cannot resolve it; as a URL it would fail far from the cause.
  if (env[ENV.featureSink]?.startsWith(KEY_VAULT_REFERENCE_PREFIX))
    problems.push(
      `${ENV.featureSink} holds an unresolved Key Vault reference: the app's keyVaultReferenceIdentity needs "Key Vault Secrets User" on the secret, and the vault must be reachable (the app's Environment variables page shows why it failed; docs/postgis.md)`,
    );
  if (problems.length > 0) throw new LeaseConfigError(`function environment is incomplete: ${problems.join('; ')}`);
  const lease = resolveLease({ platform: platform as Platform, functionTimeoutSec: config.timeout, leaseSec: config.lease });
  // A margin as long as the lease would double every takeover wait: a skew that large is a broken host, not a margin.
  // Unset, it is the default, but never more than a quarter of a (short, test-sized) lease.
  if (config.clockSkewMargin !== undefined && config.clockSkewMargin >= lease.leaseSec)
    throw new LeaseConfigError(
      `${ENV.clockSkewMarginSeconds} (${config.clockSkewMargin} s) must be shorter than the lease (${lease.leaseSec} s); fix the hosts' clocks (NTP) instead`,
    );
  const clockSkewMarginSec = config.clockSkewMargin ?? Math.min(DEFAULT_CLOCK_SKEW_MARGIN_SEC, Math.floor(lease.leaseSec / 4));
  return {
    platform: platform as Platform,
    claimsTable: config.claimsTable,
    sourceBucket: config.sourceBucket,
    outputBucket: config.outputBucket,
    tileQueue: config.tileQueue,
    deadLetterQueue: config.deadLetterQueue,
    maxDeliveries: config.maxDeliveries,
    sourcePrefix: config.sourcePrefix,
    sourceSuffix: config.sourceSuffix,
    functionTimeoutSec: lease.functionTimeoutSec,
    leaseSec: lease.leaseSec,
    retentionSec: config.retention,
    clockSkewMarginSec,
    params,
    manifestTable: env[ENV.manifestTable] || undefined,
    ingestQueue: env[ENV.ingestQueue] || undefined,
    featureSinkUrl: env[ENV.featureSink] || undefined,
    featureSinkSecret: sinkSecret === undefined ? undefined : { secretId: sinkSecret, versionId: sinkSecretVersion },
    stacAssets,
    ingestAllowedHosts,
    ingestAllowPrivateAddresses,
  };
}
