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
import {
  DEPLOYED_ROLES,
  FUNCTION_ROLES as IDENTITY_ROLES,
  type FunctionRole as IdentityRole,
  type StoreName,
  streamKeys,
} from '../../shared/domain/key-layout.js';
import { AZURE_CLIENT_ID_SETTINGS } from '../../shared/domain/runtime-config.js';
import { type AzureStackConfig, OUTPUT_CORS, STAGING_PREFIX } from '../common/config.js';
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
import { AZURE_ROLES, blobAssignments } from './roles.js';
import { secretVault } from './secret-vault.js';
import { azureTelemetry } from './telemetry.js';

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
/** The Key Vault secret holding the PostGIS sink URL (tessera:featureSinkUrl). */
export const FEATURE_SINK_SECRET_NAME = 'feature-sink-url';
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
 * Consumption or Flex Consumption. The host runs as a user-assigned identity
 * that holds its roles before the app exists, so it can read its package and
 * host storage at first start: Blob Data Owner on the host storage account
 * only, Queue Data Contributor on the trigger queues, Queue Data Message Sender
 * on their poison queues. Each function's code runs as its own role's
 * user-assigned identity, with the blob grants the key layout gives that role
 * (Reader or Contributor on a container, conditioned on the blob path) and the
 * queue and table roles its code needs (docs/iam.md).
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
  /** The identity the Functions host runs as (host storage, package, queue triggers), granted its roles before the app is created. */
  readonly identity: managedidentity.UserAssignedIdentity;
  /**
   * One identity per function role, each with its own grants (docs/iam.md); all but verify's are assigned to the app,
   * and each function picks its own by client id (ENV azureClientId*). verify's is for the operator's CI workload.
   */
  readonly roleIdentities: Readonly<Record<IdentityRole, managedidentity.UserAssignedIdentity>>;
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
        // tessera:outputCorsOrigins: CORS is the blob service's, so it covers the account's every container; it admits
        // an origin, it grants nothing (a page still needs a SAS or a token to read).
        ...(cfg.outputCorsOrigins === undefined
          ? {}
          : {
              cors: {
                corsRules: [
                  {
                    allowedOrigins: [...cfg.outputCorsOrigins],
                    allowedMethods: [...OUTPUT_CORS.methods],
                    allowedHeaders: [...OUTPUT_CORS.requestHeaders],
                    exposedHeaders: [...OUTPUT_CORS.responseHeaders],
                    maxAgeInSeconds: OUTPUT_CORS.maxAgeSec,
                  },
                ],
              },
            }),
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

    // The host's identity and its roles, before the app: a system-assigned identity exists only once the app does,
    // so its first start would find no role to read its package or host storage with. The host (not the functions'
    // code) uses it: host storage, the package, the queue triggers (receive, delete, move poison after maxDequeueCount).
    this.identity = new managedidentity.UserAssignedIdentity(`${name}-identity`, { resourceGroupName, location, tags }, parent);
    const identityId = this.identity.id;
    const clientId = this.identity.clientId;
    // One identity per function role (docs/iam.md): each function's SDK clients authenticate as their own, so a
    // function can reach only what its role is granted. verify's is not assigned to the app: an operator's CI
    // workload signs in as it (a federated credential) to run `tessera verify`.
    const roleIdentities = {} as Record<IdentityRole, managedidentity.UserAssignedIdentity>;
    for (const role of IDENTITY_ROLES) {
      roleIdentities[role] = new managedidentity.UserAssignedIdentity(
        `${name}-identity-${role}`,
        { resourceGroupName, location, tags },
        parent,
      );
    }
    this.roleIdentities = roleIdentities;
    const roleDefinition = (roleId: string) =>
      pulumi.interpolate`/subscriptions/${client.subscriptionId}/providers/Microsoft.Authorization/roleDefinitions/${roleId}`;
    const dataAccountId = this.storageAccount.id;
    const queueScope = (queue: string) => pulumi.interpolate`${dataAccountId}/queueServices/default/queues/${queue}`;
    const tableScope = (tableName: string) => pulumi.interpolate`${dataAccountId}/tableServices/default/tables/${tableName}`;
    type Grant = {
      readonly id: string;
      readonly role: keyof typeof AZURE_ROLES;
      readonly scope: pulumi.Input<string>;
      readonly condition?: string;
      readonly description?: string;
    };
    const hostGrants: Grant[] = [
      { id: 'host-blobs', role: 'storageBlobDataOwner', scope: this.hostStorageAccount.id },
      // The host's own queues and tables (timer and scale state) live in its account too.
      { id: 'host-queues', role: 'storageQueueDataContributor', scope: this.hostStorageAccount.id },
      { id: 'host-tables', role: 'storageTableDataContributor', scope: this.hostStorageAccount.id },
      // The trigger queues (the host receives and deletes), and their poison queues, where the host moves a message
      // after maxDequeueCount: add only. It sends before it creates (the queue exists here).
      ...AZURE_QUEUE_TRIGGERED.flatMap((role) => [
        { id: `queue-${AZURE_QUEUES[role]}`, role: 'storageQueueDataContributor' as const, scope: queueScope(AZURE_QUEUES[role]) },
        {
          id: `queue-${azurePoisonQueue(AZURE_QUEUES[role])}`,
          role: 'storageQueueDataMessageSender' as const,
          scope: queueScope(azurePoisonQueue(AZURE_QUEUES[role])),
        },
      ]),
    ];
    // Each role's blob grants come from the key layout (shared/domain/key-layout.ts ROLE_ACCESS) through
    // blobAssignments: Reader or Contributor on a container, with a condition on the blob path per action. Queues and
    // tables: what each role's code sends to and reads (the host, not the code, consumes the trigger queues).
    const poison = (role: AzureQueueTriggered) => queueScope(azurePoisonQueue(AZURE_QUEUES[role]));
    const otherGrants: Readonly<Record<IdentityRole, readonly Grant[]>> = {
      // Fan-out enqueues tile jobs; a scene event no retry can cure is settled in the scene queue's poison twin.
      scene: [
        { id: 'send-tiles', role: 'storageQueueDataMessageSender', scope: queueScope(AZURE_QUEUES.tile) },
        { id: 'settle-poison', role: 'storageQueueDataMessageSender', scope: poison('scene') },
      ],
      // Claims (and the hourly claim-row cleanup, which runs as tile); a long fan-out continues in chunk messages.
      tile: [
        { id: 'claims', role: 'storageTableDataContributor', scope: tableScope(CLAIMS_TABLE) },
        { id: 'send-tiles', role: 'storageQueueDataMessageSender', scope: queueScope(AZURE_QUEUES.tile) },
        { id: 'settle-poison', role: 'storageQueueDataMessageSender', scope: poison('tile') },
      ],
      mosaic: [],
      // Manifest rows are inserted, never replaced; a refused request is settled in the ingest queue's poison twin.
      ingest: [
        { id: 'manifest', role: 'storageTableDataContributor', scope: tableScope(MANIFEST_TABLE) },
        { id: 'settle-poison', role: 'storageQueueDataMessageSender', scope: poison('ingest') },
      ],
      reconcile: [{ id: 'manifest', role: 'storageTableDataReader', scope: tableScope(MANIFEST_TABLE) }],
      // Claims of its batches; an unreadable batch object's event is settled in the stream queue's poison twin.
      stream: [
        { id: 'claims', role: 'storageTableDataContributor', scope: tableScope(CLAIMS_TABLE) },
        { id: 'settle-poison', role: 'storageQueueDataMessageSender', scope: poison('stream') },
      ],
      // The claim race and cleanup; the replay (scene queue) and poison probe (tile queue), both queues' depth while
      // settling, and removing its own dead letters from the tile poison queue (docs/deploy.md, step 4).
      verify: [
        { id: 'claims', role: 'storageTableDataContributor', scope: tableScope(CLAIMS_TABLE) },
        { id: 'scene-queue', role: 'storageQueueDataContributor', scope: queueScope(AZURE_QUEUES.scene) },
        { id: 'tile-queue', role: 'storageQueueDataContributor', scope: queueScope(AZURE_QUEUES.tile) },
        { id: 'tile-poison', role: 'storageQueueDataContributor', scope: poison('tile') },
      ],
    };
    const dataContainers: Record<StoreName, storage.BlobContainer> = { sources: containers.sources, outputs: containers.outputs };
    const roleGrants = (role: IdentityRole): Grant[] => [
      ...blobAssignments(role, cfg.source.prefix).map((a) => ({
        id: `${a.store}-blobs`,
        role: a.azureRole,
        scope: dataContainers[a.store].id,
        condition: a.condition,
        description: `Tessera ${role}: ${a.areas.join(', ')} of ${a.store} (shared/domain/key-layout.ts)`,
      })),
      ...otherGrants[role],
    ];
    const created = { dependsOn: [...Object.values(queues), ...Object.values(poisonQueues), table, manifestTable] };
    const assign = (id: string, principalId: pulumi.Input<string>, g: Grant) =>
      new authorization.RoleAssignment(
        id,
        {
          principalId,
          principalType: 'ServicePrincipal',
          roleDefinitionId: roleDefinition(AZURE_ROLES[g.role]),
          scope: g.scope,
          ...(g.condition === undefined ? {} : { condition: g.condition, conditionVersion: '2.0' }),
          ...(g.description === undefined ? {} : { description: g.description }),
        },
        { parent: this, ...created },
      );
    const assignments = hostGrants.map((g) => assign(`${name}-app-${g.id}`, this.identity.principalId, g));
    for (const role of IDENTITY_ROLES) {
      const mine = roleGrants(role).map((g) => assign(`${name}-${role}-${g.id}`, roleIdentities[role].principalId, g));
      // The functions' first invocations need their roles too; verify's wait for nothing in the app.
      if (role !== 'verify') assignments.push(...mine);
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
    // The PostGIS sink URL (tessera:featureSinkUrl) is a credential: it lives in a Key Vault, and the app setting is a
    // Key Vault reference the platform resolves as the tile function's identity (keyVaultReferenceIdentity), the one
    // identity allowed to read it. The resolved value is in the one environment of the app; the tile function builds
    // its feature sink from it, and the stream function its batch sink (docs/feature-batches.md): no second reader of the vault.
    const sink =
      cfg.featureSinkUrl === undefined
        ? undefined
        : secretVault(
            this,
            `${name}-sink`,
            {
              secretName: FEATURE_SINK_SECRET_NAME,
              value: cfg.featureSinkUrl,
              contentType: 'PostGIS connection URL (tessera:featureSinkUrl)',
            },
            {
              resourceGroupName,
              location,
              tenantId: client.tenantId,
              reader: roleIdentities.tile.principalId,
              roleDefinitionId: roleDefinition(AZURE_ROLES.keyVaultSecretsUser),
              tags,
            },
          );
    // tessera:telemetry (docs/telemetry.md): nothing at all unless it is set; its headers resolve as the tile identity too.
    const telemetry = azureTelemetry(this, name, cfg, {
      resourceGroupName,
      location,
      tenantId: client.tenantId,
      reader: roleIdentities.tile.principalId,
      roleDefinitionId: roleDefinition(AZURE_ROLES.keyVaultSecretsUser),
      tags,
    });
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
      // Pinned to the version the stack wrote: a rotation through `pulumi up` changes the setting, which restarts the app.
      ...(sink ? { featureSink: { kind: 'azure-key-vault' as const, secretUri: sink.secret.properties.secretUriWithVersion } } : {}),
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
      // Each function's SDK clients authenticate as its own role's identity, named by client id (functions/azure/compose.ts).
      // No AZURE_CLIENT_ID: a client built without a role must fail, not fall back to the host's identity.
      ...Object.fromEntries(DEPLOYED_ROLES.map((role) => [AZURE_CLIENT_ID_SETTINGS[role], roleIdentities[role].clientId])),
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
      ...telemetry.settings,
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
        identity: { type: 'UserAssigned', userAssignedIdentities: [identityId, ...DEPLOYED_ROLES.map((role) => roleIdentities[role].id)] },
        // The Key Vault references (the sink URL, the OTLP exporter's headers) resolve as the tile identity, their only reader.
        keyVaultReferenceIdentity: roleIdentities.tile.id,
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
      { parent: this, dependsOn: [...assignments, ...(sink ? [sink.reader] : []), ...telemetry.dependsOn] },
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

    // Batch objects of feature streams (docs/feature-batches.md): BlobCreated under streams/ of the sources container, to the
    // stream queue, one event per batch object; the same committing APIs as scenes (a batch is read only once whole).
    new eventgrid.SystemTopicEventSubscription(
      `${name}-stream-events`,
      {
        resourceGroupName,
        systemTopicName: topic.name,
        eventDeliverySchema: 'EventGridSchema',
        destination: {
          endpointType: 'StorageQueue',
          resourceId: this.storageAccount.id,
          queueName: queues.stream.name,
          queueMessageTimeToLiveInSeconds: QUEUE_MESSAGE_TTL_SEC,
        },
        filter: {
          includedEventTypes: ['Microsoft.Storage.BlobCreated'],
          subjectBeginsWith: pulumi.interpolate`/blobServices/default/containers/${containers.sources.name}/blobs/${streamKeys.root()}`,
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
      verifyIdentityClientId: roleIdentities.verify.clientId,
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
