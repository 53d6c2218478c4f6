import * as applicationinsights from '@pulumi/azure-native/applicationinsights';
import * as authorization from '@pulumi/azure-native/authorization';
import * as eventgrid from '@pulumi/azure-native/eventgrid';
import * as operationalinsights from '@pulumi/azure-native/operationalinsights';
import * as resources from '@pulumi/azure-native/resources';
import * as storage from '@pulumi/azure-native/storage';
import * as web from '@pulumi/azure-native/web';
import * as pulumi from '@pulumi/pulumi';
import { type AzureStackConfig, FUNCTION_ROLES, type FunctionRole } from '../common/config.js';
import { functionEnvironment, OUTPUT_PREFIXES, TILE_OBJECT_SUFFIX } from '../common/environment.js';
import { azureStorageAccountName } from '../common/naming.js';
import { type Archive, AZURE_QUEUES, AZURE_TRIGGER_CONNECTION, azurePoisonQueue } from '../common/packaging.js';
import type { StandardTags } from '../common/tags.js';

export interface AzureTilingStackArgs {
  readonly config: AzureStackConfig;
  readonly archive: Archive;
  readonly tags: StandardTags;
}

/** Built-in role definitions (ids are the same in every tenant). */
export const AZURE_ROLES = {
  /** The Functions host keeps its state and leases in blobs; Tessera reads scenes and writes outputs. */
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
} as const;

export const CONTAINERS = { sources: 'sources', outputs: 'outputs', deployments: 'deployments', deadLetters: 'deadletters' } as const;
export const CLAIMS_TABLE = 'tesseraclaims';
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
 * Tessera on Azure: one storage account (scenes, outputs, claims table,
 * queues), Event Grid (BlobCreated, subject-filtered, dead-lettered) ->
 * Storage Queue -> Function App (scene) -> tile queue -> Function App (tile),
 * tile BlobCreated -> mosaic queue -> Function App (mosaic). The app is
 * Linux, Node 20, on Consumption or Flex Consumption, with a managed identity
 * and data-plane roles scoped to the account.
 *
 * Event Grid delivers to queues rather than straight to the functions: a queue
 * needs no function to exist when the subscription is created (an Azure
 * Function destination does, which fails a first deployment), and the host's
 * poison queue gives every trigger the same dead-letter path.
 */
export class AzureTilingStack extends pulumi.ComponentResource {
  readonly resourceGroup: resources.ResourceGroup;
  readonly storageAccount: storage.StorageAccount;
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
    this.storageAccount = new storage.StorageAccount(
      `${name}-storage`,
      {
        resourceGroupName,
        location,
        accountName: cfg.storageAccountName ?? azureStorageAccountName(pulumi.getOrganization(), pulumi.getProject(), cfg.stack),
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
    const accountName = this.storageAccount.name;
    // Versioning keeps the blob a repair write replaced.
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
    const containers = {} as Record<keyof typeof CONTAINERS, storage.BlobContainer>;
    for (const [key, containerName] of Object.entries(CONTAINERS) as [keyof typeof CONTAINERS, string][]) {
      containers[key] = new storage.BlobContainer(
        `${name}-${containerName}`,
        { resourceGroupName, accountName, containerName, publicAccess: 'None' },
        parent,
      );
    }
    // Claims: Table Storage has no TTL; the Azure functions' timer cleanup deletes rows past expires_at.
    const table = new storage.Table(`${name}-claims`, { resourceGroupName, accountName, tableName: CLAIMS_TABLE }, parent);
    const queues = {} as Record<FunctionRole, storage.Queue>;
    for (const role of FUNCTION_ROLES) {
      queues[role] = new storage.Queue(`${name}-${role}-queue`, { resourceGroupName, accountName, queueName: AZURE_QUEUES[role] }, parent);
      // Created up front so the poison path exists (and can be watched) before the first failure.
      new storage.Queue(
        `${name}-${role}-poison`,
        { resourceGroupName, accountName, queueName: azurePoisonQueue(AZURE_QUEUES[role]) },
        parent,
      );
    }

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
    });
    const packageBlob = flex
      ? undefined
      : new storage.Blob(
          `${name}-package`,
          {
            resourceGroupName,
            accountName,
            containerName: containers.deployments.name,
            // Named by content: a new build is a new URL, which restarts the app on it.
            blobName: `app-${archive.sha256.slice(0, 16)}.zip`,
            type: 'Block',
            source: new pulumi.asset.FileAsset(archive.path),
          },
          parent,
        );
    const endpoints = this.storageAccount.primaryEndpoints;
    const blobEndpoint = endpoints.apply((e) => e.blob);
    const settings: Record<string, pulumi.Input<string>> = {
      // Identity-based host storage: the account name is enough for a system-assigned identity.
      AzureWebJobsStorage__accountName: accountName,
      // The queue triggers' connection, identity-based too.
      [`${AZURE_TRIGGER_CONNECTION}__queueServiceUri`]: endpoints.apply((e) => e.queue),
      [`${AZURE_TRIGGER_CONNECTION}__blobServiceUri`]: blobEndpoint,
      [`${AZURE_TRIGGER_CONNECTION}__tableServiceUri`]: endpoints.apply((e) => e.table),
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
      settings.WEBSITE_RUN_FROM_PACKAGE = pulumi.interpolate`${blobEndpoint}${containers.deployments.name}/${packageBlob.name}`;
      // Fetch the package with the app's own identity: no SAS token in the settings.
      settings.WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID = 'SystemAssigned';
    }
    this.functionApp = new web.WebApp(
      `${name}-app`,
      {
        resourceGroupName,
        location,
        kind: 'functionapp,linux',
        serverFarmId: plan.id,
        httpsOnly: true,
        identity: { type: 'SystemAssigned' },
        siteConfig: {
          ...(flex ? {} : { linuxFxVersion: 'Node|20' }),
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
                    value: pulumi.interpolate`${blobEndpoint}${containers.deployments.name}`,
                    authentication: { type: 'SystemAssignedIdentity' },
                  },
                },
                runtime: { name: 'node', version: '20' },
                scaleAndConcurrency: { instanceMemoryMB: cfg.memoryMb, maximumInstanceCount: 100 },
              },
            }
          : {}),
        tags,
      },
      parent,
    );
    const principalId = this.functionApp.identity.apply((i) => i?.principalId ?? '');
    for (const [roleName, roleId] of Object.entries(AZURE_ROLES)) {
      new authorization.RoleAssignment(
        `${name}-app-${roleName}`,
        {
          principalId,
          principalType: 'ServicePrincipal',
          roleDefinitionId: pulumi.interpolate`/subscriptions/${client.subscriptionId}/providers/Microsoft.Authorization/roleDefinitions/${roleId}`,
          scope: this.storageAccount.id,
        },
        parent,
      );
    }

    // Event Grid: BlobCreated on the account, filtered by subject, to the scene and mosaic queues.
    const topic = new eventgrid.SystemTopic(
      `${name}-events`,
      { resourceGroupName, location, source: this.storageAccount.id, topicType: 'Microsoft.Storage.StorageAccounts', tags },
      parent,
    );
    const subscribe = (role: 'scene' | 'mosaic', container: storage.BlobContainer, prefix: string, suffix: string) =>
      new eventgrid.SystemTopicEventSubscription(
        `${name}-${role}-events`,
        {
          resourceGroupName,
          systemTopicName: topic.name,
          eventDeliverySchema: 'EventGridSchema',
          destination: {
            endpointType: 'StorageQueue',
            resourceId: this.storageAccount.id,
            queueName: queues[role].name,
            queueMessageTimeToLiveInSeconds: QUEUE_MESSAGE_TTL_SEC,
          },
          filter: {
            includedEventTypes: ['Microsoft.Storage.BlobCreated'],
            subjectBeginsWith: pulumi.interpolate`/blobServices/default/containers/${container.name}/blobs/${prefix}`,
            ...(suffix ? { subjectEndsWith: suffix } : {}),
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
    subscribe('scene', containers.sources, cfg.source.prefix, cfg.source.suffix);
    subscribe('mosaic', containers.outputs, OUTPUT_PREFIXES.tiles, TILE_OBJECT_SUFFIX);

    const appRef = pulumi.interpolate`--resource-group ${resourceGroupName} --name ${this.functionApp.name}`;
    this.deployCommand = pulumi.interpolate`az functionapp deployment source config-zip ${appRef} --src ${archive.path}`;
    this.syncTriggersCommand = pulumi.interpolate`az rest --method post --url https://management.azure.com${this.functionApp.id}/syncfunctiontriggers?api-version=2022-03-01`;

    this.registerOutputs({
      resourceGroup: resourceGroupName,
      storageAccount: accountName,
      functionApp: this.functionApp.name,
      claimsTable: table.name,
      queues: Object.fromEntries(FUNCTION_ROLES.map((r) => [r, queues[r].name])),
      deployCommand: this.deployCommand,
      syncTriggersCommand: this.syncTriggersCommand,
    });
  }
}
