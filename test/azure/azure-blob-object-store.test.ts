import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AzureBlobObjectStore } from '../../functions/azure/adapters/azure-blob-object-store.js';
import { contentDigest } from '../../shared/domain/content-digest.js';
import { SourceChangedError } from '../../shared/domain/errors.js';
import { azuriteConnectionString } from '../support/emulators/azure.js';
import { FaultProxy } from '../support/fault-proxy.js';
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
