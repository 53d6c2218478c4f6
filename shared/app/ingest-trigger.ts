import { LeaseConfigError } from '../domain/errors.js';
import { ENV, type RuntimeConfig } from '../domain/runtime-config.js';
import type { Clock } from '../ports/clock.port.js';
import type { ManifestStore } from '../ports/manifest-store.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { DEFAULT_STAGING_PREFIX, type IngestDeps, type IngestSettings } from './ingest.js';
import { type FetchFn, HttpFetcher, ObjectStoreFetcher, RoutingFetcher } from './ingest-fetchers.js';

/**
 * What the three cloud ingest functions share (functions/<cloud>/handlers/ingest.handler.ts):
 * how their dependencies are assembled from a composed runtime, and where they
 * stage and publish. The settle rule itself is shared/app/ingest.ts
 * (`handleIngestDelivery`: ack | poison | retry); each trigger maps it onto its
 * transport exactly as its tile trigger does (poison settled at once in the
 * DLQ / dead-letter topic / `<queue>-poison`, shared/app/poison.ts).
 */

/** The parts of a cloud runtime an ingest needs. */
export interface IngestRuntimeParts {
  /** The SOURCE store: staging and promoted keys live there, so the scene trigger sees the promoted key. */
  readonly sources: ObjectStore;
  /** The stack's manifest (C's adapters, wired by compose when TESSERA_MANIFEST_TABLE is set). */
  readonly manifest: ManifestStore | undefined;
  readonly clock: Clock;
  readonly telemetry: Telemetry;
  /** A fresh run id per attempt (a random UUID): never a date, never the message id. */
  readonly newRunId: () => string;
  /** HTTP(S) fetch; Node's global fetch by default. */
  readonly fetch?: FetchFn | undefined;
}

/**
 * The ingest dependencies of a cloud function. A cloud function reads
 * `object:KEY` (the source store) and http(s) URLs; a local path is refused,
 * typed, as poison (there is no local disk to read it from).
 *
 * Throws LeaseConfigError (the function environment is incomplete) when the
 * stack gave the function no manifest: that is the deployment's fault, not the
 * message's, so the trigger fails the whole invocation rather than dead-letter
 * a good request; a fixed deployment then handles the redelivery.
 */
export function cloudIngestDeps(parts: IngestRuntimeParts): IngestDeps {
  if (parts.manifest === undefined)
    throw new LeaseConfigError(
      `function environment is incomplete: ${ENV.manifestTable} is not set, so the ingest function has no manifest to publish into; ` +
        'deploy the stack again (infra/ sets it on the ingest and reconcile functions)',
    );
  return {
    store: parts.sources,
    manifest: parts.manifest,
    fetcher: new RoutingFetcher({ object: new ObjectStoreFetcher(parts.sources), url: new HttpFetcher(parts.fetch) }),
    clock: parts.clock,
    telemetry: parts.telemetry,
    newRunId: parts.newRunId,
  };
}

/**
 * Where a cloud ingest stages and publishes: `staging/` of the source bucket
 * (outside the scene prefix, expired by the stack's lifecycle rule after
 * tessera:stagingRetentionDays) and the stack's scene prefix, so a promoted
 * key starts tiling like any scene and a staging object never does.
 */
export function cloudIngestSettings(config: Pick<RuntimeConfig, 'sourcePrefix'>): IngestSettings {
  return { stagingPrefix: DEFAULT_STAGING_PREFIX, publishedPrefix: config.sourcePrefix || undefined };
}
