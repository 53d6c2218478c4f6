import type { ScheduledEvent } from 'aws-lambda';
import { type ManifestReconcileReport, reconcileManifest } from '../../../shared/app/ingest-reconcile.js';
import { cloudIngestDeps } from '../../../shared/app/ingest-trigger.js';
import { type AwsRuntime, lambdaRuntime } from '../compose.js';

export type { ManifestReconcileReport };

/**
 * The scheduled manifest reconcile (an EventBridge rule, weekly in infra/):
 * compares the promoted prefix of the source bucket with the DynamoDB
 * manifest, both ways (shared/app/ingest-reconcile.ts). Objects without a row
 * are a promotion that crashed between its copy and its commit (a retry of
 * that ingest registers it: WARN); rows without an object, or with another
 * size, mean published data was deleted or replaced (an alarm: ERROR). It
 * only reads; the report is the function's result and its log line.
 */
export function createReconcileHandler(runtime: AwsRuntime | (() => AwsRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;
  return async (_event?: ScheduledEvent): Promise<ManifestReconcileReport> => {
    const r = rt();
    // The same check as the ingest function: no manifest configured is the deployment's fault, said plainly.
    const { manifest, store, telemetry } = cloudIngestDeps(r.backend, r.manifest);
    return reconcileManifest({ store, manifest, telemetry }, { publishedPrefix: r.config.sourcePrefix || undefined });
  };
}

/** The Lambda entry point (`reconcile.handler.handler`). */
export const handler = createReconcileHandler(lambdaRuntime);
