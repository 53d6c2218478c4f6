import { assertNever } from '../../shared/domain/claim.js';
import {
  AREAS,
  type Area,
  type AreaName,
  areaPrefix,
  type FunctionRole as LayoutRole,
  type ObjectAccess,
  ROLE_ACCESS,
  type StoreName,
} from '../../shared/domain/key-layout.js';
import type { FunctionRole } from '../common/config.js';

/**
 * IAM policy documents, built from plain ARNs so they can be read and tested
 * without Pulumi. Least privilege: every S3 object statement is derived from the
 * one key layout (shared/domain/key-layout.ts, ROLE_ACCESS), so a function may do
 * to each prefix exactly what the layout says its code does there and nothing
 * else; it touches only this stack's tables and queues, and writes only its own
 * log group. No data action has a `*` resource. docs/iam.md has the table.
 */

export interface PolicyStatement {
  readonly Sid?: string;
  readonly Effect: 'Allow' | 'Deny';
  readonly Principal?: unknown;
  readonly Action: string | readonly string[];
  /** Absent only in a trust (assume-role) policy. */
  readonly Resource?: string | readonly string[];
  readonly Condition?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
}

export interface PolicyDocument {
  readonly Version: '2012-10-17';
  readonly Statement: readonly PolicyStatement[];
}

export interface FunctionArns {
  readonly sourceBucket: string;
  readonly outputBucket: string;
  readonly claimsTable: string;
  /** The ingest manifest table (ingest writes it create-only, reconcile reads it). */
  readonly manifestTable: string;
  readonly tileQueue: string;
  /** The queue whose event source mapping invokes this function (none for the scheduled mosaic sweep). */
  readonly triggerQueue: string | undefined;
  /** The dead-letter queue of the trigger queue: the handler settles a poison record there at once. */
  readonly deadLetterQueue: string | undefined;
  readonly logGroup: string;
  /** The Secrets Manager secret holding the PostGIS sink URL (tessera:featureSinkUrl); the tile role alone reads it. */
  readonly featureSinkSecret?: string | undefined;
}

/** The two buckets of a stack, by the layout's store names. */
export interface StoreArns {
  readonly sourceBucket: string;
  readonly outputBucket: string;
}

const bucketOf = (store: StoreName, arns: StoreArns): string => (store === 'sources' ? arns.sourceBucket : arns.outputBucket);

/**
 * The S3 permissions one access of the layout needs on an object of `store`:
 * - read: s3:GetObject (GET and HEAD); on the source store also s3:GetObjectVersion, since its reads are
 *   pinned to the versionId the job key names (S3 checks GetObjectVersion for any request with a VersionId);
 * - create and replace: s3:PutObject, which covers `If-None-Match: *` and `If-Match` writes alike;
 * - delete: s3:DeleteObject (the store deletes with `If-Match`, never a version: no DeleteObjectVersion);
 * - list: nothing on the objects; a bucket-level ListBucket, see {@link listStatement};
 * - pin: nothing beyond read: S3 pins by version id (s3:GetObjectVersion, granted with read on the source store).
 */
export function s3ObjectActions(access: ObjectAccess, store: StoreName): readonly string[] {
  switch (access) {
    case 'read':
      return store === 'sources' ? ['s3:GetObject', 's3:GetObjectVersion'] : ['s3:GetObject'];
    case 'create':
    case 'replace':
      return ['s3:PutObject'];
    case 'delete':
      return ['s3:DeleteObject'];
    case 'list':
    case 'pin':
      return [];
    default:
      return assertNever(access, 'object access');
  }
}

/** The objects of an area: `<bucket>/<prefix>*`, or the one key of an exact area. */
export function areaObjects(area: AreaName, arns: StoreArns, sourcePrefix: string): string {
  const a: Area = AREAS[area];
  const prefix = areaPrefix(area, sourcePrefix);
  return `${bucketOf(a.store, arns)}/${prefix}${a.exact === true ? '' : '*'}`;
}

/** The `s3:prefix` value a listing of an area is limited to: `<prefix>*`, or the one key of an exact area. */
export function areaListPrefix(area: AreaName, sourcePrefix: string): string {
  const a: Area = AREAS[area];
  return `${areaPrefix(area, sourcePrefix)}${a.exact === true ? '' : '*'}`;
}

const pascal = (name: string): string => name.charAt(0).toUpperCase() + name.slice(1);

/**
 * The areas of `store` a role may list, and those it reads. A read counts: S3 answers a GET or HEAD of
 * a missing key with 404 only to a caller that may list that key (s3:ListBucket), and with 403 to any
 * other, so without it the store could not tell "absent" (a value of the port) from "denied" (an
 * error). The ListBucket is still limited to the area's prefix by `s3:prefix`: S3 evaluates that check
 * with the requested key as the prefix (docs/aws.md, "A missing key"), so the role learns nothing about
 * keys outside the areas it reads.
 */
function listedAreas(role: LayoutRole, store: StoreName): AreaName[] {
  return ROLE_ACCESS[role]
    .filter((g) => AREAS[g.area].store === store && (g.access.includes('list') || g.access.includes('read')))
    .map((g) => g.area);
}

/** One ListBucket on a bucket, limited by `s3:prefix` to the listed (and read) areas of that bucket. */
function listStatement(role: LayoutRole, store: StoreName, arns: StoreArns, sourcePrefix: string): PolicyStatement[] {
  const areas = listedAreas(role, store);
  if (areas.length === 0) return [];
  return [
    {
      Sid: `List${pascal(store)}`,
      Effect: 'Allow',
      Action: 's3:ListBucket',
      Resource: bucketOf(store, arns),
      Condition: { StringLike: { 's3:prefix': areas.map((a) => areaListPrefix(a, sourcePrefix)) } },
    },
  ];
}

/**
 * Every S3 statement of a role, derived from the layout (ROLE_ACCESS): one statement per area the role
 * touches objects of (the actions of its accesses, on that area's objects only), then one ListBucket per
 * bucket. Nothing else in infra/aws names a prefix or an S3 object action.
 */
export function objectStatements(role: LayoutRole, arns: StoreArns, sourcePrefix: string): PolicyStatement[] {
  const objects = ROLE_ACCESS[role].flatMap((grant): PolicyStatement[] => {
    const store = AREAS[grant.area].store;
    const actions = [...new Set(grant.access.flatMap((a) => s3ObjectActions(a, store)))];
    return actions.length === 0
      ? []
      : [{ Sid: `Objects${pascal(grant.area)}`, Effect: 'Allow', Action: actions, Resource: areaObjects(grant.area, arns, sourcePrefix) }];
  });
  return [...objects, ...listStatement(role, 'sources', arns, sourcePrefix), ...listStatement(role, 'outputs', arns, sourcePrefix)];
}

/**
 * The inline policy of one function's role: its objects (derived from the layout, {@link objectStatements}),
 * and beside them
 *
 * - every function: its own log group; a queue-triggered one (scene, tile, ingest) consumes its trigger queue
 *   and sends a poison record to that queue's DLQ;
 * - scene: sends tile jobs, and sends a transiently failed S3 record of a multi-record message back to its own
 *   trigger queue, alone;
 * - tile: claims and commits in the claims table, sends fan-out chunks to the tile queue (which it handles),
 *   reads the PostGIS sink's secret when there is one;
 * - mosaic: nothing else (the sweep works on objects only);
 * - ingest: gets / conditionally puts / queries the manifest table;
 * - reconcile: reads (Query/Scan/GetItem) the manifest table;
 * - stream: claims and commits its batches in the claims table (no delete: it never removes a row), reads the
 *   PostGIS sink's secret (its batches' one destination; docs/feature-batches.md).
 */
export function functionPolicy(role: FunctionRole, arns: FunctionArns, sourcePrefix: string): PolicyDocument {
  const logs: PolicyStatement = {
    Sid: 'WriteOwnLogs',
    Effect: 'Allow',
    Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    Resource: `${arns.logGroup}:*`,
  };
  const statements: PolicyStatement[] = [logs, ...objectStatements(role, arns, sourcePrefix)];
  if (arns.triggerQueue !== undefined) {
    // ChangeMessageVisibility: the handlers hide a failed record for a backoff before its retry.
    statements.push({
      Sid: 'ConsumeTriggerQueue',
      Effect: 'Allow',
      Action: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes'],
      Resource: arns.triggerQueue,
    });
  }
  if (arns.deadLetterQueue !== undefined) {
    // Poison is settled at once: the handler sends the bad record (alone, out of a multi-record message) to its DLQ.
    statements.push({ Sid: 'SettlePoison', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: arns.deadLetterQueue });
  }
  switch (role) {
    case 'scene':
      statements.push(
        { Sid: 'EnqueueTileJobs', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: arns.tileQueue },
        // A message of several S3 records is never failed whole for one (shared/app/record-batch.ts): a record
        // that failed transiently is requeued alone on the scene queue, the one whose mapping invokes this function.
        ...(arns.triggerQueue === undefined
          ? []
          : [{ Sid: 'RequeueFailedRecords', Effect: 'Allow' as const, Action: 'sqs:SendMessage', Resource: arns.triggerQueue }]),
      );
      break;
    case 'tile':
      statements.push(
        // A long fan-out continues in chunk messages on the tile queue, which the tile function handles.
        { Sid: 'EnqueueFanOutChunks', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: arns.tileQueue },
        {
          Sid: 'ClaimAndCommitJobs',
          Effect: 'Allow',
          Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:ConditionCheckItem'],
          Resource: arns.claimsTable,
        },
      );
      break;
    case 'mosaic':
      break;
    case 'ingest':
      statements.push({
        Sid: 'PublishManifestRows',
        Effect: 'Allow',
        // PutItem with attribute_not_exists only (the adapter's condition); Query for the pre-check by (source, id).
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query'],
        Resource: arns.manifestTable,
      });
      break;
    case 'stream':
      statements.push({
        Sid: 'ClaimAndCommitBatches',
        Effect: 'Allow',
        // PutItem (claim), UpdateItem (heartbeat, release, commit), GetItem (the row a lost answer or a condition failure left).
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        Resource: arns.claimsTable,
      });
      break;
    case 'reconcile':
      statements.push({
        Sid: 'ReadManifest',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:Scan'],
        Resource: arns.manifestTable,
      });
      break;
    default:
      assertNever(role, 'function role');
  }
  // The sink URL is a credential: only the functions that write feature rows may read it (docs/postgis.md, docs/feature-batches.md).
  if ((role === 'tile' || role === 'stream') && arns.featureSinkSecret !== undefined) {
    statements.push({
      Sid: 'ReadFeatureSinkSecret',
      Effect: 'Allow',
      Action: 'secretsmanager:GetSecretValue',
      Resource: arns.featureSinkSecret,
    });
  }
  return { Version: '2012-10-17', Statement: statements };
}

/** What `tessera verify` (the `verify` role of the layout) touches besides objects. */
export interface VerifyArns extends StoreArns {
  readonly claimsTable: string;
  readonly tileQueue: string;
  readonly tileDeadLetterQueue: string;
  readonly sceneQueue: string;
}

/**
 * The managed policy of `tessera verify`, for the operator (or the CI job) that runs it to attach
 * (infra/aws exports its ARN as `verifyPolicyArn`): its objects from the layout's `verify` role, and
 * what shared/app/verify/verify-stack.ts and functions/aws/verify-target.ts do besides:
 *
 * - the claims table: reads rows, races claims and commits on its own probe jobs, removes them (`deleteIf`);
 * - the tile queue: sends its smoke jobs and repairs; the scene queue: re-delivers its scene's event; both:
 *   their approximate counts (GetQueueAttributes) while the stack settles;
 * - the tile DLQ: peeks at it (receive, then visible again) and removes its own poison probe; GetQueueUrl
 *   names it when the outputs predate `tileDeadLetterQueueUrl`.
 */
export function verifyPolicy(arns: VerifyArns, sourcePrefix: string): PolicyDocument {
  return {
    Version: '2012-10-17',
    Statement: [
      ...objectStatements('verify', arns, sourcePrefix),
      {
        Sid: 'ProbeClaims',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
        Resource: arns.claimsTable,
      },
      {
        Sid: 'SendProbesAndWatchQueues',
        Effect: 'Allow',
        Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes'],
        Resource: [arns.tileQueue, arns.sceneQueue],
      },
      {
        Sid: 'ClearOwnDeadLetters',
        Effect: 'Allow',
        Action: ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueUrl'],
        Resource: arns.tileDeadLetterQueue,
      },
    ],
  };
}

/** Lets Lambda assume a function role. */
export const LAMBDA_ASSUME_ROLE: PolicyDocument = {
  Version: '2012-10-17',
  Statement: [{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }],
};

/**
 * Lets S3 deliver one bucket's notifications to a queue, and nothing else:
 * the source ARN and account conditions stop another account's bucket from
 * using the queue (the confused-deputy case).
 */
export function s3NotificationQueuePolicy(queueArn: string, bucketArn: string, accountId: string): PolicyDocument {
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'AllowBucketNotifications',
        Effect: 'Allow',
        Principal: { Service: 's3.amazonaws.com' },
        Action: 'sqs:SendMessage',
        Resource: queueArn,
        Condition: { ArnEquals: { 'aws:SourceArn': bucketArn }, StringEquals: { 'aws:SourceAccount': accountId } },
      },
    ],
  };
}

/** Refuses any request to a bucket that does not use TLS. */
export function tlsOnlyBucketPolicy(bucketArn: string): PolicyDocument {
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'DenyInsecureTransport',
        Effect: 'Deny',
        Principal: '*',
        Action: 's3:*',
        Resource: [bucketArn, `${bucketArn}/*`],
        Condition: { Bool: { 'aws:SecureTransport': 'false' } },
      },
    ],
  };
}
