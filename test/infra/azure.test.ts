import { describe, expect, it } from 'vitest';
import { AZURE_ROLES, CONTAINERS, hostTimeSpan } from '../../infra/azure/tiling-stack.js';
import { AZURE_QUEUES, AZURE_TRIGGER_CONNECTION, azurePoisonQueue } from '../../infra/common/packaging.js';
import { CEILINGS, type Platform } from '../../shared/domain/ceilings.js';
import { ENV, parseRuntimeConfig } from '../../shared/domain/runtime-config.js';
import { AZURE_SUBSCRIPTION, declaredUrns, type RecordedResource, refusal, runStack, type StackRun } from './harness.js';
import { loadStackFile } from './stack-files.js';

/**
 * Policies of the Azure stack, asserted on what the program declares under
 * Pulumi mocks. Only azure-native submodules are loaded in this file.
 */

const STACK = 'azure-westeurope';
const BASE = { 'tessera:cloud': 'azure', 'tessera:region': 'westeurope', 'azure-native:location': 'westeurope' };

const app = (run: StackRun) => run.ofType('azure-native:web:WebApp')[0] as RecordedResource;
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
    expect(accounts).toHaveLength(1);
    expect(accounts[0]?.inputs).toMatchObject({ enableHttpsTrafficOnly: true, minimumTlsVersion: 'TLS1_2', allowBlobPublicAccess: false });
    expect(String(accounts[0]?.inputs.accountName)).toMatch(/^[a-z0-9]{3,24}$/);
    const containers = run.ofType('azure-native:storage:BlobContainer');
    expect(containers.map((c) => c.inputs.containerName).sort()).toEqual(Object.values(CONTAINERS).sort());
    for (const c of containers) expect(c.inputs.publicAccess, c.name).toBe('None');
    expect(app(run).inputs.httpsOnly).toBe(true);
  });

  it('runs the function app on Linux, Node 22, Consumption, with the package by URL fetched with its own identity', () => {
    const plan = run.ofType('azure-native:web:AppServicePlan')[0];
    expect(plan?.inputs).toMatchObject({ reserved: true, sku: { name: 'Y1', tier: 'Dynamic' } });
    expect(app(run).inputs).toMatchObject({ kind: 'functionapp,linux', identity: { type: 'SystemAssigned' } });
    expect((app(run).inputs.siteConfig as { linuxFxVersion: string }).linuxFxVersion).toBe('Node|22');
    const s = settings(run);
    expect(s).toMatchObject({
      FUNCTIONS_EXTENSION_VERSION: '~4',
      FUNCTIONS_WORKER_RUNTIME: 'node',
      WEBSITE_RUN_FROM_PACKAGE_BLOB_MI_RESOURCE_ID: 'SystemAssigned',
    });
    const blob = run.ofType('azure-native:storage:Blob')[0];
    expect(s.WEBSITE_RUN_FROM_PACKAGE).toMatch(
      new RegExp(`^https://[a-z0-9]+\\.blob\\.core\\.windows\\.net/deployments/${blob?.inputs.blobName}$`),
    );
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
    expect(names).toHaveLength(6);
    expect(settings(run)[ENV.deadLetterQueue]).toBe(azurePoisonQueue(AZURE_QUEUES.tile));
  });

  it('grants the app identity data-plane roles on this storage account only', () => {
    const account = run.ofType('azure-native:storage:StorageAccount')[0];
    const assignments = run.ofType('azure-native:authorization:RoleAssignment');
    expect(assignments).toHaveLength(3);
    for (const a of assignments) {
      expect(a.inputs.scope).toBe(account?.state.id);
      expect(a.inputs.principalId).toBe((app(run).state.identity as { principalId: string }).principalId);
      expect(a.inputs.principalType).toBe('ServicePrincipal');
    }
    expect(assignments.map((a) => String(a.inputs.roleDefinitionId)).sort()).toEqual(
      Object.values(AZURE_ROLES)
        .map((id) => `/subscriptions/${AZURE_SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/${id}`)
        .sort(),
    );
    // No connection string or key in the settings: identity-based connections only.
    const s = settings(run);
    for (const [k, v] of Object.entries(s)) expect(`${k}=${v}`).not.toMatch(/AccountKey=|SharedAccessSignature|sig=/);
    expect(s[`${AZURE_TRIGGER_CONNECTION}__queueServiceUri`]).toMatch(/^https:\/\/[a-z0-9]+\.queue\.core\.windows\.net\/$/);
  });

  it('routes BlobCreated events by subject filter to the scene and mosaic queues, dead-lettering what it cannot deliver', () => {
    const account = run.ofType('azure-native:storage:StorageAccount')[0];
    const topic = run.ofType('azure-native:eventgrid:SystemTopic')[0];
    expect(topic?.inputs).toMatchObject({ source: account?.state.id, topicType: 'Microsoft.Storage.StorageAccounts' });
    const subs = run.ofType('azure-native:eventgrid:SystemTopicEventSubscription');
    expect(subs).toHaveLength(2);
    const expected = {
      scene: { queue: AZURE_QUEUES.scene, begins: '/blobServices/default/containers/sources/blobs/scenes/', ends: '.tif' },
      mosaic: { queue: AZURE_QUEUES.mosaic, begins: '/blobServices/default/containers/outputs/blobs/tiles/', ends: '.tif' },
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
      [ENV.azureStorageAccount]: run.ofType('azure-native:storage:StorageAccount')[0]?.state.name,
      [ENV.claimsTable]: run.ofType('azure-native:storage:Table')[0]?.state.name,
      [ENV.sourceBucket]: CONTAINERS.sources,
      [ENV.outputBucket]: CONTAINERS.outputs,
      [ENV.tileQueue]: AZURE_QUEUES.tile,
      AzureWebJobsStorage__accountName: run.ofType('azure-native:storage:StorageAccount')[0]?.state.name,
    });
  });

  it('runs Flex Consumption from a deployment container, with no worker settings Flex refuses', async () => {
    const flex = await runStack(STACK, { ...BASE, 'tessera:azurePlan': 'flex' });
    expect(flex.outputs).toMatchObject({ platform: 'azure-flex', functionTimeoutSeconds: 1800, leaseSeconds: 2100 });
    expect(flex.ofType('azure-native:web:AppServicePlan')[0]?.inputs).toMatchObject({ sku: { name: 'FC1', tier: 'FlexConsumption' } });
    const config = app(flex).inputs.functionAppConfig as Record<string, unknown>;
    expect(config).toMatchObject({
      runtime: { name: 'node', version: '22' },
      scaleAndConcurrency: { instanceMemoryMB: 2048 },
      deployment: { storage: { type: 'blobContainer', authentication: { type: 'SystemAssignedIdentity' } } },
    });
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
