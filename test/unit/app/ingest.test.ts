import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend, localIngestDeps } from '../../../functions/local/compose.js';
import {
  handleIngestDelivery,
  type IngestDeps,
  IngestOccupiedError,
  InvalidIngestRequestError,
  ingest,
  ingestArtefact,
  ingestKeys,
  isIngestedObject,
  keySegment,
  parseIngestMessage,
  parsePublishedKey,
  toIngestMessage,
} from '../../../shared/app/ingest.js';
import { reconcileManifest, sweepStaging } from '../../../shared/app/ingest-reconcile.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';
import { FakeClock } from '../../support/fake-clock.js';
import { notARaster, strippedTiff, truncatedArtefact, validArtefact } from '../../support/ingest-fixtures.js';

const SOURCE = 'sentinel-2-l2a';
const ITEM = 'S2B_T30UXB_20260612';
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

const opened: { b: LocalBackend; dir: string }[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const { b, dir } of opened.splice(0)) {
    b.close();
    rmSync(dir, { recursive: true, force: true });
  }
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

function fresh(): { b: LocalBackend; deps: IngestDeps; clock: FakeClock; logs: string[]; telemetry: JsonTelemetry; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-ingest-'));
  const clock = new FakeClock();
  const logs: string[] = [];
  const telemetry = new JsonTelemetry((l) => logs.push(l), { clock });
  const b = createLocalBackend(join(dir, 'backend'), { clock, telemetry });
  opened.push({ b, dir });
  return { b, deps: localIngestDeps(b, dir), clock, logs, telemetry, dir };
}

async function keys(b: LocalBackend, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const h of b.sources.list(prefix)) out.push(h.key);
  return out.sort();
}

async function rows(b: LocalBackend) {
  const out = [];
  for await (const r of b.manifest.list()) out.push(r);
  return out;
}

/** What an ingest fetching from serve()'s 127.0.0.1 needs: the named opt-in (loopback is refused by default). */
const LOCAL_ORIGIN = { allowPrivateAddresses: ['127.0.0.1'] } as const;

/** A 127.0.0.1 server; `handler` answers each request; `hits` counts them. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    handler(req, res);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits: () => hits };
}

async function stageSource(b: LocalBackend, key: string, bytes: Uint8Array): Promise<string> {
  await b.sources.putIfAbsent(key, bytes);
  return `object:${key}`;
}

describe('ingest > identity and idempotence', () => {
  it('publishes once: the second run is already-published, copies nothing and leaves no staging object', async () => {
    const { b, deps } = fresh();
    const href = await stageSource(b, 'incoming/a.tif', await validArtefact());
    const first = await ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href });
    expect(first).toMatchObject({ published: true, reason: 'published' });
    const key = first.key as string;
    expect(key).toBe(`scenes/${SOURCE}/${ITEM}/${first.checksum}/data.tif`);
    expect(first.manifest).toMatchObject({ source: SOURCE, externalId: ITEM, checksum: first.checksum, key, runId: first.runId });
    const before = await b.sources.head(key);

    const second = await ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href });
    expect(second).toMatchObject({ published: false, reason: 'already-published', key, checksum: first.checksum, stagingKey: undefined });
    expect(second.manifest?.runId).toBe(first.runId);
    expect(await b.sources.head(key)).toEqual(before);
    expect(await keys(b, 'staging/')).toEqual([first.stagingKey]);
    expect(await rows(b)).toHaveLength(1);
  });

  it('the same item id with new bytes publishes a new row under a new key', async () => {
    const { b, deps } = fresh();
    const v1 = await validArtefact(1);
    const v2 = await validArtefact(2);
    const a = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: ITEM,
      href: await stageSource(b, 'in/v1.tif', v1),
    });
    const c = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: ITEM,
      href: await stageSource(b, 'in/v2.tif', v2),
    });
    expect([a.reason, c.reason]).toEqual(['published', 'published']);
    expect(a.checksum).toBe(sha(v1));
    expect(c.checksum).toBe(sha(v2));
    expect(a.key).not.toBe(c.key);
    expect((await rows(b)).map((r) => r.checksum).sort()).toEqual([sha(v1), sha(v2)].sort());
    expect(await keys(b, 'scenes/')).toEqual([a.key, c.key].sort());
  });

  it('16 concurrent ingests of one artefact: 1 row, 1 final object, 15 concurrent-publisher-won or already-published', async () => {
    const { b, deps } = fresh();
    const href = await stageSource(b, 'incoming/a.tif', await validArtefact());
    const outcomes = await Promise.all(
      Array.from({ length: 16 }, () => ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href })),
    );
    const reasons = outcomes.map((o) => o.reason);
    expect(reasons.filter((r) => r === 'published')).toHaveLength(1);
    expect(reasons.filter((r) => r === 'concurrent-publisher-won' || r === 'already-published')).toHaveLength(15);
    expect(await rows(b)).toHaveLength(1);
    expect(await keys(b, 'scenes/')).toHaveLength(1);
    const winner = outcomes.find((o) => o.published);
    for (const o of outcomes) expect(o.manifest?.runId).toBe(winner?.runId);
  });

  it('an expected checksum that the manifest holds skips the fetch entirely', async () => {
    const { deps } = fresh();
    const bytes = await validArtefact();
    const http = await serve((_req, res) => res.end(Buffer.from(bytes)));
    const req = { kind: 'artefact', source: SOURCE, externalId: ITEM, href: `${http.url}/a.tif`, checksum: sha(bytes) } as const;
    expect((await ingestArtefact(deps, req, LOCAL_ORIGIN)).reason).toBe('published');
    expect(http.hits()).toBe(1);
    expect((await ingestArtefact(deps, req, LOCAL_ORIGIN)).reason).toBe('already-published');
    expect(http.hits()).toBe(1);
  });
});

describe('ingest > validation refuses and leaves only the staging object', () => {
  it.each([
    ['not-a-raster', () => notARaster()],
    ['no-crs', () => strippedTiff({ geo: false })],
    ['not-tiled', () => strippedTiff({ geo: true })],
    ['not-a-raster', () => truncatedArtefact()],
  ] as const)('%s', async (what, make) => {
    const { b, deps, logs } = fresh();
    const href = await stageSource(b, 'incoming/bad.tif', await make());
    const o = await ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href });
    expect(o).toMatchObject({
      published: false,
      reason: 'invalid',
      manifest: null,
      key: undefined,
      invalid: { code: 'ARTEFACT_REFUSED', what },
    });
    expect(o.invalid?.message.length).toBeGreaterThan(20);
    expect(await keys(b, 'staging/')).toEqual([o.stagingKey]);
    expect(await keys(b, 'scenes/')).toEqual([]);
    expect(await rows(b)).toEqual([]);
    expect(logs.some((l) => l.includes('"ingest-refused"'))).toBe(true);
  });

  it('refuses an absurd Content-Length before reading the body, and a body that runs past the limit', async () => {
    const { b, deps } = fresh();
    let bodyBytesSent = 0;
    const http = await serve((req, res) => {
      if (req.url === '/huge.tif') {
        res.writeHead(200, { 'content-length': String(2 ** 40) });
        res.write(Buffer.alloc(1024));
        bodyBytesSent += 1024;
        return; // never ends: the client must not wait for it
      }
      res.writeHead(200); // chunked: no size up front
      for (let i = 0; i < 64; i++) res.write(Buffer.alloc(1024, 1));
      res.end();
    });
    const huge = await ingestArtefact(
      deps,
      { kind: 'artefact', source: SOURCE, externalId: 'huge', href: `${http.url}/huge.tif` },
      { maxBytes: 10_000, ...LOCAL_ORIGIN },
    );
    expect(huge).toMatchObject({ reason: 'invalid', invalid: { what: 'too-large' }, stagingKey: undefined });
    expect(huge.invalid?.message).toContain(String(2 ** 40));
    expect(bodyBytesSent).toBe(1024);
    const long = await ingestArtefact(
      deps,
      { kind: 'artefact', source: SOURCE, externalId: 'long', href: `${http.url}/long.tif` },
      { maxBytes: 10_000, ...LOCAL_ORIGIN },
    );
    expect(long).toMatchObject({ reason: 'invalid', invalid: { what: 'too-large' } });
    expect(await keys(b, '')).toEqual([]);
  });

  it('a 404 is refused as not-found; a 503 or a body cut short is a retryable error (a retry verdict on a queue)', async () => {
    const { deps } = fresh();
    const http = await serve((req, res) => {
      if (req.url === '/short.tif') {
        // A connection that breaks mid-body: fewer bytes than the Content-Length said.
        res.writeHead(200, { 'content-length': '4096' });
        res.write(Buffer.alloc(1024));
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      res.statusCode = req.url === '/gone.tif' ? 404 : 503;
      res.end('no');
    });
    await expect(
      ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href: `${http.url}/short.tif` }, LOCAL_ORIGIN),
    ).rejects.toMatchObject({
      code: 'ADAPTER_FAILURE',
      retryable: true,
    });
    const gone = await ingestArtefact(
      deps,
      { kind: 'artefact', source: SOURCE, externalId: ITEM, href: `${http.url}/gone.tif` },
      LOCAL_ORIGIN,
    );
    expect(gone).toMatchObject({ reason: 'invalid', invalid: { what: 'not-found' } });
    await expect(
      ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href: `${http.url}/busy.tif` }, LOCAL_ORIGIN),
    ).rejects.toMatchObject({
      code: 'ADAPTER_FAILURE',
      retryable: true,
    });
    const verdict = await handleIngestDelivery(
      deps,
      {
        deliveryId: 'm1',
        body: toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: ITEM, href: `${http.url}/busy.tif` }),
      },
      LOCAL_ORIGIN,
    );
    expect(verdict.kind).toBe('retry');
  });

  it('fetched bytes that differ from the expected checksum are refused before staging', async () => {
    const { b, deps } = fresh();
    const href = await stageSource(b, 'incoming/a.tif', await validArtefact());
    const o = await ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href, checksum: '0'.repeat(64) });
    expect(o).toMatchObject({ reason: 'invalid', invalid: { what: 'checksum-mismatch' }, stagingKey: undefined });
    expect(await keys(b, 'staging/')).toEqual([]);
  });

  it('other bytes at the final key are an alarm: never replaced, never registered', async () => {
    const { b, deps, logs, telemetry } = fresh();
    const bytes = await validArtefact();
    const key = ingestKeys.published('scenes/', SOURCE, ITEM, sha(bytes), 'data');
    await b.sources.putIfAbsent(key, new TextEncoder().encode('foreign'));
    const href = await stageSource(b, 'incoming/a.tif', bytes);
    await expect(ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: ITEM, href })).rejects.toBeInstanceOf(
      IngestOccupiedError,
    );
    expect((await b.sources.get(key)).byteLength).toBe(7);
    expect(await rows(b)).toEqual([]);
    expect(logs.filter((l) => l.includes('"level":"ERROR"') && l.includes('"ingest-occupied"'))).toHaveLength(1);
    expect(telemetry.counters()['ingest-occupied']).toBe(1);
  });
});

describe('ingest > crash points (in-process: a hook that throws is the process dying there)', () => {
  const crash = () => {
    throw new Error('crashed');
  };

  it.each([
    ['beforeFetch', { staging: 0, published: 0, rows: 0, objectsWithoutRow: 0 }],
    ['afterStage', { staging: 1, published: 0, rows: 0, objectsWithoutRow: 0 }],
    ['afterValidate', { staging: 1, published: 0, rows: 0, objectsWithoutRow: 0 }],
    ['afterCopy', { staging: 1, published: 1, rows: 0, objectsWithoutRow: 1 }],
    ['afterCommit', { staging: 1, published: 1, rows: 1, objectsWithoutRow: 0 }],
  ] as const)('crash %s leaves what the design note says; the retry exits with success and reconcile agrees', async (at, left) => {
    const { b, deps } = fresh();
    const href = await stageSource(b, 'incoming/a.tif', await validArtefact());
    const req = { kind: 'artefact', source: SOURCE, externalId: ITEM, href } as const;
    await expect(ingestArtefact(deps, req, { hooks: { [at]: crash } })).rejects.toThrow('crashed');
    expect(await keys(b, 'staging/')).toHaveLength(left.staging);
    expect(await keys(b, 'scenes/')).toHaveLength(left.published);
    expect(await rows(b)).toHaveLength(left.rows);
    const before = await reconcileManifest(deps);
    expect(before.objectsWithoutRow).toHaveLength(left.objectsWithoutRow);
    expect(before.rowsWithoutObject).toEqual([]);

    const retry = await ingestArtefact(deps, req);
    expect(retry.reason).toBe(at === 'afterCommit' ? 'already-published' : 'published');
    expect(await rows(b)).toHaveLength(1);
    expect(await keys(b, 'scenes/')).toHaveLength(1);
    const after = await reconcileManifest(deps);
    expect(after).toMatchObject({
      objectsChecked: 1,
      rowsChecked: 1,
      objectsWithoutRow: [],
      notIngested: [],
      rowsWithoutObject: [],
      sizeMismatches: [],
    });
  });

  it('reconcile names a row whose object was deleted', async () => {
    const { b, deps } = fresh();
    const o = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: ITEM,
      href: await stageSource(b, 'in/a.tif', await validArtefact()),
    });
    const head = await b.sources.head(o.key as string);
    await b.sources.deleteIfVersion(o.key as string, head?.version as string);
    await b.sources.putIfAbsent('scenes/direct-upload.tif', await validArtefact(5));
    const r = await reconcileManifest(deps);
    expect(r).toMatchObject({ objectsWithoutRow: [], notIngested: ['scenes/direct-upload.tif'] });
    expect(r.rowsWithoutObject).toEqual([{ source: SOURCE, externalId: ITEM, checksum: o.checksum, key: o.key }]);
  });
});

describe('ingest > staging retention', () => {
  it('the sweep deletes staging objects older than the retention, conditionally, and keeps younger ones', async () => {
    const { b, deps } = fresh();
    const old = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'old',
      href: await stageSource(b, 'in/o.tif', notARaster()),
    });
    expect(await keys(b, 'staging/')).toEqual([old.stagingKey]);
    // The local store's lastModified is the file's mtime (the wall clock): sweep as of now, then as of 8 days on.
    const week = 7 * 86_400_000;
    const now = await sweepStaging({ ...deps, clock: new FakeClock(Date.now()) }, { retentionMs: week });
    expect(now).toMatchObject({ checked: 1, deleted: [], kept: 1 });
    const later = await sweepStaging({ ...deps, clock: new FakeClock(Date.now() + 8 * 86_400_000) }, { retentionMs: week });
    expect(later).toMatchObject({ checked: 1, deleted: [old.stagingKey], changed: [] });
    expect(await keys(b, 'staging/')).toEqual([]);
    expect(await keys(b, 'in/')).toEqual(['in/o.tif']);
  });
});

describe('ingest > requests, messages, keys', () => {
  it('parses its own messages and refuses malformed ones as InvalidIngestRequestError (poison)', async () => {
    const req = {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'a/b',
      href: 'https://example.com/x.tif',
      checksum: 'a'.repeat(64),
    } as const;
    expect(parseIngestMessage(toIngestMessage(req))).toEqual({ ...req, asset: undefined });
    expect(parseIngestMessage(toIngestMessage({ kind: 'stac', source: SOURCE, href: 'object:items/x.json' }))).toEqual({
      kind: 'stac',
      source: SOURCE,
      href: 'object:items/x.json',
    });
    for (const body of [
      'not json',
      '[]',
      '{"type":"tessera.tile","v":1}',
      '{"type":"tessera.ingest","v":1,"source":"S2!","externalId":"x","href":"https://e/x"}',
      '{"type":"tessera.ingest","v":1,"source":"s2","externalId":"","href":"https://e/x"}',
      '{"type":"tessera.ingest","v":1,"source":"s2","externalId":"x","href":"ftp://e/x"}',
      '{"type":"tessera.ingest","v":1,"source":"s2","externalId":"x","href":"object:../x"}',
      '{"type":"tessera.ingest","v":1,"source":"s2","externalId":"x\\u0001","href":"https://e/x"}',
      '{"type":"tessera.ingest","v":1,"source":"s2","externalId":"x","href":"https://e/x","checksum":"nothex"}',
    ]) {
      expect(() => parseIngestMessage(body), body).toThrow(InvalidIngestRequestError);
    }
    const { deps } = fresh();
    const verdict = await handleIngestDelivery(deps, { deliveryId: 'm1', body: '{"type":"tessera.ingest"' });
    expect(verdict).toMatchObject({ kind: 'poison', error: { code: 'INVALID_INGEST_REQUEST' } });
  });

  it('settles a refused artefact as poison and a published one as ack', async () => {
    const { b, deps } = fresh();
    const bad = await stageSource(b, 'in/bad.tif', notARaster());
    const good = await stageSource(b, 'in/good.tif', await validArtefact());
    const msg = (href: string) => toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: href, href });
    expect(await handleIngestDelivery(deps, { deliveryId: 'a', body: msg(bad) })).toMatchObject({
      kind: 'poison',
      error: { code: 'ARTEFACT_REFUSED' },
    });
    expect(await handleIngestDelivery(deps, { deliveryId: 'b', body: msg(good) })).toMatchObject({
      kind: 'ack',
      outcomes: [{ reason: 'published' }],
    });
    expect(await handleIngestDelivery(deps, { deliveryId: 'c', body: msg(good) })).toMatchObject({
      kind: 'ack',
      outcomes: [{ reason: 'already-published' }],
    });
  });

  it('odd item ids become one safe key segment and round-trip through the published key', async () => {
    for (const id of ['a/b?c#d e%zz', '..', '.hidden.', 'Zürich 東京 🛰', 'x'.repeat(300)]) {
      const key = ingestKeys.published('scenes/', SOURCE, id, 'f'.repeat(64), 'B04');
      expect(validateObjectKey(key)).toBe(key);
      expect(key.split('/')).toHaveLength(5);
      expect(parsePublishedKey(key)).toEqual({ source: SOURCE, externalId: id, checksum: 'f'.repeat(64) });
    }
    expect(keySegment('..')).toBe('%2E%2E');
    const { b, deps } = fresh();
    const o = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'a/b?c#d',
      href: await stageSource(b, 'in/a.tif', await validArtefact()),
    });
    expect(o.reason).toBe('published');
    expect(await isIngestedObject(b.manifest, o.key as string)).toBe(true);
    expect(await isIngestedObject(b.manifest, 'scenes/direct-upload.tif')).toBe(false);
  });

  it('ingests a STAC item: its GeoTIFF assets together, relative hrefs resolved, file:checksum used', async () => {
    const { b, deps } = fresh();
    const red = await validArtefact(3);
    const nir = await validArtefact(4);
    const files: Record<string, Uint8Array> = { '/items/B04.tif': red, '/items/B08.tif': nir };
    const item = {
      type: 'Feature',
      stac_version: '1.0.0',
      id: ITEM,
      assets: {
        B04: { href: './B04.tif', type: 'image/tiff; application=geotiff; profile=cloud-optimized', 'file:checksum': `1220${sha(red)}` },
        B08: { href: 'B08.tif', type: 'image/tiff; application=geotiff' },
        thumbnail: { href: 'thumb.png', type: 'image/png', roles: ['thumbnail'] },
      },
    };
    const http = await serve((req, res) => {
      const body = req.url === '/items/item.json' ? Buffer.from(JSON.stringify(item)) : files[req.url ?? ''];
      if (!body) res.statusCode = 404;
      else res.setHeader('content-length', body.byteLength);
      res.end(body === undefined ? undefined : Buffer.from(body));
    });
    const out = await ingest(deps, { kind: 'stac', source: SOURCE, href: `${http.url}/items/item.json` }, LOCAL_ORIGIN);
    expect(out.map((o) => [o.externalId, o.reason, o.checksum])).toEqual([
      [`${ITEM}/B04`, 'published', sha(red)],
      [`${ITEM}/B08`, 'published', sha(nir)],
    ]);
    expect(out[0]?.key).toMatch(/\/B04\.tif$/);
    const hits = http.hits();
    const again = await ingest(deps, { kind: 'stac', source: SOURCE, href: `${http.url}/items/item.json` }, LOCAL_ORIGIN);
    expect(again.map((o) => o.reason)).toEqual(['already-published', 'already-published']);
    // item.json, then only B08 (B04's file:checksum hit the manifest: no download).
    expect(http.hits() - hits).toBe(2);
    expect(await rows(b)).toHaveLength(2);
  });
});
