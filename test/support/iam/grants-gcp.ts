import { gcpServiceAccountId } from '../../../infra/common/naming.js';
import { GCP_PROJECT_NUMBER, type MockRun } from '../../../infra/preflight/mock-run.js';
import { FUNCTION_ROLES, type FunctionRole } from '../../../shared/domain/key-layout.js';
import type { GrantDescription, LogicalResource, RecordedAccess, StackGrants } from './access.js';
import { attr, IamModelError, listOf, outputString, type RoleGrants, stackGrantsOf } from './grants-common.js';

/**
 * The GCP half of the grant model: the IAM bindings the program gives each function's service account
 * (bucket, topic, project and secret members), their roles' permissions, and their IAM conditions, evaluated
 * as IAM does (https://cloud.google.com/iam/docs/overview#policy-inheritance): a permission is granted when
 * any binding on the resource or an ancestor (the bucket of an object, the project of anything) gives the
 * member a role holding it and the binding's condition, if any, is true for the request. GCP has no deny in
 * these bindings; a deny policy or an authoritative policy resource in the program is an IamModelError.
 */

/**
 * Permissions of the predefined roles the program binds to its functions, from Google's role reference
 * (https://cloud.google.com/iam/docs/understanding-roles; Cloud Storage:
 * https://cloud.google.com/storage/docs/access-control/iam-roles; Firestore/Datastore:
 * https://cloud.google.com/datastore/docs/access/iam#roles). Only the data permissions a function's request can
 * need are listed; a role missing here is an IamModelError naming it, so it is added with its documented list.
 */
export const GCP_PREDEFINED_ROLES: Readonly<Record<string, readonly string[]>> = {
  // Read and list; no create, no delete.
  'roles/storage.objectViewer': [
    'storage.folders.get',
    'storage.folders.list',
    'storage.managedFolders.get',
    'storage.managedFolders.list',
    'storage.objects.get',
    'storage.objects.list',
  ],
  // Create only: no get, no list, no delete, so no overwrite (an overwrite also needs storage.objects.delete).
  'roles/storage.objectCreator': [
    'storage.folders.create',
    'storage.managedFolders.create',
    'storage.multipartUploads.abort',
    'storage.multipartUploads.create',
    'storage.multipartUploads.listParts',
    'storage.objects.create',
  ],
  'roles/storage.objectUser': [
    'storage.folders.create',
    'storage.folders.delete',
    'storage.folders.get',
    'storage.folders.list',
    'storage.folders.rename',
    'storage.managedFolders.create',
    'storage.managedFolders.delete',
    'storage.managedFolders.get',
    'storage.managedFolders.list',
    'storage.multipartUploads.abort',
    'storage.multipartUploads.create',
    'storage.multipartUploads.list',
    'storage.multipartUploads.listParts',
    'storage.objects.create',
    'storage.objects.delete',
    'storage.objects.get',
    'storage.objects.list',
    'storage.objects.restore',
    'storage.objects.update',
  ],
  'roles/storage.objectAdmin': [
    'storage.folders.create',
    'storage.folders.delete',
    'storage.folders.get',
    'storage.folders.list',
    'storage.folders.rename',
    'storage.managedFolders.create',
    'storage.managedFolders.delete',
    'storage.managedFolders.get',
    'storage.managedFolders.getIamPolicy',
    'storage.managedFolders.list',
    'storage.managedFolders.setIamPolicy',
    'storage.multipartUploads.abort',
    'storage.multipartUploads.create',
    'storage.multipartUploads.list',
    'storage.multipartUploads.listParts',
    'storage.objects.create',
    'storage.objects.delete',
    'storage.objects.get',
    'storage.objects.getIamPolicy',
    'storage.objects.list',
    'storage.objects.overrideUnlockedRetention',
    'storage.objects.restore',
    'storage.objects.setIamPolicy',
    'storage.objects.setRetention',
    'storage.objects.update',
  ],
  'roles/datastore.user': [
    'appengine.applications.get',
    'datastore.databases.get',
    'datastore.databases.getMetadata',
    'datastore.entities.allocateIds',
    'datastore.entities.create',
    'datastore.entities.delete',
    'datastore.entities.get',
    'datastore.entities.list',
    'datastore.entities.update',
    'datastore.indexes.list',
    'datastore.namespaces.get',
    'datastore.namespaces.list',
    'datastore.statistics.get',
    'datastore.statistics.list',
  ],
  'roles/datastore.viewer': [
    'appengine.applications.get',
    'datastore.databases.get',
    'datastore.databases.getMetadata',
    'datastore.databases.list',
    'datastore.entities.get',
    'datastore.entities.list',
    'datastore.indexes.get',
    'datastore.indexes.list',
    'datastore.namespaces.get',
    'datastore.namespaces.list',
    'datastore.statistics.get',
    'datastore.statistics.list',
  ],
  // https://cloud.google.com/pubsub/docs/access-control#roles
  'roles/pubsub.publisher': ['pubsub.topics.publish'],
  'roles/pubsub.subscriber': ['pubsub.snapshots.seek', 'pubsub.subscriptions.consume', 'pubsub.topics.attachSubscription'],
  // https://cloud.google.com/secret-manager/docs/access-control#roles
  'roles/secretmanager.secretAccessor': ['secretmanager.versions.access'],
  'roles/logging.logWriter': ['logging.logEntries.create', 'logging.logEntries.route'],
  'roles/monitoring.metricWriter': [
    'monitoring.metricDescriptors.create',
    'monitoring.metricDescriptors.get',
    'monitoring.metricDescriptors.list',
    'monitoring.monitoredResourceDescriptors.get',
    'monitoring.monitoredResourceDescriptors.list',
    'monitoring.timeSeries.create',
  ],
  'roles/run.invoker': ['run.routes.invoke'],
};

// ---------------------------------------------------------------------------------------------------------
// CEL, the subset IAM conditions use here (https://cloud.google.com/iam/docs/conditions-overview#cel,
// attributes: https://cloud.google.com/iam/docs/conditions-attribute-reference).
// ---------------------------------------------------------------------------------------------------------

/** The resource attributes a condition can read. */
const RESOURCE_ATTRIBUTES = ['resource.name', 'resource.type', 'resource.service'] as const;
type ResourceAttribute = (typeof RESOURCE_ATTRIBUTES)[number];
/**
 * Request attributes read with `api.getAttribute(key, default)`: Cloud Storage's listing prefix is the one a
 * list request carries (a listing's resource is the bucket, so a `resource.name` prefix condition cannot
 * grant it; https://cloud.google.com/iam/docs/conditions-attribute-reference#api-attributes).
 */
const API_ATTRIBUTES = new Set(['storage.googleapis.com/objectListPrefix']);

export type CelExpr =
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'attribute'; readonly name: ResourceAttribute }
  | { readonly kind: 'api'; readonly key: string; readonly fallback: string }
  | { readonly kind: 'startsWith'; readonly target: CelExpr; readonly prefix: CelExpr }
  | { readonly kind: 'equals'; readonly left: CelExpr; readonly right: CelExpr; readonly negated: boolean }
  | { readonly kind: 'and' | 'or'; readonly left: CelExpr; readonly right: CelExpr }
  | { readonly kind: 'not'; readonly operand: CelExpr };

type Token =
  | { readonly kind: 'string'; readonly value: string }
  | { readonly kind: 'ident'; readonly value: string }
  | { readonly kind: 'op'; readonly value: string };

function tokenize(expression: string, fail: (what: string) => never): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expression.length) {
    const c = expression[i] as string;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '"' || c === "'") {
      let value = '';
      i++;
      while (i < expression.length && expression[i] !== c) {
        if (expression[i] === '\\') {
          const next = expression[i + 1];
          const escapes: Record<string, string> = { '\\': '\\', '"': '"', "'": "'", n: '\n', t: '\t' };
          if (next === undefined || escapes[next] === undefined) fail(`the escape \\${next ?? ''}`);
          value += escapes[next as string];
          i += 2;
        } else {
          value += expression[i];
          i++;
        }
      }
      if (i >= expression.length) fail('an unterminated string');
      i++;
      tokens.push({ kind: 'string', value });
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(expression.slice(i)) as RegExpExecArray;
      tokens.push({ kind: 'ident', value: m[0] });
      i += m[0].length;
    } else {
      const two = expression.slice(i, i + 2);
      if (['&&', '||', '==', '!='].includes(two)) {
        tokens.push({ kind: 'op', value: two });
        i += 2;
      } else if ('!().,'.includes(c)) {
        tokens.push({ kind: 'op', value: c });
        i++;
      } else {
        fail(`the character ${JSON.stringify(c)}`);
      }
    }
  }
  return tokens;
}

const isString = (e: CelExpr) => e.kind === 'string' || e.kind === 'attribute' || e.kind === 'api';

/**
 * Parse an IAM condition expression. Accepted: string literals, `resource.name|type|service`,
 * `api.getAttribute('<known key>', '<default>')`, `<string>.startsWith(<string>)`, `==`, `!=`, `&&`, `||`, `!`
 * and parentheses. Anything else (other functions, timestamps, `request.*`, `has()`, macros) is an
 * IamModelError naming the expression.
 */
export function parseCel(expression: string): CelExpr {
  const fail = (what: string): never => {
    throw new IamModelError(`the IAM condition ${JSON.stringify(expression)} uses ${what}, which the grant model does not evaluate`);
  };
  const tokens = tokenize(expression, fail);
  let pos = 0;
  const peek = (): Token | undefined => tokens[pos];
  const isOp = (value: string) => peek()?.kind === 'op' && peek()?.value === value;
  const expectOp = (value: string) => {
    if (!isOp(value))
      fail(
        peek() === undefined ? `an incomplete expression (expected ${value})` : `${JSON.stringify(peek()?.value)} where ${value} belongs`,
      );
    pos++;
  };
  const stringArg = (): CelExpr => {
    const t = peek();
    if (t?.kind !== 'string') fail(`a non-literal argument (${t?.value ?? 'none'})`);
    pos++;
    return { kind: 'string', value: (t as Token).value };
  };
  const primary = (): CelExpr => {
    const t = peek();
    if (t === undefined) return fail('an incomplete expression');
    if (t.kind === 'string') {
      pos++;
      return { kind: 'string', value: t.value };
    }
    if (t.kind === 'op' && t.value === '(') {
      pos++;
      const inner = or();
      expectOp(')');
      return inner;
    }
    if (t.kind !== 'ident') return fail(JSON.stringify(t.value));
    const path = [t.value];
    pos++;
    while (isOp('.') && tokens[pos + 1]?.kind === 'ident' && tokens[pos + 2]?.value !== '(') {
      path.push((tokens[pos + 1] as Token).value);
      pos += 2;
    }
    const name = path.join('.');
    if (name === 'api' && isOp('.') && tokens[pos + 1]?.value === 'getAttribute') {
      pos += 2;
      expectOp('(');
      const key = stringArg();
      expectOp(',');
      const fallback = stringArg();
      expectOp(')');
      const k = (key as { value: string }).value;
      if (!API_ATTRIBUTES.has(k)) fail(`the request attribute ${k}`);
      return { kind: 'api', key: k, fallback: (fallback as { value: string }).value };
    }
    if (!(RESOURCE_ATTRIBUTES as readonly string[]).includes(name)) return fail(name);
    return { kind: 'attribute', name: name as ResourceAttribute };
  };
  const postfix = (): CelExpr => {
    let target = primary();
    while (isOp('.')) {
      const method = tokens[pos + 1];
      if (method?.kind !== 'ident' || method.value !== 'startsWith') return fail(`the function ${method?.value ?? '(none)'}`);
      if (!isString(target)) fail('startsWith on a non-string');
      pos += 2;
      expectOp('(');
      const prefix = postfix();
      if (!isString(prefix)) fail('startsWith with a non-string argument');
      expectOp(')');
      target = { kind: 'startsWith', target, prefix };
    }
    return target;
  };
  const comparison = (): CelExpr => {
    const left = postfix();
    if (isOp('==') || isOp('!=')) {
      const negated = peek()?.value === '!=';
      pos++;
      const right = postfix();
      if (!isString(left) || !isString(right)) fail('a comparison of non-strings');
      return { kind: 'equals', left, right, negated };
    }
    return left;
  };
  const unary = (): CelExpr => {
    if (isOp('!')) {
      pos++;
      return { kind: 'not', operand: unary() };
    }
    return comparison();
  };
  const chain = (kind: 'and' | 'or', op: string, next: () => CelExpr) => (): CelExpr => {
    let left = next();
    while (isOp(op)) {
      pos++;
      left = { kind, left, right: next() };
    }
    return left;
  };
  const and = chain('and', '&&', unary);
  const or: () => CelExpr = chain('or', '||', and);
  const result = or();
  if (pos < tokens.length) fail(JSON.stringify(peek()?.value));
  const boolean = (e: CelExpr): void => {
    if (isString(e)) fail('a string where a condition belongs');
    if (e.kind === 'and' || e.kind === 'or') {
      boolean(e.left);
      boolean(e.right);
    }
    if (e.kind === 'not') boolean(e.operand);
  };
  boolean(result);
  return result;
}

/** The attributes one request presents to a condition. */
export interface CelRequest {
  readonly name: string;
  readonly type: string;
  readonly service: string;
  readonly api?: Readonly<Record<string, string>>;
}

function value(e: CelExpr, request: CelRequest): string {
  switch (e.kind) {
    case 'string':
      return e.value;
    case 'attribute':
      return e.name === 'resource.name' ? request.name : e.name === 'resource.type' ? request.type : request.service;
    case 'api':
      return request.api?.[e.key] ?? e.fallback;
    default:
      throw new IamModelError(`a ${e.kind} expression used as a string`);
  }
}

export function evaluateCel(e: CelExpr, request: CelRequest): boolean {
  switch (e.kind) {
    case 'startsWith':
      return value(e.target, request).startsWith(value(e.prefix, request));
    case 'equals':
      return (value(e.left, request) === value(e.right, request)) !== e.negated;
    case 'and':
      return evaluateCel(e.left, request) && evaluateCel(e.right, request);
    case 'or':
      return evaluateCel(e.left, request) || evaluateCel(e.right, request);
    case 'not':
      return !evaluateCel(e.operand, request);
    default:
      throw new IamModelError(`a ${e.kind} expression used as a condition`);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Bindings
// ---------------------------------------------------------------------------------------------------------

/** What a binding is set on: IAM grants it there and on everything below (a bucket's objects, a project's all). */
type Target =
  | { readonly kind: 'bucket'; readonly bucket: string }
  | { readonly kind: 'topic'; readonly topic: string }
  | { readonly kind: 'project'; readonly project: string }
  | { readonly kind: 'secret'; readonly secret: string }
  /** A resource no function request names (a Cloud Run service, a subscription): listed, never matched. */
  | { readonly kind: 'other'; readonly what: string };

interface Binding {
  readonly id: string;
  /** The resource type and name, for an error about it. */
  readonly where: string;
  readonly target: Target;
  readonly role: string;
  readonly members: readonly string[];
  readonly condition?: { readonly title: string; readonly expression: string; readonly parsed: CelExpr };
}

/** The member-binding resource types the model reads, and the input naming what each is set on. */
const BINDING_TYPES: Readonly<Record<string, { readonly target: Target['kind']; readonly input: string }>> = {
  'gcp:storage/bucketIAMMember:BucketIAMMember': { target: 'bucket', input: 'bucket' },
  'gcp:storage/bucketIAMBinding:BucketIAMBinding': { target: 'bucket', input: 'bucket' },
  'gcp:pubsub/topicIAMMember:TopicIAMMember': { target: 'topic', input: 'topic' },
  'gcp:pubsub/topicIAMBinding:TopicIAMBinding': { target: 'topic', input: 'topic' },
  'gcp:projects/iAMMember:IAMMember': { target: 'project', input: 'project' },
  'gcp:projects/iAMBinding:IAMBinding': { target: 'project', input: 'project' },
  'gcp:secretmanager/secretIamMember:SecretIamMember': { target: 'secret', input: 'secretId' },
  'gcp:secretmanager/secretIamBinding:SecretIamBinding': { target: 'secret', input: 'secretId' },
};

const CUSTOM_ROLE = 'gcp:projects/iAMCustomRole:IAMCustomRole';

/** Authoritative policies replace what the member bindings say, and deny policies subtract: neither is modelled. */
const UNMODELLED_POLICY = /IAMPolicy$|IamPolicy$|denyPolicy:DenyPolicy$/;

/** `b/name`, `projects/p/topics/name`, `projects/p/secrets/name` -> `name`. */
const lastSegment = (s: string): string => s.split('/').at(-1) ?? s;

function rolePermissions(run: MockRun, role: string, where: string): ReadonlySet<string> {
  const predefined = GCP_PREDEFINED_ROLES[role];
  if (predefined !== undefined) return new Set(predefined);
  // A custom role (projects.IAMCustomRole): its permissions are in the program. Pulumi names it
  // projects/<project>/roles/<roleId>; the mock may answer with its own name or id.
  const custom = run
    .ofType(CUSTOM_ROLE)
    .find((r) => [r.id, attr(r, 'name'), `projects/${attr(r, 'project')}/roles/${attr(r, 'roleId')}`].includes(role));
  if (custom !== undefined) return new Set(listOf(custom.inputs.permissions).map(String));
  throw new IamModelError(
    `${where} binds ${role}, whose permissions the model does not know: add it to GCP_PREDEFINED_ROLES with Google's list`,
  );
}

function bindingsOf(run: MockRun, project: string): Binding[] {
  for (const r of run.resources) {
    if (UNMODELLED_POLICY.test(r.type))
      throw new IamModelError(`${r.type} ${r.name} is not modelled: only member and binding resources are`);
  }
  const bindings: Binding[] = [];
  for (const r of run.resources) {
    const known = BINDING_TYPES[r.type];
    const members = listOf(r.inputs.members ?? r.inputs.member).map(String);
    const role = attr(r, 'role');
    if (role === undefined || members.length === 0 || !/IAM|Iam/.test(r.type)) continue;
    const where = `${r.type} ${r.name}`;
    // A project binding without `project` is on the provider's project, the stack's.
    const on = known === undefined ? undefined : (attr(r, known.input) ?? (known.target === 'project' ? project : undefined));
    const target: Target =
      known === undefined || on === undefined
        ? { kind: 'other', what: `${r.type.split(':').at(-1)} ${attr(r, 'name') ?? r.name}` }
        : known.target === 'bucket'
          ? { kind: 'bucket', bucket: lastSegment(on) }
          : known.target === 'topic'
            ? { kind: 'topic', topic: lastSegment(on) }
            : known.target === 'secret'
              ? { kind: 'secret', secret: lastSegment(on) }
              : { kind: 'project', project: on };
    const condition = r.inputs.condition as { title?: string; expression?: string } | undefined;
    bindings.push({
      id: r.name,
      where,
      target,
      role,
      members,
      ...(condition?.expression === undefined
        ? {}
        : { condition: { title: condition.title ?? '', expression: condition.expression, parsed: parseCel(condition.expression) } }),
    });
  }
  return bindings;
}

/** The IAM view of one access: the resource it acts on, its ancestors' targets, and the condition attributes. */
interface GcpRequest {
  readonly permission: string;
  readonly targets: readonly Target[];
  readonly attributes: CelRequest;
}

const sameTarget = (a: Target, b: Target): boolean => JSON.stringify(a) === JSON.stringify(b);

/** Where each logical resource lives on GCP, from the stack's outputs. */
interface GcpResources {
  readonly project: string;
  readonly buckets: Partial<Record<LogicalResource, string | undefined>>;
  readonly topics: Partial<Record<LogicalResource, string | undefined>>;
  /** The Firestore database (claims and manifest are collections in it). */
  readonly database: string | undefined;
  readonly secret: string | undefined;
}

function resourcesOf(run: MockRun): GcpResources {
  const project = outputString(run, 'project');
  if (project === undefined) throw new IamModelError('the GCP stack has no `project` output');
  const out = (k: string) => outputString(run, k);
  const secrets = run.ofType('gcp:secretmanager/secret:Secret');
  if (secrets.length > 1) throw new IamModelError(`the stack has ${secrets.length} secrets; which one is the feature sink's?`);
  return {
    project,
    buckets: { sourceBucket: out('sourceBucket'), outputBucket: out('outputBucket') },
    // Scene events come through Eventarc, not a topic of the stack; the scene function settles poison on the
    // tile dead-letter topic. So sceneQueue and sceneDeadLetterQueue name nothing here.
    topics: {
      tileQueue: out('tileTopic'),
      deadLetterQueue: out('deadLetterTopic'),
      ingestQueue: out('ingestTopic'),
      ingestDeadLetterQueue: out('ingestDeadLetterTopic'),
    },
    database: out('firestoreDatabase'),
    secret: attr(secrets[0], 'secretId'),
  };
}

function requestOf(access: RecordedAccess, res: GcpResources): GcpRequest | undefined {
  const projectTarget: Target = { kind: 'project', project: res.project };
  const bucket = res.buckets[access.resource];
  if (bucket !== undefined) {
    const targets = [{ kind: 'bucket', bucket } as const, projectTarget];
    const service = 'storage.googleapis.com';
    // A listing's resource is the bucket; the prefix it asks for is the objectListPrefix request attribute.
    if (access.list === true || access.key === undefined) {
      const api = access.list === true && access.key ? { 'storage.googleapis.com/objectListPrefix': access.key } : {};
      return {
        permission: access.action,
        targets,
        attributes: { name: `projects/_/buckets/${bucket}`, type: `${service}/Bucket`, service, api },
      };
    }
    return {
      permission: access.action,
      targets,
      attributes: { name: `projects/_/buckets/${bucket}/objects/${access.key}`, type: `${service}/Object`, service },
    };
  }
  const topic = res.topics[access.resource];
  if (topic !== undefined) {
    const service = 'pubsub.googleapis.com';
    return {
      permission: access.action,
      targets: [{ kind: 'topic', topic }, projectTarget],
      attributes: { name: `projects/${res.project}/topics/${topic}`, type: `${service}/Topic`, service },
    };
  }
  if ((access.resource === 'claimsTable' || access.resource === 'manifestTable') && res.database !== undefined) {
    // Firestore's IAM conditions see the database (https://cloud.google.com/firestore/docs/security/iam#iam_conditions).
    const service = 'firestore.googleapis.com';
    return {
      permission: access.action,
      targets: [projectTarget],
      attributes: { name: `projects/${res.project}/databases/${res.database}`, type: `${service}/Database`, service },
    };
  }
  if (access.resource === 'featureSinkSecret' && res.secret !== undefined) {
    // Secret Manager names resources by project number; accessing a value acts on a version.
    const service = 'secretmanager.googleapis.com';
    const secretName = `projects/${GCP_PROJECT_NUMBER}/secrets/${res.secret}`;
    const version = access.action.startsWith('secretmanager.versions.');
    return {
      permission: access.action,
      targets: [{ kind: 'secret', secret: res.secret }, projectTarget],
      attributes: version
        ? { name: `${secretName}/versions/latest`, type: `${service}/SecretVersion`, service }
        : { name: secretName, type: `${service}/Secret`, service },
    };
  }
  return undefined;
}

function describeTarget(t: Target): string {
  switch (t.kind) {
    case 'bucket':
      return `bucket ${t.bucket}`;
    case 'topic':
      return `topic ${t.topic}`;
    case 'project':
      return `project ${t.project}`;
    case 'secret':
      return `secret ${t.secret}`;
    case 'other':
      return t.what;
  }
}

/** The GCP StackGrants of a program run under mocks for stack `stack` (its service account ids carry the stack). */
export function gcpStackGrants(run: MockRun, stack: string): StackGrants {
  const res = resourcesOf(run);
  const bindings = bindingsOf(run, res.project);
  const accounts = run.ofType('gcp:serviceaccount/account:Account');
  const roles = new Map<FunctionRole, RoleGrants>();
  for (const role of FUNCTION_ROLES) {
    const account = accounts.find((a) => attr(a, 'accountId') === gcpServiceAccountId(stack, role));
    if (account === undefined) continue;
    const member = new Set([attr(account, 'member'), `serviceAccount:${attr(account, 'email')}`]);
    // Only a function's own bindings need their roles' permissions (the build and trigger accounts and Google's
    // agents hold roles the model need not know).
    const own = bindings
      .filter((b) => b.members.some((m) => member.has(m)))
      .map((b) => ({ ...b, permissions: b.target.kind === 'other' ? new Set<string>() : rolePermissions(run, b.role, b.where) }));
    const grants: GrantDescription[] = own.map((b) => ({
      id: b.id,
      role,
      text: `${b.role} on ${describeTarget(b.target)}${b.condition ? ` if ${b.condition.expression}` : ''}`,
    }));
    roles.set(role, {
      grants,
      check(access) {
        const request = requestOf(access, res);
        if (request === undefined) return { allowed: false };
        const granting = own.find(
          (b) =>
            request.targets.some((t) => sameTarget(t, b.target)) &&
            b.permissions.has(request.permission) &&
            (b.condition === undefined || evaluateCel(b.condition.parsed, request.attributes)),
        );
        return granting === undefined ? { allowed: false } : { allowed: true, grant: granting.id };
      },
    });
  }
  return stackGrantsOf('gcp', roles);
}
