import { TableClient } from '@azure/data-tables';
import { afterAll, inject } from 'vitest';
import { AzureBlobObjectStore } from '../../functions/azure/adapters/azure-blob-object-store.js';
import { AzureTableClaimStore } from '../../functions/azure/adapters/azure-table-claim-store.js';
import { freshContainer, freshName } from '../azure/azurite.js';
import { AZURE_TABLE_CLAIM_WIRE, proxiedClaimFaults } from '../support/claim-faults.js';
import { azuriteConnectionString } from '../support/emulators/azure.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';

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
describeObjectStoreContract('AzureBlobObjectStore', async () => new AzureBlobObjectStore(await freshContainer()));
