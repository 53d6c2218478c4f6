import { assertNever } from '../domain/claim.js';
import type { Clock } from '../ports/clock.port.js';
import type { ManifestEntry, ManifestStore } from '../ports/manifest-store.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { DEFAULT_PUBLISHED_PREFIX, DEFAULT_STAGING_PREFIX, parsePublishedKey } from './ingest.js';

export interface ManifestReconcileReport {
  readonly prefix: string;
  readonly objectsChecked: number;
  readonly rowsChecked: number;
  /**
   * Objects of the ingest layout (`{source}/{item}/{sha256}/{asset}.tif`) that no
   * manifest row names, even when read again after the listings: a promotion that
   * crashed between its copy and its commit (a retry of that ingest registers it),
   * one still between the two, or a foreign writer.
   */
  readonly objectsWithoutRow: readonly string[];
  /**
   * Objects under the prefix that are not of the ingest layout: scenes uploaded
   * directly, which tile without ingestion (docs/ingest.md, "Which scenes tile"). Not an alarm.
   */
  readonly notIngested: readonly string[];
  /** Rows whose object is gone, confirmed by a head after the listing: something deleted published data. An alarm. */
  readonly rowsWithoutObject: readonly {
    readonly source: string;
    readonly externalId: string;
    readonly checksum: string;
    readonly key: string;
  }[];
  /** Rows whose object is there with another size, confirmed by a head: it was replaced behind ingestion's back. An alarm. */
  readonly sizeMismatches: readonly { readonly key: string; readonly rowBytes: number; readonly objectBytes: number }[];
  /**
   * Findings of the two listings that the re-check dissolved: an object registered after the rows were
   * listed (an ingest between the listings), a row whose object a lagging listing missed. Not an alarm;
   * counted so a reconcile that raced live ingestion says so.
   */
  readonly settledByRecheck: number;
}

/**
 * Compare the published prefix with the manifest, both ways (design note 2,
 * "Reconciliation cadence"). Read-only: it reports; a retried ingest repairs an
 * object without a row, an operator the rest.
 *
 * Ingestion runs while this reads, so the order of the reads decides what a race looks like:
 * 1. the rows are listed first. Ingestion copies before it registers, so the object of every row
 *    listed here was in place before step 2 began; read the other way round, an ingest that copied
 *    and registered between the two listings looked like a row without its object, the alarm that
 *    means published data was deleted.
 * 2. then the objects.
 * 3. every finding is read again, one by one, before it is reported: a row without an object, or
 *    with another size, re-heads the object (a listing that lagged is no deletion); an object without
 *    a row re-reads its row by identity (an ingest that registered after step 1 is no crash). Only
 *    what survives the re-check is reported, and only a surviving alarm is logged at ERROR.
 */
export async function reconcileManifest(
  deps: { readonly store: ObjectStore; readonly manifest: ManifestStore; readonly telemetry: Telemetry },
  options: { readonly publishedPrefix?: string | undefined } = {},
): Promise<ManifestReconcileReport> {
  const prefix = options.publishedPrefix ?? DEFAULT_PUBLISHED_PREFIX;
  const rows: ManifestEntry[] = [];
  for await (const row of deps.manifest.list()) if (row.key.startsWith(prefix)) rows.push(row);
  const objects = new Map<string, number>();
  for await (const head of deps.store.list(prefix)) objects.set(head.key, head.size);

  let settledByRecheck = 0;
  const registered = new Set<string>();
  const rowsWithoutObject: { source: string; externalId: string; checksum: string; key: string }[] = [];
  const sizeMismatches: { key: string; rowBytes: number; objectBytes: number }[] = [];
  for (const row of rows) {
    registered.add(row.key);
    if (objects.get(row.key) === row.bytes) continue;
    const head = await deps.store.head(row.key);
    if (head === undefined)
      rowsWithoutObject.push({ source: row.source, externalId: row.externalId, checksum: row.checksum, key: row.key });
    else if (head.size !== row.bytes) sizeMismatches.push({ key: row.key, rowBytes: row.bytes, objectBytes: head.size });
    else settledByRecheck++;
  }
  const unregistered = [...objects.keys()].filter((k) => !registered.has(k)).sort();
  const notIngested = unregistered.filter((k) => parsePublishedKey(k, prefix) === undefined);
  const objectsWithoutRow: string[] = [];
  for (const key of unregistered) {
    const id = parsePublishedKey(key, prefix);
    if (id === undefined) continue;
    const row = await deps.manifest.get(id.source, id.externalId, id.checksum);
    if (row?.key === key) settledByRecheck++;
    else objectsWithoutRow.push(key);
  }
  rowsWithoutObject.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  sizeMismatches.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const report = {
    prefix,
    objectsChecked: objects.size,
    rowsChecked: rows.length,
    objectsWithoutRow,
    notIngested,
    rowsWithoutObject,
    sizeMismatches,
    settledByRecheck,
  };
  const alarm = rowsWithoutObject.length + sizeMismatches.length > 0;
  deps.telemetry.log(alarm ? 'ERROR' : objectsWithoutRow.length > 0 ? 'WARN' : 'INFO', 'manifest-reconciled', {
    prefix,
    manifest: deps.manifest.name,
    objectsChecked: objects.size,
    rowsChecked: rows.length,
    objectsWithoutRow: objectsWithoutRow.length,
    notIngested: notIngested.length,
    rowsWithoutObject: rowsWithoutObject.length,
    sizeMismatches: sizeMismatches.length,
    settledByRecheck,
  });
  return report;
}

export const DEFAULT_STAGING_RETENTION_MS = 7 * 86_400_000;

export interface StagingSweepReport {
  readonly checked: number;
  readonly deleted: readonly string[];
  /** Objects that changed between the listing and the delete: left alone (a conditional delete never removes what it did not see). */
  readonly changed: readonly string[];
  readonly kept: number;
}

/**
 * Delete staging objects older than the retention (default 7 days): the local
 * counterpart of the S3 / GCS lifecycle rules and the Azure management policy.
 * Every delete is conditional on the version the listing saw (deleteIfVersion).
 * Staging keys are unique per attempt and never rewritten, so an old one is an
 * attempt long dead: a refusal kept for inspection, or a crash before promotion.
 */
export async function sweepStaging(
  deps: { readonly store: ObjectStore; readonly clock: Clock; readonly telemetry: Telemetry },
  options: { readonly stagingPrefix?: string | undefined; readonly retentionMs?: number | undefined } = {},
): Promise<StagingSweepReport> {
  const prefix = options.stagingPrefix ?? DEFAULT_STAGING_PREFIX;
  const retentionMs = options.retentionMs ?? DEFAULT_STAGING_RETENTION_MS;
  const cutoff = deps.clock.now() - retentionMs;
  const deleted: string[] = [];
  const changed: string[] = [];
  let checked = 0;
  for await (const head of deps.store.list(prefix)) {
    checked++;
    if (head.lastModified >= cutoff) continue;
    const r = await deps.store.deleteIfVersion(head.key, head.version);
    switch (r.kind) {
      case 'deleted':
        deleted.push(head.key);
        break;
      case 'absent':
        // Gone already (another sweep, or our own delete whose answer was lost): nothing to do.
        break;
      case 'version-mismatch':
        changed.push(head.key);
        break;
      default:
        return assertNever(r, 'delete result');
    }
  }
  deleted.sort();
  changed.sort();
  const report = { checked, deleted, changed, kept: checked - deleted.length - changed.length };
  deps.telemetry.log('INFO', 'staging-swept', { prefix, retentionMs, checked, deleted: deleted.length, changed: changed.length });
  return report;
}
