import { hostname } from 'node:os';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Backend, WorkerSettings } from '../../shared/app/backend.js';
import { withClockSkewMargin } from '../../shared/app/clock-skew.js';
import type { SourceFilter } from '../../shared/app/scene-event.js';
import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import { clockSkewMarginMs, ENV, parseRuntimeConfig, type RuntimeConfig } from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { FeatureBatchSink } from '../../shared/ports/feature-batch-sink.port.js';
import type { FeatureSink } from '../../shared/ports/feature-sink.port.js';
import type { ManifestStore } from '../../shared/ports/manifest-store.port.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { tuneHeapForTiles } from '../../shared/raster/heap-tuning.js';
import { type OtelSdk, otelRequested, otelSdkFor, parseOtlpHeaders } from '../otel/otel-env.js';
import { PostgisFeatureBatchSink } from '../postgres/postgis-feature-batch-sink.js';
import { PostgisFeatureSink } from '../postgres/postgis-feature-sink.js';
import { DynamoDbClaimStore, type DynamoDbSender } from './adapters/dynamodb-claim-store.js';
import { DynamoDbManifestStore } from './adapters/dynamodb-manifest-store.js';
import { S3ObjectStore, type S3Sender } from './adapters/s3-object-store.js';
import { SecretsManagerSecret, type SecretsManagerSender } from './adapters/secrets-manager-secret.js';
import { SqsJobQueue, type SqsSender } from './adapters/sqs-job-queue.js';

// The OpenTelemetry SDK (some 600 files, about 0.15 s of a cold start) is loaded only when OTEL_* variables ask for it:
// otelSdkFor (otel-env.ts) sets it up from there (docs/telemetry.md, docs/packages.md "Start-up").
if (otelRequested(process.env)) await import('../otel/otel-sdk.js');

/** The SDK clients the AWS backend is built from. Tests pass clients pointed at the emulators. */
export interface AwsClients {
  readonly dynamodb: DynamoDbSender;
  readonly s3: S3Sender;
  readonly sqs: SqsSender;
  /** Read only by a tile function whose sink URL is a secret (TESSERA_FEATURE_SINK_SECRET); made on demand otherwise. */
  readonly secretsManager?: SecretsManagerSender | undefined;
}

export interface AwsRuntime {
  readonly config: RuntimeConfig;
  readonly backend: Backend & { readonly queue: SqsJobQueue };
  readonly settings: WorkerSettings;
  readonly filter: SourceFilter;
  /** The clients, for the few calls a handler makes outside the ports (SQS visibility changes). */
  readonly clients: AwsClients;
  /** The ingest manifest (DynamoDB, TESSERA_MANIFEST_TABLE): the ingest and reconcile functions only; undefined elsewhere. */
  readonly manifest?: ManifestStore | undefined;
  /**
   * The PostGIS batch sink of the stream function (docs/feature-batches.md), on the same URL as the feature sink; undefined
   * when the stack has none (tessera:featureSinkUrl). Opens its pool on first use only.
   */
  readonly batches?: FeatureBatchSink | undefined;
  /** The OpenTelemetry SDK when OTEL_* variables ask for it (docs/telemetry.md): a handler flushes it before it answers. */
  readonly otel?: OtelSdk | undefined;
}

export interface ComposeAwsOptions {
  readonly clients?: Partial<AwsClients>;
  readonly clock?: Clock;
  readonly telemetry?: Telemetry;
  /** This worker's identity in claim rows; default the Lambda log stream (one per execution environment). */
  readonly owner?: string;
}

/**
 * The AWS backend's one wiring point: reads the function environment (the
 * variables infra/ sets, see shared/domain/runtime-config.ts) and builds the
 * Backend from SDK clients. Region and credentials come from the Lambda
 * environment as usual (AWS_REGION, the execution role).
 *
 * SDK clients retry throttling and 5xx themselves (standard mode, 3 attempts);
 * what still fails is thrown as a retryable AdapterError and the delivery is
 * retried by SQS.
 *
 * @example
 * const rt = composeAws(process.env);
 * await processTile(rt.backend, rt.settings, job);
 */
export function composeAws(env: Readonly<Record<string, string | undefined>>, options: ComposeAwsOptions = {}): AwsRuntime {
  const config = parseRuntimeConfig(env);
  const clients: AwsClients = {
    dynamodb: options.clients?.dynamodb ?? new DynamoDBClient({}),
    s3: options.clients?.s3 ?? new S3Client({}),
    sqs: options.clients?.sqs ?? new SQSClient({}),
    secretsManager: options.clients?.secretsManager ?? (config.featureSinkSecret ? new SecretsManagerClient({}) : undefined),
  };
  const clock = options.clock ?? systemClock;
  const owner = options.owner ?? env.AWS_LAMBDA_LOG_STREAM_NAME ?? `${hostname()}:${process.pid}`;
  const logs =
    options.telemetry ??
    new JsonTelemetry((line) => process.stdout.write(`${line}\n`), {
      clock,
      fields: { function: env.AWS_LAMBDA_FUNCTION_NAME ?? 'tessera', worker: owner },
    });
  // Off unless OTEL_* variables ask for it: with the ADOT collector layer, OTLP to localhost:4318 (docs/telemetry.md).
  // An otlp exporter's headers (an API key) are in Secrets Manager, read before the first export, as the sink URL is.
  const headersArn = env[ENV.otelHeadersSecret];
  const headersSecret = headersArn
    ? new SecretsManagerSecret(clients.secretsManager ?? new SecretsManagerClient({}), headersArn, {
        versionId: env[ENV.otelHeadersSecretVersion] || undefined,
        purpose: 'the OTLP exporter headers',
      })
    : undefined;
  const otel = otelSdkFor(env, {
    serviceName: env.AWS_LAMBDA_FUNCTION_NAME ?? 'tessera',
    otlpHeaders: headersSecret ? async () => parseOtlpHeaders(await headersSecret.value()) : undefined,
  });
  const telemetry = otel ? otel.telemetry(logs) : logs;
  const outputs = new S3ObjectStore(clients.s3, config.outputBucket);
  // The PostGIS URL (tessera:featureSinkUrl): in Secrets Manager, docs/postgis.md. TESSERA_FEATURE_SINK itself is for
  // a runtime composed by hand (tests, a local run against these resources).
  const sinkUrl = config.featureSinkSecret
    ? secretUrl(
        new SecretsManagerSecret(clients.secretsManager ?? new SecretsManagerClient({}), config.featureSinkSecret.secretId, {
          versionId: config.featureSinkSecret.versionId,
          purpose: 'the PostGIS feature sink URL',
        }),
      )
    : config.featureSinkUrl;
  const backend = {
    // Leases compare two workers' clocks (the store has no time a condition can read): docs/architecture.md, "Clocks".
    claims: withClockSkewMargin(new DynamoDbClaimStore(clients.dynamodb, config.claimsTable), clockSkewMarginMs(config)),
    // One store per bucket; when sources and outputs share a bucket, share the store too.
    sources: config.sourceBucket === config.outputBucket ? outputs : new S3ObjectStore(clients.s3, config.sourceBucket),
    outputs,
    queue: new SqsJobQueue(clients.sqs, config.tileQueue, { deadLetterQueueUrl: config.deadLetterQueue }),
    clock,
    telemetry,
    // The optional PostGIS feature sink.
    sink: typeof sinkUrl === 'function' ? secretFeatureSink(sinkUrl) : sinkUrl ? PostgisFeatureSink.fromUrl(sinkUrl) : undefined,
  };
  return {
    config,
    backend,
    settings: { owner, leaseMs: config.leaseSec * 1000, retentionMs: config.retentionSec * 1000 },
    filter: { prefix: config.sourcePrefix, suffix: config.sourceSuffix },
    clients,
    manifest: config.manifestTable ? new DynamoDbManifestStore(clients.dynamodb, config.manifestTable) : undefined,
    batches: sinkUrl === undefined ? undefined : lazyBatchSink(typeof sinkUrl === 'function' ? sinkUrl : async () => sinkUrl),
    otel,
  };
}

/**
 * A secret's value, read once: the read starts at cold start, while the first job runs, so it costs that job nothing.
 * A failed read is not kept: the next call reads again and throws its SecretUnavailableError.
 */
function secretUrl(secret: SecretsManagerSecret): () => Promise<string> {
  let value: Promise<string> | undefined;
  const read = (): Promise<string> => {
    value ??= secret.value().catch((error: unknown) => {
      value = undefined;
      throw error;
    });
    return value;
  };
  // Nobody awaits the cold-start read: its failure is handled here and surfaces at the first call instead.
  read().catch(() => undefined);
  return read;
}

/** The batch sink of a URL known later (a secret): its pool opens at the first batch. */
function lazyBatchSink(url: () => Promise<string>): FeatureBatchSink {
  let sink: Promise<PostgisFeatureBatchSink> | undefined;
  const open = (): Promise<PostgisFeatureBatchSink> => {
    sink ??= url().then(
      (u) => PostgisFeatureBatchSink.fromUrl(u),
      (error: unknown) => {
        sink = undefined;
        throw error;
      },
    );
    return sink;
  };
  return {
    name: 'postgis',
    putBatch: async (batch) => (await open()).putBatch(batch),
    batchDone: async (batchKey) => (await open()).batchDone(batchKey),
  };
}

/**
 * The PostGIS sink of a URL kept in Secrets Manager ({@link secretUrl}); compose stays synchronous because the
 * handlers build their runtime on first use. A failed read throws its SecretUnavailableError at the call, which gives
 * the claim back (shared/app/process-tile.ts) and fails the delivery, retryable or not as the error says.
 */
function secretFeatureSink(url: () => Promise<string>): FeatureSink {
  let sink: Promise<PostgisFeatureSink> | undefined;
  const open = (): Promise<PostgisFeatureSink> => {
    sink ??= url().then(
      (url) => PostgisFeatureSink.fromUrl(url),
      (error: unknown) => {
        sink = undefined;
        throw error;
      },
    );
    return sink;
  };
  return {
    name: 'postgis',
    put: async (feature) => (await open()).put(feature),
    retireScene: async (scene, why) => (await open()).retireScene(scene, why),
  };
}

/**
 * The runtime of this Lambda execution environment, composed on first use
 * from `process.env` and kept for the warm invocations that follow (clients
 * keep their connections; the raster header cache stays warm).
 */
let cached: AwsRuntime | undefined;
export function lambdaRuntime(): AwsRuntime {
  cached ??= composeAws(process.env);
  return cached;
}

/**
 * The tile function's runtime: {@link lambdaRuntime}, in a process whose garbage collector is tuned for tiles at cold
 * start (shared/raster/heap-tuning.ts; ENV.tileHeapGrowingPercent overrides it). Each Lambda function is its own
 * process, so the other functions keep V8's defaults.
 */
export function lambdaTileRuntime(): AwsRuntime {
  tuneHeapForTiles(process.env[ENV.tileHeapGrowingPercent]);
  return lambdaRuntime();
}
