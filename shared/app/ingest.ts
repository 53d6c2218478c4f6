import { assertNever } from '../domain/claim.js';
import { contentDigest } from '../domain/content-digest.js';
import { AdapterError, TesseraError } from '../domain/errors.js';
import { DEFAULT_SOURCE_PREFIX, DEFAULT_STAGING_PREFIX } from '../domain/key-layout.js';
import { validateManifestIdentity } from '../domain/manifest-entry.js';
import { validateObjectKey } from '../domain/object-key.js';
import { hostMatches, parseHostPatterns } from '../domain/remote-hosts.js';
import type { ArtefactFetcher, ArtefactHref, OpenOptions } from '../ports/artefact-fetcher.port.js';
import type { Clock } from '../ports/clock.port.js';
import type { ManifestEntry, ManifestStore, RegisterResult } from '../ports/manifest-store.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { openGeoTiff } from '../raster/index.js';

/*
 * Idempotent ingestion (design note 2, docs/ingest.md): an arriving artefact is
 * fetched to a staging key unique to the attempt, validated, copied create-only
 * to its final key under the scene prefix, and only then registered in the
 * manifest. A committed manifest row is the only proof of publication.
 */

// ---------------------------------------------------------------- errors

/** A malformed ingest request or queue message: bad JSON, a missing field, an odd source, an href kind this backend cannot read. Poison. */
export class InvalidIngestRequestError extends TesseraError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('INVALID_INGEST_REQUEST', message, options);
  }
}

/** The href names nothing (HTTP 404/410, no such file, no such key). Not retried: the request is wrong. */
export class ArtefactNotFoundError extends TesseraError {
  constructor(fetcher: string, href: string, options: { cause?: unknown } = {}) {
    super(
      'ARTEFACT_NOT_FOUND',
      `[fetcher:${fetcher}] ${href} does not exist; check the href (and, for a URL, that it is public or signed)`,
      options,
    );
  }
}

/** What about an artefact made validation refuse it. */
export type RefusalReason =
  | 'not-found'
  | 'too-large'
  | 'checksum-mismatch'
  | 'not-a-raster'
  | 'no-crs'
  | 'unsupported'
  | 'no-bands'
  | 'empty'
  | 'not-tiled';

/** The artefact's bytes are not publishable. Never retryable: the same bytes are refused again (poison on a queue). */
export class ArtefactRefusedError extends TesseraError {
  readonly what: RefusalReason;
  constructor(what: RefusalReason, message: string, options: { cause?: unknown } = {}) {
    super('ARTEFACT_REFUSED', message, options);
    this.what = what;
  }
}

/**
 * The final key holds bytes that are not this artefact's. The checksum is in the
 * key, so only a foreign writer can have put them there: an alarm, never a
 * replacement, never registered. Not retryable (poison): an operator decides.
 */
export class IngestOccupiedError extends TesseraError {
  readonly key: string;
  constructor(store: string, key: string, checksum: string, found: { size: number; version: string } | undefined) {
    super(
      'INGEST_OCCUPIED',
      `[object-store:${store}] published key ${JSON.stringify(key)} holds ${found ? `${found.size} bytes at version ${found.version}` : 'an object that vanished'}` +
        ` that are not the artefact with sha256 ${checksum.slice(0, 16)}...; nothing was replaced and no manifest row was written. ` +
        'Find out who wrote under the published prefix (only ingestion should), move that object away, and ingest again',
    );
    this.key = key;
  }
}

/** What put an href outside its lane. */
export type HrefRefusal =
  /** A remote STAC Item names an href of another scheme (`object:`, `file:`, `s3://`, http from https), or a redirect downgrades. */
  | 'scheme'
  /** The host is neither the remote Item's own nor on the allow-list (IngestSettings.allowedHosts). */
  | 'host'
  /** The host is, or resolves to, a non-public address (loopback, private, link-local, ...) not opted in. */
  | 'address'
  /** A redirect that is no URL, or a chain longer than the hop limit. */
  | 'redirect';

/**
 * An href outside its lane (docs/ingest.md, "Remote hrefs stay in their lane"): refused before a byte is
 * read from it, and never retryable (poison on a queue): the same document names the same href again.
 */
export class HrefRefusedError extends TesseraError {
  readonly what: HrefRefusal;
  constructor(what: HrefRefusal, message: string, options: { cause?: unknown } = {}) {
    super('HREF_REFUSED', message, options);
    this.what = what;
  }
}

// ---------------------------------------------------------------- requests

/** One artefact: `href` is an `http(s)://` URL, `object:KEY` (source store) or a local path / `file://` URL. */
export interface ArtefactRequest {
  readonly kind: 'artefact';
  readonly source: string;
  readonly externalId: string;
  readonly href: string;
  /** The expected SHA-256 (lower-case hex), if the origin publishes it: a manifest hit then skips the fetch, and other bytes are refused. */
  readonly checksum?: string | undefined;
  /** The file name under the item's published folder, without `.tif`. Default `data`. */
  readonly asset?: string | undefined;
}

/** A STAC Item at `href` whose raster assets are ingested together, each as `(source, "${item.id}/${assetKey}")`. */
export interface StacRequest {
  readonly kind: 'stac';
  readonly source: string;
  readonly href: string;
}

export type IngestRequest = ArtefactRequest | StacRequest;

const SOURCE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Item ids become one key segment each; the cap keeps the whole key inside the stores' 1,024 bytes. */
const MAX_ITEM_ID_BYTES = 400;
const MAX_ASSET_BYTES = 100;

/** The message type on the ingest queue. */
export const INGEST_MESSAGE_TYPE = 'tessera.ingest';

/** Check a request's fields; throws InvalidIngestRequestError naming the field. Returns the request. */
export function validateIngestRequest<R extends IngestRequest>(request: R): R {
  const fail = (why: string): never => {
    throw new InvalidIngestRequestError(`ingest request: ${why}`);
  };
  if (typeof request.source !== 'string' || !SOURCE_NAME.test(request.source))
    fail(
      `source ${JSON.stringify(request.source)} must be 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit (e.g. sentinel-2-l2a)`,
    );
  if (typeof request.href !== 'string' || request.href.length === 0) fail('href is empty: give a local path, object:KEY or an http(s) URL');
  parseHref(request.href);
  if (request.kind === 'artefact') {
    try {
      validateManifestIdentity('ingest', request.source, request.externalId);
    } catch (cause) {
      fail((cause as Error).message);
    }
    if (Buffer.byteLength(request.externalId, 'utf8') > MAX_ITEM_ID_BYTES)
      fail(`item id is longer than ${MAX_ITEM_ID_BYTES} bytes of UTF-8; it becomes one segment of the published key`);
    if (request.checksum !== undefined && !SHA256_HEX.test(request.checksum))
      fail(`checksum ${JSON.stringify(request.checksum)} is not a lower-case hex SHA-256 (64 characters 0-9a-f)`);
    if (request.asset !== undefined) assetName(request.asset);
  }
  return request;
}

/**
 * An href as the fetcher port sees it.
 *
 * @example
 * parseHref('https://example.com/T31UDQ.tif') // { kind: 'url', url: 'https://example.com/T31UDQ.tif' }
 * parseHref('object:incoming/T31UDQ.tif')      // { kind: 'object', key: 'incoming/T31UDQ.tif' }
 * parseHref('/data/T31UDQ.tif')                // { kind: 'path', path: '/data/T31UDQ.tif' }
 */
export function parseHref(href: string): ArtefactHref {
  if (/^https?:\/\//i.test(href)) {
    try {
      return { kind: 'url', url: new URL(href).href };
    } catch (cause) {
      throw new InvalidIngestRequestError(`href ${JSON.stringify(href)} is not a valid URL`, { cause });
    }
  }
  if (href.startsWith('object:')) {
    const key = href.slice('object:'.length);
    try {
      return { kind: 'object', key: validateObjectKey(key) };
    } catch (cause) {
      throw new InvalidIngestRequestError(`href ${JSON.stringify(href)}: ${(cause as Error).message}`, { cause });
    }
  }
  if (/^file:/i.test(href)) {
    try {
      return { kind: 'path', path: decodeURIComponent(new URL(href).pathname) };
    } catch (cause) {
      throw new InvalidIngestRequestError(`href ${JSON.stringify(href)} is not a valid file: URL`, { cause });
    }
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(href))
    throw new InvalidIngestRequestError(
      `href ${JSON.stringify(href)} has a scheme Tessera cannot fetch; use http(s)://, object:KEY or a local path`,
    );
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we refuse
  if (/[\u0000-\u001f]/.test(href)) throw new InvalidIngestRequestError(`href ${JSON.stringify(href)} contains a control character`);
  return { kind: 'path', path: href };
}

/** The body of an ingest queue message (what `tessera ingest --cloud` enqueues). */
export function toIngestMessage(request: IngestRequest): string {
  validateIngestRequest(request);
  return request.kind === 'stac'
    ? JSON.stringify({ type: INGEST_MESSAGE_TYPE, v: 1, source: request.source, stac: request.href })
    : JSON.stringify({
        type: INGEST_MESSAGE_TYPE,
        v: 1,
        source: request.source,
        externalId: request.externalId,
        href: request.href,
        ...(request.checksum === undefined ? {} : { checksum: request.checksum }),
        ...(request.asset === undefined ? {} : { asset: request.asset }),
      });
}

/** Parse an ingest queue message. Anything malformed is InvalidIngestRequestError: poison, settled at once. */
export function parseIngestMessage(body: string): IngestRequest {
  let m: unknown;
  try {
    m = JSON.parse(body);
  } catch (cause) {
    throw new InvalidIngestRequestError(`ingest message is not JSON: ${JSON.stringify(body.slice(0, 120))}`, { cause });
  }
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new InvalidIngestRequestError('ingest message is not a JSON object');
  const o = m as Record<string, unknown>;
  if (o.type !== INGEST_MESSAGE_TYPE || o.v !== 1)
    throw new InvalidIngestRequestError(
      `ingest message has type ${JSON.stringify(o.type)} v ${JSON.stringify(o.v)}; expected ${INGEST_MESSAGE_TYPE} v 1`,
    );
  const str = (name: string, optional = false): string | undefined => {
    const v = o[name];
    if (v === undefined && optional) return undefined;
    if (typeof v !== 'string')
      throw new InvalidIngestRequestError(`ingest message field ${name} must be a string, got ${JSON.stringify(v)}`);
    return v;
  };
  const source = str('source') as string;
  if (o.stac !== undefined) {
    if (o.href !== undefined || o.externalId !== undefined)
      throw new InvalidIngestRequestError('ingest message has both stac and href/externalId; send one STAC item or one artefact');
    return validateIngestRequest({ kind: 'stac', source, href: str('stac') as string });
  }
  return validateIngestRequest({
    kind: 'artefact',
    source,
    externalId: str('externalId') as string,
    href: str('href') as string,
    checksum: str('checksum', true),
    asset: str('asset', true),
  });
}

// ---------------------------------------------------------------- keys

/**
 * One key segment from an id: percent-encoded (so `/`, `?`, `#`, `%` and
 * spaces cannot split or confuse a key), with a leading or trailing `.` as
 * `%2E` (no `.`/`..` segments; Azure refuses names ending in a dot).
 */
export function keySegment(id: string): string {
  return encodeURIComponent(id).replace(/^\./, '%2E').replace(/\.$/, '%2E');
}

function assetName(asset: string): string {
  if (asset.length === 0 || Buffer.byteLength(asset, 'utf8') > MAX_ASSET_BYTES)
    throw new InvalidIngestRequestError(`asset name ${JSON.stringify(asset.slice(0, 120))} must be 1-${MAX_ASSET_BYTES} bytes`);
  return keySegment(asset);
}

/** Default prefixes. `scenes/` is the scene trigger's default source prefix (tessera:sourcePrefix); staging lives outside it. */
export { DEFAULT_STAGING_PREFIX };
export const DEFAULT_PUBLISHED_PREFIX = DEFAULT_SOURCE_PREFIX;

/** The keys of one artefact. The published key carries the checksum, so new bytes of one item id never meet the old object. */
export const ingestKeys = {
  staging: (prefix: string, runId: string, source: string, externalId: string, asset: string): string =>
    validateObjectKey(`${prefix}${runId}/${source}/${keySegment(externalId)}/${assetName(asset)}.tif`),
  published: (prefix: string, source: string, externalId: string, checksum: string, asset: string): string =>
    validateObjectKey(`${prefix}${source}/${keySegment(externalId)}/${checksum}/${assetName(asset)}.tif`),
};

/** The identity a published key was made from, or undefined when the key is not of the layout. */
export function parsePublishedKey(
  key: string,
  publishedPrefix = DEFAULT_PUBLISHED_PREFIX,
): { source: string; externalId: string; checksum: string } | undefined {
  if (!key.startsWith(publishedPrefix)) return undefined;
  const parts = key.slice(publishedPrefix.length).split('/');
  if (parts.length !== 4) return undefined;
  const [source, item, checksum] = parts as [string, string, string, string];
  if (!SOURCE_NAME.test(source) || !SHA256_HEX.test(checksum)) return undefined;
  try {
    return { source, externalId: decodeURIComponent(item), checksum };
  } catch {
    return undefined;
  }
}

/**
 * Whether an object under the published prefix is a registered artefact: for a
 * scene trigger that requires ingestion. Not wired by default (docs/ingest.md,
 * "Which scenes tile"): direct uploads under the prefix still tile.
 */
export async function isIngestedObject(manifest: ManifestStore, key: string, publishedPrefix = DEFAULT_PUBLISHED_PREFIX): Promise<boolean> {
  const id = parsePublishedKey(key, publishedPrefix);
  if (id === undefined) return false;
  const row = await manifest.get(id.source, id.externalId, id.checksum);
  return row?.key === key;
}

// ---------------------------------------------------------------- the flow

/** Everything ingestion needs, wired by one compose file per backend. */
export interface IngestDeps {
  /** The SOURCE store: staging and final keys live in it, so the scene trigger sees the promoted key. */
  readonly store: ObjectStore;
  readonly manifest: ManifestStore;
  readonly fetcher: ArtefactFetcher;
  readonly clock: Clock;
  readonly telemetry: Telemetry;
  /** A fresh id per attempt (a random UUID): the staging folder and the row's runId. Never a date. */
  readonly newRunId: () => string;
}

/** Test seams for crash injection: a hook that throws (or kills the process) is the ingest dying at that point. */
export interface IngestHooks {
  beforeFetch?(ctx: IngestPoint): Promise<void> | void;
  afterStage?(ctx: IngestPoint): Promise<void> | void;
  afterValidate?(ctx: IngestPoint): Promise<void> | void;
  afterCopy?(ctx: IngestPoint): Promise<void> | void;
  afterCommit?(ctx: IngestPoint): Promise<void> | void;
}

export interface IngestPoint {
  readonly runId: string;
  readonly source: string;
  readonly externalId: string;
  readonly stagingKey: string;
}

export interface IngestSettings {
  readonly stagingPrefix?: string | undefined;
  readonly publishedPrefix?: string | undefined;
  /** Largest artefact accepted, in bytes (default 1 GiB). The bytes are held in memory between fetch and promotion. */
  readonly maxBytes?: number | undefined;
  readonly hooks?: IngestHooks | undefined;
  /** Called as bytes arrive (a CLI progress line). `total` where the origin said the size. */
  readonly onProgress?: ((received: number, total: number | undefined) => void) | undefined;
  /**
   * Hosts (`example.com`, `*.example.com`) an http(s) href may name: an artefact's, a remote STAC Item's and
   * its assets' (stack config tessera:ingestAllowedHosts, `tessera ingest --allowed-hosts`). Unset or empty:
   * any public host, and a remote Item's assets on that Item's own host only.
   */
  readonly allowedHosts?: readonly string[] | undefined;
  /**
   * Non-public addresses (exact, or CIDR blocks) an http(s) fetch may connect to all the same. Default none:
   * loopback, private, link-local and the rest are refused on every redirect hop. Only a test or a local run
   * against its own server sets it (`tessera ingest --allow-private-address 127.0.0.1`); infra/ never does.
   */
  readonly allowPrivateAddresses?: readonly string[] | undefined;
}

export const DEFAULT_MAX_INGEST_BYTES = 1024 ** 3;
/** A STAC Item is JSON: anything bigger is not one. */
const MAX_STAC_ITEM_BYTES = 4 * 1024 * 1024;

export type IngestReason = 'published' | 'already-published' | 'concurrent-publisher-won' | 'invalid';

/**
 * What one artefact's ingest came to. `published` is true only for the attempt
 * whose row is the committed one; every other success is a no-op by construction.
 */
export interface IngestOutcome {
  readonly published: boolean;
  readonly reason: IngestReason;
  readonly source: string;
  readonly externalId: string;
  /** The published key (this run's or the winner's); undefined when invalid before a checksum was known. */
  readonly key: string | undefined;
  readonly checksum: string | undefined;
  /** The committed row that holds the identity (this run's or the winner's); null when invalid. */
  readonly manifest: ManifestEntry | null;
  readonly runId: string;
  /** This attempt's staging key, where one was written (a refusal leaves it for inspection; retention expires it). */
  readonly stagingKey: string | undefined;
  readonly invalid?: { readonly code: string; readonly what: RefusalReason; readonly message: string } | undefined;
}

/**
 * Ingest one request: one outcome per artefact (a STAC Item: one per raster
 * asset, in asset order). Throws InvalidIngestRequestError for a malformed
 * request, IngestOccupiedError (an alarm) and retryable AdapterErrors.
 */
export async function ingest(deps: IngestDeps, request: IngestRequest, settings: IngestSettings = {}): Promise<IngestOutcome[]> {
  validateIngestRequest(request);
  switch (request.kind) {
    case 'artefact':
      return [await ingestArtefact(deps, request, settings)];
    case 'stac': {
      const out: IngestOutcome[] = [];
      // Every asset is checked against the Item's lane before the first one is fetched.
      for (const asset of await readStacItem(deps, request, settings)) out.push(await ingestArtefact(deps, asset, settings));
      return out;
    }
    default:
      return assertNever(request, 'ingest request');
  }
}

/**
 * Ingest one artefact. Safe to call any number of times, concurrently too.
 *
 * Timeline (crash points and what each leaves behind, docs/ingest.md):
 * 0. the href's lane: an http(s) host off the allow-list is HrefRefusedError before anything is read;
 *    the fetcher refuses a non-public address the same way, on every redirect hop.
 * 1. pre-check the manifest by (source, externalId), before any byte is fetched.
 *    With an expected checksum that a row holds: `already-published`, nothing fetched.
 *    (crash before fetch: nothing at all)
 * 2. fetch, SHA-256 as the bytes stream, refusing past `maxBytes` (before reading, where the size is said).
 *    A pre-check row with this checksum: `already-published`, nothing written.
 *    Else a create-only write to `staging/{runId}/...`: unique per attempt, outside the scene prefix.
 *    (crash after staging: a staging object that retention expires)
 * 3. validate the staged bytes (read back by range, pinned to the staged version): a readable raster,
 *    a CRS, >= 1 band, width and height > 0, internally tiled. A refusal leaves only the staging object.
 *    (crash after validate: a staging object that retention expires)
 * 4. re-check the manifest for the identity: a row now (a concurrent publisher won): no copy.
 *    Copy the validated bytes create-only to the final key; the same bytes already there is success
 *    (a concurrent publisher, or this artefact's crashed earlier attempt); other bytes are an alarm.
 *    (crash after copy, before commit: an object without a row; reconcile lists it; a retry repairs it)
 * 5. register the row, create-only (the adapter re-checks under its transaction / condition).
 *    Another attempt's row is `concurrent-publisher-won`.
 *    (crash after commit: every retry exits 0, `already-published`)
 * Copy first, register second, never the other way: a row is never without its object.
 */
export async function ingestArtefact(deps: IngestDeps, request: ArtefactRequest, settings: IngestSettings = {}): Promise<IngestOutcome> {
  validateIngestRequest(request);
  const { store, manifest, telemetry } = deps;
  const stagingPrefix = settings.stagingPrefix ?? DEFAULT_STAGING_PREFIX;
  const publishedPrefix = settings.publishedPrefix ?? DEFAULT_PUBLISHED_PREFIX;
  checkPrefixes(stagingPrefix, publishedPrefix);
  const maxBytes = settings.maxBytes ?? DEFAULT_MAX_INGEST_BYTES;
  const asset = request.asset ?? 'data';
  const { source, externalId } = request;
  const runId = deps.newRunId();
  const stagingKey = ingestKeys.staging(stagingPrefix, runId, source, externalId, asset);
  const point: IngestPoint = { runId, source, externalId, stagingKey };
  // The lane first: an href outside it is refused before anything is read, the manifest included.
  const href = parseHref(request.href);
  const remote = remoteLane(settings);
  if (href.kind === 'url') remote.checkHost(new URL(href.url), request.href);
  const fields = { source, externalId, runId };
  const base = { source, externalId, runId } as const;
  const hit = (row: ManifestEntry, reason: 'already-published' | 'concurrent-publisher-won', staged: string | undefined): IngestOutcome => {
    telemetry.count(reason === 'already-published' ? 'ingest-already-published' : 'ingest-lost-race');
    telemetry.log('INFO', `ingest-${reason}`, { ...fields, checksum: row.checksum, key: row.key, by: row.runId });
    return { published: false, reason, key: row.key, checksum: row.checksum, manifest: row, stagingKey: staged, ...base };
  };
  const refuse = (error: ArtefactRefusedError, checksum: string | undefined, staged: string | undefined): IngestOutcome => {
    telemetry.count('ingest-invalid');
    telemetry.log('WARN', 'ingest-refused', { ...fields, what: error.what, stagingKey: staged, message: error.message });
    return {
      published: false,
      reason: 'invalid',
      key: undefined,
      checksum,
      manifest: null,
      stagingKey: staged,
      invalid: { code: error.code, what: error.what, message: error.message },
      ...base,
    };
  };

  // 1. The cheap pre-check: a checksum needs the bytes, so it is on the identifier.
  const seen = await manifest.find(source, externalId);
  if (request.checksum !== undefined) {
    const row = seen.find((r) => r.checksum === request.checksum);
    if (row) return hit(row, 'already-published', undefined);
  }
  await settings.hooks?.beforeFetch?.(point);

  // 2. Fetch, hashing as it streams.
  let bytes: Uint8Array;
  try {
    bytes = await fetchBounded(deps.fetcher, href, request.href, maxBytes, settings.onProgress, remote.open);
  } catch (error) {
    if (error instanceof ArtefactRefusedError) return refuse(error, undefined, undefined);
    if (error instanceof ArtefactNotFoundError)
      return refuse(new ArtefactRefusedError('not-found', error.message, { cause: error }), undefined, undefined);
    throw error;
  }
  const digest = contentDigest(bytes);
  const checksum = digest.sha256Hex;
  if (request.checksum !== undefined && request.checksum !== checksum) {
    return refuse(
      new ArtefactRefusedError(
        'checksum-mismatch',
        `${request.href} has sha256 ${checksum}, not the expected ${request.checksum}: a truncated or altered download, or a stale checksum in the request`,
      ),
      checksum,
      undefined,
    );
  }
  const known = seen.find((r) => r.checksum === checksum);
  if (known) return hit(known, 'already-published', undefined);

  const staged = await store.putIfAbsent(stagingKey, bytes, { contentType: 'image/tiff' });
  let stagedVersion: string;
  if (staged.kind === 'written') stagedVersion = staged.version;
  else if (staged.sameBytes) {
    // This attempt's own write, resent after a lost answer (runIds are unique): success.
    telemetry.count('write-already-present');
    telemetry.log('INFO', 'ingest-staging-already-present', { ...fields, stagingKey });
    const version = staged.current?.version ?? (await store.head(stagingKey))?.version;
    if (version === undefined)
      throw new AdapterError(`[object-store:${store.name}] staging object ${stagingKey} vanished right after its write; retrying`, {
        retryable: true,
      });
    stagedVersion = version;
  } else {
    throw new IngestOccupiedError(store.name, stagingKey, checksum, staged.current);
  }
  await settings.hooks?.afterStage?.(point);

  // 3. Validate the staged bytes, read back pinned to the version just written.
  const refusal = await validateStaged(store, stagingKey, stagedVersion);
  if (refusal) return refuse(refusal, checksum, stagingKey);
  await settings.hooks?.afterValidate?.(point);

  // 4. Re-check, then copy create-only.
  const now = await manifest.get(source, externalId, checksum);
  if (now) return hit(now, 'concurrent-publisher-won', stagingKey);
  const key = ingestKeys.published(publishedPrefix, source, externalId, checksum, asset);
  const copy = await store.putIfAbsent(key, bytes, { contentType: 'image/tiff; application=geotiff' });
  if (copy.kind === 'written') telemetry.count('written');
  else if (copy.sameBytes) {
    // A concurrent publisher's copy, or this artefact's earlier attempt that died before its commit.
    telemetry.count('write-already-present');
    telemetry.log('INFO', 'ingest-copy-already-present', { ...fields, key });
  } else {
    const err = new IngestOccupiedError(store.name, key, checksum, copy.current);
    telemetry.count('ingest-occupied');
    telemetry.log('ERROR', 'ingest-occupied', { ...fields, key, found: copy.current?.version ?? '(vanished)', message: err.message });
    throw err;
  }
  await settings.hooks?.afterCopy?.(point);

  // 5. Register: create-only; the adapter re-checks under its transaction or condition.
  const entry: ManifestEntry = {
    source,
    externalId,
    checksum,
    key,
    bytes: bytes.byteLength,
    runId,
    publishedAt: new Date(deps.clock.now()).toISOString(),
  };
  const registered: RegisterResult = await manifest.register(entry);
  switch (registered.kind) {
    case 'registered':
      telemetry.count('ingest-published');
      telemetry.log('INFO', 'ingest-published', { ...fields, checksum, key, bytes: entry.bytes, manifest: manifest.name });
      await settings.hooks?.afterCommit?.(point);
      return { published: true, reason: 'published', key, checksum, manifest: registered.entry, stagingKey, ...base };
    case 'already-published':
      return hit(registered.entry, 'concurrent-publisher-won', stagingKey);
    default:
      return assertNever(registered, 'register result');
  }
}

function checkPrefixes(staging: string, published: string): void {
  for (const [name, p] of [
    ['stagingPrefix', staging],
    ['publishedPrefix', published],
  ] as const) {
    if (!p.endsWith('/') || p.startsWith('/'))
      throw new InvalidIngestRequestError(`${name} ${JSON.stringify(p)} must end with "/" and not start with one`);
  }
  // A staging key under the scene prefix would start tiling before it is validated: the one thing staging exists to prevent.
  if (staging.startsWith(published) || published.startsWith(staging))
    throw new InvalidIngestRequestError(
      `stagingPrefix ${JSON.stringify(staging)} and publishedPrefix ${JSON.stringify(published)} must not nest`,
    );
}

/** Read a whole artefact, hashing nothing yet, refusing past `maxBytes` (before a byte where the size is said). */
async function fetchBounded(
  fetcher: ArtefactFetcher,
  href: ArtefactHref,
  raw: string,
  maxBytes: number,
  onProgress: IngestSettings['onProgress'],
  open: OpenOptions,
): Promise<Uint8Array> {
  const tooLarge = (size: string) =>
    new ArtefactRefusedError(
      'too-large',
      `${raw} is ${size} bytes, more than the ${maxBytes} an ingest accepts; raise --max-bytes or split the artefact`,
    );
  const opened = await fetcher.open(href, open);
  if (opened.size !== undefined && opened.size > maxBytes) {
    await opened.cancel();
    throw tooLarge(String(opened.size));
  }
  const chunks: Uint8Array[] = [];
  let received = 0;
  try {
    for await (const chunk of opened.body) {
      received += chunk.byteLength;
      if (received > maxBytes) throw tooLarge(`over ${maxBytes}`);
      chunks.push(chunk);
      onProgress?.(received, opened.size);
    }
  } catch (error) {
    await opened.cancel();
    throw error;
  }
  if (opened.size !== undefined && received !== opened.size)
    throw new AdapterError(`[fetcher:${fetcher.name}] ${raw} ended after ${received} of ${opened.size} bytes; retrying`, {
      retryable: true,
    });
  return Buffer.concat(chunks);
}

/** Why the staged raster cannot be published, or undefined when it can. */
async function validateStaged(store: ObjectStore, key: string, version: string): Promise<ArtefactRefusedError | undefined> {
  const whatOf: Record<string, RefusalReason> = {
    NOT_A_RASTER: 'not-a-raster',
    RASTER_WITHOUT_CRS: 'no-crs',
    UNSUPPORTED_RASTER: 'unsupported',
    INVALID_GRID: 'too-large',
  };
  try {
    const pin = await store.pin(key, version);
    const raster = await openGeoTiff(store, key, { pin });
    if (raster.bandCount < 1) return new ArtefactRefusedError('no-bands', `${key} has no bands`);
    if (raster.width <= 0 || raster.height <= 0)
      return new ArtefactRefusedError('empty', `${key} is ${raster.width}x${raster.height} pixels`);
    if (!raster.tiled) {
      return new ArtefactRefusedError(
        'not-tiled',
        `${key} is stored in strips, not internally tiled; promotion never rewrites bytes (the published object is the artefact its checksum names), so convert it first: gdal_translate -of COG in.tif out.tif`,
      );
    }
    // Readable, not only a header: decode the first and the last block (a truncated upload fails here).
    await raster.readWindow({ x: 0, y: 0, width: 1, height: 1 }, [1]);
    await raster.readWindow({ x: raster.width - 1, y: raster.height - 1, width: 1, height: 1 }, [raster.bandCount]);
    return undefined;
  } catch (error) {
    const what = error instanceof TesseraError ? whatOf[error.code] : undefined;
    if (what === undefined) throw error;
    return new ArtefactRefusedError(what, `staged artefact refused: ${(error as Error).message}`, { cause: error });
  }
}

// ---------------------------------------------------------------- STAC

interface StacAsset {
  readonly href?: unknown;
  readonly type?: unknown;
  readonly roles?: unknown;
  readonly 'file:checksum'?: unknown;
}

/**
 * The raster assets of the STAC Item at `request.href`, as artefact requests. A remote Item (an http(s)
 * URL) stays in its lane: every asset href, resolved against the Item's URL, must be a URL of the Item's
 * own scheme on its own host or an allowed one; anything else (`object:` keys, `file:` URLs, `s3://`,
 * another host) is HrefRefusedError before any asset is read, so the Item publishes nothing.
 */
export async function readStacItem(deps: IngestDeps, request: StacRequest, settings: IngestSettings = {}): Promise<ArtefactRequest[]> {
  const remote = remoteLane(settings);
  const itemHref = parseHref(request.href);
  const itemUrl = itemHref.kind === 'url' ? new URL(itemHref.url) : undefined;
  if (itemUrl) remote.checkHost(itemUrl, request.href);
  let bytes: Uint8Array;
  try {
    bytes = await fetchBounded(deps.fetcher, itemHref, request.href, MAX_STAC_ITEM_BYTES, undefined, remote.open);
  } catch (error) {
    if (error instanceof ArtefactRefusedError || error instanceof ArtefactNotFoundError)
      throw new InvalidIngestRequestError(`STAC item ${request.href}: ${error.message}`, { cause: error });
    throw error;
  }
  let item: { type?: unknown; id?: unknown; assets?: unknown };
  try {
    item = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (cause) {
    throw new InvalidIngestRequestError(`STAC item ${request.href} is not JSON`, { cause });
  }
  if (item === null || typeof item !== 'object' || item.type !== 'Feature' || typeof item.id !== 'string')
    throw new InvalidIngestRequestError(`STAC item ${request.href} is not a STAC Item (a GeoJSON Feature with a string id)`);
  if (item.assets === null || typeof item.assets !== 'object')
    throw new InvalidIngestRequestError(`STAC item ${request.href} has no assets object`);
  const out: ArtefactRequest[] = [];
  for (const [name, raw] of Object.entries(item.assets as Record<string, StacAsset>)) {
    if (typeof raw?.href !== 'string') continue;
    const roles = Array.isArray(raw.roles) ? raw.roles : [];
    if (roles.includes('thumbnail') || roles.includes('overview')) continue;
    const isTiff = typeof raw.type === 'string' ? raw.type.toLowerCase().startsWith('image/tiff') : /\.tiff?$/i.test(raw.href);
    if (!isTiff) continue;
    const href = resolveHref(request.href, raw.href);
    if (itemUrl) remote.checkAsset(itemUrl, request.href, name, raw.href, href);
    out.push({
      kind: 'artefact',
      source: request.source,
      externalId: `${item.id}/${name}`,
      href,
      checksum: multihashSha256(raw['file:checksum']),
      asset: name,
    });
  }
  if (out.length === 0) throw new InvalidIngestRequestError(`STAC item ${item.id} at ${request.href} has no GeoTIFF asset to ingest`);
  return out;
}

/**
 * The lane of http(s) hrefs under `settings`: which hosts they may name and how far a fetch may reach.
 * Throws InvalidIngestRequestError for an allow-list entry that is no host.
 */
function remoteLane(settings: IngestSettings): {
  readonly open: OpenOptions;
  checkHost(url: URL, href: string): void;
  checkAsset(item: URL, itemHref: string, asset: string, raw: string, resolved: string): void;
} {
  const { hosts, problems } = parseHostPatterns(settings.allowedHosts ?? []);
  if (problems.length > 0) throw new InvalidIngestRequestError(`allowedHosts: ${problems.join('; ')}`);
  const listed = hosts.length === 0 ? 'none: any public host' : hosts.join(', ');
  return {
    open: { allowPrivateAddresses: settings.allowPrivateAddresses },
    checkHost(url, href) {
      if (hosts.length > 0 && !hostMatches(url.hostname, hosts))
        throw new HrefRefusedError(
          'host',
          `${href}: host ${url.hostname} is not an allowed host (${listed}); nothing was fetched. ` +
            'If it is an origin you trust, add it to tessera:ingestAllowedHosts (tessera ingest --allowed-hosts)',
        );
    },
    checkAsset(item, itemHref, asset, raw, resolved) {
      const refuse = (what: 'scheme' | 'host', why: string): never => {
        throw new HrefRefusedError(
          what,
          `STAC item ${itemHref}: asset ${JSON.stringify(asset)} names ${JSON.stringify(raw)}, ${why}; the item was refused and none of its assets was read. ` +
            'A remote Item may name only URLs of its own scheme on its own host or an allowed one (tessera:ingestAllowedHosts, tessera ingest --allowed-hosts)',
        );
      };
      let url: URL;
      try {
        url = new URL(resolved);
      } catch {
        return refuse('scheme', 'which is not a URL');
      }
      if (url.protocol !== item.protocol) refuse('scheme', `which is not an ${item.protocol.slice(0, -1)} URL as the item is`);
      if (url.hostname !== item.hostname && !hostMatches(url.hostname, hosts))
        refuse('host', `on host ${url.hostname}, which is neither the item's own (${item.hostname}) nor an allowed host (${listed})`);
    },
  };
}

/**
 * A STAC asset href, relative to its item's href (URL, object key or path). Against a URL it is resolved
 * as RFC 3986 says (a browser's way): `/x.tif` is on the Item's own host, and an href with a scheme of its
 * own stays what it is, for the lane check to judge.
 */
function resolveHref(itemHref: string, assetHref: string): string {
  const item = parseHref(itemHref);
  if (item.kind === 'url') {
    try {
      return new URL(assetHref, item.url).href;
    } catch (cause) {
      throw new InvalidIngestRequestError(`STAC item ${itemHref}: asset href ${JSON.stringify(assetHref)} is not a URL`, { cause });
    }
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(assetHref) || assetHref.startsWith('/')) return assetHref;
  switch (item.kind) {
    case 'object':
      return `object:${joinRelative(item.key, assetHref)}`;
    case 'path':
      return joinRelative(item.path, assetHref);
    default:
      return assertNever(item, 'href');
  }
}

function joinRelative(base: string, rel: string): string {
  const dir = base.includes('/') ? base.slice(0, base.lastIndexOf('/') + 1) : '';
  const parts: string[] = [];
  for (const p of `${dir}${rel}`.split('/')) {
    if (p === '..') parts.pop();
    else if (p !== '.') parts.push(p);
  }
  return parts.join('/');
}

/** The hex SHA-256 of a STAC `file:checksum` multihash (`1220` + 64 hex), if it is one. */
function multihashSha256(v: unknown): string | undefined {
  return typeof v === 'string' && /^1220[0-9a-f]{64}$/i.test(v) ? v.slice(4).toLowerCase() : undefined;
}

// ---------------------------------------------------------------- queue deliveries

export interface IngestDelivery {
  readonly body: string;
  readonly deliveryId: string;
  readonly receiveCount?: number | undefined;
}

/**
 * What an ingest trigger does with one delivery (the same rule on every cloud):
 * - `ack`: every artefact published, already published, or won by a concurrent publisher.
 * - `poison`: no retry can cure it (malformed message, refused bytes, an occupied final key):
 *   settle at once into the DLQ / poison queue (shared/app/poison.ts), never retried as transient.
 * - `retry`: a transient failure (network, 5xx, throttling, a store error): redeliver.
 */
export type IngestVerdict =
  | { readonly kind: 'ack'; readonly outcomes: readonly IngestOutcome[] }
  | { readonly kind: 'poison'; readonly error: Error; readonly outcomes?: readonly IngestOutcome[] | undefined }
  | { readonly kind: 'retry'; readonly error: Error };

/** Run one ingest queue delivery and decide its fate. Never throws. */
export async function handleIngestDelivery(
  deps: IngestDeps,
  delivery: IngestDelivery,
  settings: IngestSettings = {},
): Promise<IngestVerdict> {
  const meta = { deliveryId: delivery.deliveryId, receiveCount: delivery.receiveCount };
  try {
    const outcomes = await ingest(deps, parseIngestMessage(delivery.body), settings);
    const refused = outcomes.find((o) => o.reason === 'invalid');
    if (refused?.invalid) {
      const error = new ArtefactRefusedError(refused.invalid.what, refused.invalid.message);
      deps.telemetry.count('poison');
      deps.telemetry.log('ERROR', 'poison-message', { ...meta, kind: 'ingest', error });
      return { kind: 'poison', error, outcomes };
    }
    return { kind: 'ack', outcomes };
  } catch (error) {
    const err = error instanceof Error ? error : new Error(String(error));
    if (err instanceof TesseraError && !err.retryable) {
      deps.telemetry.count('poison');
      deps.telemetry.log('ERROR', 'poison-message', { ...meta, kind: 'ingest', error: err });
      return { kind: 'poison', error: err };
    }
    deps.telemetry.count('failed');
    deps.telemetry.log('WARN', 'ingest-failed', { ...meta, error: err });
    return { kind: 'retry', error: err };
  }
}
