import type { Firestore } from '@google-cloud/firestore';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { FirestoreManifestStore } from '../../functions/gcp/adapters/firestore-manifest-store.js';
import { firestoreClient } from '../gcp/clients.js';
import { FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';
import { MANIFEST_INSERTS, proxiedManifestFaults } from './manifest-faults.js';
import { describeManifestStoreContract } from './manifest-store.contract.js';
import { unconditionalWrites, writesSeen } from './precondition-guard.js';

// The manifest contract against Google's Firestore emulator, through an HTTP/2 fault proxy: a dropped Commit
// answer (create(), currentDocument.exists = false) meets the SDK's own retry, which gets ALREADY_EXISTS on our
// own document; the adapter reads it and recognises the runId.
const gcp = requireEndpoints(inject('emulators'), 'gcp');
const proxies: FaultProxy[] = [];
const clients: Firestore[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.terminate()));
  await Promise.all(proxies.map((p) => p.stop()));
});

describeManifestStoreContract('FirestoreManifestStore', async () => {
  const proxy = await FaultProxy.start({ target: `http://${gcp.firestore}`, protocol: 'http2' });
  proxies.push(proxy);
  const client = firestoreClient({ ...gcp, firestore: proxy.host });
  clients.push(client);
  return {
    store: new FirestoreManifestStore(client.collection(`manifest-${freshJobId().slice(0, 8)}`)),
    faults: proxiedManifestFaults(proxy, MANIFEST_INSERTS.firestore),
  };
});

describe('FirestoreManifestStore wire guard', () => {
  it('every Commit that reached the emulator carried a precondition (SDK retries included)', () => {
    const seen = proxies.flatMap((p) => p.requests);
    expect(writesSeen(seen)).toBeGreaterThan(30);
    expect(unconditionalWrites(seen)).toEqual([]);
  });
});
