import { createHash } from 'node:crypto';

/**
 * The object metadata entry every Tessera write carries: the SHA-256 of the
 * body in lowercase hex. Letters and digits only, so the same name is valid as
 * S3 user metadata, a GCS custom metadata key and an Azure metadata name (which
 * must be a C# identifier: no hyphens).
 */
export const CONTENT_SHA256_METADATA = 'tesserasha256';

/** The hashes of a body about to be written, in the forms the stores report them. */
export interface ContentDigest {
  readonly size: number;
  readonly sha256Hex: string;
  /** What GCS `md5Hash`, Azure `Content-MD5` and S3 `Content-MD5` carry. */
  readonly md5Base64: string;
  /** What the ETag of a single-part, non-KMS S3 upload is (without the quotes). */
  readonly md5Hex: string;
  /** What S3 `ChecksumSHA256` carries. */
  readonly sha256Base64: string;
}

export function contentDigest(body: Uint8Array): ContentDigest {
  const sha = createHash('sha256').update(body).digest();
  const md5 = createHash('md5').update(body).digest();
  return {
    size: body.byteLength,
    sha256Hex: sha.toString('hex'),
    sha256Base64: sha.toString('base64'),
    md5Base64: md5.toString('base64'),
    md5Hex: md5.toString('hex'),
  };
}

/**
 * What a store says about the bytes of an object it holds. Each hash is
 * optional: a store reports what it has (a server-computed MD5, a checksum
 * sent and validated at upload, the SHA-256 that Tessera wrote as metadata).
 */
export interface StoredContent {
  readonly size: number;
  readonly sha256Hex?: string | undefined;
  readonly md5Base64?: string | undefined;
}

/**
 * `same`: the size matches and every hash the store reports matches, and there
 * is at least one. `different`: the size or a hash differs (a foreign object,
 * a truncated one, another code version's output). `unverifiable`: the size
 * matches but the store reports no hash to compare (not written by Tessera).
 */
export type ContentComparison = 'same' | 'different' | 'unverifiable';

/**
 * Compare an object in a store with the body a caller is about to write.
 *
 * Outputs are deterministic, so equal content means the write already landed:
 * this caller's own earlier attempt whose answer was lost, or a duplicate of
 * the same job. It is the one rule every adapter maps its own answer onto
 * (S3 ETag / ChecksumSHA256, GCS md5Hash, Blob Content-MD5, the local hash).
 *
 * @example
 * compareContent({ size: 5, md5Base64: 'XUFAKrxLKna5cZ2REBfFkg==' }, contentDigest(bytes('hello'))); // 'same'
 */
export function compareContent(stored: StoredContent, digest: ContentDigest): ContentComparison {
  if (stored.size !== digest.size) return 'different';
  const checks: boolean[] = [];
  if (stored.sha256Hex !== undefined && stored.sha256Hex !== '') checks.push(stored.sha256Hex.toLowerCase() === digest.sha256Hex);
  if (stored.md5Base64 !== undefined && stored.md5Base64 !== '') checks.push(stored.md5Base64 === digest.md5Base64);
  if (checks.length === 0) return 'unverifiable';
  return checks.every(Boolean) ? 'same' : 'different';
}
