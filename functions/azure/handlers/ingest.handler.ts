import type { InvocationContext, StorageQueueHandler, Timer } from '@azure/functions';
import { handleIngestDelivery, type IngestVerdict } from '../../../shared/app/ingest.js';
import { type ManifestReconcileReport, reconcileManifest } from '../../../shared/app/ingest-reconcile.js';
import { cloudIngestDeps, cloudIngestSettings } from '../../../shared/app/ingest-trigger.js';
import { poisonReason, settlePoison } from '../../../shared/app/poison.js';
import { assertNever } from '../../../shared/domain/claim.js';
import { type AzureRuntime, azureRuntime, INGEST_QUEUE, invocationBackend } from '../compose.js';
import { triggerQueueName } from './blob-event.js';
import { queueMessageText, queueTriggerDelivery } from './tile.handler.js';

/**
 * When the manifest reconcile runs (NCRONTAB with seconds): Mondays 03:00 UTC, weekly as design note 2 says
 * and as on AWS (EventBridge) and GCP (Cloud Scheduler).
 */
export const RECONCILE_SCHEDULE = '0 0 3 * * 1';

/**
 * The ingest function: a Storage Queue trigger on `tessera-ingest`, one
 * request per message (`tessera ingest --cloud azure` puts it there), run
 * through `handleIngestDelivery`. The verdict maps onto the host's retry
 * machinery as the tile function's does (tile.handler.ts):
 * - ack (published, already published, a concurrent publisher won) returns,
 *   and the host deletes the message; a duplicate delivery copies nothing;
 * - retry throws: the host retries after host.json's visibilityTimeout and,
 *   after maxDequeueCount, moves it to `tessera-ingest-poison`;
 * - poison (a malformed request, a refused artefact, an occupied final key)
 *   is settled at once: the handler puts the message on
 *   `tessera-ingest-poison` itself and returns, so it costs one delivery,
 *   not five 330 s apart. Only if that put fails does it throw.
 */
export function makeIngestHandler(rt: () => AzureRuntime = () => azureRuntime('ingest')): StorageQueueHandler<unknown> {
  return async (queueEntry: unknown, context: InvocationContext): Promise<IngestVerdict> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const { deliveryId, dequeueCount, receiveCount } = queueTriggerDelivery(context);
    const body = queueMessageText(queueEntry);
    const verdict = await handleIngestDelivery(
      cloudIngestDeps(backend, runtime.manifest),
      { body, deliveryId, receiveCount },
      cloudIngestSettings(runtime.config),
    );
    switch (verdict.kind) {
      case 'ack':
        return verdict;
      case 'poison': {
        const settled = await settlePoison(
          runtime.poisonQueue(triggerQueueName(context, INGEST_QUEUE)),
          { body, messageId: deliveryId, ...poisonReason(verdict.error) },
          backend.telemetry,
        );
        if (settled.kind === 'dead-lettered') return verdict;
        throw verdict.error;
      }
      case 'retry':
        if (dequeueCount >= runtime.host.maxDequeueCount)
          backend.telemetry.log('ERROR', 'moving-to-poison-queue', { deliveryId, dequeueCount, kind: 'ingest', error: verdict.error });
        throw verdict.error;
      default:
        return assertNever(verdict, 'ingest verdict');
    }
  };
}

/** A timer function's handler with the reconcile report as its return value. */
export type ReconcileTimerHandler = (timer: Timer, context: InvocationContext) => Promise<ManifestReconcileReport>;

/**
 * The manifest reconcile on a timer ({@link RECONCILE_SCHEDULE}): the promoted
 * prefix of the sources container against the Table manifest, both ways
 * (shared/app/ingest-reconcile.ts). Read-only; a failed run throws and the
 * next tick is the retry.
 */
export function makeReconcileHandler(rt: () => AzureRuntime = () => azureRuntime('reconcile')): ReconcileTimerHandler {
  return async (timer: Timer, context: InvocationContext): Promise<ManifestReconcileReport> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    if (timer?.isPastDue) backend.telemetry.log('INFO', 'reconcile-past-due', {});
    const { store, manifest, telemetry } = cloudIngestDeps(backend, runtime.manifest);
    return reconcileManifest({ store, manifest, telemetry }, { publishedPrefix: runtime.config.sourcePrefix || undefined });
  };
}
