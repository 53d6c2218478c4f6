import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { InvalidManifestEntryError } from '../../shared/domain/manifest-entry.js';
import type { ManifestEntry, ManifestStore, RegisterResult } from '../../shared/ports/manifest-store.port.js';

/** How often an armed fault fired (0: the write it waited for never came). */
export interface ManifestFaultShot {
  readonly hits: number;
}

/**
 * The fault every adapter's wire can suffer on `register`: the insert lands in
 * the store, and its answer never reaches the adapter.
 * - `sdk-resends`: the client library resends the request by itself (the AWS,
 *   Google and Azure SDKs on a dropped response); `register` must still answer
 *   `registered`, recognising its own row by the runId.
 * - `caller-resends`: nothing below the adapter resends (`pg` does not): the
 *   call fails with a retryable AdapterError and the caller's retry of the
 *   same attempt (the redelivered ingest) must answer `registered`.
 */
export interface ManifestStoreFaults {
  readonly lostAnswer: 'sdk-resends' | 'caller-resends';
  /** The next register whose request carries `runId` lands, and its answer is lost. */
  loseNextRegisterAnswer(runId: string): ManifestFaultShot;
}

export interface ManifestStoreUnderTest {
  readonly store: ManifestStore;
  /** Absent only for a store with neither wire nor SDK (SQLite): there the same-runId retry case is the lost answer. */
  readonly faults?: ManifestStoreFaults | undefined;
}

const T0 = Date.UTC(2026, 11, 1, 9, 0, 0);
const hex64 = (): string => randomBytes(32).toString('hex');

/** A row of a fresh source, unique per test, so suites may share one table. */
function entry(overrides: Partial<ManifestEntry> = {}): ManifestEntry {
  const source = overrides.source ?? `sentinel-2-l2a-${randomBytes(4).toString('hex')}`;
  const externalId = overrides.externalId ?? 'S2B_T30UXB_20260612';
  return {
    source,
    externalId,
    checksum: hex64(),
    key: `scenes/${source}/${randomBytes(4).toString('hex')}/B04.tif`,
    bytes: 123_456_789_012,
    runId: `run-${randomBytes(6).toString('hex')}`,
    publishedAt: new Date(T0).toISOString(),
    ...overrides,
  };
}

async function listAll(store: ManifestStore, source: string): Promise<ManifestEntry[]> {
  const rows: ManifestEntry[] = [];
  for await (const row of store.list()) if (row.source === source) rows.push(row);
  return rows;
}

/**
 * The one contract every ManifestStore passes: SQLite, PostgreSQL, DynamoDB
 * Local, the Firestore emulator and Azurite Tables run exactly these cases,
 * lost answers included (through a fault proxy for the clouds, so the SDK's own
 * retry is what meets the row it already wrote).
 */
export function describeManifestStoreContract(name: string, factory: () => ManifestStoreUnderTest | Promise<ManifestStoreUnderTest>): void {
  describe(`${name} (ManifestStore contract)`, () => {
    let underTest: ManifestStoreUnderTest | undefined;
    const setup = async () => {
      underTest ??= await factory();
      return underTest;
    };
    const get = async () => (await setup()).store;

    describe('register, find, get, list', () => {
      it('registers a new identity and reads it back by find, get and list', async () => {
        const s = await get();
        const e = entry();
        expect(await s.find(e.source, e.externalId)).toEqual([]);
        expect(await s.get(e.source, e.externalId, e.checksum)).toBeUndefined();
        expect(await s.register(e)).toEqual({ kind: 'registered', entry: e });
        expect(await s.find(e.source, e.externalId)).toEqual([e]);
        expect(await s.get(e.source, e.externalId, e.checksum)).toEqual(e);
        expect(await listAll(s, e.source)).toEqual([e]);
      });

      it('get misses on another checksum and find on another external id of the same source', async () => {
        const s = await get();
        const e = entry();
        await s.register(e);
        expect(await s.get(e.source, e.externalId, hex64())).toBeUndefined();
        expect(await s.find(e.source, `${e.externalId}-other`)).toEqual([]);
      });
    });

    describe('create-only', () => {
      it('answers already-published with the first row when another attempt registers the same identity', async () => {
        const s = await get();
        const first = entry();
        const second = { ...first, runId: 'run-other', key: 'scenes/elsewhere.tif', publishedAt: new Date(T0 + 60_000).toISOString() };
        await s.register(first);
        expect(await s.register(second)).toEqual({ kind: 'already-published', entry: first });
        expect(await s.find(first.source, first.externalId)).toEqual([first]);
      });

      it('answers registered when the same attempt (same runId) registers again', async () => {
        const s = await get();
        const e = entry();
        await s.register(e);
        expect(await s.register(e)).toEqual({ kind: 'registered', entry: e });
        expect(await s.find(e.source, e.externalId)).toHaveLength(1);
      });

      it('of 16 concurrent registrations of one identity exactly one is registered; the 15 others name the winner', async () => {
        const s = await get();
        const base = entry();
        const attempts = Array.from({ length: 16 }, (_, i) => ({ ...base, runId: `run-${i}-${randomBytes(3).toString('hex')}` }));
        const results: RegisterResult[] = await Promise.all(attempts.map((a) => s.register(a)));
        const won = results.filter((r) => r.kind === 'registered');
        expect(won).toHaveLength(1);
        const winner = won[0]?.entry;
        expect(results.filter((r) => r.kind === 'already-published').map((r) => r.entry)).toEqual(Array(15).fill(winner));
        expect(await s.find(base.source, base.externalId)).toEqual([winner]);
      });

      it('a new checksum for the same item id is a second row (the checksum is in the identity)', async () => {
        const s = await get();
        const original = entry();
        const reprocessed = { ...original, checksum: hex64(), runId: 'run-reprocessed', key: `${original.key}.v2` };
        expect((await s.register(original)).kind).toBe('registered');
        expect((await s.register(reprocessed)).kind).toBe('registered');
        const rows = await s.find(original.source, original.externalId);
        expect(rows.map((r) => r.checksum).sort()).toEqual([original.checksum, reprocessed.checksum].sort());
        expect(await listAll(s, original.source)).toHaveLength(2);
      });
    });

    describe('odd ids', () => {
      const odd = [
        'a/b/c',
        'has#hash?and%2Fescapes',
        'back\\slash',
        'spaces and \'quotes" ',
        'ünïcödé-北京-🛰️',
        'S2B_MSIL2A_20260612T105619_N0510_R094_T30UXB_20260612T140000',
        'x'.repeat(1024),
      ];
      it.each(odd)('round-trips the external id %j', async (externalId) => {
        const s = await get();
        const e = entry({ externalId });
        expect(await s.register(e)).toEqual({ kind: 'registered', entry: e });
        expect(await s.get(e.source, externalId, e.checksum)).toEqual(e);
        expect(await s.find(e.source, externalId)).toEqual([e]);
      });

      it('keeps (a/b, c) and (a, b/c) apart, and a source with odd characters', async () => {
        const s = await get();
        const tag = randomBytes(3).toString('hex');
        const one = entry({ source: `src/${tag}#?`, externalId: 'b/c' });
        const two = entry({ source: `src/${tag}#?/b`, externalId: 'c', checksum: one.checksum });
        expect((await s.register(one)).kind).toBe('registered');
        expect((await s.register(two)).kind).toBe('registered');
        expect(await s.find(one.source, one.externalId)).toEqual([one]);
        expect(await s.find(two.source, two.externalId)).toEqual([two]);
      });
    });

    describe('bad input is a typed error, before any write', () => {
      it.each([
        ['a checksum that is not lower-case hex SHA-256', { checksum: 'ABC' }],
        ['an empty external id', { externalId: '' }],
        ['a control character in the source', { source: 'sentinel\u0000x' }],
        ['an external id over 1024 characters', { externalId: 'x'.repeat(1025) }],
        ['a negative size', { bytes: -1 }],
        ['an empty runId', { runId: '' }],
      ] as const)('refuses %s', async (_what, overrides) => {
        const s = await get();
        const e = entry(overrides as Partial<ManifestEntry>);
        await expect(s.register(e)).rejects.toBeInstanceOf(InvalidManifestEntryError);
      });

      it('refuses a malformed checksum on get', async () => {
        const s = await get();
        await expect(s.get('src', 'id', 'not-a-checksum')).rejects.toBeInstanceOf(InvalidManifestEntryError);
      });
    });

    describe('a lost answer', () => {
      it('a register whose insert landed but whose answer was lost is recognised as ours: registered, one row', async () => {
        const { store: s, faults } = await setup();
        const e = entry();
        if (!faults) {
          // No wire and no SDK (SQLite): the caller's resend of the same attempt is the only path, and it is this.
          await s.register(e);
          expect(await s.register(e)).toEqual({ kind: 'registered', entry: e });
        } else {
          const shot = faults.loseNextRegisterAnswer(e.runId);
          if (faults.lostAnswer === 'sdk-resends') {
            expect(await s.register(e)).toEqual({ kind: 'registered', entry: e });
          } else {
            await expect(s.register(e)).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: true });
            expect(await s.register(e)).toEqual({ kind: 'registered', entry: e });
          }
          expect(shot.hits).toBe(1);
        }
        expect(await s.find(e.source, e.externalId)).toEqual([e]);
        // And another attempt after it still loses to the row.
        expect((await s.register({ ...e, runId: 'run-late' })).kind).toBe('already-published');
      });
    });
  });
}
