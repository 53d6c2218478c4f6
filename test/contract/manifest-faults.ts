import type { FaultProxy, RequestMatch } from '../support/fault-proxy.js';
import type { ManifestStoreFaults } from './manifest-store.contract.js';

/**
 * Lost answers on `register` for a store whose client talks to its emulator
 * through a fault proxy: the request that carries the attempt's runId lands,
 * and its response is dropped, so the SDK's own retry meets our own row.
 */
export function proxiedManifestFaults(proxy: FaultProxy, insert: RequestMatch): ManifestStoreFaults {
  return {
    lostAnswer: 'sdk-resends',
    loseNextRegisterAnswer: (runId) =>
      proxy.add({
        match: { ...insert, when: (r) => r.text.includes(runId) || r.body.includes(Buffer.from(runId)) },
        action: 'drop-response',
        times: 1,
      }),
  };
}

/** The insert request of each cloud adapter, by the shape of its wire. */
export const MANIFEST_INSERTS = {
  dynamodb: { header: { 'x-amz-target': 'DynamoDB_20120810.PutItem' } },
  firestore: { path: '/google.firestore.v1.Firestore/Commit' },
  'azure-table': { method: 'POST' },
} as const satisfies Record<string, RequestMatch>;
