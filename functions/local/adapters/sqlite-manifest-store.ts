import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { AdapterError } from '../../../shared/domain/errors.js';
import { settleExistingRow, validateManifestEntry, validateManifestIdentity } from '../../../shared/domain/manifest-entry.js';
import type { ManifestEntry, ManifestStore, RegisterResult } from '../../../shared/ports/manifest-store.port.js';
import { immediateTransaction, openSqlite, runSqlite } from './sqlite-database.js';

interface Row {
  source: string;
  external_id: string;
  checksum: string;
  object_key: string;
  bytes: number;
  run_id: string;
  published_at: string;
}

const toEntry = (r: Row): ManifestEntry => ({
  source: r.source,
  externalId: r.external_id,
  checksum: r.checksum,
  key: r.object_key,
  bytes: r.bytes,
  runId: r.run_id,
  publishedAt: r.published_at,
});

const TAG = 'manifest-store:sqlite';

/**
 * The ingest manifest in SQLite, the local default (`<dir>/manifest.db`): the
 * design note's `ingest_manifest` table with UNIQUE (source, external_id,
 * checksum). `register` is one IMMEDIATE transaction that re-checks the
 * identity and inserts with ON CONFLICT DO NOTHING: SQLite serialises writers
 * on the database lock, so any number of processes on one file see one winner,
 * and a loser reads the winner's row in the same transaction.
 *
 * @example
 * const manifest = new SqliteManifestStore('.tessera/manifest.db');
 */
export class SqliteManifestStore implements ManifestStore {
  readonly name = 'sqlite';
  readonly #db: DatabaseSync;
  readonly #find: StatementSync;
  readonly #get: StatementSync;
  readonly #insert: StatementSync;

  constructor(file: string, options: { busyTimeoutMs?: number } = {}) {
    try {
      this.#db = openSqlite(file, options.busyTimeoutMs ?? 10_000);
    } catch (cause) {
      throw new AdapterError(`[${TAG}] cannot open ${file}; check the directory exists and is writable`, { cause });
    }
    this.#db.exec(`CREATE TABLE IF NOT EXISTS ingest_manifest (
      source       TEXT NOT NULL,
      external_id  TEXT NOT NULL,
      checksum     TEXT NOT NULL CHECK (length(checksum) = 64),
      object_key   TEXT NOT NULL,
      bytes        INTEGER NOT NULL,
      run_id       TEXT NOT NULL,
      published_at TEXT NOT NULL,
      UNIQUE (source, external_id, checksum)
    )`);
    this.#find = this.#db.prepare('SELECT * FROM ingest_manifest WHERE source = ? AND external_id = ?');
    this.#get = this.#db.prepare('SELECT * FROM ingest_manifest WHERE source = ? AND external_id = ? AND checksum = ?');
    // Without the UNIQUE constraint, DO NOTHING would be a no-op and every retry would add a row.
    this.#insert = this.#db.prepare(`
      INSERT INTO ingest_manifest (source, external_id, checksum, object_key, bytes, run_id, published_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (source, external_id, checksum) DO NOTHING
      RETURNING *`);
  }

  async find(source: string, externalId: string): Promise<readonly ManifestEntry[]> {
    validateManifestIdentity(TAG, source, externalId);
    return this.#run(() => (this.#find.all(source, externalId) as unknown as Row[]).map(toEntry));
  }

  async get(source: string, externalId: string, checksum: string): Promise<ManifestEntry | undefined> {
    validateManifestIdentity(TAG, source, externalId, checksum);
    const row = this.#run(() => this.#get.get(source, externalId, checksum) as Row | undefined);
    return row ? toEntry(row) : undefined;
  }

  async register(entry: ManifestEntry): Promise<RegisterResult> {
    validateManifestEntry(TAG, entry);
    return this.#run(() =>
      immediateTransaction(this.#db, (): RegisterResult => {
        // The re-check under the transaction: the write lock is held, so no one can insert in between.
        const existing = this.#get.get(entry.source, entry.externalId, entry.checksum) as Row | undefined;
        if (existing) return settleExistingRow(entry, toEntry(existing));
        const won = this.#insert.get(
          entry.source,
          entry.externalId,
          entry.checksum,
          entry.key,
          entry.bytes,
          entry.runId,
          entry.publishedAt,
        ) as Row | undefined;
        if (won) return { kind: 'registered', entry: toEntry(won) };
        const raced = this.#get.get(entry.source, entry.externalId, entry.checksum) as Row | undefined;
        if (!raced)
          throw new AdapterError(
            `[${TAG}] insert of ${entry.source}/${entry.externalId} conflicted but no row exists; the database was modified externally`,
          );
        return settleExistingRow(entry, toEntry(raced));
      }),
    );
  }

  async *list(): AsyncIterable<ManifestEntry> {
    for (const row of this.#db.prepare('SELECT * FROM ingest_manifest').iterate() as unknown as IterableIterator<Row>) yield toEntry(row);
  }

  close(): void {
    this.#db.close();
  }

  #run<T>(fn: () => T): T {
    return runSqlite(TAG, fn);
  }
}
