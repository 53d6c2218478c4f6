/**
 * The ingest manifest (design note 2, "Idempotent ingestion"): one row per
 * published artefact, identified by (source, externalId, checksum). A committed
 * row is the only proof that a complete, validated artefact was published; the
 * object under `key` alone proves nothing (listings lag, a half-copied object
 * looks whole).
 *
 * Adapters: SQLite (local default), PostgreSQL (`ingest_manifest`, UNIQUE
 * (source, external_id, checksum), INSERT ... ON CONFLICT DO NOTHING in one
 * transaction that re-checks), DynamoDB (conditional put on a key over the
 * three), Firestore (create), Table Storage (insert). One contract suite
 * (test/contract/manifest-store.contract.ts) runs against every adapter.
 */
export interface ManifestEntry {
  /** The artefact's origin, e.g. `sentinel-2-l2a`. */
  readonly source: string;
  /** The origin's identifier, e.g. a STAC item id. */
  readonly externalId: string;
  /** Lower-case hex SHA-256 of the published bytes. */
  readonly checksum: string;
  /** The published (final) object key. */
  readonly key: string;
  readonly bytes: number;
  /** The ingest attempt that published it (`run_id`, never a date): recognises a retried insert as its own. */
  readonly runId: string;
  /** ISO-8601, the publisher's clock at commit. Informational. */
  readonly publishedAt: string;
}

/**
 * `registered`: this call's row is in place, including a retry of this same
 * attempt (same runId) whose first answer was lost.
 * `already-published`: another attempt's row holds the identity; `entry` is that row.
 */
export type RegisterResult =
  | { readonly kind: 'registered'; readonly entry: ManifestEntry }
  | { readonly kind: 'already-published'; readonly entry: ManifestEntry };

export interface ManifestStore {
  /** Short adapter name used in messages and logs, e.g. `sqlite`, `postgresql`. */
  readonly name: string;
  /** Every row for one (source, externalId), any checksum: the cheap pre-check before fetching. */
  find(source: string, externalId: string): Promise<readonly ManifestEntry[]>;
  get(source: string, externalId: string, checksum: string): Promise<ManifestEntry | undefined>;
  /** Create-only insert of one row; never replaces an existing row. */
  register(entry: ManifestEntry): Promise<RegisterResult>;
  /** Every row (reconcile). Order is unspecified. */
  list(): AsyncIterable<ManifestEntry>;
}
