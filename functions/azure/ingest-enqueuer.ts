import { DefaultAzureCredential } from '@azure/identity';
import { QueueClient } from '@azure/storage-queue';
import type { IngestEnqueuer, IngestStackOutputs } from '../../shared/app/ingest-outputs.js';
import { AdapterError } from '../../shared/domain/errors.js';
import { encodeMessageText } from './adapters/azure-queue-job-queue.js';

/**
 * `tessera ingest --cloud azure`: one Put Message on the stack's ingest queue
 * (DefaultAzureCredential; the caller needs Storage Queue Data Message Sender
 * on it), base64-encoded as the Functions host's queue trigger expects. A
 * message resent after a lost answer is "already published" on its second delivery.
 */
export function azureIngestEnqueuer(outputs: Extract<IngestStackOutputs, { cloud: 'azure' }>): IngestEnqueuer {
  const e = outputs.emulator;
  const queue = e
    ? new QueueClient(e.connectionString, outputs.ingestQueue)
    : new QueueClient(`https://${outputs.storageAccount}.queue.core.windows.net/${outputs.ingestQueue}`, new DefaultAzureCredential());
  return {
    name: `azure-queue:${outputs.storageAccount}/${outputs.ingestQueue}`,
    async enqueue(body) {
      try {
        const out = await queue.sendMessage(encodeMessageText(body));
        return { messageId: out.messageId };
      } catch (cause) {
        throw new AdapterError(
          `[ingest:azure-queue] Put Message on ${outputs.ingestQueue} failed (${(cause as Error).message}); check az login and the role Storage Queue Data Message Sender on the queue`,
          { cause, retryable: true },
        );
      }
    },
  };
}
