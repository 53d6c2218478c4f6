import { afterAll, inject } from 'vitest';
import { FirestoreClaimStore } from '../../functions/gcp/adapters/firestore-claim-store.js';
import { GcsObjectStore } from '../../functions/gcp/adapters/gcs-object-store.js';
import { firestoreClient, freshBucket } from '../gcp/clients.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';
import { describeClaimStoreContract } from './claim-store.contract.js';
import { describeObjectStoreContract } from './object-store.contract.js';

// The foundation's contract suites, unchanged, against fake-gcs-server and the
// patched Firestore emulator (test/contract/gcp-guard.test.ts proves both honour
// the preconditions these cases depend on).
const gcp = requireEndpoints(inject('emulators'), 'gcp');
const db = firestoreClient(gcp);
afterAll(() => db.terminate());

describeClaimStoreContract('FirestoreClaimStore', () => new FirestoreClaimStore(db.collection(`claims-${freshJobId().slice(0, 8)}`)));
describeObjectStoreContract('GcsObjectStore', async () => new GcsObjectStore(await freshBucket(gcp, 'contract')));
