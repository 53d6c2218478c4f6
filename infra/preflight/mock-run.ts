import * as pulumi from '@pulumi/pulumi';

/**
 * Runs the infra program (infra/index.ts) against Pulumi mocks and records
 * every resource it declares: its resolved inputs, what the mock returned,
 * and the dependencies the SDK sent the engine with it. The infra tests
 * (test/infra/harness.ts) assert policies on the record; `tessera preflight`
 * prints it as a plan. Nothing here talks to a cloud or needs the Pulumi CLI.
 *
 * Dependencies are taken from the SDK's own RegisterResourceRequest, the
 * message `pulumi up` sends the engine: `dependencies` is every URN the engine
 * waits for before it creates the resource (explicit `dependsOn`, expanded to
 * a component's children, plus every resource whose Output flows into an
 * input), and `propertyDependencies` names which input brought which URN.
 * `MockResourceArgs` does not carry them, so the mock monitor's
 * registerResource is wrapped to read them off the request before the mock
 * answers it. That is the graph the engine orders creation by, not a guess.
 */

export const ACCOUNT_ID = '123456789012';
export const GCP_PROJECT_NUMBER = '424242424242';
export const AZURE_SUBSCRIPTION = '00000000-0000-0000-0000-00000000c0de';

export interface RecordedResource {
  readonly type: string;
  readonly name: string;
  readonly urn: string;
  readonly custom: boolean;
  readonly id: string;
  /** The inputs the program passed, with Outputs resolved. */
  readonly inputs: Record<string, unknown>;
  /** What the mock returned: inputs plus the provider-computed attributes tests refer to (arn, url, name, ...). */
  readonly state: Record<string, unknown>;
  /** URNs the engine must have created before this resource (explicit dependsOn and input dependencies). */
  readonly dependencies: readonly string[];
  /** Input property name -> URNs whose Outputs flowed into it. */
  readonly propertyDependencies: Readonly<Record<string, readonly string[]>>;
}

export interface MockRun {
  readonly resources: readonly RecordedResource[];
  readonly outputs: Record<string, unknown>;
  /** URNs the mock monitor handed out, which encode each resource's parent chain. */
  readonly urns: readonly string[];
  ofType(type: string): RecordedResource[];
  /** The one resource of a type whose logical name ends with `suffix`; fails if there is not exactly one. */
  one(type: string, suffix: string): RecordedResource;
  byUrn(urn: string): RecordedResource | undefined;
  /** Every resource the engine creates before `resource`: its dependencies, theirs, and so on. */
  createdBefore(resource: RecordedResource): RecordedResource[];
}

/** The parts of the SDK's RegisterResourceRequest / Response this module reads (generated protobuf classes). */
interface RegisterRequest {
  getType(): string;
  getName(): string;
  getDependenciesList(): string[];
  getPropertydependenciesMap(): { forEach(f: (value: { getUrnsList(): string[] }, key: string) => void): void };
}
interface RegisterResponse {
  getUrn(): string;
}
interface WrappableMonitor {
  registerResource(req: RegisterRequest, callback: (err: unknown, resp: RegisterResponse | undefined) => void): Promise<void>;
  getRegisteredResources(): Map<string, unknown>;
  newUrn(parent: string | undefined, type: string, name: string): string;
}

/**
 * Make the mock monitor's URNs the engine's: a child's type is its parent's whole qualified type, then its own
 * (`tessera:index:TesseraAws$tessera:aws:TilingStack$aws:s3/bucket:Bucket`). The SDK's mock keeps the parent's
 * last type only, which differs from the engine as soon as a component sits inside another.
 */
export function engineUrns(monitor: unknown): void {
  const m = monitor as WrappableMonitor;
  m.newUrn = (parent, type, name) => {
    const qualified = parent ? `${parent.split('::')[2]}$${type}` : type;
    return `urn:pulumi:${[pulumi.getStack(), pulumi.getProject(), qualified, name].join('::')}`;
  };
}

/**
 * Provider-computed attributes, by resource type: what a real `pulumi up` would fill in.
 * Also the table of the stand-in provider that runs the program on the real engine (test/infra/standin-provider/).
 */
export function computed(type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> {
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
    case 'aws:iam/policy:Policy':
      return { name: physical, arn: `arn:aws:iam::${ACCOUNT_ID}:policy/${physical}` };
    case 'aws:cloudwatch/logGroup:LogGroup':
      return { name: physical, arn: `arn:aws:logs:eu-west-1:${ACCOUNT_ID}:log-group:${physical}` };
    case 'aws:cloudwatch/eventRule:EventRule':
      return { name: physical, arn: `arn:aws:events:eu-west-1:${ACCOUNT_ID}:rule/${physical}` };
    case 'aws:sns/topic:Topic':
      return { name: physical, arn: `arn:aws:sns:eu-west-1:${ACCOUNT_ID}:${physical}` };
    case 'aws:secretsmanager/secret:Secret': {
      // Secrets Manager appends six random characters to a secret's name in its ARN; the ARN is also its id.
      const arn = `arn:aws:secretsmanager:eu-west-1:${ACCOUNT_ID}:secret:${physical}-AbCdEf`;
      return { name: physical, arn, id: arn };
    }
    case 'aws:secretsmanager/secretVersion:SecretVersion':
      return { secretArn: inputs.secretId, versionId: `0f1e2d3c-4b5a-4968-8776-${Buffer.from(name).toString('hex').slice(0, 12)}` };
    case 'gcp:storage/bucket:Bucket':
      return { name: physical, url: `gs://${physical}` };
    case 'gcp:pubsub/topic:Topic':
      return { name: physical, id: `projects/${inputs.project}/topics/${physical}` };
    case 'gcp:pubsub/subscription:Subscription':
      return { name: physical, id: `projects/${inputs.project}/subscriptions/${physical}` };
    case 'gcp:serviceaccount/account:Account': {
      const email = `${inputs.accountId}@${inputs.project}.iam.gserviceaccount.com`;
      return {
        email,
        member: `serviceAccount:${email}`,
        name: `projects/${inputs.project}/serviceAccounts/${email}`,
        id: `projects/${inputs.project}/serviceAccounts/${email}`,
      };
    }
    case 'gcp:projects/serviceIdentity:ServiceIdentity': {
      // Google's service agents are named service-<project number>@gcp-sa-<service>.iam.gserviceaccount.com.
      const email = `service-${GCP_PROJECT_NUMBER}@gcp-sa-${String(inputs.service).split('.')[0]}.iam.gserviceaccount.com`;
      return { email, member: `serviceAccount:${email}` };
    }
    case 'gcp:cloudfunctionsv2/function:Function': {
      // Two different addresses, as on GCP: `url` is the function's cloudfunctions.net URL, serviceConfig.uri
      // the Cloud Run service's run.app URI. Internal-only ingress admits Pub/Sub and Scheduler on the latter only.
      const service = `projects/${inputs.project}/locations/${inputs.location}/services/${physical}`;
      const url = `https://${inputs.location}-${inputs.project}.cloudfunctions.net/${physical}`;
      const uri = `https://${physical}-abc123-ew.a.run.app`;
      return { name: physical, url, serviceConfig: { ...(inputs.serviceConfig as object), service, uri } };
    }
    case 'gcp:logging/metric:Metric':
      return { name: physical };
    case 'gcp:firestore/database:Database':
      return { name: physical, id: `projects/${inputs.project}/databases/${physical}` };
    case 'gcp:secretmanager/secret:Secret':
      return {
        name: `projects/${GCP_PROJECT_NUMBER}/secrets/${inputs.secretId}`,
        id: `projects/${inputs.project}/secrets/${inputs.secretId}`,
      };
    case 'gcp:secretmanager/secretVersion:SecretVersion':
      return { version: '1', name: `${inputs.secret}/versions/1`, id: `${inputs.secret}/versions/1` };
    case 'gcp:projects/iAMCustomRole:IAMCustomRole':
      // The role's full name, which a binding's `role` takes (a bare roleId is refused).
      return { name: `projects/${inputs.project}/roles/${inputs.roleId}`, id: `projects/${inputs.project}/roles/${inputs.roleId}` };
    case 'azure-native:resources:ResourceGroup':
      return { name: `${name}1a2b3c4d`, id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${name}1a2b3c4d` };
    case 'azure-native:managedidentity:UserAssignedIdentity':
      return {
        name: `${name}7a6b5c4d`,
        id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${inputs.resourceGroupName}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/${name}7a6b5c4d`,
        principalId: `principal-of-${name}`,
        clientId: `client-of-${name}`,
      };
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
      return {
        name: inputs.containerName,
        id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${inputs.resourceGroupName}/providers/Microsoft.Storage/storageAccounts/${inputs.accountName}/blobServices/default/containers/${inputs.containerName}`,
      };
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
        identity: inputs.identity,
      };
    case 'azure-native:applicationinsights:Component':
      return {
        connectionString: `InstrumentationKey=mock-${name}`,
        id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${inputs.resourceGroupName}/providers/Microsoft.Insights/components/${name}`,
      };
    case 'azure-native:eventgrid:SystemTopic':
      return { name: `${name}5e4d3c2b` };
    case 'azure-native:keyvault:Vault': {
      const vault = (inputs.vaultName as string | undefined) ?? `${name}3c2b1a0f`;
      return {
        name: vault,
        id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${inputs.resourceGroupName}/providers/Microsoft.KeyVault/vaults/${vault}`,
        properties: { ...(inputs.properties as object), vaultUri: `https://${vault}.vault.azure.net/` },
      };
    }
    case 'azure-native:keyvault:Secret': {
      // The service never returns a secret's value: the state has its URIs, not the value.
      const uri = `https://${inputs.vaultName}.vault.azure.net/secrets/${inputs.secretName}`;
      return {
        name: inputs.secretName,
        id: `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/${inputs.resourceGroupName}/providers/Microsoft.KeyVault/vaults/${inputs.vaultName}/secrets/${inputs.secretName}`,
        properties: { secretUri: uri, secretUriWithVersion: `${uri}/0123456789abcdef0123456789abcdef` },
      };
    }
    default:
      if (type.startsWith('azure-native:')) return { name: physical, id: `/subscriptions/${AZURE_SUBSCRIPTION}/mock/${type}/${name}` };
      return { name: physical };
  }
}

/** What a provider function (an invoke) returns, by token; the stand-in provider answers invokes with it too. */
export function calls(args: Pick<pulumi.runtime.MockCallArgs, 'token' | 'inputs'>): Record<string, unknown> {
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
      throw new Error(`the infra mocks do not know the call ${args.token}: add it to infra/preflight/mock-run.ts`);
  }
}

/** The id and the state (inputs plus the computed attributes) a provider answers a create with. */
export function mockResource(type: string, name: string, inputs: Record<string, unknown>): { id: string; state: Record<string, unknown> } {
  const extra = computed(type, name, inputs);
  // A resource's `id` output is what the provider returns as its id (GCP topics: the full path).
  const id = typeof extra.id === 'string' ? extra.id : `${name}-id`;
  return { id, state: { ...inputs, ...extra } };
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

interface Edges {
  readonly urn: string;
  readonly dependencies: readonly string[];
  readonly propertyDependencies: Record<string, readonly string[]>;
}

/**
 * Run the program for one stack under mocks. `config` is the flat map Pulumi
 * passes a program (`tessera:cloud` -> `aws`), including `tessera:archiveDir`.
 * Mocks are installed before the program module is imported (the Pulumi
 * testing-unit-ts pattern); the program is a default-exported function, so
 * one process can run it once per stack configuration.
 */
export async function runProgramUnderMocks(
  stack: string,
  config: Readonly<Record<string, string>>,
  /** Another program than infra/index.ts (a user's program using the components): it declares, and returns its outputs. */
  program?: () => Promise<Record<string, unknown>>,
): Promise<MockRun> {
  const declared: Omit<RecordedResource, 'urn' | 'dependencies' | 'propertyDependencies'>[] = [];
  await pulumi.runtime.setMocks(
    {
      newResource(args) {
        const inputs = args.inputs as Record<string, unknown>;
        const { id, state } = mockResource(args.type, args.name, inputs);
        declared.push({ type: args.type, name: args.name, custom: args.custom ?? true, id, inputs, state });
        return { id, state };
      },
      call: calls,
    },
    'tessera',
    stack,
    false,
    'tessera-org',
  );
  const monitor = pulumi.runtime.getMonitor() as unknown as WrappableMonitor;
  engineUrns(monitor);
  const edges = new Map<string, Edges>();
  const register = monitor.registerResource.bind(monitor);
  monitor.registerResource = (req, callback) =>
    register(req, (err, resp) => {
      if (!err && resp) {
        const propertyDependencies: Record<string, readonly string[]> = {};
        req.getPropertydependenciesMap().forEach((deps, key) => {
          propertyDependencies[key] = deps.getUrnsList();
        });
        edges.set(`${req.getType()}::${req.getName()}`, {
          urn: resp.getUrn(),
          dependencies: req.getDependenciesList(),
          propertyDependencies,
        });
      }
      callback(err, resp);
    });
  pulumi.runtime.setAllConfig({ ...config });
  const main = program ?? (await import('../index.js')).default;
  const outputs = (await resolve(await main())) as Record<string, unknown>;
  await pulumi.runtime.disconnect();
  const urns = [...monitor.getRegisteredResources().keys()];
  const resources: RecordedResource[] = declared.map((r) => {
    const e = edges.get(`${r.type}::${r.name}`);
    return { ...r, urn: e?.urn ?? '', dependencies: e?.dependencies ?? [], propertyDependencies: e?.propertyDependencies ?? {} };
  });
  const index = new Map(resources.map((r) => [r.urn, r]));
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
    byUrn: (urn) => index.get(urn),
    createdBefore(resource) {
      const seen = new Set<string>();
      const queue = [...resource.dependencies];
      while (queue.length > 0) {
        const urn = queue.shift() as string;
        if (seen.has(urn)) continue;
        seen.add(urn);
        queue.push(...(index.get(urn)?.dependencies ?? []));
      }
      return [...seen].flatMap((u) => index.get(u) ?? []);
    },
  };
}

/**
 * Declared resources (not the stack, not default providers, not the component
 * itself) whose URN does not encode the component as its parent.
 */
export function declaredUrns(run: Pick<MockRun, 'urns'>): string[] {
  return run.urns.filter((u) => !u.includes('::pulumi:providers:') && !u.includes('pulumi:pulumi:Stack') && !u.endsWith('::tessera'));
}
