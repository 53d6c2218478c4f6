import { hostname } from 'node:os';
import { TableClient } from '@azure/data-tables';
import type { InvocationContext } from '@azure/functions';
import { DefaultAzureCredential, ManagedIdentityCredential, type TokenCredential } from '@azure/identity';
import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';
import type { Backend, WorkerSettings } from '../../shared/app/backend.js';
import { withClockSkewMargin } from '../../shared/app/clock-skew.js';
import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import { LeaseConfigError } from '../../shared/domain/errors.js';
import type { DeployedRole } from '../../shared/domain/key-layout.js';
import {
  AZURE_CLIENT_ID_SETTINGS,
  clockSkewMarginMs,
  ENV,
  parseRuntimeConfig,
  type RuntimeConfig,
} from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { FeatureBatchSink } from '../../shared/ports/feature-batch-sink.port.js';
import type { DeadLetterSink } from '../../shared/ports/job-queue.port.js';
import type { ManifestStore } from '../../shared/ports/manifest-store.port.js';
import type { Counter, LogLevel, Telemetry } from '../../shared/ports/telemetry.port.js';
import { tuneHeapForTiles } from '../../shared/raster/heap-tuning.js';
import { type OtelSdk, otelRequested } from '../otel/otel-env.js';
import { PostgisFeatureBatchSink } from '../postgres/postgis-feature-batch-sink.js';
import { PostgisFeatureSink } from '../postgres/postgis-feature-sink.js';
import { AzureBlobObjectStore } from './adapters/azure-blob-object-store.js';
import { AzurePoisonQueue, AzureQueueJobQueue, DEFAULT_MAX_DEQUEUE_COUNT, poisonQueueName } from './adapters/azure-queue-job-queue.js';
import { AzureTableClaimStore } from './adapters/azure-table-claim-store.js';
import { AzureTableManifestStore } from './adapters/azure-table-manifest-store.js';
import { azureMonitorRequested, azureOtelSdkFor } from './azure-monitor-env.js';

// The OpenTelemetry SDK (some 600 files, about 0.15 s of a cold start) is loaded only when OTEL_* variables ask for it:
// azureOtelSdkFor sets it up from there (docs/telemetry.md, docs/packages.md "Start-up"). Azure Monitor's distro instead: the app's
// entry loads that one (handlers/index.ts, azure-monitor-env.ts).
if (otelRequested(process.env) && !azureMonitorRequested(process.env)) await import('../otel/otel-sdk.js');

/**
 * The Azure backend's one wiring point: environment to clients to adapters.
 * Handlers get an {@link AzureRuntime} and never build clients themselves.
 */

/**
 * The app-setting prefix the queue trigger binding connects with: either a
 * connection string in `TESSERA_STORAGE` (Azurite, local runs) or identity
 * settings such as `TESSERA_STORAGE__accountName` (production, managed identity).
 */
export const TRIGGER_CONNECTION = 'TESSERA_STORAGE';

/**
 * The Storage Queue the Event Grid subscription delivers source blobs'
 * BlobCreated events to (the mosaic is a timer sweep, no queue). A fixed name
 * shared with infra/common/packaging.ts AZURE_QUEUES (a test keeps them equal).
 */
export const SCENE_EVENT_QUEUE = 'tessera-scenes';

/**
 * The Storage Queue of ingest requests (`tessera ingest --cloud azure` puts them there; its poison twin is
 * `tessera-ingest-poison`). A fixed name shared with infra/common/packaging.ts AZURE_QUEUES, as the scene queue's is.
 */
export const INGEST_QUEUE = 'tessera-ingest';

/**
 * The Storage Queue the Event Grid subscription delivers BlobCreated events of batch objects under streams/ to
 * (docs/feature-batches.md; poison twin `tessera-streams-poison`). Shared with infra/common/packaging.ts AZURE_QUEUES.
 */
export const STREAM_EVENT_QUEUE = 'tessera-streams';

/** host.json `functionTimeout`, in seconds: the Consumption ceiling. Flex/Premium override it (see {@link HOST_TIMEOUT_SETTING}). */
export const HOST_JSON_FUNCTION_TIMEOUT_SEC = 600;
/** host.json `extensions.queues.maxDequeueCount`: the host's default, written out. */
export const HOST_JSON_MAX_DEQUEUE_COUNT = DEFAULT_MAX_DEQUEUE_COUNT;
/** host.json `extensions.queues.visibilityTimeout`, in seconds: the pause before the host retries a failed message. */
export const HOST_JSON_RETRY_VISIBILITY_SEC = 330;

/** App settings that override host.json values (the host maps `__` to nesting). */
export const HOST_TIMEOUT_SETTING = 'AzureFunctionsJobHost__functionTimeout';
export const HOST_MAX_DEQUEUE_SETTING = 'AzureFunctionsJobHost__extensions__queues__maxDequeueCount';
export const HOST_RETRY_VISIBILITY_SETTING = 'AzureFunctionsJobHost__extensions__queues__visibilityTimeout';

/** The timer schedule of the claim-row cleanup (NCRONTAB with seconds): hourly, off the top of the hour. */
export const CLEANUP_SCHEDULE = '0 7 * * * *';

/** The concrete adapters (the cleanup needs `deleteExpired`, tests need the pull side of the queue). */
export interface AzureBackend extends Backend {
  readonly claims: AzureTableClaimStore;
  readonly sources: AzureBlobObjectStore;
  readonly outputs: AzureBlobObjectStore;
  readonly queue: AzureQueueJobQueue;
}

export interface AzureRuntime {
  readonly config: RuntimeConfig;
  readonly backend: AzureBackend;
  readonly settings: WorkerSettings;
  /** The host's effective function timeout and retry settings, checked against the lease. */
  readonly host: HostSettings;
  /** `<queue>-poison` of a trigger queue, where its handler settles poison at once (shared/app/poison.ts). */
  poisonQueue(queueName: string): DeadLetterSink;
  /** The ingest manifest (Table Storage, TESSERA_MANIFEST_TABLE): set on the app when the stack has one. */
  readonly manifest?: ManifestStore | undefined;
  /** The client id of the user-assigned identity the clients authenticate as: the function role's own (docs/iam.md). */
  readonly identityClientId?: string | undefined;
  /** The stream function's PostGIS batch sink (the feature sink's URL, docs/feature-batches.md); undefined elsewhere or without one. */
  readonly batches?: FeatureBatchSink | undefined;
  /** The OpenTelemetry SDK when OTEL_* variables ask for it (docs/telemetry.md): a handler flushes it before it answers. */
  readonly otel?: OtelSdk | undefined;
}

export interface HostSettings {
  readonly functionTimeoutSec: number;
  readonly maxDequeueCount: number;
  readonly retryVisibilitySec: number;
}

/** SDK clients for one storage account. */
export interface AzureClients {
  readonly blob: BlobServiceClient;
  readonly queue: QueueServiceClient;
  table(name: string): TableClient;
}

export interface ComposeOptions {
  /** Injected clients (tests: Azurite); default from `TESSERA_AZURE_STORAGE_ACCOUNT`. */
  readonly clients?: AzureClients | undefined;
  /**
   * The function being composed. In the app every function authenticates as its own role's user-assigned identity
   * (the client id in {@link AZURE_CLIENT_ID_SETTINGS}), so it reaches only what that role is granted. Without a
   * role (an operator's `tessera verify`, tests), clients use DefaultAzureCredential.
   */
  readonly role?: DeployedRole | undefined;
  readonly clock?: Clock | undefined;
  readonly telemetry?: Telemetry | undefined;
  /** The worker identity in claim rows; default the instance id (or host name) and process id. */
  readonly owner?: string | undefined;
}

/**
 * Clients from `TESSERA_AZURE_STORAGE_ACCOUNT`: a connection string (it
 * contains `=`; Azurite, local runs) or an account name reached with
 * `credential` (default DefaultAzureCredential: az login, azure/login, a
 * managed identity).
 */
export function azureClients(storage: string, credential: TokenCredential = new DefaultAzureCredential()): AzureClients {
  if (storage.includes('=')) {
    // Azurite speaks plain HTTP; the SDK refuses shared-key auth over HTTP unless told otherwise.
    const insecure = /(^|;)\s*DefaultEndpointsProtocol\s*=\s*http\s*(;|$)/i.test(storage) || /Endpoint\s*=\s*http:/i.test(storage);
    return {
      blob: BlobServiceClient.fromConnectionString(storage),
      queue: QueueServiceClient.fromConnectionString(storage),
      table: (name) => TableClient.fromConnectionString(storage, name, { allowInsecureConnection: insecure }),
    };
  }
  if (!/^[a-z0-9]{3,24}$/.test(storage)) {
    throw new LeaseConfigError(
      `${ENV.azureStorageAccount} must be a storage account name (3-24 lowercase letters and digits) or a connection string, got ${JSON.stringify(storage.slice(0, 40))}`,
    );
  }
  return {
    blob: new BlobServiceClient(`https://${storage}.blob.core.windows.net`, credential),
    queue: new QueueServiceClient(`https://${storage}.queue.core.windows.net`, credential),
    table: (name) => new TableClient(`https://${storage}.table.core.windows.net`, name, credential),
  };
}

/**
 * The host settings in effect: host.json's values unless an app setting
 * overrides them (how Flex Consumption and Premium raise the timeout).
 */
export function hostSettings(env: Readonly<Record<string, string | undefined>>): HostSettings {
  const timeout = env[HOST_TIMEOUT_SETTING];
  const dequeues = env[HOST_MAX_DEQUEUE_SETTING];
  const visibility = env[HOST_RETRY_VISIBILITY_SETTING];
  return {
    functionTimeoutSec: timeout ? parseTimeSpan(HOST_TIMEOUT_SETTING, timeout) : HOST_JSON_FUNCTION_TIMEOUT_SEC,
    maxDequeueCount: dequeues ? positiveInt(HOST_MAX_DEQUEUE_SETTING, dequeues) : HOST_JSON_MAX_DEQUEUE_COUNT,
    retryVisibilitySec: visibility ? parseTimeSpan(HOST_RETRY_VISIBILITY_SETTING, visibility) : HOST_JSON_RETRY_VISIBILITY_SEC,
  };
}

/**
 * Check that the host cannot outlive the lease, and that a message whose
 * earlier attempt died holding the lease gets a retry after that lease ends.
 *
 * The second matters because a failed Storage Queue message is retried after
 * the host's fixed `visibilityTimeout`, not after the delay the core asks for.
 * A redelivery arrives at the earliest when the dead attempt's invocation
 * ended, i.e. with at most `lease - timeout` of the lease left; the attempts
 * after it are `visibilityTimeout` apart, so the remaining
 * `maxDequeueCount - 2` gaps must cover that rest.
 */
export function checkHostAgainstLease(config: RuntimeConfig, host: HostSettings): void {
  if (config.leaseSec <= host.functionTimeoutSec) {
    throw new LeaseConfigError(
      `the Functions host lets an invocation run ${host.functionTimeoutSec} s but the lease is ${config.leaseSec} s: ` +
        `set ${ENV.leaseSeconds} above ${host.functionTimeoutSec} s, or lower functionTimeout (host.json or ${HOST_TIMEOUT_SETTING})`,
    );
  }
  if (config.functionTimeoutSec !== host.functionTimeoutSec) {
    throw new LeaseConfigError(
      `${ENV.functionTimeoutSeconds} is ${config.functionTimeoutSec} s but the Functions host timeout is ${host.functionTimeoutSec} s: ` +
        `set ${HOST_TIMEOUT_SETTING} to ${formatTimeSpan(config.functionTimeoutSec)} (Flex/Premium) or ${ENV.functionTimeoutSeconds} to ${host.functionTimeoutSec}`,
    );
  }
  const rest = config.leaseSec - host.functionTimeoutSec;
  const covered = (host.maxDequeueCount - 2) * host.retryVisibilitySec;
  if (covered <= rest) {
    throw new LeaseConfigError(
      `a message whose attempt died holding its lease gets ${host.maxDequeueCount - 2} more retries ${host.retryVisibilitySec} s apart ` +
        `(${covered} s), not enough to outlast the ${rest} s of lease left after the ${host.functionTimeoutSec} s timeout: ` +
        `raise ${HOST_RETRY_VISIBILITY_SETTING} to at least ${formatTimeSpan(Math.ceil((rest + 1) / Math.max(1, host.maxDequeueCount - 2)))} or maxDequeueCount`,
    );
  }
}

/**
 * Build the runtime from the function's environment. Throws one
 * LeaseConfigError naming every missing or inconsistent setting.
 *
 * @example
 * const rt = composeAzure(process.env);
 * await fanOutScene(rt.backend, { source, params: rt.config.params });
 */
/**
 * The client id of `role`'s own user-assigned identity, from its app setting. Missing: a LeaseConfigError, never a
 * fallback to another identity (the host's holds none of the functions' data roles, and one that held them all would
 * undo the per-role grants).
 */
export function roleClientId(env: Readonly<Record<string, string | undefined>>, role: DeployedRole): string {
  const setting = AZURE_CLIENT_ID_SETTINGS[role];
  const clientId = env[setting];
  if (!clientId)
    throw new LeaseConfigError(
      `${setting} is not set: the ${role} function authenticates as its own user-assigned identity, named by this client id (infra/azure sets it; docs/iam.md)`,
    );
  return clientId;
}

export function composeAzure(env: Readonly<Record<string, string | undefined>>, options: ComposeOptions = {}): AzureRuntime {
  const config = parseRuntimeConfig(env);
  if (!config.platform.startsWith('azure-')) {
    throw new LeaseConfigError(
      `${ENV.platform} is ${config.platform}, but these are the Azure functions: use azure-consumption, azure-flex or azure-premium`,
    );
  }
  if (config.deadLetterQueue !== undefined && config.deadLetterQueue !== poisonQueueName(config.tileQueue)) {
    throw new LeaseConfigError(
      `${ENV.deadLetterQueue} is ${config.deadLetterQueue}, but the Functions host always moves poison messages to ${poisonQueueName(config.tileQueue)}: ` +
        'unset it or make it match',
    );
  }
  const host = hostSettings(env);
  checkHostAgainstLease(config, host);
  let clients = options.clients;
  let identityClientId: string | undefined;
  if (!clients) {
    const storage = env[ENV.azureStorageAccount];
    if (!storage)
      throw new LeaseConfigError(
        `${ENV.azureStorageAccount} is not set: give the storage account name or, for Azurite, a connection string`,
      );
    // A connection string carries its own key (Azurite); an account is reached as the role's own identity.
    if (options.role !== undefined && !storage.includes('=')) {
      identityClientId = roleClientId(env, options.role);
      clients = azureClients(storage, new ManagedIdentityCredential({ clientId: identityClientId }));
    } else {
      clients = azureClients(storage);
    }
  }
  const clock = options.clock ?? systemClock;
  const logs = options.telemetry ?? new JsonTelemetry((line) => console.log(line), { clock });
  // Off unless OTEL_* variables ask for it: OTLP to a collector, or Azure Monitor's exporter (docs/telemetry.md).
  const otel = azureOtelSdkFor(env, { serviceName: env.WEBSITE_SITE_NAME ?? 'tessera' });
  const backend: AzureBackend = {
    // Leases compare two workers' clocks (the store has no time a condition can read): docs/architecture.md, "Clocks".
    claims: withClockSkewMargin(new AzureTableClaimStore(clients.table(config.claimsTable)), clockSkewMarginMs(config)),
    sources: new AzureBlobObjectStore(clients.blob.getContainerClient(config.sourceBucket)),
    outputs: new AzureBlobObjectStore(clients.blob.getContainerClient(config.outputBucket)),
    queue: AzureQueueJobQueue.onAccount(clients.queue, config.tileQueue, host.maxDequeueCount),
    clock,
    telemetry: otel ? otel.telemetry(logs) : logs,
    // The optional PostGIS feature sink (a secret URL infra/ sets from tessera:featureSinkUrl): docs/postgis.md.
    sink: config.featureSinkUrl ? PostgisFeatureSink.fromUrl(config.featureSinkUrl) : undefined,
  };
  const owner = options.owner ?? `${(env.WEBSITE_INSTANCE_ID ?? hostname()).slice(0, 16)}:${process.pid}`;
  const queues = clients.queue;
  return {
    config,
    backend,
    host,
    settings: { owner, leaseMs: config.leaseSec * 1000, retentionMs: config.retentionSec * 1000 },
    poisonQueue: (queueName) => new AzurePoisonQueue(queues, queueName),
    manifest: config.manifestTable ? new AzureTableManifestStore(clients.table(config.manifestTable)) : undefined,
    identityClientId,
    // The stream function's (or a runtime composed without a role: an operator's, a test's); no other function opens its pool.
    batches:
      (options.role === undefined || options.role === 'stream') && config.featureSinkUrl
        ? PostgisFeatureBatchSink.fromUrl(config.featureSinkUrl)
        : undefined,
    otel,
  };
}

const runtimes = new Map<DeployedRole, AzureRuntime>();

/**
 * The runtime of one function of the app, composed from `process.env` on first use (a warm instance reuses its
 * clients). One per role: the app hosts every function in one process, and each authenticates as its own identity.
 */
export function azureRuntime(role: DeployedRole): AzureRuntime {
  let rt = runtimes.get(role);
  if (!rt) {
    // One Functions host process runs every function of the app: the tile function's first invocation tunes its
    // garbage collector for tiles, for the whole process (shared/raster/heap-tuning.ts, docs/benchmarks.md).
    if (role === 'tile') tuneHeapForTiles(process.env[ENV.tileHeapGrowingPercent]);
    rt = composeAzure(process.env, { role });
    runtimes.set(role, rt);
  }
  return rt;
}

/**
 * Telemetry for one invocation: each JSON line goes to the invocation's log at
 * the matching level (so Application Insights sees ERROR as an error and can
 * alert on `lease-stolen`), counters accumulate in the runtime's telemetry.
 */
export class InvocationTelemetry implements Telemetry {
  constructor(
    private readonly context: InvocationContext,
    private readonly counters: Telemetry,
    private readonly clock: Clock,
  ) {}

  log(level: LogLevel, event: string, fields: Readonly<Record<string, unknown>> = {}): void {
    const line = JSON.stringify(
      { time: new Date(this.clock.now()).toISOString(), level, event, invocationId: this.context.invocationId, ...fields },
      (_key, value: unknown) =>
        value instanceof Error ? { name: value.name, message: value.message, ...('code' in value ? { code: value.code } : {}) } : value,
    );
    switch (level) {
      case 'ERROR':
        this.context.error(line);
        break;
      case 'WARN':
        this.context.warn(line);
        break;
      case 'INFO':
        this.context.info(line);
        break;
      case 'DEBUG':
        this.context.debug(line);
        break;
    }
  }

  count(counter: Counter, n = 1): void {
    this.counters.count(counter, n);
  }
}

/** The runtime's backend with this invocation's telemetry. */
export function invocationBackend(rt: AzureRuntime, context: InvocationContext): AzureBackend {
  return { ...rt.backend, telemetry: new InvocationTelemetry(context, rt.backend.telemetry, rt.backend.clock) };
}

/** `hh:mm:ss` or `d.hh:mm:ss` (a .NET TimeSpan, as host.json writes durations) to seconds. */
export function parseTimeSpan(name: string, value: string): number {
  const m = /^(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2})$/.exec(value.trim());
  if (!m) throw new LeaseConfigError(`${name} must be a duration like 00:10:00, got ${JSON.stringify(value)}`);
  const [, d, h, min, s] = m;
  return Number(d ?? 0) * 86_400 + Number(h) * 3600 + Number(min) * 60 + Number(s);
}

/** Seconds to `hh:mm:ss`. */
export function formatTimeSpan(seconds: number): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${pad(Math.floor(seconds / 3600))}:${pad(Math.floor((seconds % 3600) / 60))}:${pad(seconds % 60)}`;
}

function positiveInt(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new LeaseConfigError(`${name} must be a positive whole number, got ${JSON.stringify(value)}`);
  return n;
}
