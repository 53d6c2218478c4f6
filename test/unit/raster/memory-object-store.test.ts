import { describeObjectStoreContract } from '../../contract/object-store.contract.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';

// The in-memory store the raster tests read from must honour the port exactly, like every adapter.
describeObjectStoreContract('MemoryObjectStore', () => new MemoryObjectStore(), {
  pinnedReadAfterOverwrite: 'source-changed',
  contentType: 'none',
});
