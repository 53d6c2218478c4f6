import { odata, type TableClient, type TableEntityResult } from '@azure/data-tables';
import { AdapterError } from '../../../shared/domain/errors.js';
import {
  manifestEntryOfRecord,
  manifestIdentityDigest,
  settleExistingRow,
  validateManifestEntry,
  validateManifestIdentity,
} from '../../../shared/domain/manifest-entry.js';
import type { ManifestEntry, ManifestStore, RegisterResult } from '../../../shared/ports/manifest-store.port.js';
import { isFailure, storageFailure } from './rest-error.js';

const TAG = 'manifest-store:azure-table';

/** The entity as stored; the plain ids are properties because the keys are digests. */
interface ManifestEntity {
  partitionKey: string;
  rowKey: string;
  source: string;
  external_id: string;
  object_key: string;
  bytes: number;
  run_id: string;
  published_at: string;
}

/**
 * The ingest manifest in an Azure Table.
 *
 * Keys: PartitionKey = {@link manifestIdentityDigest} of (source, externalId),
 * RowKey = the checksum. Both are lower-case hex, so they satisfy the Table key
 * rules whatever the ids hold (keys may not contain `/`, `\`, `#`, `?` or
 * control characters, and are at most 1 KiB); every version of one item id
 * shares a partition, so `find` is one partition query.
 *
 * register is Insert Entity, create-only by nature: a 409 EntityAlreadyExists
 * means a row holds the identity. It is read back: our own runId is our insert
 * resent by the SDK after a lost answer (`registered`); any other is
 * `already-published`. Nothing ever updates or deletes a manifest row.
 *
 * @example
 * const manifest = new AzureTableManifestStore(TableClient.fromConnectionString(cs, config.manifestTable));
 */
export class AzureTableManifestStore implements ManifestStore {
  readonly name = 'azure-table';

  /** @param table a client for an existing table (infra/ creates it; tests create their own). */
  constructor(private readonly table: TableClient) {}

  async find(source: string, externalId: string): Promise<readonly ManifestEntry[]> {
    validateManifestIdentity(TAG, source, externalId);
    const partitionKey = manifestIdentityDigest(source, externalId);
    const rows: ManifestEntry[] = [];
    try {
      const pages = this.table.listEntities<ManifestEntity>({ queryOptions: { filter: odata`PartitionKey eq ${partitionKey}` } });
      for await (const e of pages) rows.push(this.toEntry(e));
    } catch (e) {
      throw e instanceof AdapterError ? e : this.failed(`lookup of ${source}/${externalId}`, e);
    }
    return rows;
  }

  async get(source: string, externalId: string, checksum: string): Promise<ManifestEntry | undefined> {
    validateManifestIdentity(TAG, source, externalId, checksum);
    let entity: TableEntityResult<ManifestEntity>;
    try {
      entity = await this.table.getEntity<ManifestEntity>(manifestIdentityDigest(source, externalId), checksum);
    } catch (e) {
      if (isFailure(e, 404)) return undefined;
      throw this.failed(`read of ${source}/${externalId}@${checksum.slice(0, 12)}`, e);
    }
    return this.toEntry(entity);
  }

  async register(entry: ManifestEntry): Promise<RegisterResult> {
    validateManifestEntry(TAG, entry);
    const entity: ManifestEntity = {
      partitionKey: manifestIdentityDigest(entry.source, entry.externalId),
      rowKey: entry.checksum,
      source: entry.source,
      external_id: entry.externalId,
      object_key: entry.key,
      bytes: entry.bytes,
      run_id: entry.runId,
      published_at: entry.publishedAt,
    };
    try {
      await this.table.createEntity(entity);
      return { kind: 'registered', entry };
    } catch (e) {
      if (!isFailure(e, 409, 'EntityAlreadyExists')) throw this.failed(`registration of ${entry.source}/${entry.externalId}`, e);
    }
    const existing = await this.get(entry.source, entry.externalId, entry.checksum);
    if (!existing) {
      // 409 says a row exists and the manifest never deletes: not the service's documented behaviour.
      throw new AdapterError(`[${TAG}] registration of ${entry.source}/${entry.externalId} met 409 but no row is there; retry`, {
        retryable: true,
      });
    }
    return settleExistingRow(entry, existing);
  }

  async *list(): AsyncIterable<ManifestEntry> {
    try {
      for await (const e of this.table.listEntities<ManifestEntity>()) yield this.toEntry(e);
    } catch (e) {
      throw e instanceof AdapterError ? e : this.failed('listing of the manifest table', e);
    }
  }

  private toEntry(e: Partial<ManifestEntity> & { rowKey?: string }): ManifestEntry {
    // The checksum is the RowKey (the identity digest is the PartitionKey).
    const entry = manifestEntryOfRecord({ ...e, checksum: e.rowKey });
    if (!entry) {
      throw new AdapterError(
        `[${TAG}] entity ${JSON.stringify(e.partitionKey ?? '?')}/${JSON.stringify(e.rowKey ?? '?')} in table ${this.table.tableName} ` +
          'is not a Tessera manifest row: give the manifest a table of its own',
      );
    }
    return entry;
  }

  private failed(what: string, cause: unknown): AdapterError {
    return storageFailure(cause, what, {
      tag: TAG,
      kind: 'table',
      resource: this.table.tableName,
      missingCode: 'TableNotFound',
      role: 'Storage Table Data Contributor',
    });
  }
}
