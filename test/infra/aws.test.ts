import { describe, expect, it } from 'vitest';
import { adotCollectorLayerArn, COLLECTOR_CONFIG_VARIABLE, XRAY_WRITE_ACTIONS } from '../../infra/aws/telemetry.js';
import { LEASE_STOLEN_PATTERN } from '../../infra/aws/tiling-stack.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { CEILINGS, type Platform } from '../../shared/domain/ceilings.js';
import {
  AREAS,
  type AreaName,
  accessOf,
  areaPrefix,
  FUNCTION_ROLES,
  type FunctionRole,
  type ObjectAccess,
  outputKeys,
  ROLE_ACCESS,
  type StoreName,
  SWEEP_STATE_KEY,
  sceneLifecycleKeys,
  streamKeys,
} from '../../shared/domain/key-layout.js';
import { ENV, parseRuntimeConfig } from '../../shared/domain/runtime-config.js';
import { compileAwsPolicy, evaluateAwsStatements } from '../support/iam/grants-aws.js';
import { declaredUrns, envOf, missingBefore, type RecordedResource, refusal, runStack, type StackRun } from './harness.js';
import { loadStackFile } from './stack-files.js';

/**
 * Policies of the AWS stack, asserted on what the program declares under
 * Pulumi mocks. Only the AWS SDK is loaded in this file.
 */

const STACK = 'aws-eu-west-1';
const BASE = { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1' };

interface Statement {
  Effect: string;
  Principal?: unknown;
  Action: string | string[];
  Resource?: string | string[];
  Condition?: Record<string, Record<string, unknown>>;
}
const list = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const statements = (policy: unknown): Statement[] => (JSON.parse(String(policy)) as { Statement: Statement[] }).Statement;

function byState(run: StackRun, type: string, key: string, value: unknown): RecordedResource {
  const found = run.ofType(type).find((r) => r.state[key] === value);
  if (!found) throw new Error(`no ${type} with ${key} = ${String(value)}`);
  return found;
}

const functions = (run: StackRun) => run.ofType('aws:lambda/function:Function');
const roleOf = (fn: RecordedResource) => fn.name.split('-').at(-1) as string;

/** A role's policy as deployed: the functions' inline RolePolicy, verify's managed Policy. */
function policyOf(run: StackRun, role: FunctionRole): RecordedResource {
  return role === 'verify' ? run.one('aws:iam/policy:Policy', '-verify') : run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`);
}
const bucketArn = (run: StackRun, store: StoreName) =>
  run.one('aws:s3/bucket:Bucket', store === 'sources' ? '-sources' : '-outputs').state.arn as string;

/**
 * Whether IAM lets `role` do `action` on `key` of a bucket (a listing when `listPrefix` is given), evaluated on the
 * deployed document with IAM's rules (test/support/iam/grants-aws.ts): the same question S3 asks of a request.
 */
function allows(
  run: StackRun,
  role: FunctionRole,
  action: string,
  store: StoreName,
  target: { key: string } | { listPrefix: string },
): boolean {
  const p = policyOf(run, role);
  const statements = compileAwsPolicy({ name: p.name, document: JSON.parse(String(p.inputs.policy)) });
  const bucket = bucketArn(run, store);
  const request =
    'key' in target
      ? { action, resource: `${bucket}/${target.key}`, context: { 'aws:securetransport': 'true' } }
      : { action, resource: bucket, context: { 'aws:securetransport': 'true', 's3:prefix': target.listPrefix } };
  return evaluateAwsStatements(statements, request).allowed;
}

/**
 * The S3 permissions each access of the layout needs, as S3 checks them (docs/iam.md): the oracle the deployed
 * statements are held to. A read of the source store is pinned to a versionId (GetObjectVersion); create-only
 * and If-Match writes are PutObject; a conditional delete is DeleteObject; a listing is ListBucket on the bucket.
 */
const S3_PERMISSIONS: Readonly<Record<ObjectAccess, (store: StoreName) => readonly string[]>> = {
  read: (store) => (store === 'sources' ? ['s3:GetObject', 's3:GetObjectVersion'] : ['s3:GetObject']),
  create: () => ['s3:PutObject'],
  replace: () => ['s3:PutObject'],
  delete: () => ['s3:DeleteObject'],
  list: () => [],
  // S3 pins by version id: the read's GetObjectVersion is the whole of it.
  pin: () => [],
};

/** A key inside an area (the area's own key when it is one key). */
const keyIn = (area: AreaName, sourcePrefix: string) => {
  const prefix = areaPrefix(area, sourcePrefix);
  return 'exact' in AREAS[area] ? prefix : `${prefix}probe/${'a'.repeat(64)}.json`;
};

/** Every S3 grant of a document, one line each: `action object-ARN`, or `s3:ListBucket bucket-ARN s3:prefix`. */
function s3Grants(policy: unknown): string[] {
  return statements(policy).flatMap((s) =>
    list(s.Action)
      .filter((a) => a.startsWith('s3:'))
      .flatMap((a) =>
        list(s.Resource).flatMap((r) =>
          a === 's3:ListBucket'
            ? list((s.Condition?.StringLike?.['s3:prefix'] ?? ['(any)']) as string | string[]).map((p) => `${a} ${r} ${p}`)
            : [`${a} ${r}`],
        ),
      ),
  );
}

describe('the AWS stack (Pulumi.aws-eu-west-1.yaml under mocks)', () => {
  let run: StackRun;

  it('runs the example stack file as it is shipped', async () => {
    const file = loadStackFile('Pulumi.aws-eu-west-1.yaml');
    expect(file.stack).toBe(STACK);
    run = await runStack(file.stack, file.config);
    expect(run.outputs).toMatchObject({ cloud: 'aws', platform: 'aws-lambda', functionTimeoutSeconds: 900, leaseSeconds: 1200 });
  });

  it('builds one tessera:aws:TilingStack component and parents every resource to it', () => {
    expect(run.ofType('tessera:aws:TilingStack')).toHaveLength(1);
    const custom = declaredUrns(run);
    expect(custom.length).toBeGreaterThan(30);
    for (const urn of custom) expect(urn, urn).toContain('tessera:aws:TilingStack$');
  });

  it('gives every function a lease longer than the ceiling of its configured timeout', () => {
    expect(functions(run).map(roleOf).sort()).toEqual(['ingest', 'mosaic', 'reconcile', 'scene', 'stream', 'tile']);
    for (const fn of functions(run)) {
      const env = envOf((fn.inputs.environment as { variables: unknown }).variables);
      const platform = env[ENV.platform] as Platform;
      const timeout = fn.inputs.timeout as number;
      const ceiling = CEILINGS[platform].ceilingSec ?? timeout;
      expect(timeout, fn.name).toBeLessThanOrEqual(ceiling);
      expect(Number(env[ENV.leaseSeconds]), fn.name).toBeGreaterThan(ceiling);
      expect(Number(env[ENV.functionTimeoutSeconds]), fn.name).toBe(timeout);
      // The function's own parser (functions/aws compose) accepts what infra sets.
      expect(() => parseRuntimeConfig(env), fn.name).not.toThrow();
    }
  });

  it('runs every function on the runtime of shared/domain/runtimes.ts (Node 24, GA on Lambda), with its handler from the bundle', () => {
    for (const fn of functions(run)) {
      expect(fn.inputs).toMatchObject({ runtime: 'nodejs24.x', handler: 'index.handler' });
    }
    expect(run.one('aws:lambda/function:Function', '-tile').inputs.timeout).toBe(900);
    expect(run.one('aws:lambda/function:Function', '-tile').inputs.memorySize).toBe(2048);
  });

  it('deploys a runtime pinned with tessera:runtime, and refuses one Lambda blocks, with the date and the replacement', async () => {
    const pinned = await runStack(STACK, { ...BASE, 'tessera:runtime': 'nodejs22.x' });
    for (const fn of functions(pinned)) expect(fn.inputs.runtime, fn.name).toBe('nodejs22.x');
    const message = await refusal(STACK, { ...BASE, 'tessera:runtime': 'nodejs20.x' });
    expect(message).toMatch(/tessera:runtime: AWS Lambda refuses creating functions on nodejs20\.x since 2026-08-31; use nodejs22\.x/);
    expect(await refusal(STACK, { ...BASE, 'tessera:runtime': 'nodejs22' })).toMatch(/known: nodejs24\.x, nodejs22\.x, nodejs20\.x/);
  });

  it('keeps every trigger queue invisible for at least the timeout of the function it feeds (6x, within 12 h)', () => {
    const mappings = run.ofType('aws:lambda/eventSourceMapping:EventSourceMapping');
    expect(mappings.map((m) => m.name.split('-').at(-1)).sort()).toEqual(['ingest', 'scene', 'stream', 'tile']);
    for (const m of mappings) {
      const queue = byState(run, 'aws:sqs/queue:Queue', 'arn', m.inputs.eventSourceArn);
      const fn = byState(run, 'aws:lambda/function:Function', 'arn', m.inputs.functionName);
      const timeout = fn.inputs.timeout as number;
      expect(queue.inputs.visibilityTimeoutSeconds, queue.name).toBeGreaterThanOrEqual(timeout);
      expect(queue.inputs.visibilityTimeoutSeconds).toBe(Math.min(6 * timeout, 43_200));
      expect(m.inputs.functionResponseTypes).toEqual(['ReportBatchItemFailures']);
    }
    const tileMapping = mappings.find((m) => m.name.endsWith('-tile'));
    expect(tileMapping?.inputs.batchSize).toBe(1);
    // One ingest request per invocation: a download has the whole (540 s) timeout to itself.
    expect(mappings.find((m) => m.name.endsWith('-ingest'))?.inputs.batchSize).toBe(1);
    // One batch object per invocation: its records go into PostGIS in one transaction (docs/feature-batches.md).
    expect(mappings.find((m) => m.name.endsWith('-stream'))?.inputs.batchSize).toBe(1);
  });

  it('caps the tile event source at tessera:tileMaxConcurrency (default 100) so the poller stops instead of being throttled', async () => {
    const tile = run.one('aws:lambda/eventSourceMapping:EventSourceMapping', '-tile');
    expect(tile.inputs.scalingConfig).toEqual({ maximumConcurrency: 100 });
    const set = await runStack(STACK, { ...BASE, 'tessera:tileMaxConcurrency': '20' });
    expect(set.one('aws:lambda/eventSourceMapping:EventSourceMapping', '-tile').inputs.scalingConfig).toEqual({ maximumConcurrency: 20 });
    // Lambda accepts 2-1000.
    expect(await refusal(STACK, { ...BASE, 'tessera:tileMaxConcurrency': '1' })).toContain(
      'tessera:tileMaxConcurrency must be a whole number from 2 to 1000',
    );
    expect(await refusal(STACK, { ...BASE, 'tessera:cloud': 'gcp', 'tessera:tileMaxConcurrency': '20' })).toContain(
      'tessera:tileMaxConcurrency applies to aws stacks only',
    );
  });

  it('dead-letters after 5 receives by default (AWS: at least 5 for a queue feeding Lambda), whatever the stack file omits', async () => {
    const bare = await runStack(STACK, BASE);
    for (const q of bare.ofType('aws:sqs/queue:Queue').filter((q) => q.inputs.redrivePolicy !== undefined)) {
      expect((JSON.parse(String(q.inputs.redrivePolicy)) as { maxReceiveCount: number }).maxReceiveCount, q.name).toBe(5);
    }
  });

  it('gives every queue a dead-letter queue after maxReceiveCount deliveries, and an alarm on it', () => {
    const queues = run.ofType('aws:sqs/queue:Queue');
    const dlqArns = new Set<string>();
    for (const q of queues.filter((q) => q.inputs.redrivePolicy !== undefined)) {
      const redrive = JSON.parse(String(q.inputs.redrivePolicy)) as { deadLetterTargetArn: string; maxReceiveCount: number };
      expect(redrive.maxReceiveCount, q.name).toBe(5);
      expect(queues.some((d) => d.state.arn === redrive.deadLetterTargetArn)).toBe(true);
      dlqArns.add(redrive.deadLetterTargetArn);
    }
    // Every queue is either redriven or is itself a dead-letter queue.
    for (const q of queues) expect(q.inputs.redrivePolicy !== undefined || dlqArns.has(q.state.arn as string), q.name).toBe(true);
    expect(dlqArns.size).toBe(4);
    const alarmed = run
      .ofType('aws:cloudwatch/metricAlarm:MetricAlarm')
      .map((a) => (a.inputs.dimensions as { QueueName?: string } | undefined)?.QueueName);
    for (const arn of dlqArns) expect(alarmed).toContain(byState(run, 'aws:sqs/queue:Queue', 'arn', arn).state.name);
    for (const q of queues) expect(q.inputs.sqsManagedSseEnabled, q.name).toBe(true);
  });

  it('keeps claims in a PAY_PER_REQUEST table keyed by job_id with TTL on expires_at and point-in-time recovery', () => {
    const tables = run.ofType('aws:dynamodb/table:Table');
    expect(tables.map((t) => t.name.split('-').at(-1)).sort()).toEqual(['claims', 'manifest']);
    expect(run.one('aws:dynamodb/table:Table', '-claims').inputs).toMatchObject({
      billingMode: 'PAY_PER_REQUEST',
      hashKey: 'job_id',
      attributes: [{ name: 'job_id', type: 'S' }],
      ttl: { attributeName: 'expires_at', enabled: true },
      pointInTimeRecovery: { enabled: true },
    });
  });

  it('notifies the scene queue of new objects under the source prefix with the source suffix, and the stream queue of batch objects under streams/', () => {
    const sources = run.one('aws:s3/bucket:Bucket', '-sources');
    const notifications = run.ofType('aws:s3/bucketNotification:BucketNotification');
    expect(notifications).toHaveLength(1);
    expect(notifications[0]?.inputs.bucket).toBe(sources.id);
    const queue = run.one('aws:sqs/queue:Queue', '-scene');
    const streamQueue = run.one('aws:sqs/queue:Queue', '-stream');
    expect(notifications[0]?.inputs.queues).toEqual([
      { queueArn: queue.state.arn, events: ['s3:ObjectCreated:*'], filterPrefix: 'scenes/', filterSuffix: '.tif' },
      { queueArn: streamQueue.state.arn, events: ['s3:ObjectCreated:*'], filterPrefix: streamKeys.root() },
    ]);
    // Only this bucket, in this account, may send to either queue.
    for (const q of [queue, streamQueue]) {
      const policy = run.ofType('aws:sqs/queuePolicy:QueuePolicy').find((p) => p.inputs.queueUrl === q.state.url);
      const [allow] = statements(policy?.inputs.policy);
      expect(allow?.Condition, q.name).toEqual({
        ArnEquals: { 'aws:SourceArn': sources.state.arn },
        StringEquals: { 'aws:SourceAccount': '123456789012' },
      });
    }
  });

  it("lets a web map on tessera:outputCorsOrigins read the output bucket by ranges (tessera view's page, issue 26), and sets no CORS rule by default", async () => {
    expect(run.ofType('aws:s3/bucketCorsConfiguration:BucketCorsConfiguration')).toEqual([]);
    const withCors = await runStack(STACK, { ...BASE, 'tessera:outputCorsOrigins': 'https://maps.example.org' });
    const cors = withCors.one('aws:s3/bucketCorsConfiguration:BucketCorsConfiguration', '-outputs');
    expect(withCors.ofType('aws:s3/bucketCorsConfiguration:BucketCorsConfiguration')).toHaveLength(1);
    expect(cors.inputs.bucket).toBe(withCors.one('aws:s3/bucket:Bucket', '-outputs').id);
    const [rule, ...others] = cors.inputs.corsRules as Record<string, string[]>[];
    expect(others).toEqual([]);
    expect(rule?.allowedOrigins).toEqual(['https://maps.example.org']);
    expect(rule?.allowedMethods).toEqual(['GET', 'HEAD']);
    expect(rule?.allowedHeaders).toContain('Range');
    expect(rule?.exposeHeaders).toEqual(expect.arrayContaining(['Content-Range', 'ETag', 'Accept-Ranges', 'Content-Length']));
  });

  it('makes nothing public: access blocked, owner-enforced, encrypted, TLS-only buckets and no public grants', () => {
    const buckets = run.ofType('aws:s3/bucket:Bucket');
    expect(buckets).toHaveLength(2);
    for (const b of buckets) {
      const block = run.ofType('aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock').find((x) => x.inputs.bucket === b.id);
      expect(block?.inputs, b.name).toMatchObject({
        blockPublicAcls: true,
        blockPublicPolicy: true,
        ignorePublicAcls: true,
        restrictPublicBuckets: true,
      });
      const owner = run.ofType('aws:s3/bucketOwnershipControls:BucketOwnershipControls').find((x) => x.inputs.bucket === b.id);
      expect(owner?.inputs.rule).toEqual({ objectOwnership: 'BucketOwnerEnforced' });
      const sse = run
        .ofType('aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration')
        .find((x) => x.inputs.bucket === b.id);
      expect(sse, b.name).toBeDefined();
      const policy = run.ofType('aws:s3/bucketPolicy:BucketPolicy').find((x) => x.inputs.bucket === b.id);
      const stmts = statements(policy?.inputs.policy);
      expect(stmts.filter((s) => s.Effect === 'Allow')).toEqual([]);
      expect(stmts.some((s) => s.Effect === 'Deny' && JSON.stringify(s.Condition).includes('aws:SecureTransport'))).toBe(true);
    }
    expect(run.ofType('aws:lambda/functionUrl:FunctionUrl')).toEqual([]);
    for (const p of run.ofType('aws:lambda/permission:Permission')) expect(p.inputs.principal).not.toBe('*');
  });

  it('versions both buckets: outputs so a repair write keeps what it replaced, sources so reads can pin a version', () => {
    const buckets = ['-sources', '-outputs'].map((b) => run.one('aws:s3/bucket:Bucket', b).id);
    const versioning = run.ofType('aws:s3/bucketVersioning:BucketVersioning');
    expect(versioning.map((v) => v.inputs.bucket).sort()).toEqual(buckets.sort());
    for (const v of versioning) expect(v.inputs.versioningConfiguration).toEqual({ status: 'Enabled' });
  });

  it('grants no IAM statement a * resource on a data action, and scopes every grant to this stack', () => {
    const own = [
      ...run.ofType('aws:s3/bucket:Bucket').map((b) => b.state.arn as string),
      ...run.ofType('aws:sqs/queue:Queue').map((q) => q.state.arn as string),
      ...run.ofType('aws:dynamodb/table:Table').map((t) => t.state.arn as string),
      ...run.ofType('aws:cloudwatch/logGroup:LogGroup').map((l) => l.state.arn as string),
      ...run.ofType('aws:secretsmanager/secret:Secret').map((x) => x.state.arn as string),
    ];
    const policies = [...run.ofType('aws:iam/rolePolicy:RolePolicy'), ...run.ofType('aws:iam/policy:Policy')];
    // Six functions' inline policies and verify's managed policy.
    expect(policies).toHaveLength(7);
    for (const p of policies) {
      for (const s of statements(p.inputs.policy)) {
        expect(s.Effect).toBe('Allow');
        for (const action of list(s.Action)) expect(action, p.name).not.toMatch(/(^\*$|:\*$)/);
        for (const resource of list(s.Resource)) {
          expect(resource, p.name).not.toBe('*');
          expect(
            own.some((arn) => resource === arn || resource.startsWith(`${arn}/`) || resource.startsWith(`${arn}:`)),
            `${p.name}: ${resource}`,
          ).toBe(true);
        }
      }
    }
  });

  it('derives every S3 grant of every role from the key layout (ROLE_ACCESS), and grants nothing else on the buckets', () => {
    const sourcePrefix = loadStackFile('Pulumi.aws-eu-west-1.yaml').config['tessera:sourcePrefix'] as string;
    for (const role of FUNCTION_ROLES) {
      const expected = ROLE_ACCESS[role].flatMap((g) => {
        const area = AREAS[g.area];
        const objects = `${bucketArn(run, area.store)}/${areaPrefix(g.area, sourcePrefix)}${'exact' in area ? '' : '*'}`;
        return [...new Set(g.access.flatMap((a) => S3_PERMISSIONS[a](area.store)))].map((action) => `${action} ${objects}`);
      });
      // A listing of each area listed or read: S3 answers a read of a missing key 404 only to who may list it (docs/aws.md).
      const listed = ROLE_ACCESS[role]
        .filter((g) => g.access.includes('list') || g.access.includes('read'))
        .map(
          (g) =>
            `s3:ListBucket ${bucketArn(run, AREAS[g.area].store)} ${areaPrefix(g.area, sourcePrefix)}${'exact' in AREAS[g.area] ? '' : '*'}`,
        );
      expect(s3Grants(policyOf(run, role).inputs.policy).sort(), role).toEqual([...expected, ...listed].sort());
    }
  });

  it('gives no statement a whole bucket of objects (`<bucket>/*`): every object resource is one area of the layout', () => {
    const buckets = run.ofType('aws:s3/bucket:Bucket').map((b) => b.state.arn as string);
    for (const role of FUNCTION_ROLES) {
      for (const s of statements(policyOf(run, role).inputs.policy)) {
        for (const r of list(s.Resource).filter((x) => x.startsWith('arn:aws:s3:::'))) {
          expect(
            buckets.map((b) => `${b}/*`),
            `${role}: ${r}`,
          ).not.toContain(r);
          // Only a bucket itself (ListBucket) or objects under a named prefix.
          expect(
            buckets.some((b) => r === b || (r.startsWith(`${b}/`) && r.length > b.length + 2)),
            `${role}: ${r}`,
          ).toBe(true);
        }
      }
    }
  });

  it('lets no role read, write or delete an area where the layout gives it no such access, and no function delete anything', () => {
    const sourcePrefix = loadStackFile('Pulumi.aws-eu-west-1.yaml').config['tessera:sourcePrefix'] as string;
    const checks: [ObjectAccess, string][] = [
      ['read', 's3:GetObject'],
      ['create', 's3:PutObject'],
      ['delete', 's3:DeleteObject'],
    ];
    for (const role of FUNCTION_ROLES) {
      for (const area of Object.keys(AREAS) as AreaName[]) {
        const granted = accessOf(role, area);
        for (const [access, action] of checks) {
          // create and replace are one S3 permission (PutObject): either one grants the write.
          const has = granted.includes(access) || (access === 'create' && granted.includes('replace'));
          if (has) continue;
          expect(allows(run, role, action, AREAS[area].store, { key: keyIn(area, sourcePrefix) }), `${role} ${action} ${area}`).toBe(false);
        }
      }
    }
    // A few the layout forbids, by name: the tiling functions stay out of each other's outputs.
    const scene = 'f'.repeat(64);
    expect(allows(run, 'scene', 's3:PutObject', 'outputs', { key: outputKeys.tile(scene, { row: 0, col: 0 }) })).toBe(false);
    expect(allows(run, 'tile', 's3:PutObject', 'outputs', { key: outputKeys.mosaic(scene) })).toBe(false);
    expect(allows(run, 'mosaic', 's3:PutObject', 'outputs', { key: outputKeys.tile(scene, { row: 0, col: 0 }) })).toBe(false);
    expect(allows(run, 'mosaic', 's3:PutObject', 'outputs', { key: outputKeys.sceneManifest(scene) })).toBe(false);
    expect(allows(run, 'ingest', 's3:PutObject', 'outputs', { key: outputKeys.sceneManifest(scene) })).toBe(false);
    // Deleting is the operator's smoke test's alone (verify removes its own scene); no deployed function may.
    for (const role of FUNCTION_ROLES.filter((r) => r !== 'verify')) {
      const actions = statements(policyOf(run, role).inputs.policy).flatMap((s) => list(s.Action));
      expect(
        actions.filter((a) => a.startsWith('s3:Delete')),
        role,
      ).toEqual([]);
    }
  });

  it('allows every access issue 24 found denied by the old policies (it fails on those): the scene index, manifests, markers and tombstones, the sweep state', () => {
    const scene = 'e'.repeat(64);
    const hour = '2026060112';
    const found: [FunctionRole, string, { key: string } | { listPrefix: string }][] = [
      // Fan-out enters the scene in the sweep's index; a STAC Item's band pins are recorded and read back.
      ['scene', 's3:PutObject', { key: sceneLifecycleKeys.indexEntry(hour, scene) }],
      ['scene', 's3:GetObject', { key: `${areaPrefix('itemPins')}${scene}.json` }],
      ['scene', 's3:PutObject', { key: `${areaPrefix('itemPins')}${scene}.json` }],
      // A tile job reads its scene's manifest; chunked fan-out reads and writes chunk markers; a superseded scene's tombstone.
      ['tile', 's3:GetObject', { key: outputKeys.sceneManifest(scene) }],
      ['tile', 's3:GetObject', { key: sceneLifecycleKeys.chunkDone(scene, 0, 2) }],
      ['tile', 's3:PutObject', { key: sceneLifecycleKeys.chunkDone(scene, 0, 2) }],
      ['tile', 's3:GetObject', { key: sceneLifecycleKeys.superseded(scene) }],
      ['tile', 's3:PutObject', { key: sceneLifecycleKeys.superseded(scene) }],
      // The sweep reads and rewrites its state, and lists the index by hour.
      ['mosaic', 's3:GetObject', { key: SWEEP_STATE_KEY }],
      ['mosaic', 's3:PutObject', { key: SWEEP_STATE_KEY }],
      ['mosaic', 's3:ListBucket', { listPrefix: sceneLifecycleKeys.indexHour(hour) }],
    ];
    const denied = found.filter(([role, action, target]) => !allows(run, role, action, 'outputs', target));
    expect(denied.map(([role, action, target]) => `${role} ${action} ${'key' in target ? target.key : `${target.listPrefix}*`}`)).toEqual(
      [],
    );
  });

  it('lets every role list what it reads, by the key itself, so a missing key is a 404 and not a 403', () => {
    const sourcePrefix = loadStackFile('Pulumi.aws-eu-west-1.yaml').config['tessera:sourcePrefix'] as string;
    for (const role of FUNCTION_ROLES) {
      for (const g of ROLE_ACCESS[role].filter((x) => x.access.includes('read'))) {
        const key = keyIn(g.area, sourcePrefix);
        expect(allows(run, role, 's3:ListBucket', AREAS[g.area].store, { listPrefix: key }), `${role} ${g.area}`).toBe(true);
      }
      // ...and no further: a listing of the whole bucket is refused.
      expect(allows(run, role, 's3:ListBucket', 'outputs', { listPrefix: '' }), role).toBe(false);
    }
  });

  it('lets only the tile and stream workers (and the operator running verify) touch the claims table, and only verify delete a row', () => {
    const table = run.one('aws:dynamodb/table:Table', '-claims').state.arn as string;
    for (const role of FUNCTION_ROLES) {
      const onTable = statements(policyOf(run, role).inputs.policy).filter((s) => list(s.Resource).includes(table));
      expect(onTable.length, role).toBe(role === 'tile' || role === 'stream' || role === 'verify' ? 1 : 0);
      if (role === 'stream')
        expect(list(onTable[0]?.Action).sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
    }
  });

  it("publishes verify's grants as a managed policy attached to nothing, with its ARN in the outputs for the operator", () => {
    const verify = run.one('aws:iam/policy:Policy', '-verify');
    expect(run.outputs.verifyPolicyArn).toBe(verify.state.arn);
    for (const type of ['aws:iam/rolePolicyAttachment:RolePolicyAttachment', 'aws:iam/policyAttachment:PolicyAttachment']) {
      expect(run.ofType(type).filter((a) => a.inputs.policyArn === verify.state.arn)).toEqual([]);
    }
    // Besides its objects: its probe claims, its smoke jobs and scene event, the queues' counts, its own dead letters.
    const others = statements(verify.inputs.policy).filter((s) => !list(s.Action).some((a) => a.startsWith('s3:')));
    const arn = (type: string, suffix: string) => run.one(type, suffix).state.arn as string;
    expect(others.flatMap((s) => list(s.Resource).map((r) => `${list(s.Action).join(',')} ${r}`)).sort()).toEqual(
      [
        `dynamodb:GetItem,dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem ${arn('aws:dynamodb/table:Table', '-claims')}`,
        `sqs:SendMessage,sqs:GetQueueAttributes ${arn('aws:sqs/queue:Queue', '-tile')}`,
        `sqs:SendMessage,sqs:GetQueueAttributes ${arn('aws:sqs/queue:Queue', '-scene')}`,
        `sqs:ReceiveMessage,sqs:ChangeMessageVisibility,sqs:DeleteMessage,sqs:GetQueueUrl ${arn('aws:sqs/queue:Queue', '-tile-dlq')}`,
      ].sort(),
    );
  });

  it("points every function's environment at this stack's buckets, table and queues, and at its own trigger's DLQ", () => {
    const expected = {
      [ENV.sourceBucket]: run.one('aws:s3/bucket:Bucket', '-sources').state.bucket,
      [ENV.outputBucket]: run.one('aws:s3/bucket:Bucket', '-outputs').state.bucket,
      [ENV.claimsTable]: run.one('aws:dynamodb/table:Table', '-claims').state.name,
      [ENV.tileQueue]: run.one('aws:sqs/queue:Queue', '-tile').state.url,
      [ENV.sourcePrefix]: 'scenes/',
      [ENV.sourceSuffix]: '.tif',
    };
    for (const fn of functions(run)) {
      expect(envOf((fn.inputs.environment as { variables: unknown }).variables), fn.name).toMatchObject(expected);
    }
    const dlqOf = (role: string) =>
      envOf((run.one('aws:lambda/function:Function', `-${role}`).inputs.environment as { variables: unknown }).variables)[
        ENV.deadLetterQueue
      ];
    expect(dlqOf('scene')).toBe(run.one('aws:sqs/queue:Queue', '-scene-dlq').state.url);
    expect(dlqOf('tile')).toBe(run.one('aws:sqs/queue:Queue', '-tile-dlq').state.url);
    expect(dlqOf('ingest')).toBe(run.one('aws:sqs/queue:Queue', '-ingest-dlq').state.url);
  });

  it('versions the source bucket, and lets every role that reads a source read pinned versions of it', () => {
    const sources = run.one('aws:s3/bucket:Bucket', '-sources');
    const versioning = run.ofType('aws:s3/bucketVersioning:BucketVersioning').find((v) => v.inputs.bucket === sources.id);
    expect(versioning?.inputs.versioningConfiguration).toEqual({ status: 'Enabled' });
    const sourcePrefix = loadStackFile('Pulumi.aws-eu-west-1.yaml').config['tessera:sourcePrefix'] as string;
    for (const role of FUNCTION_ROLES.filter((r) => accessOf(r, 'source').includes('read'))) {
      for (const action of ['s3:GetObject', 's3:GetObjectVersion']) {
        expect(allows(run, role, action, 'sources', { key: keyIn('source', sourcePrefix) }), `${role} ${action}`).toBe(true);
      }
    }
  });

  it('lets scene and tile settle poison in their own DLQ, scene requeue a failed record on its own queue, and tile send fan-out chunks', () => {
    const sends = (role: string) =>
      statements(run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`).inputs.policy)
        .filter((s) => list(s.Action).includes('sqs:SendMessage'))
        .flatMap((s) => list(s.Resource))
        .sort();
    const arn = (suffix: string) => run.one('aws:sqs/queue:Queue', suffix).state.arn as string;
    // The scene handler sends a transiently failed record of a multi-record message back to the queue its mapping
    // reads (functions/aws/handlers/scene.handler.ts, requeue), so that queue is the one granted.
    const sceneMapping = run.one('aws:lambda/eventSourceMapping:EventSourceMapping', '-scene');
    expect(sceneMapping.inputs.eventSourceArn).toBe(arn('-scene'));
    expect(sends('scene')).toEqual([arn('-scene'), arn('-scene-dlq'), arn('-tile')].sort());
    expect(sends('tile')).toEqual([arn('-tile'), arn('-tile-dlq')].sort());
    expect(sends('mosaic')).toEqual([]);
    // The ingest function settles a malformed request in its own DLQ, and sends nothing else.
    expect(sends('ingest')).toEqual([arn('-ingest-dlq')]);
    expect(sends('reconcile')).toEqual([]);
  });

  it("tells each queue-triggered function its own queue's maxReceiveCount (TESSERA_MAX_DELIVERIES), and the sweep none", async () => {
    // A count other than the default, so a value the handlers would assume when unset cannot pass for it.
    const set = await runStack(STACK, { ...BASE, 'tessera:maxReceiveCount': '7' });
    const mappings = set.ofType('aws:lambda/eventSourceMapping:EventSourceMapping');
    expect(mappings).toHaveLength(4);
    for (const m of mappings) {
      const queue = byState(set, 'aws:sqs/queue:Queue', 'arn', m.inputs.eventSourceArn);
      const fn = byState(set, 'aws:lambda/function:Function', 'arn', m.inputs.functionName);
      const count = (JSON.parse(String(queue.inputs.redrivePolicy)) as { maxReceiveCount: number }).maxReceiveCount;
      expect(count, queue.name).toBe(7);
      const env = envOf((fn.inputs.environment as { variables: unknown }).variables);
      expect(env[ENV.maxDeliveries], fn.name).toBe(String(count));
      expect(parseRuntimeConfig(env).maxDeliveries, fn.name).toBe(count);
    }
    const mosaic = envOf((set.one('aws:lambda/function:Function', '-mosaic').inputs.environment as { variables: unknown }).variables);
    expect(mosaic[ENV.maxDeliveries]).toBeUndefined();
  });

  it('creates every function and event source mapping after the role policy it runs with', () => {
    for (const role of ['scene', 'tile', 'mosaic', 'ingest', 'reconcile']) {
      const policy = run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`);
      expect(missingBefore(run, run.one('aws:lambda/function:Function', `-${role}`), [policy]), role).toEqual([]);
    }
    for (const m of run.ofType('aws:lambda/eventSourceMapping:EventSourceMapping')) {
      const role = m.name.split('-').at(-1) as string;
      // The poller starts at once: the function's role must already allow receiving from the queue.
      expect(
        missingBefore(run, m, [run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`), run.one('aws:lambda/function:Function', `-${role}`)]),
      ).toEqual([]);
    }
    const notification = run.ofType('aws:s3/bucketNotification:BucketNotification')[0] as RecordedResource;
    expect(missingBefore(run, notification, run.ofType('aws:sqs/queuePolicy:QueuePolicy'))).toEqual([]);
  });

  it('alarms on a lease-stolen log line, with a filter that matches what JsonTelemetry writes', () => {
    const filters = run.ofType('aws:cloudwatch/logMetricFilter:LogMetricFilter');
    const tileLogGroup = run.one('aws:cloudwatch/logGroup:LogGroup', '-tile').state.name;
    const tileFilter = filters.find((f) => f.inputs.logGroupName === tileLogGroup);
    expect(tileFilter?.inputs.pattern).toBe(LEASE_STOLEN_PATTERN);
    // Every `$.field = "value"` term of the JSON pattern holds on the line the core logs.
    const lines: string[] = [];
    new JsonTelemetry((l) => lines.push(l)).log('ERROR', 'lease-stolen', { jobKey: 'k' });
    const logged = JSON.parse(lines[0] as string) as Record<string, unknown>;
    const terms = [...LEASE_STOLEN_PATTERN.matchAll(/\$\.(\w+) = "([^"]+)"/g)];
    expect(terms.map((t) => t[1])).toEqual(['level', 'event']);
    for (const [, field, value] of terms) expect(logged[field as string]).toBe(value);
    const metric = (tileFilter?.inputs.metricTransformation as { name: string; namespace: string }) ?? { name: '', namespace: '' };
    const alarm = run
      .ofType('aws:cloudwatch/metricAlarm:MetricAlarm')
      .find((a) => a.inputs.metricName === metric.name && a.inputs.namespace === metric.namespace);
    expect(alarm?.inputs).toMatchObject({ threshold: 1, comparisonOperator: 'GreaterThanOrEqualToThreshold' });
    expect(alarm?.inputs.alarmActions).toEqual([run.ofType('aws:sns/topic:Topic')[0]?.state.arn]);
  });

  it('runs the mosaic sweep on a schedule, with no Lambda retry of a failed run', () => {
    const rule = run.one('aws:cloudwatch/eventRule:EventRule', '-mosaic-sweep');
    expect(rule.inputs.scheduleExpression).toBe('rate(5 minutes)');
    const mosaic = run.one('aws:lambda/function:Function', '-mosaic');
    expect(run.one('aws:cloudwatch/eventTarget:EventTarget', '-mosaic-sweep').inputs).toMatchObject({ arn: mosaic.state.arn });
    expect(run.one('aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig', '-mosaic-sweep').inputs).toMatchObject({
      maximumRetryAttempts: 0,
    });
  });

  it('runs the manifest reconcile weekly, read-only, with no Lambda retry, and its target after its invoke permission', () => {
    const rule = run.one('aws:cloudwatch/eventRule:EventRule', '-reconcile');
    expect(rule.inputs.scheduleExpression).toBe('rate(7 days)');
    const reconcile = run.one('aws:lambda/function:Function', '-reconcile');
    const target = run.one('aws:cloudwatch/eventTarget:EventTarget', '-reconcile');
    expect(target.inputs).toMatchObject({ rule: rule.state.name, arn: reconcile.state.arn });
    const permission = run.one('aws:lambda/permission:Permission', '-reconcile');
    expect(permission.inputs).toMatchObject({ principal: 'events.amazonaws.com', sourceArn: rule.state.arn });
    expect(missingBefore(run, target, [permission])).toEqual([]);
    expect(run.one('aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig', '-reconcile').inputs).toMatchObject({
      maximumRetryAttempts: 0,
    });
    // Read-only: it lists and heads the promoted prefix and reads the manifest; nothing it may do writes.
    const actions = statements(run.one('aws:iam/rolePolicy:RolePolicy', '-reconcile').inputs.policy).flatMap((s) => list(s.Action));
    expect(actions.filter((a) => /Put|Update|Delete|Write|Send/.test(a) && !a.startsWith('logs:'))).toEqual([]);
    const manifest = run.one('aws:dynamodb/table:Table', '-manifest').state.name;
    const env = envOf((reconcile.inputs.environment as { variables: unknown }).variables);
    expect(env[ENV.manifestTable]).toBe(manifest);
  });

  it('keeps the ingest manifest in its own table keyed by (pk, checksum), with point-in-time recovery and no TTL', () => {
    const manifest = run.one('aws:dynamodb/table:Table', '-manifest');
    expect(manifest.inputs).toMatchObject({
      billingMode: 'PAY_PER_REQUEST',
      hashKey: 'pk',
      rangeKey: 'checksum',
      pointInTimeRecovery: { enabled: true },
    });
    // A row is the proof that an artefact was published: it never expires.
    expect(manifest.inputs.ttl).toBeUndefined();
    const ingest = envOf((run.one('aws:lambda/function:Function', '-ingest').inputs.environment as { variables: unknown }).variables);
    expect(ingest[ENV.manifestTable]).toBe(manifest.state.name);
    expect(ingest[ENV.ingestQueue]).toBe(run.one('aws:sqs/queue:Queue', '-ingest').state.url);
    expect(() => parseRuntimeConfig(ingest)).not.toThrow();
    expect(parseRuntimeConfig(ingest)).toMatchObject({ manifestTable: manifest.state.name });
    expect(run.outputs).toMatchObject({
      ingestQueueUrl: run.one('aws:sqs/queue:Queue', '-ingest').state.url,
      manifestTable: manifest.state.name,
    });
  });

  it('lets the ingest function touch only staging/, the promoted prefix and the manifest table, and delete nothing', () => {
    const sources = run.one('aws:s3/bucket:Bucket', '-sources').state.arn as string;
    const manifest = run.one('aws:dynamodb/table:Table', '-manifest').state.arn as string;
    const claims = run.one('aws:dynamodb/table:Table', '-claims').state.arn as string;
    const outputs = run.one('aws:s3/bucket:Bucket', '-outputs').state.arn as string;
    const stmts = statements(run.one('aws:iam/rolePolicy:RolePolicy', '-ingest').inputs.policy);
    // Writes: staging and the promoted prefix (the layout's ingest grants), create-only; nothing of the output bucket.
    const writes = stmts.filter((s) => list(s.Action).includes('s3:PutObject')).flatMap((s) => list(s.Resource));
    const sourcePrefix = loadStackFile('Pulumi.aws-eu-west-1.yaml').config['tessera:sourcePrefix'] as string;
    expect(writes.sort()).toEqual([`${sources}/${areaPrefix('source', sourcePrefix)}*`, `${sources}/${areaPrefix('staging')}*`].sort());
    const actions = stmts.flatMap((s) => list(s.Action));
    // (sqs:DeleteMessage is the trigger's own ack, granted on its queue only.)
    expect(actions.filter((a) => /Delete/.test(a) && a !== 'sqs:DeleteMessage')).toEqual([]);
    const onTables = stmts.filter((s) => list(s.Resource).some((r) => r === manifest || r === claims));
    expect(onTables.flatMap((s) => list(s.Resource))).toEqual([manifest]);
    expect(onTables.flatMap((s) => list(s.Action)).sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query']);
    expect(stmts.flatMap((s) => list(s.Resource)).filter((r) => r.startsWith(outputs))).toEqual([]);
    // Only the manifest roles get the manifest: no tiling function can write a row.
    for (const role of ['scene', 'tile', 'mosaic']) {
      const env = envOf((run.one('aws:lambda/function:Function', `-${role}`).inputs.environment as { variables: unknown }).variables);
      expect(env[ENV.manifestTable], role).toBeUndefined();
      const touches = statements(run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`).inputs.policy).filter((s) =>
        list(s.Resource).includes(manifest),
      );
      expect(touches, role).toEqual([]);
    }
  });

  it('expires ingest staging after tessera:stagingRetentionDays (default 7) on the source bucket, and only there', async () => {
    const lifecycle = (r: StackRun, bucket: string) => {
      const id = r.one('aws:s3/bucket:Bucket', bucket).id;
      const found = r
        .ofType('aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration')
        .find((l) => l.inputs.bucket === id) as RecordedResource;
      return found.inputs.rules as { id: string; filter?: { prefix?: string }; expiration?: { days: number } }[];
    };
    const staging = lifecycle(run, '-sources').find((r) => r.id === 'expire-ingest-staging');
    expect(staging).toMatchObject({ status: 'Enabled', filter: { prefix: 'staging/' }, expiration: { days: 7 } });
    // The versioned bucket keeps a deleted object as a noncurrent version: that goes too.
    expect(staging).toMatchObject({ noncurrentVersionExpiration: { noncurrentDays: 1 } });
    expect(lifecycle(run, '-outputs').some((r) => r.id === 'expire-ingest-staging')).toBe(false);
    const set = await runStack(STACK, { ...BASE, 'tessera:stagingRetentionDays': '3' });
    expect(lifecycle(set, '-sources').find((r) => r.id === 'expire-ingest-staging')?.expiration).toEqual({ days: 3 });
    expect(await refusal(STACK, { ...BASE, 'tessera:stagingRetentionDays': '0' })).toContain(
      'tessera:stagingRetentionDays must be a whole number from 1 to 3650',
    );
    // A scene prefix that holds staging/ would start scenes from half-validated downloads.
    expect(await refusal(STACK, { ...BASE, 'tessera:sourcePrefix': 'staging/scenes/' })).toContain('overlaps the ingest staging prefix');
    // Nor one that holds, or is held by, streams/: a batch object would start a scene (and S3 refuses overlapping notifications).
    for (const prefix of [streamKeys.batch('ais/'), 'str']) {
      expect(await refusal(STACK, { ...BASE, 'tessera:sourcePrefix': prefix }), prefix).toContain("overlaps the feature streams' prefix");
    }
  });

  it('refuses a lease at or below the Lambda ceiling at preview, saying what to set', async () => {
    for (const lease of ['900', '600']) {
      const message = await refusal(STACK, { ...BASE, 'tessera:leaseSeconds': lease });
      expect(message).toContain('tessera:leaseSeconds');
      expect(message).toContain('at least 901 s');
      expect(message).toContain('pulumi config set tessera:leaseSeconds');
    }
  });

  it('refuses a function timeout above the Lambda ceiling, and a missing aws:region', async () => {
    expect(await refusal(STACK, { ...BASE, 'tessera:functionTimeoutSeconds': '901' })).toMatch(
      /tessera:functionTimeoutSeconds.*900 s or less/s,
    );
    const { 'aws:region': _omitted, ...noRegion } = BASE;
    expect(await refusal(STACK, noRegion)).toContain('pulumi config set aws:region eu-west-1');
  });

  it('says to run npm run build:functions when the archives are missing', async () => {
    expect(await refusal(STACK, { ...BASE, 'tessera:archiveDir': '/nonexistent/tessera-dist' })).toMatch(
      /\/nonexistent\/tessera-dist\/aws\/scene\.zip.*run npm run build:functions first/s,
    );
  });

  it('sets the tile queue visibility to six times the function timeout (120 s gives 720 s, 900 s gives 5,400 s)', async () => {
    const short = await runStack(STACK, { ...BASE, 'tessera:functionTimeoutSeconds': '120', 'tessera:leaseSeconds': '1000' });
    expect(short.one('aws:sqs/queue:Queue', '-tile').inputs.visibilityTimeoutSeconds).toBe(720);
    expect(short.outputs.leaseSeconds).toBe(1000);
    expect(run.one('aws:sqs/queue:Queue', '-tile').inputs.visibilityTimeoutSeconds).toBe(5400);
  });
});

/** Pulumi's wire form of a secret value (mocks record it as is): `{ <sig>: <secret sig>, value }`. */
const SECRET_SIG = '4dabf18193072939515e22adb298388d';
const reveal = (v: unknown): { readonly secret: boolean; readonly value: unknown } =>
  typeof v === 'object' && v !== null && SECRET_SIG in v
    ? { secret: true, value: (v as unknown as { value: unknown }).value }
    : { secret: false, value: v };

describe('the AWS stack with tessera:featureSinkUrl (the PostGIS sink, docs/postgis.md)', () => {
  // Recognisable, so that a search of every resource finds any copy: the whole URL or its password alone.
  const PASSWORD = 'pw-7f3a9c1e-sink';
  const URL = `postgis://tessera:${PASSWORD}@db.example:5432/gis`;
  let set: StackRun;
  const secretOf = (run: StackRun) => run.one('aws:secretsmanager/secret:Secret', '-feature-sink');
  const versionOf = (run: StackRun) => run.one('aws:secretsmanager/secretVersion:SecretVersion', '-feature-sink');
  const variables = (fn: RecordedResource) => envOf((reveal(fn.inputs.environment).value as { variables: unknown }).variables);

  it('keeps the URL in one resource of the stack: the Secrets Manager secret version, as a Pulumi secret', async () => {
    set = await runStack(STACK, { ...BASE, 'tessera:featureSinkUrl': URL });
    const holders = set.resources.filter((r) => JSON.stringify([r.inputs, r.state]).includes(PASSWORD));
    expect(holders.map((r) => r.type)).toEqual(['aws:secretsmanager/secretVersion:SecretVersion']);
    expect(reveal(versionOf(set).inputs.secretString)).toEqual({ secret: true, value: URL });
    expect(versionOf(set).inputs.secretId).toBe(secretOf(set).state.arn);
    expect(JSON.stringify(set.outputs)).not.toContain(PASSWORD);
  });

  it("gives no function the URL, and the tile and stream functions alone the secret's ARN and the version the stack wrote", () => {
    expect(functions(set)).toHaveLength(6);
    for (const fn of functions(set)) {
      expect(JSON.stringify(fn.inputs), fn.name).not.toContain(PASSWORD);
      const env = variables(fn);
      expect(env[ENV.featureSink], fn.name).toBeUndefined();
      // The stream function writes its batches into the same PostGIS (docs/feature-batches.md).
      const isTile = roleOf(fn) === 'tile' || roleOf(fn) === 'stream';
      expect(env[ENV.featureSinkSecret], fn.name).toBe(isTile ? secretOf(set).state.arn : undefined);
      expect(env[ENV.featureSinkSecretVersion], fn.name).toBe(isTile ? versionOf(set).state.versionId : undefined);
      // Nothing left in a function's configuration needs hiding.
      expect(reveal(fn.inputs.environment).secret, fn.name).toBe(false);
    }
    const tile = set.one('aws:lambda/function:Function', '-tile');
    expect(parseRuntimeConfig(variables(tile)).featureSinkSecret).toEqual({
      secretId: secretOf(set).state.arn,
      versionId: versionOf(set).state.versionId,
    });
    expect(missingBefore(set, tile, [versionOf(set)])).toEqual([]);
  });

  it('lets the tile and stream roles alone read the secret: one GetSecretValue statement each, on its ARN', () => {
    const policies = [...set.ofType('aws:iam/rolePolicy:RolePolicy'), ...set.ofType('aws:iam/policy:Policy')];
    const touching = policies.flatMap((p) =>
      statements(p.inputs.policy)
        .filter(
          (s) =>
            list(s.Action).some((a) => a === '*' || a.startsWith('secretsmanager:')) ||
            list(s.Resource).some((r) => r.startsWith('arn:aws:secretsmanager:')),
        )
        .map((s) => ({ policy: p.name, ...s })),
    );
    expect(touching.sort((a, b) => (a.policy < b.policy ? -1 : 1))).toEqual(
      ['-stream', '-tile'].map((role) => ({
        policy: set.one('aws:iam/rolePolicy:RolePolicy', role).name,
        Sid: 'ReadFeatureSinkSecret',
        Effect: 'Allow',
        Action: 'secretsmanager:GetSecretValue',
        Resource: secretOf(set).state.arn,
      })),
    );
  });

  it('declares no secret without the key, and refuses a URL that is not postgis:// without echoing it', async () => {
    const bare = await runStack(STACK, BASE);
    expect(bare.resources.filter((r) => r.type.startsWith('aws:secretsmanager/'))).toEqual([]);
    const tile = variables(bare.one('aws:lambda/function:Function', '-tile'));
    expect([tile[ENV.featureSink], tile[ENV.featureSinkSecret], tile[ENV.featureSinkSecretVersion]]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    const tilePolicy = statements(bare.one('aws:iam/rolePolicy:RolePolicy', '-tile').inputs.policy);
    expect(tilePolicy.filter((s) => list(s.Action).some((a) => a.startsWith('secretsmanager:')))).toEqual([]);
    const refused = await refusal(STACK, { ...BASE, 'tessera:featureSinkUrl': 'mysql://u:p@h/db' });
    expect(refused).toContain('tessera:featureSinkUrl must be postgis://');
    expect(refused).not.toContain('u:p@h');
  });
});

describe('the AWS stack with tessera:stacAssets (multi-file scenes start on their STAC Item, docs/multi-file-scenes.md)', () => {
  const STAC = { ...BASE, 'tessera:stacAssets': '{"B04":"red","B08":"nir"}' };
  it('notifies the scene queue of new *.json items under the source prefix, and tells the scene function the selection', async () => {
    const run = await runStack(STACK, STAC);
    const queue = run.one('aws:sqs/queue:Queue', '-scene');
    expect(run.ofType('aws:s3/bucketNotification:BucketNotification')[0]?.inputs.queues).toEqual([
      { queueArn: queue.state.arn, events: ['s3:ObjectCreated:*'], filterPrefix: 'scenes/', filterSuffix: '.json' },
      { queueArn: run.one('aws:sqs/queue:Queue', '-stream').state.arn, events: ['s3:ObjectCreated:*'], filterPrefix: streamKeys.root() },
    ]);
    const scene = envOf((run.one('aws:lambda/function:Function', '-scene').inputs.environment as { variables: unknown }).variables);
    expect(scene[ENV.stacAssets]).toBe('{"B04":"red","B08":"nir"}');
    expect(scene[ENV.sourceSuffix]).toBe('.json');
    expect(parseRuntimeConfig(scene).stacAssets).toEqual({ B04: 'red', B08: 'nir' });
    // A stack without it is the single-file stack it always was.
    const plain = envOf(
      ((await runStack(STACK, BASE)).one('aws:lambda/function:Function', '-scene').inputs.environment as { variables: unknown }).variables,
    );
    expect(plain[ENV.stacAssets]).toBeUndefined();
  });

  it('refuses a selection that is not a JSON object, an expression naming a band it lacks, and a suffix that hides the items', async () => {
    expect(await refusal(STACK, { ...BASE, 'tessera:stacAssets': 'red,nir' })).toContain('tessera:stacAssets is not JSON');
    expect(await refusal(STACK, { ...BASE, 'tessera:stacAssets': '{"B04":"red"}' })).toMatch(
      /tessera:expression must use only the bands tessera:stacAssets selects: unknown band "B08"/,
    );
    expect(await refusal(STACK, { ...STAC, 'tessera:sourceSuffix': '.tif' })).toContain(
      'tessera:sourceSuffix ".tif" would keep STAC Items (*.json) from the scene trigger',
    );
  });
});

describe('the AWS stack with tessera:telemetry (OpenTelemetry export, docs/telemetry.md)', () => {
  const variables = (fn: RecordedResource) => envOf((reveal(fn.inputs.environment).value as { variables: unknown }).variables);
  const telemetryKeys = (env: Record<string, string>) => Object.keys(env).filter((k) => /^(OTEL_|OPENTELEMETRY_|TESSERA_OTEL_)/.test(k));
  /** What the stack declares, by type and name: the telemetry runs must add exactly their own resources to it. */
  const names = (run: StackRun) =>
    run.resources
      .filter((r) => r.custom)
      .map((r) => `${r.type} ${r.name}`)
      .sort();
  /** Every role's layout policy, as deployed: telemetry must leave them as they are. */
  const layoutPolicies = (run: StackRun) =>
    Object.fromEntries(functions(run).map((fn) => [roleOf(fn), statements(policyOf(run, roleOf(fn) as FunctionRole).inputs.policy)]));
  const telemetryPolicies = (run: StackRun) => run.ofType('aws:iam/rolePolicy:RolePolicy').filter((p) => p.name.endsWith('-telemetry'));
  const HEADER_KEY = 'key-5be1d0c7-otlp';
  let off: StackRun;

  it('is off unless set: no layer, no OTEL_* variable, no grant and no resource for it, the same stack as `off`', async () => {
    off = await runStack(STACK, BASE);
    const explicit = await runStack(STACK, { ...BASE, 'tessera:telemetry': 'off' });
    for (const run of [off, explicit]) {
      for (const fn of functions(run)) {
        expect(fn.inputs.layers, fn.name).toBeUndefined();
        expect(telemetryKeys(variables(fn)), fn.name).toEqual([]);
      }
      expect(telemetryPolicies(run)).toEqual([]);
      const actions = run
        .ofType('aws:iam/rolePolicy:RolePolicy')
        .flatMap((p) => statements(p.inputs.policy).flatMap((st) => list(st.Action)));
      expect(actions.filter((a) => a.startsWith('xray:'))).toEqual([]);
    }
    expect(names(explicit)).toEqual(names(off));
    expect(functions(explicit).map((fn) => fn.inputs)).toEqual(functions(off).map((fn) => fn.inputs));
  });

  it('cloud: the ADOT collector layer on every function, OTLP to it on localhost, traces to X-Ray, metrics as EMF; X-Ray writes granted, nothing else', async () => {
    const run = await runStack(STACK, { ...BASE, 'tessera:telemetry': '{"exporter":"cloud","sampling":0.25}' });
    expect(functions(run)).toHaveLength(FUNCTION_ROLES.length - 1); // every deployed role; verify is no function
    for (const fn of functions(run)) {
      expect(fn.inputs.layers, fn.name).toEqual([adotCollectorLayerArn('eu-west-1')]);
      expect(fn.inputs.layers).toEqual(['arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1']);
      const env = variables(fn);
      expect(telemetryKeys(env).sort(), fn.name).toEqual(
        [
          'OTEL_EXPORTER_OTLP_ENDPOINT',
          'OTEL_RESOURCE_ATTRIBUTES',
          'OTEL_TRACES_SAMPLER',
          'OTEL_TRACES_SAMPLER_ARG',
          'OPENTELEMETRY_COLLECTOR_CONFIG_URI',
          COLLECTOR_CONFIG_VARIABLE,
        ].sort(),
      );
      expect(env).toMatchObject({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318',
        OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${STACK}`,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OPENTELEMETRY_COLLECTOR_CONFIG_URI: `env:${COLLECTOR_CONFIG_VARIABLE}`,
      });
      const collector = JSON.parse(env[COLLECTOR_CONFIG_VARIABLE] as string);
      expect(collector.service.pipelines).toEqual({
        traces: { receivers: ['otlp'], exporters: ['awsxray'] },
        metrics: { receivers: ['otlp'], exporters: ['awsemf'] },
      });
      expect(collector.exporters.awsemf).toEqual({ namespace: `Tessera/${STACK}`, output_destination: 'stdout' });
      expect(collector.receivers.otlp.protocols).toEqual({ http: { endpoint: 'localhost:4318' } });
    }
    // Exactly one policy more per role, the two X-Ray write actions, and the function created after it.
    const grants = telemetryPolicies(run);
    expect(grants.map((p) => p.name).sort()).toEqual(
      functions(run)
        .map((fn) => `${fn.name}-telemetry`)
        .sort(),
    );
    for (const p of grants) {
      expect(statements(p.inputs.policy)).toEqual([{ Sid: 'XRayWrite', Effect: 'Allow', Action: [...XRAY_WRITE_ACTIONS], Resource: '*' }]);
      const fn = run.one('aws:lambda/function:Function', p.name.replace(/-telemetry$/, ''));
      expect(missingBefore(run, fn, [p])).toEqual([]);
      expect((p.propertyDependencies.role ?? []).map((urn) => run.byUrn(urn)?.name)).toEqual([fn.name]);
    }
    expect(layoutPolicies(run)).toEqual(layoutPolicies(off));
    expect(
      names(run)
        .filter((n) => !names(off).includes(n))
        .sort(),
    ).toEqual(grants.map((p) => `aws:iam/rolePolicy:RolePolicy ${p.name}`).sort());
  });

  it('otlp: the endpoint in every function, its headers only in a Secrets Manager secret each role may read, by ARN and pinned version', async () => {
    const run = await runStack(STACK, {
      ...BASE,
      'tessera:telemetry': '{"exporter":"otlp","endpoint":"https://otlp.example.com/otlp/"}',
      'tessera:telemetryHeaders': `x-api-key=${HEADER_KEY}`,
    });
    const secret = run.one('aws:secretsmanager/secret:Secret', '-otel-headers');
    const version = run.one('aws:secretsmanager/secretVersion:SecretVersion', '-otel-headers');
    expect(reveal(version.inputs.secretString)).toEqual({ secret: true, value: `x-api-key=${HEADER_KEY}` });
    const holders = run.resources.filter((r) => JSON.stringify([r.inputs, r.state]).includes(HEADER_KEY));
    expect(holders.map((r) => r.type)).toEqual(['aws:secretsmanager/secretVersion:SecretVersion']);
    for (const fn of functions(run)) {
      const env = variables(fn);
      expect(fn.inputs.layers, fn.name).toBeUndefined();
      expect(Object.fromEntries(telemetryKeys(env).map((k) => [k, env[k]]))).toEqual({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example.com/otlp',
        OTEL_RESOURCE_ATTRIBUTES: `deployment.environment.name=${STACK}`,
        [ENV.otelHeadersSecret]: secret.state.arn,
        [ENV.otelHeadersSecretVersion]: version.state.versionId,
      });
      expect(missingBefore(run, fn, [version])).toEqual([]);
    }
    const grants = telemetryPolicies(run);
    expect(grants).toHaveLength(functions(run).length);
    for (const p of grants)
      expect(statements(p.inputs.policy)).toEqual([
        { Sid: 'OtlpHeaders', Effect: 'Allow', Action: 'secretsmanager:GetSecretValue', Resource: secret.state.arn },
      ]);
    expect(layoutPolicies(run)).toEqual(layoutPolicies(off));
    expect(
      names(run)
        .filter((n) => !names(off).includes(n))
        .sort(),
    ).toEqual([secret, version, ...grants].map((r) => `${r.type} ${r.name}`).sort());
    // Without headers: the endpoint, and nothing declared or granted.
    const bare = await runStack(STACK, { ...BASE, 'tessera:telemetry': '{"exporter":"otlp","endpoint":"http://collector.internal:4318"}' });
    expect(names(bare)).toEqual(names(off));
    expect(variables(bare.one('aws:lambda/function:Function', '-tile')).OTEL_EXPORTER_OTLP_ENDPOINT).toBe('http://collector.internal:4318');
  });

  it('refuses what cannot work, naming the fix, and never echoes the headers', async () => {
    const t = (v: string, extra: Record<string, string> = {}) => refusal(STACK, { ...BASE, 'tessera:telemetry': v, ...extra });
    expect(await t('on')).toContain('tessera:telemetry must be off, cloud, otlp, or JSON');
    expect(await t('{"exporter":"otlp"}')).toContain('the otlp exporter needs an endpoint');
    expect(await t('{"exporter":"otlp","endpoint":"https://user:pw@otlp.example.com"}')).toContain('must not carry credentials');
    expect(await t('{"exporter":"cloud","sampling":0}')).toContain('sampling is the share of deliveries traced');
    expect(await t('{"exporter":"cloud","endpoint":"https://x.example.com"}')).toContain('endpoint applies to the otlp exporter only');
    expect(await t('{"exporter":"cloud","sample":0.5}')).toContain('"sample" is not a telemetry setting');
    const headers = await t('cloud', { 'tessera:telemetryHeaders': `x-api-key=${HEADER_KEY}` });
    expect(headers).toContain('tessera:telemetryHeaders is for the otlp exporter only');
    expect(headers).not.toContain(HEADER_KEY);
    const malformed = await t('{"exporter":"otlp","endpoint":"https://otlp.example.com"}', { 'tessera:telemetryHeaders': HEADER_KEY });
    expect(malformed).toContain('tessera:telemetryHeaders must be key=value pairs');
    expect(malformed).not.toContain(HEADER_KEY);
  });
});
