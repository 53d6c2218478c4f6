import { DynamoDbClaimStore } from '../../functions/aws/adapters/dynamodb-claim-store.js';
import { S3ObjectStore } from '../../functions/aws/adapters/s3-object-store.js';
import { dynamoDbClient, freshBucket, freshClaimsTable, s3Client } from '../aws/clients.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';

// The shared contracts, unchanged, against DynamoDB Local and moto (the guard test shows both enforce preconditions).
describeClaimStoreContract('DynamoDbClaimStore', async () => {
  const ddb = dynamoDbClient();
  return new DynamoDbClaimStore(ddb, await freshClaimsTable(ddb));
});

describeObjectStoreContract('S3ObjectStore', async () => {
  const s3 = s3Client();
  return new S3ObjectStore(s3, await freshBucket(s3));
});
