import type { DatabaseSync, StatementSync } from 'node:sqlite';
import {
  type ClaimResult,
  type ClaimRow,
  type ClaimState,
  type CommitResult,
  type HeartbeatResult,
  isOwnLease,
} from '../../../shared/domain/claim.js';
import { AdapterError } from '../../../shared/domain/errors.js';
import type {
  ClaimRequest,
  ClaimStore,
  CommitRequest,
  DeleteClaimRequest,
  DeleteClaimResult,
  HeartbeatRequest,
} from '../../../shared/ports/claim-store.port.js';
import { named, openSqlite, prepareNamed, runSqlite } from './sqlite-database.js';

interface Row {
  job_id: string;
  state: ClaimState;
  owner: string;
  lease_until: number;
  expires_at: number;
  output_uri: string | null;
  finished_at: number | null;
  prev_owner: string | null;
}

const toClaimRow = (r: Row): ClaimRow => ({
  jobId: r.job_id,
  state: r.state,
  owner: r.owner,
  leaseUntil: r.lease_until,
  expiresAt: r.expires_at,
  outputUri: r.output_uri ?? undefined,
  finishedAt: r.finished_at ?? undefined,
});

/**
 * Claims in SQLite, the local backend's default. Each claim, commit and
 * heartbeat is ONE conditional statement; SQLite serialises writers on the
 * database lock, so any number of connections (threads, processes) on one
 * file see exactly one winner. WAL mode keeps readers off the writers' backs.
 *
 * @example
 * const claims = new SqliteClaimStore('.tessera/claims.db');
 */
export class SqliteClaimStore implements ClaimStore {
  readonly name = 'sqlite';
  readonly #db: DatabaseSync;
  readonly #claim: StatementSync;
  readonly #commit: StatementSync;
  readonly #heartbeat: StatementSync;
  readonly #get: StatementSync;
  readonly #delete: StatementSync;

  constructor(file: string, options: { busyTimeoutMs?: number } = {}) {
    try {
      this.#db = openSqlite(file, options.busyTimeoutMs ?? 10_000);
    } catch (cause) {
      throw new AdapterError(`[claim-store:sqlite] cannot open ${file}; check the directory exists and is writable`, { cause });
    }
    this.#db.exec(`CREATE TABLE IF NOT EXISTS claims (
      job_id      TEXT PRIMARY KEY,
      state       TEXT NOT NULL CHECK (state IN ('CLAIMED', 'COMMITTED')),
      owner       TEXT NOT NULL,
      lease_until INTEGER NOT NULL,
      expires_at  INTEGER NOT NULL,
      output_uri  TEXT,
      finished_at INTEGER,
      prev_owner  TEXT
    ) WITHOUT ROWID`);
    // Timeline of a claim: absent -> CLAIMED(owner, lease) -> COMMITTED.
    // A CLAIMED row whose lease lapsed (lease_until < now) may be taken over;
    // a COMMITTED row never matches. prev_owner lets one statement report a takeover.
    this.#claim = prepareNamed(
      this.#db,
      `
      INSERT INTO claims (job_id, state, owner, lease_until, expires_at)
      VALUES (@jobId, 'CLAIMED', @owner, @leaseUntil, @expiresAt)
      ON CONFLICT (job_id) DO UPDATE SET
        owner = excluded.owner, lease_until = excluded.lease_until, expires_at = excluded.expires_at,
        output_uri = NULL, finished_at = NULL, prev_owner = claims.owner
      WHERE claims.state = 'CLAIMED' AND claims.lease_until < @now
      RETURNING *`,
    );
    this.#commit = prepareNamed(
      this.#db,
      `
      UPDATE claims SET
        state = 'COMMITTED', output_uri = @outputUri,
        finished_at = CASE WHEN state = 'COMMITTED' THEN finished_at ELSE @now END
      WHERE job_id = @jobId AND owner = @owner
      RETURNING *`,
    );
    this.#heartbeat = prepareNamed(
      this.#db,
      `
      UPDATE claims SET lease_until = @leaseUntil
      WHERE job_id = @jobId AND owner = @owner AND state = 'CLAIMED' AND lease_until >= @now
      RETURNING lease_until`,
    );
    this.#get = this.#db.prepare('SELECT * FROM claims WHERE job_id = ?');
    // Cleanup only (tessera verify): the row must still be in the state and owner its creator left.
    this.#delete = prepareNamed(
      this.#db,
      'DELETE FROM claims WHERE job_id = @jobId AND state = @state AND owner = @owner RETURNING job_id',
    );
  }

  async claim(req: ClaimRequest): Promise<ClaimResult> {
    const won = this.#run(() => this.#claim.get(named(req)) as Row | undefined);
    if (won) return { kind: 'claimed', row: toClaimRow(won), stolenFrom: won.prev_owner ?? undefined };
    const raw = this.#run(() => this.#get.get(req.jobId) as Row | undefined);
    if (!raw)
      throw new AdapterError(`[claim-store:sqlite] claim of ${req.jobId} lost but no row exists; the database was modified externally`);
    const current = toClaimRow(raw);
    // The caller's own claim, retried after its answer was lost: ours, not held by ourselves; and if it took the
    // lease over, still a takeover from the owner the row records (else the zombie's lease-stolen had no match).
    if (isOwnLease(current, req)) return { kind: 'claimed', row: current, stolenFrom: raw.prev_owner ?? undefined };
    return current.state === 'COMMITTED'
      ? { kind: 'done', outputUri: current.outputUri, finishedAt: current.finishedAt }
      : { kind: 'held', by: current.owner, leaseUntil: current.leaseUntil };
  }

  async commit(req: CommitRequest): Promise<CommitResult> {
    const row = this.#run(() => this.#commit.get(named(req)) as Row | undefined);
    if (row) return { kind: 'committed', row: toClaimRow(row) };
    return { kind: 'lease-stolen', current: await this.get(req.jobId) };
  }

  async heartbeat(req: HeartbeatRequest): Promise<HeartbeatResult> {
    const row = this.#run(() => this.#heartbeat.get(named(req)) as { lease_until: number } | undefined);
    if (row) return { kind: 'extended', leaseUntil: row.lease_until };
    const current = await this.get(req.jobId);
    // A retried release (lease set into the past) meets its own row: it was extended.
    return isOwnLease(current, req) ? { kind: 'extended', leaseUntil: req.leaseUntil } : { kind: 'lost', current };
  }

  async deleteIf(req: DeleteClaimRequest): Promise<DeleteClaimResult> {
    const gone = this.#run(() => this.#delete.get(named(req)) as { job_id: string } | undefined);
    if (gone) return { kind: 'deleted' };
    const current = await this.get(req.jobId);
    return current ? { kind: 'mismatch', current } : { kind: 'absent' };
  }

  async get(jobId: string): Promise<ClaimRow | undefined> {
    const row = this.#run(() => this.#get.get(jobId) as Row | undefined);
    return row ? toClaimRow(row) : undefined;
  }

  async *list(): AsyncIterable<ClaimRow> {
    for (const row of this.#db.prepare('SELECT * FROM claims').iterate() as unknown as IterableIterator<Row>) yield toClaimRow(row);
  }

  close(): void {
    this.#db.close();
  }

  #run<T>(fn: () => T): T {
    return runSqlite('claim-store:sqlite', fn);
  }
}
