import { TableClient } from '@azure/data-tables';
import { BlobServiceClient } from '@azure/storage-blob';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { AzureBlobObjectStore } from '../../functions/azure/adapters/azure-blob-object-store.js';
import { AzureTableClaimStore } from '../../functions/azure/adapters/azure-table-claim-store.js';
import { freshContainer, freshName } from '../azure/azurite.js';
import { AZURE_TABLE_CLAIM_WIRE, proxiedClaimFaults } from '../support/claim-faults.js';
import { azuriteConnectionString } from '../support/emulators/azure.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';
import { unconditionalWrites, writesSeen } from './precondition-guard.js';

// Azurite's preconditions are proven first by azure-guard.test.ts; these suites rely on them.
// The claim store's TableClient goes through a fault proxy, so lost answers and 503s reach the SDK's own retry.
const proxies: FaultProxy[] = [];
afterAll(() => Promise.all(proxies.map((p) => p.stop())));

describeClaimStoreContract('AzureTableClaimStore', async () => {
  const azure = requireEndpoints(inject('emulators'), 'azure');
  const proxy = await FaultProxy.start({ target: azure.table });
  proxies.push(proxy);
  const viaProxy = azuriteConnectionString(azure.blob, azure.queue, proxy.url);
  const table = TableClient.fromConnectionString(viaProxy, freshName('claims'), { allowInsecureConnection: true });
  await table.createTable();
  return { store: new AzureTableClaimStore(table), faults: proxiedClaimFaults(proxy, AZURE_TABLE_CLAIM_WIRE) };
});
// The object store's client goes through a fault proxy too (lost answers meet the SDK's own retry);
// the container is made, and foreign blobs are written, by a direct client.
describeObjectStoreContract(
  'AzureBlobObjectStore',
  async () => {
    const azure = requireEndpoints(inject('emulators'), 'azure');
    const proxy = await FaultProxy.start({ target: azure.blob });
    proxies.push(proxy);
    const direct = await freshContainer();
    const viaProxy = BlobServiceClient.fromConnectionString(azuriteConnectionString(proxy.url, azure.queue, azure.table));
    return {
      store: new AzureBlobObjectStore(viaProxy.getContainerClient(direct.containerName)),
      proxy,
      writeForeign: async (key: string, body: Uint8Array) => {
        await direct.getBlockBlobClient(key).upload(body, body.byteLength);
      },
    };
  },
  { pinnedReadAfterOverwrite: 'old-bytes' },
);

// The wire guard: every request the contracts above sent went through a fault proxy, SDK retries and the
// requests an SDK makes on its own included; none may write or delete without a precondition.
describe('Azure wire guard', () => {
  it('no write or delete reached Azurite Blob or Table without a precondition', () => {
    const seen = proxies.flatMap((p) => p.requests);
    expect(writesSeen(seen)).toBeGreaterThan(50);
    expect(unconditionalWrites(seen)).toEqual([]);
  });
});
