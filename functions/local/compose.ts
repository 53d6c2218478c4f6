import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Backend } from '../../shared/app/backend.js';
import type { IngestDeps } from '../../shared/app/ingest.js';
import { HttpFetcher, ObjectStoreFetcher, RoutingFetcher } from '../../shared/app/ingest-fetchers.js';
import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { ManifestStore } from '../../shared/ports/manifest-store.port.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { installedOtelSdk, otelRequested } from '../otel/otel-env.js';
import { PostgisFeatureSink } from '../postgres/postgis-feature-sink.js';
import { FsArtefactFetcher } from './adapters/fs-artefact-fetcher.js';
import { FsObjectStore } from './adapters/fs-object-store.js';
import { SqliteClaimStore } from './adapters/sqlite-claim-store.js';
import { SqliteJobQueue } from './adapters/sqlite-job-queue.js';
import { SqliteManifestStore } from './adapters/sqlite-manifest-store.js';

/**
 * The OpenTelemetry SDK's module, loaded before this one runs and only when OTEL_* variables ask for it: its
 * packages are some 600 files, about 0.15 s of start-up in the CLI and in every worker process
 * (docs/packages.md, "Start-up"). A test that set an SDK up itself is found through installedOtelSdk().
 */
const otelSdk = otelRequested(process.env) ? await import('../otel/otel-sdk.js') : undefined;

/** The bucket name local sources are addressed by in job keys. */
export const LOCAL_SOURCE_BUCKET = 'local-sources';

export interface LocalBackend extends Backend {
  readonly claims: SqliteClaimStore;
  readonly sources: FsObjectStore;
  readonly outputs: FsObjectStore;
  readonly queue: SqliteJobQueue;
  /** The ingest manifest (`<dir>/manifest.db`): what `tessera ingest` registers and `reconcile --manifest` reads. */
  readonly manifest: SqliteManifestStore;
  readonly dir: string;
  close(): void;
}

export interface LocalBackendOptions {
  readonly clock?: Clock;
  readonly telemetry?: Telemetry;
  readonly maxReceiveCount?: number;
  /**
   * The PostGIS feature sink (`postgis://...`, docs/postgis.md). Default: the TESSERA_FEATURE_SINK variable,
   * which is how `tessera run --sink` reaches its worker processes (they inherit the environment).
   */
  readonly featureSinkUrl?: string | undefined;
}

/**
 * The local backend's one wiring point: filesystem objects and SQLite claims
 * and queue under one directory (default `.tessera/`).
 *
 * Layout: `<dir>/sources/objects/...`, `<dir>/outputs/objects/{tiles,scenes,mosaics}/...`,
 * `<dir>/claims.db`, `<dir>/queue.db`, `<dir>/manifest.db`. Ingestion stages under
 * `sources/objects/staging/` and publishes under `sources/objects/scenes/` (docs/ingest.md).
 */
export function createLocalBackend(dir: string, options: LocalBackendOptions = {}): LocalBackend {
  const root = resolve(dir);
  mkdirSync(root, { recursive: true });
  const clock = options.clock ?? systemClock;
  const claims = new SqliteClaimStore(join(root, 'claims.db'));
  const manifest = new SqliteManifestStore(join(root, 'manifest.db'));
  const queue = new SqliteJobQueue(join(root, 'queue.db'), { clock, maxReceiveCount: options.maxReceiveCount ?? 3 });
  const sinkUrl = options.featureSinkUrl ?? process.env[ENV.featureSink];
  const sink = sinkUrl ? PostgisFeatureSink.fromUrl(sinkUrl) : undefined;
  // Off unless OTEL_* variables ask for it (docs/telemetry.md); worker processes inherit them and export their own spans.
  const otel = otelSdk?.setUpOpenTelemetry(process.env, { serviceName: 'tessera-local' }) ?? installedOtelSdk();
  const telemetry = options.telemetry ?? new JsonTelemetry();
  return {
    dir: root,
    claims,
    sources: new FsObjectStore(join(root, 'sources')),
    outputs: new FsObjectStore(join(root, 'outputs')),
    queue,
    manifest,
    clock,
    telemetry: otel ? otel.telemetry(telemetry) : telemetry,
    sink,
    close() {
      // The pool's sockets must not hold the process open; nothing waits on the ending.
      void sink?.close();
      void otel?.flush();
      claims.close();
      queue.close();
      manifest.close();
    },
  };
}

/**
 * Ingestion's dependencies on the local backend: the source store for staging
 * and final keys, the SQLite manifest, and every href kind (local paths
 * resolved against `cwd`, `object:KEY` in the source store, http(s) URLs).
 */
export function localIngestDeps(backend: LocalBackend, cwd: string, manifest: ManifestStore = backend.manifest): IngestDeps {
  return {
    store: backend.sources,
    manifest,
    fetcher: new RoutingFetcher({
      path: new FsArtefactFetcher(cwd),
      object: new ObjectStoreFetcher(backend.sources),
      url: new HttpFetcher(),
    }),
    clock: backend.clock,
    telemetry: backend.telemetry,
    newRunId: randomUUID,
  };
}
