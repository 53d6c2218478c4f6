import type { Request, Response } from '@google-cloud/functions-framework';
import { reconcileManifest } from '../../../shared/app/ingest-reconcile.js';
import { cloudIngestDeps } from '../../../shared/app/ingest-trigger.js';
import { TesseraError } from '../../../shared/domain/errors.js';
import type { GcpRuntime } from '../compose.js';

/**
 * The manifest reconcile, an HTTP function Cloud Scheduler calls weekly
 * (`POST {}`, infra/): compares the promoted prefix of the source bucket with
 * the Firestore manifest, both ways (shared/app/ingest-reconcile.ts). Answers
 * 200 with the report (objects without a row: a crashed promotion a retry
 * repairs; rows without an object or with another size: an alarm, logged at
 * ERROR), 503 for a failure a retry may fix, 500 for a deployment problem. Read-only.
 */
export function createReconcileHandler(runtime: GcpRuntime | (() => GcpRuntime)) {
  const rt = typeof runtime === 'function' ? runtime : () => runtime;
  return async function reconcileHandler(req: Request, res: Response): Promise<void> {
    const r = rt();
    if (req.method !== 'POST') {
      res.status(405).set('allow', 'POST').json({ error: 'POST {} to reconcile the manifest with the promoted prefix' });
      return;
    }
    try {
      const { store, manifest, telemetry } = cloudIngestDeps(r.backend, r.manifest);
      res
        .status(200)
        .json(await reconcileManifest({ store, manifest, telemetry }, { publishedPrefix: r.config.sourcePrefix || undefined }));
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      const retryable = !(err instanceof TesseraError) || err.retryable;
      r.backend.telemetry.log(retryable ? 'WARN' : 'ERROR', 'reconcile-failed', { error: err });
      res.status(retryable ? 503 : 500).json({ error: err.message, code: err instanceof TesseraError ? err.code : 'INTERNAL' });
    }
  };
}
