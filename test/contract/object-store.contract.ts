import { describe, expect, it } from 'vitest';
import { InvalidObjectKeyError, ObjectNotFoundError } from '../../shared/domain/errors.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { freshPrefix } from '../support/ids.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

export interface ObjectStoreContractOptions {
  readonly concurrency?: number;
}

/** The one contract every ObjectStore passes, local and against each emulator. */
export function describeObjectStoreContract(
  name: string,
  factory: () => ObjectStore | Promise<ObjectStore>,
  options: ObjectStoreContractOptions = {},
): void {
  const n = Math.max(16, options.concurrency ?? 16);

  describe(`${name} (ObjectStore contract)`, () => {
    let store: ObjectStore;
    const get = async () => {
      store ??= await factory();
      return store;
    };

    describe('putIfAbsent', () => {
      it('writes a new object and head reports its size and version', async () => {
        const s = await get();
        const key = `${freshPrefix()}a.tif`;
        const r = await s.putIfAbsent(key, bytes('hello'));
        expect(r.kind).toBe('written');
        const head = await s.head(key);
        expect(head).toMatchObject({ key, size: 5 });
        if (r.kind === 'written') expect(head?.version).toBe(r.version);
        expect(text(await s.get(key))).toBe('hello');
      });

      it('answers already-present to a second write and leaves bytes, version and mtime alone', async () => {
        const s = await get();
        const key = `${freshPrefix()}b.tif`;
        await s.putIfAbsent(key, bytes('first'));
        const before = await s.head(key);
        await new Promise((r) => setTimeout(r, 1100)); // a rewrite would show a new mtime
        expect(await s.putIfAbsent(key, bytes('second!'))).toEqual({ kind: 'already-present' });
        const after = await s.head(key);
        expect(after?.version).toBe(before?.version);
        expect(after?.lastModified).toBe(before?.lastModified);
        expect(text(await s.get(key))).toBe('first');
      });

      it(`${n} concurrent writers of one key: exactly one written, its bytes kept whole`, async () => {
        const s = await get();
        const key = `${freshPrefix()}race.tif`;
        const bodies = Array.from({ length: n }, (_, i) => bytes(`writer-${i}-`.repeat(1000 + i)));
        const results = await Promise.all(bodies.map((b) => s.putIfAbsent(key, b)));
        const winners = results.flatMap((r, i) => (r.kind === 'written' ? [i] : []));
        expect(winners).toHaveLength(1);
        expect(results.filter((r) => r.kind === 'already-present')).toHaveLength(n - 1);
        const winner = winners[0] as number;
        expect(text(await s.get(key))).toBe(text(bodies[winner] as Uint8Array));
      });

      it('accepts an empty body', async () => {
        const s = await get();
        const key = `${freshPrefix()}empty`;
        expect((await s.putIfAbsent(key, new Uint8Array())).kind).toBe('written');
        expect((await s.head(key))?.size).toBe(0);
      });
    });

    describe('putIfMatch', () => {
      it('replaces the object under the right version and returns a new version', async () => {
        const s = await get();
        const key = `${freshPrefix()}repair.tif`;
        const first = await s.putIfAbsent(key, bytes('bad'));
        if (first.kind !== 'written') throw new Error('setup failed');
        const r = await s.putIfMatch(key, bytes('good'), first.version);
        expect(r.kind).toBe('written');
        if (r.kind === 'written') expect(r.version).not.toBe(first.version);
        expect(text(await s.get(key))).toBe('good');
      });

      it('refuses a stale version and leaves the object alone', async () => {
        const s = await get();
        const key = `${freshPrefix()}stale.tif`;
        const first = await s.putIfAbsent(key, bytes('v1'));
        if (first.kind !== 'written') throw new Error('setup failed');
        const second = await s.putIfMatch(key, bytes('v2'), first.version);
        if (second.kind !== 'written') throw new Error('setup failed');
        const r = await s.putIfMatch(key, bytes('v3'), first.version);
        expect(r.kind).toBe('version-mismatch');
        if (r.kind === 'version-mismatch' && r.current !== undefined) expect(r.current).toBe(second.version);
        expect(text(await s.get(key))).toBe('v2');
      });

      it('answers absent for a missing object and creates nothing', async () => {
        const s = await get();
        const key = `${freshPrefix()}missing.tif`;
        expect(await s.putIfMatch(key, bytes('x'), '"0123456789abcdef"')).toEqual({ kind: 'absent' });
        expect(await s.head(key)).toBeUndefined();
      });

      it('8 concurrent repairs under one version: exactly one written', async () => {
        const s = await get();
        const key = `${freshPrefix()}repair-race.tif`;
        const first = await s.putIfAbsent(key, bytes('v1'));
        if (first.kind !== 'written') throw new Error('setup failed');
        const results = await Promise.all(Array.from({ length: 8 }, (_, i) => s.putIfMatch(key, bytes(`fix-${i}`), first.version)));
        expect(results.filter((r) => r.kind === 'written')).toHaveLength(1);
        expect(results.filter((r) => r.kind === 'version-mismatch')).toHaveLength(7);
      });
    });

    describe('reads', () => {
      it('getRange returns [start, end) and clips past the end', async () => {
        const s = await get();
        const key = `${freshPrefix()}range.bin`;
        await s.putIfAbsent(key, bytes('0123456789'));
        expect(text(await s.getRange(key, 2, 5))).toBe('234');
        expect(text(await s.getRange(key, 7, 100))).toBe('789');
      });

      it('get and getRange of a missing object throw ObjectNotFoundError; head returns undefined', async () => {
        const s = await get();
        const key = `${freshPrefix()}nope.tif`;
        await expect(s.get(key)).rejects.toBeInstanceOf(ObjectNotFoundError);
        await expect(s.getRange(key, 0, 10)).rejects.toBeInstanceOf(ObjectNotFoundError);
        expect(await s.head(key)).toBeUndefined();
      });

      it('list returns exactly the objects under a prefix', async () => {
        const s = await get();
        const p = freshPrefix();
        await s.putIfAbsent(`${p}x/1`, bytes('1'));
        await s.putIfAbsent(`${p}x/2`, bytes('2'));
        await s.putIfAbsent(`${p}xy/3`, bytes('3'));
        const keys: string[] = [];
        for await (const h of s.list(`${p}x/`)) keys.push(h.key);
        expect(keys.sort()).toEqual([`${p}x/1`, `${p}x/2`]);
      });
    });

    describe('keys', () => {
      it.each([
        ['a space', 'scene one.tif'],
        ['a plus', 'a+b.tif'],
        ['a percent sequence kept literally', 'a%2Fb.tif'],
        ['unicode', 'Zürich/日本/é.tif'],
      ])('round-trips a key with %s', async (_label, leaf) => {
        const s = await get();
        const key = `${freshPrefix()}${leaf}`;
        expect((await s.putIfAbsent(key, bytes('k'))).kind).toBe('written');
        expect((await s.head(key))?.key).toBe(key);
        const listed: string[] = [];
        for await (const h of s.list(key.slice(0, key.indexOf('/') + 1))) listed.push(h.key);
        expect(listed).toEqual([key]);
      });

      it.each([[''], ['../etc/passwd'], ['a//b'], ['/abs'], ['a/./b'], ['bad\u0000key'], ['x'.repeat(1025)]])(
        'refuses the invalid key %j before touching the backend',
        async (key) => {
          const s = await get();
          await expect(s.putIfAbsent(key, bytes('x'))).rejects.toBeInstanceOf(InvalidObjectKeyError);
          await expect(s.head(key)).rejects.toBeInstanceOf(InvalidObjectKeyError);
        },
      );
    });
  });
}
