import { app } from '@azure/functions';
import { ENV } from '../../../shared/domain/runtime-config.js';
import { CLEANUP_SCHEDULE, INGEST_QUEUE, SCENE_EVENT_QUEUE, STREAM_EVENT_QUEUE, TRIGGER_CONNECTION } from '../compose.js';
import { makeCleanupHandler } from './cleanup.handler.js';
import { makeIngestHandler, makeReconcileHandler, RECONCILE_SCHEDULE } from './ingest.handler.js';
import { MOSAIC_SCHEDULE, makeMosaicHandler } from './mosaic.handler.js';
import { makeSceneHandler } from './scene.handler.js';
import { makeStreamHandler } from './stream.handler.js';
import { makeTileHandler } from './tile.handler.js';

/** The parts of `app` this module registers with (a narrow seam so tests can check the registrations). */
export interface FunctionRegistrar {
  storageQueue: typeof app.storageQueue;
  timer: typeof app.timer;
}

/**
 * Register every Tessera function of the Azure app (the v4 programming model
 * discovers functions by the registrations this module makes at load).
 * Names match infra/common/packaging.ts AZURE_FUNCTION_NAMES; the cleanup
 * timer needs no infrastructure of its own.
 *
 * `scene` takes Event Grid BlobCreated events from the Storage Queue infra/
 * points the Event Grid subscription at (a queue destination needs no
 * function to exist when the subscription is created); its handler also
 * accepts an Event Grid trigger's input. `mosaic` is a timer: the same
 * scheduled sweep as AWS and GCP, not a trigger on every tile write.
 *
 * The tile queue name is a binding expression (`%TESSERA_TILE_QUEUE%`) the host
 * resolves from app settings, so the trigger and the sender read one setting.
 */
export function registerFunctions(registrar: FunctionRegistrar = app): void {
  registrar.storageQueue('scene', { queueName: SCENE_EVENT_QUEUE, connection: TRIGGER_CONNECTION, handler: makeSceneHandler() });
  registrar.storageQueue('tile', { queueName: `%${ENV.tileQueue}%`, connection: TRIGGER_CONNECTION, handler: makeTileHandler() });
  registrar.timer('mosaic', { schedule: MOSAIC_SCHEDULE, handler: makeMosaicHandler() });
  registrar.timer('cleanup', { schedule: CLEANUP_SCHEDULE, handler: makeCleanupHandler() });
  // Ingestion (design note 2): requests on their own queue (its own poison twin), and the weekly manifest reconcile.
  registrar.storageQueue('ingest', { queueName: INGEST_QUEUE, connection: TRIGGER_CONNECTION, handler: makeIngestHandler() });
  registrar.timer('reconcile', { schedule: RECONCILE_SCHEDULE, handler: makeReconcileHandler() });
  // Feature streams (docs/feature-batches.md): BlobCreated of batch objects under streams/, one batch per message.
  registrar.storageQueue('stream', { queueName: STREAM_EVENT_QUEUE, connection: TRIGGER_CONNECTION, handler: makeStreamHandler() });
}
