import { afterAll } from 'vitest';
import { DynamoDbClaimStore } from '../../functions/aws/adapters/dynamodb-claim-store.js';
import { S3ObjectStore } from '../../functions/aws/adapters/s3-object-store.js';
import { awsEndpoints, dynamoDbClient, freshBucket, freshClaimsTable, s3Client } from '../aws/clients.js';
import { DYNAMODB_CLAIM_WIRE, proxiedClaimFaults } from '../support/claim-faults.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';

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

describeObjectStoreContract('S3ObjectStore', async () => {
  const s3 = s3Client();
  return new S3ObjectStore(s3, await freshBucket(s3));
});
