import { describe, expect, it } from 'vitest';
import { AZURE_ROLES, CONTAINERS, DEPLOYMENTS_CONTAINER, hostTimeSpan, LEASE_STOLEN_TRACE_TERMS } from '../../infra/azure/tiling-stack.js';
import { AZURE_QUEUES, AZURE_TRIGGER_CONNECTION, azurePoisonQueue } from '../../infra/common/packaging.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { CEILINGS, type Platform } from '../../shared/domain/ceilings.js';
import { ENV, parseRuntimeConfig } from '../../shared/domain/runtime-config.js';
import { AZURE_SUBSCRIPTION, declaredUrns, missingBefore, type RecordedResource, refusal, runStack, type StackRun } from './harness.js';
import { loadStackFile } from './stack-files.js';

/**
 * Policies of the Azure stack, asserted on what the program declares under
 * Pulumi mocks. Only azure-native submodules are loaded in this file.
 */

const STACK = 'azure-westeurope';
const BASE = { 'tessera:cloud': 'azure', 'tessera:region': 'westeurope', 'azure-native:location': 'westeurope' };

const app = (run: StackRun) => run.ofType('azure-native:web:WebApp')[0] as RecordedResource;
const data = (run: StackRun) => run.one('azure-native:storage:StorageAccount', '-storage');
const host = (run: StackRun) => run.one('azure-native:storage:StorageAccount', '-host');
const identity = (run: StackRun) => run.one('azure-native:managedidentity:UserAssignedIdentity', '-identity');
const settings = (run: StackRun): Record<string, string> =>
  Object.fromEntries(
    ((app(run).inputs.siteConfig as { appSettings: { name: string; value: unknown }[] }).appSettings ?? []).map((s) => [
      s.name,
      String(s.value),
    ]),
  );
/** `hh:mm:ss` to seconds. */
const seconds = (span: string) => span.split(':').reduce((acc, part) => acc * 60 + Number(part), 0);

describe('the Azure stack (Pulumi.azure-westeurope.yaml under mocks)', () => {
  let run: StackRun;

  it('runs the example stack file as it is shipped', async () => {
    const file = loadStackFile('Pulumi.azure-westeurope.yaml');
    expect(file.stack).toBe(STACK);
    run = await runStack(file.stack, file.config);
    expect(run.outputs).toMatchObject({
      cloud: 'azure',
      plan: 'consumption',
      platform: 'azure-consumption',
      functionTimeoutSeconds: 600,
      leaseSeconds: 900,
    });
  });

  it('builds one tessera:azure:TilingStack component and parents every resource to it', () => {
    expect(run.ofType('tessera:azure:TilingStack')).toHaveLength(1);
    const custom = declaredUrns(run);
    expect(custom.length).toBeGreaterThan(20);
    for (const urn of custom) expect(urn, urn).toContain('tessera:azure:TilingStack$');
  });

  it('keeps storage HTTPS-only at TLS 1.2 with no public blob access, and every container private', () => {
    const accounts = run.ofType('azure-native:storage:StorageAccount');
    // The data account, and the Functions host's own account (the host holds Blob Data Owner there only).
    expect(accounts).toHaveLength(2);
    for (const a of accounts) {
      expect(a.inputs).toMatchObject({ enableHttpsTrafficOnly: true, minimumTlsVersion: 'TLS1_2', allowBlobPublicAccess: false });
      expect(String(a.inputs.accountName)).toMatch(/^[a-z0-9]{3,24}$/);
    }
    const containers = run.ofType('azure-native:storage:BlobContainer');
    const onData = containers.filter((c) => c.inputs.accountName === data(run).state.name);
    expect(onData.map((c) => c.inputs.containerName).sort()).toEqual(Object.values(CONTAINERS).sort());
    expect(containers.filter((c) => c.inputs.accountName === host(run).state.name).map((c) => c.inputs.containerName)).toEqual([
      DEPLOYMENTS_CONTAINER,
    ]);
    for (const c of containers) expect(c.inputs.publicAccess, c.name).toBe('None');
    expect(app(run).inputs.httpsOnly).toBe(true);
  });

  it('runs the function app on Linux, Node 22 (the last Node Linux Consumption gets), Consumption, with the package by URL fetched with its own identity', () => {
    const plan = run.ofType('azure-native:web:AppServicePlan')[0];
    expect(plan?.inputs).toMatchObject({ reserved: true, sku: { name: 'Y1', tier: 'Dynamic' } });
    expect(app(run).inputs).toMatchObject({
      kind: 'functionapp,linux',
      identity: { type: 'UserAssigned', userAssignedIdentities: [identity(run).state.id] },
    });
    expect((app(run).inputs.siteConfig as { linuxFxVersion: string }).linuxFxVersion).toBe('Node|22');
    const s = settings(run);
    expect(s).toMatchObject({
      FUNCTIONS_EXTENSION_VERSION: '~4',
      FUNCTIONS_WORKER_RUNTIME: 'node',
      WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID: identity(run).state.id,
    });
    const blob = run.ofType('azure-native:storage:Blob')[0];
    expect(blob?.inputs.accountName).toBe(host(run).state.name);
    expect(s.WEBSITE_RUN_FROM_PACKAGE).toBe(`https://${host(run).state.name}.blob.core.windows.net/deployments/${blob?.inputs.blobName}`);
    expect(s.APPLICATIONINSIGHTS_CONNECTION_STRING).toContain('InstrumentationKey=');
    expect(run.ofType('azure-native:applicationinsights:Component')).toHaveLength(1);
  });

  it('sets the host timeout to the tile timeout, within the plan ceiling and below the lease', () => {
    const s = settings(run);
    const timeout = seconds(s.AzureFunctionsJobHost__functionTimeout as string);
    const platform = s[ENV.platform] as Platform;
    const ceiling = CEILINGS[platform].ceilingSec ?? timeout;
    expect(timeout).toBe(Number(s[ENV.functionTimeoutSeconds]));
    expect(timeout).toBeLessThanOrEqual(ceiling);
    expect(Number(s[ENV.leaseSeconds])).toBeGreaterThan(ceiling);
    expect(() => parseRuntimeConfig(s)).not.toThrow();
  });

  it('retries a message whose attempt died holding the lease only after that lease has ended', () => {
    const s = settings(run);
    const maxDequeue = Number(s.AzureFunctionsJobHost__extensions__queues__maxDequeueCount);
    expect(maxDequeue).toBe(5);
    // The Azure compose reads the host's own setting (above), never TESSERA_MAX_DELIVERIES: one count, set once.
    expect(s[ENV.maxDeliveries]).toBeUndefined();
    const pause = seconds(s.AzureFunctionsJobHost__extensions__queues__visibilityTimeout as string);
    const leaseLeft = Number(s[ENV.leaseSeconds]) - seconds(s.AzureFunctionsJobHost__functionTimeout as string);
    // The first redelivery comes when the dead attempt timed out; the remaining pauses must outlast the lease left.
    expect((maxDequeue - 2) * pause).toBeGreaterThan(leaseLeft);
  });

  it('gives every queue its poison queue, and each trigger the same delivery limit', () => {
    const names = run.ofType('azure-native:storage:Queue').map((q) => q.inputs.queueName as string);
    for (const queue of Object.values(AZURE_QUEUES)) {
      expect(names).toContain(queue);
      expect(names).toContain(azurePoisonQueue(queue));
    }
    // Scene, tile and ingest: the mosaic and the reconcile are timer sweeps, with no queue of their own.
    expect(names).toHaveLength(6);
    expect(settings(run)[ENV.deadLetterQueue]).toBe(azurePoisonQueue(AZURE_QUEUES.tile));
    // The ingest function (same app, same settings) listens on its own queue, named in the settings for the CLI.
    expect(AZURE_QUEUES.ingest).toBe('tessera-ingest');
    expect(settings(run)[ENV.ingestQueue]).toBe(AZURE_QUEUES.ingest);
  });

  it('grants Blob Data Owner on the host storage only, Contributor on the data containers, and queue and table roles on what the app uses', () => {
    const assignments = run.ofType('azure-native:authorization:RoleAssignment');
    const role = (id: string) => `/subscriptions/${AZURE_SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/${id}`;
    for (const a of assignments) {
      expect(a.inputs.principalId).toBe(identity(run).state.principalId);
      expect(a.inputs.principalType).toBe('ServicePrincipal');
    }
    const scopesOf = (roleId: string) =>
      assignments
        .filter((a) => a.inputs.roleDefinitionId === role(roleId))
        .map((a) => String(a.inputs.scope))
        .sort();
    const dataId = String(data(run).state.id);
    const container = (c: string) => `${dataId}/blobServices/default/containers/${c}`;
    expect(scopesOf(AZURE_ROLES.storageBlobDataOwner)).toEqual([host(run).state.id]);
    expect(scopesOf(AZURE_ROLES.storageBlobDataContributor)).toEqual([container(CONTAINERS.outputs), container(CONTAINERS.sources)]);
    // The trigger queues (the host receives and deletes; the tile function adds fan-out chunks) ...
    const queueScope = (q: string) => `${dataId}/queueServices/default/queues/${q}`;
    const triggerScopes = Object.values(AZURE_QUEUES).map(queueScope);
    expect(scopesOf(AZURE_ROLES.storageQueueDataContributor)).toEqual([host(run).state.id, ...triggerScopes].sort());
    // ... and add-only on each poison queue, one assignment per queue: the handlers settle poison there at once.
    expect(AZURE_QUEUES.scene).toBe('tessera-scenes');
    expect(scopesOf(AZURE_ROLES.storageQueueDataMessageSender)).toEqual(
      [
        queueScope('tessera-scenes-poison'),
        queueScope(azurePoisonQueue(AZURE_QUEUES.tile)),
        queueScope(azurePoisonQueue(AZURE_QUEUES.ingest)),
      ].sort(),
    );
    // The claims table and the ingest manifest table, each by its own scope (never the table service as a whole).
    expect(scopesOf(AZURE_ROLES.storageTableDataContributor)).toEqual(
      [
        host(run).state.id,
        `${dataId}/tableServices/default/tables/tesseraclaims`,
        `${dataId}/tableServices/default/tables/tesseramanifest`,
      ].sort(),
    );
    expect(run.one('azure-native:storage:Table', '-manifest').inputs).toMatchObject({ tableName: 'tesseramanifest' });
    expect(settings(run)[ENV.manifestTable]).toBe('tesseramanifest');
    // The app is created only after the manifest grant exists.
    expect(
      missingBefore(run, app(run), [
        assignments.find((a) => String(a.inputs.scope).endsWith('/tables/tesseramanifest')) as RecordedResource,
      ]),
    ).toEqual([]);
    // Nothing on the data account as a whole.
    for (const a of assignments) expect(a.inputs.scope, a.name).not.toBe(dataId);
    // No connection string or key in the settings: identity-based connections only.
    const s = settings(run);
    for (const [k, v] of Object.entries(s)) expect(`${k}=${v}`).not.toMatch(/AccountKey=|SharedAccessSignature|sig=/);
    expect(s[`${AZURE_TRIGGER_CONNECTION}__queueServiceUri`]).toMatch(/^https:\/\/[a-z0-9]+\.queue\.core\.windows\.net\/$/);
  });

  it('routes BlobCreated events by subject filter to the scene queue only, dead-lettering what it cannot deliver', () => {
    const account = data(run);
    const topic = run.ofType('azure-native:eventgrid:SystemTopic')[0];
    expect(topic?.inputs).toMatchObject({ source: account?.state.id, topicType: 'Microsoft.Storage.StorageAccounts' });
    const subs = run.ofType('azure-native:eventgrid:SystemTopicEventSubscription');
    // A tile write fires nothing: the mosaic is a timer-triggered sweep, as on AWS and GCP.
    expect(subs.map((x) => x.name)).toEqual(['tessera-scene-events']);
    const expected = {
      scene: { queue: AZURE_QUEUES.scene, begins: '/blobServices/default/containers/sources/blobs/scenes/', ends: '.tif' },
    };
    for (const [role, want] of Object.entries(expected)) {
      const sub = subs.find((x) => x.name.endsWith(`-${role}-events`)) as RecordedResource;
      expect(sub.inputs.destination).toMatchObject({ endpointType: 'StorageQueue', resourceId: account?.state.id, queueName: want.queue });
      expect(sub.inputs.filter).toMatchObject({
        includedEventTypes: ['Microsoft.Storage.BlobCreated'],
        subjectBeginsWith: want.begins,
        subjectEndsWith: want.ends,
      });
      expect(sub.inputs.deadLetterDestination).toMatchObject({
        endpointType: 'StorageBlob',
        resourceId: account?.state.id,
        blobContainerName: CONTAINERS.deadLetters,
      });
      expect(sub.inputs.retryPolicy).toMatchObject({ maxDeliveryAttempts: 30, eventTimeToLiveInMinutes: 1440 });
    }
  });

  it("points the app's environment at this stack's account, table, containers and queues", () => {
    const s = settings(run);
    expect(s).toMatchObject({
      [ENV.azureStorageAccount]: data(run).state.name,
      [ENV.claimsTable]: run.ofType('azure-native:storage:Table')[0]?.state.name,
      [ENV.sourceBucket]: CONTAINERS.sources,
      [ENV.outputBucket]: CONTAINERS.outputs,
      [ENV.tileQueue]: AZURE_QUEUES.tile,
      AzureWebJobsStorage__accountName: host(run).state.name,
      AzureWebJobsStorage__credential: 'managedidentity',
      AzureWebJobsStorage__clientId: identity(run).state.clientId,
      [`${AZURE_TRIGGER_CONNECTION}__credential`]: 'managedidentity',
      [`${AZURE_TRIGGER_CONNECTION}__clientId`]: identity(run).state.clientId,
      // DefaultAzureCredential in the handlers picks the user-assigned identity by this.
      AZURE_CLIENT_ID: identity(run).state.clientId,
    });
  });

  it('creates the app only after every role of its identity, so its first start can read its package and host storage', () => {
    const assignments = run.ofType('azure-native:authorization:RoleAssignment');
    expect(assignments.length).toBeGreaterThan(5);
    expect(missingBefore(run, app(run), assignments)).toEqual([]);
    expect(missingBefore(run, app(run), [identity(run)])).toEqual([]);
  });

  it('turns blob versioning on for the data account, where the sources are', () => {
    const props = run.one('azure-native:storage:BlobServiceProperties', '-blob-service');
    expect(props.inputs).toMatchObject({ accountName: data(run).state.name, isVersioningEnabled: true });
  });

  it('expires the snapshots that pin sources and the replaced source versions after 30 days, on the sources container only', () => {
    const policy = run.one('azure-native:storage:ManagementPolicy', '-source-versions');
    expect(policy.inputs.accountName).toBe(data(run).state.name);
    const rules = (policy.inputs.policy as { rules: { name: string; enabled: boolean; definition: Record<string, unknown> }[] }).rules;
    expect(rules.map((r) => r.name)).toEqual(['expire-source-snapshots-and-versions', 'expire-ingest-staging']);
    expect(rules[0]).toMatchObject({
      enabled: true,
      definition: {
        filters: { prefixMatch: ['sources/'] },
        actions: {
          snapshot: { delete: { daysAfterCreationGreaterThan: 30 } },
          version: { delete: { daysAfterCreationGreaterThan: 30 } },
        },
      },
    });
    // Never the base blob: a live source is deleted by its owner, not by Tessera.
    expect((rules[0]?.definition.actions as Record<string, unknown> | undefined)?.baseBlob).toBeUndefined();
  });

  it('deletes ingest staging (sources/staging/) after tessera:stagingRetentionDays (default 7), base blob and versions', async () => {
    const stagingRule = (r: StackRun) =>
      (
        r.one('azure-native:storage:ManagementPolicy', '-source-versions').inputs.policy as {
          rules: { name: string; enabled: boolean; definition: Record<string, unknown> }[];
        }
      ).rules.find((x) => x.name === 'expire-ingest-staging');
    expect(stagingRule(run)).toMatchObject({
      enabled: true,
      type: 'Lifecycle',
      definition: {
        filters: { blobTypes: ['blockBlob'], prefixMatch: ['sources/staging/'] },
        actions: {
          baseBlob: { delete: { daysAfterModificationGreaterThan: 7 } },
          version: { delete: { daysAfterCreationGreaterThan: 7 } },
        },
      },
    });
    const set = await runStack(STACK, { ...BASE, 'tessera:stagingRetentionDays': '2' });
    expect(stagingRule(set)?.definition).toMatchObject({ actions: { baseBlob: { delete: { daysAfterModificationGreaterThan: 2 } } } });
  });

  it('alerts on lease-stolen trace lines and on messages put into a poison queue, mailing tessera:alertEmail', async () => {
    const rules = run.ofType('azure-native:monitor:ScheduledQueryRule');
    expect(rules.map((r) => r.name).sort()).toEqual(['tessera-lease-stolen', 'tessera-poison']);
    const query = (r: RecordedResource) => (r.inputs.criteria as { allOf: { query: string }[] }).allOf[0]?.query ?? '';
    const lease = rules.find((r) => r.name === 'tessera-lease-stolen') as RecordedResource;
    expect(lease.inputs.scopes).toEqual([run.ofType('azure-native:applicationinsights:Component')[0]?.state.id]);
    // Each term the query looks for is in the line the core logs.
    const lines: string[] = [];
    new JsonTelemetry((l) => lines.push(l)).log('ERROR', 'lease-stolen', { jobKey: 'k' });
    for (const term of LEASE_STOLEN_TRACE_TERMS) {
      expect(query(lease)).toContain(`message contains ${JSON.stringify(term)}`);
      expect(lines[0]).toContain(term);
    }
    const poison = rules.find((r) => r.name === 'tessera-poison') as RecordedResource;
    for (const q of Object.values(AZURE_QUEUES)) expect(query(poison)).toContain(`Uri contains "/${azurePoisonQueue(q)}/"`);
    expect(query(poison)).toContain('OperationName == "PutMessage"');
    // The queue service's write log feeds that query.
    const diag = run.one('azure-native:monitor:DiagnosticSetting', '-queue-writes');
    expect(diag.inputs).toMatchObject({
      resourceUri: `${data(run).state.id}/queueServices/default`,
      logs: [{ category: 'StorageWrite', enabled: true }],
    });
    const group = run.one('azure-native:monitor:ActionGroup', '-alerts');
    for (const r of rules) expect((r.inputs.actions as { actionGroups: string[] }).actionGroups).toEqual([group.state.id]);
    expect(group.inputs.emailReceivers).toEqual([]);
    const mailed = await runStack(STACK, { ...BASE, 'tessera:alertEmail': 'ops@example.org' });
    expect(mailed.one('azure-native:monitor:ActionGroup', '-alerts').inputs.emailReceivers).toEqual([
      { name: 'alert-email', emailAddress: 'ops@example.org', useCommonAlertSchema: true },
    ]);
  });

  it('runs Flex Consumption from a deployment container, with no worker settings Flex refuses', async () => {
    const flex = await runStack(STACK, { ...BASE, 'tessera:azurePlan': 'flex' });
    expect(flex.outputs).toMatchObject({ platform: 'azure-flex', functionTimeoutSeconds: 1800, leaseSeconds: 2100 });
    expect(flex.ofType('azure-native:web:AppServicePlan')[0]?.inputs).toMatchObject({ sku: { name: 'FC1', tier: 'FlexConsumption' } });
    const config = app(flex).inputs.functionAppConfig as Record<string, unknown>;
    expect(config).toMatchObject({
      runtime: { name: 'node', version: '22' },
      scaleAndConcurrency: { instanceMemoryMB: 2048 },
      deployment: {
        storage: {
          type: 'blobContainer',
          value: `https://${host(flex).state.name}.blob.core.windows.net/deployments`,
          authentication: { type: 'UserAssignedIdentity', userAssignedIdentityResourceId: identity(flex).state.id },
        },
      },
    });
    expect(missingBefore(flex, app(flex), flex.ofType('azure-native:authorization:RoleAssignment'))).toEqual([]);
    const s = settings(flex);
    expect(Object.keys(s)).not.toContain('FUNCTIONS_WORKER_RUNTIME');
    expect(Object.keys(s)).not.toContain('WEBSITE_RUN_FROM_PACKAGE');
    expect(s.AzureFunctionsJobHost__functionTimeout).toBe(hostTimeSpan(1800));
    expect(String(flex.outputs.nextStep)).toMatch(/^az functionapp deployment source config-zip .* --src .*azure\/app\.zip$/);
  });

  it('refuses a pinned Node 20, which Azure would still deploy but no longer patches, and Node 24 on Linux Consumption', async () => {
    expect(await refusal(STACK, { ...BASE, 'tessera:runtime': 'Node|20' })).toMatch(
      /tessera:runtime: Node\|20 on Azure Functions \(Linux Consumption\) is past its end of support \(2026-04-30\).*use Node\|22/,
    );
    // Linux Consumption gets no new language versions: the table has no Node 24 for it.
    expect(await refusal(STACK, { ...BASE, 'tessera:runtime': 'Node|24' })).toMatch(/known: Node\|22, Node\|20/);
    const flex = await runStack(STACK, { ...BASE, 'tessera:azurePlan': 'flex', 'tessera:runtime': '24' });
    expect((app(flex).inputs.functionAppConfig as { runtime: unknown }).runtime).toEqual({ name: 'node', version: '24' });
  });

  it('refuses a lease at or below the Consumption ceiling at preview, saying what to set', async () => {
    const message = await refusal(STACK, { ...BASE, 'tessera:leaseSeconds': '600' });
    expect(message).toContain('tessera:leaseSeconds');
    expect(message).toContain('at least 601 s');
  });

  it('refuses a Consumption timeout above 10 minutes, pointing at Flex, and a Flex memory that is not an instance size', async () => {
    expect(await refusal(STACK, { ...BASE, 'tessera:functionTimeoutSeconds': '900' })).toMatch(/600 s or less.*Flex Consumption/s);
    expect(await refusal(STACK, { ...BASE, 'tessera:azurePlan': 'flex', 'tessera:memoryMb': '3000' })).toContain('512, 2048, 4096');
  });
});

/** Pulumi's wire form of a secret value (mocks record it as is): `{ <sig>: <secret sig>, value }`. */
const SECRET_SIG = '4dabf18193072939515e22adb298388d';
const reveal = (v: unknown): { readonly secret: boolean; readonly value: unknown } =>
  typeof v === 'object' && v !== null && SECRET_SIG in v
    ? { secret: true, value: (v as unknown as { value: unknown }).value }
    : { secret: false, value: v };

describe('the Azure stack with tessera:featureSinkUrl (the PostGIS sink, docs/postgis.md)', () => {
  it('puts the connection secret in the app settings, as a Pulumi secret, only when set', async () => {
    const URL = 'postgis://tessera:s3cret@db.example:5432/gis';
    const { secret, value } = reveal(app(await runStack(STACK, { ...BASE, 'tessera:featureSinkUrl': URL })).inputs.siteConfig);
    expect(secret).toBe(true);
    const appSettings = (value as { appSettings: { name: string; value: unknown }[] }).appSettings;
    expect(appSettings.find((s) => s.name === ENV.featureSink)?.value).toBe(URL);
    const bare = await runStack(STACK, BASE);
    expect(settings(bare)[ENV.featureSink]).toBeUndefined();
    // Without the key nothing in the settings is a secret (identity-based access): the mark above is the URL's.
    expect(reveal(app(bare).inputs.siteConfig).secret).toBe(false);
  });
});

describe('the Azure stack with tessera:stacAssets (multi-file scenes start on their STAC Item, docs/multi-file-scenes.md)', () => {
  it('routes BlobCreated events of *.json items to the scene queue, and tells the app which assets are which band', async () => {
    const run = await runStack(STACK, { ...BASE, 'tessera:stacAssets': '{"B04":"red","B08":"nir"}' });
    const [sub] = run.ofType('azure-native:eventgrid:SystemTopicEventSubscription');
    expect(sub?.inputs.filter).toMatchObject({
      includedEventTypes: ['Microsoft.Storage.BlobCreated'],
      subjectBeginsWith: '/blobServices/default/containers/sources/blobs/scenes/',
      subjectEndsWith: '.json',
    });
    expect(settings(run)).toMatchObject({ [ENV.sourceSuffix]: '.json', [ENV.stacAssets]: '{"B04":"red","B08":"nir"}' });
  });
});
