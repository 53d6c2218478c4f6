import { AdapterError } from '../../shared/domain/errors.js';
import type { ClaimStore } from '../../shared/ports/claim-store.port.js';
import { type FaultAction, type FaultProxy, type RequestMatch, storeFaults } from './fault-proxy.js';

/** The conditional writes of the claim protocol that a fault can hit. */
export type ClaimWrite = 'claim' | 'takeover' | 'commit' | 'heartbeat';

/** How often an armed fault fired (0: the write it waited for never came). */
export interface FaultShot {
  readonly hits: number;
  /** Disarm it if it has not fired yet (the soak: a fault meant for one delivery must not hit a later one). */
  remove?(): void;
}

/**
 * Faults on the way between a claim store and its backend, injected by the
 * contract for every adapter: a proxy on the wire for the cloud stores, a
 * wrapper for SQLite (no wire).
 */
export interface ClaimStoreFaults {
  /** The next such write lands in the store, but its answer never reaches the adapter. */
  loseNextAnswer(write: ClaimWrite): FaultShot;
  /** The next such write gets one transient error in the store's own shape and does not land. */
  failNextTransiently(write: ClaimWrite): FaultShot;
}

/**
 * What a caller sees when the answer to a write that landed was lost and
 * nothing below it retried (SQLite has no wire and no SDK). It does what an SDK
 * does on the wire: send the same request again (see {@link retryingLostAnswer}).
 */
export class LostAnswerError extends Error {
  constructor(what: string) {
    super(`the answer to ${what} was lost after the write landed (injected)`);
    this.name = 'LostAnswerError';
  }
}

/** Run a store call; if it lost its answer with no SDK to resend it, send the same request once more, as an SDK would. */
export async function retryingLostAnswer<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof LostAnswerError) return call();
    throw error;
  }
}

/**
 * A ClaimStore wrapper for a store with no wire (SQLite): an armed write is
 * applied by the real store, and then its answer is thrown away
 * ({@link LostAnswerError}, or with `resend` the same request is sent again), or it fails before it is applied with the error the
 * store itself throws under contention (SQLITE_BUSY past the busy timeout: a
 * retryable AdapterError).
 */
export function withClaimFaults(
  inner: ClaimStore,
  options: {
    /** Resend the request itself after losing its answer, as an SDK does on the wire, instead of throwing (parity runs). */
    readonly resend?: boolean;
  } = {},
): { store: ClaimStore; faults: ClaimStoreFaults } {
  type Armed = { readonly kind: 'lose' | 'transient'; hits: number };
  const armed = new Map<'claim' | 'commit' | 'heartbeat', Armed[]>();
  const method = (write: ClaimWrite) => (write === 'takeover' ? 'claim' : write);
  const arm = (write: ClaimWrite, kind: Armed['kind']): FaultShot => {
    const shot: Armed = { kind, hits: 0 };
    const list = armed.get(method(write)) ?? [];
    list.push(shot);
    armed.set(method(write), list);
    return {
      get hits() {
        return shot.hits;
      },
      remove: () => {
        const at = list.indexOf(shot);
        if (at >= 0) list.splice(at, 1);
      },
    };
  };
  const through = async <T>(name: 'claim' | 'commit' | 'heartbeat', call: () => Promise<T>): Promise<T> => {
    const shot = armed.get(name)?.shift();
    if (!shot) return call();
    shot.hits++;
    if (shot.kind === 'transient') {
      throw new AdapterError(`[claim-store:${inner.name}] database stayed locked past the busy timeout (injected)`, {
        cause: Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }),
        retryable: true,
      });
    }
    await call();
    if (options.resend) return call();
    throw new LostAnswerError(`${inner.name} ${name}`);
  };
  const store: ClaimStore = {
    name: inner.name,
    claim: (r) => through('claim', () => inner.claim(r)),
    commit: (r) => through('commit', () => inner.commit(r)),
    heartbeat: (r) => through('heartbeat', () => inner.heartbeat(r)),
    get: (id) => inner.get(id),
    list: () => inner.list(),
    deleteIf: (r) => inner.deleteIf(r),
  };
  return {
    store,
    faults: { loseNextAnswer: (w) => arm(w, 'lose'), failNextTransiently: (w) => arm(w, 'transient') },
  };
}

/** Which wire requests are which claim write, and the store's own transient error, for a proxied store. */
export interface ClaimWireMap {
  readonly writes: Readonly<Record<ClaimWrite, RequestMatch>>;
  readonly transient: () => FaultAction;
}

/** Faults for a claim store whose client talks to its emulator through `proxy`. */
export function proxiedClaimFaults(proxy: FaultProxy, wire: ClaimWireMap): ClaimStoreFaults {
  return {
    loseNextAnswer: (write) => proxy.add({ match: wire.writes[write], action: 'drop-response' }),
    failNextTransiently: (write) => proxy.add({ match: wire.writes[write], action: wire.transient() }),
  };
}

const ddbTarget = (op: string) => ({ 'x-amz-target': `DynamoDB_20120810.${op}` });

/**
 * DynamoDB (JSON over HTTP/1.1): a PutItem on "no row" claims, a PutItem on "the lapsed row read" takes over,
 * UpdateItem commits and beats; throttling is the transient answer.
 */
export const DYNAMODB_CLAIM_WIRE: ClaimWireMap = {
  writes: {
    claim: { header: ddbTarget('PutItem'), body: 'attribute_not_exists' },
    takeover: { header: ddbTarget('PutItem'), body: '":prev_owner"' },
    commit: { header: ddbTarget('UpdateItem'), body: '":committed"' },
    heartbeat: { header: ddbTarget('UpdateItem'), body: '":lease_until"' },
  },
  transient: () => storeFaults.dynamoDbThrottled(),
};

/** Azure Table (OData JSON): Insert Entity claims, Update (Replace) takes over and commits, Merge beats; 503 ServerBusy. */
export const AZURE_TABLE_CLAIM_WIRE: ClaimWireMap = {
  writes: {
    claim: { method: 'POST' },
    takeover: { method: 'PUT', body: '"state":"CLAIMED"' },
    commit: { method: 'PUT', body: '"state":"COMMITTED"' },
    heartbeat: { method: /^(PATCH|MERGE)$/ },
  },
  transient: () => storeFaults.azureServerBusy('table'),
};

const FIRESTORE_COMMIT = '/google.firestore.v1.Firestore/Commit';
/** How often a field name occurs in a Commit: once in a create's document, twice in an update's (document and update mask). */
const mentions = (text: string, field: string): number => text.split(field).length - 1;

/**
 * Firestore (gRPC): every write is a Commit RPC, told apart by the fields it carries; ABORTED is the contention
 * answer. A claim's create and its takeover (an update with a lastUpdateTime precondition) both carry CLAIMED;
 * the update also names its fields in its mask.
 */
export const FIRESTORE_CLAIM_WIRE: ClaimWireMap = {
  writes: {
    claim: { path: FIRESTORE_COMMIT, body: 'CLAIMED', when: (r) => mentions(r.text, 'lease_until') === 1 },
    takeover: { path: FIRESTORE_COMMIT, body: 'CLAIMED', when: (r) => mentions(r.text, 'lease_until') > 1 },
    commit: { path: FIRESTORE_COMMIT, body: 'COMMITTED' },
    heartbeat: { path: FIRESTORE_COMMIT, when: (r) => !r.text.includes('state') },
  },
  transient: () =>
    storeFaults.grpc(
      10,
      'Aborted due to cross-transaction contention. This occurs when multiple transactions attempt to access the same data.',
    ),
};
