import { AdapterError } from '../../shared/domain/errors.js';

/**
 * What a `pg` call failed with. Server errors carry a SQLSTATE in `code`
 * (e.g. `42P01` undefined table); transport failures carry a Node errno code
 * (`ECONNREFUSED`, `ECONNRESET`) or none at all ("Connection terminated").
 */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Whether the same call may succeed later: connection exceptions (class 08),
 * serialization failures and deadlocks (40001, 40P01), insufficient resources
 * (class 53), operator intervention such as a restart (class 57), and transport
 * errors. Anything else (a syntax error, a missing table, bad credentials) is a
 * bug or a configuration problem that a retry cannot fix.
 */
export function isRetryablePg(error: unknown): boolean {
  const code = sqlState(error);
  if (code === undefined) return true;
  if (/^E[A-Z]+$/.test(code)) return true; // ECONNREFUSED, ECONNRESET, ETIMEDOUT, EPIPE ...
  return code.startsWith('08') || code === '40001' || code === '40P01' || code.startsWith('53') || code.startsWith('57');
}

/**
 * A transport failure, a connection exception (class 08), or the server ending the session (57P01 a terminated
 * backend or a shutdown, 57P05 idle_session_timeout, ...); 57014 is a cancelled statement on a live session.
 */
function connectionLost(code: string | undefined): boolean {
  return code === undefined || /^E[A-Z]+$/.test(code) || code.startsWith('08') || code.startsWith('57P');
}

/** The AdapterError for an unexpected PostgreSQL failure: names the adapter and the table, and what to do. */
export function pgFailure(tag: string, table: string, what: string, error: unknown): AdapterError {
  const code = sqlState(error);
  const retryable = isRetryablePg(error);
  const hint =
    code === '42P01'
      ? `table ${table} does not exist: run the adapter's migrate() (CREATE TABLE IF NOT EXISTS) once with a role that may create it`
      : code === '42501'
        ? `the database role may not use ${table}: GRANT SELECT, INSERT ON ${table} to it`
        : code?.startsWith('28')
          ? 'the server refused the credentials: check the user and password in the connection URL'
          : code === '3D000'
            ? 'the database in the connection URL does not exist: create it or fix the URL'
            : retryable
              ? connectionLost(code)
                ? 'the connection was lost (a server restart or failover, an idle timeout, a proxy, the network): retry; the pool opens a new connection'
                : 'the server is overloaded, cancelled the statement, or the transaction conflicted with another: retry'
              : 'this is not a condition the adapter expects: check the server version and the table definition';
  const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
  return new AdapterError(`[${tag}] ${what} on ${table} failed (${code ?? 'no SQLSTATE'}: ${message}); ${hint}`, {
    cause: error,
    retryable,
  });
}
