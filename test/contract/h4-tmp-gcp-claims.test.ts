import type { Firestore } from '@google-cloud/firestore';
import { afterAll, inject } from 'vitest';
import { FirestoreClaimStore } from '../../functions/gcp/adapters/firestore-claim-store.js';
import { firestoreClient } from '../gcp/clients.js';
import { FIRESTORE_CLAIM_WIRE, proxiedClaimFaults } from '../support/claim-faults.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';
import { describeClaimStoreContract } from './claim-store.contract.js';

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
