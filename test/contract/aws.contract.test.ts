import { PutBucketVersioningCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, describe, expect, it } from 'vitest';
import { DynamoDbClaimStore } from '../../functions/aws/adapters/dynamodb-claim-store.js';
import { S3ObjectStore } from '../../functions/aws/adapters/s3-object-store.js';
import { awsEndpoints, dynamoDbClient, freshBucket, freshClaimsTable, s3Client } from '../aws/clients.js';
import { DYNAMODB_CLAIM_WIRE, proxiedClaimFaults } from '../support/claim-faults.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract, type ObjectStoreUnderTest } from './object-store.contract.js';
import { unconditionalWrites, writesSeen } from './precondition-guard.js';

// The shared contracts, unchanged, against DynamoDB Local and moto (the guard test shows both enforce preconditions).
// The claim store talks to DynamoDB Local through a fault proxy, so lost answers and throttling reach the SDK's own retry.
const proxies: FaultProxy[] = [];
afterAll(() => Promise.all(proxies.map((p) => p.stop())));

describeClaimStoreContract('DynamoDbClaimStore', async () => {
  const proxy = await FaultProxy.start({ target: awsEndpoints().dynamodb });
  proxies.push(proxy);
  const ddb = dynamoDbClient({ ...awsEndpoints(), dynamodb: proxy.url });
  return { store: new DynamoDbClaimStore(ddb, await freshClaimsTable(ddb)), faults: proxiedClaimFaults(proxy, DYNAMODB_CLAIM_WIRE) };
});

// The object store's client goes through a fault proxy too (lost answers meet the SDK's own retry); the bucket is
// made, and foreign objects are written, by a direct client. Run on an unversioned bucket (pinned reads carry
// If-Match: <etag>) and on a versioned one (pinned reads name the versionId), as infra/ makes the sources bucket.
const s3UnderTest = async (versioned: boolean): Promise<ObjectStoreUnderTest> => {
  const proxy = await FaultProxy.start({ target: awsEndpoints().moto });
  proxies.push(proxy);
  const direct = s3Client();
  const bucket = await freshBucket(direct);
  if (versioned) {
    await direct.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }));
  }
  return {
    store: new S3ObjectStore(s3Client({ ...awsEndpoints(), moto: proxy.url }), bucket),
    proxy,
    writeForeign: async (key, body) => {
      await direct.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
    },
  };
};
describeObjectStoreContract('S3ObjectStore', () => s3UnderTest(false), { pinnedReadAfterOverwrite: 'source-changed' });
describeObjectStoreContract('S3ObjectStore on a versioned bucket', () => s3UnderTest(true), {
  pinnedReadAfterOverwrite: 'old-bytes',
  pinOfReplacedVersion: 'kept-version',
});

// The wire guard: every request the contracts above sent went through a fault proxy, SDK retries and the
// requests an SDK makes on its own included; none may write or delete without a precondition.
describe('AWS wire guard', () => {
  it('no write or delete reached DynamoDB Local or moto without a precondition', () => {
    const seen = proxies.flatMap((p) => p.requests);
    expect(writesSeen(seen)).toBeGreaterThan(50);
    expect(unconditionalWrites(seen)).toEqual([]);
  });
});
