import type { Backend } from '../../shared/app/backend.js';
import type { ClaimResult, ClaimRow, CommitResult, HeartbeatResult } from '../../shared/domain/claim.js';
import type {
  ClaimRequest,
  ClaimStore,
  CommitRequest,
  DeleteClaimRequest,
  DeleteClaimResult,
  HeartbeatRequest,
} from '../../shared/ports/claim-store.port.js';
import type {
  DeleteIfVersionResult,
  ObjectHead,
  ObjectStore,
  PutIfAbsentResult,
  PutIfMatchResult,
  PutOptions,
  ReadPin,
} from '../../shared/ports/object-store.port.js';

/** Calls made through one port, the time spent in them, and the bytes read through it. */
export interface PortCount {
  calls: number;
  /** Wall time inside the port's calls (sequential callers: the time the caller waited). */
  ms: number;
  /** Bytes returned by `get` and `getRange` (object stores only). */
  bytesRead: number;
  readonly byMethod: Record<string, number>;
}

const newCount = (): PortCount => ({ calls: 0, ms: 0, bytesRead: 0, byMethod: {} });

/** Count one call of `method` and the time until it settles. */
async function track<T>(count: PortCount, method: string, call: () => Promise<T>): Promise<T> {
  tally(count, method);
  const started = performance.now();
  try {
    return await call();
  } finally {
    count.ms += performance.now() - started;
  }
}

function tally(count: PortCount, method: string): void {
  count.calls++;
  count.byMethod[method] = (count.byMethod[method] ?? 0) + 1;
}

/**
 * An ObjectStore that counts the calls made through it, the time spent in
 * them and the bytes it returns, then delegates. List is counted once per
 * listing, whatever its pages, and untimed (it is iterated by the caller).
 */
export class CountingObjectStore implements ObjectStore {
  readonly count = newCount();

  constructor(private readonly inner: ObjectStore) {}

  get name(): string {
    return this.inner.name;
  }

  putIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult> {
    return track(this.count, 'putIfAbsent', () => this.inner.putIfAbsent(key, body, options));
  }

  putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options?: PutOptions): Promise<PutIfMatchResult> {
    return track(this.count, 'putIfMatch', () => this.inner.putIfMatch(key, body, expectedVersion, options));
  }

  deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult> {
    return track(this.count, 'deleteIfVersion', () => this.inner.deleteIfVersion(key, version));
  }

  pin(key: string, version: string): Promise<ReadPin> {
    return this.inner.pin(key, version);
  }

  async getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array> {
    const bytes = await track(this.count, 'getRange', () => this.inner.getRange(key, start, end, pin));
    this.count.bytesRead += bytes.byteLength;
    return bytes;
  }

  async get(key: string): Promise<Uint8Array> {
    const bytes = await track(this.count, 'get', () => this.inner.get(key));
    this.count.bytesRead += bytes.byteLength;
    return bytes;
  }

  head(key: string): Promise<ObjectHead | undefined> {
    return track(this.count, 'head', () => this.inner.head(key));
  }

  list(prefix: string): AsyncIterable<ObjectHead> {
    tally(this.count, 'list');
    return this.inner.list(prefix);
  }
}

/** A ClaimStore that counts the calls made through it and the time spent in them, then delegates. */
export class CountingClaimStore implements ClaimStore {
  readonly count = newCount();

  constructor(private readonly inner: ClaimStore) {}

  get name(): string {
    return this.inner.name;
  }

  claim(request: ClaimRequest): Promise<ClaimResult> {
    return track(this.count, 'claim', () => this.inner.claim(request));
  }

  commit(request: CommitRequest): Promise<CommitResult> {
    return track(this.count, 'commit', () => this.inner.commit(request));
  }

  heartbeat(request: HeartbeatRequest): Promise<HeartbeatResult> {
    return track(this.count, 'heartbeat', () => this.inner.heartbeat(request));
  }

  deleteIf(request: DeleteClaimRequest): Promise<DeleteClaimResult> {
    return track(this.count, 'deleteIf', () => this.inner.deleteIf(request));
  }

  get(jobId: string): Promise<ClaimRow | undefined> {
    return track(this.count, 'get', () => this.inner.get(jobId));
  }

  list(): AsyncIterable<ClaimRow> {
    tally(this.count, 'list');
    return this.inner.list();
  }
}

/** A backend whose claim store and object stores count what passes through them. */
export interface CountedBackend {
  readonly backend: Backend;
  readonly claims: CountingClaimStore;
  readonly sources: CountingObjectStore;
  readonly outputs: CountingObjectStore;
}

export function countedBackend(inner: Backend): CountedBackend {
  const claims = new CountingClaimStore(inner.claims);
  const sources = new CountingObjectStore(inner.sources);
  const outputs = new CountingObjectStore(inner.outputs);
  return { backend: { ...inner, claims, sources, outputs }, claims, sources, outputs };
}

/** What the three ports have counted so far (a point to measure a delivery from). */
export interface PortSnapshot {
  readonly claimCalls: number;
  /** Time spent inside the claim store. */
  readonly claimMs: number;
  readonly sourceCalls: number;
  readonly sourceBytes: number;
  readonly outputCalls: number;
}

export function snapshot(b: CountedBackend): PortSnapshot {
  return {
    claimCalls: b.claims.count.calls,
    claimMs: b.claims.count.ms,
    sourceCalls: b.sources.count.calls,
    sourceBytes: b.sources.count.bytesRead,
    outputCalls: b.outputs.count.calls,
  };
}

export function since(b: CountedBackend, before: PortSnapshot): PortSnapshot {
  const now = snapshot(b);
  return {
    claimCalls: now.claimCalls - before.claimCalls,
    claimMs: now.claimMs - before.claimMs,
    sourceCalls: now.sourceCalls - before.sourceCalls,
    sourceBytes: now.sourceBytes - before.sourceBytes,
    outputCalls: now.outputCalls - before.outputCalls,
  };
}
