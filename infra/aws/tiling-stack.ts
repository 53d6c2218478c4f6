import * as cloudwatch from '@pulumi/aws/cloudwatch';
import * as dynamodb from '@pulumi/aws/dynamodb';
import { getCallerIdentityOutput } from '@pulumi/aws/getCallerIdentity';
import * as iam from '@pulumi/aws/iam';
import * as lambda from '@pulumi/aws/lambda';
import * as s3 from '@pulumi/aws/s3';
import * as secretsmanager from '@pulumi/aws/secretsmanager';
import * as sns from '@pulumi/aws/sns';
import * as sqs from '@pulumi/aws/sqs';
import type { input as awsInput } from '@pulumi/aws/types';
import * as pulumi from '@pulumi/pulumi';
import { streamKeys } from '../../shared/domain/key-layout.js';
import {
  type AwsStackConfig,
  FUNCTION_ROLES,
  type FunctionRole,
  INGEST_FUNCTION_TIMEOUT_SEC,
  OUTPUT_CORS,
  STAGING_PREFIX,
  STREAM_FUNCTION_MEMORY_MB,
  STREAM_FUNCTION_TIMEOUT_SEC,
  SUPPORT_FUNCTION_MEMORY_MB,
  SUPPORT_FUNCTION_TIMEOUT_SEC,
  visibilityFor,
} from '../common/config.js';
import { functionEnvironment } from '../common/environment.js';
import { monitoringPrefix } from '../common/naming.js';
import { type Archive, LAMBDA_ARCHITECTURE, LAMBDA_HANDLER } from '../common/packaging.js';
import type { StandardTags } from '../common/tags.js';
import { functionPolicy, LAMBDA_ASSUME_ROLE, s3NotificationQueuePolicy, tlsOnlyBucketPolicy, verifyPolicy } from './policies.js';
import { awsTelemetry } from './telemetry.js';

export interface AwsTilingStackArgs {
  readonly config: AwsStackConfig;
  readonly archives: Readonly<Record<FunctionRole, Archive>>;
  readonly tags: StandardTags;
}

/** A queue and the dead-letter queue it redrives to after maxReceiveCount deliveries. */
interface QueuePair {
  readonly queue: sqs.Queue;
  readonly deadLetter: sqs.Queue;
  /** The redrive policy's maxReceiveCount: the function this queue triggers is told it (TESSERA_MAX_DELIVERIES). */
  readonly maxReceiveCount: number;
}

/** The functions an SQS queue triggers; the mosaic sweep and the manifest reconcile run on a schedule instead. */
export const QUEUE_TRIGGERED = ['scene', 'tile', 'ingest', 'stream'] as const;
/** The functions a schedule invokes. */
export const SCHEDULED = ['mosaic', 'reconcile'] as const;
type Scheduled = (typeof SCHEDULED)[number];

/**
 * How often the manifest reconcile runs (functions/aws/handlers/reconcile.handler.ts): design note 2's weekly
 * comparison of the promoted prefix with the manifest, both ways. It only reports (a crashed promotion is
 * repaired by re-running the ingest, which finds the object already there and registers it).
 */
export const RECONCILE_SCHEDULE = 'rate(7 days)';
export type QueueTriggered = (typeof QUEUE_TRIGGERED)[number];

/** Settings of one Lambda function. */
interface FunctionSpec {
  readonly timeoutSec: number;
  readonly memoryMb: number;
  /** Records per invocation (queue-triggered functions): 1 for tiles, so each job has the whole timeout to itself. */
  readonly batchSize?: number;
}

/**
 * How often the mosaic sweep runs (functions/aws/handlers/mosaic.handler.ts):
 * it assembles every scene with a manifest and no mosaic. A run that fails is
 * not retried by Lambda; the next run is the retry.
 */
export const MOSAIC_SCHEDULE = 'rate(5 minutes)';

/** Schedule and description of each scheduled function. */
const SCHEDULES: Readonly<Record<Scheduled, { readonly expression: string; readonly description: string }>> = {
  mosaic: { expression: MOSAIC_SCHEDULE, description: 'Assemble the mosaic of every finished scene (Tessera)' },
  reconcile: {
    expression: RECONCILE_SCHEDULE,
    description: 'Compare the promoted scenes with the ingest manifest, both ways (Tessera)',
  },
};

const DLQ_RETENTION_SEC = 14 * 24 * 3600; // SQS maximum: time to inspect and redrive
const QUEUE_RETENTION_SEC = 4 * 24 * 3600;
const LOG_RETENTION_DAYS = 30;
const LEASE_STOLEN_METRIC = 'LeaseStolen';
/** Matches the JSON lines JsonTelemetry writes for a commit whose lease was stolen (shared/app/telemetry.ts). */
export const LEASE_STOLEN_PATTERN = '{ ($.level = "ERROR") && ($.event = "lease-stolen") }';

/**
 * Tessera on AWS: S3 -> SQS -> Lambda (scene) -> SQS -> Lambda (tile) -> S3,
 * with DynamoDB claims, a scheduled Lambda sweep that assembles finished
 * scenes' mosaics, a DLQ behind every queue, and alarms on stolen leases and
 * dead letters.
 */
export class AwsTilingStack extends pulumi.ComponentResource {
  readonly sourceBucket: s3.Bucket;
  readonly outputBucket: s3.Bucket;
  readonly claimsTable: dynamodb.Table;
  /** The ingest manifest: one item per published artefact, created only by a conditional put. */
  readonly manifestTable: dynamodb.Table;
  readonly queues: Readonly<Record<QueueTriggered, QueuePair>>;
  readonly functions: Readonly<Record<FunctionRole, lambda.Function>>;
  readonly alarmTopic: sns.Topic;
  /** The grants of `tessera verify` (the layout's `verify` role), for the operator or CI job that runs it to attach. */
  readonly verifyPolicy: iam.Policy;
  private readonly tags: StandardTags;

  constructor(name: string, args: AwsTilingStackArgs, opts?: pulumi.ComponentResourceOptions) {
    super('tessera:aws:TilingStack', name, {}, opts);
    const { config: cfg, tags } = args;
    this.tags = tags;
    const parent = { parent: this };
    const account = getCallerIdentityOutput({}, parent);

    const specs: Record<FunctionRole, FunctionSpec> = {
      scene: { timeoutSec: SUPPORT_FUNCTION_TIMEOUT_SEC, memoryMb: SUPPORT_FUNCTION_MEMORY_MB, batchSize: 10 },
      tile: { timeoutSec: cfg.lease.functionTimeoutSec, memoryMb: cfg.memoryMb, batchSize: 1 },
      mosaic: { timeoutSec: SUPPORT_FUNCTION_TIMEOUT_SEC, memoryMb: SUPPORT_FUNCTION_MEMORY_MB },
      // One request per invocation: a download has the whole timeout to itself.
      ingest: { timeoutSec: INGEST_FUNCTION_TIMEOUT_SEC, memoryMb: SUPPORT_FUNCTION_MEMORY_MB, batchSize: 1 },
      reconcile: { timeoutSec: SUPPORT_FUNCTION_TIMEOUT_SEC, memoryMb: SUPPORT_FUNCTION_MEMORY_MB },
      // One batch object per invocation: its records go into PostGIS in one transaction (docs/feature-batches.md).
      stream: { timeoutSec: STREAM_FUNCTION_TIMEOUT_SEC, memoryMb: STREAM_FUNCTION_MEMORY_MB, batchSize: 1 },
    };

    // Buckets: private, owner-enforced, SSE-S3, TLS only, versioned: outputs so repair writes keep history,
    // sources so a job's reads pin the version its key names (a replaced scene is detected, not mixed).
    // The source bucket also holds ingest staging (staging/, outside the scene prefix): each attempt's download,
    // kept tessera:stagingRetentionDays to inspect a refused or crashed one, then expired (with its noncurrent versions).
    this.sourceBucket = this.privateBucket(`${name}-sources`, true, tags, [
      {
        id: 'expire-ingest-staging',
        status: 'Enabled',
        filter: { prefix: STAGING_PREFIX },
        expiration: { days: cfg.stagingRetentionDays },
        noncurrentVersionExpiration: { noncurrentDays: 1 },
      },
    ]);
    this.outputBucket = this.privateBucket(`${name}-outputs`, true, tags);
    // tessera:outputCorsOrigins: web pages on these origins may read tiles (signed or authorised GETs, Range included).
    if (cfg.outputCorsOrigins !== undefined) {
      new s3.BucketCorsConfiguration(
        `${name}-outputs`,
        {
          bucket: this.outputBucket.id,
          corsRules: [
            {
              allowedMethods: [...OUTPUT_CORS.methods],
              allowedOrigins: [...cfg.outputCorsOrigins],
              allowedHeaders: [...OUTPUT_CORS.requestHeaders],
              exposeHeaders: [...OUTPUT_CORS.responseHeaders],
              maxAgeSeconds: OUTPUT_CORS.maxAgeSec,
            },
          ],
        },
        parent,
      );
    }

    // Claims: one item per job, TTL on expires_at (epoch seconds), point-in-time recovery on.
    this.claimsTable = new dynamodb.Table(
      `${name}-claims`,
      {
        billingMode: 'PAY_PER_REQUEST',
        hashKey: 'job_id',
        attributes: [{ name: 'job_id', type: 'S' }],
        ttl: { attributeName: 'expires_at', enabled: true },
        pointInTimeRecovery: { enabled: true },
        tags,
      },
      parent,
    );
    // The ingest manifest: pk names (source, external id), the range key the checksum, so find() is one Query and
    // register() a put with attribute_not_exists(pk) on the full identity. No TTL: a row is the proof of a publish.
    this.manifestTable = new dynamodb.Table(
      `${name}-manifest`,
      {
        billingMode: 'PAY_PER_REQUEST',
        hashKey: 'pk',
        rangeKey: 'checksum',
        attributes: [
          { name: 'pk', type: 'S' },
          { name: 'checksum', type: 'S' },
        ],
        pointInTimeRecovery: { enabled: true },
        tags,
      },
      parent,
    );

    const queues = {} as Record<QueueTriggered, QueuePair>;
    for (const role of QUEUE_TRIGGERED) {
      // Six times the function timeout, within SQS's 12 h cap (config.ts, visibilityFor).
      const visibility = visibilityFor('aws-lambda', specs[role].timeoutSec) ?? specs[role].timeoutSec;
      queues[role] = this.queuePair(`${name}-${role}`, visibility, cfg.maxReceiveCount, tags);
    }
    this.queues = queues;

    // S3 -> SQS: new source scenes, filtered by prefix and suffix; and new batch objects of feature streams under streams/
    // (docs/feature-batches.md), to the stream queue. One notification configuration per bucket, so both go in it.
    const sourceNotify = this.notifyQueue(`${name}-sources`, this.sourceBucket, account.accountId, [
      { queue: queues.scene.queue, filter: cfg.source },
      { queue: queues.stream.queue, filter: { prefix: streamKeys.root(), suffix: '' } },
    ]);

    // tessera verify runs as a person or a CI job, not as a function: its grants are a managed policy derived from the
    // layout like the functions' (policies.ts, verifyPolicy), attached by whoever runs it (docs/iam.md).
    this.verifyPolicy = new iam.Policy(
      `${name}-verify`,
      {
        description: `What tessera verify needs on the ${cfg.stack} stack: attach it to the identity that runs it (Tessera)`,
        policy: pulumi
          .output({
            sourceBucket: this.sourceBucket.arn,
            outputBucket: this.outputBucket.arn,
            claimsTable: this.claimsTable.arn,
            tileQueue: queues.tile.queue.arn,
            tileDeadLetterQueue: queues.tile.deadLetter.arn,
            sceneQueue: queues.scene.queue.arn,
          })
          .apply((arns) => JSON.stringify(verifyPolicy(arns, cfg.source.prefix))),
        tags,
      },
      parent,
    );

    const monitoring = monitoringPrefix('aws', cfg.stack);
    // The PostGIS sink URL (tessera:featureSinkUrl) is a credential, and a Lambda environment is readable by anyone
    // allowed lambda:GetFunctionConfiguration: it lives in Secrets Manager, and the tile function gets its ARN.
    const sinkSecret =
      cfg.featureSinkUrl === undefined ? undefined : this.featureSinkSecret(`${name}-feature-sink`, cfg.featureSinkUrl, tags);
    // tessera:telemetry (docs/telemetry.md): nothing at all unless it is set.
    const telemetry = awsTelemetry(this, name, cfg, tags);
    const logGroups = {} as Record<FunctionRole, cloudwatch.LogGroup>;
    const functions = {} as Record<FunctionRole, lambda.Function>;
    for (const role of FUNCTION_ROLES) {
      const spec = specs[role];
      const logGroup = new cloudwatch.LogGroup(
        `${name}-${role}`,
        { name: `${monitoring}/${role}`, retentionInDays: LOG_RETENTION_DAYS, tags },
        parent,
      );
      logGroups[role] = logGroup;
      const roleResource = new iam.Role(`${name}-${role}`, { assumeRolePolicy: JSON.stringify(LAMBDA_ASSUME_ROLE), tags }, parent);
      const telemetryGrant = telemetry.grant(role, roleResource);
      const trigger = isScheduled(role) ? undefined : queues[role];
      const ingestion = role === 'ingest' || role === 'reconcile';
      const policy = new iam.RolePolicy(
        `${name}-${role}`,
        {
          role: roleResource.id,
          // pulumi.output of an object keeps each key's type (pulumi.all's tuple overloads stop at eight elements).
          policy: pulumi
            .output({
              sourceBucket: this.sourceBucket.arn,
              outputBucket: this.outputBucket.arn,
              claimsTable: this.claimsTable.arn,
              manifestTable: this.manifestTable.arn,
              tileQueue: queues.tile.queue.arn,
              triggerQueue: trigger?.queue.arn,
              deadLetterQueue: trigger?.deadLetter.arn,
              logGroup: logGroup.arn,
              featureSinkSecret: role === 'tile' || role === 'stream' ? sinkSecret?.secret.arn : undefined,
            })
            .apply((arns) => JSON.stringify(functionPolicy(role, arns, cfg.source.prefix))),
        },
        parent,
      );
      const fn = new lambda.Function(
        `${name}-${role}`,
        {
          runtime: cfg.runtime.id, // shared/domain/runtimes.ts, checked by parseStackConfig
          // Graviton is cheaper; the archives carry sharp's native binaries for it (build-functions.ts, LAMBDA_ARCHITECTURE).
          architectures: [LAMBDA_ARCHITECTURE],
          handler: LAMBDA_HANDLER,
          code: new pulumi.asset.FileArchive(args.archives[role].path),
          sourceCodeHash: Buffer.from(args.archives[role].sha256, 'hex').toString('base64'),
          ...telemetry.functionArgs,
          role: roleResource.arn,
          timeout: spec.timeoutSec,
          memorySize: spec.memoryMb,
          environment: {
            variables: {
              ...functionEnvironment(cfg, 'aws-lambda', spec.timeoutSec, {
                claimsTable: this.claimsTable.name,
                sourceBucket: this.sourceBucket.bucket,
                outputBucket: this.outputBucket.bucket,
                tileQueue: queues.tile.queue.url,
                // The DLQ of the queue that triggers this function (where its handler settles poison).
                deadLetterQueue: (trigger ?? queues.tile).deadLetter.url,
                // Its own trigger queue's count, which its redelivery schedule plans against (the sweep has none).
                ...(trigger ? { maxDeliveries: trigger.maxReceiveCount } : {}),
                ...(ingestion ? { manifestTable: this.manifestTable.name } : {}),
                ...(role === 'ingest' ? { ingestQueue: queues.ingest.queue.url } : {}),
                ...((role === 'tile' || role === 'stream') && sinkSecret
                  ? {
                      featureSink: {
                        kind: 'aws-secrets-manager' as const,
                        secretArn: sinkSecret.secret.arn,
                        versionId: sinkSecret.version.versionId,
                      },
                    }
                  : {}),
              }),
              NODE_OPTIONS: '--enable-source-maps',
              ...telemetry.environment,
            },
          },
          // Text format: a JSON line written to stdout reaches CloudWatch as-is, so the JSON metric filter can read it.
          loggingConfig: { logFormat: 'Text', logGroup: logGroup.name },
          tags,
        },
        { parent: this, dependsOn: [policy, ...(telemetryGrant ? [telemetryGrant] : [])] },
      );
      functions[role] = fn;
      if (!isScheduled(role)) {
        new lambda.EventSourceMapping(
          `${name}-${role}`,
          {
            eventSourceArn: queues[role].queue.arn,
            functionName: fn.arn,
            batchSize: spec.batchSize ?? 1,
            // Only the failed records of a batch are retried; the others are deleted.
            functionResponseTypes: ['ReportBatchItemFailures'],
            // At most this many tile workers at once (tessera:tileMaxConcurrency): the poller stops receiving
            // instead of being throttled, so receives are not burnt against maxReceiveCount.
            ...(role === 'tile' ? { scalingConfig: { maximumConcurrency: cfg.tileMaxConcurrency } } : {}),
          },
          { parent: this, dependsOn: [policy, sourceNotify] },
        );
      }
    }
    this.functions = functions;

    // The mosaic sweep and the manifest reconcile: a schedule invokes each; a failed run is left to the next run
    // rather than retried.
    for (const role of SCHEDULED) {
      const id = role === 'mosaic' ? `${name}-mosaic-sweep` : `${name}-${role}`;
      const schedule = new cloudwatch.EventRule(
        id,
        { description: SCHEDULES[role].description, scheduleExpression: SCHEDULES[role].expression, tags },
        parent,
      );
      const invoke = new lambda.Permission(
        id,
        { action: 'lambda:InvokeFunction', function: functions[role].name, principal: 'events.amazonaws.com', sourceArn: schedule.arn },
        parent,
      );
      new lambda.FunctionEventInvokeConfig(
        id,
        { functionName: functions[role].name, maximumRetryAttempts: 0, maximumEventAgeInSeconds: 300 },
        parent,
      );
      new cloudwatch.EventTarget(id, { rule: schedule.name, arn: functions[role].arn }, { parent: this, dependsOn: [invoke] });
    }

    // Alarms: any stolen lease, and any message in a dead-letter queue.
    this.alarmTopic = new sns.Topic(`${name}-alarms`, { tags }, parent);
    if (cfg.alertEmail) {
      new sns.TopicSubscription(
        `${name}-alarms-email`,
        { topic: this.alarmTopic.arn, protocol: 'email', endpoint: cfg.alertEmail },
        parent,
      );
    }
    const namespace = `Tessera/${cfg.stack}`;
    for (const role of FUNCTION_ROLES) {
      new cloudwatch.LogMetricFilter(
        `${name}-${role}-lease-stolen`,
        {
          logGroupName: logGroups[role].name,
          pattern: LEASE_STOLEN_PATTERN,
          metricTransformation: { name: LEASE_STOLEN_METRIC, namespace, value: '1', unit: 'Count' },
        },
        parent,
      );
    }
    this.alarm(`${name}-lease-stolen`, {
      alarmDescription:
        'A worker committed after its lease was taken over (LeaseStolen). The create-only write kept the output correct, but the lease is too short for the work or a worker stalled: check tessera:leaseSeconds against the function timeout.',
      namespace,
      metricName: LEASE_STOLEN_METRIC,
      statistic: 'Sum',
      period: 60,
    });
    for (const role of QUEUE_TRIGGERED) {
      this.alarm(`${name}-${role}-dead-letters`, {
        alarmDescription: `Messages reached the ${role} dead-letter queue after ${cfg.maxReceiveCount} deliveries: inspect them, fix the cause, then redrive.`,
        namespace: 'AWS/SQS',
        metricName: 'ApproximateNumberOfMessagesVisible',
        dimensions: { QueueName: queues[role].deadLetter.name },
        statistic: 'Maximum',
        period: 300,
      });
    }

    this.registerOutputs({
      sourceBucket: this.sourceBucket.bucket,
      outputBucket: this.outputBucket.bucket,
      claimsTable: this.claimsTable.name,
      manifestTable: this.manifestTable.name,
      tileQueueUrl: queues.tile.queue.url,
      tileDeadLetterQueueUrl: queues.tile.deadLetter.url,
      ingestQueueUrl: queues.ingest.queue.url,
      ingestDeadLetterQueueUrl: queues.ingest.deadLetter.url,
      streamQueueUrl: queues.stream.queue.url,
      streamDeadLetterQueueUrl: queues.stream.deadLetter.url,
      functions: Object.fromEntries(FUNCTION_ROLES.map((r) => [r, functions[r].name])),
      alarmTopic: this.alarmTopic.arn,
      verifyPolicyArn: this.verifyPolicy.arn,
    });
  }

  /**
   * The secret holding the PostGIS sink URL, and its one version. The value is a Pulumi secret, so the state holds it
   * encrypted; AWS encrypts it with the account's aws/secretsmanager key, which GetSecretValue alone lets a role use.
   * Deleting the stack schedules the secret's deletion (30 days to restore it); a new stack gets a new name.
   */
  private featureSinkSecret(
    name: string,
    url: pulumi.Input<string>,
    tags: StandardTags,
  ): { readonly secret: secretsmanager.Secret; readonly version: secretsmanager.SecretVersion } {
    const secret = new secretsmanager.Secret(
      name,
      { description: 'PostGIS feature sink URL of the Tessera tile function (tessera:featureSinkUrl)', tags },
      { parent: this },
    );
    const version = new secretsmanager.SecretVersion(name, { secretId: secret.id, secretString: pulumi.secret(url) }, { parent: this });
    return { secret, version };
  }

  /** An alarm that fires on the first occurrence (at least 1 in a period) and notifies the alarm topic. */
  private alarm(
    name: string,
    metric: Pick<cloudwatch.MetricAlarmArgs, 'alarmDescription' | 'namespace' | 'metricName' | 'dimensions' | 'statistic' | 'period'>,
  ): cloudwatch.MetricAlarm {
    return new cloudwatch.MetricAlarm(
      name,
      {
        ...metric,
        evaluationPeriods: 1,
        comparisonOperator: 'GreaterThanOrEqualToThreshold',
        threshold: 1,
        treatMissingData: 'notBreaching',
        alarmActions: [this.alarmTopic.arn],
        tags: this.tags,
      },
      { parent: this },
    );
  }

  /** `extraRules`: more lifecycle rules (a bucket has one lifecycle configuration, so they share it). */
  private privateBucket(
    name: string,
    versioned: boolean,
    tags: StandardTags,
    extraRules: awsInput.s3.BucketLifecycleConfigurationRule[] = [],
  ): s3.Bucket {
    const parent = { parent: this };
    const bucket = new s3.Bucket(name, { tags }, parent);
    new s3.BucketOwnershipControls(name, { bucket: bucket.id, rule: { objectOwnership: 'BucketOwnerEnforced' } }, parent);
    new s3.BucketPublicAccessBlock(
      name,
      { bucket: bucket.id, blockPublicAcls: true, blockPublicPolicy: true, ignorePublicAcls: true, restrictPublicBuckets: true },
      parent,
    );
    new s3.BucketServerSideEncryptionConfiguration(
      name,
      { bucket: bucket.id, rules: [{ applyServerSideEncryptionByDefault: { sseAlgorithm: 'AES256' }, bucketKeyEnabled: true }] },
      parent,
    );
    new s3.BucketPolicy(name, { bucket: bucket.id, policy: bucket.arn.apply((arn) => JSON.stringify(tlsOnlyBucketPolicy(arn))) }, parent);
    if (versioned) {
      new s3.BucketVersioning(name, { bucket: bucket.id, versioningConfiguration: { status: 'Enabled' } }, parent);
      // Repair writes leave the replaced version behind; keep it a month, then let it go.
      new s3.BucketLifecycleConfiguration(
        name,
        {
          bucket: bucket.id,
          rules: [
            {
              id: 'expire-replaced-versions',
              status: 'Enabled',
              filter: {},
              noncurrentVersionExpiration: { noncurrentDays: 30 },
              abortIncompleteMultipartUpload: { daysAfterInitiation: 7 },
            },
            ...extraRules,
          ],
        },
        parent,
      );
    }
    return bucket;
  }

  private queuePair(name: string, visibilitySec: number, maxReceiveCount: number, tags: StandardTags): QueuePair {
    const parent = { parent: this };
    const deadLetter = new sqs.Queue(
      `${name}-dlq`,
      { messageRetentionSeconds: DLQ_RETENTION_SEC, sqsManagedSseEnabled: true, tags },
      parent,
    );
    const queue = new sqs.Queue(
      name,
      {
        visibilityTimeoutSeconds: visibilitySec,
        messageRetentionSeconds: QUEUE_RETENTION_SEC,
        sqsManagedSseEnabled: true,
        redrivePolicy: deadLetter.arn.apply((deadLetterTargetArn) => JSON.stringify({ deadLetterTargetArn, maxReceiveCount })),
        tags,
      },
      parent,
    );
    new sqs.RedriveAllowPolicy(
      `${name}-dlq`,
      {
        queueUrl: deadLetter.url,
        redriveAllowPolicy: queue.arn.apply((arn) => JSON.stringify({ redrivePermission: 'byQueue', sourceQueueArns: [arn] })),
      },
      parent,
    );
    return { queue, deadLetter, maxReceiveCount };
  }

  /** The bucket's one notification configuration: each target queue gets the object-created events its filter matches. */
  private notifyQueue(
    name: string,
    bucket: s3.Bucket,
    accountId: pulumi.Output<string>,
    targets: readonly { readonly queue: sqs.Queue; readonly filter: { readonly prefix: string; readonly suffix: string } }[],
  ): s3.BucketNotification {
    const access = targets.map(
      ({ queue }, i) =>
        new sqs.QueuePolicy(
          // The first keeps the name it always had, so existing stacks do not replace it.
          i === 0 ? name : `${name}-${i}`,
          {
            queueUrl: queue.url,
            policy: pulumi
              .all([queue.arn, bucket.arn, accountId])
              .apply(([queueArn, bucketArn, account]) => JSON.stringify(s3NotificationQueuePolicy(queueArn, bucketArn, account))),
          },
          { parent: this },
        ),
    );
    return new s3.BucketNotification(
      name,
      {
        bucket: bucket.id,
        queues: targets.map(({ queue, filter }) => ({
          queueArn: queue.arn,
          events: ['s3:ObjectCreated:*'],
          ...(filter.prefix ? { filterPrefix: filter.prefix } : {}),
          ...(filter.suffix ? { filterSuffix: filter.suffix } : {}),
        })),
      },
      // S3 tests delivery when the notification is created: every queue must already accept it.
      { parent: this, dependsOn: access },
    );
  }
}

function isScheduled(role: FunctionRole): role is Scheduled {
  return (SCHEDULED as readonly string[]).includes(role);
}
