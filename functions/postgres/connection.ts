import pg from 'pg';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { sqlState } from './postgres-error.js';

/** The part of a `pg.Pool` the adapters use, so tests can inject any pool (or a wrapper) without a cast. */
export type PgPool = Pick<pg.Pool, 'connect' | 'query' | 'end'>;

const SCHEMES = new Set(['postgres:', 'postgresql:', 'postgis:']);

/**
 * A connection URL as the CLI and the function env give it (`postgis://` or
 * `postgres://user:pass@host:5432/db?sslmode=require`), normalised for `pg`
 * and checked before any connection: a typo fails here with a message, not as
 * a DNS error on the first tile. The password never appears in a message.
 */
export function parsePostgresUrl(url: string): { readonly connectionString: string; readonly display: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (cause) {
    throw new InvalidParamsError('the PostgreSQL URL does not parse; expected postgis://user:password@host:5432/database', { cause });
  }
  if (!SCHEMES.has(parsed.protocol)) {
    throw new InvalidParamsError(`the PostgreSQL URL has scheme ${parsed.protocol}; use postgis:// or postgres://`);
  }
  if (!parsed.hostname || parsed.pathname.length <= 1) {
    throw new InvalidParamsError(
      `the PostgreSQL URL names no ${parsed.hostname ? 'database' : 'host'}; expected postgis://user:password@host:5432/database`,
    );
  }
  const display = `postgres://${parsed.username ? `${decodeURIComponent(parsed.username)}@` : ''}${parsed.host}${parsed.pathname}`;
  return { connectionString: `postgres://${url.slice(parsed.protocol.length + 2)}`, display };
}

/**
 * A small pool for one function instance or CLI run. Few connections: a
 * serverless fleet of many instances must not exhaust `max_connections`; one
 * insert per tile needs no more. `application_name` shows Tessera in pg_stat_activity.
 *
 * The pool reports a connection the server ended while it sat idle (a restart,
 * a failover, `idle_session_timeout`, a proxy's idle cut) as an `'error'` event
 * of the pool, and Node ends the process on an `'error'` event nobody listens
 * to: one restart of the database would take every warm worker down with it.
 * pg-pool has already dropped that connection when it emits, so the next
 * checkout opens a new one; all that is left to do is to say so (WARN
 * `postgres-connection-lost`, counted). A connection that dies in use fails its
 * query instead, which the adapters turn into a retryable AdapterError
 * (postgres-error.ts), so that costs one retry of the operation.
 *
 * @param options `telemetry`: where the lost connection is logged and counted; without one, a JSON line
 *   on stderr in the same shape (stdout may be a CLI's output)
 */
export function postgresPool(url: string, options: { readonly max?: number; readonly telemetry?: Telemetry } = {}): pg.Pool {
  const { connectionString, display } = parsePostgresUrl(url);
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 4,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    application_name: 'tessera',
  });
  const telemetry = options.telemetry ?? new JsonTelemetry((line) => process.stderr.write(`${line}\n`));
  pool.on('error', (error: Error) => {
    telemetry.count('postgres-connection-lost');
    telemetry.log('WARN', 'postgres-connection-lost', {
      server: display,
      code: sqlState(error) ?? null,
      message: error.message.split('\n')[0],
      note: 'an idle pooled connection was ended by the server or the network; the pool opens a new one on next use',
    });
  });
  return pool;
}

/**
 * Runs `work` in one transaction on one pooled connection: BEGIN, work,
 * COMMIT; ROLLBACK on any failure. A connection that failed is destroyed
 * rather than returned to the pool, so the next call does not inherit it.
 */
export async function inTransaction<T>(pool: PgPool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // A checked-out client reports a dropped connection as an 'error' event as well as failing the query in
  // flight; without a listener that event would crash the process. The query's rejection is what we act on.
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((e: unknown) => {
      broken = e instanceof Error ? e : new Error(String(e));
    });
    throw error;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

/**
 * Runs `statements` once per database even when many processes start at once:
 * `CREATE TABLE IF NOT EXISTS` alone races (two sessions both see no table and
 * one fails on the catalog's unique index), so a transaction-scoped advisory
 * lock serialises the migrations of one adapter.
 */
export async function migrateOnce(pool: PgPool, lockName: string, statements: readonly string[]): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockName]);
    for (const sql of statements) await client.query(sql);
  });
}
