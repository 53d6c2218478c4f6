import { AdapterError, CorruptUploadError } from '../../shared/domain/errors.js';
import type { ObjectStore, PutIfAbsentResult, PutIfMatchResult, PutOptions } from '../../shared/ports/object-store.port.js';
import type { FaultShot } from './claim-faults.js';
import { type CannedResponse, corruptions, type FaultAction, type FaultProxy, type RequestMatch } from './fault-proxy.js';

/**
 * Faults on the way between an output store and its backend (the soak's
 * "lost responses" and "throttling" at the object store): a fault proxy on
 * the wire for the cloud stores, a wrapper for the filesystem store (no wire).
 */
export interface ObjectStoreFaults {
  /** The next write lands in the store, but its answer never reaches the adapter (the SDK's own retry fires). */
  loseNextWriteAnswer(): FaultShot;
  /** The next write gets one transient error in the store's own shape (S3 503 SlowDown, GCS 429, Azure 503 ServerBusy) and does not land. */
  failNextWriteTransiently(): FaultShot;
  /**
   * The next write's body is damaged on the way (one byte inverted, the checksums sent with it left as
   * they were): the store's digest check refuses it and nothing is stored. On an emulator that checks no
   * digest the proxy answers the cloud's documented refusal instead; the filesystem store has no wire,
   * so its wrapper plays the refusal (docs/emulator-fidelity.md).
   */
  corruptNextWrite(): FaultShot;
  /**
   * How many writes to `key` the store itself applied (2xx on the wire, including answers the proxy
   * then dropped; locally, each write the filesystem store reported written): what "written once"
   * is judged by, below every SDK retry and every adapter's recognition of its own write.
   */
  landedWrites(key: string): number;
}

/**
 * Faults for an object store whose client talks to its emulator through `proxy`; `writes` matches its write
 * requests. `refusal`: the cloud's answer to a corrupted body, for an emulator that does not check digests
 * (the proxy answers it instead of forwarding the damaged body, which such an emulator would store).
 */
export function proxiedObjectFaults(
  proxy: FaultProxy,
  writes: RequestMatch,
  transient: () => FaultAction,
  refusal?: () => CannedResponse,
): ObjectStoreFaults {
  const isWrite = (m: string) => (typeof writes.method === 'string' ? m === writes.method : m === 'PUT' || m === 'POST');
  return {
    loseNextWriteAnswer: () => proxy.add({ match: writes, action: 'drop-response' }),
    failNextWriteTransiently: () => proxy.add({ match: writes, action: transient() }),
    corruptNextWrite: () => proxy.add({ match: writes, action: { corrupt: corruptions.flipMiddleByte, answer: refusal?.() } }),
    // The key is in the path (S3, Blob) or in the query (a GCS multipart upload's `name=`).
    landedWrites: (key) =>
      proxy.requests.filter(
        (r) =>
          isWrite(r.method) &&
          r.status !== undefined &&
          r.status >= 200 &&
          r.status < 300 &&
          (r.path.split('?')[0]?.endsWith(`/${key}`) || new URLSearchParams(r.path.split('?')[1] ?? '').get('name') === key),
      ).length,
  };
}

/**
 * An ObjectStore wrapper for a store with no wire (the filesystem store): an
 * armed write is applied by the real store and its answer thrown away, then
 * the same request is sent again, as an SDK does after a lost answer; or it
 * fails before it is applied with a retryable AdapterError (what the store
 * throws on a transient I/O error such as EAGAIN); or, for a corrupted body,
 * it is refused before it is applied as a cloud store refuses one whose bytes
 * do not match their checksum (CorruptUploadError): a file written through a
 * descriptor has no wire to damage it on.
 */
export function withObjectFaults(inner: ObjectStore): { store: ObjectStore; faults: ObjectStoreFaults } {
  type Armed = { readonly kind: 'lose' | 'transient' | 'corrupt'; hits: number };
  const armed: Armed[] = [];
  const landed = new Map<string, number>();
  const noted = async <T extends { readonly kind: string }>(key: string, call: () => Promise<T>): Promise<T> => {
    const r = await call();
    if (r.kind === 'written') landed.set(key, (landed.get(key) ?? 0) + 1);
    return r;
  };
  const arm = (kind: Armed['kind']): FaultShot => {
    const shot: Armed = { kind, hits: 0 };
    armed.push(shot);
    return {
      get hits() {
        return shot.hits;
      },
      remove: () => {
        const at = armed.indexOf(shot);
        if (at >= 0) armed.splice(at, 1);
      },
    };
  };
  const through = async <T>(key: string, what: string, call: () => Promise<T>): Promise<T> => {
    const shot = armed.shift();
    if (!shot) return call();
    shot.hits++;
    if (shot.kind === 'transient') {
      throw new AdapterError(`[object-store:${inner.name}] write failed with a transient I/O error (injected)`, {
        cause: Object.assign(new Error('resource temporarily unavailable'), { code: 'EAGAIN' }),
        retryable: true,
      });
    }
    if (shot.kind === 'corrupt') throw new CorruptUploadError(inner.name, key, what, 'its SHA-256 differs (injected)');
    await call();
    return call();
  };
  // Every other method (reads, listings, conditional deletes) passes straight through.
  const store = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'putIfAbsent')
        return (key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult> =>
          through(key, 'create-only write', () => noted(key, () => target.putIfAbsent(key, body, options)));
      if (prop === 'putIfMatch')
        return (key: string, body: Uint8Array, expected: string, options?: PutOptions): Promise<PutIfMatchResult> =>
          through(key, 'repair write', () => noted(key, () => target.putIfMatch(key, body, expected, options)));
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    store,
    faults: {
      loseNextWriteAnswer: () => arm('lose'),
      failNextWriteTransiently: () => arm('transient'),
      corruptNextWrite: () => arm('corrupt'),
      landedWrites: (key) => landed.get(key) ?? 0,
    },
  };
}
