import { afterAll, describe, expect, it } from 'vitest';
import { DynamoDbManifestStore } from '../../functions/aws/adapters/dynamodb-manifest-store.js';
import { awsEndpoints, dynamoDbClient, freshManifestTable } from '../aws/clients.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { MANIFEST_INSERTS, proxiedManifestFaults } from './manifest-faults.js';
import { describeManifestStoreContract } from './manifest-store.contract.js';
import { unconditionalWrites, writesSeen } from './precondition-guard.js';

// The manifest contract against DynamoDB Local, through a fault proxy: a dropped PutItem answer meets the SDK's own
// retry (maxAttempts 3), whose condition then fails on our own item and ALL_OLD names our runId.
const proxies: FaultProxy[] = [];
afterAll(() => Promise.all(proxies.map((p) => p.stop())));

describeManifestStoreContract('DynamoDbManifestStore', async () => {
  const proxy = await FaultProxy.start({ target: awsEndpoints().dynamodb });
  proxies.push(proxy);
  const table = await freshManifestTable(dynamoDbClient());
  return {
    store: new DynamoDbManifestStore(dynamoDbClient({ ...awsEndpoints(), dynamodb: proxy.url }), table),
    faults: proxiedManifestFaults(proxy, MANIFEST_INSERTS.dynamodb),
  };
});

describe('DynamoDbManifestStore wire guard', () => {
  it('every manifest write that reached DynamoDB Local carried a condition (SDK retries included)', () => {
    const seen = proxies.flatMap((p) => p.requests);
    expect(writesSeen(seen)).toBeGreaterThan(30);
    expect(unconditionalWrites(seen)).toEqual([]);
  });
});
