import { randomUUID } from 'node:crypto';
import { LeaseConfigError } from '../domain/errors.js';
import { ENV, type RuntimeConfig } from '../domain/runtime-config.js';
import type { ManifestStore } from '../ports/manifest-store.port.js';
import type { Backend } from './backend.js';
import { DEFAULT_STAGING_PREFIX, type IngestDeps, type IngestSettings } from './ingest.js';
import { HttpFetcher, type HttpFetcherOptions, ObjectStoreFetcher, RoutingFetcher } from './ingest-fetchers.js';

/**
 * What the three cloud ingest functions share (functions/<cloud>/handlers/ingest.handler.ts):
 * how their dependencies are assembled from a composed runtime, and where they
 * stage and publish. The settle rule itself is shared/app/ingest.ts
 * (`handleIngestDelivery`: ack | poison | retry); each trigger maps it onto its
 * transport exactly as its tile trigger does (poison settled at once in the
 * DLQ / dead-letter topic / `<queue>-poison`, shared/app/poison.ts).
 */

/** The parts of a composed cloud backend an ingest needs (the SOURCE store: staging and promoted keys live there). */
export type IngestBackendParts = Pick<Backend, 'sources' | 'clock' | 'telemetry'>;

export interface CloudIngestOptions {
  /** A fresh run id per attempt; a random UUID by default: never a date, never the message id. */
  readonly newRunId?: (() => string) | undefined;
  /** How the HTTP(S) fetcher resolves names and follows redirects (its defaults: the system resolver, 5 hops). */
  readonly http?: HttpFetcherOptions | undefined;
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
export function cloudIngestDeps(
  backend: IngestBackendParts,
  manifest: ManifestStore | undefined,
  options: CloudIngestOptions = {},
): IngestDeps {
  if (manifest === undefined)
    throw new LeaseConfigError(
      `function environment is incomplete: ${ENV.manifestTable} is not set, so the ingest function has no manifest to publish into; ` +
        'deploy the stack again (infra/ sets it on the ingest and reconcile functions)',
    );
  return {
    store: backend.sources,
    manifest,
    fetcher: new RoutingFetcher({ object: new ObjectStoreFetcher(backend.sources), url: new HttpFetcher(options.http) }),
    clock: backend.clock,
    telemetry: backend.telemetry,
    newRunId: options.newRunId ?? randomUUID,
  };
}

/**
 * Where a cloud ingest stages and publishes: `staging/` of the source bucket
 * (outside the scene prefix, expired by the stack's lifecycle rule after
 * tessera:stagingRetentionDays) and the stack's scene prefix, so a promoted
 * key starts tiling like any scene and a staging object never does. Its http(s)
 * hrefs keep to the stack's allowed hosts (tessera:ingestAllowedHosts) and to
 * public addresses: infra/ never sets the private-address opt-in, only a test's
 * environment does (docs/ingest.md, "Remote hrefs stay in their lane").
 */
export function cloudIngestSettings(
  config: Pick<RuntimeConfig, 'sourcePrefix' | 'ingestAllowedHosts' | 'ingestAllowPrivateAddresses'>,
): IngestSettings {
  return {
    stagingPrefix: DEFAULT_STAGING_PREFIX,
    publishedPrefix: config.sourcePrefix || undefined,
    allowedHosts: config.ingestAllowedHosts,
    allowPrivateAddresses: config.ingestAllowPrivateAddresses,
  };
}
