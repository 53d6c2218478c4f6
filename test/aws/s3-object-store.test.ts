import { DeleteObjectCommand, PutBucketVersioningCommand } from '@aws-sdk/client-s3';
import { afterAll, describe, expect, it } from 'vitest';
import { S3ObjectStore } from '../../functions/aws/adapters/s3-object-store.js';
import { contentDigest } from '../../shared/domain/content-digest.js';
import { CorruptUploadError, SourceChangedError } from '../../shared/domain/errors.js';
import { corruptions, FaultProxy, storeFaults } from '../support/fault-proxy.js';
import { freshPrefix } from '../support/ids.js';
import { awsEndpoints, freshBucket, s3Client } from './clients.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

const proxies: FaultProxy[] = [];
afterAll(() => Promise.all(proxies.map((p) => p.stop())));
async function storeOn(
  versioned: boolean,
): Promise<{ store: S3ObjectStore; proxy: FaultProxy; expireVersion(key: string, versionId: string): Promise<void> }> {
  const proxy = await FaultProxy.start({ target: awsEndpoints().moto });
  proxies.push(proxy);
  const direct = s3Client();
  const bucket = await freshBucket(direct);
  if (versioned) await direct.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }));
  return {
    store: new S3ObjectStore(s3Client({ ...awsEndpoints(), moto: proxy.url }), bucket),
    proxy,
    // What a noncurrent-version lifecycle rule does.
    expireVersion: async (key, versionId) => {
      await direct.send(new DeleteObjectCommand({ Bucket: bucket, Key: key, VersionId: versionId }));
    },
  };
}

describe('S3ObjectStore on the wire', () => {
  it('sends the SHA-256 of the body as x-amz-checksum-sha256 and as metadata with every PutObject', async () => {
    const { store, proxy } = await storeOn(false);
    const body = bytes('checksummed');
    await store.putIfAbsent(`${freshPrefix()}a.tif`, body);
    const [put] = proxy.requests.filter((r) => r.method === 'PUT');
    const digest = contentDigest(body);
    expect(put?.headers['x-amz-checksum-sha256']).toBe(digest.sha256Base64);
    expect(put?.headers['x-amz-meta-tesserasha256']).toBe(digest.sha256Hex);
    expect(put?.headers['if-none-match']).toBe('*');
  });

  it('unversioned: the version is the ETag; a pinned read carries If-Match and a replaced source is SourceChanged', async () => {
    const { store, proxy } = await storeOn(false);
    const key = `${freshPrefix()}scene.tif`;
    const first = await store.putIfAbsent(key, bytes('scene-v1'));
    if (first.kind !== 'written') throw new Error('setup failed');
    expect(first.version).toMatch(/^"[0-9a-f]{32}"$/);
    // An S3 event carries the ETag without quotes: the pin takes it as well.
    const pin = await store.pin(key, first.version.replaceAll('"', ''));
    proxy.reset();
    expect(text(await store.getRange(key, 0, 5, pin))).toBe('scene');
    expect(proxy.requests[0]?.headers['if-match']).toBe(first.version);
    await store.putIfMatch(key, bytes('scene-v2'), first.version);
    await expect(store.getRange(key, 0, 5, pin)).rejects.toBeInstanceOf(SourceChangedError);
  });

  it('versioned: the version is the versionId; the pin reads by VersionId and keeps the old bytes after an overwrite', async () => {
    const { store, proxy, expireVersion } = await storeOn(true);
    const key = `${freshPrefix()}scene.tif`;
    const first = await store.putIfAbsent(key, bytes('scene-v1'));
    if (first.kind !== 'written') throw new Error('setup failed');
    expect(first.version).not.toMatch(/^"/);
    expect((await store.head(key))?.version).toBe(first.version);
    const pin = await store.pin(key, first.version);
    expect(pin.handle).toBe(first.version);
    const second = await store.putIfMatch(key, bytes('scene-v2'), first.version);
    expect(second.kind).toBe('written');
    proxy.reset();
    expect(text(await store.getRange(key, 0, 8, pin))).toBe('scene-v1');
    expect(proxy.requests[0]?.path).toContain(`versionId=${encodeURIComponent(first.version)}`);
    expect(text(await store.getRange(key, 0, 8))).toBe('scene-v2');
    // A stale versionId is a mismatch naming the current versionId; the repair's precondition is the ETag of the version it named.
    expect(await store.putIfMatch(key, bytes('scene-v3'), first.version)).toEqual({
      kind: 'version-mismatch',
      current: second.kind === 'written' ? second.version : '',
    });
    // A pin of the replaced version (a late event naming it) reads it while the bucket keeps it, and is stale once it is gone.
    expect(text(await store.getRange(key, 0, 8, await store.pin(key, first.version)))).toBe('scene-v1');
    await expireVersion(key, first.version);
    await expect(store.pin(key, first.version)).rejects.toBeInstanceOf(SourceChangedError);
  });
});

// Issue 25 item 5. moto does not check x-amz-checksum-sha256 (docs/emulator-fidelity.md): a body damaged on the way
// and forwarded is stored. So the proxy damages the body and answers what S3 documents for it (400 BadDigest,
// nothing stored) instead of forwarding. Before: a non-retryable AdapterError, the tile or repair dead-lettered.
describe('S3ObjectStore and a body damaged on the way', () => {
  const corruptNextPut = (proxy: FaultProxy) =>
    proxy.add({ match: { method: 'PUT' }, action: { corrupt: corruptions.flipMiddleByte, answer: storeFaults.s3BadDigest() } });

  it('moto stores a damaged body whatever its checksum says (why the proxy answers BadDigest itself)', async () => {
    const { store, proxy } = await storeOn(false);
    const key = `${freshPrefix()}unchecked.tif`;
    proxy.add({ match: { method: 'PUT' }, action: { corrupt: corruptions.flipMiddleByte } });
    expect((await store.putIfAbsent(key, bytes('abcdefgh'))).kind).toBe('written');
    expect(text(await store.get(key))).not.toBe('abcdefgh');
  });

  it('a create refused with 400 BadDigest is a retryable CorruptUploadError', async () => {
    const { store, proxy } = await storeOn(false);
    const key = `${freshPrefix()}tile.tif`;
    const shot = corruptNextPut(proxy);
    const error = await store.putIfAbsent(key, bytes('tile bytes')).catch((e: unknown) => e);
    expect(shot.hits).toBe(1);
    expect(error).toBeInstanceOf(CorruptUploadError);
    expect(error).toMatchObject({ code: 'UPLOAD_CORRUPTED', retryable: true, key });
    expect((error as Error).message).toMatch(/400 BadDigest/);
    expect(await store.head(key)).toBeUndefined();
    expect((await store.putIfAbsent(key, bytes('tile bytes'))).kind).toBe('written');
  });

  it('a repair refused the same way leaves the version it was to replace in place', async () => {
    const { store, proxy } = await storeOn(true);
    const key = `${freshPrefix()}repair.tif`;
    const first = await store.putIfAbsent(key, bytes('a bad tile'));
    if (first.kind !== 'written') throw new Error('setup failed');
    corruptNextPut(proxy);
    const error = await store.putIfMatch(key, bytes('the repaired tile'), first.version).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'UPLOAD_CORRUPTED', retryable: true });
    expect((await store.head(key))?.version).toBe(first.version);
    expect(await store.putIfMatch(key, bytes('the repaired tile'), first.version)).toMatchObject({ kind: 'written' });
  });

  it('the SigV4 payload-hash and malformed-digest refusals are integrity failures too; another 400 is not', async () => {
    const { store, proxy } = await storeOn(false);
    const answer = (code: string) => ({
      status: 400,
      headers: { 'content-type': 'application/xml' },
      body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${code}</Message><RequestId>1</RequestId></Error>`,
    });
    for (const [code, retryable] of [
      ['XAmzContentSHA256Mismatch', true],
      ['InvalidDigest', true],
      ['InvalidArgument', false],
    ] as const) {
      proxy.add({ match: { method: 'PUT' }, action: answer(code) });
      const error = await store.putIfAbsent(`${freshPrefix()}${code}.tif`, bytes('x')).catch((e: unknown) => e);
      expect(error, code).toMatchObject({ code: retryable ? 'UPLOAD_CORRUPTED' : 'ADAPTER_FAILURE', retryable });
    }
  });
});
