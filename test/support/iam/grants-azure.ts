import { azurePoisonQueue } from '../../../infra/common/packaging.js';
import type { MockRun } from '../../../infra/preflight/mock-run.js';
import { DEPLOYED_ROLES, type FunctionRole } from '../../../shared/domain/key-layout.js';
import type { GrantDescription, LogicalResource, RecordedAccess, StackGrants } from './access.js';
import {
  attr,
  componentName,
  IamModelError,
  listOf,
  outputString,
  type RoleGrants,
  rolesNamedIn,
  stackGrantsOf,
  wildcardMatcher,
} from './grants-common.js';

/**
 * The Azure half of the grant model: the role assignments the program makes to each function's identity,
 * their role definitions' (data) actions, their scopes and their conditions, evaluated as Azure RBAC does
 * (https://learn.microsoft.com/en-us/azure/role-based-access-control/overview#how-azure-rbac-determines-if-a-user-has-access-to-a-resource):
 * a request is allowed when some assignment to the caller's principal has a scope at or above the resource,
 * a role whose actions or dataActions (minus the not-ones) include the request's action, and a condition,
 * if any, that holds for it. Role assignments are additive; the program declares no deny assignment.
 */

const BLOB = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
const CONTAINER = 'Microsoft.Storage/storageAccounts/blobServices/containers';
const QUEUE_MESSAGES = 'Microsoft.Storage/storageAccounts/queueServices/queues/messages';
const QUEUES = 'Microsoft.Storage/storageAccounts/queueServices/queues';
const ENTITIES = 'Microsoft.Storage/storageAccounts/tableServices/tables/entities';
const TABLES = 'Microsoft.Storage/storageAccounts/tableServices/tables';

export interface AzureRoleDefinition {
  readonly name: string;
  readonly actions: readonly string[];
  readonly notActions?: readonly string[];
  readonly dataActions: readonly string[];
  readonly notDataActions?: readonly string[];
}

/**
 * The built-in roles the program assigns, by their id (the same in every tenant), as Microsoft documents them
 * (https://learn.microsoft.com/en-us/azure/role-based-access-control/built-in-roles/storage,
 * https://learn.microsoft.com/en-us/azure/role-based-access-control/built-in-roles/security#key-vault-secrets-user).
 * Note what is not there: Queue Data Contributor has messages/write but not messages/add/action, Message Sender
 * has add/action only, Message Processor read and process only. Where an operation accepts either of two
 * permissions (Put Message: add/action or write), the recorder says so (a Requirement's alternatives,
 * test/support/iam/wire.ts) and asks for each: a verdict here is about exactly the permission asked.
 */
export const AZURE_BUILT_IN_ROLES: Readonly<Record<string, AzureRoleDefinition>> = {
  'b7e6dc6d-f1e8-4753-8033-0f276bb0955b': {
    name: 'Storage Blob Data Owner',
    actions: [`${CONTAINER}/*`, 'Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action'],
    dataActions: [`${BLOB}/*`],
  },
  'ba92f5b4-2d11-453d-a403-e96b0029c9fe': {
    name: 'Storage Blob Data Contributor',
    actions: [
      `${CONTAINER}/delete`,
      `${CONTAINER}/read`,
      `${CONTAINER}/write`,
      'Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action',
    ],
    dataActions: [`${BLOB}/delete`, `${BLOB}/read`, `${BLOB}/write`, `${BLOB}/move/action`, `${BLOB}/add/action`],
  },
  '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1': {
    name: 'Storage Blob Data Reader',
    actions: [`${CONTAINER}/read`, 'Microsoft.Storage/storageAccounts/blobServices/generateUserDelegationKey/action'],
    dataActions: [`${BLOB}/read`],
  },
  '974c5e8b-45b9-4653-ba55-5f855dd0fb88': {
    name: 'Storage Queue Data Contributor',
    actions: [`${QUEUES}/delete`, `${QUEUES}/read`, `${QUEUES}/write`],
    dataActions: [`${QUEUE_MESSAGES}/delete`, `${QUEUE_MESSAGES}/read`, `${QUEUE_MESSAGES}/write`, `${QUEUE_MESSAGES}/process/action`],
  },
  '19e7f393-937e-4f77-808e-94535e297925': {
    name: 'Storage Queue Data Reader',
    actions: [`${QUEUES}/read`],
    dataActions: [`${QUEUE_MESSAGES}/read`],
  },
  '8a0f0c08-91a1-4084-bc3d-661d67233fed': {
    name: 'Storage Queue Data Message Processor',
    actions: [],
    dataActions: [`${QUEUE_MESSAGES}/read`, `${QUEUE_MESSAGES}/process/action`],
  },
  'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a': {
    name: 'Storage Queue Data Message Sender',
    actions: [],
    dataActions: [`${QUEUE_MESSAGES}/add/action`],
  },
  '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3': {
    name: 'Storage Table Data Contributor',
    actions: [`${TABLES}/read`, `${TABLES}/write`, `${TABLES}/delete`],
    dataActions: [`${ENTITIES}/read`, `${ENTITIES}/write`, `${ENTITIES}/delete`, `${ENTITIES}/add/action`, `${ENTITIES}/update/action`],
  },
  '76199698-9eea-4c19-bc75-cec21354c6b6': {
    name: 'Storage Table Data Reader',
    actions: [`${TABLES}/read`],
    dataActions: [`${ENTITIES}/read`],
  },
  '4633458b-17de-408a-b874-0445c86b69e6': {
    name: 'Key Vault Secrets User',
    actions: [],
    dataActions: ['Microsoft.KeyVault/vaults/secrets/getSecret/action', 'Microsoft.KeyVault/vaults/secrets/readMetadata/action'],
  },
};

// ---------------------------------------------------------------------------------------------------------
// Role assignment conditions, version 2.0, the subset used here
// (https://learn.microsoft.com/en-us/azure/role-based-access-control/conditions-format; storage attributes:
// https://learn.microsoft.com/en-us/azure/storage/blobs/storage-auth-abac-attributes).
// ---------------------------------------------------------------------------------------------------------

/** The attributes a condition can read, by their full name, and where the model takes each from. */
const ABAC_ATTRIBUTES: Readonly<Record<string, keyof AbacAttributes>> = {
  [`@Resource[${BLOB}:path]`]: 'blobPath',
  [`@Resource[${CONTAINER}:name]`]: 'containerName',
  [`@Request[${BLOB}:prefix]`]: 'listPrefix',
  [`@Resource[${QUEUES}:name]`]: 'queueName',
  '@Resource[Microsoft.Storage/storageAccounts:name]': 'accountName',
};

export interface AbacAttributes {
  /** The blob's path within its container; absent for a listing (the container is the resource). */
  readonly blobPath?: string | undefined;
  readonly containerName?: string | undefined;
  /** The prefix a List Blobs asks for, when it asks for one. */
  readonly listPrefix?: string | undefined;
  readonly queueName?: string | undefined;
  readonly accountName?: string | undefined;
}

export interface AbacRequest {
  readonly action: string;
  /** `Blob.List` for List Blobs, the one suboperation of blobs/read a function sends. */
  readonly subOperation?: string | undefined;
  readonly attributes: AbacAttributes;
}

/** Case-sensitive string operators (StringEqualsIgnoreCase and friends compare case-insensitively). */
const ABAC_OPERATORS: Readonly<Record<string, (actual: string, expected: string) => boolean>> = {
  StringEquals: (a, e) => a === e,
  StringNotEquals: (a, e) => a !== e,
  StringEqualsIgnoreCase: (a, e) => a.toLowerCase() === e.toLowerCase(),
  StringNotEqualsIgnoreCase: (a, e) => a.toLowerCase() !== e.toLowerCase(),
  StringStartsWith: (a, e) => a.startsWith(e),
  StringNotStartsWith: (a, e) => !a.startsWith(e),
  StringLike: (a, e) => wildcardMatcher(e)(a),
  StringNotLike: (a, e) => !wildcardMatcher(e)(a),
};

export type AbacExpr =
  | { readonly kind: 'action'; readonly patterns: readonly string[] }
  | { readonly kind: 'subOperation'; readonly names: readonly string[] }
  | { readonly kind: 'compare'; readonly attribute: keyof AbacAttributes; readonly operator: string; readonly value: string }
  | { readonly kind: 'and' | 'or'; readonly left: AbacExpr; readonly right: AbacExpr }
  | { readonly kind: 'not'; readonly operand: AbacExpr };

type AbacToken = { readonly kind: 'word' | 'string' | 'attribute' | 'punct'; readonly value: string };

/**
 * Parse a version 2.0 condition: ActionMatches{...}, SubOperationMatches{...}, `@Resource[...]` / `@Request[...]`
 * of the attributes above compared with a string by a String* operator, AND/OR/NOT (and &&, ||, !),
 * parentheses. Anything else (cross-product operators, other attributes or types, `Exists`) is an
 * IamModelError naming the condition.
 */
export function parseAbacCondition(condition: string): AbacExpr {
  const fail = (what: string): never => {
    throw new IamModelError(
      `the role assignment condition ${JSON.stringify(condition)} uses ${what}, which the grant model does not evaluate`,
    );
  };
  const tokens: AbacToken[] = [];
  for (let i = 0; i < condition.length; ) {
    const c = condition[i] as string;
    const rest = condition.slice(i);
    if (/\s/.test(c)) {
      i++;
    } else if (c === "'") {
      const end = condition.indexOf("'", i + 1);
      if (end < 0) fail('an unterminated string');
      tokens.push({ kind: 'string', value: condition.slice(i + 1, end) });
      i = end + 1;
    } else if (c === '@') {
      const end = condition.indexOf(']', i);
      if (end < 0) fail('an unterminated attribute');
      tokens.push({ kind: 'attribute', value: condition.slice(i, end + 1) });
      i = end + 1;
    } else if (rest.startsWith('&&') || rest.startsWith('||')) {
      tokens.push({ kind: 'word', value: rest.startsWith('&&') ? 'AND' : 'OR' });
      i += 2;
    } else if ('(){},!'.includes(c)) {
      tokens.push(c === '!' ? { kind: 'word', value: 'NOT' } : { kind: 'punct', value: c });
      i++;
    } else {
      const m = /^[A-Za-z][A-Za-z0-9:.]*/.exec(rest);
      if (!m) return fail(`the character ${JSON.stringify(c)}`);
      tokens.push({ kind: 'word', value: m[0] });
      i += m[0].length;
    }
  }
  let pos = 0;
  const peek = () => tokens[pos];
  const is = (kind: AbacToken['kind'], value: string) => peek()?.kind === kind && peek()?.value.toUpperCase() === value.toUpperCase();
  const expect = (kind: AbacToken['kind'], value: string) => {
    if (!is(kind, value))
      fail(
        peek() === undefined ? `an incomplete condition (expected ${value})` : `${JSON.stringify(peek()?.value)} where ${value} belongs`,
      );
    pos++;
  };
  const stringSet = (): string[] => {
    expect('punct', '{');
    const values: string[] = [];
    for (;;) {
      const t = peek();
      if (t?.kind !== 'string') return fail(`a non-string in a set (${t?.value ?? 'none'})`);
      values.push(t.value);
      pos++;
      if (is('punct', '}')) break;
      expect('punct', ',');
    }
    pos++;
    return values;
  };
  const primary = (): AbacExpr => {
    const t = peek();
    if (t === undefined) return fail('an incomplete condition');
    if (t.kind === 'punct' && t.value === '(') {
      pos++;
      const inner = or();
      expect('punct', ')');
      return inner;
    }
    if (t.kind === 'word' && t.value === 'ActionMatches') {
      pos++;
      return { kind: 'action', patterns: stringSet() };
    }
    if (t.kind === 'word' && t.value === 'SubOperationMatches') {
      pos++;
      return { kind: 'subOperation', names: stringSet() };
    }
    if (t.kind === 'attribute') {
      const attribute = Object.entries(ABAC_ATTRIBUTES).find(([name]) => name.toLowerCase() === t.value.toLowerCase())?.[1];
      if (attribute === undefined) return fail(`the attribute ${t.value}`);
      pos++;
      const op = peek();
      if (op?.kind !== 'word' || ABAC_OPERATORS[op.value] === undefined) return fail(`the operator ${op?.value ?? '(none)'}`);
      pos++;
      const v = peek();
      if (v?.kind !== 'string') return fail(`a non-string operand (${v?.value ?? 'none'}) of ${op.value}`);
      pos++;
      return { kind: 'compare', attribute, operator: op.value, value: v.value };
    }
    return fail(JSON.stringify(t.value));
  };
  const unary = (): AbacExpr => {
    if (is('word', 'NOT')) {
      pos++;
      return { kind: 'not', operand: unary() };
    }
    return primary();
  };
  const chain = (kind: 'and' | 'or', word: string, next: () => AbacExpr) => (): AbacExpr => {
    let left = next();
    while (is('word', word)) {
      pos++;
      left = { kind, left, right: next() };
    }
    return left;
  };
  const and = chain('and', 'AND', unary);
  const or: () => AbacExpr = chain('or', 'OR', and);
  const result = or();
  if (pos < tokens.length) fail(JSON.stringify(peek()?.value));
  return result;
}

/**
 * Three-valued: a comparison on an attribute the request does not carry (a blob path on a listing) is
 * `unknown`, which AND/OR resolve when the other side decides and which otherwise fails the condition: Azure
 * fails the access check of an operation that cannot evaluate a condition (the storage ABAC page, on
 * suboperations), which is why conditions exclude Blob.List from path checks.
 */
type Tri = boolean | 'unknown';

function evaluate(e: AbacExpr, request: AbacRequest): Tri {
  switch (e.kind) {
    case 'action':
      return e.patterns.some((p) => wildcardMatcher(p, { ignoreCase: true })(request.action));
    case 'subOperation':
      return request.subOperation !== undefined && e.names.includes(request.subOperation);
    case 'compare': {
      const actual = request.attributes[e.attribute];
      if (actual === undefined) return 'unknown';
      return (ABAC_OPERATORS[e.operator] as (a: string, v: string) => boolean)(actual, e.value);
    }
    case 'not': {
      const v = evaluate(e.operand, request);
      return v === 'unknown' ? v : !v;
    }
    case 'and': {
      const [l, r] = [evaluate(e.left, request), evaluate(e.right, request)];
      return l === false || r === false ? false : l === 'unknown' || r === 'unknown' ? 'unknown' : true;
    }
    case 'or': {
      const [l, r] = [evaluate(e.left, request), evaluate(e.right, request)];
      return l === true || r === true ? true : l === 'unknown' || r === 'unknown' ? 'unknown' : false;
    }
  }
}

/** Does the condition allow this request (an unevaluable condition does not)? */
export function evaluateAbacCondition(e: AbacExpr, request: AbacRequest): boolean {
  return evaluate(e, request) === true;
}

// ---------------------------------------------------------------------------------------------------------
// Assignments
// ---------------------------------------------------------------------------------------------------------

interface Assignment {
  readonly id: string;
  readonly principalId: string;
  readonly scope: string;
  readonly role: AzureRoleDefinition;
  readonly condition?: { readonly text: string; readonly parsed: AbacExpr };
  /** Whether the role (ignoring the condition) holds the action. */
  holds(action: string): boolean;
}

function roleDefinition(run: MockRun, roleDefinitionId: string, where: string): AzureRoleDefinition {
  const builtIn = AZURE_BUILT_IN_ROLES[roleDefinitionId.split('/').at(-1)?.toLowerCase() ?? ''];
  if (builtIn !== undefined) return builtIn;
  // A custom role definition declared by the program: its permissions are in its inputs.
  const custom = run
    .ofType('azure-native:authorization:RoleDefinition')
    .find((r) => r.id === roleDefinitionId || attr(r, 'id') === roleDefinitionId);
  if (custom !== undefined) {
    const permissions = listOf(custom.inputs.permissions) as Record<string, unknown>[];
    const all = (key: string) => permissions.flatMap((p) => listOf(p[key]).map(String));
    return {
      name: attr(custom, 'roleName') ?? custom.name,
      actions: all('actions'),
      notActions: all('notActions'),
      dataActions: all('dataActions'),
      notDataActions: all('notDataActions'),
    };
  }
  throw new IamModelError(
    `${where} assigns the role ${roleDefinitionId}, which the model does not know: add it to AZURE_BUILT_IN_ROLES with Microsoft's list`,
  );
}

/** The role assignments to these principals (the functions' identities; the deployer's own, say, are not read). */
function assignmentsOf(run: MockRun, principals: ReadonlySet<string>): Assignment[] {
  return run.ofType('azure-native:authorization:RoleAssignment').flatMap((r) => {
    const where = `role assignment ${r.name}`;
    const [principalId, scope, roleDefinitionId] = [attr(r, 'principalId'), attr(r, 'scope'), attr(r, 'roleDefinitionId')];
    if (principalId === undefined || scope === undefined || roleDefinitionId === undefined) {
      throw new IamModelError(`${where} lacks a principalId, scope or roleDefinitionId`);
    }
    if (!principals.has(principalId)) return [];
    const role = roleDefinition(run, roleDefinitionId, where);
    const text = attr(r, 'condition');
    if (text !== undefined && attr(r, 'conditionVersion') !== undefined && attr(r, 'conditionVersion') !== '2.0') {
      throw new IamModelError(`${where}: condition version ${attr(r, 'conditionVersion')} is not modelled (2.0 is)`);
    }
    // Action names are case-insensitive in Azure; `*` is a wildcard in role definitions.
    const matchAny = (patterns: readonly string[] | undefined) => {
      const ms = (patterns ?? []).map((p) => wildcardMatcher(p, { ignoreCase: true }));
      return (a: string) => ms.some((m) => m(a));
    };
    const [allowed, notAllowed] = [
      matchAny([...role.actions, ...role.dataActions]),
      matchAny([...(role.notActions ?? []), ...(role.notDataActions ?? [])]),
    ];
    return [
      {
        id: r.name,
        principalId,
        scope,
        role,
        ...(text === undefined ? {} : { condition: { text, parsed: parseAbacCondition(text) } }),
        holds: (action: string) => allowed(action) && !notAllowed(action),
      },
    ];
  });
}

/** Which function roles each principal serves: one identity per role (named for it), or the app's one identity for all. */
function principalsOf(run: MockRun): Map<string, FunctionRole[]> {
  const component = componentName(run, 'tessera:azure:TilingStack');
  const principals = new Map<string, FunctionRole[]>();
  for (const identity of run.ofType('azure-native:managedidentity:UserAssignedIdentity')) {
    const principalId = attr(identity, 'principalId');
    if (principalId === undefined) continue;
    principals.set(principalId, rolesNamedIn(identity.name, component));
  }
  // With one identity per role, an identity named for none is the Functions host's (host storage, the package,
  // the queue triggers), not a function's code. With a single identity and none named for a role, it is the
  // whole app's: every deployed function runs in that one app and authenticates as it.
  const perRole = [...principals.values()].some((roles) => roles.length > 0);
  for (const [principalId, roles] of principals) {
    if (roles.length === 0 && !perRole && principals.size === 1) principals.set(principalId, [...DEPLOYED_ROLES]);
  }
  return principals;
}

interface AzureResource {
  /** The resource id role assignment scopes are compared with. */
  readonly id: string;
  readonly attributes: AbacAttributes;
}

function resourcesOf(run: MockRun): Partial<Record<LogicalResource, AzureResource | undefined>> {
  const accountName = outputString(run, 'storageAccount');
  const account = run.ofType('azure-native:storage:StorageAccount').find((a) => attr(a, 'accountName') === accountName);
  const accountId = attr(account, 'id');
  if (accountId === undefined || accountName === undefined)
    throw new IamModelError('the Azure stack has no data storage account (`storageAccount` output)');
  const container = (name: string | undefined): AzureResource | undefined =>
    name === undefined
      ? undefined
      : { id: `${accountId}/blobServices/default/containers/${name}`, attributes: { containerName: name, accountName } };
  const table = (name: string | undefined): AzureResource | undefined =>
    name === undefined ? undefined : { id: `${accountId}/tableServices/default/tables/${name}`, attributes: { accountName } };
  const queue = (name: string | undefined): AzureResource | undefined =>
    name === undefined || !run.ofType('azure-native:storage:Queue').some((q) => attr(q, 'queueName') === name)
      ? undefined
      : { id: `${accountId}/queueServices/default/queues/${name}`, attributes: { queueName: name, accountName } };
  const sceneQueue = outputString(run, 'sceneQueue');
  const secrets = run.ofType('azure-native:keyvault:Secret');
  if (secrets.length > 1) throw new IamModelError(`the stack has ${secrets.length} Key Vault secrets; which one is the feature sink's?`);
  const secretId = attr(secrets[0], 'id');
  return {
    sourceBucket: container(outputString(run, 'sourceContainer')),
    outputBucket: container(outputString(run, 'outputContainer')),
    claimsTable: table(outputString(run, 'claimsTable')),
    manifestTable: table(outputString(run, 'manifestTable')),
    tileQueue: queue(outputString(run, 'tileQueue')),
    sceneQueue: queue(sceneQueue),
    ingestQueue: queue(outputString(run, 'ingestQueue')),
    deadLetterQueue: queue(outputString(run, 'poisonQueue')),
    ingestDeadLetterQueue: queue(outputString(run, 'ingestPoisonQueue')),
    // The host moves a message to `<queue>-poison` (the program creates each up front); the scene's is in no output.
    sceneDeadLetterQueue: queue(sceneQueue === undefined ? undefined : azurePoisonQueue(sceneQueue)),
    ...(secretId === undefined ? {} : { featureSinkSecret: { id: secretId, attributes: {} } }),
  };
}

/** Scopes are resource ids: an assignment covers its scope and everything below it, compared case-insensitively. */
function covers(scope: string, resourceId: string): boolean {
  const [s, r] = [scope.toLowerCase().replace(/\/+$/, ''), resourceId.toLowerCase()];
  return r === s || r.startsWith(`${s}/`);
}

/** The Azure StackGrants of a program run under mocks. */
export function azureStackGrants(run: MockRun): StackGrants {
  const principals = principalsOf(run);
  const assignments = assignmentsOf(run, new Set([...principals].filter(([, served]) => served.length > 0).map(([p]) => p)));
  const resources = resourcesOf(run);
  const roles = new Map<FunctionRole, RoleGrants>();
  const principalsServing = (r: FunctionRole) => [...principals].filter(([, served]) => served.includes(r)).map(([p]) => p);
  for (const role of new Set([...principals.values()].flat())) {
    const mine = assignments.filter((a) => principalsServing(role).includes(a.principalId));
    const grants: GrantDescription[] = mine.map((a) => ({
      id: a.id,
      role,
      text: `${a.role.name} on ${a.scope}${a.condition ? ` if ${a.condition.text}` : ''}`,
    }));
    roles.set(role, {
      grants,
      check(access: RecordedAccess) {
        const resource = resources[access.resource];
        if (resource === undefined) return { allowed: false };
        const isBlob = access.resource === 'sourceBucket' || access.resource === 'outputBucket';
        const list = access.list === true;
        const attributes: AbacAttributes = {
          ...resource.attributes,
          ...(isBlob && !list && access.key !== undefined ? { blobPath: access.key } : {}),
          ...(isBlob && list && access.key ? { listPrefix: access.key } : {}),
        };
        const subOperation = isBlob && list ? 'Blob.List' : undefined;
        const grantFor = (action: string) =>
          mine.find(
            (a) =>
              covers(a.scope, resource.id) &&
              a.holds(action) &&
              (a.condition === undefined || evaluateAbacCondition(a.condition.parsed, { action, subOperation, attributes })),
          );
        const granting = grantFor(access.action);
        return granting === undefined ? { allowed: false } : { allowed: true, grant: granting.id };
      },
    });
  }
  return stackGrantsOf('azure', roles);
}
