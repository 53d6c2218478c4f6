import * as applicationinsights from '@pulumi/azure-native/applicationinsights';
import * as authorization from '@pulumi/azure-native/authorization';
import * as eventgrid from '@pulumi/azure-native/eventgrid';
import * as managedidentity from '@pulumi/azure-native/managedidentity';
import * as monitor from '@pulumi/azure-native/monitor';
import * as operationalinsights from '@pulumi/azure-native/operationalinsights';
import * as resources from '@pulumi/azure-native/resources';
import * as storage from '@pulumi/azure-native/storage';
import * as web from '@pulumi/azure-native/web';
import * as pulumi from '@pulumi/pulumi';
import { type AzureStackConfig, STAGING_PREFIX } from '../common/config.js';
import { functionEnvironment } from '../common/environment.js';
import { azureHostStorageAccountName, azureStorageAccountName, monitoringPrefix } from '../common/naming.js';
import {
  type Archive,
  AZURE_QUEUE_TRIGGERED,
  AZURE_QUEUES,
  AZURE_TRIGGER_CONNECTION,
  type AzureQueueTriggered,
  azurePoisonQueue,
} from '../common/packaging.js';
import type { StandardTags } from '../common/tags.js';
import { AZURE_ROLES } from './roles.js';

export interface AzureTilingStackArgs {
  readonly config: AzureStackConfig;
  readonly archive: Archive;
  readonly tags: StandardTags;
}

export { AZURE_ROLES } from './roles.js';

/** Containers of the data account. */
export const CONTAINERS = { sources: 'sources', outputs: 'outputs', deadLetters: 'deadletters' } as const;
/** Days a replaced source version, or a fan-out's pinning snapshot, is kept (AWS and GCP keep noncurrent versions as long). */
export const SOURCE_VERSION_RETENTION_DAYS = 30;
/** The host storage account's container holding the app package (Consumption: by URL; Flex: the deployment container). */
export const DEPLOYMENTS_CONTAINER = 'deployments';
/**
 * Matches the JSON line JsonTelemetry writes for a commit whose lease was
 * stolen; the Functions Node worker puts a console line in `traces.message`.
 */
export const LEASE_STOLEN_TRACE_TERMS = ['"event":"lease-stolen"', '"level":"ERROR"'] as const;
/** Storage queue diagnostic log category that records PutMessage (a message arriving in a poison queue). */
const QUEUE_WRITE_LOGS = 'StorageWrite';
export const CLAIMS_TABLE = 'tesseraclaims';
/** The ingest manifest table (one entity per published artefact, created by insert only). */
export const MANIFEST_TABLE = 'tesseramanifest';
/** Blob API calls that finish a blob: filtering on them avoids a second event for one upload. */
const BLOB_COMPLETED_APIS = ['PutBlob', 'PutBlockList', 'CopyBlob', 'FlushWithClose'];
const EVENT_TTL_MINUTES = 1440; // Event Grid's default: retry for a day, then dead-letter
const QUEUE_MESSAGE_TTL_SEC = 7 * 24 * 3600;

/** `hh:mm:ss` for host.json's functionTimeout. */
export function hostTimeSpan(seconds: number): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${pad(Math.floor(seconds / 3600))}:${pad(Math.floor((seconds % 3600) / 60))}:${pad(seconds % 60)}`;
}

/**
 * Tessera on Azure: a data storage account (scenes, outputs, claims table,
 * queues), Event Grid (BlobCreated, subject-filtered, dead-lettered) ->
 * Storage Queue -> Function App (scene) -> tile queue -> Function App (tile),
 * and a timer in the app that sweeps finished scenes into mosaics (as on AWS
 * and GCP). The app is Linux, Node 22 (shared/domain/runtimes.ts), on
 * Consumption or Flex Consumption. It runs as a user-assigned identity that
 * holds its roles before the app exists, so the host can read its package
 * and host storage at first start: Blob Data Owner on the host storage
 * account only, Blob Data Contributor on the sources and outputs containers,
 * Queue Data Contributor on its trigger queues, Queue Data Message Sender on
 * their poison queues, Table Data Contributor on the claims table.
 *
 * Event Grid delivers to queues rather than straight to the functions: a queue
 * needs no function to exist when the subscription is created (an Azure
 * Function destination does, which fails a first deployment), and the host's
 * poison queue gives every trigger the same dead-letter path.
 */
export class AzureTilingStack extends pulumi.ComponentResource {
  readonly resourceGroup: resources.ResourceGroup;
  /** The data account: sources, outputs, claims table, queues. */
  readonly storageAccount: storage.StorageAccount;
  /** The Functions host's own account (AzureWebJobsStorage) and the app package. */
  readonly hostStorageAccount: storage.StorageAccount;
  /** The identity the app runs as, granted its roles before the app is created. */
  readonly identity: managedidentity.UserAssignedIdentity;
  readonly functionApp: web.WebApp;
  readonly tileQueueName: string = AZURE_QUEUES.tile;
  readonly poisonQueueName: string = azurePoisonQueue(AZURE_QUEUES.tile);
  /** Flex Consumption: the command that deploys the package (Pulumi cannot call One Deploy). */
  readonly deployCommand: pulumi.Output<string>;
  /** Consumption with a package URL: the call that makes the platform see the functions' triggers. */
  readonly syncTriggersCommand: pulumi.Output<string>;

  constructor(name: string, args: AzureTilingStackArgs, opts?: pulumi.ComponentResourceOptions) {
    super('tessera:azure:TilingStack', name, {}, opts);
    const { config: cfg, archive, tags } = args;
    const parent = { parent: this };
    const location = cfg.region;
    const client = authorization.getClientConfigOutput(parent);

    this.resourceGroup = new resources.ResourceGroup(`${name}-rg`, { location, tags }, parent);
    const resourceGroupName = this.resourceGroup.name;

    // Storage: HTTPS only, TLS 1.2, no anonymous blob access. Shared keys stay enabled because Pulumi uploads the
    // package blob with them and Event Grid's queue and dead-letter delivery is set up without an identity; the
    // function app itself authenticates with its managed identity only.
    const account = (id: string, accountName: string) =>
      new storage.StorageAccount(
        `${name}-${id}`,
        {
          resourceGroupName,
          location,
          accountName,
          kind: 'StorageV2',
          sku: { name: 'Standard_LRS' },
          enableHttpsTrafficOnly: true,
          minimumTlsVersion: 'TLS1_2',
          allowBlobPublicAccess: false,
          defaultToOAuthAuthentication: true,
          tags,
        },
        parent,
      );
    const org = pulumi.getOrganization();
    const project = pulumi.getProject();
    this.storageAccount = account('storage', cfg.storageAccountName ?? azureStorageAccountName(org, project, cfg.stack));
    // The host gets Blob Data Owner on its account (it creates its own containers there), so that account holds
    // nothing else: no scene, no output.
    this.hostStorageAccount = account('host', azureHostStorageAccountName(org, project, cfg.stack));
    const accountName = this.storageAccount.name;
    // Versioning keeps the blob a repair write replaced, and lets a job's reads pin the source version its key names.
    new storage.BlobServiceProperties(
      `${name}-blob-service`,
      {
        resourceGroupName,
        accountName,
        blobServicesName: 'default',
        isVersioningEnabled: true,
        deleteRetentionPolicy: { enabled: true, days: 7 },
        containerDeleteRetentionPolicy: { enabled: true, days: 7 },
      },
      parent,
    );
    // Pinned reads leave a snapshot per scene (fan-out pins the source with one) and versioning keeps every
    // replaced source: both expire after 30 days, as the noncurrent versions on AWS and GCP do. A backfill of a
    // scene older than that finds its version gone and settles as source-changed (never reads other bytes).
    new storage.ManagementPolicy(
      `${name}-source-versions`,
      {
        resourceGroupName,
        accountName,
        managementPolicyName: 'default',
        policy: {
          rules: [
            {
              name: 'expire-source-snapshots-and-versions',
              type: 'Lifecycle',
              enabled: true,
              definition: {
                filters: { blobTypes: ['blockBlob'], prefixMatch: [`${CONTAINERS.sources}/`] },
                actions: {
                  snapshot: { delete: { daysAfterCreationGreaterThan: SOURCE_VERSION_RETENTION_DAYS } },
                  version: { delete: { daysAfterCreationGreaterThan: SOURCE_VERSION_RETENTION_DAYS } },
                },
              },
            },
            {
              // Ingest stages each attempt's download under staging/ of the sources container (outside the scene
              // prefix, so no BlobCreated reaches the scene queue): kept tessera:stagingRetentionDays, then deleted.
              name: 'expire-ingest-staging',
              type: 'Lifecycle',
              enabled: true,
              definition: {
                filters: { blobTypes: ['blockBlob'], prefixMatch: [`${CONTAINERS.sources}/${STAGING_PREFIX}`] },
                actions: {
                  baseBlob: { delete: { daysAfterModificationGreaterThan: cfg.stagingRetentionDays } },
                  version: { delete: { daysAfterCreationGreaterThan: cfg.stagingRetentionDays } },
                },
              },
            },
          ],
        },
      },
      parent,
    );
    const containers = {} as Record<keyof typeof CONTAINERS, storage.BlobContainer>;
    for (const [key, containerName] of Object.entries(CONTAINERS) as [keyof typeof CONTAINERS, string][]) {
      containers[key] = new storage.BlobContainer(
        `${name}-${containerName}`,
        { resourceGroupName, accountName, containerName, publicAccess: 'None' },
        parent,
      );
    }
    const deployments = new storage.BlobContainer(
      `${name}-${DEPLOYMENTS_CONTAINER}`,
      { resourceGroupName, accountName: this.hostStorageAccount.name, containerName: DEPLOYMENTS_CONTAINER, publicAccess: 'None' },
      parent,
    );
    // Claims: Table Storage has no TTL; the Azure functions' timer cleanup deletes rows past expires_at.
    const table = new storage.Table(`${name}-claims`, { resourceGroupName, accountName, tableName: CLAIMS_TABLE }, parent);
    const manifestTable = new storage.Table(`${name}-manifest`, { resourceGroupName, accountName, tableName: MANIFEST_TABLE }, parent);
    const queues = {} as Record<AzureQueueTriggered, storage.Queue>;
    const poisonQueues = {} as Record<AzureQueueTriggered, storage.Queue>;
    for (const role of AZURE_QUEUE_TRIGGERED) {
      queues[role] = new storage.Queue(`${name}-${role}-queue`, { resourceGroupName, accountName, queueName: AZURE_QUEUES[role] }, parent);
      // Created up front so the poison path exists (and can be watched) before the first failure.
      poisonQueues[role] = new storage.Queue(
        `${name}-${role}-poison`,
        { resourceGroupName, accountName, queueName: azurePoisonQueue(AZURE_QUEUES[role]) },
        parent,
      );
    }

    // The app's identity and its roles, before the app: a system-assigned identity exists only once the app does,
    // so its first start would find no role to read its package or host storage with.
    this.identity = new managedidentity.UserAssignedIdentity(`${name}-identity`, { resourceGroupName, location, tags }, parent);
    const identityId = this.identity.id;
    const clientId = this.identity.clientId;
    const roleDefinition = (roleId: string) =>
      pulumi.interpolate`/subscriptions/${client.subscriptionId}/providers/Microsoft.Authorization/roleDefinitions/${roleId}`;
    const dataAccountId = this.storageAccount.id;
    const grants: { id: string; role: keyof typeof AZURE_ROLES; scope: pulumi.Input<string> }[] = [
      { id: 'host-blobs', role: 'storageBlobDataOwner', scope: this.hostStorageAccount.id },
      // The host's own queues and tables (timer and scale state) live in its account too.
      { id: 'host-queues', role: 'storageQueueDataContributor', scope: this.hostStorageAccount.id },
      { id: 'host-tables', role: 'storageTableDataContributor', scope: this.hostStorageAccount.id },
      { id: 'sources', role: 'storageBlobDataContributor', scope: containers.sources.id },
      { id: 'outputs', role: 'storageBlobDataContributor', scope: containers.outputs.id },
      {
        id: 'claims',
        role: 'storageTableDataContributor',
        scope: pulumi.interpolate`${dataAccountId}/tableServices/default/tables/${CLAIMS_TABLE}`,
      },
      {
        id: 'manifest',
        role: 'storageTableDataContributor',
        scope: pulumi.interpolate`${dataAccountId}/tableServices/default/tables/${MANIFEST_TABLE}`,
      },
      // Its trigger queues (the host receives and deletes; the tile queue also carries the fan-out chunks the
      // tile function adds), and their poison queues, where the handlers settle poison at once and the host
      // moves a message after maxDequeueCount: add only. Both send before they create (the queue exists here),
      // and nothing in the app reads a poison queue.
      ...AZURE_QUEUE_TRIGGERED.flatMap((role) => [
        {
          id: `queue-${AZURE_QUEUES[role]}`,
          role: 'storageQueueDataContributor' as const,
          scope: pulumi.interpolate`${dataAccountId}/queueServices/default/queues/${AZURE_QUEUES[role]}`,
        },
        {
          id: `queue-${azurePoisonQueue(AZURE_QUEUES[role])}`,
          role: 'storageQueueDataMessageSender' as const,
          scope: pulumi.interpolate`${dataAccountId}/queueServices/default/queues/${azurePoisonQueue(AZURE_QUEUES[role])}`,
        },
      ]),
    ];
    const assignments = grants.map(
      (g) =>
        new authorization.RoleAssignment(
          `${name}-app-${g.id}`,
          {
            principalId: this.identity.principalId,
            principalType: 'ServicePrincipal',
            roleDefinitionId: roleDefinition(AZURE_ROLES[g.role]),
            scope: g.scope,
          },
          { parent: this, dependsOn: [...Object.values(queues), ...Object.values(poisonQueues), table, manifestTable] },
        ),
    );

    // Monitoring.
    const workspace = new operationalinsights.Workspace(
      `${name}-logs`,
      { resourceGroupName, location, sku: { name: 'PerGB2018' }, retentionInDays: 30, tags },
      parent,
    );
    const insights = new applicationinsights.Component(
      `${name}-insights`,
      {
        resourceGroupName,
        location,
        kind: 'web',
        applicationType: 'web',
        ingestionMode: 'LogAnalytics',
        workspaceResourceId: workspace.id,
        tags,
      },
      parent,
    );

    // Function app.
    const flex = cfg.plan === 'flex';
    const plan = new web.AppServicePlan(
      `${name}-plan`,
      {
        resourceGroupName,
        location,
        kind: 'functionapp',
        reserved: true, // Linux
        sku: flex ? { name: 'FC1', tier: 'FlexConsumption' } : { name: 'Y1', tier: 'Dynamic' },
        tags,
      },
      parent,
    );
    const timeoutSec = cfg.lease.functionTimeoutSec;
    const env = functionEnvironment(cfg, cfg.platform, timeoutSec, {
      claimsTable: table.name,
      sourceBucket: containers.sources.name,
      outputBucket: containers.outputs.name,
      tileQueue: queues.tile.name,
      deadLetterQueue: azurePoisonQueue(AZURE_QUEUES.tile),
      azureStorageAccount: accountName,
      // One app, one environment: the ingest function settles poison on its own queue's -poison twin (by name).
      manifestTable: manifestTable.name,
      ingestQueue: queues.ingest.name,
      // One app, one environment: the tile function is the only one that builds a sink from it.
      ...(cfg.featureSinkUrl ? { featureSink: cfg.featureSinkUrl } : {}),
    });
    const packageBlob = flex
      ? undefined
      : new storage.Blob(
          `${name}-package`,
          {
            resourceGroupName,
            accountName: this.hostStorageAccount.name,
            containerName: deployments.name,
            // Named by content: a new build is a new URL, which restarts the app on it.
            blobName: `app-${archive.sha256.slice(0, 16)}.zip`,
            type: 'Block',
            source: new pulumi.asset.FileAsset(archive.path),
          },
          parent,
        );
    const endpoints = this.storageAccount.primaryEndpoints;
    const hostBlobEndpoint = this.hostStorageAccount.primaryEndpoints.apply((e) => e.blob);
    const settings: Record<string, pulumi.Input<string>> = {
      // Identity-based host storage, as the user-assigned identity (credential + clientId name it).
      AzureWebJobsStorage__accountName: this.hostStorageAccount.name,
      AzureWebJobsStorage__credential: 'managedidentity',
      AzureWebJobsStorage__clientId: clientId,
      // The queue triggers' connection, identity-based too.
      [`${AZURE_TRIGGER_CONNECTION}__queueServiceUri`]: endpoints.apply((e) => e.queue),
      [`${AZURE_TRIGGER_CONNECTION}__blobServiceUri`]: endpoints.apply((e) => e.blob),
      [`${AZURE_TRIGGER_CONNECTION}__tableServiceUri`]: endpoints.apply((e) => e.table),
      [`${AZURE_TRIGGER_CONNECTION}__credential`]: 'managedidentity',
      [`${AZURE_TRIGGER_CONNECTION}__clientId`]: clientId,
      // The handlers' SDK clients (DefaultAzureCredential) pick the user-assigned identity by this client id.
      AZURE_CLIENT_ID: clientId,
      APPLICATIONINSIGHTS_CONNECTION_STRING: insights.connectionString,
      // host.json in the package holds the defaults; these stack-specific values override it.
      AzureFunctionsJobHost__functionTimeout: hostTimeSpan(timeoutSec),
      AzureFunctionsJobHost__extensions__queues__maxDequeueCount: String(cfg.maxReceiveCount),
      // Long enough that a message whose attempt died holding the lease is still retried after the lease ends.
      AzureFunctionsJobHost__extensions__queues__visibilityTimeout: hostTimeSpan(cfg.retryVisibilitySec),
      // One job per instance at a time: a tile holds a window and its COG encoder in memory.
      AzureFunctionsJobHost__extensions__queues__batchSize: '1',
      AzureFunctionsJobHost__extensions__queues__newBatchThreshold: '0',
      ...env,
    };
    if (packageBlob) {
      settings.FUNCTIONS_EXTENSION_VERSION = '~4';
      settings.FUNCTIONS_WORKER_RUNTIME = 'node';
      settings.WEBSITE_RUN_FROM_PACKAGE = pulumi.interpolate`${hostBlobEndpoint}${deployments.name}/${packageBlob.name}`;
      // Fetch the package with the app's own identity: no SAS token in the settings.
      settings.WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID = identityId;
    }
    this.functionApp = new web.WebApp(
      `${name}-app`,
      {
        resourceGroupName,
        location,
        kind: 'functionapp,linux',
        serverFarmId: plan.id,
        httpsOnly: true,
        identity: { type: 'UserAssigned', userAssignedIdentities: [identityId] },
        // Key Vault references and the like resolve as the same identity.
        keyVaultReferenceIdentity: identityId,
        siteConfig: {
          ...(flex ? {} : { linuxFxVersion: cfg.runtime.id }), // 'Node|22': shared/domain/runtimes.ts
          minTlsVersion: '1.2',
          ftpsState: 'Disabled',
          http20Enabled: true,
          appSettings: Object.entries(settings).map(([settingName, value]) => ({ name: settingName, value })),
        },
        ...(flex
          ? {
              functionAppConfig: {
                deployment: {
                  storage: {
                    type: 'blobContainer',
                    value: pulumi.interpolate`${hostBlobEndpoint}${deployments.name}`,
                    authentication: { type: 'UserAssignedIdentity', userAssignedIdentityResourceId: identityId },
                  },
                },
                runtime: { name: 'node', version: cfg.runtime.id }, // '22': shared/domain/runtimes.ts
                scaleAndConcurrency: { instanceMemoryMB: cfg.memoryMb, maximumInstanceCount: 100 },
              },
            }
          : {}),
        tags,
      },
      // The host reads its package and its storage at first start: every role must exist before the app does.
      { parent: this, dependsOn: assignments },
    );

    // Event Grid: BlobCreated on the data account, filtered by subject, to the scene queue. The mosaic is a timer
    // sweep inside the app (functions/azure/handlers), so no event reaches it on a tile write.
    const topic = new eventgrid.SystemTopic(
      `${name}-events`,
      { resourceGroupName, location, source: this.storageAccount.id, topicType: 'Microsoft.Storage.StorageAccounts', tags },
      parent,
    );
    new eventgrid.SystemTopicEventSubscription(
      `${name}-scene-events`,
      {
        resourceGroupName,
        systemTopicName: topic.name,
        eventDeliverySchema: 'EventGridSchema',
        destination: {
          endpointType: 'StorageQueue',
          resourceId: this.storageAccount.id,
          queueName: queues.scene.name,
          queueMessageTimeToLiveInSeconds: QUEUE_MESSAGE_TTL_SEC,
        },
        filter: {
          includedEventTypes: ['Microsoft.Storage.BlobCreated'],
          subjectBeginsWith: pulumi.interpolate`/blobServices/default/containers/${containers.sources.name}/blobs/${cfg.source.prefix}`,
          ...(cfg.source.suffix ? { subjectEndsWith: cfg.source.suffix } : {}),
          advancedFilters: [{ operatorType: 'StringIn', key: 'data.api', values: BLOB_COMPLETED_APIS }],
        },
        retryPolicy: { maxDeliveryAttempts: 30, eventTimeToLiveInMinutes: EVENT_TTL_MINUTES },
        deadLetterDestination: {
          endpointType: 'StorageBlob',
          resourceId: this.storageAccount.id,
          blobContainerName: containers.deadLetters.name,
        },
      },
      parent,
    );

    this.alerts(name, cfg, { resourceGroupName, location, insights, workspace, tags });

    const appRef = pulumi.interpolate`--resource-group ${resourceGroupName} --name ${this.functionApp.name}`;
    this.deployCommand = pulumi.interpolate`az functionapp deployment source config-zip ${appRef} --src ${archive.path}`;
    this.syncTriggersCommand = pulumi.interpolate`az rest --method post --url https://management.azure.com${this.functionApp.id}/syncfunctiontriggers?api-version=2022-03-01`;

    this.registerOutputs({
      resourceGroup: resourceGroupName,
      storageAccount: accountName,
      hostStorageAccount: this.hostStorageAccount.name,
      identity: this.identity.name,
      functionApp: this.functionApp.name,
      claimsTable: table.name,
      manifestTable: manifestTable.name,
      queues: Object.fromEntries(AZURE_QUEUE_TRIGGERED.map((r) => [r, queues[r].name])),
      deployCommand: this.deployCommand,
      syncTriggersCommand: this.syncTriggersCommand,
    });
  }

  /**
   * Alerts, as on AWS and GCP, mailed to tessera:alertEmail when it is set:
   * - lease stolen: the core's ERROR line in Application Insights traces;
   * - poison: a message put into a poison queue. Azure Storage reports queue
   *   depth per account only (QueueMessageCount has no queue dimension), so
   *   the queue service's write log goes to the workspace and the rule counts
   *   PutMessage calls on the `-poison` queues: the moment depth leaves 0.
   */
  private alerts(
    name: string,
    cfg: AzureStackConfig,
    at: {
      resourceGroupName: pulumi.Input<string>;
      location: string;
      insights: applicationinsights.Component;
      workspace: operationalinsights.Workspace;
      tags: StandardTags;
    },
  ): void {
    const parent = { parent: this };
    const { resourceGroupName, location, tags } = at;
    const prefix = monitoringPrefix('azure', cfg.stack);
    const actionGroup = new monitor.ActionGroup(
      `${name}-alerts`,
      {
        resourceGroupName,
        location: 'global',
        groupShortName: 'tessera',
        enabled: true,
        emailReceivers: cfg.alertEmail ? [{ name: 'alert-email', emailAddress: cfg.alertEmail, useCommonAlertSchema: true }] : [],
        tags,
      },
      parent,
    );
    new monitor.DiagnosticSetting(
      `${name}-queue-writes`,
      {
        name: `${prefix}-queue-writes`,
        resourceUri: pulumi.interpolate`${this.storageAccount.id}/queueServices/default`,
        workspaceId: at.workspace.id,
        logs: [{ category: QUEUE_WRITE_LOGS, enabled: true }],
      },
      parent,
    );
    const rule = (id: string, title: string, scope: pulumi.Input<string>, query: string, description: string) =>
      new monitor.ScheduledQueryRule(
        `${name}-${id}`,
        {
          resourceGroupName,
          location,
          displayName: `${prefix}: ${title}`,
          description,
          severity: 1,
          enabled: true,
          scopes: [scope],
          evaluationFrequency: 'PT5M',
          windowSize: 'PT5M',
          criteria: {
            allOf: [
              {
                query,
                timeAggregation: 'Count',
                operator: 'GreaterThan',
                threshold: 0,
                failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 },
              },
            ],
          },
          actions: { actionGroups: [actionGroup.id] },
          tags,
        },
        parent,
      );
    rule(
      'lease-stolen',
      'lease stolen',
      at.insights.id,
      `traces | where ${LEASE_STOLEN_TRACE_TERMS.map((t) => `message contains ${JSON.stringify(t)}`).join(' and ')}`,
      'A worker committed after its lease was taken over. The create-only write kept the output correct, but the lease is too short for the work or a worker stalled: check tessera:leaseSeconds against the function timeout.',
    );
    const poison = AZURE_QUEUE_TRIGGERED.map((r) => JSON.stringify(`/${azurePoisonQueue(AZURE_QUEUES[r])}/`));
    rule(
      'poison',
      'messages poisoned',
      at.workspace.id,
      `StorageQueueLogs | where OperationName == "PutMessage" and (${poison.map((q) => `Uri contains ${q}`).join(' or ')})`,
      `A message reached a poison queue (settled at once by a handler, or after ${cfg.maxReceiveCount} failed deliveries). Inspect it in the -poison queue, fix the cause, then move it back.`,
    );
  }
}
