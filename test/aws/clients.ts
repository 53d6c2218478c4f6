import { CreateTableCommand, DynamoDBClient, UpdateTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { inject } from 'vitest';
import { CLAIMS_PARTITION_KEY, CLAIMS_TTL_ATTRIBUTE } from '../../functions/aws/adapters/dynamodb-claim-store.js';
import { MANIFEST_PARTITION_KEY, MANIFEST_SORT_KEY } from '../../functions/aws/adapters/dynamodb-manifest-store.js';
import type { AwsEndpoints } from '../support/emulators/types.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';

/** Fake credentials: the emulators accept any, and a real endpoint is never addressed. */
// DynamoDB Local (>= 1.23) accepts only letters and digits in the access key id.
const credentials = { accessKeyId: 'tesseratest', secretAccessKey: 'tesseratest' };

/** The AWS emulators the global setup started; fails (never skips) when they are not running. */
export function awsEndpoints(): AwsEndpoints {
  return requireEndpoints(inject('emulators'), 'aws');
}

export function dynamoDbClient(e: AwsEndpoints = awsEndpoints()): DynamoDBClient {
  return new DynamoDBClient({ endpoint: e.dynamodb, region: e.region, credentials, maxAttempts: 3 });
}

/** moto serves S3 on its root path, so buckets must be addressed path-style. */
export function s3Client(e: AwsEndpoints = awsEndpoints()): S3Client {
  return new S3Client({ endpoint: e.moto, region: e.region, credentials, forcePathStyle: true, maxAttempts: 3 });
}

export function sqsClient(e: AwsEndpoints = awsEndpoints()): SQSClient {
  return new SQSClient({ endpoint: e.moto, region: e.region, credentials, maxAttempts: 3 });
}

/** The operator's S3 client on the IAM-enforcing moto (allowed everything): an enforced suite's own set-up and checks. */
export function operatorS3Client(e: AwsEndpoints = awsEndpoints()): S3Client {
  return new S3Client({ endpoint: e.motoIam, region: e.region, credentials: e.motoIamAdmin, forcePathStyle: true, maxAttempts: 3 });
}

/** The operator's SQS client on the IAM-enforcing moto, where an enforced stack's queues live beside its buckets (S3 notifies them). */
export function operatorSqsClient(e: AwsEndpoints = awsEndpoints()): SQSClient {
  return new SQSClient({ endpoint: e.motoIam, region: e.region, credentials: e.motoIamAdmin, maxAttempts: 3 });
}

/** A fresh, lower-case, DNS-safe resource name (buckets, tables, queues). */
export function freshName(label: string): string {
  return `${label}-${freshJobId(label).slice(0, 12)}`;
}

export async function freshBucket(s3: S3Client, label = 'tessera'): Promise<string> {
  const bucket = freshName(label);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  return bucket;
}

/** A claims table shaped as infra/ creates it: partition key `job_id` (S), on-demand, TTL on `expires_at`. */
export async function freshClaimsTable(ddb: DynamoDBClient, label = 'claims'): Promise<string> {
  const TableName = freshName(label);
  await ddb.send(
    new CreateTableCommand({
      TableName,
      AttributeDefinitions: [{ AttributeName: CLAIMS_PARTITION_KEY, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: CLAIMS_PARTITION_KEY, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  await ddb.send(
    new UpdateTimeToLiveCommand({ TableName, TimeToLiveSpecification: { AttributeName: CLAIMS_TTL_ATTRIBUTE, Enabled: true } }),
  );
  return TableName;
}

/** A manifest table shaped as infra/ creates it: partition key `pk` (S), sort key `checksum` (S), on-demand, no TTL. */
export async function freshManifestTable(ddb: DynamoDBClient, label = 'manifest'): Promise<string> {
  const TableName = freshName(label);
  await ddb.send(
    new CreateTableCommand({
      TableName,
      AttributeDefinitions: [
        { AttributeName: MANIFEST_PARTITION_KEY, AttributeType: 'S' },
        { AttributeName: MANIFEST_SORT_KEY, AttributeType: 'S' },
      ],
      KeySchema: [
        { AttributeName: MANIFEST_PARTITION_KEY, KeyType: 'HASH' },
        { AttributeName: MANIFEST_SORT_KEY, KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  return TableName;
}
