import { createHash } from 'node:crypto';
import type { ManifestEntry, RegisterResult } from '../ports/manifest-store.port.js';
import { TesseraError } from './errors.js';

/**
 * The rules every ManifestStore adapter applies to a row before it writes it,
 * and the one identity digest the cloud stores key on. They live here once so
 * that a row refused on one backend is refused on all four, with the same words.
 */

/** A field of a manifest row that no store could key or compare reliably. Never retryable: the input is wrong. */
export class InvalidManifestEntryError extends TesseraError {
  constructor(message: string) {
    super('INVALID_MANIFEST_ENTRY', message);
  }
}

/**
 * Longest source or external id accepted, in UTF-16 code units. STAC ids are far
 * shorter; the bound keeps every row inside each store's item limits (a Table
 * property of 64 KiB, a DynamoDB item of 400 KB) with room for the object key.
 */
export const MAX_IDENTITY_LENGTH = 1024;
/** Longest published object key: the limit S3, GCS and Azure Blob share. */
export const MAX_MANIFEST_KEY_LENGTH = 1024;

const SHA256_HEX = /^[0-9a-f]{64}$/;
// C0/C1 controls and lone surrogates: invisible in logs, and several stores (Table keys, Firestore fields) refuse them.
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function identityPart(name: 'source' | 'externalId', value: string, tag: string): void {
  if (typeof value !== 'string' || value.length === 0) {
    throw new InvalidManifestEntryError(`[${tag}] ${name} is empty; give the artefact's origin and its id (e.g. a STAC item id)`);
  }
  if (value.length > MAX_IDENTITY_LENGTH) {
    throw new InvalidManifestEntryError(`[${tag}] ${name} is ${value.length} characters long; at most ${MAX_IDENTITY_LENGTH} are accepted`);
  }
  if (UNPRINTABLE.test(value)) {
    throw new InvalidManifestEntryError(
      `[${tag}] ${name} ${JSON.stringify(value)} holds a control character or a lone surrogate; strip it before ingesting`,
    );
  }
}

/** Checks the identity half of a row (for `find` and `get`): throws {@link InvalidManifestEntryError}. */
export function validateManifestIdentity(tag: string, source: string, externalId: string, checksum?: string): void {
  identityPart('source', source, tag);
  identityPart('externalId', externalId, tag);
  if (checksum !== undefined && !SHA256_HEX.test(checksum)) {
    throw new InvalidManifestEntryError(
      `[${tag}] checksum ${JSON.stringify(checksum.slice(0, 80))} is not a lower-case hex SHA-256 (64 characters 0-9a-f)`,
    );
  }
}

/**
 * Checks a whole row before `register` writes it.
 * @param tag the adapter's message tag, e.g. `manifest-store:dynamodb`
 */
export function validateManifestEntry(tag: string, entry: ManifestEntry): void {
  validateManifestIdentity(tag, entry.source, entry.externalId, entry.checksum);
  if (
    typeof entry.key !== 'string' ||
    entry.key.length === 0 ||
    entry.key.length > MAX_MANIFEST_KEY_LENGTH ||
    UNPRINTABLE.test(entry.key)
  ) {
    throw new InvalidManifestEntryError(
      `[${tag}] key ${JSON.stringify(String(entry.key).slice(0, 80))} is not a publishable object key (1-${MAX_MANIFEST_KEY_LENGTH} printable characters)`,
    );
  }
  if (!Number.isSafeInteger(entry.bytes) || entry.bytes < 0) {
    throw new InvalidManifestEntryError(`[${tag}] bytes ${String(entry.bytes)} is not a non-negative integer`);
  }
  if (typeof entry.runId !== 'string' || entry.runId.length === 0 || entry.runId.length > 256 || UNPRINTABLE.test(entry.runId)) {
    throw new InvalidManifestEntryError(
      `[${tag}] runId ${JSON.stringify(entry.runId)} must be 1-256 printable characters (the attempt id)`,
    );
  }
  if (typeof entry.publishedAt !== 'string' || Number.isNaN(Date.parse(entry.publishedAt))) {
    throw new InvalidManifestEntryError(`[${tag}] publishedAt ${JSON.stringify(entry.publishedAt)} is not an ISO-8601 instant`);
  }
}

/**
 * SHA-256 (lower-case hex) of (source, externalId), unambiguous for any
 * characters: the JSON array form keeps `a/b` + `c` apart from `a` + `b/c`.
 * The cloud stores key on it (DynamoDB `pk`, Table PartitionKey, Firestore
 * document ids) because their key alphabets refuse `/`, `#`, `?`, `\` or
 * control characters that a STAC id may legally hold.
 */
export function manifestIdentityDigest(source: string, externalId: string): string {
  return createHash('sha256')
    .update(JSON.stringify([source, externalId]))
    .digest('hex');
}

/**
 * What a create-only insert that found a row already there means: the row of
 * this same attempt (its first answer was lost and the insert was sent again,
 * by an SDK or by the caller) is `registered`; anyone else's is `already-published`.
 * The runId is the attempt's identity (port: "recognises a retried insert as its own").
 */
export function settleExistingRow(mine: ManifestEntry, existing: ManifestEntry): RegisterResult {
  return existing.runId === mine.runId ? { kind: 'registered', entry: existing } : { kind: 'already-published', entry: existing };
}

/**
 * A manifest row as the document stores keep it (snake_case columns: Firestore fields, Table Storage
 * properties), read back into an entry; `undefined` when the record is not a Tessera manifest row
 * (something else wrote into the manifest's collection or table), which each adapter reports in its
 * own words. `bytes` may come back as a number or a numeric string (Table Storage's Int64).
 */
export function manifestEntryOfRecord(r: Readonly<Record<string, unknown>>): ManifestEntry | undefined {
  const bytes = typeof r.bytes === 'number' || typeof r.bytes === 'string' ? Number(r.bytes) : Number.NaN;
  const text = (v: unknown): v is string => typeof v === 'string';
  if (!text(r.source) || !text(r.external_id) || !text(r.checksum) || !text(r.object_key) || !text(r.run_id) || !text(r.published_at))
    return undefined;
  if (!Number.isSafeInteger(bytes)) return undefined;
  return {
    source: r.source,
    externalId: r.external_id,
    checksum: r.checksum,
    key: r.object_key,
    bytes,
    runId: r.run_id,
    publishedAt: r.published_at,
  };
}
