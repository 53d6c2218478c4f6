import { createRequire } from 'node:module';
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { AdapterError } from '../../../shared/domain/errors.js';

/**
 * The local backend's SQLite, from Node's built-in `node:sqlite` (Node >= 22.13
 * without a flag). It replaced better-sqlite3, whose native addon had to be
 * compiled for the exact Node ABI that runs it: docs/local-backend.md has the
 * reasons and the measurements.
 *
 * Node 22 marks the module experimental and prints one ExperimentalWarning
 * when it is first loaded; Node 24 (24.22.3, which the local backend runs on)
 * prints none. Tessera pins the Node versions (package.json, scripts/node.mjs),
 * so the API cannot change under us without a deliberate bump that the
 * contract tests then check; the notice is therefore dropped where it is
 * printed, and only it: every other warning, experimental or not, still prints.
 */
const SQLITE_NOTICE = /^SQLite is an experimental feature/;

function loadSqlite(): typeof import('node:sqlite') {
  const emit = process.emitWarning;
  process.emitWarning = function emitUnlessSqliteNotice(this: typeof process, warning: string | Error, ...rest: unknown[]) {
    const message = typeof warning === 'string' ? warning : warning.message;
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const name = typeof warning === 'string' ? type : warning.name;
    if (name === 'ExperimentalWarning' && SQLITE_NOTICE.test(message)) return;
    return (emit as (...args: unknown[]) => void).call(this, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    // Loaded here, not by a static import, so that the filter is in place first.
    return createRequire(import.meta.url)('node:sqlite') as typeof import('node:sqlite');
  } finally {
    process.emitWarning = emit;
  }
}

let sqlite: typeof import('node:sqlite') | undefined;

/** Open (or create) a database file for one adapter: WAL, `synchronous = NORMAL`, a busy timeout. */
export function openSqlite(file: string, busyTimeoutMs: number): DatabaseSync {
  sqlite ??= loadSqlite();
  // The busy timeout must be in force before the first statement: switching a fresh file to WAL
  // takes a lock, and connections opening at once would otherwise fail at once with SQLITE_BUSY.
  // (better-sqlite3 opened with a 5 s timeout; node:sqlite's default is none.)
  const timeout = Math.trunc(busyTimeoutMs);
  const db = new sqlite.DatabaseSync(file, { timeout });
  // WAL keeps readers off the writers' backs; NORMAL is durable across a process crash (not a power cut), which is what a local run needs.
  db.exec(`PRAGMA busy_timeout = ${timeout}; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;`);
  return db;
}

/**
 * A prepared statement that takes a request object as its named parameters.
 * The ports' request objects may carry fields a statement does not use;
 * better-sqlite3 ignored those, node:sqlite refuses them unless told.
 */
export function prepareNamed(db: DatabaseSync, sql: string): StatementSync {
  const statement = db.prepare(sql);
  statement.setAllowUnknownNamedParameters(true);
  return statement;
}

/** A port's request object as a statement's named parameters (its fields are strings and numbers). */
export function named(request: object): Record<string, SQLInputValue> {
  return request as Record<string, SQLInputValue>;
}

/**
 * Run `fn` in one write transaction. IMMEDIATE takes the write lock up front
 * (waiting up to the busy timeout), so two processes that both read then write
 * cannot deadlock on a lock upgrade, which a deferred BEGIN can.
 */
export function immediateTransaction<T>(db: DatabaseSync, fn: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = fn();
    db.exec('COMMIT');
    return result;
  } catch (e) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw e;
  }
}

/** SQLITE_BUSY (5) or SQLITE_LOCKED (6), as node:sqlite reports them (`errcode`, primary code in the low byte). */
export function isSqliteBusy(e: unknown): boolean {
  const code = (e as { errcode?: unknown }).errcode;
  return typeof code === 'number' && ((code & 0xff) === 5 || (code & 0xff) === 6);
}

/**
 * Runs one statement (or transaction) for an adapter, turning SQLite's failure
 * into a typed AdapterError: retryable when the file stayed locked past the
 * busy timeout (too many writers), not otherwise. AdapterErrors pass through.
 */
export function runSqlite<T>(tag: string, fn: () => T): T {
  try {
    return fn();
  } catch (cause) {
    if (cause instanceof AdapterError) throw cause;
    const busy = isSqliteBusy(cause);
    throw new AdapterError(
      `[${tag}] ${busy ? 'database stayed locked past the busy timeout; too many writers on one file' : 'statement failed'}`,
      { cause, retryable: busy },
    );
  }
}
