/** Built-in Azure role definitions (ids are the same in every tenant). */
export const AZURE_ROLES = {
  /** The Functions host keeps its state, keys and leases in blobs of the host storage account: only there. */
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  /** Tessera reads scenes and writes outputs: scoped to those two containers. */
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe',
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
  /** Add messages only: what settling poison in a `-poison` queue takes (the handlers, and the host after maxDequeueCount). */
  storageQueueDataMessageSender: 'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a',
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
} as const;
