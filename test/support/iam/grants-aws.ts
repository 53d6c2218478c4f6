import { ACCOUNT_ID, type MockRun, type RecordedResource } from '../../../infra/preflight/mock-run.js';
import { FUNCTION_ROLES, type FunctionRole } from '../../../shared/domain/key-layout.js';
import type { AccessVerdict, GrantDescription, LogicalResource, RecordedAccess, StackGrants } from './access.js';
import {
  attr,
  byAttr,
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
 * The AWS half of the grant model: each role's IAM policy documents, read from the program under mocks,
 * evaluated the way IAM evaluates an identity-based request within one account
 * (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
 * an explicit Deny in any applicable policy wins; otherwise an Allow in the role's policies (inline, attached
 * managed) or in the resource's own policy (bucket policy, queue policy) naming the role allows; otherwise the
 * request is implicitly denied. Only what the program uses is modelled, and anything else is an IamModelError:
 * Action/NotAction, Resource/NotResource, the condition operators below, and the two condition keys a
 * function's request carries (`s3:prefix` on a listing, `aws:SecureTransport`, always true for the SDKs).
 */

/** One statement as IAM reads it (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements.html). */
export interface AwsStatementJson {
  readonly Sid?: string;
  readonly Effect: 'Allow' | 'Deny';
  readonly Principal?: unknown;
  readonly NotPrincipal?: unknown;
  readonly Action?: string | readonly string[];
  readonly NotAction?: string | readonly string[];
  readonly Resource?: string | readonly string[];
  readonly NotResource?: string | readonly string[];
  readonly Condition?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
}

export interface AwsPolicyDocumentJson {
  readonly Version?: string;
  readonly Id?: string;
  readonly Statement: AwsStatementJson | readonly AwsStatementJson[];
}

/** A policy document with the name of the resource that carries it (the RolePolicy, the managed Policy, the BucketPolicy). */
export interface NamedAwsPolicy {
  readonly name: string;
  readonly document: AwsPolicyDocumentJson;
}

/** What a request brings to the evaluation: its action, the ARN it acts on, and its condition keys. */
export interface AwsRequest {
  readonly action: string;
  readonly resource: string;
  /** Condition keys present in the request (lower case: IAM compares key names case-insensitively). */
  readonly context: Readonly<Record<string, string>>;
  /** The role's ARN, matched against a resource policy's Principal. */
  readonly principalArn?: string | undefined;
}

/** A statement ready to evaluate. */
export interface AwsStatementModel {
  readonly id: string;
  readonly effect: 'Allow' | 'Deny';
  readonly text: string;
  applies(request: AwsRequest): boolean;
}

/** Request condition keys the model knows how to fill (lower case). */
const MODELLED_KEYS = new Set(['s3:prefix', 'aws:securetransport']);

const STATEMENT_KEYS = new Set([
  'Sid',
  'Effect',
  'Principal',
  'NotPrincipal',
  'Action',
  'NotAction',
  'Resource',
  'NotResource',
  'Condition',
]);

type Compare = (actual: string, expected: string) => boolean;

/**
 * The condition operators the model evaluates
 * (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).
 * `negated` operators hold when the key is absent from the request; the others fail then, unless `...IfExists`.
 */
const OPERATORS: Readonly<Record<string, { readonly compare: Compare; readonly negated: boolean }>> = {
  StringEquals: { compare: (a, e) => a === e, negated: false },
  StringNotEquals: { compare: (a, e) => a === e, negated: true },
  StringEqualsIgnoreCase: { compare: (a, e) => a.toLowerCase() === e.toLowerCase(), negated: false },
  StringNotEqualsIgnoreCase: { compare: (a, e) => a.toLowerCase() === e.toLowerCase(), negated: true },
  StringLike: { compare: (a, e) => wildcardMatcher(e)(a), negated: false },
  StringNotLike: { compare: (a, e) => wildcardMatcher(e)(a), negated: true },
  // ArnEquals and ArnLike behave alike: both take wildcards in any ARN segment.
  ArnEquals: { compare: (a, e) => wildcardMatcher(e)(a), negated: false },
  ArnLike: { compare: (a, e) => wildcardMatcher(e)(a), negated: false },
  ArnNotEquals: { compare: (a, e) => wildcardMatcher(e)(a), negated: true },
  ArnNotLike: { compare: (a, e) => wildcardMatcher(e)(a), negated: true },
  Bool: { compare: (a, e) => a.toLowerCase() === e.toLowerCase(), negated: false },
};

function strings(value: unknown, where: string): string[] {
  return listOf(value).map((v) => {
    if (typeof v === 'boolean' || typeof v === 'number') return String(v);
    if (typeof v !== 'string') throw new IamModelError(`${where}: expected strings, found ${JSON.stringify(v)}`);
    return v;
  });
}

/** Policy variables (`${aws:username}`) are resolved per request by IAM; no function policy here uses one. */
function noVariables(values: readonly string[], where: string): void {
  const v = values.find((s) => s.includes('${'));
  if (v !== undefined) throw new IamModelError(`${where}: the policy variable in ${JSON.stringify(v)} is not modelled`);
}

function compileCondition(condition: AwsStatementJson['Condition'], where: string): (context: AwsRequest['context']) => boolean {
  const tests: ((context: AwsRequest['context']) => boolean)[] = [];
  for (const [operatorName, block] of Object.entries(condition ?? {})) {
    if (operatorName.includes(':')) {
      throw new IamModelError(`${where}: the set operator ${operatorName} is not modelled (no key a function sends is multivalued)`);
    }
    const ifExists = operatorName.endsWith('IfExists');
    const base = ifExists ? operatorName.slice(0, -'IfExists'.length) : operatorName;
    for (const [rawKey, rawValues] of Object.entries(block)) {
      const key = rawKey.toLowerCase();
      if (!MODELLED_KEYS.has(key)) {
        throw new IamModelError(`${where}: the condition key ${rawKey} is not modelled (known: ${[...MODELLED_KEYS].join(', ')})`);
      }
      const expected = strings(rawValues, `${where} ${operatorName} ${rawKey}`);
      noVariables(expected, where);
      if (base === 'Null') {
        // Null: "true" holds when the key is absent, "false" when it is present.
        tests.push((context) => expected.some((e) => (e.toLowerCase() === 'true') === (context[key] === undefined)));
        continue;
      }
      const operator = OPERATORS[base];
      if (operator === undefined) throw new IamModelError(`${where}: the condition operator ${operatorName} is not modelled`);
      tests.push((context) => {
        const actual = context[key];
        if (actual === undefined) return ifExists || operator.negated;
        // Several values for one key: any of them matches (negated: none of them does).
        const any = expected.some((e) => operator.compare(actual, e));
        return operator.negated ? !any : any;
      });
    }
  }
  return (context) => tests.every((t) => t(context));
}

/** The role ARNs a resource policy statement's Principal names; undefined when it can name no IAM role at all. */
function compilePrincipal(statement: AwsStatementJson, where: string): ((principalArn: string | undefined) => boolean) | undefined {
  if (statement.NotPrincipal !== undefined) throw new IamModelError(`${where}: NotPrincipal is not modelled`);
  const principal = statement.Principal;
  if (principal === '*') return () => true;
  if (typeof principal !== 'object' || principal === null) {
    throw new IamModelError(`${where}: a resource policy statement needs a Principal, found ${JSON.stringify(principal)}`);
  }
  // Service, Federated and CanonicalUser principals never stand for a function's role (S3 delivering
  // notifications to a queue, say); an account principal delegates to the account's identity policies, so it
  // grants nothing by itself.
  const aws = strings((principal as Record<string, unknown>).AWS, `${where} Principal.AWS`);
  if (aws.length === 0) return undefined;
  return (principalArn) => aws.some((p) => p === '*' || (principalArn !== undefined && p === principalArn));
}

function describe(
  effect: string,
  actions: readonly string[],
  notAction: boolean,
  resources: readonly string[],
  notResource: boolean,
): string {
  const a = `${notAction ? 'every action but ' : ''}${actions.join(', ')}`;
  const r = `${notResource ? 'everything but ' : ''}${resources.join(', ')}`;
  return `${effect} ${a} on ${r}`;
}

/**
 * Compile one policy document. `policy.name` names the resource that carries it (a statement without a Sid
 * is `name#index`); a resource policy's statements also match their Principal against the role's ARN.
 */
export function compileAwsPolicy(policy: NamedAwsPolicy, options: { resourcePolicy?: boolean } = {}): AwsStatementModel[] {
  const statements = listOf(policy.document.Statement) as AwsStatementJson[];
  return statements.map((s, index) => {
    const where = `policy ${policy.name} statement ${s.Sid ?? index}`;
    for (const key of Object.keys(s)) if (!STATEMENT_KEYS.has(key)) throw new IamModelError(`${where}: the element ${key} is not modelled`);
    if (s.Effect !== 'Allow' && s.Effect !== 'Deny')
      throw new IamModelError(`${where}: Effect must be Allow or Deny, found ${String(s.Effect)}`);
    if (!options.resourcePolicy && (s.Principal !== undefined || s.NotPrincipal !== undefined)) {
      throw new IamModelError(`${where}: an identity policy cannot name a Principal`);
    }
    if ((s.Action === undefined) === (s.NotAction === undefined))
      throw new IamModelError(`${where}: needs exactly one of Action, NotAction`);
    if ((s.Resource === undefined) === (s.NotResource === undefined))
      throw new IamModelError(`${where}: needs exactly one of Resource, NotResource`);
    const principal = options.resourcePolicy ? compilePrincipal(s, where) : () => true;
    if (principal === undefined) {
      // Governs callers that are not IAM roles: it can neither allow nor deny a function's request.
      return {
        id: s.Sid ?? `${policy.name}#${index}`,
        effect: s.Effect,
        text: `${s.Effect} for ${JSON.stringify(s.Principal)} only`,
        applies: () => false,
      };
    }
    const notAction = s.NotAction !== undefined;
    const actionPatterns = strings(s.Action ?? s.NotAction, `${where} Action`);
    for (const p of actionPatterns) {
      if (p !== '*' && !p.includes(':')) throw new IamModelError(`${where}: ${JSON.stringify(p)} is not an action (service:Action)`);
    }
    // Action names are case-insensitive in IAM; ARNs are not.
    const actionMatchers = actionPatterns.map((p) => wildcardMatcher(p, { ignoreCase: true }));
    const notResource = s.NotResource !== undefined;
    const resourcePatterns = strings(s.Resource ?? s.NotResource, `${where} Resource`);
    noVariables(resourcePatterns, where);
    const resourceMatchers = resourcePatterns.map((p) => wildcardMatcher(p));
    const condition = compileCondition(s.Condition, where);
    const conditionText = s.Condition === undefined ? '' : ` when ${JSON.stringify(s.Condition)}`;
    return {
      id: s.Sid ?? `${policy.name}#${index}`,
      effect: s.Effect,
      text: describe(s.Effect, actionPatterns, notAction, resourcePatterns, notResource) + conditionText,
      applies(request) {
        if (!principal(request.principalArn)) return false;
        if (actionMatchers.some((m) => m(request.action)) === notAction) return false;
        if (resourceMatchers.some((m) => m(request.resource)) === notResource) return false;
        return condition(request.context);
      },
    };
  });
}

/** IAM's verdict over a set of applicable statements: an explicit Deny wins, then any Allow, else implicit deny. */
export function evaluateAwsStatements(
  statements: readonly AwsStatementModel[],
  request: AwsRequest,
): AccessVerdict & { deniedBy?: string } {
  let allowedBy: string | undefined;
  for (const s of statements) {
    if (!s.applies(request)) continue;
    if (s.effect === 'Deny') return { allowed: false, deniedBy: s.id };
    allowedBy ??= s.id;
  }
  return allowedBy === undefined ? { allowed: false } : { allowed: true, grant: allowedBy };
}

/** The program's resources as IAM knows them, and each role's policies. */
export interface AwsStackModel {
  /** The ARN of each logical resource the stack deploys. */
  readonly arns: ReadonlyMap<LogicalResource, string>;
  readonly roles: ReadonlyMap<FunctionRole, { readonly roleArn: string | undefined; readonly policies: readonly NamedAwsPolicy[] }>;
  /** Resource-based policies (bucket policies, queue policies) by the ARN of the resource they guard. */
  readonly resourcePolicies: ReadonlyMap<string, readonly NamedAwsPolicy[]>;
}

const T = {
  role: 'aws:iam/role:Role',
  rolePolicy: 'aws:iam/rolePolicy:RolePolicy',
  policy: 'aws:iam/policy:Policy',
  rolePolicyAttachment: 'aws:iam/rolePolicyAttachment:RolePolicyAttachment',
  policyAttachment: 'aws:iam/policyAttachment:PolicyAttachment',
  lambda: 'aws:lambda/function:Function',
  bucket: 'aws:s3/bucket:Bucket',
  bucketPolicy: 'aws:s3/bucketPolicy:BucketPolicy',
  queue: 'aws:sqs/queue:Queue',
  queuePolicy: 'aws:sqs/queuePolicy:QueuePolicy',
  table: 'aws:dynamodb/table:Table',
  secret: 'aws:secretsmanager/secret:Secret',
  parameter: 'aws:ssm/parameter:Parameter',
  component: 'tessera:aws:TilingStack',
} as const;

function parseDocument(value: unknown, where: string): AwsPolicyDocumentJson {
  const doc = typeof value === 'string' ? (JSON.parse(value) as unknown) : value;
  if (typeof doc !== 'object' || doc === null || !('Statement' in doc)) throw new IamModelError(`${where}: not a policy document`);
  return doc as AwsPolicyDocumentJson;
}

/** The ARN a queue redrives to (its DLQ), from its redrive policy. */
function deadLetterOf(queue: RecordedResource | undefined): string | undefined {
  const redrive = attr(queue, 'redrivePolicy');
  return redrive === undefined ? undefined : (JSON.parse(redrive) as { deadLetterTargetArn?: string }).deadLetterTargetArn;
}

function resourceArns(run: MockRun): Map<LogicalResource, string> {
  const arns = new Map<LogicalResource, string>();
  const set = (name: LogicalResource, arn: string | undefined) => {
    if (arn !== undefined) arns.set(name, arn);
  };
  // The stack outputs say which bucket, table and queue is which; the resources give their ARNs.
  set('sourceBucket', attr(byAttr(run, T.bucket, 'bucket', outputString(run, 'sourceBucket')), 'arn'));
  set('outputBucket', attr(byAttr(run, T.bucket, 'bucket', outputString(run, 'outputBucket')), 'arn'));
  set('claimsTable', attr(byAttr(run, T.table, 'name', outputString(run, 'claimsTable')), 'arn'));
  set('manifestTable', attr(byAttr(run, T.table, 'name', outputString(run, 'manifestTable')), 'arn'));
  const queue = (output: string) => byAttr(run, T.queue, 'url', outputString(run, output));
  const [tile, scene, ingest] = [queue('tileQueueUrl'), queue('sceneQueueUrl'), queue('ingestQueueUrl')];
  set('tileQueue', attr(tile, 'arn'));
  set('sceneQueue', attr(scene, 'arn'));
  set('ingestQueue', attr(ingest, 'arn'));
  // Each trigger queue's own redrive target is its dead-letter queue (the scene DLQ is in no output).
  set('deadLetterQueue', deadLetterOf(tile));
  set('sceneDeadLetterQueue', deadLetterOf(scene));
  set('ingestDeadLetterQueue', deadLetterOf(ingest));
  const secrets = [...run.ofType(T.secret), ...run.ofType(T.parameter).filter((p) => attr(p, 'type') === 'SecureString')];
  if (secrets.length > 1) {
    throw new IamModelError(
      `the stack has ${secrets.length} secrets (${secrets.map((s) => s.name).join(', ')}); which one is the feature sink's?`,
    );
  }
  if (secrets[0] !== undefined) {
    const arn = attr(secrets[0], 'arn');
    if (arn === undefined)
      throw new IamModelError(`the secret ${secrets[0].name} has no ARN under the mocks: add its type to infra/preflight/mock-run.ts`);
    arns.set('featureSinkSecret', arn);
  }
  return arns;
}

/** Does a policy attachment's `role` input name this IAM role (Pulumi accepts its name or id, ARN in some cases)? */
function namesRole(value: unknown, role: RecordedResource): boolean {
  return typeof value === 'string' && [role.id, attr(role, 'name'), attr(role, 'arn')].includes(value);
}

function managedPolicy(run: MockRun, arn: string, where: string): NamedAwsPolicy {
  const policy = byAttr(run, T.policy, 'arn', arn);
  if (policy === undefined) {
    // An AWS managed policy (arn:aws:iam::aws:policy/...) is not in the program: its document cannot be read here.
    throw new IamModelError(`${where} attaches ${arn}, which the program does not declare; its document cannot be evaluated`);
  }
  return { name: policy.name, document: parseDocument(policy.inputs.policy, `policy ${policy.name}`) };
}

/** Every policy document that applies to an IAM role: inline (RolePolicy, inlinePolicies) and attached managed policies. */
function policiesOf(run: MockRun, role: RecordedResource): NamedAwsPolicy[] {
  const policies: NamedAwsPolicy[] = [];
  for (const rp of run.ofType(T.rolePolicy).filter((p) => namesRole(p.inputs.role, role))) {
    policies.push({ name: rp.name, document: parseDocument(rp.inputs.policy, `role policy ${rp.name}`) });
  }
  for (const inline of listOf(role.inputs.inlinePolicies) as { name?: string; policy?: unknown }[]) {
    if (inline.policy === undefined || inline.policy === '') continue;
    const name = `${role.name}/${inline.name ?? 'inline'}`;
    policies.push({ name, document: parseDocument(inline.policy, `inline policy ${name}`) });
  }
  const attached = [
    ...strings(role.inputs.managedPolicyArns, `role ${role.name} managedPolicyArns`),
    ...run
      .ofType(T.rolePolicyAttachment)
      .filter((a) => namesRole(a.inputs.role, role))
      .map((a) => String(a.inputs.policyArn)),
    ...run
      .ofType(T.policyAttachment)
      .filter((a) => listOf(a.inputs.roles).some((r) => namesRole(r, role)))
      .map((a) => String(a.inputs.policyArn)),
  ];
  for (const arn of new Set(attached)) policies.push(managedPolicy(run, arn, `role ${role.name}`));
  return policies;
}

/** Read the AWS program's grants: which IAM role each function runs as, and every document that applies to it. */
export function awsStackModel(run: MockRun): AwsStackModel {
  const component = componentName(run, T.component);
  const roles = new Map<FunctionRole, { roleArn: string | undefined; policies: NamedAwsPolicy[] }>();
  const iamRoles = run.ofType(T.role);
  const attachedPolicyArns = new Set<string>();
  for (const role of FUNCTION_ROLES) {
    // A deployed role is the IAM role its Lambda function runs as; one without a function (verify) is the IAM
    // role named for it, if the program declares one.
    const fn = run.ofType(T.lambda).find((f) => rolesNamedIn(f.name, component).includes(role));
    const iamRole =
      fn !== undefined
        ? byAttr(run, T.role, 'arn', attr(fn, 'role'))
        : iamRoles.find((r) => rolesNamedIn(r.name, component).includes(role));
    const policies = iamRole === undefined ? [] : policiesOf(run, iamRole);
    for (const p of policies) {
      const arn = attr(
        run.ofType(T.policy).find((x) => x.name === p.name),
        'arn',
      );
      if (arn !== undefined) attachedPolicyArns.add(arn);
    }
    roles.set(role, { roleArn: attr(iamRole, 'arn'), policies });
  }
  // A managed policy attached to no role but named for one (the verify role's policy, published for the
  // operators who run `tessera verify`) is that role's grant.
  for (const policy of run.ofType(T.policy)) {
    const arn = attr(policy, 'arn');
    if (arn !== undefined && attachedPolicyArns.has(arn)) continue;
    for (const role of rolesNamedIn(policy.name, component)) {
      roles.get(role)?.policies.push({ name: policy.name, document: parseDocument(policy.inputs.policy, `policy ${policy.name}`) });
    }
  }
  const resourcePolicies = new Map<string, NamedAwsPolicy[]>();
  const addResourcePolicy = (arn: string | undefined, p: RecordedResource) => {
    if (arn === undefined) return;
    const list = resourcePolicies.get(arn) ?? [];
    list.push({ name: p.name, document: parseDocument(p.inputs.policy, `resource policy ${p.name}`) });
    resourcePolicies.set(arn, list);
  };
  for (const bp of run.ofType(T.bucketPolicy)) {
    const bucket = run.ofType(T.bucket).find((b) => bp.inputs.bucket === b.id || bp.inputs.bucket === attr(b, 'bucket'));
    addResourcePolicy(attr(bucket, 'arn'), bp);
  }
  for (const qp of run.ofType(T.queuePolicy)) addResourcePolicy(attr(byAttr(run, T.queue, 'url', attr(qp, 'queueUrl')), 'arn'), qp);
  return { arns: resourceArns(run), roles, resourcePolicies };
}

const BUCKETS: ReadonlySet<LogicalResource> = new Set(['sourceBucket', 'outputBucket']);

/** The ARN and condition keys IAM evaluates one recorded access with. */
function requestOf(access: RecordedAccess, arn: string, principalArn: string | undefined): AwsRequest {
  if (!BUCKETS.has(access.resource))
    return { action: access.action, resource: arn, context: { 'aws:securetransport': 'true' }, principalArn };
  // A listing acts on the bucket and carries the prefix it asked for as s3:prefix (absent when it asked for none);
  // an object action acts on `bucket/key`.
  const context: Record<string, string> = { 'aws:securetransport': 'true' };
  if (access.list === true) {
    if (access.key !== undefined) context['s3:prefix'] = access.key;
    return { action: access.action, resource: arn, context, principalArn };
  }
  return { action: access.action, resource: access.key === undefined ? arn : `${arn}/${access.key}`, context, principalArn };
}

/** Statement ids a report can list: the Sid, qualified by its policy when two policies of one role reuse a Sid. */
function uniqueIds(models: { policy: string; statement: AwsStatementModel }[]): AwsStatementModel[] {
  const counts = new Map<string, number>();
  for (const m of models) counts.set(m.statement.id, (counts.get(m.statement.id) ?? 0) + 1);
  return models.map(({ policy, statement }) =>
    (counts.get(statement.id) ?? 0) > 1 ? { ...statement, id: `${policy}/${statement.id}` } : statement,
  );
}

/** Readable grant text: the mock's ARNs shown as the logical resources they are. */
function withLogicalNames(text: string, arns: ReadonlyMap<LogicalResource, string>): string {
  let out = text;
  // Longest first, so a queue's ARN is not read as the prefix of its DLQ's.
  for (const [name, arn] of [...arns].sort((a, b) => b[1].length - a[1].length)) out = out.split(arn).join(`<${name}>`);
  return out;
}

/** The AWS StackGrants of a program run under mocks. */
export function awsStackGrants(run: MockRun): StackGrants {
  const model = awsStackModel(run);
  const roles = new Map<FunctionRole, RoleGrants>();
  const resourceStatements = new Map(
    [...model.resourcePolicies].map(([arn, policies]) => [
      arn,
      policies.flatMap((p) => compileAwsPolicy(p, { resourcePolicy: true }).map((s) => ({ ...s, id: `${p.name}/${s.id}` }))),
    ]),
  );
  for (const [role, { roleArn, policies }] of model.roles) {
    const identity = uniqueIds(policies.flatMap((p) => compileAwsPolicy(p).map((statement) => ({ policy: p.name, statement }))));
    const grants: GrantDescription[] = identity.map((s) => ({ id: s.id, role, text: withLogicalNames(s.text, model.arns) }));
    roles.set(role, {
      grants,
      check(access) {
        const arn = model.arns.get(access.resource);
        if (arn === undefined) return { allowed: false };
        // The resource's own policy joins the evaluation (its Deny wins as any other; its Allow naming the role grants).
        const guarding = [...(resourceStatements.get(arn) ?? [])];
        const { allowed, grant } = evaluateAwsStatements([...identity, ...guarding], requestOf(access, arn, roleArn));
        return allowed ? { allowed, grant } : { allowed };
      },
    });
  }
  return stackGrantsOf('aws', roles);
}

/** Physical names (or full ARNs) of the resources a test stack uses in place of the mock's. */
export type AwsResourceNames = Partial<Readonly<Record<LogicalResource, string>>>;

export interface AwsArnContext {
  /** Region of the tables, queues and secrets the names refer to; default eu-west-1 (the mock's). */
  readonly region?: string;
  /** Account of those resources; default the mock's (moto's default account is the same, 123456789012). */
  readonly accountId?: string;
}

function arnFor(resource: LogicalResource, name: string, ctx: Required<AwsArnContext>): string {
  if (name.startsWith('arn:')) return name;
  switch (resource) {
    case 'sourceBucket':
    case 'outputBucket':
      return `arn:aws:s3:::${name}`;
    case 'claimsTable':
    case 'manifestTable':
      return `arn:aws:dynamodb:${ctx.region}:${ctx.accountId}:table/${name}`;
    case 'tileQueue':
    case 'sceneQueue':
    case 'ingestQueue':
    case 'deadLetterQueue':
    case 'ingestDeadLetterQueue':
    case 'sceneDeadLetterQueue':
      return `arn:aws:sqs:${ctx.region}:${ctx.accountId}:${name}`;
    case 'featureSinkSecret':
      return `arn:aws:secretsmanager:${ctx.region}:${ctx.accountId}:secret:${name}`;
  }
}

/** `value` with a mock ARN (alone, or followed by `/...` or `:...`) replaced by the test's. */
function replaceArn(value: string, from: ReadonlyMap<string, string>): string {
  for (const [mock, real] of from) {
    if (value === mock) return real;
    if (value.startsWith(`${mock}/`) || value.startsWith(`${mock}:`)) return real + value.slice(mock.length);
  }
  return value;
}

function mapStrings(value: unknown, f: (s: string) => string): unknown {
  if (typeof value === 'string') return f(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, f));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapStrings(v, f)]));
  return value;
}

/**
 * A role's identity policy documents as the program deploys them, verbatim but for the resources: every
 * ARN of a logical resource named in `names` is replaced by that resource's ARN in the test's account (a
 * bucket's objects `arn:aws:s3:::mock/tiles/*` become `arn:aws:s3:::real/tiles/*`). The IAM-enforcing moto
 * gives each role's user exactly these documents.
 */
export function awsPolicyDocumentsOf(
  model: AwsStackModel,
  role: FunctionRole,
  names: AwsResourceNames,
  context: AwsArnContext = {},
): NamedAwsPolicy[] {
  const ctx = { region: context.region ?? 'eu-west-1', accountId: context.accountId ?? ACCOUNT_ID };
  const replacements = new Map<string, string>();
  for (const [resource, name] of Object.entries(names) as [LogicalResource, string][]) {
    const mock = model.arns.get(resource);
    if (mock === undefined) throw new IamModelError(`the AWS stack has no ${resource} to rename to ${name}`);
    replacements.set(mock, arnFor(resource, name, ctx));
  }
  // Longest first: a queue's ARN must not be taken for the start of its DLQ's.
  const ordered = new Map([...replacements].sort((a, b) => b[0].length - a[0].length));
  return (model.roles.get(role)?.policies ?? []).map((p) => ({
    name: p.name,
    document: mapStrings(p.document, (s) => replaceArn(s, ordered)) as AwsPolicyDocumentJson,
  }));
}
