import { randomUUID } from 'node:crypto';
import { Firestore } from '@google-cloud/firestore';
import { PubSub } from '@google-cloud/pubsub';
import { Storage } from '@google-cloud/storage';
import type { Backend, WorkerSettings } from '../../shared/app/backend.js';
import { withClockSkewMargin } from '../../shared/app/clock-skew.js';
import type { SourceFilter } from '../../shared/app/scene-event.js';
import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import { CEILINGS, type Platform } from '../../shared/domain/ceilings.js';
import { LeaseConfigError } from '../../shared/domain/errors.js';
import { clockSkewMarginMs, ENV, parseRuntimeConfig, type RuntimeConfig } from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { FeatureBatchSink } from '../../shared/ports/feature-batch-sink.port.js';
import type { ManifestStore } from '../../shared/ports/manifest-store.port.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { tuneHeapForTiles } from '../../shared/raster/heap-tuning.js';
import { type OtelSdk, otelRequested, otelSdkFor } from '../otel/otel-env.js';
import { PostgisFeatureBatchSink } from '../postgres/postgis-feature-batch-sink.js';
import { PostgisFeatureSink } from '../postgres/postgis-feature-sink.js';
import { FirestoreClaimStore } from './adapters/firestore-claim-store.js';
import { FirestoreManifestStore } from './adapters/firestore-manifest-store.js';
import { GcsObjectStore } from './adapters/gcs-object-store.js';
import { PubSubDeadLetterTopic } from './adapters/pubsub-dead-letter-topic.js';
import { PubSubJobQueue, TILE_TOPIC_BATCHING } from './adapters/pubsub-job-queue.js';
import { googleTelemetryHeaders } from './telemetry-auth.js';

// The OpenTelemetry SDK (some 600 files, about 0.15 s of a cold start) is loaded only when OTEL_* variables ask for it:
// otelSdkFor (otel-env.ts) sets it up from there (docs/telemetry.md, docs/packages.md "Start-up").
if (otelRequested(process.env)) await import('../otel/otel-sdk.js');

/** The functions Tessera deploys on GCP (infra/common/packaging.ts GCP_ENTRY_POINTS). */
export type GcpFunctionRole = 'scene' | 'tile' | 'mosaic' | 'ingest' | 'reconcile' | 'stream';

/**
 * How a function is triggered decides its ceiling, and so its lease
 * (docs/gcp.md): event-driven functions (Eventarc) stop at 540 s, HTTP
 * functions at 3,600 s. The scene function is Eventarc-triggered; the mosaic
 * function is HTTP; the tile worker is either, depending on how its Pub/Sub
 * subscription reaches it (an Eventarc Pub/Sub trigger, or a push
 * subscription to the function's URL, which makes it an HTTP function). The
 * deployment says which in TESSERA_PLATFORM; this refuses what cannot be.
 * Cloud Functions 1st gen caps both kinds at 540 s.
 */
const PLATFORMS_FOR: Readonly<Record<GcpFunctionRole, readonly Platform[]>> = {
  scene: ['gcf2-event', 'gcf1'],
  tile: ['gcf2-event', 'gcf2-http', 'gcf1'],
  mosaic: ['gcf2-http', 'gcf1'],
  // A Pub/Sub push subscription to the function (event-driven: 540 s, inside the 600 s push deadline).
  ingest: ['gcf2-event', 'gcf1'],
  // Cloud Scheduler, HTTP.
  reconcile: ['gcf2-http', 'gcf1'],
  // Eventarc on the source bucket, as the scene function (docs/feature-batches.md).
  stream: ['gcf2-event', 'gcf1'],
};

/**
 * Firestore over gRPC with bounded retries. `preferRest: false` is explicit:
 * the environment variable FIRESTORE_PREFER_REST would otherwise switch the
 * transport, and over REST an older SDK retried a 409 forever. The GAPIC
 * defaults let one call retry for 600 s, longer than an event-driven
 * function lives; 60 s in all is plenty, and what still fails is retried by
 * the next delivery.
 */
export const FIRESTORE_SETTINGS = {
  preferRest: false,
  clientConfig: {
    interfaces: {
      'google.firestore.v1.Firestore': {
        retry_params: {
          default: {
            initial_retry_delay_millis: 100,
            retry_delay_multiplier: 1.3,
            max_retry_delay_millis: 5_000,
            initial_rpc_timeout_millis: 20_000,
            rpc_timeout_multiplier: 1,
            max_rpc_timeout_millis: 20_000,
            total_timeout_millis: 60_000,
          },
        },
      },
    },
  },
} as const;

/** The SDK clients the GCP backend is built from. Tests pass clients pointed at the emulators. */
export interface GcpClients {
  readonly firestore: Firestore;
  readonly storage: Storage;
  readonly pubsub: PubSub;
}

export interface GcpRuntime {
  readonly config: RuntimeConfig;
  readonly role: GcpFunctionRole;
  readonly backend: Backend;
  readonly settings: WorkerSettings;
  readonly filter: SourceFilter;
  /** Where the tile worker publishes poison messages; undefined when no dead-letter topic is configured. */
  readonly deadLetters: PubSubDeadLetterTopic | undefined;
  readonly clients: GcpClients;
  /** The ingest manifest (Firestore collection TESSERA_MANIFEST_TABLE, the stack's database): ingest and reconcile only. */
  readonly manifest?: ManifestStore | undefined;
  /** The stream function's PostGIS batch sink (the feature sink's URL, docs/feature-batches.md); undefined elsewhere or without one. */
  readonly batches?: FeatureBatchSink | undefined;
  /** The OpenTelemetry SDK when OTEL_* variables ask for it (docs/telemetry.md): a handler flushes it before it answers. */
  readonly otel?: OtelSdk | undefined;
}

export interface ComposeGcpOptions {
  /** The function being composed: its trigger decides which platforms (ceilings, leases) fit. */
  readonly role: GcpFunctionRole;
  readonly clients?: Partial<GcpClients> | undefined;
  readonly clock?: Clock | undefined;
  readonly telemetry?: Telemetry | undefined;
  /** This instance's identity in claim rows; default the revision and a per-process id. */
  readonly owner?: string | undefined;
}

/**
 * The GCP backend's one wiring point: reads the function environment (the
 * variables infra/ sets, see shared/domain/runtime-config.ts) and builds the
 * Backend: Firestore claims, GCS sources and outputs, Pub/Sub fan-out.
 * Credentials and project come from the function's service account as usual;
 * TESSERA_GCP_PROJECT overrides the project.
 *
 * Refuses a platform that cannot be this function's: the Eventarc-triggered
 * scene function configured as `gcf2-http` would get a 3,900 s lease for work
 * that can only live 540 s, and a redelivery would wait an hour for a dead worker.
 *
 * @example
 * const rt = composeGcp(process.env, { role: 'scene' });
 * await fanOutScene(rt.backend, { source, params: rt.config.params });
 */
export function composeGcp(env: Readonly<Record<string, string | undefined>>, options: ComposeGcpOptions): GcpRuntime {
  const config = parseRuntimeConfig(env);
  const allowed = PLATFORMS_FOR[options.role];
  if (!allowed.includes(config.platform)) {
    const want = allowed[0] as Platform;
    const kind = want === 'gcf2-event' ? 'event-driven (Eventarc)' : 'HTTP';
    throw new LeaseConfigError(
      `${ENV.platform}=${config.platform} does not fit the ${options.role} function, which is ${kind}: ` +
        `set ${ENV.platform}=${want} (${CEILINGS[want].label}, ${CEILINGS[want].ceilingSec} s ceiling, ` +
        `default lease ${CEILINGS[want].defaultLeaseSec} s). The 65-minute lease fits HTTP functions only`,
    );
  }
  const projectId = env[ENV.gcpProject] || undefined;
  // infra/ gives each stack its own named database (a project's (default) one may exist already or belong to App Engine).
  const databaseId = env[ENV.firestoreDatabase] || undefined;
  const clients: GcpClients = {
    firestore:
      options.clients?.firestore ??
      new Firestore({ ...FIRESTORE_SETTINGS, ...(projectId ? { projectId } : {}), ...(databaseId ? { databaseId } : {}) }),
    storage: options.clients?.storage ?? new Storage(projectId ? { projectId } : {}),
    pubsub: options.clients?.pubsub ?? new PubSub(projectId ? { projectId } : {}),
  };
  const clock = options.clock ?? systemClock;
  const owner = options.owner ?? `${env.K_REVISION ?? env.K_SERVICE ?? 'tessera'}/${randomUUID()}`;
  const logs =
    options.telemetry ??
    new JsonTelemetry((line) => process.stdout.write(`${line}\n`), {
      clock,
      fields: { function: env.K_SERVICE ?? env.FUNCTION_TARGET ?? 'tessera', worker: owner },
    });
  // Off unless OTEL_* variables ask for it: OTLP to Google's Telemetry API (Cloud Trace, Cloud Monitoring) or any
  // OTLP receiver (docs/telemetry.md).
  // Google's Telemetry API takes the function's own OAuth token on each export, which a fixed header cannot hold.
  const otel = otelSdkFor(env, {
    serviceName: env.K_SERVICE ?? env.FUNCTION_TARGET ?? 'tessera',
    otlpHeaders: googleTelemetryHeaders(env, () => clients.storage.authClient.getRequestHeaders()),
  });
  const telemetry = otel ? otel.telemetry(logs) : logs;
  const outputs = new GcsObjectStore(clients.storage.bucket(config.outputBucket));
  const backend: Backend = {
    // Leases compare two workers' clocks (the store has no time a condition can read): docs/architecture.md, "Clocks".
    claims: withClockSkewMargin(new FirestoreClaimStore(clients.firestore.collection(config.claimsTable)), clockSkewMarginMs(config)),
    // One store per bucket; when sources and outputs share a bucket, share the store too.
    sources: config.sourceBucket === config.outputBucket ? outputs : new GcsObjectStore(clients.storage.bucket(config.sourceBucket)),
    outputs,
    queue: new PubSubJobQueue(clients.pubsub.topic(config.tileQueue, { batching: TILE_TOPIC_BATCHING })),
    clock,
    telemetry,
    // The optional PostGIS feature sink (a secret URL infra/ sets from tessera:featureSinkUrl): docs/postgis.md.
    sink: config.featureSinkUrl ? PostgisFeatureSink.fromUrl(config.featureSinkUrl) : undefined,
  };
  return {
    config,
    role: options.role,
    backend,
    settings: { owner, leaseMs: config.leaseSec * 1000, retentionMs: config.retentionSec * 1000 },
    filter: { prefix: config.sourcePrefix, suffix: config.sourceSuffix },
    deadLetters: config.deadLetterQueue ? new PubSubDeadLetterTopic(clients.pubsub.topic(config.deadLetterQueue)) : undefined,
    clients,
    manifest: config.manifestTable ? new FirestoreManifestStore(clients.firestore.collection(config.manifestTable)) : undefined,
    batches: options.role === 'stream' && config.featureSinkUrl ? PostgisFeatureBatchSink.fromUrl(config.featureSinkUrl) : undefined,
    otel,
  };
}

const cached = new Map<GcpFunctionRole, GcpRuntime>();

/**
 * The runtime of this function instance, composed on first use from
 * `process.env` and kept for the requests that follow (clients keep their
 * channels; the raster header cache stays warm).
 */
export function functionRuntime(role: GcpFunctionRole): GcpRuntime {
  let rt = cached.get(role);
  if (!rt) {
    // A tile function's process (each Cloud Function is its own service) gets a garbage collector tuned for tiles.
    if (role === 'tile') tuneHeapForTiles(process.env[ENV.tileHeapGrowingPercent]);
    rt = composeGcp(process.env, { role });
    cached.set(role, rt);
  }
  return rt;
}
