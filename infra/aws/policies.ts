import { assertNever } from '../../shared/domain/claim.js';
import { type FunctionRole, STAGING_PREFIX } from '../common/config.js';
import { OUTPUT_PREFIXES } from '../common/environment.js';

/**
 * IAM policy documents, built from plain ARNs so they can be read and tested
 * without Pulumi. Least privilege: each function reads only the source prefix,
 * writes only its own output prefix, touches only this stack's table and
 * queues, and writes only its own log group. No data action has a `*` resource.
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

/** The `s3:prefix` condition that limits ListBucket to some prefixes. */
function listUnder(bucketArn: string, prefixes: readonly string[], sid: string): PolicyStatement {
  return {
    Sid: sid,
    Effect: 'Allow',
    Action: 's3:ListBucket',
    Resource: bucketArn,
    Condition: { StringLike: { 's3:prefix': prefixes.map((p) => `${p}*`) } },
  };
}

/** Objects under a prefix of a bucket. */
function objects(bucketArn: string, prefix: string): string {
  return `${bucketArn}/${prefix}*`;
}

/** Read and create-only/repair writes of the objects under one output prefix. */
function writeUnder(bucketArn: string, prefix: string, sid: string): PolicyStatement {
  return { Sid: sid, Effect: 'Allow', Action: ['s3:GetObject', 's3:PutObject'], Resource: objects(bucketArn, prefix) };
}

/**
 * The inline policy of one function's role.
 *
 * - scene: reads source objects (pinned versions), writes `scenes/` (the scene manifest), sends tile jobs,
 *   and sends a transiently failed S3 record of a multi-record message back to its own trigger queue, alone.
 * - tile: reads source objects (pinned versions), writes `tiles/`, claims and commits in the table, sends
 *   fan-out chunks to the tile queue.
 * - scene and tile: send a poison record to their own trigger queue's DLQ.
 * - mosaic: lists `scenes/` and `mosaics/` (what is waiting), reads `scenes/`, lists and reads `tiles/` (a COG mosaic is
 *   built from their bytes), writes `mosaics/` (the VRT, the COG mosaic, the STAC Item).
 * - ingest: reads any key of the source bucket (an `object:KEY` href) and lists it, writes `staging/` (the
 *   attempt's download) and create-only writes the source prefix (the promoted scene: a copy from staging,
 *   `If-None-Match: *`), and gets / conditionally puts / queries the manifest table. No delete anywhere:
 *   staging expires by the bucket's lifecycle rule, and nothing it published can be removed by it.
 * - reconcile: lists and heads the source prefix, reads (Query/Scan/GetItem) the manifest table. Read-only.
 *
 * Writes are `s3:PutObject` only: create-only (`If-None-Match: *`) and repair
 * (`If-Match`) writes need nothing more, and no function may delete an output.
 */
export function functionPolicy(role: FunctionRole, arns: FunctionArns, sourcePrefix: string): PolicyDocument {
  // GetObjectVersion: reads are pinned to the versionId in the job key (the source bucket is versioned), so a scene
  // replaced while its tiles run is detected, not silently mixed.
  const readSource: PolicyStatement[] = [
    {
      Sid: 'ReadSourceScenes',
      Effect: 'Allow',
      Action: ['s3:GetObject', 's3:GetObjectVersion'],
      Resource: objects(arns.sourceBucket, sourcePrefix),
    },
    listUnder(arns.sourceBucket, [sourcePrefix], 'ListSourceScenes'),
  ];
  const logs: PolicyStatement = {
    Sid: 'WriteOwnLogs',
    Effect: 'Allow',
    Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
    Resource: `${arns.logGroup}:*`,
  };
  const statements: PolicyStatement[] = [logs];
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
        ...readSource,
        writeUnder(arns.outputBucket, OUTPUT_PREFIXES.scenes, 'WriteSceneManifests'),
        listUnder(arns.outputBucket, [OUTPUT_PREFIXES.scenes], 'ListSceneManifests'),
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
        ...readSource,
        writeUnder(arns.outputBucket, OUTPUT_PREFIXES.tiles, 'WriteTiles'),
        listUnder(arns.outputBucket, [OUTPUT_PREFIXES.tiles], 'ListTiles'),
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
      statements.push(
        {
          Sid: 'ReadSceneManifests',
          Effect: 'Allow',
          Action: 's3:GetObject',
          Resource: objects(arns.outputBucket, OUTPUT_PREFIXES.scenes),
        },
        // A COG mosaic (`mosaic: cog`) is built from the tiles' bytes: read-only on tiles/.
        { Sid: 'ReadTiles', Effect: 'Allow', Action: 's3:GetObject', Resource: objects(arns.outputBucket, OUTPUT_PREFIXES.tiles) },
        // The sweep lists scenes/ and mosaics/ to find scenes still waiting for a mosaic, and tiles/ to prove every tile exists.
        listUnder(arns.outputBucket, [OUTPUT_PREFIXES.scenes, OUTPUT_PREFIXES.mosaics, OUTPUT_PREFIXES.tiles], 'ListScenesMosaicsTiles'),
        writeUnder(arns.outputBucket, OUTPUT_PREFIXES.mosaics, 'WriteMosaics'),
      );
      break;
    case 'ingest':
      statements.push(
        // An `object:KEY` href may name any key of the source bucket (an upload under uploads/, say): read-only, and
        // ListBucket so a missing key is a 404 (ArtefactNotFound, poison) rather than a 403.
        { Sid: 'ReadIngestHrefs', Effect: 'Allow', Action: 's3:GetObject', Resource: `${arns.sourceBucket}/*` },
        { Sid: 'ListSourceBucket', Effect: 'Allow', Action: 's3:ListBucket', Resource: arns.sourceBucket },
        writeUnder(arns.sourceBucket, STAGING_PREFIX, 'StageDownloads'),
        // The promoted key: a create-only copy (CopyObject reads staging, puts under the prefix with If-None-Match).
        writeUnder(arns.sourceBucket, sourcePrefix, 'PromoteScenes'),
        {
          Sid: 'PublishManifestRows',
          Effect: 'Allow',
          // PutItem with attribute_not_exists only (the adapter's condition); Query for the pre-check by (source, id).
          Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query'],
          Resource: arns.manifestTable,
        },
      );
      break;
    case 'reconcile':
      statements.push(
        { Sid: 'HeadScenes', Effect: 'Allow', Action: 's3:GetObject', Resource: objects(arns.sourceBucket, sourcePrefix) },
        listUnder(arns.sourceBucket, [sourcePrefix], 'ListScenes'),
        {
          Sid: 'ReadManifest',
          Effect: 'Allow',
          Action: ['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:Scan'],
          Resource: arns.manifestTable,
        },
      );
      break;
    default:
      assertNever(role, 'function role');
  }
  // The sink URL is a credential: only the function that writes feature rows may read it (docs/postgis.md).
  if (role === 'tile' && arns.featureSinkSecret !== undefined) {
    statements.push({
      Sid: 'ReadFeatureSinkSecret',
      Effect: 'Allow',
      Action: 'secretsmanager:GetSecretValue',
      Resource: arns.featureSinkSecret,
    });
  }
  return { Version: '2012-10-17', Statement: statements };
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
