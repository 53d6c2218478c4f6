import { AzureBlobObjectStore } from '../../functions/azure/adapters/azure-blob-object-store.js';
import { AzureTableClaimStore } from '../../functions/azure/adapters/azure-table-claim-store.js';
import { freshContainer, freshTable } from '../azure/azurite.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';

// Azurite's preconditions are proven first by azure-guard.test.ts; these suites rely on them.
describeClaimStoreContract('AzureTableClaimStore', async () => new AzureTableClaimStore(await freshTable()));
describeObjectStoreContract('AzureBlobObjectStore', async () => new AzureBlobObjectStore(await freshContainer()));
