import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as pulumi from '@pulumi/pulumi';
import { ZipFile } from 'yazl';
import { ARCHIVES } from '../../infra/common/packaging.js';

/**
 * Runs the infra program (infra/index.ts) against Pulumi mocks and records
 * every resource it declares, with its resolved inputs, so tests can assert
 * policies ("every queue has a dead-letter path") rather than snapshots.
 *
 * Mocks are installed before the program module is imported (the pulumi
 * testing-unit-ts pattern); the program is a default-exported function, so
 * one test file can run it once per stack configuration.
 */

export const ACCOUNT_ID = '123456789012';
export const GCP_PROJECT_NUMBER = '424242424242';
export const AZURE_SUBSCRIPTION = '00000000-0000-0000-0000-00000000c0de';

export interface RecordedResource {
  readonly type: string;
  readonly name: string;
  readonly custom: boolean;
  readonly id: string;
  /** The inputs the program passed, with Outputs resolved. */
  readonly inputs: Record<string, unknown>;
  /** What the mock returned: inputs plus the provider-computed attributes tests refer to (arn, url, name, ...). */
  readonly state: Record<string, unknown>;
}

export interface StackRun {
  readonly resources: readonly RecordedResource[];
  readonly outputs: Record<string, unknown>;
  /** URNs the mock monitor handed out, which encode each resource's parent chain. */
  readonly urns: readonly string[];
  ofType(type: string): RecordedResource[];
  /** The one resource of a type whose logical name ends with `suffix`; fails if there is not exactly one. */
  one(type: string, suffix: string): RecordedResource;
}

let archiveDir: string | undefined;

/**
 * A folder with a tiny stand-in for every archive build:functions writes, so
 * the infra tests need no build. Shared by the tests of one process.
 */
export async function placeholderArchives(): Promise<string> {
  if (archiveDir) return archiveDir;
  const dir = mkdtempSync(join(tmpdir(), 'tessera-archives-'));
  const paths = [...Object.values(ARCHIVES.aws), ARCHIVES.gcp, ARCHIVES.azure];
  for (const rel of paths) {
    const zip = new ZipFile();
    zip.addBuffer(Buffer.from('export const handler = async () => {};\n'), 'index.mjs', { mtime: new Date('2020-01-01T00:00:00Z') });
    zip.end();
    const chunks: Buffer[] = [];
    for await (const c of zip.outputStream) chunks.push(c as Buffer);
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), Buffer.concat(chunks));
  }
  archiveDir = dir;
  return dir;
}

/** Provider-computed attributes, by resource type: what a real `pulumi up` would fill in. */
function computed(type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> {
  const physical = (inputs.name as string | undefined) ?? `${name}-0a1b2c3`;
  switch (type) {
    case 'aws:s3/bucket:Bucket':
      return { bucket: physical, arn: `arn:aws:s3:::${physical}` };
    case 'aws:sqs/queue:Queue':
      return {
        name: physical,
        arn: `arn:aws:sqs:eu-west-1:${ACCOUNT_ID}:${physical}`,
        url: `https://sqs.eu-west-1.amazonaws.com/${ACCOUNT_ID}/${physical}`,
      };
    case 'aws:dynamodb/table:Table':
      return { name: physical, arn: `arn:aws:dynamodb:eu-west-1:${ACCOUNT_ID}:table/${physical}` };
    case 'aws:lambda/function:Function':
      return { name: physical, arn: `arn:aws:lambda:eu-west-1:${ACCOUNT_ID}:function:${physical}` };
    case 'aws:iam/role:Role':
      return { name: physical, arn: `arn:aws:iam::${ACCOUNT_ID}:role/${physical}` };
    case 'aws:cloudwatch/logGroup:LogGroup':
      return { name: physical, arn: `arn:aws:logs:eu-west-1:${ACCOUNT_ID}:log-group:${physical}` };
    case 'aws:cloudwatch/eventRule:EventRule':
      return { name: physical, arn: `arn:aws:events:eu-west-1:${ACCOUNT_ID}:rule/${physical}` };
    case 'aws:sns/topic:Topic':
      return { name: physical, arn: `arn:aws:sns:eu-west-1:${ACCOUNT_ID}:${physical}` };
    case 'gcp:storage/bucket:Bucket':
      return { name: physical, url: `gs://${physical}` };
    case 'gcp:pubsub/topic:Topic':
      return { name: physical, id: `projects/${inputs.project}/topics/${physical}` };
    case 'gcp:pubsub/subscription:Subscription':
      return { name: physical, id: `projects/${inputs.project}/subscriptions/${physical}` };
    case 'gcp:serviceaccount/account:Account': {
      const email = `${inputs.accountId}@${inputs.project}.iam.gserviceaccount.com`;
      return { email, member: `serviceAccount:${email}`, name: `projects/${inputs.project}/serviceAccounts/${email}` };
    }
    case 'gcp:cloudfunctionsv2/function:Function': {
      // The provider reports the Cloud Run service by its full resource name.
      const service = `projects/${inputs.project}/locations/${inputs.location}/services/${physical}`;
      const url = `https://${physical}-abc123-ew.a.run.app`;
      return { name: physical, url, serviceConfig: { ...(inputs.serviceConfig as object), service, uri: url } };
    }
    case 'gcp:logging/metric:Metric':
      return { name: physical };
    case 'azure-native:resources:ResourceGroup':
      return { name: `${name}1a2b3c4d`, id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${name}1a2b3c4d` };
    case 'azure-native:storage:StorageAccount': {
      const account = inputs.accountName as string;
      return {
        name: account,
        id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${inputs.resourceGroupName}/providers/Microsoft.Storage/storageAccounts/${account}`,
        primaryEndpoints: {
          blob: `https://${account}.blob.core.windows.net/`,
          queue: `https://${account}.queue.core.windows.net/`,
          table: `https://${account}.table.core.windows.net/`,
        },
      };
    }
    case 'azure-native:storage:BlobContainer':
      return { name: inputs.containerName };
    case 'azure-native:storage:Queue':
      return { name: inputs.queueName };
    case 'azure-native:storage:Table':
      return { name: inputs.tableName };
    case 'azure-native:storage:Blob':
      return { name: inputs.blobName };
    case 'azure-native:web:WebApp':
      return {
        name: `${name}9f8e7d6c`,
        id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${inputs.resourceGroupName}/providers/Microsoft.Web/sites/${name}9f8e7d6c`,
        identity: { type: 'SystemAssigned', principalId: `principal-of-${name}` },
      };
    case 'azure-native:applicationinsights:Component':
      return { connectionString: `InstrumentationKey=mock-${name}` };
    case 'azure-native:eventgrid:SystemTopic':
      return { name: `${name}5e4d3c2b` };
    default:
      if (type.startsWith('azure-native:')) return { name: physical, id: `/subscriptions/${AZURE_SUBSCRIPTION}/mock/${type}/${name}` };
      return { name: physical };
  }
}

function calls(args: pulumi.runtime.MockCallArgs): Record<string, unknown> {
  switch (args.token) {
    case 'aws:index/getCallerIdentity:getCallerIdentity':
      return { accountId: ACCOUNT_ID, arn: `arn:aws:iam::${ACCOUNT_ID}:user/ci`, userId: 'AIDAMOCK', id: ACCOUNT_ID };
    case 'gcp:organizations/getProject:getProject':
      return { number: GCP_PROJECT_NUMBER, projectId: args.inputs.projectId, name: args.inputs.projectId };
    case 'gcp:storage/getProjectServiceAccount:getProjectServiceAccount':
      return { emailAddress: `service-${GCP_PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com` };
    case 'azure-native:authorization:getClientConfig':
      return { subscriptionId: AZURE_SUBSCRIPTION, tenantId: 'tenant', clientId: 'client', objectId: 'object' };
    default:
      throw new Error(`the infra test mocks do not know the call ${args.token}: add it to test/infra/harness.ts`);
  }
}

/** Resolve every Output (deeply) in a value the program returned. */
async function resolve(value: unknown): Promise<unknown> {
  if (pulumi.Output.isInstance(value)) {
    return resolve(await new Promise((r) => (value as pulumi.Output<unknown>).apply((v) => r(v))));
  }
  if (Array.isArray(value)) return Promise.all(value.map(resolve));
  if (value && typeof value === 'object' && !pulumi.Resource.isInstance(value)) {
    const entries = await Promise.all(Object.entries(value).map(async ([k, v]) => [k, await resolve(v)] as const));
    return Object.fromEntries(entries);
  }
  return value;
}

/**
 * Run the program for one stack. `config` is the flat map Pulumi passes a
 * program (`tessera:cloud` -> `aws`); `tessera:archiveDir` defaults to the
 * placeholder archives.
 */
export async function runStack(stack: string, config: Readonly<Record<string, string>>): Promise<StackRun> {
  const resources: RecordedResource[] = [];
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        const inputs = args.inputs as Record<string, unknown>;
        const extra = computed(args.type, args.name, inputs);
        // A resource's `id` output is what the provider returns as its id (GCP topics: the full path).
        const id = typeof extra.id === 'string' ? extra.id : `${args.name}-id`;
        const state = { ...inputs, ...extra };
        resources.push({ type: args.type, name: args.name, custom: args.custom ?? true, id, inputs, state });
        return { id, state };
      },
      call: calls,
    },
    'tessera',
    stack,
    false,
    'tessera-org',
  );
  const withArchives = { 'tessera:archiveDir': await placeholderArchives(), ...config };
  pulumi.runtime.setAllConfig(withArchives);
  // Imported after setMocks, as the Pulumi testing guide requires; cached after the first run.
  const { default: main } = await import('../../infra/index.js');
  const outputs = (await resolve(await main())) as Record<string, unknown>;
  const monitor = pulumi.runtime.getMonitor() as unknown as { getRegisteredResources(): Map<string, unknown> };
  await pulumi.runtime.disconnect();
  const urns = [...monitor.getRegisteredResources().keys()];
  return {
    resources,
    outputs,
    urns,
    ofType: (type) => resources.filter((r) => r.type === type),
    one(type, suffix) {
      const found = resources.filter((r) => r.type === type && r.name.endsWith(suffix));
      if (found.length !== 1)
        throw new Error(`expected one ${type} named *${suffix}, found ${found.map((r) => r.name).join(', ') || 'none'}`);
      return found[0] as RecordedResource;
    },
  };
}

/**
 * URNs of the resources the program declared (not the stack, not default
 * providers, not the component itself): each must encode the component as
 * its parent, e.g. `...::tessera:aws:TilingStack$aws:s3/bucket:Bucket::name`.
 */
export function declaredUrns(run: StackRun): string[] {
  return run.urns.filter((u) => !u.includes('::pulumi:providers:') && !u.includes('pulumi:pulumi:Stack') && !u.endsWith('::tessera'));
}

/** Run the program expecting it to refuse the configuration; returns the error message. */
export async function refusal(stack: string, config: Readonly<Record<string, string>>): Promise<string> {
  try {
    await runStack(stack, config);
  } catch (e) {
    await pulumi.runtime.disconnect().catch(() => undefined);
    return e instanceof Error ? e.message : String(e);
  }
  throw new Error(`stack ${stack} was accepted, but a refusal was expected`);
}

/** The environment variables of a function-like resource, flattened to strings. */
export function envOf(vars: unknown): Record<string, string> {
  return Object.fromEntries(Object.entries((vars ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
}
