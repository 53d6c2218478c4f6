import { type AttributeValue, GetItemCommand, PutItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { AdapterError } from '../../../shared/domain/errors.js';
import {
  manifestIdentityDigest,
  settleExistingRow,
  validateManifestEntry,
  validateManifestIdentity,
} from '../../../shared/domain/manifest-entry.js';
import type { ManifestEntry, ManifestStore, RegisterResult } from '../../../shared/ports/manifest-store.port.js';
import type { DynamoDbSender } from './dynamodb-claim-store.js';
import { type DynamoTable, isConditionFailure, scanTable, tableFailure } from './dynamodb-table.js';

const TAG = 'manifest-store:dynamodb';

/** The table's partition key (S): {@link manifestIdentityDigest} of (source, externalId). infra/ creates the table. */
export const MANIFEST_PARTITION_KEY = 'pk';
/** The table's sort key (S): the artefact's SHA-256, so one item id can hold several published versions. */
export const MANIFEST_SORT_KEY = 'checksum';

// The one write: a PutItem that lands only where no item has this (pk, checksum). The key spans all three
// parts of the identity, so the condition on the partition key alone is "this exact identity is absent".
const identityIsNew = `attribute_not_exists(#pk)`;

const S = (value: string): AttributeValue => ({ S: value });

/**
 * The ingest manifest in a DynamoDB table (partition key `pk`, sort key `checksum`).
 *
 * - register: ONE PutItem conditioned on `attribute_not_exists(pk)`, with
 *   `ReturnValuesOnConditionCheckFailure: ALL_OLD`, so a lost race names the
 *   winner's row without a second read. A PutItem that landed but whose answer
 *   was lost is sent again by the SDK; that retry fails its condition on our own
 *   item, and the runId in it says the row is ours: `registered`.
 * - find: a consistent Query on the partition key; get: a consistent GetItem;
 *   list: a paginated consistent Scan (reconcile).
 *
 * The partition key is a digest rather than the raw ids because a STAC id may
 * hold any character; the plain `source` and `external_id` are stored beside it.
 *
 * @example
 * const manifest = new DynamoDbManifestStore(new DynamoDBClient({}), config.manifestTable);
 * const r = await manifest.register(entry); // { kind: 'registered' | 'already-published', entry }
 */
export class DynamoDbManifestStore implements ManifestStore {
  readonly name = 'dynamodb';

  /**
   * @param client a DynamoDBClient (or anything with its `send`)
   * @param table the manifest table; infra/ creates it, tests create their own
   */
  constructor(
    private readonly client: DynamoDbSender,
    private readonly table: string,
  ) {
    if (!table) throw new AdapterError(`[${TAG}] no table name given; set TESSERA_MANIFEST_TABLE to the manifest table`);
  }

  async find(source: string, externalId: string): Promise<readonly ManifestEntry[]> {
    validateManifestIdentity(TAG, source, externalId);
    const rows: ManifestEntry[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      let page: { Items?: Record<string, AttributeValue>[] | undefined; LastEvaluatedKey?: Record<string, AttributeValue> | undefined };
      try {
        page = await this.client.send(
          new QueryCommand({
            TableName: this.table,
            KeyConditionExpression: '#pk = :pk',
            ExpressionAttributeNames: { '#pk': MANIFEST_PARTITION_KEY },
            ExpressionAttributeValues: { ':pk': S(manifestIdentityDigest(source, externalId)) },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        );
      } catch (e) {
        throw this.failed(`lookup of ${source}/${externalId}`, e);
      }
      for (const item of page.Items ?? []) rows.push(this.toEntry(item));
      start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return rows;
  }

  async get(source: string, externalId: string, checksum: string): Promise<ManifestEntry | undefined> {
    validateManifestIdentity(TAG, source, externalId, checksum);
    try {
      const out = await this.client.send(
        new GetItemCommand({ TableName: this.table, Key: this.keyOf(source, externalId, checksum), ConsistentRead: true }),
      );
      return out.Item ? this.toEntry(out.Item) : undefined;
    } catch (e) {
      throw this.failed(`read of ${source}/${externalId}@${checksum.slice(0, 12)}`, e);
    }
  }

  async register(entry: ManifestEntry): Promise<RegisterResult> {
    validateManifestEntry(TAG, entry);
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: {
            ...this.keyOf(entry.source, entry.externalId, entry.checksum),
            source: S(entry.source),
            external_id: S(entry.externalId),
            object_key: S(entry.key),
            bytes: { N: String(entry.bytes) },
            run_id: S(entry.runId),
            published_at: S(entry.publishedAt),
          },
          ConditionExpression: identityIsNew,
          ExpressionAttributeNames: { '#pk': MANIFEST_PARTITION_KEY },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { kind: 'registered', entry };
    } catch (e) {
      if (!isConditionFailure(e)) throw this.failed(`registration of ${entry.source}/${entry.externalId}`, e);
      const existing = e.Item ? this.toEntry(e.Item) : await this.get(entry.source, entry.externalId, entry.checksum);
      if (!existing) {
        // A failed attribute_not_exists means an item was there; the manifest never deletes, so this is not DynamoDB's behaviour.
        throw new AdapterError(
          `[${TAG}] registration of ${entry.source}/${entry.externalId} failed its condition but no row is there; retry`,
          {
            retryable: true,
          },
        );
      }
      return settleExistingRow(entry, existing);
    }
  }

  async *list(): AsyncIterable<ManifestEntry> {
    for await (const item of scanTable(this.#table(), 'scan of the manifest table')) yield this.toEntry(item);
  }

  private keyOf(source: string, externalId: string, checksum: string): Record<string, AttributeValue> {
    return { [MANIFEST_PARTITION_KEY]: S(manifestIdentityDigest(source, externalId)), [MANIFEST_SORT_KEY]: S(checksum) };
  }

  private toEntry(item: Record<string, AttributeValue>): ManifestEntry {
    const str = (name: string): string | undefined => item[name]?.S;
    const bytes = Number(item.bytes?.N);
    const entry = {
      source: str('source'),
      externalId: str('external_id'),
      checksum: str(MANIFEST_SORT_KEY),
      key: str('object_key'),
      bytes,
      runId: str('run_id'),
      publishedAt: str('published_at'),
    };
    if (Object.values(entry).some((v) => v === undefined) || !Number.isSafeInteger(bytes)) {
      throw new AdapterError(
        `[${TAG}] item ${JSON.stringify(str(MANIFEST_PARTITION_KEY) ?? '?')} in table ${this.table} is not a Tessera manifest row; ` +
          'point TESSERA_MANIFEST_TABLE at a table used only by the manifest',
      );
    }
    return entry as ManifestEntry;
  }

  private failed(what: string, error: unknown): AdapterError {
    return tableFailure(this.#table(), what, error);
  }

  #table(): DynamoTable {
    return {
      client: this.client,
      table: this.table,
      tag: TAG,
      envName: 'TESSERA_MANIFEST_TABLE',
      actions: 'dynamodb:PutItem, GetItem, Query and Scan',
    };
  }
}
