import { CreateAccessKeyCommand, CreateUserCommand, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3ObjectStore } from '../../functions/aws/adapters/s3-object-store.js';
import { outputKeys, SWEEP_STATE_KEY } from '../../shared/domain/key-layout.js';
import type { AwsEndpoints, AwsKey } from '../support/emulators/types.js';
import { asRole } from '../support/function-role.js';
import { awsEndpoints, freshName } from './clients.js';
import { createRoleUsers, expectNoAccessDenied, iamAdmin, iamS3Client, roleSignedS3, takeAccessDenials } from './iam.js';

/**
 * The IAM-enforcing moto (test/support/emulators/aws.ts) proves, before any enforced suite relies on
 * it, that it really refuses what a user's policy does not grant: the handler suites, the parity
 * matrix's aws column and the aws soak pass only because their S3 requests are inside the deployed
 * grants if this holds. Measured on moto 5.2.5; docs/iam.md.
 */

const SCENE = '0'.repeat(64);
let e: AwsEndpoints;
let admin: S3Client;
let bucket: string;
let limited: S3Client;

const failure = (p: Promise<unknown>) =>
  p.then(
    () => 'allowed',
    (err: { name?: string; $metadata?: { httpStatusCode?: number } }) => `${err.$metadata?.httpStatusCode} ${err.name}`,
  );

/** A user whose only policy is `statements`. */
async function userWith(name: string, statements: unknown[]): Promise<AwsKey> {
  const iam = iamAdmin(e);
  try {
    await iam.send(new CreateUserCommand({ UserName: name }));
    await iam.send(
      new PutUserPolicyCommand({
        UserName: name,
        PolicyName: 'only',
        PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: statements }),
      }),
    );
    const key = (await iam.send(new CreateAccessKeyCommand({ UserName: name }))).AccessKey;
    return { accessKeyId: key?.AccessKeyId as string, secretAccessKey: key?.SecretAccessKey as string };
  } finally {
    iam.destroy();
  }
}

beforeAll(async () => {
  e = awsEndpoints();
  admin = iamS3Client(e, e.motoIamAdmin);
  bucket = freshName('guard');
  await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  await admin.send(new PutObjectCommand({ Bucket: bucket, Key: 'tiles/x', Body: 'x' }));
  // Exactly the measurement of issue 24: create and read under tiles/, nothing else.
  limited = iamS3Client(
    e,
    await userWith(freshName('tiles-only'), [
      { Effect: 'Allow', Action: ['s3:PutObject', 's3:GetObject'], Resource: `arn:aws:s3:::${bucket}/tiles/*` },
    ]),
  );
});
afterAll(() => {
  admin?.destroy();
  limited?.destroy();
});

describe('the IAM-enforcing moto refuses what a policy does not grant', () => {
  it('refuses a request signed by a key no user holds', async () => {
    const stranger = iamS3Client(e, { accessKeyId: 'AKIANOBODY0000000000', secretAccessKey: 'nobody' });
    expect(await failure(stranger.send(new PutObjectCommand({ Bucket: bucket, Key: 'tiles/y', Body: 'y' })))).toBe(
      '403 InvalidAccessKeyId',
    );
    stranger.destroy();
  });

  it('allows a create-only PutObject (If-None-Match: *) inside the granted prefix, and answers its second one 412', async () => {
    const put = () => limited.send(new PutObjectCommand({ Bucket: bucket, Key: `tiles/${freshName('y')}`, Body: 'y', IfNoneMatch: '*' }));
    expect(await failure(put())).toBe('allowed');
    const key = `tiles/${freshName('z')}`;
    await limited.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'z', IfNoneMatch: '*' }));
    expect(await failure(limited.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'z', IfNoneMatch: '*' })))).toBe(
      '412 PreconditionFailed',
    );
  });

  it('denies PutObject outside the granted prefix, DeleteObject where only put and get are granted, and ListObjectsV2 without ListBucket', async () => {
    expect(await failure(limited.send(new PutObjectCommand({ Bucket: bucket, Key: 'index/x', Body: 'x', IfNoneMatch: '*' })))).toBe(
      '403 AccessDenied',
    );
    expect(await failure(limited.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'tiles/x' })))).toBe('403 AccessDenied');
    expect(await failure(limited.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'tiles/' })))).toBe('403 AccessDenied');
  });

  it('differs from S3 in two ways the recorder covers instead: a missing key is 404 without ListBucket, and an s3:prefix condition is ignored', async () => {
    // S3 answers 403 to a HEAD of a missing key unless the caller may list it (docs/aws.md, "A missing key");
    // moto checks s3:GetObject only. infra's derivation gives every read area its listing (test/infra/aws.test.ts).
    expect(await failure(limited.send(new HeadObjectCommand({ Bucket: bucket, Key: 'tiles/missing' })))).toBe('404 NotFound');
    // moto evaluates StringEquals only and skips any other condition operator: a listing outside the
    // prefix the StringLike names is allowed here, refused by S3. The access recorder checks listing prefixes.
    const lister = iamS3Client(
      e,
      await userWith(freshName('lister'), [
        {
          Effect: 'Allow',
          Action: 's3:ListBucket',
          Resource: `arn:aws:s3:::${bucket}`,
          Condition: { StringLike: { 's3:prefix': ['tiles/*'] } },
        },
      ]),
    );
    expect(await failure(lister.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'index/' })))).toBe('allowed');
    lister.destroy();
  });
});

describe("the deployed policies, as the enforced suites hand them to each role's user", () => {
  it('let the tile role create its tile and read its scene manifest, and deny it the mosaic and the sweep state, naming role, action and key', async () => {
    const sources = freshName('src');
    const outputs = freshName('out');
    await Promise.all([sources, outputs].map((b) => admin.send(new CreateBucketCommand({ Bucket: b }))));
    const keys = await createRoleUsers(e, { sources, outputs }, 'incoming/', freshName('guard'));
    const s3 = roleSignedS3(e, keys);
    try {
      const store = new S3ObjectStore(s3, outputs);
      await new S3ObjectStore(admin, outputs).putIfAbsent(outputKeys.sceneManifest(SCENE), new TextEncoder().encode('{}'));
      await asRole('tile', async () => {
        expect(await store.putIfAbsent(outputKeys.tile(SCENE, { row: 0, col: 0 }), new Uint8Array([1]))).toMatchObject({ kind: 'written' });
        expect(await store.get(outputKeys.sceneManifest(SCENE))).toHaveLength(2);
        await expect(store.putIfAbsent(outputKeys.mosaic(SCENE), new Uint8Array([1]))).rejects.toThrow(
          /the tile role was denied s3:PutObject on s3:\/\/out-[^/]+\/mosaics\/0{64}\.vrt/,
        );
        await expect(store.head(SWEEP_STATE_KEY)).rejects.toThrow(
          /the tile role was denied s3:GetObject on s3:\/\/out-[^/]+\/index\/mosaic-sweep\.json/,
        );
      });
      expect(takeAccessDenials().map((d) => `${d.role} ${d.action} ${d.key}`)).toEqual([
        `tile s3:PutObject ${outputKeys.mosaic(SCENE)}`,
        `tile s3:GetObject ${SWEEP_STATE_KEY}`,
      ]);
      expectNoAccessDenied();
    } finally {
      s3.destroy();
    }
  });
});
