import { createHash, randomBytes } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import {
  copyFile,
  type FileHandle,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  unlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AdapterError, ObjectKeyConflictError, ObjectNotFoundError, SourceChangedError } from '../../../shared/domain/errors.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import type {
  DeleteIfVersionResult,
  ObjectHead,
  ObjectStore,
  PutIfAbsentResult,
  PutIfMatchResult,
  ReadPin,
} from '../../../shared/ports/object-store.port.js';

const isCode = (e: unknown, ...codes: string[]): boolean => codes.includes((e as { code?: string }).code ?? '');

/**
 * What identifies one state of a file's bytes without reading them: a write in
 * place changes mtime and ctime (ctime cannot be set back), a rename-replace
 * gives a new inode. The key of the hash cache. Only as fine as the
 * filesystem's timestamps: two writes inside one timestamp tick can leave the
 * same state (see {@link FsObjectStore}, "settled").
 */
const statIdAt = (s: BigIntStats, tickNs: bigint): string =>
  `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs - (s.mtimeNs % tickNs)}:${s.ctimeNs - (s.ctimeNs % tickNs)}`;

/**
 * A remembered hash. `settled`: the file's state (its ctime) was older than the filesystem's own clock when
 * its bytes were read for this hash, so every later change of the file carries a later ctime and another
 * state: the hash may answer a pin. Unsettled ones (hashed within the tick of the file's last change, or
 * remembered for a write of this store) answer heads and listings only.
 */
interface Remembered {
  readonly version: string;
  readonly settled: boolean;
}

/**
 * A settled hash as one process hands it to another on the same filesystem ({@link FsObjectStore.settledHashes},
 * {@link FsObjectStore.adoptSettledHashes}): the file state (device, inode, size, mtime, ctime) and the SHA-256 of
 * the bytes it had. A state names one content for good once settled, whoever hashed it: any later change of the
 * file carries a later ctime, or a new inode.
 */
export interface SettledHash {
  readonly state: string;
  readonly version: string;
}

const STATE = /^\d+:\d+:\d+:\d+:\d+$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

export interface FsObjectStoreOptions {
  /**
   * Seam for tests: read file timestamps as a filesystem with this resolution records them (1 s: ext3,
   * HFS+, many NFS servers; FAT has 2 s), so a test on a kernel with fine-grained timestamps can play two
   * writes inside one timestamp tick. Default 1 ns: the timestamps as the filesystem gives them.
   */
  readonly timestampResolutionNs?: bigint | undefined;
}

/** The version token of bytes about to be written: their SHA-256 (hex), the only hash this store keeps. */
const sha256Hex = (body: Uint8Array): string => createHash('sha256').update(body).digest('hex');

/** Hashes remembered per file state; past this many the cache starts again (a bound, not an LRU). */
const HASH_CACHE_LIMIT = 50_000;
const HASH_CHUNK = 1 << 20;

/**
 * Objects as files under `<root>/objects/`, the local backend's default.
 *
 * - Create-only writes go to a temporary file first and are published with
 *   `link(2)`, which fails with EEXIST if the name exists: atomic across
 *   threads and processes, and a reader never sees a half-written file.
 * - Repair writes (`putIfMatch`) take a per-key lock file, compare the
 *   version, and publish with `rename(2)` (atomic replace).
 * - The version token is the SHA-256 of the bytes (hex), the same for the same
 *   content on any machine. It is computed through one open descriptor and
 *   remembered per file state (inode, size, mtime, ctime), so a key is hashed
 *   once per process until it changes.
 * - A remembered hash answers a pin only once it is **settled**: the file's ctime was
 *   older than the filesystem's clock (the ctime of a probe file this store touches
 *   under `tmp/`) when the bytes were read. Timestamps are only as fine as the
 *   filesystem keeps them (1 s on ext3, HFS+ and many NFS servers, a kernel tick
 *   where timestamps are coarse), so a same-size rewrite in place inside the tick of
 *   the hashed state, with its mtime set back, left the very state the cache knew and
 *   the pin of the old version was accepted. A state hashed inside its own tick is
 *   hashed again by every pin until a read happens after that tick; then any later
 *   write carries a later ctime. Heads and listings take unsettled hashes too (so a
 *   listing of this store's own writes reads nothing): they pin nothing.
 * - A pinned read (`getRange` with a pin) hashes and reads through the SAME
 *   descriptor: a rename-replace of the path cannot slip other bytes in between
 *   the check and the read, and a write in place is caught by a second fstat.
 * - A key the filesystem cannot hold (a directory at the key, a file where a
 *   parent should be) is an ObjectKeyConflictError, never `already-present`.
 *
 * @example
 * const outputs = new FsObjectStore('.tessera/outputs');
 */
export class FsObjectStore implements ObjectStore {
  readonly name = 'fs';
  readonly root: string;
  readonly #objects: string;
  readonly #tmp: string;
  readonly #locks: string;
  readonly #hashes = new Map<string, Remembered>();
  readonly #tickNs: bigint;
  #hashedBytes = 0;

  uriOf(key: string): string {
    return pathToFileURL(this.pathOf(key)).href;
  }

  constructor(root: string, options: FsObjectStoreOptions = {}) {
    this.#tickNs = options.timestampResolutionNs ?? 1n;
    this.root = resolve(root);
    this.#objects = join(this.root, 'objects');
    this.#tmp = join(this.root, 'tmp');
    this.#locks = join(this.root, 'locks');
  }

  /** The file behind a key (for GDAL and humans). */
  pathOf(key: string): string {
    validateObjectKey(key);
    const path = resolve(this.#objects, ...key.split('/'));
    if (!path.startsWith(this.#objects + sep)) throw new AdapterError(`[object-store:fs] key ${key} resolves outside the store`);
    return path;
  }

  /**
   * One tile's write is a handful of filesystem calls, each a trip to libuv's
   * pool: create and write the temporary file through one descriptor (kept open,
   * so its fstat after publishing is our inode's, whatever happens to the path),
   * `link(2)`, unlink the temporary name. The key's directory is made only when
   * the link says it is missing (ENOENT), not before every write.
   */
  async putIfAbsent(key: string, body: Uint8Array): Promise<PutIfAbsentResult> {
    const path = this.pathOf(key);
    const version = sha256Hex(body);
    const { tmp, own } = await this.#writeTemp(body);
    let linked = false;
    try {
      await this.#publish(key, tmp, path);
      linked = true;
      await unlink(tmp).catch(() => {});
      await this.#remember(own, version);
      return { kind: 'written', version };
    } catch (error) {
      if (isCode(error, 'EEXIST')) return await this.#occupied(key, path, body.byteLength, version);
      if (isCode(error, 'ENOTDIR')) throw new ObjectKeyConflictError(this.name, key, 'file-at-parent', dirname(path), { cause: error });
      if (error instanceof ObjectKeyConflictError) throw error;
      throw this.#fail(`create ${key}`, error);
    } finally {
      await own.close();
      if (!linked) await unlink(tmp).catch(() => {});
    }
  }

  /**
   * `link(2)` of a temporary file to the key's path: fails with EEXIST when the
   * key is taken. A missing parent directory (ENOENT) is made, then the link is
   * tried once more.
   */
  async #publish(key: string, tmp: string, path: string): Promise<void> {
    try {
      await link(tmp, path);
    } catch (error) {
      if (!isCode(error, 'ENOENT')) throw error;
      await this.#mkdirFor(key, path);
      await link(tmp, path);
    }
  }

  /** The key is taken: by a file (compare its bytes with ours) or by a directory (a key the filesystem cannot hold). */
  async #occupied(key: string, path: string, size: number, version: string): Promise<PutIfAbsentResult> {
    const s = await lstat(path).catch(() => undefined);
    if (s?.isDirectory()) throw new ObjectKeyConflictError(this.name, key, 'directory-at-key', path);
    const current = await this.head(key);
    return { kind: 'already-present', sameBytes: current !== undefined && current.size === size && current.version === version, current };
  }

  /** mkdir -p of the key's parent; a file in the way is a key conflict, not a disk failure. */
  async #mkdirFor(key: string, path: string): Promise<void> {
    try {
      await mkdir(dirname(path), { recursive: true });
    } catch (error) {
      if (isCode(error, 'ENOTDIR', 'EEXIST'))
        throw new ObjectKeyConflictError(this.name, key, 'file-at-parent', dirname(path), { cause: error });
      throw error;
    }
  }

  /**
   * Create-only import of a local file (a scene) without reading it into
   * memory: hard-linked when on the same filesystem, else copied to a
   * temporary file first. Same `link(2)` publication as putIfAbsent.
   */
  async importFile(key: string, file: string): Promise<PutIfAbsentResult> {
    const path = this.pathOf(key);
    await mkdir(this.#tmp, { recursive: true });
    const tmp = join(this.#tmp, `${randomBytes(12).toString('hex')}.part`);
    try {
      await link(file, tmp).catch(async (error) => {
        if (!isCode(error, 'EXDEV', 'EPERM')) throw error;
        await copyFile(file, tmp);
      });
      // Hashed through a descriptor kept open across the link: linking changes the inode's ctime, and the
      // hash is remembered for the state after it, so the first pinned read of the scene reads no bytes again.
      const own = await open(tmp, 'r');
      try {
        const imported = await this.#hashOpen(own);
        if (!imported) throw new AdapterError(`[object-store:fs] cannot import ${file}: not a regular file`);
        await this.#publish(key, tmp, path);
        await this.#remember(own, imported.version);
        return { kind: 'written', version: imported.version };
      } finally {
        await own.close();
      }
    } catch (error) {
      if (isCode(error, 'EEXIST')) {
        const imported = await this.#hashPath(tmp);
        return await this.#occupied(key, path, imported.size, imported.version);
      }
      if (isCode(error, 'ENOTDIR')) throw new ObjectKeyConflictError(this.name, key, 'file-at-parent', dirname(path), { cause: error });
      if (error instanceof ObjectKeyConflictError) throw error;
      if (isCode(error, 'ENOENT')) throw new AdapterError(`[object-store:fs] cannot import ${file}: no such file`, { cause: error });
      throw this.#fail(`import ${file} as ${key}`, error);
    } finally {
      await unlink(tmp).catch(() => {});
    }
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string): Promise<PutIfMatchResult> {
    const ours = sha256Hex(body);
    return this.#compareUnderLock(key, async (current, path): Promise<PutIfMatchResult> => {
      if (!current) return { kind: 'absent' };
      if (current.version !== expectedVersion) {
        // Its own bytes already in place (an earlier attempt landed, its answer was lost): written.
        return current.version === ours ? { kind: 'written', version: ours } : { kind: 'version-mismatch', current: current.version };
      }
      const { tmp, own } = await this.#writeTemp(body);
      try {
        await rename(tmp, path);
        await this.#remember(own, ours);
      } catch (error) {
        await unlink(tmp).catch(() => {});
        throw this.#fail(`replace ${key}`, error);
      } finally {
        await own.close();
      }
      return { kind: 'written', version: ours };
    });
  }

  /**
   * Compare-and-unlink under the key's lock: a repair (`putIfMatch`) cannot
   * replace the file between the comparison and the unlink, and a create-only
   * write cannot land on a key that is still taken.
   */
  async deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult> {
    return this.#compareUnderLock(key, async (current, path): Promise<DeleteIfVersionResult> => {
      if (!current) return { kind: 'absent' };
      if (current.version !== version) return { kind: 'version-mismatch', current: current.version };
      try {
        await unlink(path);
      } catch (error) {
        if (isCode(error, 'ENOENT', 'ENOTDIR')) return { kind: 'absent' };
        throw this.#fail(`delete ${key}`, error);
      }
      return { kind: 'deleted' };
    });
  }

  /**
   * The compare half of a conditional write or delete: `fn` runs under the key's lock with the
   * object's current head (undefined when absent), so nothing can replace or create it between the
   * comparison and the change. A directory at the key is a conflict, never "absent".
   */
  async #compareUnderLock<T>(key: string, fn: (current: ObjectHead | undefined, path: string) => Promise<T>): Promise<T> {
    const path = this.pathOf(key);
    const release = await this.#lock(key);
    try {
      const s = await this.#stat(path);
      if (s?.isDirectory()) throw new ObjectKeyConflictError(this.name, key, 'directory-at-key', path);
      return await fn(await this.head(key), path);
    } finally {
      await release();
    }
  }

  async pin(key: string, version: string): Promise<ReadPin> {
    const handle = await this.#open(key);
    if (!handle) throw new ObjectNotFoundError(this.name, key);
    try {
      const current = await this.#hashOpen(handle, 'pin');
      if (current?.version !== version) throw new SourceChangedError(this.name, key, version, current?.version);
      return { version };
    } finally {
      await handle.close();
    }
  }

  async getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array> {
    const handle = await this.#open(key);
    if (!handle) {
      if (pin) throw new SourceChangedError(this.name, key, pin.version, undefined);
      throw new ObjectNotFoundError(this.name, key);
    }
    try {
      let before: BigIntStats | undefined;
      if (pin) {
        // Check and read on this one descriptor: a rename-replace of the path cannot come in between.
        const current = await this.#hashOpen(handle, 'pin');
        if (current?.version !== pin.version) throw new SourceChangedError(this.name, key, pin.version, current?.version);
        before = current.stats;
      }
      // A pinned read has the descriptor's stats already (the hash check's fstat): one fstat fewer per read.
      const size = Number((before ?? (await handle.stat({ bigint: true }))).size);
      const to = Math.min(end, size);
      const length = Math.max(0, to - start);
      const buffer = Buffer.allocUnsafe(length);
      let read = 0;
      while (read < length) {
        const { bytesRead } = await handle.read(buffer, read, length - read, start + read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      if (before) {
        // A write in place while we read (not through this store) shows in the descriptor's stats.
        const after = await handle.stat({ bigint: true });
        if (this.#statId(after) !== this.#statId(before)) throw new SourceChangedError(this.name, key, pin?.version ?? '', undefined);
      }
      return new Uint8Array(buffer.buffer, buffer.byteOffset, read);
    } finally {
      await handle.close();
    }
  }

  async get(key: string): Promise<Uint8Array> {
    try {
      return new Uint8Array(await readFile(this.pathOf(key)));
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) throw new ObjectNotFoundError(this.name, key, { cause: error });
      throw this.#fail(`read ${key}`, error);
    }
  }

  async head(key: string): Promise<ObjectHead | undefined> {
    const handle = await this.#open(key);
    if (!handle) return undefined;
    try {
      const h = await this.#hashOpen(handle);
      if (!h) return undefined;
      return { key, size: Number(h.stats.size), version: h.version, lastModified: Math.floor(Number(h.stats.mtimeMs)) };
    } finally {
      await handle.close();
    }
  }

  /** The file behind a key opened for reading, or undefined when there is none (a directory is no object). */
  async #open(key: string): Promise<FileHandle | undefined> {
    const path = this.pathOf(key);
    try {
      return await open(path, 'r');
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) return undefined;
      throw this.#fail(`read ${key}`, error);
    }
  }

  /**
   * The content hash of an open file, from the cache when its state (fstat of
   * this descriptor) is one already hashed, and, for a pin, settled. Undefined
   * when it is not a regular file. A file written in place while it was hashed
   * is hashed again.
   */
  async #hashOpen(handle: FileHandle, use: 'pin' | 'head' = 'head'): Promise<{ version: string; stats: BigIntStats } | undefined> {
    for (let attempt = 0; ; attempt++) {
      const stats = await handle.stat({ bigint: true });
      if (!stats.isFile()) return undefined;
      const id = this.#statId(stats);
      const cached = this.#hashes.get(id);
      if (cached !== undefined && (cached.settled || use === 'head')) return { version: cached.version, stats };
      // The filesystem's time before the bytes are read: a state older than it cannot come back with other bytes.
      const clock = use === 'pin' ? await this.#filesystemNow() : undefined;
      const hash = createHash('sha256');
      const buffer = Buffer.allocUnsafe(HASH_CHUNK);
      for (let position = 0; ; ) {
        const { bytesRead } = await handle.read(buffer, 0, HASH_CHUNK, position);
        if (bytesRead === 0) break;
        hash.update(buffer.subarray(0, bytesRead));
        position += bytesRead;
        this.#hashedBytes += bytesRead;
      }
      const after = await handle.stat({ bigint: true });
      if (this.#statId(after) === id) {
        const version = hash.digest('hex');
        const settled = clock !== undefined && this.#tick(stats.ctimeNs) < clock;
        if (this.#hashes.size >= HASH_CACHE_LIMIT) this.#hashes.clear();
        this.#hashes.set(id, { version, settled });
        return { version, stats };
      }
      if (attempt >= 2)
        throw new AdapterError('[object-store:fs] a file kept changing while it was hashed; retry once nothing writes to it', {
          retryable: true,
        });
    }
  }

  /** Bytes this store has read to hash them, since it was made (what a warm cache saves shows here). */
  get hashedBytes(): number {
    return this.#hashedBytes;
  }

  /**
   * The settled hashes this store holds, the most recent last (at most `limit`): what a parent process hands the
   * worker processes it starts on the same data directory (functions/local/worker-process.ts), so that each does
   * not read a whole scene again to hash it for its first pinned read (a 10 GB scene is 10 GB of SHA-256 per
   * worker). Unsettled hashes are never handed on.
   */
  settledHashes(limit = 64): SettledHash[] {
    const out: SettledHash[] = [];
    for (const [state, r] of this.#hashes) if (r.settled) out.push({ state, version: r.version });
    return out.slice(-limit);
  }

  /**
   * {@link pin} `key` at `version`, and make its hash a settled one: when the file last changed within the
   * filesystem's current timestamp tick (a scene staged a moment ago), wait for the tick to pass and pin again (one
   * more hash of the file). Then {@link settledHashes} holds it. False when `maxWaitMs` went by first (a file that
   * keeps changing); a SourceChangedError when it is no longer that version.
   */
  async settle(key: string, version: string, maxWaitMs = 5_000): Promise<boolean> {
    const until = performance.now() + maxWaitMs;
    for (;;) {
      await this.pin(key, version);
      const state = this.#statId(await stat(this.pathOf(key), { bigint: true }));
      if (this.#hashes.get(state)?.settled === true) return true;
      if (performance.now() > until) return false;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }

  /**
   * Take settled hashes another process of this filesystem computed ({@link settledHashes}). They answer a pin
   * only for a file whose state (fstat through the pin's own descriptor) is exactly the one hashed: a file changed
   * since has another state, and is hashed again. A malformed entry is refused (a typed error), never half-used.
   */
  adoptSettledHashes(entries: readonly SettledHash[]): void {
    for (const e of entries) {
      if (typeof e?.state !== 'string' || !STATE.test(e.state) || typeof e.version !== 'string' || !SHA256_HEX.test(e.version)) {
        throw new AdapterError(
          `[object-store:fs] a handed-on hash must be a file state (dev:ino:size:mtime:ctime) and a SHA-256 in hex, got ${JSON.stringify(e).slice(0, 200)}`,
        );
      }
    }
    for (const e of entries) {
      if (this.#hashes.size >= HASH_CACHE_LIMIT) this.#hashes.clear();
      this.#hashes.set(e.state, { version: e.version, settled: true });
    }
  }

  /**
   * Remember the hash of bytes this store just published (it hashed them before writing), for the
   * final state of their inode read through a descriptor opened before the publication: the next
   * head() or list() of our own write (a mosaic assembly over thousands of tiles) reads no bytes.
   * Linking and renaming change ctime, so the state is taken after them. Unsettled: the state is
   * as young as the filesystem's clock, so a pin hashes the file once more (and settles it).
   */
  async #remember(own: FileHandle, version: string): Promise<void> {
    const stats = await own.stat({ bigint: true });
    if (this.#hashes.size >= HASH_CACHE_LIMIT) this.#hashes.clear();
    this.#hashes.set(this.#statId(stats), { version, settled: false });
  }

  /**
   * The filesystem's own clock: the ctime its kernel gives a probe file this store touches under `tmp/`
   * (utimes sets ctime to the time of the change, at the filesystem's resolution), so it compares with file
   * ctimes exactly, whatever the resolution and whatever the process's wall clock says.
   */
  async #filesystemNow(): Promise<bigint> {
    const probe = join(this.#tmp, 'clock');
    for (let attempt = 0; ; attempt++) {
      try {
        await utimes(probe, 0, 0);
        return this.#tick((await stat(probe, { bigint: true })).ctimeNs);
      } catch (error) {
        if (!isCode(error, 'ENOENT') || attempt > 0) throw this.#fail('read the filesystem clock', error);
        await mkdir(this.#tmp, { recursive: true });
        await writeFile(probe, '', { flag: 'a' });
      }
    }
  }

  /** A timestamp at the resolution the store reads timestamps with. */
  #tick(ns: bigint): bigint {
    return ns - (ns % this.#tickNs);
  }

  /** Size and content hash of any file (a temporary one during an import). */
  async #hashPath(path: string): Promise<{ size: number; version: string }> {
    const handle = await open(path, 'r');
    try {
      const h = await this.#hashOpen(handle);
      if (!h) throw new AdapterError(`[object-store:fs] ${path} is not a regular file`);
      return { size: Number(h.stats.size), version: h.version };
    } finally {
      await handle.close();
    }
  }

  async *list(prefix: string): AsyncIterable<ObjectHead> {
    // Walk from the deepest directory the prefix names, then filter by the full prefix.
    const slash = prefix.lastIndexOf('/');
    const dirKey = slash < 0 ? '' : prefix.slice(0, slash);
    const start = dirKey === '' ? this.#objects : join(this.#objects, ...dirKey.split('/'));
    const stack = [start];
    while (stack.length > 0) {
      const dir = stack.pop() as string;
      let entries: import('node:fs').Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (error) {
        if (isCode(error, 'ENOENT', 'ENOTDIR')) continue;
        throw this.#fail(`list ${prefix}`, error);
      }
      for (const entry of entries) {
        const full = join(dir, entry.name);
        if (entry.isDirectory()) stack.push(full);
        else if (entry.isFile()) {
          const key = relative(this.#objects, full).split(sep).join('/');
          if (!key.startsWith(prefix)) continue;
          const head = await this.head(key);
          if (head) yield head;
        }
      }
    }
  }

  /**
   * A new temporary file holding `body`, and its descriptor, still open (the
   * caller closes it). Exclusive create (`wx`); the temporary directory is made
   * when the create says it is missing, not before every write.
   */
  async #writeTemp(body: Uint8Array): Promise<{ tmp: string; own: FileHandle }> {
    const tmp = join(this.#tmp, `${randomBytes(12).toString('hex')}.part`);
    let own: FileHandle;
    try {
      own = await open(tmp, 'wx');
    } catch (error) {
      if (!isCode(error, 'ENOENT')) throw error;
      await mkdir(this.#tmp, { recursive: true });
      own = await open(tmp, 'wx');
    }
    try {
      await own.writeFile(body);
      return { tmp, own };
    } catch (error) {
      await own.close();
      await unlink(tmp).catch(() => {});
      throw error;
    }
  }

  async #stat(path: string) {
    try {
      return await stat(path, { bigint: true });
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) return undefined;
      throw this.#fail(`stat ${path}`, error);
    }
  }

  /** A lock file per key (O_EXCL create). A lock older than 60 s belongs to a dead process and is broken. */
  async #lock(key: string): Promise<() => Promise<void>> {
    await mkdir(this.#locks, { recursive: true });
    const file = join(this.#locks, `${createHash('sha256').update(key).digest('hex')}.lock`);
    const deadline = Date.now() + 30_000;
    for (let attempt = 0; ; attempt++) {
      try {
        await writeFile(file, String(process.pid), { flag: 'wx' });
        return () => rm(file, { force: true });
      } catch (error) {
        if (!isCode(error, 'EEXIST')) throw this.#fail(`lock ${key}`, error);
        const s = await stat(file).catch(() => undefined);
        if (s && Date.now() - s.mtimeMs > 60_000) await rm(file, { force: true });
        if (Date.now() > deadline)
          throw new AdapterError(`[object-store:fs] ${key} stayed locked for 30 s; remove ${file} if no tessera process is running`, {
            retryable: true,
          });
        await new Promise((r) => setTimeout(r, Math.min(50, 2 + attempt * 2) * (0.5 + Math.random())));
      }
    }
  }

  /** What identifies one state of a file without reading it (the hash cache's key), at the timestamps' resolution. */
  #statId(s: BigIntStats): string {
    return statIdAt(s, this.#tickNs);
  }

  #fail(what: string, cause: unknown): AdapterError {
    const code = (cause as { code?: string }).code;
    return new AdapterError(
      `[object-store:fs] cannot ${what} under ${this.root}${code ? ` (${code})` : ''}; check the path and free disk space`,
      {
        cause,
        retryable: code === 'EMFILE' || code === 'EAGAIN' || code === 'EBUSY',
      },
    );
  }
}
