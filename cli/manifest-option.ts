import type { LocalBackend } from '../functions/local/compose.js';
import { parsePostgresUrl, postgresPool } from '../functions/postgres/connection.js';
import { PostgresManifestStore } from '../functions/postgres/postgres-manifest-store.js';
import type { ManifestStore } from '../shared/ports/manifest-store.port.js';

/** The manifest a local command uses, and how to let it go. */
export interface OpenedManifest {
  readonly manifest: ManifestStore;
  /** Where it lives, for messages (never a password). */
  readonly display: string;
  close(): Promise<void>;
}

/**
 * `--manifest URL` on `tessera ingest` and `tessera reconcile --manifest`: the
 * design note's PostgreSQL `ingest_manifest` (created if absent) instead of the
 * backend directory's SQLite manifest. The objects stay in the local backend's
 * source store either way; only the registry moves.
 */
export async function openManifest(url: string | undefined, backend: LocalBackend): Promise<OpenedManifest> {
  if (url === undefined) {
    return { manifest: backend.manifest, display: `${backend.manifest.name} (${backend.dir}/manifest.db)`, close: async () => {} };
  }
  const { display } = parsePostgresUrl(url);
  const pool = postgresPool(url, { max: 4 });
  const manifest = new PostgresManifestStore(pool);
  try {
    await manifest.migrate();
  } catch (error) {
    await pool.end();
    throw error;
  }
  return { manifest, display, close: () => pool.end() };
}
