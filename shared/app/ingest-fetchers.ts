import { lookup } from 'node:dns/promises';
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { pipeline } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { AdapterError, ObjectNotFoundError } from '../domain/errors.js';
import { addressPatternProblem } from '../domain/remote-hosts.js';
import type { ArtefactFetcher, ArtefactHref, OpenedArtefact, OpenOptions } from '../ports/artefact-fetcher.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { ArtefactNotFoundError, HrefRefusedError, InvalidIngestRequestError } from './ingest.js';

/** Range reads of this size stream an object-store artefact without holding two copies of a chunk. */
const OBJECT_CHUNK_BYTES = 8 * 1024 * 1024;

/**
 * `object:KEY` hrefs: a key in the source store, read by range after a `head`
 * (whose size is the up-front size check). Every backend has one.
 */
export class ObjectStoreFetcher implements ArtefactFetcher {
  readonly name: string;
  constructor(private readonly store: ObjectStore) {
    this.name = `object-store:${store.name}`;
  }

  async open(href: ArtefactHref): Promise<OpenedArtefact> {
    if (href.kind !== 'object') throw new InvalidIngestRequestError(`[fetcher:${this.name}] reads object:KEY hrefs, not ${href.kind}`);
    const head = await this.store.head(href.key);
    if (!head) throw new ArtefactNotFoundError(this.name, `object:${href.key}`);
    const { store } = this;
    const { size, version } = head;
    const { key } = href;
    let cancelled = false;
    async function* body(): AsyncIterable<Uint8Array> {
      for (let at = 0; at < size && !cancelled; at += OBJECT_CHUNK_BYTES) {
        try {
          // Pinned to the version the head saw: a replaced object fails the read rather than mix two uploads.
          yield await store.getRange(key, at, Math.min(size, at + OBJECT_CHUNK_BYTES), { version });
        } catch (cause) {
          if (cause instanceof ObjectNotFoundError) throw new ArtefactNotFoundError(store.name, `object:${key}`, { cause });
          throw cause;
        }
      }
    }
    return {
      size,
      body: body(),
      cancel: async () => {
        cancelled = true;
      },
    };
  }
}

/** A resolver: every address a host name has, as getaddrinfo answers (the default is Node's dns.lookup). */
export type ResolveFn = (hostname: string) => Promise<readonly { readonly address: string; readonly family: number }[]>;

export interface HttpFetcherOptions {
  /** How host names are resolved; a test passes one to play a DNS that answers differently each time. */
  readonly resolve?: ResolveFn | undefined;
  /** Redirects followed before the chain is refused (default {@link DEFAULT_MAX_REDIRECTS}). */
  readonly maxRedirects?: number | undefined;
  /** How long a connection may stay silent (ms) before the fetch fails, retryably (default 5 minutes). */
  readonly idleTimeoutMs?: number | undefined;
}

/** Hops a redirect chain may take. Browsers allow 20; an artefact host that needs more than 5 is misconfigured. */
export const DEFAULT_MAX_REDIRECTS = 5;
const DEFAULT_IDLE_TIMEOUT_MS = 300_000;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

const defaultResolve: ResolveFn = (hostname) => lookup(hostname, { all: true, order: 'verbatim' });

/**
 * Address blocks no ingest may reach unless a test or a local run names them (IANA's special-purpose
 * registries, https://www.iana.org/assignments/iana-ipv4-special-registry and -ipv6-): what a hostile
 * href or redirect would aim at inside the function's network (a cloud metadata service at
 * 169.254.169.254 or fd00:ec2::254, a database on 10.x, the host itself).
 */
const NON_PUBLIC: readonly (readonly [string, number, 'ipv4' | 'ipv6', string])[] = [
  ['0.0.0.0', 8, 'ipv4', '"this network"'],
  ['10.0.0.0', 8, 'ipv4', 'private'],
  ['100.64.0.0', 10, 'ipv4', 'shared address space (carrier-grade NAT)'],
  ['127.0.0.0', 8, 'ipv4', 'loopback'],
  ['169.254.0.0', 16, 'ipv4', 'link-local (cloud metadata services)'],
  ['172.16.0.0', 12, 'ipv4', 'private'],
  ['192.0.0.0', 24, 'ipv4', 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'ipv4', 'documentation'],
  ['192.88.99.0', 24, 'ipv4', '6to4 relay anycast'],
  ['192.168.0.0', 16, 'ipv4', 'private'],
  ['198.18.0.0', 15, 'ipv4', 'benchmarking'],
  ['198.51.100.0', 24, 'ipv4', 'documentation'],
  ['203.0.113.0', 24, 'ipv4', 'documentation'],
  ['224.0.0.0', 4, 'ipv4', 'multicast'],
  ['240.0.0.0', 4, 'ipv4', 'reserved or broadcast'],
  // IPv4-mapped addresses (::ffff:a.b.c.d) need no rule of their own: BlockList checks them against the IPv4 rules.
  ['::', 128, 'ipv6', 'unspecified'],
  ['::1', 128, 'ipv6', 'loopback'],
  ['::', 96, 'ipv6', 'IPv4-compatible (deprecated)'],
  ['64:ff9b:1::', 48, 'ipv6', 'local-use IPv4/IPv6 translation'],
  ['100::', 64, 'ipv6', 'discard-only'],
  ['2001::', 23, 'ipv6', 'IETF protocol assignments (Teredo among them)'],
  ['2001:db8::', 32, 'ipv6', 'documentation'],
  ['fc00::', 7, 'ipv6', 'unique local (private)'],
  ['fe80::', 10, 'ipv6', 'link-local'],
  ['fec0::', 10, 'ipv6', 'site-local (deprecated)'],
  ['ff00::', 8, 'ipv6', 'multicast'],
];
const NON_PUBLIC_RULES = NON_PUBLIC.map(([net, prefix, family, why]) => {
  const list = new BlockList();
  list.addSubnet(net, prefix, family);
  return { list, why: `${why}, ${net}/${prefix}` };
});

/** The eight 16-bit groups of an IPv6 address (dotted IPv4 tail allowed), or undefined. */
function ipv6Groups(address: string): number[] | undefined {
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const o = (dotted[1] as string).split('.').map(Number);
    text = `${text.slice(0, dotted.index)}${(((o[0] ?? 0) << 8) | (o[1] ?? 0)).toString(16)}:${(((o[2] ?? 0) << 8) | (o[3] ?? 0)).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const part = (s: string) => (s === '' ? [] : s.split(':').map((h) => Number.parseInt(h, 16)));
  const left = part(head);
  const right = tail === undefined ? [] : part(tail);
  const groups = tail === undefined ? left : [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

/**
 * The IPv4 address an IPv6 one carries to a translator: NAT64 (64:ff9b::/96, RFC 6052) and 6to4
 * (2002::/16, RFC 3056). The translator connects to it, so it is checked as an IPv4 address is.
 */
function translatedIpv4(address: string): string | undefined {
  const g = ipv6Groups(address);
  if (g === undefined) return undefined;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4(g[6] as number, g[7] as number);
  if (g[0] === 0x2002) return v4(g[1] as number, g[2] as number);
  return undefined;
}

/**
 * Why an address is not public (`loopback, 127.0.0.0/8`), or undefined when it is. IPv6 zone ids are
 * ignored; an IPv4-mapped, NAT64 or 6to4 address is judged by the IPv4 address it reaches.
 *
 * @example
 * nonPublicAddress('93.184.215.14')       // undefined
 * nonPublicAddress('::ffff:169.254.169.254') // 'link-local (cloud metadata services), 169.254.0.0/16'
 */
export function nonPublicAddress(address: string): string | undefined {
  const bare = address.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 0) return 'not an IP address';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const hit = NON_PUBLIC_RULES.find((r) => r.list.check(bare, type));
  if (hit) return hit.why;
  const inner = family === 6 ? translatedIpv4(bare) : undefined;
  const innerWhy = inner === undefined ? undefined : nonPublicAddress(inner);
  return innerWhy === undefined ? undefined : `${innerWhy}, carried in ${bare}`;
}

/** The opt-in for non-public addresses: exact addresses and CIDR blocks, IPv4 or IPv6. */
function allowList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const problem = addressPatternProblem(entry);
    if (problem !== undefined) throw new InvalidIngestRequestError(`allowPrivateAddresses: ${problem}`);
    const [address, prefix] = entry.split('/') as [string, string | undefined];
    const type = isIP(address) === 4 ? 'ipv4' : 'ipv6';
    if (prefix === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(prefix), type);
  }
  return list;
}

/**
 * `http://` and `https://` hrefs, over Node's http and https modules, confined to public addresses:
 * - every host is resolved here, before connecting, and every address it has must be public (or named
 *   by `allowPrivateAddresses`); the connection then goes to the address checked, never to a second
 *   resolution, so a DNS that answers a public address for the check and a private one for the connect
 *   (rebinding) has no second answer to give;
 * - redirects are followed by hand, each hop checked the same way before it is requested, https never
 *   downgraded to http, at most `maxRedirects` hops;
 * - a refusal is HrefRefusedError (poison on a queue), thrown before a byte is requested from the address.
 *
 * A 404 or 410 is ArtefactNotFoundError (never retried); 408, 429 and 5xx, and network failures, are
 * retryable AdapterErrors; other statuses are not retryable. Content-Length is the up-front size (when
 * the body is not content-encoded; identity is asked for, gzip, deflate and br are decoded).
 */
export class HttpFetcher implements ArtefactFetcher {
  readonly name = 'http';
  readonly #resolve: ResolveFn;
  readonly #maxRedirects: number;
  readonly #idleTimeoutMs: number;

  constructor(options: HttpFetcherOptions = {}) {
    this.#resolve = options.resolve ?? defaultResolve;
    this.#maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  }

  async open(href: ArtefactHref, options: OpenOptions = {}): Promise<OpenedArtefact> {
    if (href.kind !== 'url') throw new InvalidIngestRequestError(`[fetcher:http] reads http(s) URLs, not ${href.kind}`);
    const allowed = allowList(options.allowPrivateAddresses ?? []);
    const abort = new AbortController();
    let url = new URL(href.url);
    let response: IncomingMessage;
    for (let hop = 0; ; hop++) {
      const target = await this.#checkedAddress(url, allowed, href.url);
      response = await this.#get(url, target, abort.signal);
      if (!REDIRECTS.has(response.statusCode ?? 0)) break;
      response.destroy();
      const location = response.headers.location;
      if (location === undefined)
        throw new AdapterError(`[fetcher:http] GET ${url.href} answered ${response.statusCode} without a Location; check the URL`);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch (cause) {
        throw new HrefRefusedError('redirect', `[fetcher:http] ${url.href} redirects to ${JSON.stringify(location)}, which is not a URL`, {
          cause,
        });
      }
      if (hop + 1 > this.#maxRedirects)
        throw new HrefRefusedError(
          'redirect',
          `[fetcher:http] ${href.url} redirects more than ${this.#maxRedirects} times (last to ${next.href}); a redirect loop, or a chain to ask its host about`,
        );
      if (next.protocol !== 'http:' && next.protocol !== 'https:')
        throw new HrefRefusedError('scheme', `[fetcher:http] ${url.href} redirects to ${next.href}: only http(s) is followed`);
      if (url.protocol === 'https:' && next.protocol === 'http:')
        throw new HrefRefusedError(
          'scheme',
          `[fetcher:http] ${url.href} redirects to ${next.href}: an https href is never downgraded to http; ask its host for an https location`,
        );
      url = next;
    }
    const status = response.statusCode ?? 0;
    if (status === 404 || status === 410) {
      response.destroy();
      throw new ArtefactNotFoundError('http', url.href);
    }
    if (status < 200 || status > 299) {
      response.destroy();
      const transient = status === 408 || status === 429 || status >= 500;
      throw new AdapterError(
        `[fetcher:http] GET ${url.href} answered ${status} ${response.statusMessage ?? ''}${transient ? '; retrying' : '; check the URL and its access'}`,
        { retryable: transient },
      );
    }
    const encoding = (response.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
    const length = response.headers['content-length'];
    const size = length !== undefined && encoding === 'identity' && /^\d+$/.test(length) ? Number(length) : undefined;
    const stream = decoded(response, encoding, url.href);
    const where = url.href;
    async function* body(): AsyncIterable<Uint8Array> {
      try {
        for await (const chunk of stream) yield chunk as Uint8Array;
      } catch (cause) {
        throw new AdapterError(`[fetcher:http] reading ${where} failed mid-body (${(cause as Error).message}); retrying`, {
          cause,
          retryable: true,
        });
      }
    }
    return {
      size,
      body: body(),
      cancel: async () => abort.abort(),
    };
  }

  /** The one address this hop may connect to: the host's, every one of them public or opted in. */
  async #checkedAddress(url: URL, allowed: BlockList, asked: string): Promise<{ address: string; family: 4 | 6 }> {
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    let addresses: readonly { address: string; family: number }[];
    if (isIP(host) !== 0) addresses = [{ address: host, family: isIP(host) }];
    else {
      try {
        addresses = await this.#resolve(host);
      } catch (cause) {
        throw new AdapterError(`[fetcher:http] ${url.host} does not resolve (${(cause as Error).message}); retrying may help`, {
          cause,
          retryable: true,
        });
      }
      if (addresses.length === 0)
        throw new AdapterError(`[fetcher:http] ${url.host} resolves to no address; retrying may help`, { retryable: true });
    }
    for (const { address } of addresses) {
      const why = nonPublicAddress(address);
      const bare = address.replace(/%.*$/, '');
      if (why !== undefined && !allowed.check(bare, isIP(bare) === 4 ? 'ipv4' : 'ipv6')) {
        const via = url.href === asked ? '' : ` (a redirect of ${asked})`;
        throw new HrefRefusedError(
          'address',
          `[fetcher:http] ${url.href}${via} leads to ${address}, which is not a public address (${why}); nothing was requested from it. ` +
            'An ingest fetches from public origins only; a test or a local run against its own server names that address in allowPrivateAddresses (tessera ingest --allow-private-address)',
        );
      }
    }
    const first = addresses[0] as { address: string; family: number };
    return { address: first.address, family: first.family === 6 ? 6 : 4 };
  }

  /** One GET, connected to `target` whatever a resolver would say now (no second lookup to rebind). */
  async #get(url: URL, target: { address: string; family: 4 | 6 }, signal: AbortSignal): Promise<IncomingMessage> {
    // Loaded here, not at the top: an ES module importing node:http evaluates every export, undici's among them
    // (some 40 ms), in each process that loads this file, and most of them never fetch (docs/packages.md).
    const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
    const idle = this.#idleTimeoutMs;
    const pinned: LookupFunction = (_host, options, callback) => {
      if (options.all) callback(null, [target]);
      else callback(null, target.address, target.family);
    };
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(
        url,
        {
          method: 'GET',
          signal,
          // A fresh connection per request: a pooled socket could be one opened to another address.
          agent: false,
          headers: { 'accept-encoding': 'identity', 'user-agent': 'tessera-ingest' },
          timeout: idle,
          lookup: pinned,
        },
        resolve,
      );
      req.on('timeout', () => req.destroy(new Error(`no answer for ${Math.round(idle / 1000)} s`)));
      req.on('error', (cause) =>
        reject(new AdapterError(`[fetcher:http] GET ${url.href} failed (${cause.message}); retrying may help`, { cause, retryable: true })),
      );
      req.end();
    });
  }
}

/** The body as sent, decoded where the origin encoded it despite the identity asked for. */
function decoded(response: IncomingMessage, encoding: string, where: string): AsyncIterable<Uint8Array> {
  const decoder =
    encoding === 'identity'
      ? undefined
      : encoding === 'gzip' || encoding === 'x-gzip'
        ? createGunzip()
        : encoding === 'deflate'
          ? createInflate()
          : encoding === 'br'
            ? createBrotliDecompress()
            : null;
  if (decoder === undefined) return response;
  if (decoder === null) {
    response.destroy();
    throw new AdapterError(
      `[fetcher:http] ${where} is sent with content-encoding ${encoding}, which Tessera cannot decode; ask for identity`,
    );
  }
  // pipeline, not pipe: a reset connection must fail the decoder's stream, not leave it waiting.
  return pipeline(response, decoder, () => {});
}

/**
 * One fetcher per href kind. A kind with none is refused, typed (poison on a
 * queue): a cloud function has no local paths to read.
 */
export class RoutingFetcher implements ArtefactFetcher {
  readonly name: string;
  constructor(private readonly routes: Partial<Record<ArtefactHref['kind'], ArtefactFetcher>>) {
    this.name = Object.entries(routes)
      .map(([kind, f]) => `${kind}:${f.name}`)
      .join(',');
  }

  async open(href: ArtefactHref, options?: OpenOptions): Promise<OpenedArtefact> {
    const fetcher = this.routes[href.kind];
    if (!fetcher) {
      const kinds = Object.keys(this.routes).join(', ');
      throw new InvalidIngestRequestError(
        `this backend cannot read ${href.kind} hrefs (it reads: ${kinds}); ${href.kind === 'path' ? 'upload the file and pass object:KEY or an http(s) URL' : 'pass another kind of href'}`,
      );
    }
    return fetcher.open(href, options);
  }
}
