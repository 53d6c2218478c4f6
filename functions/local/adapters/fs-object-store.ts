import { createHash, randomBytes } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import { copyFile, link, mkdir, open, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { AdapterError, ObjectNotFoundError } from '../../../shared/domain/errors.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import type { ObjectHead, ObjectStore, PutIfAbsentResult, PutIfMatchResult } from '../../../shared/ports/object-store.port.js';

const isCode = (e: unknown, ...codes: string[]): boolean => codes.includes((e as { code?: string }).code ?? '');

/** The version of a file: its inode and nanosecond mtime. A rename-replace gives a new inode. */
const versionOf = (s: BigIntStats): string => `${s.ino.toString(16)}.${s.mtimeNs.toString(16)}`;

/**
 * Objects as files under `<root>/objects/`, the local backend's default.
 *
 * - Create-only writes go to a temporary file first and are published with
 *   `link(2)`, which fails with EEXIST if the name exists: atomic across
 *   threads and processes, and a reader never sees a half-written file.
 * - Repair writes (`putIfMatch`) take a per-key lock file, compare the
 *   version, and publish with `rename(2)` (atomic replace).
 * - The version token is inode + mtime in nanoseconds.
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

  constructor(root: string) {
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

  async putIfAbsent(key: string, body: Uint8Array): Promise<PutIfAbsentResult> {
    const path = this.pathOf(key);
    const tmp = await this.#writeTemp(body);
    try {
      await mkdir(dirname(path), { recursive: true });
      await link(tmp, path);
      return { kind: 'written', version: versionOf(await stat(path, { bigint: true })) };
    } catch (error) {
      if (isCode(error, 'EEXIST')) return { kind: 'already-present' };
      throw this.#fail(`create ${key}`, error);
    } finally {
      await unlink(tmp).catch(() => {});
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
      await mkdir(dirname(path), { recursive: true });
      await link(tmp, path);
      return { kind: 'written', version: versionOf(await stat(path, { bigint: true })) };
    } catch (error) {
      if (isCode(error, 'EEXIST')) return { kind: 'already-present' };
      if (isCode(error, 'ENOENT')) throw new AdapterError(`[object-store:fs] cannot import ${file}: no such file`, { cause: error });
      throw this.#fail(`import ${file} as ${key}`, error);
    } finally {
      await unlink(tmp).catch(() => {});
    }
  }

  async putIfMatch(key: string, body: Uint8Array, expectedVersion: string): Promise<PutIfMatchResult> {
    const path = this.pathOf(key);
    const release = await this.#lock(key);
    try {
      const current = await this.#stat(path);
      if (!current) return { kind: 'absent' };
      const version = versionOf(current);
      if (version !== expectedVersion) return { kind: 'version-mismatch', current: version };
      const tmp = await this.#writeTemp(body);
      try {
        await rename(tmp, path);
      } catch (error) {
        await unlink(tmp).catch(() => {});
        throw this.#fail(`replace ${key}`, error);
      }
      return { kind: 'written', version: versionOf(await stat(path, { bigint: true })) };
    } finally {
      await release();
    }
  }

  async getRange(key: string, start: number, end: number): Promise<Uint8Array> {
    const path = this.pathOf(key);
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      if (isCode(error, 'ENOENT', 'ENOTDIR')) throw new ObjectNotFoundError(this.name, key, { cause: error });
      throw this.#fail(`read ${key}`, error);
    }
    try {
      const size = (await handle.stat()).size;
      const to = Math.min(end, size);
      const length = Math.max(0, to - start);
      const buffer = Buffer.allocUnsafe(length);
      let read = 0;
      while (read < length) {
        const { bytesRead } = await handle.read(buffer, read, length - read, start + read);
        if (bytesRead === 0) break;
        read += bytesRead;
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
    const s = await this.#stat(this.pathOf(key));
    if (!s?.isFile()) return undefined;
    return { key, size: Number(s.size), version: versionOf(s), lastModified: Math.floor(Number(s.mtimeMs)) };
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

  async #writeTemp(body: Uint8Array): Promise<string> {
    await mkdir(this.#tmp, { recursive: true });
    const tmp = join(this.#tmp, `${randomBytes(12).toString('hex')}.part`);
    await writeFile(tmp, body, { flag: 'wx' });
    return tmp;
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
