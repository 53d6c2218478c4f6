import { AdapterError } from '../../shared/domain/errors.js';
import { settleExistingRow, validateManifestEntry, validateManifestIdentity } from '../../shared/domain/manifest-entry.js';
import type { ManifestEntry, ManifestStore, RegisterResult } from '../../shared/ports/manifest-store.port.js';
import { inTransaction, migrateOnce, type PgPool } from './connection.js';
import { pgFailure } from './postgres-error.js';

const TAG = 'manifest-store:postgresql';
const TABLE = 'ingest_manifest';

/**
 * The table of design note 2. The UNIQUE constraint over the whole identity is
 * what makes `ON CONFLICT DO NOTHING` mean anything: without it every retry
 * would add a row. The CHECKs refuse at the database what the adapter refuses
 * in code, so a row written by another tool cannot break the readers.
 */
export const MANIFEST_MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS ${TABLE} (
     source       text        NOT NULL CHECK (source <> ''),
     external_id  text        NOT NULL CHECK (external_id <> ''),
     checksum     text        NOT NULL CHECK (checksum ~ '^[0-9a-f]{64}$'),
     object_key   text        NOT NULL,
     bytes        bigint      NOT NULL CHECK (bytes >= 0),
     run_id       text        NOT NULL,
     published_at timestamptz NOT NULL,
     CONSTRAINT ${TABLE}_identity UNIQUE (source, external_id, checksum)
   )`,
];

const COLUMNS = 'source, external_id, checksum, object_key, bytes, run_id, published_at';

interface ManifestRow {
  source: string;
  external_id: string;
  checksum: string;
  object_key: string;
  /** bigint comes back from `pg` as a string (it does not fit every JS number). */
  bytes: string | number;
  run_id: string;
  published_at: Date;
}

/**
 * The ingest manifest in PostgreSQL (`ingest_manifest`), the design note's own choice.
 *
 * register, in ONE transaction:
 * ```
 * INSERT ... ON CONFLICT ON CONSTRAINT ingest_manifest_identity DO NOTHING RETURNING run_id
 *   a row came back  -> registered
 *   none             -> SELECT the holder under the same transaction (the re-check)
 *                       same runId: registered (our own earlier insert: its COMMIT's answer was lost and the caller
 *                       sent it again; `pg` never resends by itself) | other runId: already-published
 * COMMIT
 * ```
 * A concurrent inserter of the same identity makes the INSERT wait on its row
 * until it commits or aborts, so exactly one of 16 racing registrations wins and
 * the others read the winner (READ COMMITTED: the SELECT sees it once committed).
 *
 * @example
 * const pool = postgresPool('postgres://tessera@db/tessera');
 * const manifest = new PostgresManifestStore(pool);
 * await manifest.migrate();
 */
export class PostgresManifestStore implements ManifestStore {
  readonly name = 'postgresql';

  /** @param pool a `pg.Pool` (or anything with its `connect` and `query`); the caller owns and ends it. */
  constructor(private readonly pool: PgPool) {}

  /** Creates the table and its constraint if absent; safe to run from many processes at once. */
  async migrate(): Promise<void> {
    try {
      await migrateOnce(this.pool, `tessera:${TABLE}`, MANIFEST_MIGRATIONS);
    } catch (error) {
      throw pgFailure(TAG, TABLE, 'migration', error);
    }
  }

  async find(source: string, externalId: string): Promise<readonly ManifestEntry[]> {
    validateManifestIdentity(TAG, source, externalId);
    try {
      const r = await this.pool.query<ManifestRow>(`SELECT ${COLUMNS} FROM ${TABLE} WHERE source = $1 AND external_id = $2`, [
        source,
        externalId,
      ]);
      return r.rows.map(toEntry);
    } catch (error) {
      throw pgFailure(TAG, TABLE, `lookup of ${source}/${externalId}`, error);
    }
  }

  async get(source: string, externalId: string, checksum: string): Promise<ManifestEntry | undefined> {
    validateManifestIdentity(TAG, source, externalId, checksum);
    try {
      const r = await this.pool.query<ManifestRow>(
        `SELECT ${COLUMNS} FROM ${TABLE} WHERE source = $1 AND external_id = $2 AND checksum = $3`,
        [source, externalId, checksum],
      );
      const row = r.rows[0];
      return row ? toEntry(row) : undefined;
    } catch (error) {
      throw pgFailure(TAG, TABLE, `read of ${source}/${externalId}@${checksum.slice(0, 12)}`, error);
    }
  }

  async register(entry: ManifestEntry): Promise<RegisterResult> {
    validateManifestEntry(TAG, entry);
    const identity = [entry.source, entry.externalId, entry.checksum];
    try {
      return await inTransaction(this.pool, async (client): Promise<RegisterResult> => {
        const inserted = await client.query(
          `INSERT INTO ${TABLE} (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
           ON CONFLICT ON CONSTRAINT ${TABLE}_identity DO NOTHING
           RETURNING run_id`,
          [...identity, entry.key, entry.bytes, entry.runId, entry.publishedAt],
        );
        if (inserted.rowCount === 1) return { kind: 'registered', entry };
        const held = await client.query<ManifestRow>(
          `SELECT ${COLUMNS} FROM ${TABLE} WHERE source = $1 AND external_id = $2 AND checksum = $3`,
          identity,
        );
        const row = held.rows[0];
        if (!row) {
          // ON CONFLICT found a row the SELECT cannot: only a delete in between does that, and nothing deletes manifest rows.
          throw new AdapterError(
            `[${TAG}] registration of ${entry.source}/${entry.externalId} conflicted with a row that vanished; retry`,
            {
              retryable: true,
            },
          );
        }
        return settleExistingRow(entry, toEntry(row));
      });
    } catch (error) {
      throw error instanceof AdapterError ? error : pgFailure(TAG, TABLE, `registration of ${entry.source}/${entry.externalId}`, error);
    }
  }

  async *list(): AsyncIterable<ManifestEntry> {
    // Keyset pages over the unique index: no cursor held open across a consumer's awaits, no OFFSET rescans.
    const PAGE = 500;
    let after: [string, string, string] | undefined;
    for (;;) {
      let rows: ManifestRow[];
      try {
        const r = await this.pool.query<ManifestRow>(
          after === undefined
            ? `SELECT ${COLUMNS} FROM ${TABLE} ORDER BY source, external_id, checksum LIMIT ${PAGE}`
            : `SELECT ${COLUMNS} FROM ${TABLE} WHERE (source, external_id, checksum) > ($1, $2, $3)
               ORDER BY source, external_id, checksum LIMIT ${PAGE}`,
          after ?? [],
        );
        rows = r.rows;
      } catch (error) {
        throw pgFailure(TAG, TABLE, 'listing', error);
      }
      for (const row of rows) yield toEntry(row);
      const last = rows.at(-1);
      if (rows.length < PAGE || !last) return;
      after = [last.source, last.external_id, last.checksum];
    }
  }
}

function toEntry(row: ManifestRow): ManifestEntry {
  return {
    source: row.source,
    externalId: row.external_id,
    checksum: row.checksum,
    key: row.object_key,
    bytes: Number(row.bytes),
    runId: row.run_id,
    publishedAt: row.published_at.toISOString(),
  };
}
