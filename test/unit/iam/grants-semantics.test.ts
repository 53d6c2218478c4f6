import { describe, expect, it } from 'vitest';
import { AZURE_ROLES } from '../../../infra/azure/roles.js';
import { gcpServiceAccountId } from '../../../infra/common/naming.js';
import { AZURE_SUBSCRIPTION } from '../../../infra/preflight/mock-run.js';
import { DEPLOYED_ROLES, type FunctionRole } from '../../../shared/domain/key-layout.js';
import type { Cloud, LogicalResource, RecordedAccess } from '../../support/iam/access.js';
import { IamModelError, stackGrantsFromRun } from '../../support/iam/grants.js';
import { type AwsRequest, type AwsStatementJson, compileAwsPolicy, evaluateAwsStatements } from '../../support/iam/grants-aws.js';
import { AZURE_BUILT_IN_ROLES, evaluateAbacCondition, parseAbacCondition } from '../../support/iam/grants-azure.js';
import { evaluateCel, parseCel } from '../../support/iam/grants-gcp.js';
import { mockRunOf, type ResourceSketch } from './mock-runs.js';

/**
 * Each cloud's permission semantics in the grant model, one rule at a time, on literal policies and on a few
 * resources written out (mock-runs.ts): what a program may come to use is pinned here before it does.
 */

const access = (
  cloud: Cloud,
  role: FunctionRole,
  action: string,
  resource: LogicalResource,
  key?: string,
  list?: boolean,
): RecordedAccess => ({
  cloud,
  role,
  action,
  resource,
  ...(key === undefined ? {} : { key }),
  ...(list ? { list: true } : {}),
  request: `${action} ${key ?? ''}`,
});

describe('AWS policy evaluation', () => {
  const BUCKET = 'arn:aws:s3:::out';
  const evaluate = (
    statements: AwsStatementJson[],
    request: Partial<AwsRequest> & Pick<AwsRequest, 'action' | 'resource'>,
    resourcePolicy = false,
  ) =>
    evaluateAwsStatements(compileAwsPolicy({ name: 'p', document: { Version: '2012-10-17', Statement: statements } }, { resourcePolicy }), {
      context: {},
      ...request,
    });

  it('allows by the first matching Allow and names it by its Sid, or by policy#index without one', () => {
    const s: AwsStatementJson[] = [
      { Effect: 'Allow', Action: 's3:GetObject', Resource: `${BUCKET}/scenes/*` },
      { Sid: 'Tiles', Effect: 'Allow', Action: 's3:GetObject', Resource: `${BUCKET}/tiles/*` },
    ];
    expect(evaluate(s, { action: 's3:GetObject', resource: `${BUCKET}/tiles/k/0_0.tif` })).toEqual({ allowed: true, grant: 'Tiles' });
    expect(evaluate(s, { action: 's3:GetObject', resource: `${BUCKET}/scenes/k` })).toEqual({ allowed: true, grant: 'p#0' });
    expect(evaluate(s, { action: 's3:GetObject', resource: `${BUCKET}/mosaics/k` })).toEqual({ allowed: false });
  });

  it('lets an explicit Deny win over any Allow', () => {
    const s: AwsStatementJson[] = [
      { Sid: 'All', Effect: 'Allow', Action: 's3:*', Resource: '*' },
      { Sid: 'NoDeletes', Effect: 'Deny', Action: 's3:DeleteObject', Resource: `${BUCKET}/*` },
    ];
    expect(evaluate(s, { action: 's3:DeleteObject', resource: `${BUCKET}/tiles/x` })).toEqual({ allowed: false, deniedBy: 'NoDeletes' });
    expect(evaluate(s, { action: 's3:PutObject', resource: `${BUCKET}/tiles/x` }).allowed).toBe(true);
  });

  it('matches actions with wildcards, case-insensitively, and resources with * and ?, case-sensitively', () => {
    const s: AwsStatementJson[] = [{ Effect: 'Allow', Action: 's3:Get*', Resource: `${BUCKET}/tiles/?/*` }];
    expect(evaluate(s, { action: 's3:GetObjectVersion', resource: `${BUCKET}/tiles/a/b` }).allowed).toBe(true);
    expect(evaluate(s, { action: 'S3:getobject', resource: `${BUCKET}/tiles/a/b` }).allowed).toBe(true);
    expect(evaluate(s, { action: 's3:PutObject', resource: `${BUCKET}/tiles/a/b` }).allowed).toBe(false);
    expect(evaluate(s, { action: 's3:GetObject', resource: `${BUCKET}/tiles/ab/c` }).allowed).toBe(false);
    expect(evaluate(s, { action: 's3:GetObject', resource: `${BUCKET}/Tiles/a/b` }).allowed).toBe(false);
  });

  it('reads NotAction and NotResource as "everything but"', () => {
    const s: AwsStatementJson[] = [{ Effect: 'Allow', NotAction: 's3:Delete*', NotResource: `${BUCKET}/index/*` }];
    expect(evaluate(s, { action: 's3:PutObject', resource: `${BUCKET}/tiles/x` }).allowed).toBe(true);
    expect(evaluate(s, { action: 's3:DeleteObject', resource: `${BUCKET}/tiles/x` }).allowed).toBe(false);
    expect(evaluate(s, { action: 's3:PutObject', resource: `${BUCKET}/index/x` }).allowed).toBe(false);
  });

  it('narrows ListBucket with the s3:prefix StringLike condition; a listing without a matching prefix is refused', () => {
    const s: AwsStatementJson[] = [
      { Effect: 'Allow', Action: 's3:ListBucket', Resource: BUCKET, Condition: { StringLike: { 's3:prefix': ['tiles/*', 'scenes/*'] } } },
    ];
    const list = (prefix?: string) =>
      evaluate(s, { action: 's3:ListBucket', resource: BUCKET, context: prefix === undefined ? {} : { 's3:prefix': prefix } });
    expect(list('tiles/k/').allowed).toBe(true);
    expect(list('scenes/').allowed).toBe(true);
    expect(list('mosaics/').allowed).toBe(false);
    expect(list('').allowed).toBe(false);
    expect(list(undefined).allowed).toBe(false);
  });

  it('holds a negated operator, an ...IfExists one and Null "true" when the key is absent, and the others not', () => {
    const one = (Condition: NonNullable<AwsStatementJson['Condition']>) =>
      evaluate([{ Effect: 'Allow', Action: 's3:ListBucket', Resource: BUCKET, Condition }], { action: 's3:ListBucket', resource: BUCKET })
        .allowed;
    expect(one({ StringNotLike: { 's3:prefix': 'index/*' } })).toBe(true);
    expect(one({ StringLikeIfExists: { 's3:prefix': 'tiles/*' } })).toBe(true);
    expect(one({ Null: { 's3:prefix': 'true' } })).toBe(true);
    expect(one({ Null: { 's3:prefix': 'false' } })).toBe(false);
    expect(one({ StringEquals: { 's3:prefix': '' } })).toBe(false);
  });

  it('ignores a resource policy statement for a service principal, and one denying insecure transport', () => {
    const s: AwsStatementJson[] = [
      {
        Effect: 'Deny',
        Principal: '*',
        Action: 's3:*',
        Resource: [BUCKET, `${BUCKET}/*`],
        Condition: { Bool: { 'aws:SecureTransport': 'false' } },
      },
      {
        Effect: 'Allow',
        Principal: { Service: 's3.amazonaws.com' },
        Action: 'sqs:SendMessage',
        Resource: '*',
        Condition: { ArnEquals: { 'aws:SourceArn': BUCKET } },
      },
      { Sid: 'Role', Effect: 'Allow', Principal: { AWS: 'arn:aws:iam::1:role/tile' }, Action: 's3:GetObject', Resource: `${BUCKET}/*` },
    ];
    const request = { action: 's3:GetObject', resource: `${BUCKET}/x`, context: { 'aws:securetransport': 'true' } };
    expect(evaluate(s, { ...request, principalArn: 'arn:aws:iam::1:role/tile' }, true)).toEqual({ allowed: true, grant: 'Role' });
    expect(evaluate(s, { ...request, principalArn: 'arn:aws:iam::1:role/mosaic' }, true)).toEqual({ allowed: false });
    expect(
      evaluate(s, { ...request, context: { 'aws:securetransport': 'false' }, principalArn: 'arn:aws:iam::1:role/tile' }, true).allowed,
    ).toBe(false);
  });

  it.each([
    [
      'a condition key no function request carries',
      { Effect: 'Allow', Action: 's3:GetObject', Resource: '*', Condition: { IpAddress: { 'aws:SourceIp': '10.0.0.0/8' } } },
    ],
    [
      'a set operator',
      { Effect: 'Allow', Action: 's3:GetObject', Resource: '*', Condition: { 'ForAnyValue:StringLike': { 's3:prefix': 'a*' } } },
    ],
    ['an unknown operator', { Effect: 'Allow', Action: 's3:GetObject', Resource: '*', Condition: { StringMatches: { 's3:prefix': 'a' } } }],
    ['a policy variable', { Effect: 'Allow', Action: 's3:GetObject', Resource: `${BUCKET}/\${aws:username}/*` }],
    ['an unknown element', { Effect: 'Allow', Action: 's3:GetObject', Resource: '*', Whatever: true }],
    ['a Principal in an identity policy', { Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: '*' }],
    ['both Action and NotAction', { Effect: 'Allow', Action: 's3:GetObject', NotAction: 's3:PutObject', Resource: '*' }],
  ])('refuses to compile %s', (_what, statement) => {
    expect(() => compileAwsPolicy({ name: 'p', document: { Statement: [statement as unknown as AwsStatementJson] } })).toThrow(
      IamModelError,
    );
  });
});

describe('GCP IAM conditions (CEL subset)', () => {
  const object = (bucket: string, key: string) => ({
    name: `projects/_/buckets/${bucket}/objects/${key}`,
    type: 'storage.googleapis.com/Object',
    service: 'storage.googleapis.com',
  });

  it('evaluates startsWith, ==, !=, &&, ||, ! and parentheses on resource attributes', () => {
    const e = parseCel(
      `(resource.name.startsWith("projects/_/buckets/b/objects/tiles/") || resource.name == 'projects/_/buckets/b/objects/index/mosaic-sweep.json') && !(resource.type != "storage.googleapis.com/Object")`,
    );
    expect(evaluateCel(e, object('b', 'tiles/k/0_0.tif'))).toBe(true);
    expect(evaluateCel(e, object('b', 'index/mosaic-sweep.json'))).toBe(true);
    expect(evaluateCel(e, object('b', 'index/mosaic-sweep.json.bak'))).toBe(false);
    expect(evaluateCel(e, object('other', 'tiles/k'))).toBe(false);
    expect(evaluateCel(e, { ...object('b', 'tiles/k'), type: 'storage.googleapis.com/Bucket' })).toBe(false);
  });

  it('reads a listing prefix through api.getAttribute, with its default when the listing asks for none', () => {
    const e = parseCel(`api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("tiles/")`);
    const bucket = { name: 'projects/_/buckets/b', type: 'storage.googleapis.com/Bucket', service: 'storage.googleapis.com' };
    expect(evaluateCel(e, { ...bucket, api: { 'storage.googleapis.com/objectListPrefix': 'tiles/k/' } })).toBe(true);
    expect(evaluateCel(e, { ...bucket, api: { 'storage.googleapis.com/objectListPrefix': 'scenes/' } })).toBe(false);
    expect(evaluateCel(e, bucket)).toBe(false);
  });

  it.each([
    'resource.name.endsWith(".tif")',
    'resource.name.matches("^projects/.*")',
    'request.time < timestamp("2030-01-01T00:00:00Z")',
    'has(resource.name)',
    'api.getAttribute("iam.googleapis.com/modifiedGrantsByRole", []).hasOnly(["roles/viewer"])',
    'resource.name.startsWith("unterminated)',
    'resource.name',
    'resource.name.startsWith("a") &&',
  ])('rejects %s, naming the expression', (expression) => {
    expect(() => parseCel(expression)).toThrow(IamModelError);
    expect(() => parseCel(expression)).toThrow(JSON.stringify(expression));
  });
});

/** A GCP stack of a few resources: the two buckets, the database, and one service account per role named. */
function gcpRun(bindings: readonly ResourceSketch[], roles: readonly FunctionRole[] = ['tile', 'mosaic']) {
  const stack = 'gcp-test';
  const accounts = roles.map((role) => {
    const accountId = gcpServiceAccountId(stack, role);
    const email = `${accountId}@p.iam.gserviceaccount.com`;
    return {
      type: 'gcp:serviceaccount/account:Account',
      name: `tessera-${role}`,
      inputs: { accountId, project: 'p' },
      state: { email, member: `serviceAccount:${email}` },
    };
  });
  const outputs = { cloud: 'gcp', project: 'p', sourceBucket: 'src', outputBucket: 'out', firestoreDatabase: 'db', tileTopic: 'tiles' };
  return stackGrantsFromRun('gcp', mockRunOf(outputs, [...accounts, ...bindings]), stack);
}
const member = (role: FunctionRole) => `serviceAccount:${gcpServiceAccountId('gcp-test', role)}@p.iam.gserviceaccount.com`;
const bucketMember = (name: string, role: string, who: FunctionRole, expression?: string): ResourceSketch => ({
  type: 'gcp:storage/bucketIAMMember:BucketIAMMember',
  name,
  inputs: { bucket: 'out', role, member: member(who), ...(expression === undefined ? {} : { condition: { title: name, expression } }) },
});

describe('GCP bindings', () => {
  it('gives objectCreator create only: no get, no list, no delete, so no overwrite', () => {
    const g = gcpRun([
      bucketMember(
        'mosaic-create',
        'roles/storage.objectCreator',
        'mosaic',
        'resource.name.startsWith("projects/_/buckets/out/objects/mosaics/")',
      ),
    ]);
    const check = (action: string, key: string) => g.check(access('gcp', 'mosaic', action, 'outputBucket', key)).allowed;
    expect(check('storage.objects.create', 'mosaics/k.vrt')).toBe(true);
    expect(check('storage.objects.delete', 'mosaics/k.vrt')).toBe(false);
    expect(check('storage.objects.get', 'mosaics/k.vrt')).toBe(false);
    expect(check('storage.objects.create', 'tiles/k.tif')).toBe(false);
  });

  it('does not grant a listing by a condition on object names (the listing’s resource is the bucket); objectListPrefix does', () => {
    const g = gcpRun([
      bucketMember('tile-read', 'roles/storage.objectViewer', 'tile', 'resource.name.startsWith("projects/_/buckets/out/objects/tiles/")'),
      bucketMember(
        'mosaic-list',
        'roles/storage.objectViewer',
        'mosaic',
        'resource.type == "storage.googleapis.com/Bucket" && api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("tiles/")',
      ),
    ]);
    expect(g.check(access('gcp', 'tile', 'storage.objects.get', 'outputBucket', 'tiles/k/0_0.tif')).allowed).toBe(true);
    expect(g.check(access('gcp', 'tile', 'storage.objects.list', 'outputBucket', 'tiles/k/', true)).allowed).toBe(false);
    expect(g.check(access('gcp', 'mosaic', 'storage.objects.list', 'outputBucket', 'tiles/k/', true))).toEqual({
      allowed: true,
      grant: 'mosaic-list',
    });
    expect(g.check(access('gcp', 'mosaic', 'storage.objects.list', 'outputBucket', 'scenes/', true)).allowed).toBe(false);
    expect(g.check(access('gcp', 'mosaic', 'storage.objects.get', 'outputBucket', 'tiles/k/0_0.tif')).allowed).toBe(false);
  });

  it('reads a custom role’s permissions from the program, and a project binding’s database condition', () => {
    const g = gcpRun([
      {
        type: 'gcp:projects/iAMCustomRole:IAMCustomRole',
        name: 'deleter',
        inputs: { project: 'p', roleId: 'deleter', permissions: ['storage.objects.delete'] },
      },
      bucketMember('tile-delete', 'projects/p/roles/deleter', 'tile'),
      {
        type: 'gcp:projects/iAMMember:IAMMember',
        name: 'tile-claims',
        inputs: {
          project: 'p',
          role: 'roles/datastore.user',
          member: member('tile'),
          condition: { title: 'db', expression: 'resource.name.startsWith("projects/p/databases/db")' },
        },
      },
      {
        type: 'gcp:projects/iAMMember:IAMMember',
        name: 'mosaic-claims',
        inputs: {
          project: 'p',
          role: 'roles/datastore.user',
          member: member('mosaic'),
          condition: { title: 'other', expression: 'resource.name == "projects/p/databases/other"' },
        },
      },
    ]);
    expect(g.check(access('gcp', 'tile', 'storage.objects.delete', 'outputBucket', 'anything'))).toEqual({
      allowed: true,
      grant: 'tile-delete',
    });
    expect(g.check(access('gcp', 'tile', 'storage.objects.create', 'outputBucket', 'anything')).allowed).toBe(false);
    expect(g.check(access('gcp', 'tile', 'datastore.entities.create', 'claimsTable', 'claims'))).toEqual({
      allowed: true,
      grant: 'tile-claims',
    });
    expect(g.check(access('gcp', 'mosaic', 'datastore.entities.get', 'claimsTable', 'claims')).allowed).toBe(false);
  });

  it('refuses a role it has no permission table for, but only on a function’s account', () => {
    expect(() => gcpRun([bucketMember('tile-odd', 'roles/storage.legacyBucketWriter', 'tile')])).toThrow(
      /roles\/storage\.legacyBucketWriter/,
    );
    const agent: ResourceSketch = {
      type: 'gcp:projects/iAMMember:IAMMember',
      name: 'agent',
      inputs: {
        project: 'p',
        role: 'roles/eventarc.serviceAgent',
        member: 'serviceAccount:service-1@gcp-sa-eventarc.iam.gserviceaccount.com',
      },
    };
    expect(() => gcpRun([agent])).not.toThrow();
  });

  it('refuses an authoritative policy resource, which would replace the member bindings', () => {
    expect(() =>
      gcpRun([{ type: 'gcp:storage/bucketIAMPolicy:BucketIAMPolicy', name: 'p', inputs: { bucket: 'out', policyData: '{}' } }]),
    ).toThrow(IamModelError);
  });
});

describe('Azure role assignment conditions (version 2.0 subset)', () => {
  const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
  // Microsoft's pattern for "read and list only under a prefix": List Blobs carries a prefix, not a path.
  const condition = parseAbacCondition(
    `((!(ActionMatches{'${BLOBS}/read'} AND NOT SubOperationMatches{'Blob.List'})) OR (@Resource[${BLOBS}:path] StringStartsWith 'tiles/'))` +
      ` AND ((!(ActionMatches{'${BLOBS}/read'} AND SubOperationMatches{'Blob.List'})) OR (@Request[${BLOBS}:prefix] StringStartsWith 'tiles/'))` +
      ` && (!(ActionMatches{'${BLOBS}/write', '${BLOBS}/add/action'}) || @Resource[${BLOBS}:path] StringEquals 'index/mosaic-sweep.json')`,
  );
  const read = (blobPath: string) => ({ action: `${BLOBS}/read`, attributes: { blobPath } });
  const list = (listPrefix?: string) => ({ action: `${BLOBS}/read`, subOperation: 'Blob.List', attributes: { listPrefix } });
  const write = (action: string, blobPath: string) => ({ action, attributes: { blobPath } });

  it('limits blob reads to the path and listings to the prefix', () => {
    expect(evaluateAbacCondition(condition, read('tiles/k/0_0.tif'))).toBe(true);
    expect(evaluateAbacCondition(condition, read('mosaics/k.vrt'))).toBe(false);
    expect(evaluateAbacCondition(condition, list('tiles/k/'))).toBe(true);
    expect(evaluateAbacCondition(condition, list('mosaics/'))).toBe(false);
  });

  it('fails a condition the request cannot evaluate: a listing without a prefix, against a prefix condition', () => {
    expect(evaluateAbacCondition(condition, list(undefined))).toBe(false);
  });

  it('matches any action of an ActionMatches set, and leaves actions it does not target alone', () => {
    expect(evaluateAbacCondition(condition, write(`${BLOBS}/add/action`, 'index/mosaic-sweep.json'))).toBe(true);
    expect(evaluateAbacCondition(condition, write(`${BLOBS}/write`, 'tiles/x'))).toBe(false);
    expect(evaluateAbacCondition(condition, write(`${BLOBS}/delete`, 'anywhere'))).toBe(true);
  });

  it.each([
    `@Resource[${BLOBS}:path] ForAnyOfAnyValues:StringEquals {'a', 'b'}`,
    `Exists @Resource[${BLOBS}:path]`,
    `@Resource[${BLOBS}/tags:team<$key_case_sensitive$>] StringEquals 'x'`,
    `@Environment[UtcNow] DateTimeGreaterThan '2030-01-01T00:00:00.0Z'`,
    `@Resource[${BLOBS}:path] StringStartsWith {'a'}`,
    `(ActionMatches{'${BLOBS}/read'}`,
  ])('rejects %s, naming the condition', (text) => {
    expect(() => parseAbacCondition(text)).toThrow(IamModelError);
    expect(() => parseAbacCondition(text)).toThrow(JSON.stringify(text));
  });
});

/** An Azure stack of a few resources: the data account, its queues, identities and role assignments. */
function azureRun(sketches: readonly ResourceSketch[]) {
  const rg = `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/rg`;
  const outputs = {
    cloud: 'azure',
    storageAccount: 'data',
    sourceContainer: 'sources',
    outputContainer: 'outputs',
    tileQueue: 'tiles',
    sceneQueue: 'scenes',
  };
  const base: ResourceSketch[] = [
    { type: 'tessera:azure:TilingStack', name: 'tessera' },
    {
      type: 'azure-native:storage:StorageAccount',
      name: 'tessera-storage',
      inputs: { accountName: 'data' },
      state: { id: `${rg}/providers/Microsoft.Storage/storageAccounts/data` },
    },
    ...['tiles', 'scenes'].map((q) => ({ type: 'azure-native:storage:Queue', name: `tessera-${q}`, inputs: { queueName: q } })),
  ];
  return stackGrantsFromRun('azure', mockRunOf(outputs, [...base, ...sketches]), 'azure-test');
}
const identity = (name: string): ResourceSketch => ({
  type: 'azure-native:managedidentity:UserAssignedIdentity',
  name,
  state: { principalId: `principal-of-${name}` },
});
const assignment = (name: string, principal: string, roleId: string, scope: string, condition?: string): ResourceSketch => ({
  type: 'azure-native:authorization:RoleAssignment',
  name,
  inputs: {
    principalId: `principal-of-${principal}`,
    roleDefinitionId: `/subscriptions/${AZURE_SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/${roleId}`,
    scope,
    ...(condition === undefined ? {} : { condition, conditionVersion: '2.0' }),
  },
});
const ACCOUNT = `/subscriptions/${AZURE_SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/data`;

describe('Azure role assignments', () => {
  const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
  const MESSAGES = 'Microsoft.Storage/storageAccounts/queueServices/queues/messages';

  it('gives a single unnamed identity (the whole app’s) to every deployed role, and none to verify', () => {
    const g = azureRun([
      identity('tessera-identity'),
      assignment(
        'app-outputs',
        'tessera-identity',
        AZURE_ROLES.storageBlobDataContributor,
        `${ACCOUNT}/blobServices/default/containers/outputs`,
      ),
    ]);
    for (const role of DEPLOYED_ROLES)
      expect(g.check(access('azure', role, `${BLOBS}/write`, 'outputBucket', 'x')).allowed, role).toBe(true);
    expect(g.check(access('azure', 'verify', `${BLOBS}/write`, 'outputBucket', 'x')).allowed).toBe(false);
  });

  it('gives a role-named identity to its role only, and the unnamed one (the host’s) to none beside them', () => {
    const g = azureRun([
      identity('tessera-identity'),
      identity('tessera-identity-tile'),
      identity('tessera-identity-mosaic'),
      assignment('host-outputs', 'tessera-identity', AZURE_ROLES.storageBlobDataOwner, ACCOUNT),
      assignment(
        'tile-outputs',
        'tessera-identity-tile',
        AZURE_ROLES.storageBlobDataContributor,
        `${ACCOUNT}/blobServices/default/containers/outputs`,
      ),
    ]);
    expect(g.check(access('azure', 'tile', `${BLOBS}/write`, 'outputBucket', 'tiles/x'))).toEqual({ allowed: true, grant: 'tile-outputs' });
    expect(g.check(access('azure', 'mosaic', `${BLOBS}/write`, 'outputBucket', 'tiles/x')).allowed).toBe(false);
    expect(g.grants('tile').map((x) => x.id)).toEqual(['tile-outputs']);
  });

  it('covers a resource by an assignment at or above it, never a sibling', () => {
    const g = azureRun([
      identity('tessera-identity-tile'),
      assignment(
        'tile-sources',
        'tessera-identity-tile',
        AZURE_ROLES.storageBlobDataContributor,
        `${ACCOUNT}/blobServices/default/containers/sources`,
      ),
      assignment('tile-queues', 'tessera-identity-tile', AZURE_ROLES.storageQueueDataMessageSender, ACCOUNT.toUpperCase()),
    ]);
    expect(g.check(access('azure', 'tile', `${BLOBS}/read`, 'sourceBucket', 'scenes/x')).allowed).toBe(true);
    expect(g.check(access('azure', 'tile', `${BLOBS}/read`, 'outputBucket', 'tiles/x')).allowed).toBe(false);
    // Resource ids compare case-insensitively.
    expect(g.check(access('azure', 'tile', `${MESSAGES}/add/action`, 'sceneQueue'))).toEqual({ allowed: true, grant: 'tile-queues' });
  });

  it('holds exactly the documented data actions: Queue Data Contributor has messages/write but not add/action', () => {
    const g = azureRun([
      identity('tessera-identity-scene'),
      assignment(
        'scene-tiles',
        'tessera-identity-scene',
        AZURE_ROLES.storageQueueDataContributor,
        `${ACCOUNT}/queueServices/default/queues/tiles`,
      ),
      assignment(
        'scene-sources',
        'tessera-identity-scene',
        '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1',
        `${ACCOUNT}/blobServices/default/containers/sources`,
      ),
    ]);
    expect(g.check(access('azure', 'scene', `${MESSAGES}/write`, 'tileQueue')).allowed).toBe(true);
    expect(g.check(access('azure', 'scene', `${MESSAGES}/add/action`, 'tileQueue')).allowed).toBe(false);
    // Storage Blob Data Reader: read (and list), nothing else.
    expect(g.check(access('azure', 'scene', `${BLOBS}/read`, 'sourceBucket', 'scenes/', true)).allowed).toBe(true);
    expect(g.check(access('azure', 'scene', `${BLOBS}/add/action`, 'sourceBucket', 'scenes/x')).allowed).toBe(false);
  });

  it('applies an assignment’s condition to the action it is asked for', () => {
    const cond = `(!(ActionMatches{'${BLOBS}/write'}) AND !(ActionMatches{'${BLOBS}/add/action'})) OR @Resource[${BLOBS}:path] StringStartsWith 'tiles/'`;
    const g = azureRun([
      identity('tessera-identity-tile'),
      assignment(
        'tile-outputs',
        'tessera-identity-tile',
        AZURE_ROLES.storageBlobDataContributor,
        `${ACCOUNT}/blobServices/default/containers/outputs`,
        cond,
      ),
    ]);
    expect(g.check(access('azure', 'tile', `${BLOBS}/add/action`, 'outputBucket', 'tiles/k/0_0.tif')).allowed).toBe(true);
    expect(g.check(access('azure', 'tile', `${BLOBS}/add/action`, 'outputBucket', 'mosaics/k.vrt')).allowed).toBe(false);
    expect(g.check(access('azure', 'tile', `${BLOBS}/read`, 'outputBucket', 'mosaics/k.vrt')).allowed).toBe(true);
  });

  it('knows the data actions of every role the program assigns', () => {
    for (const [name, id] of Object.entries(AZURE_ROLES)) expect(AZURE_BUILT_IN_ROLES[id], name).toBeDefined();
  });

  it('refuses a role it has no definition for', () => {
    expect(() =>
      azureRun([
        identity('tessera-identity-tile'),
        assignment('odd', 'tessera-identity-tile', '00000000-0000-0000-0000-000000000001', ACCOUNT),
      ]),
    ).toThrow(IamModelError);
  });
});
