import * as pulumi from '@pulumi/pulumi';
import { readStackConfig } from './common/config.js';
import { AZURE_QUEUES, archivesFor, azurePoisonQueue, DEFAULT_ARCHIVE_DIR, MissingArchiveError } from './common/packaging.js';
import { standardTags } from './common/tags.js';

/**
 * The Tessera Pulumi program. One program, one stack per cloud and region
 * (`Pulumi.<cloud>-<region>.yaml`): `tessera:cloud` picks the component.
 *
 * Each cloud's component is imported only when its stack asks for it, so a
 * stack (and a test) loads one cloud's SDK, not three.
 *
 * Pulumi calls the default export and publishes what it returns as the stack
 * outputs. It must stay the only export: Pulumi refuses a module with both.
 */
export default async function main(): Promise<Record<string, unknown>> {
  const cfg = readStackConfig(DEFAULT_ARCHIVE_DIR);
  const tags = standardTags(cfg.stack, cfg.cloud);
  const common = {
    cloud: cfg.cloud,
    region: cfg.region,
    platform: cfg.platform,
    functionTimeoutSeconds: cfg.lease.functionTimeoutSec,
    leaseSeconds: cfg.lease.leaseSec,
    leaseMustExceedSeconds: cfg.lease.ceilingSec,
    // Where a new scene starts (tessera verify uploads its smoke scene there).
    sourcePrefix: cfg.source.prefix,
  };
  switch (cfg.cloud) {
    case 'aws': {
      const archives = required(() => archivesFor('aws', cfg.archiveDir));
      const { AwsTilingStack } = await import('./aws/tiling-stack.js');
      const stack = new AwsTilingStack('tessera', { config: cfg, archives, tags });
      return {
        ...common,
        sourceBucket: stack.sourceBucket.bucket,
        outputBucket: stack.outputBucket.bucket,
        claimsTable: stack.claimsTable.name,
        tileQueueUrl: stack.queues.tile.queue.url,
        tileDeadLetterQueueUrl: stack.queues.tile.deadLetter.url,
        // tessera verify re-delivers its scene's event through this queue (docs/deploy.md).
        sceneQueueUrl: stack.queues.scene.queue.url,
        // tessera ingest --cloud aws enqueues ingest requests here; the manifest they publish into.
        ingestQueueUrl: stack.queues.ingest.queue.url,
        ingestDeadLetterQueueUrl: stack.queues.ingest.deadLetter.url,
        manifestTable: stack.manifestTable.name,
        tileQueueVisibilitySeconds: cfg.tileQueueVisibilitySec,
        alarmTopic: stack.alarmTopic.arn,
        // The managed policy `tessera verify` needs: attach it to the identity that runs it (docs/iam.md).
        verifyPolicyArn: stack.verifyPolicy.arn,
      };
    }
    case 'gcp': {
      const archive = required(() => archivesFor('gcp', cfg.archiveDir));
      const { GcpTilingStack, MANIFEST_COLLECTION } = await import('./gcp/tiling-stack.js');
      const stack = new GcpTilingStack('tessera', { config: cfg, archive, tags });
      return {
        ...common,
        project: cfg.project,
        sourceBucket: stack.sourceBucket.name,
        outputBucket: stack.outputBucket.name,
        claimsCollection: cfg.claimsCollection,
        tileTopic: stack.tileTopic.name,
        deadLetterTopic: stack.deadLetterTopic.name,
        // tessera ingest --cloud gcp publishes ingest requests here.
        ingestTopic: stack.ingestTopic.name,
        ingestDeadLetterTopic: stack.ingestDeadLetterTopic.name,
        manifestCollection: MANIFEST_COLLECTION,
        firestoreDatabase: cfg.firestoreDatabase,
        tileAckDeadlineSeconds: cfg.ackDeadlineSec,
        // The account `tessera verify` runs as, by impersonation (docs/iam.md).
        verifyServiceAccount: stack.serviceAccounts.verify.email,
      };
    }
    case 'azure': {
      const archive = required(() => archivesFor('azure', cfg.archiveDir));
      const { AzureTilingStack, CLAIMS_TABLE, CONTAINERS, MANIFEST_TABLE } = await import('./azure/tiling-stack.js');
      const stack = new AzureTilingStack('tessera', { config: cfg, archive, tags });
      return {
        ...common,
        plan: cfg.plan,
        resourceGroup: stack.resourceGroup.name,
        storageAccount: stack.storageAccount.name,
        // The Functions host's own account (AzureWebJobsStorage) and the package; no data in it.
        hostStorageAccount: stack.hostStorageAccount.name,
        functionApp: stack.functionApp.name,
        tileQueue: stack.tileQueueName,
        // What tessera verify reads and writes (docs/deploy.md): the data account's containers, table and scene queue.
        sourceContainer: CONTAINERS.sources,
        outputContainer: CONTAINERS.outputs,
        claimsTable: CLAIMS_TABLE,
        sceneQueue: AZURE_QUEUES.scene,
        poisonQueue: stack.poisonQueueName,
        // tessera ingest --cloud azure puts ingest requests here; the manifest they publish into.
        ingestQueue: AZURE_QUEUES.ingest,
        ingestPoisonQueue: azurePoisonQueue(AZURE_QUEUES.ingest),
        manifestTable: MANIFEST_TABLE,
        // After `pulumi up`: Flex needs its package pushed; Consumption needs its triggers synced (docs/deploy.md).
        nextStep: cfg.plan === 'flex' ? stack.deployCommand : stack.syncTriggersCommand,
        // The identity `tessera verify` runs as, from CI through a federated credential (docs/iam.md).
        verifyIdentityClientId: stack.roleIdentities.verify.clientId,
      };
    }
  }
}

/** Turn a missing archive into a clean CLI error (no stack trace), and let anything else through. */
function required<T>(load: () => T): T {
  try {
    return load();
  } catch (e) {
    if (e instanceof MissingArchiveError) throw new pulumi.RunError(e.message);
    throw e;
  }
}
