/**
 * Where an ingest artefact comes from (shared/app/ingest.ts). An href is one of
 * three kinds; each backend wires the kinds it can read (a cloud function has no
 * local paths, and refuses them as poison).
 */
export type ArtefactHref =
  /** An `http://` or `https://` URL, fetched with Node's fetch. */
  | { readonly kind: 'url'; readonly url: string }
  /** A key in the source store (`object:KEY`), read by range. */
  | { readonly kind: 'object'; readonly key: string }
  /** A local file (`file:///abs` or a path): the local backend only. */
  | { readonly kind: 'path'; readonly path: string };

/**
 * An opened artefact: its size where the origin says it up front
 * (Content-Length, `stat`, `head`), so an absurd size is refused before a byte
 * is read, and its bytes as a stream the caller hashes as it reads.
 */
export interface OpenedArtefact {
  readonly size: number | undefined;
  readonly body: AsyncIterable<Uint8Array>;
  /** Stop reading (a refusal after the size check, or a body over the limit). Idempotent. */
  cancel(): Promise<void>;
}

/** How far an open may reach (shared/app/ingest-fetchers.ts HttpFetcher; the other kinds ignore it). */
export interface OpenOptions {
  /**
   * Non-public addresses (exact, or CIDR blocks) an http(s) fetch may connect to all the same. Default none:
   * loopback, private, link-local and every other non-public address is refused, on every redirect hop.
   * Only a test or a local run against its own server sets it (IngestSettings.allowPrivateAddresses).
   */
  readonly allowPrivateAddresses?: readonly string[] | undefined;
}

/**
 * Opens hrefs of the kinds it supports. Errors: ArtefactNotFoundError (404,
 * ENOENT, no such key: never retried), AdapterError with `retryable` for
 * transient failures (5xx, network), InvalidIngestRequestError for a kind this
 * backend cannot read, HrefRefusedError for an address or a redirect outside the lane (never read).
 */
export interface ArtefactFetcher {
  readonly name: string;
  open(href: ArtefactHref, options?: OpenOptions): Promise<OpenedArtefact>;
}
