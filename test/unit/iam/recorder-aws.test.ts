import { CreateBucketCommand, PutBucketVersioningCommand } from '@aws-sdk/client-s3';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { CreateQueueCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDbClaimStore } from '../../../functions/aws/adapters/dynamodb-claim-store.js';
import { S3ObjectStore } from '../../../functions/aws/adapters/s3-object-store.js';
import { SecretsManagerSecret } from '../../../functions/aws/adapters/secrets-manager-secret.js';
import { SqsJobQueue } from '../../../functions/aws/adapters/sqs-job-queue.js';
import { awsEndpoints, dynamoDbClient, freshClaimsTable, freshName, s3Client, sqsClient } from '../../aws/clients.js';
import { FaultProxy } from '../../support/fault-proxy.js';
import { asRole } from '../../support/function-role.js';
import { registerResources } from '../../support/iam/recorder.js';
import { freshJobId } from '../../support/ids.js';
import { collect, lines } from './recorder-support.js';

/**
 * The recorder on AWS: the real adapters, run as a role against DynamoDB Local and moto (S3, SQS,
 * Secrets Manager); what the recorder makes of each request is compared whole.
 */
const bucket = freshName('iam-out');
let outputs: S3ObjectStore;
const closers: (() => Promise<unknown> | unknown)[] = [];

beforeAll(async () => {
  const s3 = s3Client();
  closers.push(() => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  await s3.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }));
  outputs = new S3ObjectStore(s3, bucket);
  registerResources({ [bucket]: 'outputBucket' });
});
afterAll(async () => {
  for (const c of closers) await c();
});

describe('the access recorder on AWS (real adapters as a role, against the emulators)', () => {
  it('S3: writes are s3:PutObject, a pinned read s3:GetObjectVersion, a listing s3:ListBucket with its prefix, a delete s3:DeleteObject', async () => {
    const rec = collect();
    try {
      const first = await asRole('tile', () => outputs.putIfAbsent('tiles/s/0_0.tif', new Uint8Array([1, 2, 3])));
      if (first.kind !== 'written') throw new Error(`expected written, got ${first.kind}`);
      await asRole('mosaic', async () => {
        const pin = await outputs.pin('tiles/s/0_0.tif', first.version);
        await outputs.getRange('tiles/s/0_0.tif', 0, 2, pin);
        await outputs.get('tiles/s/0_0.tif');
        for await (const _ of outputs.list('tiles/s/')) void _;
      });
      const head = await outputs.head('tiles/s/0_0.tif'); // the operator's check: not recorded
      if (head === undefined) throw new Error('the tile is not there');
      await asRole('verify', () => outputs.deleteIfVersion('tiles/s/0_0.tif', head.version));
    } finally {
      rec.stop();
    }
    // The pin heads the live object and then reads by the VersionId it found; the delete is conditional on
    // the version the caller saw, so the adapter heads the object first.
    expect(lines(rec.seen)).toEqual([
      'tile s3:PutObject outputBucket tiles/s/0_0.tif',
      'mosaic s3:GetObject outputBucket tiles/s/0_0.tif',
      'mosaic s3:GetObjectVersion outputBucket tiles/s/0_0.tif',
      'mosaic s3:GetObject outputBucket tiles/s/0_0.tif',
      'mosaic s3:ListBucket outputBucket list:tiles/s/',
      'verify s3:GetObject outputBucket tiles/s/0_0.tif',
      'verify s3:DeleteObject outputBucket tiles/s/0_0.tif',
    ]);
  });

  it('DynamoDB: the table comes from the JSON body; an SDK retry after a lost answer is recorded again, as the same role', async () => {
    const e = awsEndpoints();
    const table = await freshClaimsTable(dynamoDbClient(), freshName('iamclaims'));
    registerResources({ [table]: 'claimsTable' });
    const proxy = await FaultProxy.start({ target: e.dynamodb });
    const ddb = dynamoDbClient({ ...e, dynamodb: proxy.url });
    closers.push(
      () => ddb.destroy(),
      () => proxy.stop(),
    );
    const claims = new DynamoDbClaimStore(ddb, table);
    const lost = proxy.add({ match: { header: { 'x-amz-target': 'DynamoDB_20120810.PutItem' } }, action: 'drop-response' });
    const rec = collect();
    try {
      const r = await asRole('tile', () =>
        claims.claim({ jobId: freshJobId(), owner: 'w1', now: 1_000, leaseUntil: 61_000, expiresAt: 9_999_999 }),
      );
      expect(r.kind).toBe('claimed');
    } finally {
      rec.stop();
    }
    expect(lost.hits).toBe(1);
    // The proxy's own forwarding (outside any role) is not recorded: each request once, at the SDK.
    expect(lines(rec.seen)).toEqual(['tile dynamodb:PutItem claimsTable', 'tile dynamodb:PutItem claimsTable']);
  });

  it('SQS: SendMessageBatch is authorised as sqs:SendMessage, on the queue named by QueueUrl', async () => {
    const sqs = sqsClient();
    closers.push(() => sqs.destroy());
    const name = freshName('iamtiles');
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
    registerResources({ [name]: 'tileQueue' });
    const queue = new SqsJobQueue(sqs, QueueUrl as string);
    const rec = collect();
    try {
      await asRole('scene', () => queue.sendBatch([{ jobKey: freshJobId(), body: '{}' }]));
    } finally {
      rec.stop();
    }
    expect(lines(rec.seen)).toEqual(['scene sqs:SendMessage tileQueue']);
  });

  it('Secrets Manager: reading the sink URL is secretsmanager:GetSecretValue on the secret, named by its ARN', async () => {
    const e = awsEndpoints();
    const sm = new SecretsManagerClient({
      endpoint: e.moto,
      region: e.region,
      credentials: { accessKeyId: 'tesseratest', secretAccessKey: 'tesseratest' },
    });
    closers.push(() => sm.destroy());
    const name = freshName('iamsink');
    const created = await sm.send(new CreateSecretCommand({ Name: name, SecretString: 'postgres://x' }));
    registerResources({ [name]: 'featureSinkSecret' });
    const rec = collect();
    try {
      await asRole('tile', () => new SecretsManagerSecret(sm, created.ARN as string).value());
    } finally {
      rec.stop();
    }
    expect(lines(rec.seen)).toEqual(['tile secretsmanager:GetSecretValue featureSinkSecret']);
  });

  it('requests of two roles interleaved on one client, over reused keep-alive sockets, each keep their own role', async () => {
    const rec = collect();
    try {
      await Promise.all(
        Array.from({ length: 24 }, (_, i) => {
          const role = i % 2 === 0 ? 'tile' : 'mosaic';
          return asRole(role, () => outputs.putIfAbsent(`tiles/${role}/${i}.tif`, new Uint8Array([i])));
        }),
      );
    } finally {
      rec.stop();
    }
    const got = lines(rec.seen);
    expect(got).toHaveLength(24);
    for (const l of got) expect(l).toMatch(/^(tile|mosaic) s3:PutObject outputBucket tiles\/\1\/\d+\.tif$/);
  });
});
