import { AdapterError, ObjectNotFoundError } from '../domain/errors.js';
import type { ArtefactFetcher, ArtefactHref, OpenedArtefact } from '../ports/artefact-fetcher.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { ArtefactNotFoundError, InvalidIngestRequestError } from './ingest.js';

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

/** What HttpFetcher calls: Node's global fetch by default; a test may pass its own. */
export type FetchFn = (url: string, init: { signal: AbortSignal; redirect: 'follow' }) => Promise<Response>;

/**
 * `http://` and `https://` hrefs, with Node's fetch. A 404 or 410 is
 * ArtefactNotFoundError (never retried); 408, 429 and 5xx, and network
 * failures, are retryable AdapterErrors; other statuses are not retryable.
 * Content-Length is the up-front size (when the body is not content-encoded).
 */
export class HttpFetcher implements ArtefactFetcher {
  readonly name = 'http';
  constructor(private readonly fetchFn: FetchFn = (url, init) => fetch(url, init)) {}

  async open(href: ArtefactHref): Promise<OpenedArtefact> {
    if (href.kind !== 'url') throw new InvalidIngestRequestError(`[fetcher:http] reads http(s) URLs, not ${href.kind}`);
    const abort = new AbortController();
    let response: Response;
    try {
      response = await this.fetchFn(href.url, { signal: abort.signal, redirect: 'follow' });
    } catch (cause) {
      throw new AdapterError(`[fetcher:http] GET ${href.url} failed (${(cause as Error).message}); retrying may help`, {
        cause,
        retryable: true,
      });
    }
    if (response.status === 404 || response.status === 410) {
      await response.body?.cancel();
      throw new ArtefactNotFoundError('http', href.url);
    }
    if (!response.ok || response.body === null) {
      await response.body?.cancel();
      const transient = response.status === 408 || response.status === 429 || response.status >= 500;
      throw new AdapterError(
        `[fetcher:http] GET ${href.url} answered ${response.status} ${response.statusText}${transient ? '; retrying' : '; check the URL and its access'}`,
        { retryable: transient },
      );
    }
    const length = response.headers.get('content-length');
    const encoded = (response.headers.get('content-encoding') ?? 'identity') !== 'identity';
    const size = length !== null && !encoded && /^\d+$/.test(length) ? Number(length) : undefined;
    const stream = response.body;
    const { url } = href;
    async function* body(): AsyncIterable<Uint8Array> {
      try {
        for await (const chunk of stream) yield chunk as Uint8Array;
      } catch (cause) {
        throw new AdapterError(`[fetcher:http] reading ${url} failed mid-body (${(cause as Error).message}); retrying`, {
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

  async open(href: ArtefactHref): Promise<OpenedArtefact> {
    const fetcher = this.routes[href.kind];
    if (!fetcher) {
      const kinds = Object.keys(this.routes).join(', ');
      throw new InvalidIngestRequestError(
        `this backend cannot read ${href.kind} hrefs (it reads: ${kinds}); ${href.kind === 'path' ? 'upload the file and pass object:KEY or an http(s) URL' : 'pass another kind of href'}`,
      );
    }
    return fetcher.open(href);
  }
}
