import { assertNever } from '../domain/claim.js';
import type { Clock } from '../ports/clock.port.js';
import type { ManifestStore } from '../ports/manifest-store.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { DEFAULT_PUBLISHED_PREFIX, DEFAULT_STAGING_PREFIX, parsePublishedKey } from './ingest.js';

export interface ManifestReconcileReport {
  readonly prefix: string;
  readonly objectsChecked: number;
  readonly rowsChecked: number;
  /**
   * Objects of the ingest layout (`{source}/{item}/{sha256}/{asset}.tif`) that no
   * manifest row names: a promotion that crashed between its copy and its
   * commit (a retry of that ingest registers it), or a foreign writer.
   */
  readonly objectsWithoutRow: readonly string[];
  /**
   * Objects under the prefix that are not of the ingest layout: scenes uploaded
   * directly, which tile without ingestion (docs/ingest.md, "Which scenes tile"). Not an alarm.
   */
  readonly notIngested: readonly string[];
  /** Rows whose object is gone: something deleted published data. An alarm. */
  readonly rowsWithoutObject: readonly {
    readonly source: string;
    readonly externalId: string;
    readonly checksum: string;
    readonly key: string;
  }[];
  /** Rows whose object is there with another size: it was replaced behind ingestion's back. An alarm. */
  readonly sizeMismatches: readonly { readonly key: string; readonly rowBytes: number; readonly objectBytes: number }[];
}

/**
 * Compare the published prefix with the manifest, both ways (design note 2,
 * "Reconciliation cadence"). Read-only: it reports; a retried ingest repairs an
 * object without a row, an operator the rest.
 */
export async function reconcileManifest(
  deps: { readonly store: ObjectStore; readonly manifest: ManifestStore; readonly telemetry: Telemetry },
  options: { readonly publishedPrefix?: string | undefined } = {},
): Promise<ManifestReconcileReport> {
  const prefix = options.publishedPrefix ?? DEFAULT_PUBLISHED_PREFIX;
  const objects = new Map<string, number>();
  for await (const head of deps.store.list(prefix)) objects.set(head.key, head.size);
  const registered = new Set<string>();
  const rowsWithoutObject: { source: string; externalId: string; checksum: string; key: string }[] = [];
  const sizeMismatches: { key: string; rowBytes: number; objectBytes: number }[] = [];
  let rowsChecked = 0;
  for await (const row of deps.manifest.list()) {
    if (!row.key.startsWith(prefix)) continue;
    rowsChecked++;
    registered.add(row.key);
    const size = objects.get(row.key);
    if (size === undefined)
      rowsWithoutObject.push({ source: row.source, externalId: row.externalId, checksum: row.checksum, key: row.key });
    else if (size !== row.bytes) sizeMismatches.push({ key: row.key, rowBytes: row.bytes, objectBytes: size });
  }
  const unregistered = [...objects.keys()].filter((k) => !registered.has(k)).sort();
  const objectsWithoutRow = unregistered.filter((k) => parsePublishedKey(k, prefix) !== undefined);
  const notIngested = unregistered.filter((k) => parsePublishedKey(k, prefix) === undefined);
  rowsWithoutObject.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const report = { prefix, objectsChecked: objects.size, rowsChecked, objectsWithoutRow, notIngested, rowsWithoutObject, sizeMismatches };
  const alarm = rowsWithoutObject.length + sizeMismatches.length > 0;
  deps.telemetry.log(alarm ? 'ERROR' : objectsWithoutRow.length > 0 ? 'WARN' : 'INFO', 'manifest-reconciled', {
    prefix,
    manifest: deps.manifest.name,
    objectsChecked: objects.size,
    rowsChecked,
    objectsWithoutRow: objectsWithoutRow.length,
    notIngested: notIngested.length,
    rowsWithoutObject: rowsWithoutObject.length,
    sizeMismatches: sizeMismatches.length,
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
