import { PubSub } from '@google-cloud/pubsub';
import type { IngestEnqueuer, IngestStackOutputs } from '../../shared/app/ingest-outputs.js';
import { AdapterError } from '../../shared/domain/errors.js';

/**
 * `tessera ingest --cloud gcp`: one publish to the stack's ingest topic
 * (Application Default Credentials). The push subscription the stack owns
 * delivers it to the ingest function; a duplicate publish after a lost answer
 * is "already published" on its second delivery.
 */
export function gcpIngestEnqueuer(outputs: Extract<IngestStackOutputs, { cloud: 'gcp' }>): IngestEnqueuer {
  const e = outputs.emulator;
  const pubsub = new PubSub({ projectId: outputs.project, ...(e ? { apiEndpoint: e.pubsub, emulatorMode: true } : {}) });
  return {
    name: `pubsub:${outputs.project}/${outputs.ingestTopic}`,
    async enqueue(body) {
      try {
        // No batching: one request, sent now.
        const messageId = await pubsub
          .topic(outputs.ingestTopic, { batching: { maxMessages: 1 } })
          .publishMessage({ data: Buffer.from(body) });
        return { messageId };
      } catch (cause) {
        throw new AdapterError(
          `[ingest:pubsub] publish to ${outputs.ingestTopic} in ${outputs.project} failed (${(cause as Error).message}); check gcloud auth application-default login and the project`,
          { cause, retryable: true },
        );
      } finally {
        await pubsub.close();
      }
    },
  };
}
