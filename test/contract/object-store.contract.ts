import { describe, expect, it } from 'vitest';
import { InvalidObjectKeyError, ObjectNotFoundError, SourceChangedError } from '../../shared/domain/errors.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import type { FaultProxy, RecordedRequest } from '../support/fault-proxy.js';
import { freshPrefix } from '../support/ids.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

export interface ObjectStoreContractOptions {
  readonly concurrency?: number;
  /**
   * What a pinned read returns once the pinned version was replaced: still
   * that version's bytes (S3 on a versioned bucket reads by versionId, Azure
   * reads its snapshot), or SourceChangedError (S3 If-Match on an unversioned
   * bucket, GCS without versioning, local, memory). Never the new bytes.
   */
  readonly pinnedReadAfterOverwrite: 'old-bytes' | 'source-changed';
  /**
   * What pinning a version that was replaced before any pin gives: a pin of that kept version (S3 on a versioned
   * bucket by versionId; GCS and Azure with versioning on, which their emulators lack), or SourceChangedError
   * (the version is no longer stored). Defaults to SourceChangedError.
   */
  readonly pinOfReplacedVersion?: 'kept-version' | 'source-changed';
  /**
   * Whether the store behind the adapter refuses a delete under a stale
   * version itself (`enforced`), or is an emulator that ignores the delete's
   * precondition (fake-gcs-server drops `ifGenerationMatch` on DELETE:
   * docs/emulator-fidelity.md). Then the stale-delete case checks what the
   * adapter sends (the precondition on the wire) and answers the store's own
   * 412 through the fault proxy, and never passes because nothing was checked.
   */
  readonly staleDelete?: 'enforced' | 'ignored-by-emulator';
  /**
   * Whether objects carry the Content-Type a write gives (`stored`, the default: S3, GCS and Blob, checked on the
   * wire through the fault proxy), or the store keeps none (`none`: the local filesystem; `tessera view` serves its
   * files by extension).
   */
  readonly contentType?: 'stored' | 'none';
}

/**
 * A store under contract. Cloud stores talk to their emulator through a fault
 * proxy (test/support/fault-proxy.ts), so the suite can let a write land and
 * drop its answer, and the SDK's OWN retry runs; `writeForeign` puts bytes at
 * a key the way another tool would (no Tessera metadata), so verification by
 * the store's own hash (ETag, md5Hash, Content-MD5) is exercised too.
 */
export interface ObjectStoreUnderTest {
  readonly store: ObjectStore;
  readonly proxy?: FaultProxy | undefined;
  readonly writeForeign?: ((key: string, body: Uint8Array) => Promise<void>) | undefined;
}

/** Is this recorded request a write (PUT/POST) that names `key` (in its path or, GCS multipart, its body)? */
export function isWriteOf(key: string, r: RecordedRequest): boolean {
  if (r.method !== 'PUT' && r.method !== 'POST') return false;
  let path = r.path;
  try {
    path = decodeURIComponent(r.path);
  } catch {}
  if (/[?&]comp=snapshot\b/.test(r.path)) return false;
  const [pathname, query] = path.split('?');
  // S3 and Blob name the key in the path; a GCS upload in its `name` parameter or its multipart metadata.
  return (
    pathname?.endsWith(`/${key}`) === true || new URLSearchParams(query ?? '').get('name') === key || r.text.includes(`"name":"${key}"`)
  );
}

/** Is this recorded request a DELETE of `key` (its path names the key)? */
export function isDeleteOf(key: string, r: RecordedRequest): boolean {
  if (r.method !== 'DELETE') return false;
  let path = r.path;
  try {
    path = decodeURIComponent(r.path);
  } catch {}
  return path.split('?')[0]?.endsWith(`/${key}`) === true;
}

/** The answer each store gives a delete under a stale version (GCS JSON API 412 conditionNotMet). */
const STALE_DELETE_ANSWER = {
  status: 412,
  headers: { 'content-type': 'application/json; charset=UTF-8' },
  body: JSON.stringify({
    error: {
      code: 412,
      message: 'At least one of the pre-conditions you specified did not hold.',
      errors: [{ message: 'At least one of the pre-conditions you specified did not hold.', domain: 'global', reason: 'conditionNotMet' }],
    },
  }),
};

/** The one contract every ObjectStore passes, local and against each emulator. */
export function describeObjectStoreContract(
  name: string,
  factory: () => ObjectStore | ObjectStoreUnderTest | Promise<ObjectStore | ObjectStoreUnderTest>,
  options: ObjectStoreContractOptions,
): void {
  const n = Math.max(16, options.concurrency ?? 16);

  describe(`${name} (ObjectStore contract)`, () => {
    let underTest: ObjectStoreUnderTest | undefined;
    const setup = async (): Promise<ObjectStoreUnderTest> => {
      if (!underTest) {
        const made = await factory();
        underTest = 'putIfAbsent' in made ? { store: made } : made;
      }
      return underTest;
    };
    const get = async () => (await setup()).store;

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
        expect(await s.putIfAbsent(key, bytes('second!'))).toMatchObject({ kind: 'already-present', sameBytes: false });
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
        // Every loser brought other bytes: each is told so, none is mistaken for the winner's duplicate.
        expect(results.filter((r) => r.kind === 'already-present' && !r.sameBytes)).toHaveLength(n - 1);
        const winner = winners[0] as number;
        expect(text(await s.get(key))).toBe(text(bodies[winner] as Uint8Array));
      });

      it(`${n} concurrent duplicates of one job (same bytes): one written, every other already-present with sameBytes`, async () => {
        const s = await get();
        const key = `${freshPrefix()}dup.tif`;
        const body = bytes('deterministic-tile-'.repeat(2000));
        const results = await Promise.all(Array.from({ length: n }, () => s.putIfAbsent(key, body)));
        expect(results.filter((r) => r.kind === 'written')).toHaveLength(1);
        expect(results.filter((r) => r.kind === 'already-present' && r.sameBytes)).toHaveLength(n - 1);
      });

      it('a retry of a create that landed (its answer lost, no SDK to resend it) is already-present with sameBytes', async () => {
        const s = await get();
        const key = `${freshPrefix()}retry.tif`;
        const first = await s.putIfAbsent(key, bytes('my-own-bytes'));
        if (first.kind !== 'written') throw new Error('setup failed');
        expect(await s.putIfAbsent(key, bytes('my-own-bytes'))).toMatchObject({
          kind: 'already-present',
          sameBytes: true,
          current: { key, size: 12, version: first.version },
        });
      });

      it('a truncated object at the key is not sameBytes', async () => {
        const s = await get();
        const key = `${freshPrefix()}truncated.tif`;
        const full = bytes('0123456789'.repeat(100));
        await s.putIfAbsent(key, full.slice(0, 512));
        expect(await s.putIfAbsent(key, full)).toMatchObject({ kind: 'already-present', sameBytes: false, current: { size: 512 } });
        expect((await s.get(key)).byteLength).toBe(512);
      });

      it('an object written by another tool (no Tessera metadata) is compared by the store hash', async () => {
        const { store: s, writeForeign } = await setup();
        if (!writeForeign) return; // memory: no other tool can reach it
        const same = `${freshPrefix()}foreign-same.tif`;
        const other = `${freshPrefix()}foreign-other.tif`;
        await writeForeign(same, bytes('tile-bytes'));
        await writeForeign(other, bytes('tile-bytez'));
        expect(await s.putIfAbsent(same, bytes('tile-bytes'))).toMatchObject({ kind: 'already-present', sameBytes: true });
        expect(await s.putIfAbsent(other, bytes('tile-bytes'))).toMatchObject({ kind: 'already-present', sameBytes: false });
        expect(text(await s.get(other))).toBe('tile-bytez');
      });

      it('a create whose answer is lost on the wire is retried by the SDK and recognised as its own', async () => {
        const { store: s, proxy } = await setup();
        if (!proxy) return; // no wire: the retry-by-the-caller case above is this case
        const key = `${freshPrefix()}lost-create.tif`;
        const body = bytes('lost-answer-'.repeat(500));
        const lost = proxy.add({ match: { when: (r) => isWriteOf(key, r) }, action: 'drop-response' });
        const r = await s.putIfAbsent(key, body);
        expect(lost.hits).toBe(1);
        // The first request landed (the store answered it), the SDK sent it again and met its own object.
        const writes = proxy.requests.filter((q) => isWriteOf(key, q));
        expect(writes.length).toBeGreaterThanOrEqual(2);
        expect(writes[0]?.status).toBeLessThan(300);
        expect(r).toMatchObject({ kind: 'already-present', sameBytes: true });
        expect(text(await s.get(key))).toBe(text(body));
      });

      it('accepts an empty body', async () => {
        const s = await get();
        const key = `${freshPrefix()}empty`;
        expect((await s.putIfAbsent(key, new Uint8Array())).kind).toBe('written');
        expect((await s.head(key))?.size).toBe(0);
      });
    });

    if (options.contentType !== 'none') {
      it('sends each write the Content-Type it is given: rendered tiles are served as image/png, image/webp, image/jpeg', async () => {
        const { store, proxy } = await setup();
        if (proxy === undefined) throw new Error(`${name}: a store whose objects carry a Content-Type is tested through its fault proxy`);
        const prefix = freshPrefix();
        const sent = (key: string): string[] =>
          proxy.requests
            .filter((r) => isWriteOf(key, r))
            .map((r) => {
              // S3: the object's Content-Type header; Blob: x-ms-blob-content-type; GCS: the multipart upload's metadata.
              const blob = r.headers['x-ms-blob-content-type'];
              if (typeof blob === 'string') return blob;
              const meta = /"contentType":"([^"]+)"/.exec(r.text);
              return meta?.[1] ?? String(r.headers['content-type']);
            });
        for (const [file, type] of [
          ['t.png', 'image/png'],
          ['t.webp', 'image/webp'],
          ['t.jpg', 'image/jpeg'],
        ] as const) {
          const key = `${prefix}${file}`;
          const put = await store.putIfAbsent(key, bytes(`a ${type}`), { contentType: type });
          expect(put.kind).toBe('written');
          expect(sent(key)).toContain(type);
          if (put.kind !== 'written') continue;
          expect(await store.putIfMatch(key, bytes(`another ${type}`), put.version, { contentType: type })).toMatchObject({
            kind: 'written',
          });
          expect(sent(key).filter((t) => t === type).length).toBeGreaterThanOrEqual(2);
        }
      });
    }

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

      it('a repair retried after it landed (its own bytes in place) answers written, not version-mismatch', async () => {
        const s = await get();
        const key = `${freshPrefix()}repair-retry.tif`;
        const first = await s.putIfAbsent(key, bytes('bad'));
        if (first.kind !== 'written') throw new Error('setup failed');
        const fixed = await s.putIfMatch(key, bytes('good'), first.version);
        if (fixed.kind !== 'written') throw new Error('setup failed');
        expect(await s.putIfMatch(key, bytes('good'), first.version)).toEqual({ kind: 'written', version: fixed.version });
        expect(text(await s.get(key))).toBe('good');
      });

      it('a repair whose answer is lost on the wire is retried by the SDK and answers written', async () => {
        const { store: s, proxy } = await setup();
        if (!proxy) return; // no wire: the retry-by-the-caller case above is this case
        const key = `${freshPrefix()}lost-repair.tif`;
        const first = await s.putIfAbsent(key, bytes('bad'));
        if (first.kind !== 'written') throw new Error('setup failed');
        const lost = proxy.add({ match: { when: (r) => isWriteOf(key, r) }, action: 'drop-response' });
        const r = await s.putIfMatch(key, bytes('repaired'), first.version);
        expect(lost.hits).toBe(1);
        expect(proxy.requests.filter((q) => isWriteOf(key, q)).length).toBeGreaterThanOrEqual(2);
        expect(r.kind).toBe('written');
        const head = await s.head(key);
        if (r.kind === 'written') expect(r.version).toBe(head?.version);
        expect(text(await s.get(key))).toBe('repaired');
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

    describe('deleteIfVersion', () => {
      it('deletes the object at its current version; the key can then be created again', async () => {
        const s = await get();
        const key = `${freshPrefix()}del.tif`;
        const first = await s.putIfAbsent(key, bytes('to-delete'));
        if (first.kind !== 'written') throw new Error('setup failed');
        expect(await s.deleteIfVersion(key, first.version)).toEqual({ kind: 'deleted' });
        expect(await s.head(key)).toBeUndefined();
        expect((await s.putIfAbsent(key, bytes('again'))).kind).toBe('written');
      });

      it('deletes under the version head and list report', async () => {
        const s = await get();
        const prefix = freshPrefix();
        await s.putIfAbsent(`${prefix}a.tif`, bytes('a'));
        await s.putIfAbsent(`${prefix}b.tif`, bytes('b'));
        const listed: { key: string; version: string }[] = [];
        for await (const h of s.list(prefix)) listed.push(h);
        const headed = await s.head(`${prefix}a.tif`);
        expect(await s.deleteIfVersion(`${prefix}a.tif`, headed?.version ?? '')).toEqual({ kind: 'deleted' });
        const b = listed.find((h) => h.key === `${prefix}b.tif`);
        expect(await s.deleteIfVersion(`${prefix}b.tif`, b?.version ?? '')).toEqual({ kind: 'deleted' });
        const left: string[] = [];
        for await (const h of s.list(prefix)) left.push(h.key);
        expect(left).toEqual([]);
      });

      it('refuses a stale version, names the current one and leaves the object alone', async () => {
        const { store: s, proxy } = await setup();
        const key = `${freshPrefix()}del-stale.tif`;
        const first = await s.putIfAbsent(key, bytes('v1'));
        if (first.kind !== 'written') throw new Error('setup failed');
        const second = await s.putIfMatch(key, bytes('v2'), first.version);
        if (second.kind !== 'written') throw new Error('setup failed');
        if (options.staleDelete === 'ignored-by-emulator') {
          // The emulator would delete anyway: answer what the store answers, and check the precondition went out.
          if (!proxy) throw new Error('a store whose emulator ignores delete preconditions needs a fault proxy');
          const refused = proxy.add({ match: { when: (r) => isDeleteOf(key, r) }, action: STALE_DELETE_ANSWER });
          expect(await s.deleteIfVersion(key, first.version)).toEqual({ kind: 'version-mismatch', current: second.version });
          expect(refused.hits).toBe(1);
          const sent = proxy.requests.filter((r) => isDeleteOf(key, r));
          expect(sent.map((r) => new URLSearchParams(r.path.split('?')[1] ?? '').get('ifGenerationMatch'))).toEqual([first.version]);
        } else {
          expect(await s.deleteIfVersion(key, first.version)).toEqual({ kind: 'version-mismatch', current: second.version });
        }
        expect(text(await s.get(key))).toBe('v2');
        expect((await s.head(key))?.version).toBe(second.version);
      });

      it('answers absent for a missing object', async () => {
        const s = await get();
        const key = `${freshPrefix()}del-missing.tif`;
        const other = await s.putIfAbsent(`${key}.other`, bytes('x'));
        if (other.kind !== 'written') throw new Error('setup failed');
        expect(await s.deleteIfVersion(key, other.version)).toEqual({ kind: 'absent' });
        expect(await s.head(`${key}.other`)).toBeDefined();
      });

      it('a delete retried after it landed answers absent, and deletes nothing else', async () => {
        const s = await get();
        const key = `${freshPrefix()}del-twice.tif`;
        const first = await s.putIfAbsent(key, bytes('once'));
        if (first.kind !== 'written') throw new Error('setup failed');
        expect(await s.deleteIfVersion(key, first.version)).toEqual({ kind: 'deleted' });
        expect(await s.deleteIfVersion(key, first.version)).toEqual({ kind: 'absent' });
        if (options.staleDelete === 'ignored-by-emulator') return; // the stale-version case above covers the rest
        // A new object at the key has a new version: the old token cannot remove it.
        const again = await s.putIfAbsent(key, bytes('new bytes'));
        if (again.kind !== 'written') throw new Error('setup failed');
        expect(await s.deleteIfVersion(key, first.version)).toEqual({ kind: 'version-mismatch', current: again.version });
        expect(text(await s.get(key))).toBe('new bytes');
      });

      it('a delete whose answer is lost on the wire is retried by the SDK and ends with the object gone', async () => {
        const { store: s, proxy } = await setup();
        if (!proxy) return; // no wire: the retry-by-the-caller case above is this case
        const key = `${freshPrefix()}del-lost.tif`;
        const first = await s.putIfAbsent(key, bytes('lost-delete'));
        if (first.kind !== 'written') throw new Error('setup failed');
        const lost = proxy.add({ match: { when: (r) => isDeleteOf(key, r) }, action: 'drop-response' });
        const r = await s.deleteIfVersion(key, first.version);
        expect(lost.hits).toBe(1);
        expect(proxy.requests.filter((q) => isDeleteOf(key, q)).length).toBeGreaterThanOrEqual(2);
        // The first DELETE landed; its retry found the key empty. Either answer says: gone, and only by us.
        expect(['deleted', 'absent']).toContain(r.kind);
        expect(await s.head(key)).toBeUndefined();
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

    describe('pinned reads', () => {
      it('pin of the current version gives a pin for it, and pinned reads return its bytes', async () => {
        const s = await get();
        const key = `${freshPrefix()}scene.tif`;
        await s.putIfAbsent(key, bytes('0123456789'));
        const version = (await s.head(key))?.version as string;
        const pin = await s.pin(key, version);
        expect(pin.version).toBe(version);
        expect(text(await s.getRange(key, 2, 5, pin))).toBe('234');
        expect(text(await s.getRange(key, 7, 100, pin))).toBe('789');
        expect(await s.getRange(key, 3, 3, pin)).toHaveLength(0);
      });

      it(`pin of a version that is no longer current ${options.pinOfReplacedVersion === 'kept-version' ? 'pins the kept version and reads its bytes' : 'throws SourceChangedError naming the current one'}`, async () => {
        const s = await get();
        const key = `${freshPrefix()}moved.tif`;
        await s.putIfAbsent(key, bytes('v1'));
        const v1 = (await s.head(key))?.version as string;
        const v2 = await s.putIfMatch(key, bytes('v2'), v1);
        if (v2.kind !== 'written') throw new Error('setup failed');
        if (options.pinOfReplacedVersion === 'kept-version') {
          // The event named v1: its scene is made of v1's bytes, whatever is live (a redelivery after a metadata copy).
          const pin = await s.pin(key, v1);
          expect(pin.version).toBe(v1);
          expect(text(await s.getRange(key, 0, 2, pin))).toBe('v1');
          return;
        }
        const error = await s.pin(key, v1).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SourceChangedError);
        expect(error).toMatchObject({ key, expectedVersion: v1, currentVersion: v2.version });
      });

      it('pin of a missing object throws ObjectNotFoundError', async () => {
        const s = await get();
        await expect(s.pin(`${freshPrefix()}none.tif`, '"0123456789abcdef0123456789abcdef"')).rejects.toBeInstanceOf(ObjectNotFoundError);
      });

      it(`a pinned read after the source is overwritten ${options.pinnedReadAfterOverwrite === 'old-bytes' ? 'still returns the pinned bytes' : 'throws SourceChangedError'}, never the new bytes`, async () => {
        const s = await get();
        const key = `${freshPrefix()}overwritten.tif`;
        await s.putIfAbsent(key, bytes('OLD-0123456789'));
        const v1 = (await s.head(key))?.version as string;
        const pin = await s.pin(key, v1);
        expect(text(await s.getRange(key, 0, 3, pin))).toBe('OLD'); // a warm reader, before the overwrite
        if ((await s.putIfMatch(key, bytes('NEW-9876543210'), v1)).kind !== 'written') throw new Error('setup failed');
        if (options.pinnedReadAfterOverwrite === 'old-bytes') {
          expect(text(await s.getRange(key, 0, 3, pin))).toBe('OLD');
          expect(text(await s.getRange(key, 4, 100, pin))).toBe('0123456789');
        } else {
          await expect(s.getRange(key, 0, 3, pin)).rejects.toBeInstanceOf(SourceChangedError);
          await expect(s.getRange(key, 4, 4, pin)).rejects.toBeInstanceOf(SourceChangedError);
        }
        // Unpinned reads see the new bytes: the pin, not the key, decides.
        expect(text(await s.getRange(key, 0, 3))).toBe('NEW');
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

      it('names an object by an absolute URI whose decoded path ends with its key', async () => {
        const s = await get();
        const key = `${freshPrefix()}Zürich a+b%2F/scene one.tif`;
        expect(s.uriOf, `${name} names its objects by URI (the STAC Item's derived_from link)`).toBeTypeOf('function');
        const uri = new URL((s.uriOf as (k: string) => string)(key));
        expect(['s3:', 'gs:', 'https:', 'http:', 'file:', 'memory:']).toContain(uri.protocol);
        // Percent-encoded: a space, a plus and a literal %2F survive the round trip as themselves.
        expect(uri.pathname).not.toContain(' ');
        expect(decodeURIComponent(uri.pathname).endsWith(`/${key}`)).toBe(true);
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
