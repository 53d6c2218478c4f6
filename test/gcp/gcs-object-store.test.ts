import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GcsObjectStore } from '../../functions/gcp/adapters/gcs-object-store.js';
import { contentDigest } from '../../shared/domain/content-digest.js';
import { CorruptUploadError } from '../../shared/domain/errors.js';
import { corruptions, FaultProxy } from '../support/fault-proxy.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshPrefix } from '../support/ids.js';
import { freshBucket, storageClient } from './clients.js';
import { type RecordedRequest, startRecorder } from './http-recorder.js';

const gcp = requireEndpoints(inject('emulators'), 'gcp');
const bytes = (text: string) => new TextEncoder().encode(text);

describe('GcsObjectStore on the wire', () => {
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  let store: GcsObjectStore;
  beforeAll(async () => {
    const bucket = await freshBucket(gcp, 'wire');
    recorder = await startRecorder(gcp.gcs);
    // The same bucket, reached through the recorder.
    store = new GcsObjectStore(storageClient({ ...gcp, gcs: recorder.url }).bucket(bucket.name));
  });
  afterAll(() => recorder.close());
  const uploads = (): RecordedRequest[] => recorder.requests.filter((r) => r.url.pathname.startsWith('/upload/'));

  it('sends every create as one multipart request with ifGenerationMatch=0, never a media or resumable upload', async () => {
    recorder.requests.length = 0;
    const key = `${freshPrefix()}create.tif`;
    expect((await store.putIfAbsent(key, bytes('one'), { contentType: 'image/tiff' })).kind).toBe('written');
    expect(await store.putIfAbsent(key, bytes('two'))).toMatchObject({ kind: 'already-present', sameBytes: false });
    const sent = uploads();
    expect(sent.map((r) => [r.url.searchParams.get('uploadType'), r.url.searchParams.get('ifGenerationMatch'), r.status])).toEqual([
      ['multipart', '0', 200],
      ['multipart', '0', 412],
    ]);
  });

  it('sends a repair with ifGenerationMatch set to the generation it was given', async () => {
    const key = `${freshPrefix()}repair.tif`;
    const first = await store.putIfAbsent(key, bytes('bad'));
    if (first.kind !== 'written') throw new Error('setup failed');
    recorder.requests.length = 0;
    const fixed = await store.putIfMatch(key, bytes('good'), first.version);
    expect(fixed.kind).toBe('written');
    expect(uploads().map((r) => [r.url.searchParams.get('uploadType'), r.url.searchParams.get('ifGenerationMatch')])).toEqual([
      ['multipart', first.version],
    ]);
  });

  it('reads a window with one ranged GET whose end is inclusive', async () => {
    const key = `${freshPrefix()}window.bin`;
    await store.putIfAbsent(key, bytes('0123456789'));
    recorder.requests.length = 0;
    expect(new TextDecoder().decode(await store.getRange(key, 3, 7))).toBe('3456');
    const reads = recorder.requests.filter((r) => r.method === 'GET');
    expect(reads).toHaveLength(1);
    expect(reads[0]?.headers.range).toBe('bytes=3-6');
  });

  it('answers a version that is not a generation without uploading anything', async () => {
    const key = `${freshPrefix()}etag.tif`;
    const first = await store.putIfAbsent(key, bytes('v1'));
    if (first.kind !== 'written') throw new Error('setup failed');
    recorder.requests.length = 0;
    expect(await store.putIfMatch(key, bytes('v2'), '"an-etag"')).toEqual({ kind: 'version-mismatch', current: first.version });
    expect(uploads()).toHaveLength(0);
  });

  it('lists more than one page under a prefix', async () => {
    const p = freshPrefix('page');
    const bucket = await freshBucket(gcp, 'pages');
    const paged = new GcsObjectStore(bucket);
    await Promise.all(Array.from({ length: 1005 }, (_, i) => paged.putIfAbsent(`${p}${String(i).padStart(4, '0')}`, bytes('x'))));
    const keys: string[] = [];
    for await (const head of paged.list(p)) keys.push(head.key);
    expect(keys).toHaveLength(1005);
    expect(new Set(keys).size).toBe(1005);
  });
});

// `file.save` with the SDK's default validation answers a checksum doubt (the answer's crc32c/md5Hash differs
// from the local one, or is missing) by DELETING the object, with no generation precondition: on a repair that
// deletes the new tile, and a delete can hit an object another writer just made. GcsObjectStore turns that
// validation off and sends the body's MD5 instead, so GCS refuses a corrupt body before storing anything.
describe('GcsObjectStore and the SDK upload validation', () => {
  let proxy: FaultProxy;
  let store: GcsObjectStore;
  let bucketName: string;
  beforeAll(async () => {
    proxy = await FaultProxy.start({ target: gcp.gcs });
    bucketName = (await freshBucket(gcp, 'valid')).name;
    store = new GcsObjectStore(storageClient({ ...gcp, gcs: proxy.url }).bucket(bucketName));
  });
  afterAll(() => proxy.stop());

  it('sends the body md5Hash and the SHA-256 metadata inside the one multipart request', async () => {
    proxy.reset();
    const key = `${freshPrefix()}md5.tif`;
    const body = bytes('checksummed');
    expect((await store.putIfAbsent(key, body)).kind).toBe('written');
    const upload = proxy.requests.filter((r) => r.path.startsWith('/upload/'));
    expect(upload).toHaveLength(1);
    const digest = contentDigest(body);
    expect(upload[0]?.text).toContain(`"md5Hash":"${digest.md5Base64}"`);
    expect(upload[0]?.text).toContain(`"tesserasha256":"${digest.sha256Hex}"`);
  });

  it('an upload answered without any checksum deletes nothing (the SDK validation DELETE is never sent)', async () => {
    const key = `${freshPrefix()}kept.tif`;
    // Another writer's object at the key: the canned answer below never reaches GCS, so this is what a DELETE would lose.
    await storageClient(gcp).bucket(bucketName).file(key).save(Buffer.from('theirs'), { resumable: false });
    proxy.reset();
    proxy.add({
      match: { method: 'POST', path: '/upload/' },
      action: {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'storage#object', bucket: bucketName, name: key, generation: '1', size: '4' }),
      },
    });
    expect(await store.putIfMatch(key, bytes('mine'), '1')).toEqual({ kind: 'written', version: '1' });
    expect(proxy.requests.filter((r) => r.method === 'DELETE')).toEqual([]);
    const [left] = await storageClient(gcp).bucket(bucketName).file(key).download();
    expect(left.toString()).toBe('theirs');
  });
});

// Issue 25 item 5. fake-gcs-server checks the md5Hash of a multipart upload against the media it receives, as GCS
// does (400 "doesn't match calculated MD5 hash"): the proxy damages one byte of the media on the way and forwards
// it, so the emulator's own check answers. Before: a non-retryable AdapterError, the tile or repair dead-lettered.
describe('GcsObjectStore and a body damaged on the way', () => {
  let proxy: FaultProxy;
  let store: GcsObjectStore;
  let bucketName: string;
  beforeAll(async () => {
    proxy = await FaultProxy.start({ target: gcp.gcs });
    bucketName = (await freshBucket(gcp, 'corrupt')).name;
    store = new GcsObjectStore(storageClient({ ...gcp, gcs: proxy.url }).bucket(bucketName));
  });
  afterAll(() => proxy.stop());
  // A payload much longer than the multipart framing and metadata, so the middle byte is a media byte.
  const body = bytes('tile bytes, damaged in flight. '.repeat(64));
  const corruptNextUpload = () =>
    proxy.add({ match: { method: 'POST', path: '/upload/' }, action: { corrupt: corruptions.flipMiddleByte } });

  it('a create is refused by the store (400, md5 mismatch), nothing stored, and thrown as a retryable CorruptUploadError', async () => {
    const key = `${freshPrefix()}tile.tif`;
    const shot = corruptNextUpload();
    const error = await store.putIfAbsent(key, body).catch((e: unknown) => e);
    expect(shot.hits).toBe(1);
    expect(proxy.requests.at(-1)).toMatchObject({ fault: 'corrupt-body', status: 400 });
    expect(error).toBeInstanceOf(CorruptUploadError);
    expect(error).toMatchObject({ code: 'UPLOAD_CORRUPTED', retryable: true, key });
    expect(await store.head(key)).toBeUndefined();
    expect((await store.putIfAbsent(key, body)).kind).toBe('written');
  });

  it('a repair is refused the same way and leaves the generation it was to replace in place', async () => {
    const key = `${freshPrefix()}repair.tif`;
    const first = await store.putIfAbsent(key, bytes('a bad tile'));
    if (first.kind !== 'written') throw new Error('setup failed');
    corruptNextUpload();
    const error = await store.putIfMatch(key, body, first.version).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'UPLOAD_CORRUPTED', retryable: true });
    expect((await store.head(key))?.version).toBe(first.version);
    expect(await store.putIfMatch(key, body, first.version)).toMatchObject({ kind: 'written' });
  });

  it('any other 400 stays a non-retryable AdapterError (the mapping is the mismatch, not the status)', async () => {
    proxy.add({
      match: { method: 'POST', path: '/upload/' },
      action: {
        status: 400,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          error: { code: 400, message: 'Invalid argument.', errors: [{ message: 'Invalid argument.', reason: 'invalid' }] },
        }),
      },
    });
    const error = await store.putIfAbsent(`${freshPrefix()}other.tif`, body).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ADAPTER_FAILURE', retryable: false });
  });
});
