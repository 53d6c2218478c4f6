import type { IngestEnqueuer, IngestStackOutputs } from '../../shared/app/ingest-outputs.js';
import { assertNever } from '../../shared/domain/claim.js';

/**
 * `tessera ingest --cloud`'s way to each cloud's ingest queue. This folder is
 * the composition root allowed to import every cloud (targets.ts does the same
 * for `tessera verify`); each cloud's SDK is loaded only for a stack on it.
 */
export async function ingestEnqueuerOf(outputs: IngestStackOutputs): Promise<IngestEnqueuer> {
  switch (outputs.cloud) {
    case 'aws': {
      const { awsIngestEnqueuer } = await import('../aws/ingest-enqueuer.js');
      return awsIngestEnqueuer(outputs);
    }
    case 'gcp': {
      const { gcpIngestEnqueuer } = await import('../gcp/ingest-enqueuer.js');
      return gcpIngestEnqueuer(outputs);
    }
    case 'azure': {
      const { azureIngestEnqueuer } = await import('../azure/ingest-enqueuer.js');
      return azureIngestEnqueuer(outputs);
    }
    default:
      return assertNever(outputs, 'ingest stack outputs');
  }
}
