import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { open, readdir, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsObjectStore } from '../../../functions/local/adapters/fs-object-store.js';
import { ObjectKeyConflictError, SourceChangedError } from '../../../shared/domain/errors.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const fresh = (): FsObjectStore => new FsObjectStore(mkdtempSync(join(tmpdir(), 'tessera-fs-')));

describe('FsObjectStore', () => {
  describe('keys a directory tree cannot hold', () => {
    // Before: both answered `already-present`, so a tile job at such a key was committed with no object behind it.
    it('a directory at the key is an ObjectKeyConflictError, not already-present', async () => {
      const s = fresh();
      await s.putIfAbsent('scene/a/tile.tif', bytes('x'));
      const error = await s.putIfAbsent('scene/a', bytes('y')).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ObjectKeyConflictError);
      expect(error).toMatchObject({ code: 'OBJECT_KEY_CONFLICT', retryable: false, key: 'scene/a' });
      expect((error as Error).message).toMatch(/is a directory/);
      expect(await s.head('scene/a')).toBeUndefined();
      await expect(s.putIfMatch('scene/a', bytes('y'), 'v')).rejects.toBeInstanceOf(ObjectKeyConflictError);
    });

    it('a file where a parent directory should be is an ObjectKeyConflictError', async () => {
      const s = fresh();
      await s.putIfAbsent('scene/a.tif', bytes('x'));
      const error = await s.putIfAbsent('scene/a.tif/b', bytes('y')).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ObjectKeyConflictError);
      expect((error as Error).message).toMatch(/is a file where a parent directory/);
      expect(new TextDecoder().decode(await s.get('scene/a.tif'))).toBe('x');
    });

    it('importFile answers the same conflicts', async () => {
      const s = fresh();
      const file = join(mkdtempSync(join(tmpdir(), 'tessera-fs-src-')), 'scene.tif');
      await writeFile(file, 'scene');
      await s.putIfAbsent('in/a/b.tif', bytes('x'));
      await expect(s.importFile('in/a', file)).rejects.toBeInstanceOf(ObjectKeyConflictError);
      await expect(s.importFile('in/a/b.tif/c', file)).rejects.toBeInstanceOf(ObjectKeyConflictError);
      expect(await s.importFile('in/ok.tif', file)).toMatchObject({ kind: 'written' });
      expect(await s.importFile('in/ok.tif', file)).toMatchObject({ kind: 'already-present', sameBytes: true });
    });
  });

  describe('version tokens and pinned reads', () => {
    it('the version is the SHA-256 of the bytes, the same for the same bytes under any key', async () => {
      const s = fresh();
      const r = await s.putIfAbsent('a.tif', bytes('same'));
      await s.putIfAbsent('b.tif', bytes('same'));
      const sha = createHash('sha256').update('same').digest('hex');
      expect(r).toEqual({ kind: 'written', version: sha });
      expect((await s.head('a.tif'))?.version).toBe(sha);
      expect((await s.head('b.tif'))?.version).toBe(sha);
    });

    it('a rename-replace of the file behind the store (same size) fails a pinned read with SourceChangedError', async () => {
      const s = fresh();
      await s.putIfAbsent('scene.tif', bytes('AAAA-1234'));
      const pin = await s.pin('scene.tif', (await s.head('scene.tif'))?.version as string);
      expect(new TextDecoder().decode(await s.getRange('scene.tif', 0, 4, pin))).toBe('AAAA');
      const other = join(s.root, 'other.part');
      await writeFile(other, 'BBBB-1234');
      await rename(other, s.pathOf('scene.tif'));
      await expect(s.getRange('scene.tif', 0, 4, pin)).rejects.toBeInstanceOf(SourceChangedError);
      expect(new TextDecoder().decode(await s.getRange('scene.tif', 0, 4))).toBe('BBBB');
    });

    it('a write in place (same inode, same size) is seen: the hash cache is keyed by ctime too', async () => {
      const s = fresh();
      await s.putIfAbsent('scene.tif', bytes('AAAA-1234'));
      const pin = await s.pin('scene.tif', (await s.head('scene.tif'))?.version as string);
      await s.getRange('scene.tif', 0, 4, pin); // warms the hash cache
      const fd = await open(s.pathOf('scene.tif'), 'r+');
      await fd.write(Buffer.from('CCCC'), 0, 4, 0);
      await fd.close();
      await expect(s.getRange('scene.tif', 0, 4, pin)).rejects.toBeInstanceOf(SourceChangedError);
      await expect(s.pin('scene.tif', pin.version)).rejects.toBeInstanceOf(SourceChangedError);
    });

    // importFile remembers the hash for the state of the inode after its link (so the first pinned read of a
    // scene reads no bytes again): a write in place after the import must still be seen, not served from it.
    it('an imported file written in place afterwards (same inode, same size) fails a pinned read', async () => {
      const s = fresh();
      const file = join(s.root, 'outside.tif');
      await writeFile(file, 'AAAA-1234');
      const imported = await s.importFile('scene.tif', file);
      expect(imported).toEqual({ kind: 'written', version: createHash('sha256').update('AAAA-1234').digest('hex') });
      const pin = await s.pin('scene.tif', imported.kind === 'written' ? imported.version : '');
      expect(new TextDecoder().decode(await s.getRange('scene.tif', 5, 9, pin))).toBe('1234');
      const fd = await open(s.pathOf('scene.tif'), 'r+');
      await fd.write(Buffer.from('CCCC'), 0, 4, 0);
      await fd.close();
      await expect(s.getRange('scene.tif', 0, 4, pin)).rejects.toBeInstanceOf(SourceChangedError);
    });

    // Issue 25 item 6. The hash cache is keyed on the file's state (inode, size, mtime, ctime); on a filesystem whose
    // timestamps are coarser than the time between two writes, a same-size rewrite in place inside one tick leaves
    // that state as it was (its mtime can even be set back), and the pin of the old version was accepted from the
    // cache. This kernel's timestamps are fine-grained, so the store reads them at 1 s resolution (its test seam),
    // as ext3, HFS+ or many NFS servers record them; the whole case runs inside one second.
    it('a same-size rewrite in place inside one timestamp tick (mtime set back) fails the pin of the old version', async () => {
      const s = new FsObjectStore(mkdtempSync(join(tmpdir(), 'tessera-fs-tick-')), { timestampResolutionNs: 1_000_000_000n });
      // Start just after a second begins, so every write and read below falls inside that second.
      await new Promise((r) => setTimeout(r, 1_000 - (Date.now() % 1_000) + 5));
      const started = Date.now();
      const put = await s.putIfAbsent('scene.tif', bytes('AAAA-1234'));
      const version = put.kind === 'written' ? put.version : '';
      const pin = await s.pin('scene.tif', version);
      expect(new TextDecoder().decode(await s.getRange('scene.tif', 0, 4, pin))).toBe('AAAA');
      const path = s.pathOf('scene.tif');
      const before = await stat(path);
      const fd = await open(path, 'r+');
      await fd.write(Buffer.from('CCCC'), 0, 4, 0);
      await fd.close();
      await utimes(path, before.atime, before.mtime);
      // (Still the same second: else the rewrite's ctime alone would tell the states apart and prove nothing.)
      expect(Date.now() - started).toBeLessThan(900);
      await expect(s.pin('scene.tif', version)).rejects.toBeInstanceOf(SourceChangedError);
      await expect(s.getRange('scene.tif', 0, 4, pin)).rejects.toBeInstanceOf(SourceChangedError);
      expect((await s.head('scene.tif'))?.version).toBe(createHash('sha256').update('CCCC-1234').digest('hex'));
    });

    it('a pinned read past the end of the object returns the bytes up to its end', async () => {
      const s = fresh();
      const put = await s.putIfAbsent('scene.tif', bytes('AAAA-1234'));
      const pin = await s.pin('scene.tif', put.kind === 'written' ? put.version : '');
      expect(new TextDecoder().decode(await s.getRange('scene.tif', 5, 1_000, pin))).toBe('1234');
      expect((await s.getRange('scene.tif', 20, 30, pin)).byteLength).toBe(0);
    });

    // A parent process hands its settled hashes to the worker processes it starts (functions/local/worker-process.ts):
    // a worker's first pinned read of a scene then reads no bytes to hash it. Two stores on one root stand for the two
    // processes (each has its own cache, as each process has).
    describe('settled hashes handed to another process', () => {
      const settle = async (s: FsObjectStore, key: string, body: string) => {
        const put = await s.putIfAbsent(key, bytes(body));
        const version = put.kind === 'written' ? put.version : '';
        await new Promise((r) => setTimeout(r, 20)); // past the tick of the write: the pin's hash settles
        await s.pin(key, version);
        return version;
      };

      it('answer the pin of the same file state without reading it', async () => {
        const parent = fresh();
        const version = await settle(parent, 'scene.tif', 'AAAA-1234');
        const handed = parent.settledHashes();
        expect(handed).toHaveLength(1);
        expect(handed[0]?.version).toBe(version);
        const child = new FsObjectStore(parent.root);
        child.adoptSettledHashes(handed);
        const pin = await child.pin('scene.tif', version);
        expect(new TextDecoder().decode(await child.getRange('scene.tif', 0, 4, pin))).toBe('AAAA');
        expect(child.hashedBytes).toBe(0);
        // Without them a fresh process hashes the whole file once.
        const alone = new FsObjectStore(parent.root);
        await alone.pin('scene.tif', version);
        expect(alone.hashedBytes).toBe(9);
      });

      it('do not answer for a file written in place since (same size, mtime set back): hashed again, the pin refused', async () => {
        const parent = fresh();
        const version = await settle(parent, 'scene.tif', 'AAAA-1234');
        const handed = parent.settledHashes();
        const path = parent.pathOf('scene.tif');
        const before = await stat(path);
        const fd = await open(path, 'r+');
        await fd.write(Buffer.from('CCCC'), 0, 4, 0);
        await fd.close();
        await utimes(path, before.atime, before.mtime);
        const child = new FsObjectStore(parent.root);
        child.adoptSettledHashes(handed);
        await expect(child.pin('scene.tif', version)).rejects.toBeInstanceOf(SourceChangedError);
        expect(child.hashedBytes).toBe(9);
      });

      it('hand on only settled hashes, and refuse a malformed one whole', async () => {
        const s = fresh();
        await s.putIfAbsent('fresh.tif', bytes('just written')); // remembered for heads, unsettled
        expect(s.settledHashes()).toEqual([]);
        const good = { state: '1:2:3:4:5', version: 'a'.repeat(64) };
        for (const bad of [{ state: '1:2:3', version: 'a'.repeat(64) }, { state: '1:2:3:4:5', version: 'xyz' }, null]) {
          expect(() => s.adoptSettledHashes([good, bad as never])).toThrow(/handed-on hash/);
        }
        expect(s.settledHashes()).toEqual([]); // nothing of a refused list was taken
        s.adoptSettledHashes([good]);
        expect(s.settledHashes()).toEqual([good]);
      });
    });
  });

  describe('directories made on demand', () => {
    // The write path makes the temporary directory and the key's parent only when a create or a link
    // says they are missing: removed between two writes, they are made again.
    it('a removed temporary directory or key directory is made again by the next write', async () => {
      const s = fresh();
      expect((await s.putIfAbsent('tiles/a/1.tif', bytes('one'))).kind).toBe('written');
      await rm(join(s.root, 'tmp'), { recursive: true, force: true });
      await rm(join(s.root, 'objects', 'tiles', 'a'), { recursive: true, force: true });
      expect((await s.putIfAbsent('tiles/a/2.tif', bytes('two'))).kind).toBe('written');
      expect((await s.putIfAbsent('tiles/b/c/3.tif', bytes('three'))).kind).toBe('written');
      expect(new TextDecoder().decode(await s.get('tiles/a/2.tif'))).toBe('two');
      expect(new TextDecoder().decode(await s.get('tiles/b/c/3.tif'))).toBe('three');
      // A second write of the same key is still create-only, its temporary file gone either way.
      expect(await s.putIfAbsent('tiles/a/2.tif', bytes('other'))).toMatchObject({ kind: 'already-present', sameBytes: false });
      expect(await readdir(join(s.root, 'tmp'))).toEqual([]);
    });
  });
});
