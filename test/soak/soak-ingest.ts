import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  handleIngestDelivery,
  type IngestDeps,
  type IngestHooks,
  type IngestRequest,
  type IngestVerdict,
  ingestKeys,
  keySegment,
  toIngestMessage,
} from '../../shared/app/ingest.js';
import { reconcileManifest } from '../../shared/app/ingest-reconcile.js';
import { areaPrefix } from '../../shared/domain/key-layout.js';
import { PARITY_MAX_RECEIVE_COUNT, PARITY_SOURCE_PREFIX } from '../parity/backends.js';
import { deferred, type ScenarioContext } from '../parity/harness.js';
import { asOperator, asRole, bindRole } from '../support/function-role.js';
import type { FaultKind } from './fault-schedule.js';

/**
 * Ingestion under the soak (shared/app/ingest.ts, docs/ingest.md): artefacts named by `object:` hrefs and
 * remote STAC Items served over HTTP by this process, each request delivered as the ingest trigger delivers
 * it (handleIngestDelivery, as the `ingest` role), with the ingest faults of docs/soak.md. Every object an
 * ingest publishes under the source prefix is announced once, as its object-created event would be, and
 * the driver tiles it like any scene. The oracle (`judge`) reads the backend's own manifest and store.
 */

/** Where artefacts publish: the parity stack's source prefix, so their objects are scenes, as on a stack. */
const PUBLISHED = PARITY_SOURCE_PREFIX;
const ARTEFACT_SOURCE = 'soak';
const REMOTE_SOURCE = 'soak-remote';
/** A private object of the uploads area: what a hostile remote Item names to have it published. */
const PRIVATE_UPLOAD = `${areaPrefix('uploads')}soak-private.tif`;

/**
 * The origin listens on 127.0.0.1, which an ingest refuses by default (a loopback address is nobody's public
 * origin): the soak opts in for that one address, and allows that host by name, as only a test or a local run
 * does. 127.0.0.2 stays refused and stands for every internal service a redirect might aim at.
 */
const SETTINGS = { publishedPrefix: PUBLISHED, allowPrivateAddresses: ['127.0.0.1'], allowedHosts: ['127.0.0.1'] } as const;

/** The ingest crash points, in the order the `ingest-crash` fault takes them (the orphan-making one first). */
const CRASH_POINTS = [
  'afterCopy',
  'afterStage',
  'afterValidate',
  'afterCommit',
  'beforeFetch',
] as const satisfies readonly (keyof IngestHooks)[];

/** The hostile remote Items, in the order `remote-hostile-item` takes them. */
const HOSTILE = ['object-href', 'other-host', 'file-href', 'redirect-to-private'] as const;
type Hostile = (typeof HOSTILE)[number];

/** One artefact the soak asked to publish: what must end up registered, once. */
interface Artefact {
  readonly label: string;
  readonly source: string;
  readonly externalId: string;
  readonly checksum: string;
  readonly key: string;
  readonly bytes: Uint8Array;
}

/** The soak's two ingestion paths: artefacts named by `object:` hrefs, and remote STAC Items. */
export type IngestPath = 'ingest' | 'remote-stac';

export interface IngestHooksOfSoak {
  /** A published object appeared (its object-created event): tile it. */
  published(label: string, key: string, version: string, bytes: Uint8Array): Promise<void>;
  fired(kind: FaultKind): void;
  anomaly(path: IngestPath, line: string): void;
}

const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
const pathOf = (source: string): IngestPath => (source === REMOTE_SOURCE ? 'remote-stac' : 'ingest');

export class SoakIngest {
  readonly #ctx: ScenarioContext;
  readonly #hooks: IngestHooksOfSoak;
  readonly #deps: IngestDeps;
  readonly #origin: Origin;
  readonly #internal: Origin;
  readonly #artefacts: Artefact[] = [];
  readonly #hostile: { label: string; id: string; variant: Hostile; paths: string[] }[] = [];
  readonly #announced = new Set<string>();
  #crashes = 0;
  #hostiles = 0;
  #transients = 0;
  #deliveryIds = 0;
  /** Ingest deliveries made (attempts, duplicates and racing ones included). */
  deliveries = 0;

  private constructor(ctx: ScenarioContext, hooks: IngestHooksOfSoak, origin: Origin, internal: Origin) {
    this.#ctx = ctx;
    this.#hooks = hooks;
    this.#deps = ctx.ingestDeps();
    this.#origin = origin;
    this.#internal = internal;
  }

  static async start(ctx: ScenarioContext, hooks: IngestHooksOfSoak, privateBytes: Uint8Array): Promise<SoakIngest> {
    const [origin, internal] = await Promise.all([Origin.start('127.0.0.1'), Origin.start('127.0.0.2')]);
    internal.route('/secret.tif', (_req, res) => sendBytes(res, privateBytes));
    const put = await ctx.backend.sources.putIfAbsent(PRIVATE_UPLOAD, privateBytes);
    if (put.kind !== 'written') throw new Error(`could not upload ${PRIVATE_UPLOAD}`);
    return new SoakIngest(ctx, hooks, origin, internal);
  }

  async close(): Promise<void> {
    await Promise.all([this.#origin.close(), this.#internal.close()]);
  }

  /** What each path's oracle checks: the artefacts asked for, and (remote) the refused Items too. */
  checked(path: IngestPath): number {
    return this.#artefacts.filter((a) => pathOf(a.source) === path).length + (path === 'remote-stac' ? this.#hostile.length : 0);
  }

  /**
   * One artefact, uploaded under the uploads area and ingested by an `object:` href, with the faults drawn
   * for it: a crash at an ingest step (redelivered), two deliveries racing, the message again after it
   * settled, a manifest reconcile whose two listings it runs between.
   */
  async artefact(label: string, bytes: Uint8Array, faults: ReadonlySet<FaultKind>): Promise<void> {
    const upload = `${areaPrefix('uploads')}soak-${label}.tif`;
    const put = await this.#ctx.backend.sources.putIfAbsent(upload, bytes);
    if (put.kind !== 'written') throw new Error(`could not upload ${upload}`);
    const request: IngestRequest = { kind: 'artefact', source: ARTEFACT_SOURCE, externalId: label, href: `object:${upload}` };
    this.#expect(label, ARTEFACT_SOURCE, label, 'data', bytes);
    const body = toIngestMessage(request);
    const ingest = () => this.#settle(label, ARTEFACT_SOURCE, body, faults);
    if (faults.has('reconcile-race')) await this.#reconcileAround(label, ingest);
    else await ingest();
    if (faults.has('duplicate-ingest')) await this.#duplicate(label, ARTEFACT_SOURCE, body);
  }

  /**
   * A remote STAC Item on the origin whose assets are on the same origin: each asset is an artefact. With
   * `remote-transient` the origin answers its first asset request with a 503 or a body cut short (retried);
   * with `remote-hostile-item` a second Item, which names something outside its lane, is delivered too and
   * must be poison before any of its assets is read.
   */
  async remoteItem(label: string, assets: Readonly<Record<string, Uint8Array>>, faults: ReadonlySet<FaultKind>): Promise<void> {
    const hrefs: Record<string, string> = {};
    let first = true;
    for (const [band, bytes] of Object.entries(assets)) {
      const path = `/feed/${label}-${band}.tif`;
      // One relative href, one root-relative: both resolve onto the Item's own origin.
      hrefs[band] = first ? `./${label}-${band}.tif` : path;
      let transient = first && faults.has('remote-transient') ? (this.#transients++ % 2 === 0 ? '503' : 'cut-short') : undefined;
      this.#origin.route(path, (_req, res) => {
        if (transient === '503') {
          transient = undefined;
          this.#hooks.fired('remote-transient');
          res.statusCode = 503;
          res.end('busy');
          return;
        }
        if (transient === 'cut-short') {
          transient = undefined;
          this.#hooks.fired('remote-transient');
          res.setHeader('content-length', bytes.byteLength);
          res.end(Buffer.from(bytes.subarray(0, Math.floor(bytes.byteLength / 2))));
          res.socket?.destroy();
          return;
        }
        sendBytes(res, bytes);
      });
      this.#expect(label, REMOTE_SOURCE, `${label}/${band}`, band, bytes);
      first = false;
    }
    this.#origin.route(`/feed/${label}.json`, (_req, res) => sendJson(res, stacItem(label, hrefs)));
    const href = `${this.#origin.base}/feed/${label}.json`;
    await this.#settle(label, REMOTE_SOURCE, toIngestMessage({ kind: 'stac', source: REMOTE_SOURCE, href }), faults);
    if (faults.has('remote-hostile-item')) await this.#hostileItem(`${label}h`);
  }

  /** A remote Item naming something outside its lane: poison at its first delivery, nothing of it read, staged or published. */
  async #hostileItem(id: string): Promise<void> {
    const variant = HOSTILE[this.#hostiles++ % HOSTILE.length] as Hostile;
    const paths: string[] = [];
    let href: string;
    switch (variant) {
      case 'object-href':
        href = `object:${PRIVATE_UPLOAD}`;
        break;
      case 'other-host':
        href = 'http://assets.invalid/B04.tif';
        break;
      case 'file-href':
        href = 'file:///etc/hostname';
        break;
      case 'redirect-to-private': {
        // The Item and its asset are on its origin; the asset answers with a redirect to an internal address.
        const path = `/feed/${id}-B04.tif`;
        const to = `${this.#internal.base}/secret.tif`;
        this.#origin.route(path, (_req, res) => {
          res.statusCode = 302;
          res.setHeader('location', to);
          res.end();
        });
        paths.push(path);
        href = path;
        break;
      }
      default: {
        const never: never = variant;
        throw new Error(`unknown hostile item ${String(never)}`);
      }
    }
    this.#origin.route(`/feed/${id}.json`, (_req, res) => sendJson(res, stacItem(id, { B04: href })));
    this.#hostile.push({ label: id, id, variant, paths });
    this.#hooks.fired('remote-hostile-item');
    const body = toIngestMessage({ kind: 'stac', source: REMOTE_SOURCE, href: `${this.#origin.base}/feed/${id}.json` });
    const v = await this.#attempt(body, 1, undefined);
    const code = v.kind === 'poison' ? (v.error as { code?: string }).code : undefined;
    if (v.kind !== 'poison' || code !== 'HREF_REFUSED')
      this.#hooks.anomaly(
        'remote-stac',
        `remote ${id} (${variant}): ${v.kind}${code ? ` ${code}` : ''}, not poison HREF_REFUSED at its first delivery`,
      );
  }

  #expect(label: string, source: string, externalId: string, asset: string, bytes: Uint8Array): void {
    const checksum = sha256(bytes);
    this.#artefacts.push({
      label,
      source,
      externalId,
      checksum,
      key: ingestKeys.published(PUBLISHED, source, externalId, checksum, asset),
      bytes,
    });
  }

  /** Deliver a message until the trigger settles it (ack or poison), with its first delivery's faults. */
  async #settle(label: string, source: string, body: string, faults: ReadonlySet<FaultKind>): Promise<void> {
    const path = pathOf(source);
    const crashAt = faults.has('ingest-crash') ? CRASH_POINTS[this.#crashes++ % CRASH_POINTS.length] : undefined;
    for (let n = 1; n <= PARITY_MAX_RECEIVE_COUNT; n++) {
      let v: IngestVerdict | { readonly kind: 'crashed' };
      if (n === 1 && faults.has('ingest-race')) {
        // Two deliveries of one message at once (a redelivery while the first still runs): one publishes. A crash
        // point goes to both: only the one that wins the lease reaches the later steps, and which one wins is a race
        // (seed 99639904 on gcp: the crashing one lost, so ingest-crash never fired).
        const [a, b] = await Promise.all([this.#attempt(body, 1, crashAt), this.#attempt(body, 1, crashAt)]);
        this.#hooks.fired('ingest-race');
        if (a.kind === 'crashed' || b.kind === 'crashed') this.#hooks.fired('ingest-crash');
        v = a.kind === 'ack' || a.kind === 'poison' ? a : b;
      } else {
        v = await this.#attempt(body, n, n === 1 ? crashAt : undefined);
        if (v.kind === 'crashed') this.#hooks.fired('ingest-crash');
      }
      await this.#announce(label);
      if (v.kind === 'ack') return this.#checkAck(label, path, v, false);
      if (v.kind === 'poison') return this.#hooks.anomaly(path, `ingest ${label}: a valid request was poison: ${v.error.message}`);
    }
    this.#hooks.anomaly(path, `ingest ${label}: not settled in ${PARITY_MAX_RECEIVE_COUNT} deliveries`);
  }

  /** The message again after it settled: every artefact is already published, nothing new is written. */
  async #duplicate(label: string, source: string, body: string): Promise<void> {
    const path = pathOf(source);
    this.#hooks.fired('duplicate-ingest');
    for (let n = 1; n <= PARITY_MAX_RECEIVE_COUNT; n++) {
      const v = await this.#attempt(body, n, undefined);
      if (v.kind === 'ack') return this.#checkAck(label, path, v, true);
      if (v.kind === 'poison') return this.#hooks.anomaly(path, `ingest ${label}: its duplicate was poison: ${v.error.message}`);
    }
  }

  #checkAck(label: string, path: IngestPath, v: Extract<IngestVerdict, { kind: 'ack' }>, duplicate: boolean): void {
    for (const o of v.outcomes) {
      const want = this.#artefacts.find((a) => a.source === o.source && a.externalId === o.externalId);
      if (want === undefined || o.key !== want.key)
        this.#hooks.anomaly(
          path,
          `ingest ${label}: ${o.externalId} published under ${o.key ?? 'nothing'}, not ${want?.key ?? '(not asked for)'}`,
        );
      if (duplicate && o.reason !== 'already-published')
        this.#hooks.anomaly(path, `ingest ${label}: a duplicate of a settled request answered ${o.reason} for ${o.externalId}`);
    }
  }

  /** One delivery; `crashAt`: the ingest dies at that step (nothing after it ever runs, as a killed function). */
  async #attempt(
    body: string,
    receiveCount: number,
    crashAt: keyof IngestHooks | undefined,
  ): Promise<IngestVerdict | { readonly kind: 'crashed' }> {
    this.deliveries++;
    const died = deferred<{ readonly kind: 'crashed' }>();
    const hooks: IngestHooks =
      crashAt === undefined
        ? {}
        : {
            [crashAt]: () => {
              died.resolve({ kind: 'crashed' });
              return new Promise<never>(() => {});
            },
          };
    const deliveryId = `ingest-${++this.#deliveryIds}`;
    return Promise.race([
      asRole('ingest', () => handleIngestDelivery(this.#deps, { deliveryId, body, receiveCount }, { ...SETTINGS, hooks })),
      died.promise,
    ]);
  }

  /** Announce every published object that appeared since (its object-created event), once. */
  async #announce(label: string): Promise<void> {
    for (const a of this.#artefacts) {
      if (a.label !== label || this.#announced.has(a.key)) continue;
      const head = await this.#ctx.backend.sources.head(a.key);
      if (head === undefined) continue;
      this.#announced.add(a.key);
      await this.#hooks.published(
        `${label}${a.externalId.includes('/') ? a.externalId.slice(a.externalId.indexOf('/') + 1) : ''}`,
        a.key,
        head.version,
        a.bytes,
      );
    }
  }

  /**
   * A manifest reconcile (the `reconcile` role) with `ingest` running to completion between its two listings,
   * whichever it reads first: the race of issue 25 section 3. The re-check must dissolve it: no finding.
   */
  async #reconcileAround(label: string, ingest: () => Promise<void>): Promise<void> {
    let ran = false;
    const wrap = betweenListings(async () => {
      ran = true;
      // Another function's work, not the reconcile's: it starts outside the reconcile's role and takes its own.
      await asOperator(ingest);
    });
    // The reconcile's own store and manifest calls run as `reconcile`, and nothing else: work that resumes in this
    // call's async context (a racing ingest, the soak's own bookkeeping) is never charged to it.
    const r = await reconcileManifest(
      {
        // The role binds the reconcile's own requests (inside), the race runs in the soak's context (outside).
        store: wrap(bindRole(this.#ctx.backend.sources, 'reconcile')),
        manifest: wrap(bindRole(this.#ctx.manifest, 'reconcile')),
        telemetry: this.#ctx.backend.telemetry,
      },
      SETTINGS,
    );
    if (!ran) {
      await ingest();
      return;
    }
    this.#hooks.fired('reconcile-race');
    for (const k of r.objectsWithoutRow) this.#hooks.anomaly('ingest', `reconcile racing ingest ${label}: object without a row ${k}`);
    for (const x of r.rowsWithoutObject) this.#hooks.anomaly('ingest', `reconcile racing ingest ${label}: row without its object ${x.key}`);
    for (const x of r.sizeMismatches) this.#hooks.anomaly('ingest', `reconcile racing ingest ${label}: size mismatch ${x.key}`);
  }

  /**
   * The ingest oracle: one manifest row per artefact identity (source, id, checksum), for every artefact asked
   * for and for nothing else, its object there with its bytes; after a reconcile (the `reconcile` role) no
   * orphan object and no row without its object; nothing of a refused remote Item read, staged or published.
   */
  async judge(): Promise<void> {
    const flag = (line: string, path: IngestPath = 'ingest') => this.#hooks.anomaly(path, line);
    const rows = new Map<string, number>();
    const rowKeys = new Map<string, string>();
    for await (const r of this.#ctx.manifest.list()) {
      const id = `${r.source}\n${r.externalId}\n${r.checksum}`;
      rows.set(id, (rows.get(id) ?? 0) + 1);
      rowKeys.set(id, r.key);
      if (!this.#artefacts.some((a) => `${a.source}\n${a.externalId}\n${a.checksum}` === id))
        flag(
          `ingest: a manifest row for ${r.source}/${r.externalId} (${r.checksum.slice(0, 12)}), which the soak never asked to publish`,
          pathOf(r.source),
        );
    }
    for (const a of this.#artefacts) {
      const id = `${a.source}\n${a.externalId}\n${a.checksum}`;
      const n = rows.get(id) ?? 0;
      const path = pathOf(a.source);
      if (n !== 1) flag(`ingest ${a.label}: ${n} manifest rows for ${a.externalId} (one per artefact identity)`, path);
      else if (rowKeys.get(id) !== a.key) flag(`ingest ${a.label}: its row names ${rowKeys.get(id)}, not ${a.key}`, path);
      const head = await this.#ctx.backend.sources.head(a.key);
      if (head === undefined) flag(`ingest ${a.label}: ${a.key} was never published`, path);
      else if (sha256(await this.#ctx.backend.sources.get(a.key)) !== a.checksum)
        flag(`ingest ${a.label}: ${a.key} does not hold the artefact its checksum names`, path);
    }
    const r = await reconcileManifest(
      {
        store: bindRole(this.#ctx.backend.sources, 'reconcile'),
        manifest: bindRole(this.#ctx.manifest, 'reconcile'),
        telemetry: this.#ctx.backend.telemetry,
      },
      SETTINGS,
    );
    for (const k of r.objectsWithoutRow) flag(`ingest: after reconcile, an orphan object ${k}`);
    for (const x of r.rowsWithoutObject) flag(`ingest: after reconcile, a row without its object ${x.key}`);
    for (const x of r.sizeMismatches) flag(`ingest: after reconcile, ${x.key} is ${x.objectBytes} bytes, its row says ${x.rowBytes}`);
    const staged: string[] = [];
    for await (const h of this.#ctx.backend.sources.list('staging/')) staged.push(h.key);
    for (const h of this.#hostile) {
      const seg = `/${REMOTE_SOURCE}/${keySegment(`${h.id}/`)}`;
      if (staged.some((k) => k.includes(seg))) flag(`remote ${h.id} (${h.variant}): something of it was staged`, 'remote-stac');
      for await (const o of this.#ctx.backend.sources.list(`${PUBLISHED}${REMOTE_SOURCE}/${keySegment(`${h.id}/`)}`))
        flag(`remote ${h.id} (${h.variant}): ${o.key} was published`, 'remote-stac');
    }
    if (this.#internal.hits.length > 0) flag(`remote: the internal address was reached (${this.#internal.hits.join(', ')})`, 'remote-stac');
  }
}

/**
 * Ports whose listings are instrumented: once the first listing that ends (whichever the reconcile reads
 * first), `race` runs to completion before that listing reports its end, so the live work lands between the
 * two listings on every backend.
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
                // The live work is its own function's (and the soak's bookkeeping the operator's), never the reconcile's.
                await asOperator(race);
              }
            },
          };
        };
      },
    });
}

/** An HTTP origin on `host` whose routes are added as the soak makes Items; every path asked for is recorded. */
class Origin {
  readonly hits: string[] = [];
  readonly #routes = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();
  private constructor(
    private readonly server: Server,
    readonly base: string,
  ) {}

  static async start(host: string): Promise<Origin> {
    let origin: Origin | undefined;
    const server = createServer((req, res) => origin?.serve(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, resolve);
    });
    origin = new Origin(server, `http://${host}:${(server.address() as AddressInfo).port}`);
    return origin;
  }

  route(path: string, handler: (req: IncomingMessage, res: ServerResponse) => void): void {
    this.#routes.set(path, handler);
  }

  serve(req: IncomingMessage, res: ServerResponse): void {
    this.hits.push(req.url ?? '');
    const route = this.#routes.get(req.url ?? '');
    if (route) route(req, res);
    else {
      res.statusCode = 404;
      res.end('no such thing');
    }
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function sendBytes(res: ServerResponse, bytes: Uint8Array): void {
  res.setHeader('content-type', 'image/tiff');
  res.setHeader('content-length', bytes.byteLength);
  res.end(Buffer.from(bytes));
}

function sendJson(res: ServerResponse, doc: unknown): void {
  res.setHeader('content-type', 'application/geo+json');
  res.end(JSON.stringify(doc));
}

const stacItem = (id: string, assets: Readonly<Record<string, string>>) => ({
  type: 'Feature',
  stac_version: '1.0.0',
  id,
  geometry: null,
  properties: { datetime: '2026-06-12T10:56:19Z' },
  links: [],
  assets: Object.fromEntries(Object.entries(assets).map(([k, href]) => [k, { href, type: 'image/tiff; application=geotiff' }])),
});
