import { compareContent, contentDigest } from '../../shared/domain/content-digest.js';
import { ObjectNotFoundError, SourceChangedError } from '../../shared/domain/errors.js';
import { validateObjectKey } from '../../shared/domain/object-key.js';
import type {
  DeleteIfVersionResult,
  ObjectHead,
  ObjectStore,
  PutIfAbsentResult,
  PutIfMatchResult,
  PutOptions,
  ReadPin,
} from '../../shared/ports/object-store.port.js';

interface StoredObject {
  readonly body: Uint8Array;
  readonly version: string;
  readonly lastModified: number;
  readonly contentType: string | undefined;
  readonly sha256Hex: string;
}

/**
 * An ObjectStore held in a Map, for unit tests: create-only and
 * version-conditional writes exactly as the port defines them (it passes the
 * ObjectStore contract suite), keys validated before anything else. Each write
 * copies the body, so later changes to the caller's buffer cannot leak in.
 * JavaScript runs one callback at a time and every check-and-set here is
 * synchronous, so concurrent writers are serialised just like a real store's
 * conditional request. Only the current version of a key is kept, so a pinned
 * read of a replaced version answers SourceChangedError.
 */
export class MemoryObjectStore implements ObjectStore {
  readonly name = 'memory';

  /** A URI no tool outside the process opens, but the shape every store's has (tests of links use it). */
  uriOf(key: string): string {
    return `memory://store/${key.split('/').map(encodeURIComponent).join('/')}`;
  }
  private readonly objects = new Map<string, StoredObject>();
  private sequence = 0;

  /** @param now the clock for `lastModified` (tests may pass a fake one). */
  constructor(private readonly now: () => number = Date.now) {}

  async putIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult> {
    validateObjectKey(key);
    const existing = this.objects.get(key);
    if (existing) {
      const sameBytes = compareContent({ size: existing.body.byteLength, sha256Hex: existing.sha256Hex }, contentDigest(body)) === 'same';
      return { kind: 'already-present', sameBytes, current: this.headOf(key, existing) };
    }
    const stored = this.store(key, body, options);
    return { kind: 'written', version: stored.version };
  }

  async deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult> {
    validateObjectKey(key);
    const current = this.objects.get(key);
    if (!current) return { kind: 'absent' };
    if (current.version !== version) return { kind: 'version-mismatch', current: current.version };
    this.objects.delete(key);
    return { kind: 'deleted' };
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options?: PutOptions): Promise<PutIfMatchResult> {
    validateObjectKey(key);
    const current = this.objects.get(key);
    if (!current) return { kind: 'absent' };
    if (current.version !== expectedVersion) {
      // Its own bytes already in place (an earlier attempt landed): written.
      if (compareContent({ size: current.body.byteLength, sha256Hex: current.sha256Hex }, contentDigest(body)) === 'same') {
        return { kind: 'written', version: current.version };
      }
      return { kind: 'version-mismatch', current: current.version };
    }
    const stored = this.store(key, body, options);
    return { kind: 'written', version: stored.version };
  }

  async pin(key: string, version: string): Promise<ReadPin> {
    validateObjectKey(key);
    const o = this.require(key);
    if (o.version !== version) throw new SourceChangedError(this.name, key, version, o.version);
    return { version };
  }

  async getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array> {
    validateObjectKey(key);
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end < start) {
      throw new RangeError(`[object-store:memory] invalid range [${start}, ${end}) for ${key}`);
    }
    const found = this.objects.get(key);
    if (pin !== undefined && found?.version !== pin.version) throw new SourceChangedError(this.name, key, pin.version, found?.version);
    const o = this.require(key);
    return o.body.slice(Math.min(start, o.body.byteLength), Math.min(end, o.body.byteLength));
  }

  async get(key: string): Promise<Uint8Array> {
    validateObjectKey(key);
    return this.require(key).body.slice();
  }

  async head(key: string): Promise<ObjectHead | undefined> {
    validateObjectKey(key);
    const o = this.objects.get(key);
    return o && this.headOf(key, o);
  }

  private headOf(key: string, o: StoredObject): ObjectHead {
    return { key, size: o.body.byteLength, version: o.version, lastModified: o.lastModified };
  }

  async *list(prefix: string): AsyncIterable<ObjectHead> {
    // Snapshot first: a write during iteration must not change what this listing returns.
    const matches = [...this.objects.entries()].filter(([k]) => k.startsWith(prefix));
    for (const [key, o] of matches) yield { key, size: o.body.byteLength, version: o.version, lastModified: o.lastModified };
  }

  /** The content type given at the last write (S3 and friends keep it; tests may check it). */
  contentType(key: string): string | undefined {
    return this.objects.get(key)?.contentType;
  }

  private store(key: string, body: Uint8Array, options: PutOptions | undefined): StoredObject {
    const stored: StoredObject = {
      body: body.slice(),
      version: `m${++this.sequence}`,
      lastModified: this.now(),
      contentType: options?.contentType,
      sha256Hex: contentDigest(body).sha256Hex,
    };
    this.objects.set(key, stored);
    return stored;
  }

  private require(key: string): StoredObject {
    const o = this.objects.get(key);
    if (!o) throw new ObjectNotFoundError(this.name, key);
    return o;
  }
}
