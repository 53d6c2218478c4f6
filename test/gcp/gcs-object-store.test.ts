import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GcsObjectStore } from '../../functions/gcp/adapters/gcs-object-store.js';
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
    expect(await store.putIfAbsent(key, bytes('two'))).toEqual({ kind: 'already-present' });
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
