import type { Firestore } from '@google-cloud/firestore';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { FirestoreClaimStore } from '../../functions/gcp/adapters/firestore-claim-store.js';
import { GcsObjectStore } from '../../functions/gcp/adapters/gcs-object-store.js';
import { firestoreClient, freshBucket, storageClient } from '../gcp/clients.js';
import { FIRESTORE_CLAIM_WIRE, proxiedClaimFaults } from '../support/claim-faults.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';
import { unconditionalWrites, writesSeen } from './precondition-guard.js';

// The foundation's contract suites against fake-gcs-server and Google's own
// Firestore emulator (test/contract/gcp-guard.test.ts proves both honour the
// preconditions these cases depend on).
const gcp = requireEndpoints(inject('emulators'), 'gcp');
const db = firestoreClient(gcp);
afterAll(() => db.terminate());

// The claim store's client reaches the emulator through an HTTP/2 fault proxy (lost answers, ABORTED).
const proxies: FaultProxy[] = [];
const proxied: Firestore[] = [];
afterAll(async () => {
  await Promise.all(proxied.map((c) => c.terminate()));
  await Promise.all(proxies.map((p) => p.stop()));
});

describeClaimStoreContract('FirestoreClaimStore', async () => {
  const proxy = await FaultProxy.start({ target: `http://${gcp.firestore}`, protocol: 'http2' });
  proxies.push(proxy);
  const client = firestoreClient({ ...gcp, firestore: proxy.host });
  proxied.push(client);
  return {
    store: new FirestoreClaimStore(client.collection(`claims-${freshJobId().slice(0, 8)}`)),
    faults: proxiedClaimFaults(proxy, FIRESTORE_CLAIM_WIRE),
  };
});
// The object store's client goes through a fault proxy too (lost answers meet the SDK's own retry);
// foreign objects are written by a direct client.
describeObjectStoreContract(
  'GcsObjectStore',
  async () => {
    const proxy = await FaultProxy.start({ target: gcp.gcs });
    proxies.push(proxy);
    const direct = await freshBucket(gcp, 'contract');
    return {
      store: new GcsObjectStore(storageClient({ ...gcp, gcs: proxy.url }).bucket(direct.name)),
      proxy,
      writeForeign: async (key: string, body: Uint8Array) => {
        await direct.file(key).save(Buffer.from(body), { resumable: false, validation: false });
      },
    };
  },
  // fake-gcs-server deletes whatever the generation precondition says (docs/emulator-fidelity.md).
  { pinnedReadAfterOverwrite: 'source-changed', staleDelete: 'ignored-by-emulator' },
);

// The wire guard: every request the contracts above sent went through a fault proxy, SDK retries and the
// requests an SDK makes on its own included; none may write or delete without a precondition.
describe('GCP wire guard', () => {
  it('no write or delete reached fake-gcs-server or the Firestore emulator without a precondition', () => {
    const seen = proxies.flatMap((p) => p.requests);
    expect(writesSeen(seen)).toBeGreaterThan(50);
    expect(unconditionalWrites(seen)).toEqual([]);
  });
});
