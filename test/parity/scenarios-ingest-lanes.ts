import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleIngestDelivery, type IngestVerdict, ingestArtefact, toIngestMessage } from '../../shared/app/ingest.js';
import { reconcileManifest } from '../../shared/app/ingest-reconcile.js';
import { reconcile } from '../../shared/app/reconcile.js';
import { outputKeys } from '../../shared/domain/job-key.js';
import { areaPrefix } from '../../shared/domain/key-layout.js';
import { asRole } from '../support/function-role.js';
import { validArtefact } from '../support/ingest-fixtures.js';
import { PARITY_SOURCE_PREFIX } from './backends.js';
import { PARITY_PARAMS, parityScene, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { allCommitted, outcome, type Scenario, sceneOutputs, tiles } from './scenario-kit.js';

// Issue 25, sections 3 and 4: a reconcile racing live work raises no false alarm (91), and a remote STAC Item or
// an http(s) href stays in its lane: no object key or local path named by a remote document, no private address
// reached by a redirect (92, 93). Each runs the shared flow (shared/app/ingest.ts, ingest-reconcile.ts, reconcile.ts)
// against each backend's own source store, manifest, claims and outputs; the HTTP origins are this process's.

const SOURCE = 'sentinel-2-l2a';
const PUBLISHED = PARITY_SOURCE_PREFIX;
/**
 * The origins below listen on 127.0.0.1, which an ingest refuses by default (a loopback address is nobody's public
 * origin). The scenarios opt in for that one address, by name, as only a test or a local run does; 127.0.0.2 stays
 * refused and stands for every internal service a redirect might aim at.
 */
const SETTINGS = { publishedPrefix: PUBLISHED, allowPrivateAddresses: ['127.0.0.1'] } as const;

const short = (s: string): string => s.replace(/[0-9a-f]{64}/g, (h) => h.slice(0, 12));
const sha12 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex').slice(0, 12);
const codeOf = (v: IngestVerdict): string | null => (v.kind === 'ack' ? null : ((v.error as { code?: string }).code ?? null));

/** Upload an artefact under the layout's uploads area (what an `object:` href names). */
async function upload(ctx: ScenarioContext, name: string, bytes: Uint8Array): Promise<string> {
  const key = `${areaPrefix('uploads')}${name}`;
  const put = await ctx.backend.sources.putIfAbsent(key, bytes);
  if (put.kind !== 'written') throw new Error(`could not upload ${key}: ${put.kind}`);
  return `object:${key}`;
}

/** What ingestion left in the source store and the manifest. */
async function ingestState(ctx: ScenarioContext): Promise<Json> {
  const list = async (prefix: string) => {
    const out: string[] = [];
    for await (const h of ctx.backend.sources.list(prefix)) out.push(short(h.key));
    return out.sort();
  };
  const rows: string[] = [];
  for await (const r of ctx.manifest.list()) rows.push(`${r.externalId} ${short(r.checksum)} by ${r.runId}`);
  return { staging: await list('staging/'), published: await list(PUBLISHED), rows: rows.sort() };
}

/**
 * Ports whose listings are instrumented: once the first listing of a reconcile (whichever it reads first) has
 * ended, `race` runs to completion before that listing reports its end, so the live work lands between the two
 * listings on every backend, whatever order the reconcile reads them in.
 */
function betweenListings(race: () => Promise<void>): <T extends object>(port: T) => T {
  let fired = false;
  return <T extends object>(port: T): T =>
    new Proxy(port, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop, target);
        if (prop !== 'list' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
        return (...args: unknown[]): AsyncIterable<unknown> => {
          const inner = (value as (...a: unknown[]) => AsyncIterable<unknown>).apply(target, args);
          return {
            async *[Symbol.asyncIterator]() {
              yield* inner;
              if (!fired) {
                fired = true;
                await race();
              }
            },
          };
        };
      },
    });
}

/** An HTTP origin on `host`; `routes` answers by path, anything else 404. Records every path asked for. */
async function origin(
  host: string,
  routes: Record<string, (req: IncomingMessage, res: ServerResponse, base: string) => void>,
): Promise<{ base: string; hits: string[]; close(): Promise<void> }> {
  const hits: string[] = [];
  let base = '';
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const route = routes[req.url ?? ''];
    if (route) route(req, res, base);
    else {
      res.statusCode = 404;
      res.end('no such thing');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  base = `http://${host}:${(server.address() as AddressInfo).port}`;
  return { base, hits, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const sendBytes = (bytes: Uint8Array) => (_req: IncomingMessage, res: ServerResponse) => {
  res.setHeader('content-type', 'image/tiff');
  res.setHeader('content-length', bytes.byteLength);
  res.end(Buffer.from(bytes));
};
const sendJson = (doc: unknown) => (_req: IncomingMessage, res: ServerResponse) => {
  res.setHeader('content-type', 'application/geo+json');
  res.end(JSON.stringify(doc));
};
const redirectTo = (where: (base: string) => string) => (_req: IncomingMessage, res: ServerResponse, base: string) => {
  res.statusCode = 302;
  res.setHeader('location', where(base));
  res.end();
};

const item = (id: string, assets: Record<string, string>) => ({
  type: 'Feature',
  stac_version: '1.0.0',
  id,
  geometry: null,
  properties: { datetime: '2026-06-12T10:56:19Z' },
  links: [],
  assets: Object.fromEntries(Object.entries(assets).map(([k, href]) => [k, { href, type: 'image/tiff; application=geotiff' }])),
});

const FIXTURES = {
  a: sha12(await parityScene()),
  b: sha12(await validArtefact(9)),
  c: sha12(await validArtefact(10)),
  red: sha12(await validArtefact(3)),
  nir: sha12(await validArtefact(4)),
  secret: sha12(await validArtefact(5)),
};

export const INGEST_LANE_SCENARIOS: readonly Scenario[] = [
  {
    id: '91',
    title:
      'reconcile racing live work raises no false alarm: an ingest that copies and registers between the manifest reconcile’s two listings, and tile commits between the tiles reconcile’s, are never “deleted data”; a really deleted object still is',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      const ingestOne = async (id: string, href: string) => {
        const o = await asRole('ingest', () => ingestArtefact(deps, { kind: 'artefact', source: SOURCE, externalId: id, href }, SETTINGS));
        ctx.note(`ingest:${o.reason}`);
      };
      const a = await upload(ctx, 'a.tif', await parityScene());
      const b = await upload(ctx, 'b.tif', await validArtefact(9));
      const c = await upload(ctx, 'c.tif', await validArtefact(10));
      await ingestOne('A', a);

      const manifestReconcile = async (race: () => Promise<void>) => {
        const wrap = betweenListings(race);
        const r = await asRole('reconcile', () =>
          reconcileManifest({ store: wrap(ctx.backend.sources), manifest: wrap(ctx.manifest), telemetry: ctx.backend.telemetry }, SETTINGS),
        );
        return {
          objectsWithoutRow: r.objectsWithoutRow.map(short),
          rowsWithoutObject: r.rowsWithoutObject.map((x) => short(x.key)),
          sizeMismatches: r.sizeMismatches.map((x) => short(x.key)),
          // The race was seen, and dissolved by the re-check (not merely run after both listings).
          settledByRecheck: r.settledByRecheck ?? null,
        };
      };
      const alarmsSoFar = () => ctx.logs().filter((l) => l.level === 'ERROR').length;
      // 1. An ingest of B copies and registers between the two listings: nothing is wrong, nothing may be raised.
      ctx.fact('racingIngest', await manifestReconcile(() => ingestOne('B', b)));
      ctx.fact('errorsAfterRacingIngest', alarmsSoFar());
      // 2. A's published object is deleted behind ingestion's back, and C races the reconcile: A is reported, C is not.
      const aKey = `${PUBLISHED}${SOURCE}/A/${(await ctx.manifest.find(SOURCE, 'A'))[0]?.checksum}/data.tif`;
      const head = await ctx.backend.sources.head(aKey);
      if (!head) throw new Error(`${aKey} was never published`);
      await ctx.backend.sources.deleteIfVersion(aKey, head.version);
      ctx.fact('deletedAndRacingIngest', await manifestReconcile(() => ingestOne('C', c)));

      // 3. Tiles: scene S is complete, one of its tiles is deleted; scene T's four tiles are written and committed
      // between the tiles reconcile's two listings.
      const s = await ctx.fanOut('S', { source: await ctx.stage('incoming/s.tif'), params: PARITY_PARAMS });
      await ctx.drain('w1');
      await ctx.fanOut('T', { source: await ctx.stage('incoming/t.tif'), params: PARITY_PARAMS });
      await ctx.deleteOutput(outputKeys.tile(s.sceneKey, { row: 0, col: 0 }));
      const wrap = betweenListings(() => ctx.drain('w2'));
      const r = await reconcile({ ...ctx.backend, outputs: wrap(ctx.backend.outputs), claims: wrap(ctx.backend.claims) });
      ctx.fact('tilesRacingCommits', {
        objectsWithoutClaim: r.objectsWithoutClaim.map((k) => ctx.relative(k)),
        claimsWithoutObject: r.claimsWithoutObject.map((x) => ctx.relative(x.outputUri)),
        settledByRecheck: r.settledByRecheck ?? null,
      });
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ingest:published': 3, 'fan-out:written': 2, 'ack:written': 8 },
      outputs: [...sceneOutputs('S', false).filter((k) => k !== 'S/tiles/0_0.tif'), ...sceneOutputs('T', false)].sort(),
      counters: { written: 11, 'ingest-published': 3, enqueued: 8, claimed: 8, committed: 8 },
      alarms: { 'manifest-reconciled': 1 },
      claims: [...allCommitted('S', 'w1'), ...allCommitted('T', 'w2')],
      facts: {
        racingIngest: { objectsWithoutRow: [], rowsWithoutObject: [], sizeMismatches: [], settledByRecheck: 1 },
        errorsAfterRacingIngest: 0,
        deletedAndRacingIngest: {
          objectsWithoutRow: [],
          rowsWithoutObject: [`${PUBLISHED}${SOURCE}/A/${FIXTURES.a}/data.tif`],
          sizeMismatches: [],
          settledByRecheck: 1,
        },
        tilesRacingCommits: { objectsWithoutClaim: [], claimsWithoutObject: tiles('S', '0_0'), settledByRecheck: 4 },
      },
    }),
  },
  {
    id: '92',
    title:
      'a remote STAC Item stays in its lane: one naming an object: key of the source bucket, or an asset on a host not allowed, is poison before any asset is read and publishes nothing; one whose hrefs stay on its origin publishes',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      // A private object the ingest role can read (uploads/ is its to read), which no remote document may name.
      const secret = await upload(ctx, 'private.tif', await validArtefact(5));
      const feed = await origin('127.0.0.1', {
        '/feed/hostile.json': sendJson(item('HOSTILE', { B04: './B04.tif', secret })),
        '/feed/elsewhere.json': sendJson(item('ELSEWHERE', { B04: 'http://assets.invalid/B04.tif' })),
        '/feed/good.json': sendJson(item('GOOD', { B04: 'B04.tif', B08: '/feed/B08.tif' })),
        '/feed/B04.tif': sendBytes(await validArtefact(3)),
        '/feed/B08.tif': sendBytes(await validArtefact(4)),
      });
      try {
        const verdicts: Json[] = [];
        for (const name of ['hostile', 'elsewhere', 'good']) {
          const body = toIngestMessage({ kind: 'stac', source: SOURCE, href: `${feed.base}/feed/${name}.json` });
          const v = await asRole('ingest', () => handleIngestDelivery(deps, { deliveryId: name, body }, SETTINGS));
          ctx.note(`ingest:${v.kind}`);
          verdicts.push({ item: name, verdict: v.kind, code: codeOf(v) });
        }
        ctx.fact('verdicts', verdicts);
        ctx.fact('originAskedFor', [...feed.hits]);
        ctx.fact('state', await ingestState(ctx));
      } finally {
        await feed.close();
      }
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ingest:poison': 2, 'ingest:ack': 1 },
      counters: { poison: 2, written: 2, 'ingest-published': 2 },
      alarms: { 'poison-message': 2 },
      facts: {
        verdicts: [
          { item: 'hostile', verdict: 'poison', code: 'HREF_REFUSED' },
          { item: 'elsewhere', verdict: 'poison', code: 'HREF_REFUSED' },
          { item: 'good', verdict: 'ack', code: null },
        ],
        // The refused items were read, their assets never: nothing of theirs was fetched, staged or published.
        originAskedFor: ['/feed/hostile.json', '/feed/elsewhere.json', '/feed/good.json', '/feed/B04.tif', '/feed/B08.tif'],
        state: {
          staging: [`staging/run-1/${SOURCE}/GOOD%2FB04/B04.tif`, `staging/run-2/${SOURCE}/GOOD%2FB08/B08.tif`],
          published: [
            `${PUBLISHED}${SOURCE}/GOOD%2FB04/${FIXTURES.red}/B04.tif`,
            `${PUBLISHED}${SOURCE}/GOOD%2FB08/${FIXTURES.nir}/B08.tif`,
          ],
          rows: [`GOOD/B04 ${FIXTURES.red} by run-1`, `GOOD/B08 ${FIXTURES.nir} by run-2`],
        },
      },
    }),
  },
  {
    id: '93',
    title:
      'an http(s) href reaches public addresses only: loopback without the opt-in, a redirect to a private address (IPv4 or IPv4-mapped IPv6) and a redirect loop are poison before a byte is read; a redirect within the allowed origin publishes',
    async run(ctx) {
      const deps = ctx.ingestDeps();
      // An internal service on another loopback address: what a redirect to 169.254.169.254 or 10.x would reach.
      const internal = await origin('127.0.0.2', { '/secret.tif': sendBytes(await validArtefact(5)) });
      const port = new URL(internal.base).port;
      const front = await origin('127.0.0.1', {
        '/to-internal.tif': redirectTo(() => `http://127.0.0.2:${port}/secret.tif`),
        '/to-mapped.tif': redirectTo(() => `http://[::ffff:127.0.0.2]:${port}/secret.tif`),
        '/loop.tif': redirectTo((base) => `${base}/loop.tif`),
        '/moved.tif': redirectTo((base) => `${base}/data/ok.tif`),
        '/data/ok.tif': sendBytes(await validArtefact(3)),
      });
      try {
        const verdicts: Json[] = [];
        const deliver = async (label: string, path: string, settings: object) => {
          const body = toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: label, href: `${front.base}${path}` });
          const v = await asRole('ingest', () => handleIngestDelivery(deps, { deliveryId: label, body }, settings));
          ctx.note(`ingest:${v.kind}`);
          verdicts.push({ label, verdict: v.kind, code: codeOf(v) });
        };
        // The default: loopback is refused, so the request never leaves.
        await deliver('loopback-by-default', '/data/ok.tif', { publishedPrefix: PUBLISHED });
        const askedBeforeOptIn = front.hits.length;
        await deliver('to-internal', '/to-internal.tif', SETTINGS);
        await deliver('to-mapped', '/to-mapped.tif', SETTINGS);
        await deliver('loop', '/loop.tif', SETTINGS);
        await deliver('moved', '/moved.tif', SETTINGS);
        ctx.fact('verdicts', verdicts);
        ctx.fact('askedBeforeOptIn', askedBeforeOptIn);
        ctx.fact('internalAskedFor', [...internal.hits]);
        ctx.fact('state', await ingestState(ctx));
      } finally {
        await front.close();
        await internal.close();
      }
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ingest:poison': 4, 'ingest:ack': 1 },
      counters: { poison: 4, written: 1, 'ingest-published': 1 },
      alarms: { 'poison-message': 4 },
      facts: {
        verdicts: [
          { label: 'loopback-by-default', verdict: 'poison', code: 'HREF_REFUSED' },
          { label: 'to-internal', verdict: 'poison', code: 'HREF_REFUSED' },
          { label: 'to-mapped', verdict: 'poison', code: 'HREF_REFUSED' },
          { label: 'loop', verdict: 'poison', code: 'HREF_REFUSED' },
          { label: 'moved', verdict: 'ack', code: null },
        ],
        askedBeforeOptIn: 0,
        internalAskedFor: [],
        state: {
          staging: [`staging/run-5/${SOURCE}/moved/data.tif`],
          published: [`${PUBLISHED}${SOURCE}/moved/${FIXTURES.red}/data.tif`],
          rows: [`moved ${FIXTURES.red} by run-5`],
        },
      },
    }),
  },
];
