import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalBackend, type LocalBackend, localIngestDeps } from '../../../functions/local/compose.js';
import {
  HrefRefusedError,
  handleIngestDelivery,
  type IngestDeps,
  InvalidIngestRequestError,
  ingest,
  ingestArtefact,
  toIngestMessage,
} from '../../../shared/app/ingest.js';
import { HttpFetcher, nonPublicAddress, type ResolveFn } from '../../../shared/app/ingest-fetchers.js';
import { reconcileManifest } from '../../../shared/app/ingest-reconcile.js';
import { reconcile } from '../../../shared/app/reconcile.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { outputKeys } from '../../../shared/domain/job-key.js';
import type { ArtefactFetcher, ArtefactHref, OpenedArtefact } from '../../../shared/ports/artefact-fetcher.port.js';
import { FakeClock } from '../../support/fake-clock.js';
import { validArtefact } from '../../support/ingest-fixtures.js';

// Issue 25, sections 3 and 4 (docs/ingest.md): a reconcile racing live work raises no false alarm, and an
// http(s) href, a remote STAC Item's above all, stays in its lane. Parity rows 91-93 run the same on every backend.

const SOURCE = 'sentinel-2-l2a';
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
/** serve() listens on 127.0.0.1, which an ingest refuses by default: the named opt-in. */
const LOCAL_ORIGIN = { allowPrivateAddresses: ['127.0.0.1'] } as const;

const opened: { b: LocalBackend; dir: string }[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const { b, dir } of opened.splice(0)) {
    b.close();
    rmSync(dir, { recursive: true, force: true });
  }
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

function fresh(): { b: LocalBackend; deps: IngestDeps; clock: FakeClock; logs: string[]; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-lanes-'));
  const clock = new FakeClock();
  const logs: string[] = [];
  const telemetry = new JsonTelemetry((l) => logs.push(l), { clock });
  const b = createLocalBackend(join(dir, 'backend'), { clock, telemetry });
  opened.push({ b, dir });
  return { b, deps: localIngestDeps(b, dir), clock, logs, dir };
}

const errors = (logs: string[]) => logs.map((l) => JSON.parse(l) as { level: string; event: string }).filter((l) => l.level === 'ERROR');

async function upload(b: LocalBackend, key: string, bytes: Uint8Array): Promise<string> {
  await b.sources.putIfAbsent(key, bytes);
  return `object:${key}`;
}

async function keys(b: LocalBackend, prefix: string): Promise<string[]> {
  const out: string[] = [];
  for await (const h of b.sources.list(prefix)) out.push(h.key);
  return out.sort();
}

/**
 * Ports whose listings are instrumented: when the first of the reconcile's two listings (whichever it reads
 * first) has ended, `race` runs before that listing reports its end: the live work lands between them.
 */
function betweenListings(race: () => Promise<void>): <T extends object>(port: T) => T {
  let fired = false;
  return <T extends object>(port: T): T =>
    new Proxy(port, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== 'function') return value;
        if (prop !== 'list') return value.bind(target);
        return (...args: unknown[]) => ({
          async *[Symbol.asyncIterator]() {
            yield* (value as (...a: unknown[]) => AsyncIterable<unknown>).apply(target, args);
            if (!fired) {
              fired = true;
              await race();
            }
          },
        });
      },
    });
}

/** A port whose listing leaves out what `hide` names (a listing that lags: an eventually consistent scan). */
function lagging<T extends object>(port: T, hide: (item: { key: string }) => boolean): T {
  return new Proxy(port, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (prop !== 'list') return value.bind(target);
      return (...args: unknown[]) => ({
        async *[Symbol.asyncIterator]() {
          for await (const item of (value as (...a: unknown[]) => AsyncIterable<{ key: string }>).apply(target, args))
            if (!hide(item)) yield item;
        },
      });
    },
  });
}

describe('reconcileManifest > a reconcile racing ingestion raises no false alarm', () => {
  it('an ingest that copies and registers between the two listings is reported as nothing, no ERROR; the re-check saw it', async () => {
    const { b, deps, logs } = fresh();
    await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'A',
      href: await upload(b, 'in/a.tif', await validArtefact(1)),
    });
    const hrefB = await upload(b, 'in/b.tif', await validArtefact(2));
    const wrap = betweenListings(async () => {
      const o = await ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: 'B', href: hrefB });
      expect(o.reason).toBe('published');
    });
    const r = await reconcileManifest({ store: wrap(b.sources), manifest: wrap(b.manifest), telemetry: b.telemetry });
    expect(r).toMatchObject({ rowsWithoutObject: [], objectsWithoutRow: [], sizeMismatches: [], settledByRecheck: 1 });
    expect(errors(logs)).toEqual([]);
    // Both are there and registered: the next reconcile sees both in both listings.
    expect(await reconcileManifest({ store: b.sources, manifest: b.manifest, telemetry: b.telemetry })).toMatchObject({
      rowsChecked: 2,
      objectsChecked: 2,
      settledByRecheck: 0,
    });
  });

  it('a really deleted object is still reported, at ERROR, while another ingest races the reconcile', async () => {
    const { b, deps, logs } = fresh();
    const a = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'A',
      href: await upload(b, 'in/a.tif', await validArtefact(1)),
    });
    const hrefB = await upload(b, 'in/b.tif', await validArtefact(2));
    const head = await b.sources.head(a.key as string);
    await b.sources.deleteIfVersion(a.key as string, head?.version as string);
    const wrap = betweenListings(async () => {
      await ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: 'B', href: hrefB });
    });
    const r = await reconcileManifest({ store: wrap(b.sources), manifest: wrap(b.manifest), telemetry: b.telemetry });
    expect(r.rowsWithoutObject).toEqual([{ source: SOURCE, externalId: 'A', checksum: a.checksum, key: a.key }]);
    expect(r.objectsWithoutRow).toEqual([]);
    expect(errors(logs).map((l) => l.event)).toEqual(['manifest-reconciled']);
  });

  it('a listing of rows that lags (an eventually consistent scan) is re-read by identity: no object without a row', async () => {
    const { b, deps } = fresh();
    const a = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'A',
      href: await upload(b, 'in/a.tif', await validArtefact(1)),
    });
    const manifest = lagging(b.manifest, (row) => row.key === a.key);
    const r = await reconcileManifest({ store: b.sources, manifest, telemetry: b.telemetry });
    expect(r).toMatchObject({ objectsWithoutRow: [], rowsWithoutObject: [], settledByRecheck: 1 });
  });

  it('a listing of objects that lags is re-headed before a row is called deleted', async () => {
    const { b, deps, logs } = fresh();
    const a = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'A',
      href: await upload(b, 'in/a.tif', await validArtefact(1)),
    });
    const store = lagging(b.sources, (h) => h.key === a.key);
    const r = await reconcileManifest({ store, manifest: b.manifest, telemetry: b.telemetry });
    expect(r).toMatchObject({ rowsWithoutObject: [], sizeMismatches: [], settledByRecheck: 1 });
    expect(errors(logs)).toEqual([]);
  });

  it('an object replaced by bytes of another size is reported with the size a head gives; a crashed promotion is still an object without a row', async () => {
    const { b, deps } = fresh();
    const a = await ingestArtefact(deps, {
      kind: 'artefact',
      source: SOURCE,
      externalId: 'A',
      href: await upload(b, 'in/a.tif', await validArtefact(1)),
    });
    const head = await b.sources.head(a.key as string);
    await b.sources.putIfMatch(a.key as string, new Uint8Array(10), head?.version as string);
    await ingestArtefact(
      deps,
      { kind: 'artefact', source: SOURCE, externalId: 'C', href: await upload(b, 'in/c.tif', await validArtefact(3)) },
      {
        hooks: {
          afterCopy: () => {
            throw new Error('died after copy');
          },
        },
      },
    ).catch(() => undefined);
    const r = await reconcileManifest({ store: b.sources, manifest: b.manifest, telemetry: b.telemetry });
    expect(r.sizeMismatches).toEqual([{ key: a.key, rowBytes: a.manifest?.bytes, objectBytes: 10 }]);
    expect(r.objectsWithoutRow).toEqual([`scenes/${SOURCE}/C/${sha(await validArtefact(3))}/data.tif`]);
    expect(r.settledByRecheck).toBe(0);
  });
});

describe('reconcile (tiles) > a reconcile racing tile jobs raises no false finding', () => {
  const SCENE = 'a'.repeat(64);
  const tile = (row: number, col: number) => outputKeys.tile(SCENE, { row, col });
  const jobOf = (key: string) => createHash('sha256').update(key).digest('hex');
  /** What a tile job does: claim, write, commit (or stop after the write: a crash, or a job still running). */
  async function tileJob(b: LocalBackend, clock: FakeClock, key: string, commit = true): Promise<void> {
    const jobId = jobOf(key);
    const now = clock.now();
    const claimed = await b.claims.claim({ jobId, owner: 'm@w', now, leaseUntil: now + 60_000, expiresAt: now + 7 * 86_400_000 });
    expect(claimed.kind).toBe('claimed');
    await b.outputs.putIfAbsent(key, new TextEncoder().encode(key));
    if (commit) expect((await b.claims.commit({ jobId, owner: 'm@w', outputUri: key, now })).kind).toBe('committed');
  }

  it('a tile written and committed between the two listings is no deleted tile and no missing claim; a really deleted one is reported', async () => {
    const { b, clock } = fresh();
    await tileJob(b, clock, tile(0, 0));
    await tileJob(b, clock, tile(0, 1));
    const gone = await b.outputs.head(tile(0, 1));
    await b.outputs.deleteIfVersion(tile(0, 1), gone?.version as string);
    const wrap = betweenListings(() => tileJob(b, clock, tile(1, 0)));
    const r = await reconcile({ ...b, outputs: wrap(b.outputs), claims: wrap(b.claims) }, SCENE);
    expect(r.claimsWithoutObject).toEqual([{ jobId: jobOf(tile(0, 1)), outputUri: tile(0, 1) }]);
    expect(r.objectsWithoutClaim).toEqual([]);
    expect(r.settledByRecheck).toBe(1);
  });

  it('a tile written but not committed when both claim listings ran is still reported (a crash, or a job between write and commit)', async () => {
    const { b, clock } = fresh();
    await tileJob(b, clock, tile(0, 0), false);
    const r = await reconcile(b, SCENE);
    expect(r.objectsWithoutClaim).toEqual([tile(0, 0)]);
    expect(r.settledByRecheck).toBe(0);
  });

  it('a tile listing that lags is re-headed: a committed tile it left out is not "deleted"', async () => {
    const { b, clock } = fresh();
    await tileJob(b, clock, tile(0, 0));
    const r = await reconcile({ ...b, outputs: lagging(b.outputs, (h) => h.key === tile(0, 0)) }, SCENE);
    expect(r).toMatchObject({ claimsWithoutObject: [], objectsWithoutClaim: [], settledByRecheck: 1 });
  });
});

/** A fetcher that serves documents by URL and records every open: what was read, and what never was. */
class RecordingFetcher implements ArtefactFetcher {
  readonly name = 'recording';
  readonly opened: string[] = [];
  constructor(private readonly docs: Record<string, Uint8Array>) {}
  async open(href: ArtefactHref): Promise<OpenedArtefact> {
    const name = href.kind === 'url' ? href.url : href.kind === 'object' ? `object:${href.key}` : href.path;
    this.opened.push(name);
    const body = this.docs[name];
    if (!body) throw new Error(`nothing at ${name}`);
    return {
      size: body.byteLength,
      body: (async function* () {
        yield body;
      })(),
      cancel: async () => undefined,
    };
  }
}

const itemJson = (assets: Record<string, string>) =>
  new TextEncoder().encode(
    JSON.stringify({
      type: 'Feature',
      stac_version: '1.0.0',
      id: 'S2B_T30UXB_20260612',
      assets: Object.fromEntries(Object.entries(assets).map(([k, href]) => [k, { href, type: 'image/tiff; application=geotiff' }])),
    }),
  );

describe('a remote STAC Item stays in its lane', () => {
  const ITEM = 'https://stac.example.com/items/x.json';
  function withFetcher(docs: Record<string, Uint8Array>) {
    const env = fresh();
    const fetcher = new RecordingFetcher(docs);
    return { ...env, fetcher, deps: { ...env.deps, fetcher } };
  }

  it.each([
    ['an object: key of the source store', 'object:uploads/private.tif', 'scheme'],
    ['a file: URL', 'file:///etc/hostname', 'scheme'],
    ['an s3:// URL', 's3://bucket/private.tif', 'scheme'],
    ['an http URL in an https item', 'http://stac.example.com/items/B04.tif', 'scheme'],
    ['another host', 'https://evil.example.net/B04.tif', 'host'],
    ['a scheme-relative href to another host', '//evil.example.net/B04.tif', 'host'],
  ] as const)('an item naming %s is refused before any asset is read; nothing is staged or published', async (_label, href, what) => {
    const { b, deps, fetcher } = withFetcher({ [ITEM]: itemJson({ B08: './B08.tif', B04: href }) });
    await upload(b, 'uploads/private.tif', await validArtefact(5));
    const error = await ingest(deps, { kind: 'stac', source: SOURCE, href: ITEM }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HrefRefusedError);
    expect(error).toMatchObject({ code: 'HREF_REFUSED', what, retryable: false });
    expect((error as Error).message).toContain(JSON.stringify(href));
    // The item, and nothing else: not even its good asset B08, listed first.
    expect(fetcher.opened).toEqual([ITEM]);
    expect(await keys(b, 'staging/')).toEqual([]);
    expect(await keys(b, 'scenes/')).toEqual([]);
  });

  it('hrefs on the item’s own host (relative, ../ and an absolute path) resolve there and are ingested', async () => {
    const red = await validArtefact(3);
    const nir = await validArtefact(4);
    const { deps, fetcher } = withFetcher({
      [ITEM]: itemJson({ B04: '../bands/B04.tif', B08: '/B08.tif' }),
      'https://stac.example.com/bands/B04.tif': red,
      'https://stac.example.com/B08.tif': nir,
    });
    const out = await ingest(deps, { kind: 'stac', source: SOURCE, href: ITEM });
    expect(out.map((o) => [o.reason, o.checksum])).toEqual([
      ['published', sha(red)],
      ['published', sha(nir)],
    ]);
    expect(fetcher.opened).toEqual([ITEM, 'https://stac.example.com/bands/B04.tif', 'https://stac.example.com/B08.tif']);
  });

  it('allowedHosts: an item off the list is refused before it is fetched; assets may live on a listed host; *. names the hosts below a domain', async () => {
    const red = await validArtefact(3);
    const asset = 'https://data.cdn.example.org/B04.tif';
    const { deps, fetcher } = withFetcher({ [ITEM]: itemJson({ B04: asset }), [asset]: red });
    const offList = await ingest(deps, { kind: 'stac', source: SOURCE, href: ITEM }, { allowedHosts: ['other.example.com'] }).catch(
      (e) => e,
    );
    expect(offList).toMatchObject({ code: 'HREF_REFUSED', what: 'host' });
    expect(fetcher.opened).toEqual([]);
    // The asset's host is not the item's and not listed: refused after reading the item, before the asset.
    const assetOff = await ingest(deps, { kind: 'stac', source: SOURCE, href: ITEM }, { allowedHosts: ['stac.example.com'] }).catch(
      (e) => e,
    );
    expect(assetOff).toMatchObject({ code: 'HREF_REFUSED', what: 'host' });
    expect(fetcher.opened).toEqual([ITEM]);
    // `*.example.org` does not name example.org itself, but does name data.cdn.example.org.
    const out = await ingest(deps, { kind: 'stac', source: SOURCE, href: ITEM }, { allowedHosts: ['STAC.example.com', '*.example.org'] });
    expect(out.map((o) => o.reason)).toEqual(['published']);
    expect(fetcher.opened).toEqual([ITEM, ITEM, asset]);
  });

  it('a direct http(s) href off the allow-list is poison before anything is read; a malformed entry is an invalid request', async () => {
    const { deps, fetcher } = withFetcher({});
    const body = toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'X', href: 'https://elsewhere.example.net/x.tif' });
    const v = await handleIngestDelivery(deps, { deliveryId: 'm1', body }, { allowedHosts: ['stac.example.com'] });
    expect(v).toMatchObject({ kind: 'poison', error: { code: 'HREF_REFUSED', what: 'host' } });
    expect(fetcher.opened).toEqual([]);
    for (const entry of ['example.com:8443', 'https://example.com', '*.com', 'ex ample.com/x'])
      await expect(ingest(deps, { kind: 'stac', source: SOURCE, href: ITEM }, { allowedHosts: [entry] })).rejects.toBeInstanceOf(
        InvalidIngestRequestError,
      );
  });

  it('on the local backend, which reads local paths, a remote item naming a file is refused and the file is never staged', async () => {
    const { b, deps, dir } = fresh();
    const secret = join(dir, 'secret.tif');
    writeFileSync(secret, await validArtefact(5));
    const http = await serve((req, res) => {
      if (req.url === '/item.json') res.end(Buffer.from(itemJson({ B04: `file://${secret}` })));
      else res.writeHead(404).end();
    });
    const v = await handleIngestDelivery(
      deps,
      { deliveryId: 'm1', body: toIngestMessage({ kind: 'stac', source: SOURCE, href: `${http.url}/item.json` }) },
      LOCAL_ORIGIN,
    );
    expect(v).toMatchObject({ kind: 'poison', error: { code: 'HREF_REFUSED', what: 'scheme' } });
    expect(await keys(b, '')).toEqual([]);
    // An absolute path in a remote item is a path on the item's origin, never a local file.
    const paths: string[] = [];
    const http2 = await serve((req, res) => {
      paths.push(req.url ?? '');
      if (req.url === '/item.json') res.end(Buffer.from(itemJson({ B04: secret })));
      else res.writeHead(404).end();
    });
    const out = await ingest(deps, { kind: 'stac', source: SOURCE, href: `${http2.url}/item.json` }, LOCAL_ORIGIN);
    expect(out.map((o) => [o.reason, o.invalid?.what])).toEqual([['invalid', 'not-found']]);
    expect(paths).toEqual(['/item.json', secret]);
    expect(await keys(b, '')).toEqual([]);
  });
});

/** A 127.0.0.1 (or `host`) server; `handler` answers each request; `hits` lists the paths asked for. */
async function serve(
  handler: (req: IncomingMessage, res: ServerResponse, url: string) => void,
  host = '127.0.0.1',
): Promise<{ url: string; port: number; hits: string[]; hosts: string[] }> {
  const hits: string[] = [];
  const hosts: string[] = [];
  let url = '';
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    hosts.push(req.headers.host ?? '');
    handler(req, res, url);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  url = `http://${host}:${port}`;
  return { url, port, hits, hosts };
}

async function readAll(fetcher: HttpFetcher, url: string, options = {}): Promise<Buffer> {
  const o = await fetcher.open({ kind: 'url', url }, options);
  const chunks: Uint8Array[] = [];
  for await (const c of o.body) chunks.push(c);
  return Buffer.concat(chunks);
}

describe('HttpFetcher reaches public addresses only', () => {
  it.each([
    ['93.184.215.14', undefined],
    ['2606:2800:21f:cb07:6820:80da:af6b:8b2c', undefined],
    ['::ffff:8.8.8.8', undefined],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['0.0.0.0', '"this network"'],
    ['::', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared address space'],
    ['169.254.169.254', 'link-local'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:a9fe:a9fe::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fd00:ec2::254', 'unique local'],
    ['fc00::1', 'unique local'],
    ['2001:db8::1', 'documentation'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'reserved or broadcast'],
  ])('%s: %s', (address, why) => {
    const found = nonPublicAddress(address);
    if (why === undefined) expect(found).toBeUndefined();
    else expect(found).toContain(why);
  });

  it('refuses loopback by default, before connecting: the server sees nothing; the named opt-in reaches it', async () => {
    const http = await serve((_req, res) => res.end('bytes'));
    const fetcher = new HttpFetcher();
    const refused = await readAll(fetcher, `${http.url}/a.tif`).catch((e) => e);
    expect(refused).toBeInstanceOf(HrefRefusedError);
    expect(refused).toMatchObject({ code: 'HREF_REFUSED', what: 'address', retryable: false });
    expect((refused as Error).message).toContain('allowPrivateAddresses');
    expect(http.hits).toEqual([]);
    expect((await readAll(fetcher, `${http.url}/a.tif`, LOCAL_ORIGIN)).toString()).toBe('bytes');
    // A CIDR block works as well as one address.
    expect((await readAll(fetcher, `${http.url}/a.tif`, { allowPrivateAddresses: ['127.0.0.0/8'] })).toString()).toBe('bytes');
  });

  it.each([
    'http://127.0.0.2:PORT/secret.tif',
    'http://[::ffff:127.0.0.2]:PORT/secret.tif',
    'http://[::ffff:7f00:2]:PORT/secret.tif',
    'http://169.254.169.254/latest/meta-data/',
    'http://[fd00:ec2::254]/latest/meta-data/',
    'http://[64:ff9b::a9fe:a9fe]/latest/meta-data/',
    'http://[::1]:PORT/secret.tif',
    'http://0.0.0.0:PORT/secret.tif',
    'http://10.0.0.1/',
    'http://2130706434:PORT/secret.tif',
  ])('a redirect to %s is refused before it is requested', async (target) => {
    const internal = await serve((_req, res) => res.end('internal'), '127.0.0.2');
    const location = target.replace('PORT', String(internal.port));
    const front = await serve((_req, res) => res.writeHead(302, { location }).end());
    const error = await readAll(new HttpFetcher(), `${front.url}/go.tif`, LOCAL_ORIGIN).catch((e) => e);
    expect(error).toMatchObject({ code: 'HREF_REFUSED', what: 'address' });
    expect((error as Error).message).toContain(`a redirect of ${front.url}/go.tif`);
    expect(internal.hits).toEqual([]);
    expect(front.hits).toEqual(['/go.tif']);
  });

  it('a name is resolved before connecting: one that resolves to a private address, or to a public and a private one, is refused', async () => {
    for (const answer of [['10.0.0.7'], ['93.184.215.14', '169.254.169.254']]) {
      const resolve: ResolveFn = async () => answer.map((address) => ({ address, family: 4 }));
      const error = await readAll(new HttpFetcher({ resolve }), 'https://feed.example.com/a.tif').catch((e) => e);
      expect(error).toMatchObject({ code: 'HREF_REFUSED', what: 'address' });
      expect((error as Error).message).toContain(answer.at(-1));
    }
  });

  it('connects to the address it checked, never to a second answer (DNS rebinding); each redirect hop is resolved and checked anew', async () => {
    const http = await serve((req, res, base) => {
      if (req.url === '/hop') res.writeHead(302, { location: `http://rebind.test:${new URL(base).port}/a.tif` }).end();
      else res.end('bytes');
    });
    const answers: string[] = [];
    // Checked answer first, then what a rebinding DNS says next: 127.0.0.2 (not opted in).
    const rebinding = (): ResolveFn => {
      let calls = 0;
      return async (host) => {
        answers.push(host);
        return [{ address: calls++ === 0 ? '127.0.0.1' : '127.0.0.2', family: 4 }];
      };
    };
    const url = `http://rebind.test:${http.port}/a.tif`;
    expect((await readAll(new HttpFetcher({ resolve: rebinding() }), url, LOCAL_ORIGIN)).toString()).toBe('bytes');
    expect(answers).toEqual(['rebind.test']);
    expect(http.hosts).toEqual([`rebind.test:${http.port}`]);
    // On a redirect back to the same name, its second answer is checked (and refused) before any request.
    const error = await readAll(new HttpFetcher({ resolve: rebinding() }), `http://rebind.test:${http.port}/hop`, LOCAL_ORIGIN).catch(
      (e) => e,
    );
    expect(error).toMatchObject({ code: 'HREF_REFUSED', what: 'address' });
    expect((error as Error).message).toContain('127.0.0.2');
    expect(http.hits).toEqual(['/a.tif', '/hop']);
  });

  it('follows 5 redirects, refuses a sixth and any redirect to another scheme', async () => {
    const http = await serve((req, res) => {
      const m = /^\/r(\d+)$/.exec(req.url ?? '');
      if (m) res.writeHead(307, { location: Number(m[1]) > 0 ? `/r${Number(m[1]) - 1}` : '/done' }).end();
      else if (req.url === '/to-file') res.writeHead(301, { location: 'file:///etc/passwd' }).end();
      else res.end('done');
    });
    const fetcher = new HttpFetcher();
    expect((await readAll(fetcher, `${http.url}/r4`, LOCAL_ORIGIN)).toString()).toBe('done');
    const long = await readAll(fetcher, `${http.url}/r5`, LOCAL_ORIGIN).catch((e) => e);
    expect(long).toMatchObject({ code: 'HREF_REFUSED', what: 'redirect' });
    const file = await readAll(fetcher, `${http.url}/to-file`, LOCAL_ORIGIN).catch((e) => e);
    expect(file).toMatchObject({ code: 'HREF_REFUSED', what: 'scheme' });
  });

  it('decodes a body sent gzip-encoded although identity was asked for; its Content-Length is no size up front', async () => {
    const bytes = await validArtefact(6);
    let asked: string | undefined;
    const http = await serve((req, res) => {
      asked = req.headers['accept-encoding'] as string | undefined;
      const z = gzipSync(bytes);
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': String(z.byteLength) }).end(z);
    });
    const o = await new HttpFetcher().open({ kind: 'url', url: `${http.url}/a.tif` }, LOCAL_ORIGIN);
    expect(o.size).toBeUndefined();
    const chunks: Uint8Array[] = [];
    for await (const c of o.body) chunks.push(c);
    expect(sha(Buffer.concat(chunks))).toBe(sha(bytes));
    expect(asked).toBe('identity');
  });
});
