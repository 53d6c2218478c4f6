/**
 * The Cloud Functions (2nd gen) entry module. Importing it registers the
 * functions with the Functions Framework under the names infra/ deploys
 * (`--entry-point`, infra/common/packaging.ts GCP_ENTRY_POINTS); each composes
 * its runtime from the function's environment on its first request, so
 * registering all three in every deployed function costs nothing.
 */
import { cloudEvent, http } from '@google-cloud/functions-framework';
import { functionRuntime, type GcpFunctionRole, type GcpRuntime } from '../compose.js';
import { createIngestHandler } from './ingest.handler.js';
import { createMosaicHandler } from './mosaic.handler.js';
import { createReconcileHandler } from './reconcile.handler.js';
import { createSceneHandler } from './scene.handler.js';
import { createStreamHandler } from './stream.handler.js';
import { createTileHandler } from './tile.handler.js';

/** The function names (entry points) Tessera registers. */
export const GCP_FUNCTIONS: Readonly<Record<GcpFunctionRole, string>> = {
  scene: 'tesseraScene',
  tile: 'tesseraTile',
  mosaic: 'tesseraMosaic',
  ingest: 'tesseraIngest',
  reconcile: 'tesseraReconcile',
  stream: 'tesseraStream',
};

export type GcpFunctionRuntimes = Readonly<Record<GcpFunctionRole, GcpRuntime | (() => GcpRuntime)>>;

/**
 * Register the functions: scene and tile with the CloudEvent signature
 * (Eventarc; a raw Pub/Sub push to `/projects/<p>/topics/<t>` is turned into
 * the same CloudEvent by the framework), mosaic as HTTP. Tests register them
 * again under other names with runtimes pointed at the emulators.
 */
export function registerGcpFunctions(
  runtimes: GcpFunctionRuntimes,
  names: Readonly<Record<GcpFunctionRole, string>> = GCP_FUNCTIONS,
): void {
  cloudEvent(names.scene, createSceneHandler(runtimes.scene));
  cloudEvent(names.tile, createTileHandler(runtimes.tile));
  http(names.mosaic, createMosaicHandler(runtimes.mosaic));
  // Ingest requests arrive by a Pub/Sub push, as tile jobs do; the reconcile is Cloud Scheduler's HTTP call, as the sweep is.
  cloudEvent(names.ingest, createIngestHandler(runtimes.ingest));
  http(names.reconcile, createReconcileHandler(runtimes.reconcile));
  // Batch objects of feature streams: Eventarc on the source bucket, as the scene function (docs/feature-batches.md).
  cloudEvent(names.stream, createStreamHandler(runtimes.stream));
}

registerGcpFunctions({
  scene: () => functionRuntime('scene'),
  tile: () => functionRuntime('tile'),
  mosaic: () => functionRuntime('mosaic'),
  ingest: () => functionRuntime('ingest'),
  reconcile: () => functionRuntime('reconcile'),
  stream: () => functionRuntime('stream'),
});

export { createIngestHandler, createMosaicHandler, createReconcileHandler, createSceneHandler, createStreamHandler, createTileHandler };
