// PostgreSQL 15 + PostGIS 3 for the manifest and feature-sink tests (test/support/emulators/postgres.ts starts
// a throwaway server from these binaries). They are Debian packages: .ci/run apt-installs them as root, and so
// does install() here when it runs as root on a machine without them (npm test's pretest); as any other user it
// only checks, and fails with the command to run.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Where the server binaries may live: $TESSERA_PG_BIN, then Debian's layout for major 15. */
export function postgresBinCandidates() {
  return [process.env.TESSERA_PG_BIN, '/usr/lib/postgresql/15/bin'].filter((p) => typeof p === 'string' && p.length > 0);
}

export const POSTGRES_INSTALL_HINT =
  'install PostgreSQL 15 and PostGIS 3 as root: apt-get update && apt-get install -y postgresql-15 postgresql-15-postgis-3 ' +
  '(or point TESSERA_PG_BIN at a PostgreSQL 15 bin directory)';

/** The bin directory holding initdb, pg_ctl and postgres, or undefined. */
export function findPostgresBin() {
  return postgresBinCandidates().find((dir) => ['initdb', 'pg_ctl', 'postgres'].every((b) => existsSync(join(dir, b))));
}

/** PostGIS's control file in the server's share directory (Debian layout; $TESSERA_PG_SHARE overrides). */
export function postgisInstalled() {
  const share = process.env.TESSERA_PG_SHARE ?? '/usr/share/postgresql/15';
  return existsSync(join(share, 'extension', 'postgis.control'));
}

const PACKAGES = ['postgresql-15', 'postgresql-15-postgis-3'];

/** Finds the server and PostGIS; installs the Debian packages when missing and root; else throws with the command. */
export async function install() {
  if (findPostgresBin() && postgisInstalled()) return;
  if (process.getuid?.() === 0 && existsSync('/usr/bin/apt-get') && !process.env.TESSERA_PG_BIN) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    console.error(`[emulators] installing ${PACKAGES.join(' ')} with apt-get`);
    execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '-qq', ...PACKAGES], { stdio: ['ignore', 'ignore', 'inherit'], env });
  }
  if (!findPostgresBin()) throw new Error(`PostgreSQL 15 is not installed: ${POSTGRES_INSTALL_HINT}`);
  if (!postgisInstalled()) throw new Error(`PostGIS 3 is not installed for PostgreSQL 15: ${POSTGRES_INSTALL_HINT}`);
}
