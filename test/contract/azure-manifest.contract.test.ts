import { TableClient } from '@azure/data-tables';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { AzureTableManifestStore } from '../../functions/azure/adapters/azure-table-manifest-store.js';
import { freshName } from '../azure/azurite.js';
import { azuriteConnectionString } from '../support/emulators/azure.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { MANIFEST_INSERTS, proxiedManifestFaults } from './manifest-faults.js';
import { describeManifestStoreContract } from './manifest-store.contract.js';
import { unconditionalWrites, writesSeen } from './precondition-guard.js';

// The manifest contract against Azurite Tables, through a fault proxy: a dropped Insert Entity answer meets the
// SDK's own retry, which gets 409 EntityAlreadyExists on our own entity; the adapter reads it and recognises the runId.
const proxies: FaultProxy[] = [];
afterAll(() => Promise.all(proxies.map((p) => p.stop())));

describeManifestStoreContract('AzureTableManifestStore', async () => {
  const azure = requireEndpoints(inject('emulators'), 'azure');
  const proxy = await FaultProxy.start({ target: azure.table });
  proxies.push(proxy);
  const viaProxy = azuriteConnectionString(azure.blob, azure.queue, proxy.url);
  const table = TableClient.fromConnectionString(viaProxy, freshName('manifest'), { allowInsecureConnection: true });
  await table.createTable();
  return { store: new AzureTableManifestStore(table), faults: proxiedManifestFaults(proxy, MANIFEST_INSERTS['azure-table']) };
});

describe('AzureTableManifestStore wire guard', () => {
  it('no entity write reached Azurite as an upsert (SDK retries included)', () => {
    const seen = proxies.flatMap((p) => p.requests);
    expect(writesSeen(seen)).toBeGreaterThan(30);
    expect(unconditionalWrites(seen)).toEqual([]);
  });
});
