import { describe, expect, it } from 'vitest';
import { LEASE_STOLEN_PATTERN } from '../../infra/aws/tiling-stack.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { CEILINGS, type Platform } from '../../shared/domain/ceilings.js';
import { ENV, parseRuntimeConfig } from '../../shared/domain/runtime-config.js';
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
    expect(functions(run).map(roleOf).sort()).toEqual(['ingest', 'mosaic', 'reconcile', 'scene', 'tile']);
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
    expect(mappings.map((m) => m.name.split('-').at(-1)).sort()).toEqual(['ingest', 'scene', 'tile']);
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
    expect(dlqArns.size).toBe(3);
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

  it('notifies the scene queue only of new objects under the source prefix with the source suffix', () => {
    const sources = run.one('aws:s3/bucket:Bucket', '-sources');
    const notifications = run.ofType('aws:s3/bucketNotification:BucketNotification');
    expect(notifications).toHaveLength(1);
    expect(notifications[0]?.inputs.bucket).toBe(sources.id);
    const queue = run.one('aws:sqs/queue:Queue', '-scene');
    expect(notifications[0]?.inputs.queues).toEqual([
      { queueArn: queue.state.arn, events: ['s3:ObjectCreated:*'], filterPrefix: 'scenes/', filterSuffix: '.tif' },
    ]);
    // Only this bucket, in this account, may send to the queue.
    const policy = run.ofType('aws:sqs/queuePolicy:QueuePolicy').find((p) => p.inputs.queueUrl === queue.state.url);
    const [allow] = statements(policy?.inputs.policy);
    expect(allow?.Condition).toEqual({
      ArnEquals: { 'aws:SourceArn': sources.state.arn },
      StringEquals: { 'aws:SourceAccount': '123456789012' },
    });
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
    ];
    const policies = run.ofType('aws:iam/rolePolicy:RolePolicy');
    expect(policies).toHaveLength(5);
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

  it('lets each function write only its own output prefix, and only the tile worker touch the claims table', () => {
    const outputs = run.one('aws:s3/bucket:Bucket', '-outputs').state.arn as string;
    const table = run.one('aws:dynamodb/table:Table', '-claims').state.arn;
    const writes = (role: string) =>
      statements(run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`).inputs.policy)
        .filter((s) => list(s.Action).includes('s3:PutObject'))
        .flatMap((s) => list(s.Resource));
    expect(writes('scene')).toEqual([`${outputs}/scenes/*`]);
    expect(writes('tile')).toEqual([`${outputs}/tiles/*`]);
    expect(writes('mosaic')).toEqual([`${outputs}/mosaics/*`]);
    for (const role of ['scene', 'tile', 'mosaic']) {
      const onTable = statements(run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`).inputs.policy).filter((s) =>
        list(s.Resource).includes(table as string),
      );
      expect(onTable.length, role).toBe(role === 'tile' ? 1 : 0);
    }
  });

  it('lets the mosaic sweep list exactly the prefixes it reads: scenes/, mosaics/ and tiles/', () => {
    const prefixes = statements(run.one('aws:iam/rolePolicy:RolePolicy', '-mosaic').inputs.policy)
      .filter((s) => list(s.Action).includes('s3:ListBucket'))
      .flatMap((s) => JSON.stringify(s.Condition ?? {}).match(/(scenes|mosaics|tiles)\//g) ?? []);
    expect([...new Set(prefixes)].sort()).toEqual(['mosaics/', 'scenes/', 'tiles/']);
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

  it('versions the source bucket, and lets scene and tile read pinned versions of source objects', () => {
    const sources = run.one('aws:s3/bucket:Bucket', '-sources');
    const versioning = run.ofType('aws:s3/bucketVersioning:BucketVersioning').find((v) => v.inputs.bucket === sources.id);
    expect(versioning?.inputs.versioningConfiguration).toEqual({ status: 'Enabled' });
    for (const role of ['scene', 'tile']) {
      const reads = statements(run.one('aws:iam/rolePolicy:RolePolicy', `-${role}`).inputs.policy).filter((s) =>
        list(s.Resource).includes(`${sources.state.arn}/scenes/*`),
      );
      expect(reads.flatMap((s) => list(s.Action)).sort(), role).toEqual(['s3:GetObject', 's3:GetObjectVersion']);
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
    expect(mappings).toHaveLength(3);
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
    const writes = stmts.filter((s) => list(s.Action).includes('s3:PutObject')).flatMap((s) => list(s.Resource));
    expect(writes.sort()).toEqual([`${sources}/scenes/*`, `${sources}/staging/*`]);
    // Reads: any key of the source bucket (an object:KEY href), nothing of the output bucket.
    expect(stmts.filter((s) => list(s.Action).includes('s3:GetObject')).flatMap((s) => list(s.Resource))).toContain(`${sources}/*`);
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
  const URL = 'postgis://tessera:s3cret@db.example:5432/gis';
  it('gives the connection secret to the tile function only, as a Pulumi secret, and refuses a URL that is not postgis://', async () => {
    const set = await runStack(STACK, { ...BASE, 'tessera:featureSinkUrl': URL });
    for (const fn of set.ofType('aws:lambda/function:Function')) {
      const { secret, value } = reveal(fn.inputs.environment);
      const env = envOf((value as { variables: unknown }).variables);
      const isTile = fn.name.endsWith('-tile');
      expect(env[ENV.featureSink], fn.name).toBe(isTile ? URL : undefined);
      // The secret marks the whole environment: encrypted in the state, masked in previews.
      expect(secret, fn.name).toBe(isTile);
    }
    const bare = await runStack(STACK, BASE);
    const tile = envOf((bare.one('aws:lambda/function:Function', '-tile').inputs.environment as { variables: unknown }).variables);
    expect(tile[ENV.featureSink]).toBeUndefined();
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
