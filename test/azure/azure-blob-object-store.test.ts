import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AzureBlobObjectStore } from '../../functions/azure/adapters/azure-blob-object-store.js';
import { contentDigest } from '../../shared/domain/content-digest.js';
import { CorruptUploadError, SourceChangedError } from '../../shared/domain/errors.js';
import { azuriteConnectionString } from '../support/emulators/azure.js';
import { corruptions, FaultProxy, storeFaults } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshPrefix } from '../support/ids.js';
import { freshContainer } from './azurite.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

describe('AzureBlobObjectStore on the wire', () => {
  let proxy: FaultProxy;
  let direct: ContainerClient;
  let store: AzureBlobObjectStore;
  beforeAll(async () => {
    const azure = requireEndpoints(inject('emulators'), 'azure');
    proxy = await FaultProxy.start({ target: azure.blob });
    direct = await freshContainer();
    const viaProxy = BlobServiceClient.fromConnectionString(azuriteConnectionString(proxy.url, azure.queue, azure.table));
    store = new AzureBlobObjectStore(viaProxy.getContainerClient(direct.containerName));
  });
  afterAll(() => proxy.stop());

  it('sends Content-MD5 (checked by the service) and the SHA-256 as metadata with every Put Blob', async () => {
    proxy.reset();
    const body = bytes('checksummed');
    expect((await store.putIfAbsent(`${freshPrefix()}a.tif`, body)).kind).toBe('written');
    const [put] = proxy.requests.filter((r) => r.method === 'PUT');
    const digest = contentDigest(body);
    expect(put?.headers['content-md5']).toBe(digest.md5Base64);
    expect(put?.headers['x-ms-blob-content-md5']).toBe(digest.md5Base64);
    expect(put?.headers['x-ms-meta-tesserasha256']).toBe(digest.sha256Hex);
    expect(put?.headers['if-none-match']).toBe('*');
  });

  // Before: there was no pinned read; with If-Match on the ETag, a tag or content-type fix would fail every tile.
  it('a metadata update after the pin changes the ETag, not what the pinned read returns', async () => {
    const key = `${freshPrefix()}scene.tif`;
    await store.putIfAbsent(key, bytes('scene-bytes'));
    const version = (await store.head(key))?.version as string;
    const pin = await store.pin(key, version);
    expect(pin.handle).toMatch(/^\d{4}-\d\d-\d\dT/); // a snapshot time
    await direct.getBlockBlobClient(key).setMetadata({ reviewed: 'yes' });
    expect((await store.head(key))?.version).not.toBe(version);
    expect(text(await store.getRange(key, 0, 5, pin))).toBe('scene');
  });

  it('pin takes the ETag as Event Grid carries it (no quotes)', async () => {
    const key = `${freshPrefix()}event.tif`;
    await store.putIfAbsent(key, bytes('event-bytes'));
    const version = (await store.head(key))?.version as string;
    const pin = await store.pin(key, version.replaceAll('"', ''));
    expect(text(await store.getRange(key, 0, 5, pin))).toBe('event');
  });

  it('a second pin of the same version reuses its snapshot (a retried fan-out pins the same bytes, one snapshot)', async () => {
    const key = `${freshPrefix()}twice.tif`;
    await store.putIfAbsent(key, bytes('twice'));
    const version = (await store.head(key))?.version as string;
    proxy.reset();
    const first = await store.pin(key, version);
    const second = await store.pin(key, version);
    expect(second.handle).toBe(first.handle);
    const snapshots = proxy.requests.filter((r) => r.method === 'PUT' && r.path.includes('comp=snapshot'));
    expect(snapshots).toHaveLength(1);
    expect(snapshots[0]?.headers['if-match']).toBe(version);
  });

  it('a pin without a handle reads the base blob under If-Match: a change since reads as SourceChangedError', async () => {
    const key = `${freshPrefix()}nohandle.tif`;
    const first = await store.putIfAbsent(key, bytes('v1'));
    if (first.kind !== 'written') throw new Error('setup failed');
    expect(text(await store.getRange(key, 0, 2, { version: first.version }))).toBe('v1');
    await store.putIfMatch(key, bytes('v2'), first.version);
    await expect(store.getRange(key, 0, 2, { version: first.version })).rejects.toBeInstanceOf(SourceChangedError);
  });
});

// Issue 25 item 5. Azurite 3.35 checks Content-MD5 against the body it receives and stores nothing, but answers
// 400 InvalidOperation ("Provided contentMD5 doesn't match."), where Blob Storage answers 400 Md5Mismatch
// (docs/emulator-fidelity.md). The first case pins that answer; the adapter cases damage the body on the way and
// have the proxy answer what the service documents. Before: a non-retryable AdapterError, the tile or the repair
// dead-lettered as poison.
describe('AzureBlobObjectStore and a body damaged on the way', () => {
  let proxy: FaultProxy;
  let direct: ContainerClient;
  let store: AzureBlobObjectStore;
  beforeAll(async () => {
    const azure = requireEndpoints(inject('emulators'), 'azure');
    proxy = await FaultProxy.start({ target: azure.blob });
    direct = await freshContainer();
    const viaProxy = BlobServiceClient.fromConnectionString(azuriteConnectionString(proxy.url, azure.queue, azure.table));
    store = new AzureBlobObjectStore(viaProxy.getContainerClient(direct.containerName));
  });
  afterAll(() => proxy.stop());
  const corruptNextPut = () =>
    proxy.add({ match: { method: 'PUT' }, action: { corrupt: corruptions.flipMiddleByte, answer: storeFaults.azureMd5Mismatch() } });

  it('Azurite refuses a damaged body and stores nothing, but with 400 InvalidOperation, not the service’s Md5Mismatch', async () => {
    const key = `${freshPrefix()}azurite.tif`;
    proxy.add({ match: { method: 'PUT' }, action: { corrupt: corruptions.flipMiddleByte } });
    const error = await store.putIfAbsent(key, bytes('tile bytes, damaged in flight')).catch((e: unknown) => e);
    expect(proxy.requests.at(-1)).toMatchObject({ fault: 'corrupt-body', status: 400 });
    expect((error as Error).message).toMatch(/400 InvalidOperation/);
    expect(await direct.getBlobClient(key).exists()).toBe(false);
  });

  it('a create refused with 400 Md5Mismatch stores nothing and is thrown as a retryable CorruptUploadError', async () => {
    const key = `${freshPrefix()}tile.tif`;
    const shot = corruptNextPut();
    const error = await store.putIfAbsent(key, bytes('tile bytes, damaged in flight')).catch((e: unknown) => e);
    expect(shot.hits).toBe(1);
    expect(error).toBeInstanceOf(CorruptUploadError);
    expect(error).toMatchObject({ code: 'UPLOAD_CORRUPTED', retryable: true, key });
    expect((error as Error).message).toMatch(/400 Md5Mismatch/);
    expect(await direct.getBlobClient(key).exists()).toBe(false);
    // Sent again whole (the next delivery), it is written.
    expect((await store.putIfAbsent(key, bytes('tile bytes, damaged in flight'))).kind).toBe('written');
  });

  it('a repair refused the same way leaves the version it was to replace in place', async () => {
    const key = `${freshPrefix()}repair.tif`;
    const first = await store.putIfAbsent(key, bytes('a bad tile'));
    if (first.kind !== 'written') throw new Error('setup failed');
    corruptNextPut();
    const error = await store.putIfMatch(key, bytes('the repaired tile'), first.version).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'UPLOAD_CORRUPTED', retryable: true });
    expect(text(await store.get(key))).toBe('a bad tile');
    expect(await store.putIfMatch(key, bytes('the repaired tile'), first.version)).toMatchObject({ kind: 'written' });
  });
});
