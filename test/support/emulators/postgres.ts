import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { findPostgresBin, install, POSTGRES_INSTALL_HINT } from '../../../scripts/emulators/postgres.mjs';
import { freePort, type Started } from './process.js';
import type { PostgresEndpoints } from './types.js';

const run = promisify(execFile);

/** The OS user the server runs as when we are root (initdb and postgres refuse to run as root). */
const PG_USER = 'postgres';
/** The database the tests use, with PostGIS created in it. */
const DATABASE = 'tessera';

/**
 * Starts a throwaway PostgreSQL 15 (+ PostGIS 3) for the run: initdb into a
 * temp dir, `pg_ctl start -w` on 127.0.0.1 and a free port, `trust` auth for
 * local TCP only, then `CREATE DATABASE tessera` with the postgis extension.
 * Durability is off (fsync, synchronous_commit, full_page_writes): the data
 * dies with the run, and it keeps startup near a second on two busy cores.
 * `durable: true` leaves PostgreSQL's defaults instead (all three on, so every
 * commit waits for its WAL flush, as a deployed server does): the streams
 * benchmark's headline row; `parentDir` puts the cluster on a chosen disk
 * (the system temp dir may be a tmpfs, where a flush costs nothing).
 *
 * Run as root (CI), every server command goes through `runuser -u postgres`.
 * A missing server or PostGIS fails the run with the install command; no skip.
 */
export async function start(
  options: { readonly durable?: boolean; readonly parentDir?: string } = {},
): Promise<{ endpoints: PostgresEndpoints; stops: Started[] }> {
  await install();
  const bin = findPostgresBin();
  if (!bin) throw new Error(`PostgreSQL 15 is not installed: ${POSTGRES_INSTALL_HINT}`);
  const asRoot = process.getuid?.() === 0;
  const t0 = Date.now();
  const dir = mkdtempSync(join(options.parentDir ?? tmpdir(), 'tessera-pg-'));
  const data = join(dir, 'data');
  if (asRoot) {
    const { stdout } = await run('id', ['-u', PG_USER]);
    const { stdout: gid } = await run('id', ['-g', PG_USER]);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  chmodSync(dir, 0o700);
  const pg = (tool: string, args: readonly string[]) =>
    asRoot ? run('runuser', ['-u', PG_USER, '--', join(bin, tool), ...args]) : run(join(bin, tool), [...args]);
  const port = await freePort();
  const fail = async (what: string, error: unknown): Promise<never> => {
    const e = error as { stderr?: string; message?: string };
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`PostgreSQL ${what} failed: ${e.stderr || e.message || String(error)}\n(${POSTGRES_INSTALL_HINT})`);
  };
  try {
    await pg('initdb', ['-D', data, '-U', PG_USER, '--auth=trust', '--no-sync', '--encoding=UTF8', '--locale=C.UTF-8']);
  } catch (error) {
    await fail('initdb', error);
  }
  const serverOptions = [
    `-p ${port}`,
    "-c listen_addresses='127.0.0.1'",
    `-c unix_socket_directories='${dir}'`,
    ...(options.durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off']),
    // The contract's 16 concurrent registrations and the sink storm, plus pools of several test files at once.
    '-c max_connections=200',
  ].join(' ');
  try {
    await pg('pg_ctl', ['start', '-w', '-t', '60', '-D', data, '-l', join(dir, 'server.log'), '-o', serverOptions]);
  } catch (error) {
    await fail('pg_ctl start', error);
  }
  const stop = async () => {
    await pg('pg_ctl', ['stop', '-D', data, '-m', 'immediate', '-w']).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  const admin = `postgres://${PG_USER}@127.0.0.1:${port}/postgres`;
  const url = `postgres://${PG_USER}@127.0.0.1:${port}/${DATABASE}`;
  try {
    const { default: pgDriver } = await import('pg');
    const c1 = new pgDriver.Client({ connectionString: admin });
    await c1.connect();
    await c1.query(`CREATE DATABASE ${DATABASE}`);
    await c1.end();
    const c2 = new pgDriver.Client({ connectionString: url });
    await c2.connect();
    await c2.query('CREATE EXTENSION IF NOT EXISTS postgis');
    await c2.end();
  } catch (error) {
    await stop();
    throw new Error(
      `PostgreSQL started but the ${DATABASE} database with PostGIS could not be made: ${String(error)}\n(${POSTGRES_INSTALL_HINT})`,
    );
  }
  if (process.env.TESSERA_EMULATOR_TIMINGS) console.error(`[emulators] PostgreSQL + PostGIS ready in ${Date.now() - t0} ms`);
  return { endpoints: { url, port }, stops: [{ name: 'PostgreSQL', stop }] };
}
