import type pg from 'pg';
import { InvalidParamsError, TesseraError } from '../../shared/domain/errors.js';
import { INSERT_CHUNK } from '../../shared/domain/feature-batch.js';
import type { BatchDone, BatchPutResult, CellRecord, FeatureBatch, FeatureBatchSink } from '../../shared/ports/feature-batch-sink.port.js';
import { inTransaction, migrateOnce, type PgPool, postgresPool } from './connection.js';
import { pgFailure } from './postgres-error.js';

const TAG = 'feature-batch-sink:postgis';
/** One row per done batch object: the commit evidence of its claim (the owner whose transaction inserted it). */
export const BATCHES_TABLE = 'feature_batches';
/** One row per distinct record of a stream, ever: the first batch that carried it inserted it. */
export const RECORDS_TABLE = 'feature_records';
/** Every record that is not a position, with its batch and line. */
export const REJECTS_TABLE = 'feature_rejects';
/** Positions per H3 cell and UTC minute: a view over the rows, so it never counts a record twice. */
export const COUNTS_VIEW = 'feature_counts_h3_minute';

/**
 * The schema; every statement is idempotent (every cold start may run it, serialised by migrateOnce).
 *
 * - `feature_batches`: written once per batch, first in its transaction (`ON CONFLICT (batch_key) DO NOTHING`), so
 *   a second attempt of one batch waits on the first's uncommitted row and then finds it: the gate. No UPDATE ever.
 * - `feature_records`: `record_id` (32 bytes, SHA-256 of the pipeline and the record's identity) is the primary
 *   key: a record that two batch objects carry is inserted by the first and skipped by the second. The point is
 *   built in the insert; the H3 cell comes computed (h3-js in the use case). No foreign key to the batch: the batch
 *   row is inserted by the same transaction just before, and a per-row key check would cost every insert a lookup.
 * - `feature_rejects`: keyed by (batch_key, line): a reject is never dropped, and never kept twice.
 * - `feature_counts_h3_minute`: counts per pipeline, cell and UTC minute, over the rows.
 */
export const BATCH_MIGRATIONS: readonly string[] = [
  'CREATE EXTENSION IF NOT EXISTS postgis',
  `CREATE TABLE IF NOT EXISTS ${BATCHES_TABLE} (
     batch_key      text PRIMARY KEY CHECK (batch_key <> ''),
     owner          text NOT NULL CHECK (owner <> ''),
     pipeline       text NOT NULL CHECK (pipeline <> ''),
     source_bucket  text NOT NULL CHECK (source_bucket <> ''),
     source_key     text NOT NULL CHECK (source_key <> ''),
     source_version text NOT NULL CHECK (source_version <> ''),
     format         text NOT NULL,
     records        integer NOT NULL CHECK (records >= 0),
     rejects        integer NOT NULL CHECK (rejects >= 0),
     blank_lines    integer NOT NULL CHECK (blank_lines >= 0),
     done_at        timestamptz NOT NULL DEFAULT now()
   )`,
  `CREATE TABLE IF NOT EXISTS ${RECORDS_TABLE} (
     record_id  bytea PRIMARY KEY CHECK (octet_length(record_id) = 32),
     given_id   text,
     pipeline   text NOT NULL,
     batch_key  text NOT NULL,
     line       integer NOT NULL CHECK (line > 0),
     vessel     text NOT NULL,
     t          timestamptz NOT NULL,
     lon        double precision NOT NULL CHECK (lon BETWEEN -180 AND 180),
     lat        double precision NOT NULL CHECK (lat BETWEEN -90 AND 90),
     speed      double precision CHECK (speed >= 0),
     h3_cell    text NOT NULL,
     geom       geometry(Point, 4326) NOT NULL
   )`,
  // SP-GiST (a quad-tree over the points' boxes) rather than GiST: it answers the same bounding-box operators (&&, and
  // through it ST_Intersects, ST_DWithin, ST_Contains) and its inserts cost about 40 % less server CPU (5.2 against
  // 8.6 us a record: no penalty computed against every entry of every page on the way down), a seventh of the whole
  // insert's. GiST's one extra is index-ordered nearest neighbours (ORDER BY geom <-> point), which PostGIS 3.3 has no
  // SP-GiST support for. A table made before 2026-12 keeps its GiST index of this name (IF NOT EXISTS): rebuilding
  // it would block inserts for the whole build (docs/feature-batches.md, "The spatial index", says how to switch one
  // by hand).
  `CREATE INDEX IF NOT EXISTS ${RECORDS_TABLE}_geom ON ${RECORDS_TABLE} USING spgist (geom)`,
  `CREATE INDEX IF NOT EXISTS ${RECORDS_TABLE}_cell_time ON ${RECORDS_TABLE} (pipeline, h3_cell, t)`,
  `CREATE TABLE IF NOT EXISTS ${REJECTS_TABLE} (
     batch_key text NOT NULL,
     line      integer NOT NULL CHECK (line > 0),
     reason    text NOT NULL,
     detail    text NOT NULL,
     excerpt   text NOT NULL,
     PRIMARY KEY (batch_key, line)
   )`,
  // Created once: replacing a view waits for every query reading it (the same reason as tile_features_current).
  `DO $$ BEGIN
     IF to_regclass(quote_ident(current_schema()) || '.${COUNTS_VIEW}') IS NULL THEN
       CREATE VIEW ${COUNTS_VIEW} AS
         SELECT pipeline, h3_cell, date_trunc('minute', t AT TIME ZONE 'UTC') AS minute_utc,
                count(*) AS records, count(DISTINCT vessel) AS vessels
           FROM ${RECORDS_TABLE}
          GROUP BY pipeline, h3_cell, date_trunc('minute', t AT TIME ZONE 'UTC');
     END IF;
   END $$`,
];

/** The records' columns and how each row is built from the column arrays (`r`), shared by the two statements below. */
const RECORD_COLUMNS = 'record_id, given_id, pipeline, batch_key, line, vessel, t, lon, lat, speed, h3_cell, geom';
const recordRows = (pipeline: string, batchKey: string, arrays: number): string => {
  const a = (i: number) => `$${arrays + i}`;
  return `SELECT r.id, r.given, ${pipeline}, ${batchKey}, r.line, r.vessel, to_timestamp(r.ms / 1000.0), r.lon, r.lat, r.speed, r.cell,
         ST_SetSRID(ST_MakePoint(r.lon, r.lat), 4326)
    FROM unnest(${a(0)}::bytea[], ${a(1)}::text[], ${a(2)}::integer[], ${a(3)}::text[], ${a(4)}::double precision[],
                ${a(5)}::double precision[], ${a(6)}::double precision[], ${a(7)}::double precision[], ${a(8)}::text[])
         AS r(id, given, line, vessel, ms, lon, lat, speed, cell)`;
};
/**
 * The order every statement inserts its records in: newest first, then by record id. One order for every transaction,
 * so two batches that share records wait on each other's uncommitted keys in one direction, never in a cycle (in the
 * order each batch arrived in, they deadlocked: 40P01, and the retry redid the whole batch). Newest first because a
 * stream's duplicates are its retries: Firehose, a Cloud Storage subscription or Capture writes a retried record into
 * the object after the one that first held it, among newer records. A batch inserted newest first meets the records
 * it shares with the batch before it (whose transaction may still be open on the other consumer) at its end, and
 * waits for that commit only then; in record id order it met the first of them a tenth of the way in and waited
 * there with the rest of its rows (measured: the second consumer's insert took 21-24 ms instead of 18-20 for 1,000
 * records, docs/feature-batches.md#performance). A record's time is part of its hashed identity, so the order of two
 * records is the same in every batch that holds them; only a given id that two batches carry with different times
 * can meet in a cycle, which PostgreSQL breaks (40P01, retryable: the batch is redelivered and finds its records in).
 */
const RECORD_ORDER = 'ORDER BY r.ms DESC, r.id';

/**
 * A batch's one statement, between BEGIN and COMMIT: the batch row (the gate), then its records (the first chunk of
 * them) and its rejects, both only if the gate inserted. One round trip instead of three: while the other consumer's
 * thread parses a batch, each answer waits for it before the next statement can leave, and the transaction holds its
 * locks meanwhile.
 *
 * The records' insert reads the gate (`WHERE EXISTS (SELECT FROM gate)`), so PostgreSQL runs the gate's insert first,
 * to completion: a concurrent attempt of the same batch blocks on the uncommitted batch row before any record, as
 * before, and then inserts nothing. The rejects' insert reads it as well; PostgreSQL runs every data-modifying WITH
 * whether the outer query reads it or not. Parameters: $1-$10 the batch row, $11-$19 the records' column arrays,
 * $20-$23 the rejects' (line, reason, detail, excerpt).
 *
 * The records travel as one binary array per column (PostgreSQL's array_recv format, built by {@link columnArrays}):
 * the record ids as 32 raw bytes each, the numbers as IEEE doubles, the text as UTF-8, nothing parsed twice. A JSON
 * array of row objects was 208 bytes a record against 131, and a JSON parse on the server; pg's own text array literals
 * are built in JavaScript, slower than either on the thread that also parses the batch.
 * `to_timestamp(ms / 1000.0)` and the point are computed here, so a row holds the same values as it always did.
 */
const BATCH_STATEMENT = `WITH gate AS (
    INSERT INTO ${BATCHES_TABLE}
      (batch_key, owner, pipeline, source_bucket, source_key, source_version, format, records, rejects, blank_lines)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
    ON CONFLICT (batch_key) DO NOTHING
    RETURNING 1
  ), recs AS (
    INSERT INTO ${RECORDS_TABLE} (${RECORD_COLUMNS})
    ${recordRows('$3', '$1', 11)}
     WHERE EXISTS (SELECT FROM gate)
     ${RECORD_ORDER}
    ON CONFLICT (record_id) DO NOTHING
    RETURNING 1
  ), rej AS (
    INSERT INTO ${REJECTS_TABLE} (batch_key, line, reason, detail, excerpt)
    SELECT $1, j.line, j.reason, j.detail, j.excerpt
      FROM unnest($20::integer[], $21::text[], $22::text[], $23::text[]) AS j(line, reason, detail, excerpt)
     WHERE EXISTS (SELECT FROM gate)
    ON CONFLICT (batch_key, line) DO NOTHING
  )
  SELECT (SELECT count(*) FROM gate)::int AS gate, (SELECT count(*) FROM recs)::int AS inserted`;

/** The records of a batch's later chunks (more than INSERT_CHUNK records), after BATCH_STATEMENT in the same transaction. */
const INSERT_RECORDS = `INSERT INTO ${RECORDS_TABLE} (${RECORD_COLUMNS})
  ${recordRows('$1', '$2', 3)}
   ${RECORD_ORDER}
  ON CONFLICT (record_id) DO NOTHING`;

/** Node's copy of RECORD_ORDER, for a batch of several chunks (sorted before it is cut). */
const recordOrder = (a: CellRecord, b: CellRecord): number =>
  b.timeMs - a.timeMs || (a.recordId < b.recordId ? -1 : a.recordId > b.recordId ? 1 : 0);

/** PostgreSQL text cannot hold NUL. */
const text = (s: string): string => s.replaceAll('\u0000', '\\u0000');

/** A batch's totals as the CLI and the tests read them back. */
export interface StreamTotals {
  readonly batches: number;
  readonly records: number;
  readonly rejects: number;
}

/**
 * Feature batches in PostGIS: one transaction per batch object (docs/feature-batches.md).
 *
 * @example
 * const sink = PostgisFeatureBatchSink.fromUrl('postgis://tessera@db/gis');
 * await processBatch({ claims, sources, batches: sink, clock, telemetry }, settings, source);
 */
export class PostgisFeatureBatchSink implements FeatureBatchSink {
  readonly name = 'postgis';
  private migrated: Promise<void> | undefined;

  /**
   * @param pool a `pg.Pool` on a database with PostGIS 3 (or where the role may create the extension)
   * @param options `migrateOnFirstUse`: run {@link migrate} before the first batch of this process
   */
  constructor(
    private readonly pool: PgPool,
    private readonly options: { readonly migrateOnFirstUse?: boolean; readonly ownsPool?: boolean } = {},
  ) {}

  /** The sink of a connection URL (`postgis://` or `postgres://`), migrating on first use: what compose and the CLI use. */
  static fromUrl(url: string, options: { readonly max?: number } = {}): PostgisFeatureBatchSink {
    return new PostgisFeatureBatchSink(postgresPool(url, options), { migrateOnFirstUse: true, ownsPool: true });
  }

  /** Ends the pool if this sink made it. */
  async close(): Promise<void> {
    if (this.options.ownsPool) await this.pool.end();
  }

  /** Creates the tables, their indexes and the view; safe from many processes at once. */
  async migrate(): Promise<void> {
    try {
      await migrateOnce(this.pool, `tessera:${RECORDS_TABLE}`, BATCH_MIGRATIONS);
    } catch (error) {
      throw pgFailure(TAG, RECORDS_TABLE, 'migration (needs PostGIS 3: apt-get install postgresql-15-postgis-3)', error);
    }
  }

  async putBatch(batch: FeatureBatch): Promise<BatchPutResult> {
    checkBatch(batch);
    // In RECORD_ORDER, in every transaction: each statement inserts its chunk in that order, and a batch of several
    // chunks is sorted here first, so its chunks follow one another in it.
    const records = batch.records.length <= INSERT_CHUNK ? batch.records : [...batch.records].sort(recordOrder);
    // Every chunk's arrays are built (and every record id checked) before the transaction begins: nothing of it waits
    // on this process's CPU, and a bad id is refused before any SQL.
    const chunks: Buffer[][] = [];
    for (let at = 0; at < records.length; at += INSERT_CHUNK) chunks.push(columnArrays(records.slice(at, at + INSERT_CHUNK)));
    const [first = columnArrays([]), ...rest] = chunks;
    const rejects = [
      batch.rejects.map((r) => r.line),
      batch.rejects.map((r) => r.reason),
      batch.rejects.map((r) => text(r.detail)),
      batch.rejects.map((r) => text(r.excerpt)),
    ];
    await this.ready();
    try {
      return await inTransaction(this.pool, async (client): Promise<BatchPutResult> => {
        const r = await client.query<{ gate: number; inserted: number }>(BATCH_STATEMENT, [
          batch.batchKey,
          batch.owner,
          batch.pipeline,
          batch.source.bucket,
          batch.source.key,
          batch.source.versionToken,
          batch.format,
          batch.records.length,
          batch.rejects.length,
          batch.blankLines,
          ...first,
          ...rejects,
        ]);
        const row = r.rows[0];
        if (row === undefined) throw new Error(`the statement of batch ${batch.batchKey} answered no row`);
        if (row.gate !== 1) {
          // The batch row was there (committed by another attempt, which this one waited for): nothing was written.
          const done = await readDone(client, batch.batchKey);
          if (done === undefined) throw new Error(`the batch row of ${batch.batchKey} conflicted but cannot be read`);
          return { kind: 'already-done', done };
        }
        let inserted = row.inserted;
        for (const arrays of rest) {
          const more = await client.query(INSERT_RECORDS, [batch.pipeline, batch.batchKey, ...arrays]);
          inserted += more.rowCount ?? 0;
        }
        return { kind: 'inserted', inserted, duplicates: batch.records.length - inserted, rejects: batch.rejects.length };
      });
    } catch (error) {
      if (error instanceof TesseraError) throw error;
      throw pgFailure(TAG, RECORDS_TABLE, `insert of batch ${batch.batchKey.slice(0, 16)}... (${batch.source.key})`, error);
    }
  }

  async batchDone(batchKey: string): Promise<BatchDone | undefined> {
    await this.ready();
    try {
      return await readDone(this.pool, batchKey);
    } catch (error) {
      throw pgFailure(TAG, BATCHES_TABLE, `read of batch ${batchKey.slice(0, 16)}...`, error);
    }
  }

  /** Batches done, records kept and rejects kept for one pipeline (the CLI's summary, the tests' oracle). */
  async totals(pipeline: string): Promise<StreamTotals> {
    await this.ready();
    try {
      const r = await this.pool.query<{ batches: string; records: string; rejects: string }>(
        `SELECT (SELECT count(*) FROM ${BATCHES_TABLE} WHERE pipeline = $1) AS batches,
                (SELECT count(*) FROM ${RECORDS_TABLE} WHERE pipeline = $1) AS records,
                (SELECT count(*) FROM ${REJECTS_TABLE} j JOIN ${BATCHES_TABLE} b USING (batch_key) WHERE b.pipeline = $1) AS rejects`,
        [pipeline],
      );
      const row = r.rows[0];
      return { batches: Number(row?.batches ?? 0), records: Number(row?.records ?? 0), rejects: Number(row?.rejects ?? 0) };
    } catch (error) {
      throw pgFailure(TAG, RECORDS_TABLE, `totals of pipeline ${pipeline}`, error);
    }
  }

  /**
   * Runs the first-use migration now (a no-op for a sink that does not migrate on first use, or did already): a runtime
   * with other work to do first, such as staging files, starts it alongside. A failure rejects here and leaves the next
   * call (the first batch's) to try again.
   */
  async ready(): Promise<void> {
    if (!this.options.migrateOnFirstUse) return;
    this.migrated ??= this.migrate().catch((error: unknown) => {
      this.migrated = undefined;
      throw error;
    });
    await this.migrated;
  }
}

/** Element types of PostgreSQL's binary arrays (pg_type OIDs, fixed for built-in types). */
const OID = { bytea: 17, int4: 23, text: 25, float8: 701 } as const;

/**
 * One binary array (the format of PostgreSQL's array_send / array_recv): a 20-byte header (1 dimension, a has-nulls
 * flag, the element type, the length, lower bound 1), then each element as its length (-1 for NULL) and its bytes.
 * pg sends a Buffer parameter in binary, so the server reads the array without parsing text.
 */
class BinaryArray {
  private buf: Buffer;
  private at = 20;
  private nulls = false;
  constructor(
    private readonly oid: number,
    private readonly length: number,
    capacity: number,
  ) {
    this.buf = Buffer.allocUnsafe(20 + capacity);
  }
  null(): void {
    this.at = this.buf.writeInt32BE(-1, this.at);
    this.nulls = true;
  }
  int4(v: number): void {
    this.at = this.buf.writeInt32BE(v, this.buf.writeInt32BE(4, this.at));
  }
  float8(v: number): void {
    this.at = this.buf.writeDoubleBE(v, this.buf.writeInt32BE(8, this.at));
  }
  /** `v` as UTF-8. */
  text(v: string): void {
    const n = this.buf.write(v, this.at + 4, 'utf8');
    this.buf.writeInt32BE(n, this.at);
    this.at += 4 + n;
  }
  /**
   * A record id, 64 lower-case hex digits, as the 32 bytes they spell; false, and nothing written, for anything else.
   * (Checked by the hex decoding itself, which stops at the first pair that is not hex: no regular expression per record.)
   */
  recordId(hex: string): boolean {
    if (hex.length !== 64 || this.buf.write(hex, this.at + 4, 'hex') !== 32 || hex !== hex.toLowerCase()) return false;
    this.at = this.buf.writeInt32BE(32, this.at) + 32;
    return true;
  }
  done(): Buffer {
    this.buf.writeInt32BE(1, 0);
    this.buf.writeInt32BE(this.nulls ? 1 : 0, 4);
    this.buf.writeUInt32BE(this.oid, 8);
    this.buf.writeInt32BE(this.length, 12);
    this.buf.writeInt32BE(1, 16);
    return this.buf.subarray(0, this.at);
  }
}

/** The records as the nine column arrays of BATCH_STATEMENT ($11 to $19) and INSERT_RECORDS ($3 to $11), in the records' order; a bad record id is refused. */
export function columnArrays(records: readonly CellRecord[]): Buffer[] {
  const n = records.length;
  // Text capacity: at most 3 UTF-8 bytes per UTF-16 code unit, plus each length.
  let givenChars = 0;
  let vesselChars = 0;
  let cellChars = 0;
  for (const x of records) {
    givenChars += x.givenId?.length ?? 0;
    vesselChars += x.vessel.length;
    cellChars += x.cell.length;
  }
  const id = new BinaryArray(OID.bytea, n, n * 36);
  const given = new BinaryArray(OID.text, n, n * 4 + givenChars * 3);
  const line = new BinaryArray(OID.int4, n, n * 8);
  const vessel = new BinaryArray(OID.text, n, n * 4 + vesselChars * 3);
  const ms = new BinaryArray(OID.float8, n, n * 12);
  const lon = new BinaryArray(OID.float8, n, n * 12);
  const lat = new BinaryArray(OID.float8, n, n * 12);
  const speed = new BinaryArray(OID.float8, n, n * 12);
  const cell = new BinaryArray(OID.text, n, n * 4 + cellChars * 3);
  for (const x of records) {
    if (!id.recordId(x.recordId))
      throw new InvalidParamsError(`[${TAG}] record at line ${x.line} has id ${x.recordId}; a record id is 64 hex digits`);
    if (x.givenId === undefined) given.null();
    else given.text(x.givenId);
    line.int4(x.line);
    vessel.text(x.vessel);
    ms.float8(x.timeMs);
    lon.float8(x.lon);
    lat.float8(x.lat);
    if (x.speed === null) speed.null();
    else speed.float8(x.speed);
    cell.text(x.cell);
  }
  return [id, given, line, vessel, ms, lon, lat, speed, cell].map((a) => a.done());
}

async function readDone(client: Pick<pg.Pool, 'query'>, batchKey: string): Promise<BatchDone | undefined> {
  const r = await client.query<{ owner: string; records: number; rejects: number }>(
    `SELECT owner, records, rejects FROM ${BATCHES_TABLE} WHERE batch_key = $1`,
    [batchKey],
  );
  const row = r.rows[0];
  return row === undefined ? undefined : { owner: row.owner, records: row.records, rejects: row.rejects };
}

/** A batch the tables can take: checked before any SQL, so the message names the field, not a constraint. */
function checkBatch(batch: FeatureBatch): void {
  const blank = (
    [
      ['batchKey', batch.batchKey],
      ['owner', batch.owner],
      ['pipeline', batch.pipeline],
      ['source.bucket', batch.source.bucket],
      ['source.key', batch.source.key],
      ['source.versionToken', batch.source.versionToken],
    ] as const
  ).filter(([, v]) => typeof v !== 'string' || v === '');
  if (blank.length > 0) throw new InvalidParamsError(`[${TAG}] a batch has no ${blank.map(([k]) => k).join(', ')}`);
  // Each record id is checked as columnArrays decodes it, also before any SQL.
}
