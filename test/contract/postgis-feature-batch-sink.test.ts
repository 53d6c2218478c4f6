import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { BATCH_MIGRATIONS, PostgisFeatureBatchSink } from '../../functions/postgres/postgis-feature-batch-sink.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { INSERT_CHUNK, isReject, readPositionRecord } from '../../shared/domain/feature-batch.js';
import type { CellRecord, FeatureBatch } from '../../shared/ports/feature-batch-sink.port.js';
import { requireEndpoints } from '../support/global-setup.js';
import { PgFaultProxy } from '../support/pg-fault-proxy.js';
import { unconditionalSql } from './precondition-guard.js';

// The feature batch sink against the real PostgreSQL 15 + PostGIS 3 the suite starts (test/support/emulators/postgres.ts),
// through a TCP proxy that records the SQL and can cut a session right before or right after its COMMIT reached the server.
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const proxy = await PgFaultProxy.start({ host: '127.0.0.1', port: postgres.port });
const pool = new pg.Pool({ connectionString: proxy.urlFor(postgres.url), max: 20 });
pool.on('error', () => undefined); // sessions the proxy cuts; the calls themselves already failed
const direct = new pg.Pool({ connectionString: postgres.url, max: 2 });
afterAll(async () => {
  await Promise.all([pool.end(), direct.end()]);
  await proxy.stop();
});
const sink = new PostgisFeatureBatchSink(pool);
await sink.migrate();

/** A pipeline of this test alone: every test counts its own records, whatever else the database holds. */
const newPipeline = () => `contract-${randomBytes(5).toString('hex')}`;
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** Records as the use case makes them: read from NDJSON lines, each with a cell. */
function records(pipeline: string, lines: readonly string[]): CellRecord[] {
  return lines.map((text, i) => {
    const r = readPositionRecord(text, i + 1, pipeline);
    if (isReject(r)) throw new Error(`test record ${i + 1} is a reject: ${r.detail}`);
    return { ...r, cell: `87196566${i % 10}ffffff`.slice(0, 15) };
  });
}

const position = (vessel: number, second: number, lon = 4.5, lat = 55.1) =>
  JSON.stringify({ vessel, time: new Date(Date.UTC(2025, 5, 1, 12, 0, second)).toISOString(), lon, lat, speed: 10 });

function batch(pipeline: string, lines: readonly string[], overrides: Partial<FeatureBatch> = {}): FeatureBatch {
  const key = `streams/ais/${randomBytes(6).toString('hex')}.ndjson`;
  return {
    batchKey: sha(key),
    owner: 'm-1@w1',
    pipeline,
    source: { bucket: 'landing', key, versionToken: 'v1' },
    format: 'ndjson',
    records: records(pipeline, lines),
    rejects: [],
    blankLines: 0,
    ...overrides,
  };
}

async function recordCount(pipeline: string): Promise<number> {
  const r = await direct.query<{ n: number }>('SELECT count(*)::int AS n FROM feature_records WHERE pipeline = $1', [pipeline]);
  return r.rows[0]?.n ?? -1;
}

/** `work` on a pool whose sessions use a new schema of their own (tables made fresh), dropped afterwards. */
async function inOwnSchema(prefix: string, work: (own: pg.Pool, schema: string) => Promise<void>): Promise<void> {
  const schema = `${prefix}_${randomBytes(4).toString('hex')}`;
  await direct.query(`CREATE SCHEMA ${schema}`);
  const scoped = new URL(postgres.url);
  scoped.searchParams.set('options', `-c search_path=${schema},public`);
  const own = new pg.Pool({ connectionString: scoped.toString(), max: 2 });
  try {
    await work(own, schema);
  } finally {
    await own.end();
    await direct.query(`DROP SCHEMA ${schema} CASCADE`);
  }
}

describe('PostgisFeatureBatchSink (PostgreSQL 15 + PostGIS 3)', () => {
  it('inserts a batch once: a second put of the same batch is already-done, names the first owner and writes nothing', async () => {
    const pipeline = newPipeline();
    const b = batch(pipeline, [position(1, 0), position(2, 1), position(3, 2)]);
    expect(await sink.putBatch(b)).toEqual({ kind: 'inserted', inserted: 3, duplicates: 0, rejects: 0 });
    expect(await sink.putBatch({ ...b, owner: 'm-1@w2' })).toEqual({
      kind: 'already-done',
      done: { owner: 'm-1@w1', records: 3, rejects: 0 },
    });
    expect(await sink.batchDone(b.batchKey)).toEqual({ owner: 'm-1@w1', records: 3, rejects: 0 });
    expect(await sink.batchDone(sha('never seen'))).toBeUndefined();
    expect(await recordCount(pipeline)).toBe(3);
  });

  it('counts a record two batches carry once, by canonical JSON or by its given id, and keeps the first batch as its origin', async () => {
    const pipeline = newPipeline();
    const first = batch(pipeline, [position(1, 0), JSON.stringify({ id: 'x-9', vessel: 2, time: 1_748_779_200_000, lon: 1, lat: 2 })]);
    // The same position re-serialised (keys reordered, 10.0 for 10), and the id x-9 with other content.
    const again = `{"speed":10.0,"lat":55.1,"lon":4.5,"time":"2025-06-01T12:00:00.000Z","vessel":1}`;
    const second = batch(pipeline, [
      again,
      JSON.stringify({ id: 'x-9', vessel: 3, time: 1_748_779_260_000, lon: 5, lat: 6 }),
      position(4, 9),
    ]);
    expect(await sink.putBatch(first)).toMatchObject({ kind: 'inserted', inserted: 2, duplicates: 0 });
    expect(await sink.putBatch(second)).toMatchObject({ kind: 'inserted', inserted: 1, duplicates: 2 });
    const origin = await direct.query<{ batch_key: string; n: number }>(
      'SELECT batch_key, count(*)::int AS n FROM feature_records WHERE pipeline = $1 GROUP BY batch_key',
      [pipeline],
    );
    expect(new Map(origin.rows.map((r) => [r.batch_key, r.n]))).toEqual(
      new Map([
        [first.batchKey, 2],
        [second.batchKey, 1],
      ]),
    );
    // Each record id is namespaced by its pipeline: the same record in another stream is another record.
    const other = newPipeline();
    expect(await sink.putBatch(batch(other, [position(1, 0)]))).toMatchObject({ inserted: 1, duplicates: 0 });
  });

  it('keeps every reject with its batch and line, NUL spelled out, and the point, time and cell of every record', async () => {
    const pipeline = newPipeline();
    const b = batch(pipeline, [position(7, 30, -3.25, 48.5)], {
      rejects: [
        { line: 2, reason: 'out-of-range', detail: 'lon 181, lat 91 is not on the globe', excerpt: '{"lon":181,"lat":91}' },
        { line: 5, reason: 'unparsable', detail: 'not JSON', excerpt: 'a\u0000b' },
      ],
      blankLines: 1,
    });
    expect(await sink.putBatch(b)).toEqual({ kind: 'inserted', inserted: 1, duplicates: 0, rejects: 2 });
    const rejects = await direct.query('SELECT line, reason, excerpt FROM feature_rejects WHERE batch_key = $1 ORDER BY line', [
      b.batchKey,
    ]);
    expect(rejects.rows).toEqual([
      { line: 2, reason: 'out-of-range', excerpt: '{"lon":181,"lat":91}' },
      { line: 5, reason: 'unparsable', excerpt: 'a\\u0000b' },
    ]);
    const row = await direct.query(
      `SELECT vessel, to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS') AS t, ST_AsText(geom) AS wkt, ST_SRID(geom) AS srid, h3_cell, line, speed
         FROM feature_records WHERE pipeline = $1`,
      [pipeline],
    );
    expect(row.rows).toEqual([
      { vessel: '7', t: '2025-06-01T12:00:30.000', wkt: 'POINT(-3.25 48.5)', srid: 4326, h3_cell: '871965660ffffff', line: 1, speed: 10 },
    ]);
  });

  it('stores every field as the record gave it: ids and vessels in any script, no id, no speed, fractional milliseconds, exact doubles', async () => {
    const pipeline = newPipeline();
    const lines = [
      JSON.stringify({ id: 'ノード-Ω-😀', vessel: 'Ålesund 号', time: 1_748_779_200_123.5, lon: 0.1 + 0.2, lat: -89.999999999, speed: 0 }),
      JSON.stringify({ vessel: 'x'.repeat(64), time: '2025-06-01T12:00:00.001Z', lon: -180, lat: 90 }),
      JSON.stringify({ id: 9_007_199_254_740_991, vessel: 1, time: 1_748_779_200_000, lon: 5e-324, lat: 1e-7, speed: 1e300 }),
    ];
    const b = batch(pipeline, lines);
    expect(await sink.putBatch(b)).toEqual({ kind: 'inserted', inserted: 3, duplicates: 0, rejects: 0 });
    const rows = await direct.query<{
      record_id: string;
      given_id: string | null;
      vessel: string;
      us: string;
      lon: number;
      lat: number;
      speed: number | null;
      cell: string;
      line: number;
      same_point: boolean;
    }>(
      `SELECT encode(record_id, 'hex') AS record_id, given_id, vessel,
              (extract(epoch FROM t) * 1000000)::bigint::text AS us, lon, lat, speed, h3_cell AS cell, line,
              ST_X(geom) = lon AND ST_Y(geom) = lat AS same_point
         FROM feature_records WHERE pipeline = $1 ORDER BY line`,
      [pipeline],
    );
    // to_timestamp(ms / 1000.0) rounds to the microsecond: 1748779200123.5 ms is ...123500 us.
    expect(rows.rows).toEqual(
      b.records.map((r, i) => ({
        record_id: r.recordId,
        given_id: r.givenId ?? null,
        vessel: r.vessel,
        us: ['1748779200123500', '1748779200001000', '1748779200000000'][i],
        lon: r.lon,
        lat: r.lat,
        speed: r.speed,
        cell: r.cell,
        line: i + 1,
        same_point: true,
      })),
    );
    expect(rows.rows.map((r) => [r.given_id, r.speed])).toEqual([
      ['ノード-Ω-😀', 0],
      [null, null],
      ['9007199254740991', 1e300],
    ]);
  });

  it('the H3-and-minute view counts rows, never batches: a duplicated record adds nothing to it', async () => {
    const pipeline = newPipeline();
    const lines = [position(1, 0), position(2, 10), position(3, 70)];
    await sink.putBatch(batch(pipeline, lines));
    await sink.putBatch(batch(pipeline, lines));
    const view = await direct.query<{ records: number; vessels: number }>(
      'SELECT sum(records)::int AS records, sum(vessels)::int AS vessels FROM feature_counts_h3_minute WHERE pipeline = $1',
      [pipeline],
    );
    expect(view.rows).toEqual([{ records: 3, vessels: 3 }]);
  });

  it('16 concurrent puts of one batch: one inserts, 15 wait on its row and find it done; the records are in once', async () => {
    const pipeline = newPipeline();
    const b = batch(
      pipeline,
      Array.from({ length: 50 }, (_, i) => position(i, i)),
    );
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => sink.putBatch({ ...b, owner: `m-${i}@w${i}` })));
    const inserted = results.filter((r) => r.kind === 'inserted');
    expect(inserted).toHaveLength(1);
    const winner = results.findIndex((r) => r.kind === 'inserted');
    for (const r of results) if (r.kind === 'already-done') expect(r.done.owner).toBe(`m-${winner}@w${winner}`);
    expect(await recordCount(pipeline)).toBe(50);
  });

  /**
   * Three pairs of batches of `n` records, each pair sharing `shared`, the second of each pair listed in reverse, all put
   * at once: inserted in their own order, the two of a pair meet in the shared records from both ends and deadlock
   * (40P01) nearly every time. `second` gives record i its time (seconds after 12:00): the order's first key.
   */
  async function putOppositePairs(n: number, shared: number, second: (i: number) => number): Promise<void> {
    const pipeline = newPipeline();
    const lines = (from: number) => Array.from({ length: n }, (_, j) => position(from + j, second(from + j)));
    const batches = [0, 1, 2].flatMap((p) => [
      batch(pipeline, lines(p * 20_000)),
      batch(pipeline, lines(p * 20_000 + n - shared).reverse()),
    ]);
    const results = await Promise.all(batches.map((b) => sink.putBatch(b)));
    expect(results.map((r) => r.kind)).toEqual(Array(6).fill('inserted'));
    const distinct = 3 * (2 * n - shared);
    expect(results.reduce((sum, r) => sum + (r.kind === 'inserted' ? r.inserted : 0), 0)).toBe(distinct);
    expect(await recordCount(pipeline)).toBe(distinct);
  }

  it('batches that share records, each in its own order, all at once: every one inserts, none deadlocks, each record once', async () => {
    // 8,000 records sharing 4,000: two statements a batch, sorted in the adapter.
    await putOppositePairs(8000, 4000, () => 0);
  });

  it(`batches of one statement each (up to ${INSERT_CHUNK} records) that share records, in opposite orders, all at once: none deadlocks`, async () => {
    // The statement's ORDER BY alone orders these (the adapter sorts only batches of several statements).
    await putOppositePairs(4900, 4000, () => 1);
  });

  it('batches that share records at many times, in opposite orders, all at once: none deadlocks (the one order is newest first)', async () => {
    // A time per record, the order's first key: 6,000 records a batch, 3,000 shared.
    await putOppositePairs(6000, 3000, (i) => i % 3600);
  });

  it(`inserts each batch newest first, then by record id, in one statement and across chunks of ${INSERT_CHUNK}`, async () => {
    for (const n of [400, INSERT_CHUNK + 600]) {
      // A table of its own: one transaction appending to a new heap leaves its rows in the order it inserted them (in the
      // shared table, space freed by another test's rolled-back rows may be reused anywhere).
      await inOwnSchema('order', async (own) => {
        const pipeline = newPipeline();
        // Times shuffled against the lines (a multiplicative permutation), a few records sharing each time.
        const lines = Array.from({ length: n }, (_, i) =>
          JSON.stringify({ vessel: i, time: 1_748_779_200_000 + ((i * 7919) % n) * 250 - (i % 3), lon: 4.5, lat: 55.1 }),
        );
        const b = batch(pipeline, lines);
        const schemaSink = new PostgisFeatureBatchSink(own);
        await schemaSink.migrate();
        expect(await schemaSink.putBatch(b)).toMatchObject({ kind: 'inserted', inserted: n });
        const stored = await own.query<{ ms: string; id: string }>(
          `SELECT (extract(epoch FROM t) * 1000)::bigint::text AS ms, encode(record_id, 'hex') AS id FROM feature_records ORDER BY ctid`,
        );
        const expected = [...b.records]
          .sort((x, y) => y.timeMs - x.timeMs || (x.recordId < y.recordId ? -1 : x.recordId > y.recordId ? 1 : 0))
          .map((r) => ({ ms: String(r.timeMs), id: r.recordId }));
        expect(stored.rows, `${n} records`).toEqual(expected);
      });
    }
  });

  it('a crash before COMMIT leaves nothing; a COMMIT whose answer is lost is retried as already-done, with nothing twice', async () => {
    const pipeline = newPipeline();
    const b = batch(pipeline, [position(1, 0), position(2, 1)]);
    const cut = proxy.cutBeforeNextCommit(b.batchKey);
    await expect(sink.putBatch(b)).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: true });
    expect(cut.hits).toBe(1);
    expect(await recordCount(pipeline)).toBe(0);
    expect(await sink.batchDone(b.batchKey)).toBeUndefined();
    const lost = proxy.loseNextCommitAnswer(b.batchKey);
    await expect(sink.putBatch(b)).rejects.toMatchObject({ code: 'ADAPTER_FAILURE', retryable: true });
    expect(lost.hits).toBe(1);
    // The use case's retry (a redelivery after its claim was given back) finds its own batch done.
    expect(await sink.putBatch({ ...b, owner: 'm-1@w2' })).toMatchObject({ kind: 'already-done', done: { owner: 'm-1@w1' } });
    expect(await recordCount(pipeline)).toBe(2);
  });

  it(`inserts a batch larger than one statement (${INSERT_CHUNK} records) in its one transaction`, async () => {
    const pipeline = newPipeline();
    const n = INSERT_CHUNK * 2 + 17;
    const b = batch(
      pipeline,
      Array.from({ length: n }, (_, i) => JSON.stringify({ vessel: i % 300, time: 1_748_779_200_000 + i, lon: (i % 360) - 180, lat: 10 })),
    );
    expect(await sink.putBatch(b)).toEqual({ kind: 'inserted', inserted: n, duplicates: 0, rejects: 0 });
    expect(await recordCount(pipeline)).toBe(n);
  });

  it('refuses a batch it cannot key with a typed error before any SQL', async () => {
    const pipeline = newPipeline();
    await expect(sink.putBatch(batch(pipeline, [position(1, 0)], { owner: '' }))).rejects.toBeInstanceOf(InvalidParamsError);
    const bad = batch(pipeline, [position(1, 0)]);
    const good = bad.records[0] as CellRecord;
    // Not hex; hex cut short; upper case (the bytes would be a lower-case id's); hex with a bad pair at its end.
    for (const recordId of ['not-hex', good.recordId.slice(1), good.recordId.toUpperCase(), `${good.recordId.slice(0, 62)}zz`]) {
      await expect(sink.putBatch({ ...bad, records: [{ ...good, recordId }] }), recordId).rejects.toThrow(/64 hex digits/);
    }
    expect(await recordCount(pipeline)).toBe(0);
  });

  it('the spatial index: SP-GiST on new tables; a table made with the GiST of before 2026-12 keeps it; both answer a box query', async () => {
    // The statements of before 2026-12 differ from today's only in the geometry index's access method.
    const geomIndex = BATCH_MIGRATIONS.filter((sql) => /USING spgist \(geom\)/.test(sql));
    expect(geomIndex).toHaveLength(1);
    const previous = BATCH_MIGRATIONS.map((sql) => sql.replace('USING spgist (geom)', 'USING gist (geom)'));
    for (const [prefix, made] of [
      ['sp', 'today'],
      ['gi', 'before'],
    ] as const) {
      await inOwnSchema(prefix, async (own, schema) => {
        if (made === 'before') for (const sql of previous) await own.query(sql);
        const schemaSink = new PostgisFeatureBatchSink(own);
        // Idempotent: twice, on the fresh schema and on the one the previous statements made.
        await schemaSink.migrate();
        await schemaSink.migrate();
        const am = await own.query<{ am: string }>(
          `SELECT a.amname AS am FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
            WHERE i.indrelid = to_regclass($1) AND pg_get_indexdef(i.indexrelid) LIKE '%(geom)%'`,
          [`${schema}.feature_records`],
        );
        expect(am.rows, schema).toEqual([{ am: made === 'today' ? 'spgist' : 'gist' }]);
        const pipeline = newPipeline();
        const lines = [position(1, 0, 4.5, 55.1), position(2, 1, 4.6, 55.2), position(3, 2, -70, -30), position(4, 3, 4.55, 55.15)];
        expect(await schemaSink.putBatch(batch(pipeline, lines))).toEqual({ kind: 'inserted', inserted: 4, duplicates: 0, rejects: 0 });
        const client = await own.connect();
        try {
          // The index alone answers (no sequential scan to fall back on): three of the four points are in the box.
          await client.query('BEGIN');
          await client.query('SET LOCAL enable_seqscan = off');
          const inBox = `SELECT count(*)::int AS n FROM feature_records WHERE pipeline = $1 AND geom && ST_MakeEnvelope(4, 55, 5, 56, 4326)`;
          const plan = await client.query(`EXPLAIN ${inBox}`, [pipeline]);
          expect(plan.rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n')).toContain('feature_records_geom');
          expect((await client.query(inBox, [pipeline])).rows).toEqual([{ n: 3 }]);
          await client.query('COMMIT');
        } finally {
          client.release();
        }
        const view = await own.query('SELECT sum(records)::int AS n FROM feature_counts_h3_minute WHERE pipeline = $1', [pipeline]);
        expect(view.rows).toEqual([{ n: 4 }]);
      });
    }
  });

  it('migrate() from 8 pools at once, and every write is INSERT ... ON CONFLICT DO NOTHING, never UPDATE or DELETE', async () => {
    const pools = Array.from({ length: 8 }, () => new pg.Pool({ connectionString: postgres.url, max: 1 }));
    try {
      await Promise.all(pools.map((p) => new PostgisFeatureBatchSink(p).migrate()));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
    // The batch's writes travel in one statement (a WITH of three inserts) and further chunks in their own: every write
    // of every statement is checked, each with its own ON CONFLICT.
    const tables = ['feature_batches', 'feature_records', 'feature_rejects'];
    for (const t of tables)
      expect(proxy.statements.filter((s) => new RegExp(`\\bINSERT INTO ${t}\\b`, 'i').test(s)).length, t).toBeGreaterThan(5);
    expect(unconditionalSql(proxy.statements, tables)).toEqual([]);
    // And the guard sees a write inside a WITH that a later ON CONFLICT would have seemed to cover.
    const slipped = unconditionalSql(
      [
        'INSERT INTO feature_batches (batch_key) VALUES ($1) ON CONFLICT (batch_key) DO NOTHING',
        'WITH g AS (INSERT INTO feature_records (record_id) VALUES ($1) RETURNING 1), h AS (INSERT INTO feature_rejects (batch_key, line) VALUES ($1, 1) ON CONFLICT (batch_key, line) DO NOTHING) SELECT 1',
        'WITH g AS (DELETE FROM feature_batches WHERE batch_key = $1 RETURNING 1) INSERT INTO feature_rejects SELECT 1 ON CONFLICT DO NOTHING',
        'INSERT INTO feature_records (record_id) VALUES ($1) ON CONFLICT (record_id) DO UPDATE SET line = 1',
      ],
      tables,
    );
    expect(slipped.map((f) => [f.request.split(' ').slice(0, 3).join(' '), f.why])).toEqual([
      ['INSERT INTO feature_records', 'INSERT without ON CONFLICT ... DO NOTHING'],
      ['DELETE FROM feature_batches', 'an UPDATE or DELETE of a create-only table'],
      ['INSERT INTO feature_records', 'INSERT without ON CONFLICT ... DO NOTHING'],
    ]);
  });
});
