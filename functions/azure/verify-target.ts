import type { SceneManifest } from '../../shared/app/scene-manifest.js';
import type { AzureStackOutputs } from '../../shared/app/verify/stack-outputs.js';
import { removeDeadLettersFrom, type VerifyTarget } from '../../shared/app/verify/verify-stack.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { JobMessage } from '../../shared/ports/job-queue.port.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { AzureQueueJobQueue, poisonQueueName } from './adapters/azure-queue-job-queue.js';
import { azureClients, composeAzure, formatTimeSpan, HOST_TIMEOUT_SETTING } from './compose.js';

/**
 * A deployed Azure stack, from its outputs, for `tessera verify`: the backend
 * is composed by composeAzure (the wiring the function app uses) on the data
 * account, reached with DefaultAzureCredential (azure/login in CI, az login,
 * a managed identity). Only the outputs' `emulator` connection string
 * (Azurite, testing only) replaces the account name.
 */
export function azureVerifyTarget(stack: string, outputs: AzureStackOutputs, telemetry: Telemetry): VerifyTarget {
  const clients = azureClients(outputs.emulator?.connectionString ?? outputs.storageAccount);
  const env: Record<string, string> = {
    [ENV.platform]: outputs.platform,
    [ENV.claimsTable]: outputs.claimsTable,
    [ENV.sourceBucket]: outputs.sourceContainer,
    [ENV.outputBucket]: outputs.outputContainer,
    [ENV.tileQueue]: outputs.tileQueue,
    [ENV.functionTimeoutSeconds]: String(outputs.functionTimeoutSeconds),
    [ENV.leaseSeconds]: String(outputs.leaseSeconds),
    // The app's own setting, as infra/ writes it: the host timeout the lease was checked against.
    [HOST_TIMEOUT_SETTING]: formatTimeSpan(outputs.functionTimeoutSeconds),
  };
  const rt = composeAzure(env, { clients, telemetry, owner: `tessera-verify:${stack}` });
  const scenes = AzureQueueJobQueue.onAccount(clients.queue, outputs.sceneQueue, rt.host.maxDequeueCount);
  const blobUrl = clients.blob.url.replace(/\/$/, '');
  return {
    stack,
    cloud: 'azure',
    backend: rt.backend,
    sourcePrefix: outputs.sourcePrefix,
    leaseSeconds: outputs.leaseSeconds,
    deadLetters: () => rt.backend.queue.deadLetters(),
    async removeDeadLetters(match: (m: JobMessage) => boolean) {
      // The poison queue read as a queue of its own: deleted under the pop receipt of the receive that saw it.
      const poison = clients.queue.getQueueClient(poisonQueueName(outputs.tileQueue));
      // No poison queue of its own: a poison message is never dequeued often enough to be moved anywhere.
      const queue = new AzureQueueJobQueue(poison, { poison, maxDequeueCount: Number.MAX_SAFE_INTEGER });
      return { removed: await removeDeadLettersFrom(queue, match) };
    },
    settling: {
      kind: 'backlog',
      async pendingMessages() {
        // Visible and invisible (being processed) messages alike: each queue's approximate count.
        const counts = await Promise.all(
          [outputs.sceneQueue, outputs.tileQueue].map(
            async (q) => (await clients.queue.getQueueClient(q).getProperties()).approximateMessagesCount ?? 0,
          ),
        );
        return counts.reduce((x, y) => x + y, 0);
      },
    },
    async redeliverSceneEvent(manifest: SceneManifest) {
      const source = manifest.source;
      // The BlobCreated event Event Grid puts on the scene queue for the blob, again: a duplicate delivery.
      const head = await rt.backend.sources.head(source.key);
      const event = {
        id: `tessera-verify-${source.versionToken}`,
        topic: `tessera-verify/${outputs.storageAccount}`,
        subject: `/blobServices/default/containers/${source.bucket}/blobs/${source.key}`,
        eventType: 'Microsoft.Storage.BlobCreated',
        eventTime: new Date(rt.backend.clock.now()).toISOString(),
        data: {
          api: 'PutBlob',
          eTag: source.versionToken.replace(/^"|"$/g, ''),
          contentType: 'image/tiff',
          contentLength: head?.size ?? 0,
          blobType: 'BlockBlob',
          url: `${blobUrl}/${source.bucket}/${source.key.split('/').map(encodeURIComponent).join('/')}`,
        },
        dataVersion: '',
        metadataVersion: '1',
      };
      await scenes.sendBatch([{ jobKey: `scene-event:${source.key}`, body: JSON.stringify(event) }]);
      return [];
    },
  };
}
