import { describe, expect, it } from 'vitest';
import {
  azureMonitorSampling,
  AZURE_MONITOR_EXPORTER as FUNCTIONS_AZURE_MONITOR_EXPORTER,
} from '../../functions/azure/azure-monitor-env.js';
import { AZURE_MONITOR_EXPORTER } from '../../infra/azure/telemetry.js';
import { AZURE_ROLES, CONTAINERS, DEPLOYMENTS_CONTAINER, hostTimeSpan, LEASE_STOLEN_TRACE_TERMS } from '../../infra/azure/tiling-stack.js';
import { AZURE_QUEUES, AZURE_TRIGGER_CONNECTION, azurePoisonQueue } from '../../infra/common/packaging.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { CEILINGS, type Platform } from '../../shared/domain/ceilings.js';
import {
  AREAS,
  type Area,
  type AreaName,
  accessOf,
  areaPrefix,
  DEFAULT_SOURCE_PREFIX,
  DEPLOYED_ROLES,
  FUNCTION_ROLES,
  type FunctionRole,
  outputKeys,
  type StoreName,
  SWEEP_STATE_KEY,
  sceneLifecycleKeys,
  streamKeys,
} from '../../shared/domain/key-layout.js';
import { AZURE_CLIENT_ID_SETTINGS, ENV, parseRuntimeConfig } from '../../shared/domain/runtime-config.js';
import { type AbacRequest, AZURE_BUILT_IN_ROLES, evaluateAbacCondition, parseAbacCondition } from '../support/iam/grants-azure.js';
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
/** The Functions host's identity (host storage, package, queue triggers). */
const identity = (run: StackRun) => run.one('azure-native:managedidentity:UserAssignedIdentity', '-identity');
/** The identity a function role's code runs as. */
const roleIdentity = (run: StackRun, role: FunctionRole) =>
  run.one('azure-native:managedidentity:UserAssignedIdentity', `-identity-${role}`);
/** Every role assignment the app needs at its first start: all but verify's, which no app function uses. */
const appAssignments = (run: StackRun) =>
  run
    .ofType('azure-native:authorization:RoleAssignment')
    .filter((a) => a.inputs.principalId !== roleIdentity(run, 'verify').state.principalId);
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
    // The host's identity first, then one per deployed function (each function's code picks its own by client id).
    expect(app(run).inputs).toMatchObject({
      kind: 'functionapp,linux',
      identity: {
        type: 'UserAssigned',
        userAssignedIdentities: [identity(run).state.id, ...DEPLOYED_ROLES.map((r) => roleIdentity(run, r).state.id)],
      },
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
    // Scene, tile, ingest and stream: the mosaic and the reconcile are timer sweeps, with no queue of their own.
    expect(names).toHaveLength(8);
    expect(settings(run)[ENV.deadLetterQueue]).toBe(azurePoisonQueue(AZURE_QUEUES.tile));
    // The ingest function (same app, same settings) listens on its own queue, named in the settings for the CLI.
    expect(AZURE_QUEUES.ingest).toBe('tessera-ingest');
    expect(settings(run)[ENV.ingestQueue]).toBe(AZURE_QUEUES.ingest);
  });

  it("grants the host's identity Blob Data Owner on the host storage only, and the trigger queues; each function's identity only its own queue and table roles", () => {
    const assignments = run.ofType('azure-native:authorization:RoleAssignment');
    const role = (id: string) => `/subscriptions/${AZURE_SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/${id}`;
    for (const a of assignments) expect(a.inputs.principalType, a.name).toBe('ServicePrincipal');
    const dataId = String(data(run).state.id);
    const queueScope = (q: string) => `${dataId}/queueServices/default/queues/${q}`;
    const tableScope = (t: string) => `${dataId}/tableServices/default/tables/${t}`;
    const container = (c: string) => `${dataId}/blobServices/default/containers/${c}`;
    /** An identity's assignments outside the data containers, as `role id @ scope`, sorted. */
    const nonBlob = (principalId: unknown) =>
      assignments
        .filter((a) => a.inputs.principalId === principalId && !String(a.inputs.scope).includes('/blobServices/'))
        .map((a) => `${a.inputs.roleDefinitionId} @ ${a.inputs.scope}`)
        .sort();
    const at = (roleId: string, scope: unknown) => `${role(roleId)} @ ${scope}`;
    // The host: its own account, the trigger queues it receives from and deletes, the poison queues it moves to.
    expect(nonBlob(identity(run).state.principalId)).toEqual(
      [
        at(AZURE_ROLES.storageBlobDataOwner, host(run).state.id),
        at(AZURE_ROLES.storageQueueDataContributor, host(run).state.id),
        at(AZURE_ROLES.storageTableDataContributor, host(run).state.id),
        ...Object.values(AZURE_QUEUES).flatMap((q) => [
          at(AZURE_ROLES.storageQueueDataContributor, queueScope(q)),
          at(AZURE_ROLES.storageQueueDataMessageSender, queueScope(azurePoisonQueue(q))),
        ]),
      ].sort(),
    );
    // ... and nothing in the data containers: the functions' code never runs as it.
    expect(
      assignments.filter(
        (a) => a.inputs.principalId === identity(run).state.principalId && String(a.inputs.scope).includes('/blobServices/'),
      ),
    ).toEqual([]);
    const sender = AZURE_ROLES.storageQueueDataMessageSender;
    const expected: Record<FunctionRole, string[]> = {
      // Fan-out sends tile jobs; a scene event no retry cures is settled in the scene queue's poison twin.
      scene: [at(sender, queueScope(AZURE_QUEUES.tile)), at(sender, queueScope(azurePoisonQueue(AZURE_QUEUES.scene)))],
      // Claims (and the cleanup timer, which runs as tile), fan-out chunks, poison.
      tile: [
        at(AZURE_ROLES.storageTableDataContributor, tableScope('tesseraclaims')),
        at(sender, queueScope(AZURE_QUEUES.tile)),
        at(sender, queueScope(azurePoisonQueue(AZURE_QUEUES.tile))),
      ],
      mosaic: [],
      ingest: [
        at(AZURE_ROLES.storageTableDataContributor, tableScope('tesseramanifest')),
        at(sender, queueScope(azurePoisonQueue(AZURE_QUEUES.ingest))),
      ],
      // Reads the manifest only.
      reconcile: [at(AZURE_ROLES.storageTableDataReader, tableScope('tesseramanifest'))],
      // Claims of its batches, poison of its queue (docs/feature-batches.md).
      stream: [
        at(AZURE_ROLES.storageTableDataContributor, tableScope('tesseraclaims')),
        at(sender, queueScope(azurePoisonQueue(AZURE_QUEUES.stream))),
      ],
      verify: [
        at(AZURE_ROLES.storageTableDataContributor, tableScope('tesseraclaims')),
        at(AZURE_ROLES.storageQueueDataContributor, queueScope(AZURE_QUEUES.scene)),
        at(AZURE_ROLES.storageQueueDataContributor, queueScope(AZURE_QUEUES.tile)),
        at(AZURE_ROLES.storageQueueDataContributor, queueScope(azurePoisonQueue(AZURE_QUEUES.tile))),
      ],
    };
    for (const r of FUNCTION_ROLES) expect(nonBlob(roleIdentity(run, r).state.principalId), r).toEqual(expected[r].sort());
    // Blob roles only on the two data containers (the layout checks below say where inside them).
    for (const a of assignments.filter((x) => String(x.inputs.scope).includes('/blobServices/')))
      expect([container(CONTAINERS.sources), container(CONTAINERS.outputs)], a.name).toContain(a.inputs.scope);
    expect(run.one('azure-native:storage:Table', '-manifest').inputs).toMatchObject({ tableName: 'tesseramanifest' });
    expect(settings(run)[ENV.manifestTable]).toBe('tesseramanifest');
    // Nothing on the data account as a whole.
    for (const a of assignments) expect(a.inputs.scope, a.name).not.toBe(dataId);
    // No connection string or key in the settings: identity-based connections only.
    const s = settings(run);
    for (const [k, v] of Object.entries(s)) expect(`${k}=${v}`).not.toMatch(/AccountKey=|SharedAccessSignature|sig=/);
    expect(s[`${AZURE_TRIGGER_CONNECTION}__queueServiceUri`]).toMatch(/^https:\/\/[a-z0-9]+\.queue\.core\.windows\.net\/$/);
  });

  it('routes BlobCreated events by subject filter to the scene queue, and those under streams/ to the stream queue, dead-lettering what it cannot deliver', () => {
    const account = data(run);
    const topic = run.ofType('azure-native:eventgrid:SystemTopic')[0];
    expect(topic?.inputs).toMatchObject({ source: account?.state.id, topicType: 'Microsoft.Storage.StorageAccounts' });
    const subs = run.ofType('azure-native:eventgrid:SystemTopicEventSubscription');
    // A tile write fires nothing: the mosaic is a timer-triggered sweep, as on AWS and GCP.
    expect(subs.map((x) => x.name).sort()).toEqual(['tessera-scene-events', 'tessera-stream-events']);
    const expected = {
      scene: { queue: AZURE_QUEUES.scene, begins: '/blobServices/default/containers/sources/blobs/scenes/', ends: '.tif' },
      // Every batch object under streams/ (docs/feature-batches.md), whatever its name ends in.
      stream: {
        queue: AZURE_QUEUES.stream,
        begins: `/blobServices/default/containers/sources/blobs/${streamKeys.root()}`,
        ends: undefined,
      },
    };
    for (const [role, want] of Object.entries(expected)) {
      const sub = subs.find((x) => x.name.endsWith(`-${role}-events`)) as RecordedResource;
      expect(sub.inputs.destination).toMatchObject({ endpointType: 'StorageQueue', resourceId: account?.state.id, queueName: want.queue });
      expect(sub.inputs.filter, role).toMatchObject({
        includedEventTypes: ['Microsoft.Storage.BlobCreated'],
        subjectBeginsWith: want.begins,
        ...(want.ends === undefined ? {} : { subjectEndsWith: want.ends }),
      });
      if (want.ends === undefined) expect((sub.inputs.filter as { subjectEndsWith?: string }).subjectEndsWith, role).toBeUndefined();
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
    });
    // Each function's clients authenticate as its own role's identity, named by its own setting (functions/azure/compose.ts).
    for (const role of DEPLOYED_ROLES) expect(s[AZURE_CLIENT_ID_SETTINGS[role]], role).toBe(roleIdentity(run, role).state.clientId);
    // Nothing names a default identity a client without a role could fall back to.
    expect(s.AZURE_CLIENT_ID).toBeUndefined();
  });

  it("creates the app only after every role of its identities, so its first start can read its package and host storage, and each function's first call finds its grants", () => {
    const assignments = appAssignments(run);
    expect(assignments.length).toBeGreaterThan(20);
    expect(missingBefore(run, app(run), assignments)).toEqual([]);
    expect(missingBefore(run, app(run), [identity(run)])).toEqual([]);
    // verify's identity is not the app's, and the app waits for none of its grants.
    expect(missingBefore(run, app(run), [roleIdentity(run, 'verify')])).toEqual(['tessera-identity-verify']);
  });

  it("lets a web map on tessera:outputCorsOrigins read the outputs by ranges (tessera view's page, issue 26): a blob service CORS rule, none by default", async () => {
    expect(run.one('azure-native:storage:BlobServiceProperties', '-blob-service').inputs.cors).toBeUndefined();
    const withCors = await runStack(STACK, { ...BASE, 'tessera:outputCorsOrigins': '*' });
    const props = withCors.one('azure-native:storage:BlobServiceProperties', '-blob-service');
    // The data account holds the outputs container (and the sources): CORS is its blob service's, one rule.
    expect(props.inputs.accountName).toBe(data(withCors).state.name);
    const [rule, ...others] = (props.inputs.cors as { corsRules: Record<string, unknown>[] }).corsRules;
    expect(others).toEqual([]);
    expect(rule).toMatchObject({ allowedOrigins: ['*'], allowedMethods: ['GET', 'HEAD'] });
    expect(rule?.allowedHeaders).toContain('Range');
    expect(rule?.exposedHeaders).toEqual(expect.arrayContaining(['Content-Range', 'ETag', 'Accept-Ranges', 'Content-Length']));
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
    expect(missingBefore(flex, app(flex), appAssignments(flex))).toEqual([]);
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
  // Recognisable, so that a search of every resource finds any copy: the whole URL or its password alone.
  const PASSWORD = 'pw-7f3a9c1e-sink';
  const URL = `postgis://tessera:${PASSWORD}@db.example:5432/gis`;
  let set: StackRun;
  const vaultOf = (run: StackRun) => run.one('azure-native:keyvault:Vault', '-sink');
  const secretOf = (run: StackRun) => run.one('azure-native:keyvault:Secret', '-sink');
  const secretUris = (run: StackRun) => secretOf(run).state.properties as { secretUri: string; secretUriWithVersion: string };

  it('keeps the URL in one resource of the stack: the Key Vault secret, as a Pulumi secret', async () => {
    set = await runStack(STACK, { ...BASE, 'tessera:featureSinkUrl': URL });
    const holders = set.resources.filter((r) => JSON.stringify([r.inputs, r.state]).includes(PASSWORD));
    expect(holders.map((r) => r.type)).toEqual(['azure-native:keyvault:Secret']);
    const properties = reveal(secretOf(set).inputs.properties);
    expect(properties.secret).toBe(true);
    expect(reveal((properties.value as { value: unknown }).value).value).toBe(URL);
    expect(secretOf(set).inputs.vaultName).toBe(vaultOf(set).state.name);
    expect(JSON.stringify(set.outputs)).not.toContain(PASSWORD);
  });

  it('puts a Key Vault reference in the app settings, pinned to the version the stack wrote, resolved as the tile identity', () => {
    expect(JSON.stringify(app(set).inputs)).not.toContain(PASSWORD);
    expect(settings(set)[ENV.featureSink]).toBe(`@Microsoft.KeyVault(SecretUri=${secretUris(set).secretUriWithVersion})`);
    expect(secretUris(set).secretUriWithVersion).not.toBe(secretUris(set).secretUri);
    expect(app(set).inputs.keyVaultReferenceIdentity).toBe(roleIdentity(set, 'tile').state.id);
    // Nothing left in the settings needs hiding.
    expect(reveal(app(set).inputs.siteConfig).secret).toBe(false);
    // A setting the platform could not resolve stays the reference itself: every function then says what to fix.
    expect(() => parseRuntimeConfig({ ...settings(set), [ENV.platform]: 'azure-consumption' })).toThrow(/unresolved Key Vault reference/);
  });

  it('keeps the vault RBAC-only, soft-deleting, and closed to deployments, disk encryption, templates and trusted services', () => {
    expect(vaultOf(set).inputs.properties).toMatchObject({
      enableRbacAuthorization: true,
      enableSoftDelete: true,
      softDeleteRetentionInDays: 90,
      enabledForDeployment: false,
      enabledForDiskEncryption: false,
      enabledForTemplateDeployment: false,
      networkAcls: { bypass: 'None' },
    });
    expect((vaultOf(set).inputs.properties as { accessPolicies?: unknown }).accessPolicies).toBeUndefined();
  });

  it('lets the tile identity alone read the secret: Key Vault Secrets User on that one secret, before the app starts', () => {
    const secretId = String(secretOf(set).state.id);
    // Every assignment whose scope holds the secret: the secret, its vault, the resource group, the subscription.
    const reaching = set
      .ofType('azure-native:authorization:RoleAssignment')
      .filter((a) => secretId === String(a.inputs.scope) || secretId.startsWith(`${String(a.inputs.scope)}/`));
    expect(reaching.map((a) => [a.inputs.principalId, a.inputs.roleDefinitionId, a.inputs.scope])).toEqual([
      [
        roleIdentity(set, 'tile').state.principalId,
        `/subscriptions/${AZURE_SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/${AZURE_ROLES.keyVaultSecretsUser}`,
        secretId,
      ],
    ]);
    expect(missingBefore(set, app(set), reaching)).toEqual([]);
  });

  it('declares no vault without the key', async () => {
    const bare = await runStack(STACK, BASE);
    expect(bare.resources.filter((r) => r.type.startsWith('azure-native:keyvault:'))).toEqual([]);
    expect(settings(bare)[ENV.featureSink]).toBeUndefined();
  });
});

describe('the Azure stack with tessera:stacAssets (multi-file scenes start on their STAC Item, docs/multi-file-scenes.md)', () => {
  it('routes BlobCreated events of *.json items to the scene queue, and tells the app which assets are which band', async () => {
    const run = await runStack(STACK, { ...BASE, 'tessera:stacAssets': '{"B04":"red","B08":"nir"}' });
    const sub = run.ofType('azure-native:eventgrid:SystemTopicEventSubscription').find((x) => x.name.endsWith('-scene-events'));
    expect(sub?.inputs.filter).toMatchObject({
      includedEventTypes: ['Microsoft.Storage.BlobCreated'],
      subjectBeginsWith: '/blobServices/default/containers/sources/blobs/scenes/',
      subjectEndsWith: '.json',
    });
    expect(settings(run)).toMatchObject({ [ENV.sourceSuffix]: '.json', [ENV.stacAssets]: '{"B04":"red","B08":"nir"}' });
  });
});

/**
 * Azure's own semantics: the built-in roles' data actions and the condition evaluator are the enforced-IAM grant
 * model's (test/support/iam/grants-azure.ts, written from Microsoft's documentation, not from infra/). Each blob
 * request Tessera's code makes is the action (and sub-operation) Azure authorizes it as. A create-only Put Blob and
 * an overwrite are both `blobs/write`: no request attribute tells them apart, so on Azure a role that creates in an
 * area can also overwrite there.
 */
const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
type BlobRequest = AbacRequest;
const readOf = (path: string): BlobRequest => ({ action: `${BLOBS}/read`, attributes: { blobPath: path } });
const listOf = (prefix: string | undefined): BlobRequest => ({
  action: `${BLOBS}/read`,
  subOperation: 'Blob.List',
  attributes: prefix === undefined ? {} : { listPrefix: prefix },
});
const writeOf = (path: string): BlobRequest => ({ action: `${BLOBS}/write`, attributes: { blobPath: path } });
const deleteOf = (path: string): BlobRequest => ({ action: `${BLOBS}/delete`, attributes: { blobPath: path } });
const conditionAllows = (condition: string, request: BlobRequest) => evaluateAbacCondition(parseAbacCondition(condition), request);
/** A role's data actions hold the request's: exactly, or under a `/*` wildcard. */
const holds = (roleId: string, action: string): boolean => {
  const role = AZURE_BUILT_IN_ROLES[roleId];
  if (role === undefined) throw new Error(`role ${roleId} is not in the grant model's table of built-in roles`);
  const matches = (p: string) => p === action || (p.endsWith('/*') && action.startsWith(p.slice(0, -1)));
  return role.dataActions.some(matches) && !(role.notDataActions ?? []).some(matches);
};

/** Whether the identity may make the request in the container: some assignment over it holds the action, its condition allowing. */
function allowed(run: StackRun, principalId: unknown, containerId: string, request: BlobRequest): boolean {
  return run
    .ofType('azure-native:authorization:RoleAssignment')
    .filter((a) => a.inputs.principalId === principalId && containerId.startsWith(String(a.inputs.scope)))
    .some((a) => {
      const roleId = String(a.inputs.roleDefinitionId).split('/').at(-1) as string;
      if (!holds(roleId, request.action)) return false;
      const condition = a.inputs.condition as string | undefined;
      if (condition !== undefined) expect(a.inputs.conditionVersion, a.name).toBe('2.0');
      return condition === undefined || conditionAllows(condition, request);
    });
}

const keyIn = (area: AreaName, sourcePrefix: string): string =>
  (AREAS[area] as Area).exact === true ? areaPrefix(area, sourcePrefix) : `${areaPrefix(area, sourcePrefix)}tessera-sample/k.bin`;

describe('the Azure blob grants: every one derived from the key layout (shared/domain/key-layout.ts ROLE_ACCESS)', () => {
  let run: StackRun;
  let containerOf: Record<StoreName, string>;
  const principal = (r: StackRun, role: FunctionRole) => roleIdentity(r, role).state.principalId;

  it('runs the example stack', async () => {
    run = await runStack(STACK, BASE);
    const dataId = String(data(run).state.id);
    containerOf = {
      sources: `${dataId}/blobServices/default/containers/${CONTAINERS.sources}`,
      outputs: `${dataId}/blobServices/default/containers/${CONTAINERS.outputs}`,
    };
  });

  it('lets each role read, list, write and delete exactly where the layout says, and nowhere outside its areas', () => {
    for (const role of FUNCTION_ROLES) {
      for (const store of ['sources', 'outputs'] as const) {
        const can = (request: BlobRequest) => allowed(run, principal(run, role), containerOf[store], request);
        for (const area of (Object.keys(AREAS) as AreaName[]).filter((a) => AREAS[a].store === store)) {
          const access = accessOf(role, area);
          const key = keyIn(area, DEFAULT_SOURCE_PREFIX);
          const what = `${role} on ${area} (${key})`;
          // A pin is a snapshot, which Azure authorizes as a write of the base blob (infra/azure/roles.ts).
          const pins = access.includes('pin');
          expect(can(readOf(key)), `${what}: read`).toBe(access.includes('read'));
          expect(can(writeOf(key)), `${what}: write`).toBe(access.includes('create') || access.includes('replace') || pins);
          expect(can(deleteOf(key)), `${what}: delete`).toBe(access.includes('delete'));
          if ((AREAS[area] as Area).exact !== true)
            expect(can(listOf(areaPrefix(area, DEFAULT_SOURCE_PREFIX))), `${what}: list`).toBe(access.includes('list'));
        }
        // Outside every area, and a listing of the whole container: nothing.
        for (const request of [
          readOf('elsewhere/k.bin'),
          writeOf('elsewhere/k.bin'),
          deleteOf('elsewhere/k.bin'),
          listOf(undefined),
          listOf(''),
        ])
          expect(can(request), `${role} ${store} ${JSON.stringify(request)}`).toBe(false);
      }
    }
  });

  it('grants the accesses the issue found missing (issue 24), and no longer any write the layout does not give', () => {
    const scene = 'a'.repeat(64);
    const outputs = (role: FunctionRole, request: BlobRequest) => allowed(run, principal(run, role), containerOf.outputs, request);
    expect(outputs('scene', writeOf(sceneLifecycleKeys.indexEntry('2026120104', scene)))).toBe(true);
    expect(outputs('tile', writeOf(sceneLifecycleKeys.chunkDone(scene, 0, 100)))).toBe(true);
    expect(outputs('tile', writeOf(sceneLifecycleKeys.superseded(scene)))).toBe(true);
    expect(outputs('mosaic', writeOf(SWEEP_STATE_KEY))).toBe(true);
    expect(outputs('mosaic', listOf(sceneLifecycleKeys.indexRoot()))).toBe(true);
    // Writes a container-wide Contributor used to allow.
    expect(outputs('mosaic', writeOf(outputKeys.tile(scene, { row: 0, col: 0 })))).toBe(false);
    expect(outputs('scene', writeOf(outputKeys.mosaic(scene)))).toBe(false);
    expect(outputs('tile', deleteOf(outputKeys.tile(scene, { row: 0, col: 0 })))).toBe(false);
  });

  it('holds every blob role of a function to its container with a path condition: no container-wide grant, no Owner', () => {
    const blobRoles = run
      .ofType('azure-native:authorization:RoleAssignment')
      .filter(
        (a) => FUNCTION_ROLES.some((r) => a.inputs.principalId === principal(run, r)) && String(a.inputs.scope).includes('/blobServices/'),
      );
    expect(blobRoles.length).toBeGreaterThanOrEqual(FUNCTION_ROLES.length);
    for (const a of blobRoles) {
      expect(Object.values(containerOf), a.name).toContain(a.inputs.scope);
      expect([AZURE_ROLES.storageBlobDataReader, AZURE_ROLES.storageBlobDataContributor], a.name).toContain(
        String(a.inputs.roleDefinitionId).split('/').at(-1),
      );
      expect(a.inputs.conditionVersion, a.name).toBe('2.0');
      expect(String(a.inputs.condition), a.name).toContain(':path] String');
    }
    // Reader where a role only reads (reconcile); mosaic, which never touches the sources, has no assignment there.
    const rolesOf = (role: FunctionRole) =>
      blobRoles
        .filter((a) => a.inputs.principalId === principal(run, role))
        .map((a) => String(a.inputs.roleDefinitionId).split('/').at(-1));
    expect(rolesOf('reconcile')).toEqual([AZURE_ROLES.storageBlobDataReader]);
    expect(rolesOf('mosaic')).toEqual([AZURE_ROLES.storageBlobDataContributor]);
  });

  it('follows tessera:sourcePrefix: the source grants move with it', async () => {
    const moved = await runStack(STACK, { ...BASE, 'tessera:sourcePrefix': 'incoming/' });
    const sources = `${String(data(moved).state.id)}/blobServices/default/containers/${CONTAINERS.sources}`;
    const can = (role: FunctionRole, request: BlobRequest) => allowed(moved, principal(moved, role), sources, request);
    expect(can('ingest', writeOf(keyIn('source', 'incoming/')))).toBe(true);
    expect(can('tile', readOf(keyIn('source', 'incoming/')))).toBe(true);
    for (const role of FUNCTION_ROLES) expect(can(role, readOf(keyIn('source', DEFAULT_SOURCE_PREFIX))), role).toBe(false);
  });

  it('gives verify an identity of its own, outside the app, exported for a CI workload to sign in as', () => {
    const verify = roleIdentity(run, 'verify');
    expect((app(run).inputs.identity as { userAssignedIdentities: unknown[] }).userAssignedIdentities).not.toContain(verify.state.id);
    expect(run.outputs.verifyIdentityClientId).toBe(verify.state.clientId);
  });

  it('checks conditions the way Azure does: the evaluator denies what a condition leaves out (so the checks above can fail)', () => {
    const c = `((!(ActionMatches{'${BLOBS}/write'})) OR (@Resource[${BLOBS}:path] StringStartsWith 'tiles/'))`;
    expect(conditionAllows(c, writeOf('tiles/x'))).toBe(true);
    expect(conditionAllows(c, writeOf('scenes/x'))).toBe(false);
    expect(conditionAllows(c, readOf('scenes/x'))).toBe(true);
    // A path comparison on a listing (no path) is unknown, which fails the condition unless the rest decides.
    expect(conditionAllows(`@Resource[${BLOBS}:path] StringStartsWith 'tiles/'`, listOf('tiles/'))).toBe(false);
    expect(() => conditionAllows(`@Resource[${BLOBS}:tags] StringEquals 'x'`, readOf('x'))).toThrow(/does not evaluate/);
  });
});

describe('the Azure stack with tessera:telemetry (OpenTelemetry export, docs/telemetry.md)', () => {
  const telemetrySettings = (run: StackRun) => Object.fromEntries(Object.entries(settings(run)).filter(([k]) => k.startsWith('OTEL_')));
  const names = (run: StackRun) =>
    run.resources
      .filter((r) => r.custom)
      .map((r) => `${r.type} ${r.name}`)
      .sort();
  const HEADER_KEY = 'key-5be1d0c7-otlp';
  let off: StackRun;

  it('is off unless set: no OTEL_* setting, no vault, no role assignment for it, the same stack as `off`', async () => {
    off = await runStack(STACK, BASE);
    const explicit = await runStack(STACK, { ...BASE, 'tessera:telemetry': 'off' });
    for (const run of [off, explicit]) {
      expect(telemetrySettings(run)).toEqual({});
      expect(run.resources.filter((r) => r.type.startsWith('azure-native:keyvault:'))).toEqual([]);
    }
    expect(names(explicit)).toEqual(names(off));
    expect(app(explicit).inputs).toEqual(app(off).inputs);
    // Application Insights is there either way: the app's logs and the lease-stolen alert use it.
    expect(settings(off).APPLICATIONINSIGHTS_CONNECTION_STRING).toBeDefined();
  });

  it('otlp: the endpoint in the app settings, its headers only in a Key Vault, as a reference resolved by the tile identity, its one reader', async () => {
    const run = await runStack(STACK, {
      ...BASE,
      'tessera:telemetry': '{"exporter":"otlp","endpoint":"https://collector.example.com:4318","sampling":0.2}',
      'tessera:telemetryHeaders': `x-api-key=${HEADER_KEY}`,
    });
    const vault = run.one('azure-native:keyvault:Vault', '-otel');
    const secret = run.one('azure-native:keyvault:Secret', '-otel');
    const holders = run.resources.filter((r) => JSON.stringify([r.inputs, r.state]).includes(HEADER_KEY));
    expect(holders.map((r) => r.type)).toEqual(['azure-native:keyvault:Secret']);
    const properties = reveal(secret.inputs.properties);
    expect(properties.secret).toBe(true);
    expect(reveal((properties.value as { value: unknown }).value).value).toBe(`x-api-key=${HEADER_KEY}`);
    expect(vault.inputs.properties).toMatchObject({
      enableRbacAuthorization: true,
      enableSoftDelete: true,
      networkAcls: { bypass: 'None' },
    });
    const uri = (secret.state.properties as { secretUriWithVersion: string }).secretUriWithVersion;
    expect(telemetrySettings(run)).toEqual({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector.example.com:4318',
      OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${STACK}`,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.2',
      OTEL_EXPORTER_OTLP_HEADERS: `@Microsoft.KeyVault(SecretUri=${uri})`,
    });
    expect(app(run).inputs.keyVaultReferenceIdentity).toBe(roleIdentity(run, 'tile').state.id);
    const secretId = String(secret.state.id);
    const reaching = run
      .ofType('azure-native:authorization:RoleAssignment')
      .filter((a) => secretId === String(a.inputs.scope) || secretId.startsWith(`${String(a.inputs.scope)}/`));
    expect(reaching.map((a) => [a.inputs.principalId, a.inputs.roleDefinitionId])).toEqual([
      [
        roleIdentity(run, 'tile').state.principalId,
        `/subscriptions/${AZURE_SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/${AZURE_ROLES.keyVaultSecretsUser}`,
      ],
    ]);
    expect(missingBefore(run, app(run), reaching)).toEqual([]);
    expect(names(run).filter((n) => !names(off).includes(n))).toEqual(
      [vault, secret, ...reaching].map((r) => `${r.type} ${r.name}`).sort(),
    );
    // Without headers: the settings, and nothing declared.
    const bare = await runStack(STACK, { ...BASE, 'tessera:telemetry': '{"exporter":"otlp","endpoint":"http://10.0.0.4:4318"}' });
    expect(names(bare)).toEqual(names(off));
    expect(telemetrySettings(bare)).toEqual({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://10.0.0.4:4318',
      OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${STACK}`,
    });
  });

  it("cloud: Azure Monitor, to the stack's workspace-based Application Insights component: the exporter settings and nothing declared or granted", async () => {
    const run = await runStack(STACK, { ...BASE, 'tessera:telemetry': 'cloud' });
    // The component every stack has (the host's logs, the lease-stolen alert), on the stack's Log Analytics workspace.
    const insights = run.one('azure-native:applicationinsights:Component', '-insights');
    expect(insights.inputs).toMatchObject({
      ingestionMode: 'LogAnalytics',
      workspaceResourceId: run.one('azure-native:operationalinsights:Workspace', '-logs').state.id,
    });
    expect(telemetrySettings(run)).toEqual({
      OTEL_TRACES_EXPORTER: 'azure_monitor',
      OTEL_METRICS_EXPORTER: 'azure_monitor',
      OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${STACK}`,
    });
    // The functions' distro reads the same setting the host does: that component's connection string, a plain
    // setting (its ikey is an identifier, not a secret: docs/telemetry.md), and no Key Vault reference.
    expect(settings(run).APPLICATIONINSIGHTS_CONNECTION_STRING).toBe(String(insights.state.connectionString));
    expect(run.resources.filter((r) => r.type.startsWith('azure-native:keyvault:'))).toEqual([]);
    // Nothing else changes: the same resources, the same role assignments, every other setting as an `off` stack's.
    expect(names(run)).toEqual(names(off));
    const grants = (r: StackRun) => r.ofType('azure-native:authorization:RoleAssignment').map((a) => a.inputs);
    expect(grants(run)).toEqual(grants(off));
    const others = (r: StackRun) => Object.fromEntries(Object.entries(settings(r)).filter(([k]) => !k.startsWith('OTEL_')));
    expect(others(run)).toEqual(others(off));
    // The name the functions read (functions/azure/azure-monitor-env.ts) is the one infra writes.
    expect(AZURE_MONITOR_EXPORTER).toBe(FUNCTIONS_AZURE_MONITOR_EXPORTER);
  });

  it("cloud with sampling: Application Insights' own sampler (whole percent), and a share below 1 % refused", async () => {
    const run = await runStack(STACK, { ...BASE, 'tessera:telemetry': '{"exporter":"cloud","sampling":0.25}' });
    expect(telemetrySettings(run)).toMatchObject({ OTEL_TRACES_SAMPLER: 'microsoft.fixed_percentage', OTEL_TRACES_SAMPLER_ARG: '0.25' });
    expect(azureMonitorSampling(settings(run))).toBe(0.25);
    const refused = await refusal(STACK, { ...BASE, 'tessera:telemetry': '{"exporter":"cloud","sampling":0.004}' });
    expect(refused).toContain('samples in whole percent');
    expect(refused).toContain('at least 0.01');
    // The ADOT layer is AWS's: refused here as before.
    const layer = await refusal(STACK, {
      ...BASE,
      'tessera:telemetry': '{"exporter":"cloud","collectorLayerArn":"arn:aws:lambda:eu-west-1:901920570463:layer:x:1"}',
    });
    expect(layer).toContain('collectorLayerArn is for AWS stacks only');
  });
});
