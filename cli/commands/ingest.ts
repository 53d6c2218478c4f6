import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createLocalBackend, localIngestDeps } from '../../functions/local/compose.js';
import { type IngestOutcome, type IngestRequest, ingest, validateIngestRequest } from '../../shared/app/ingest.js';
import { sweepStaging } from '../../shared/app/ingest-reconcile.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { addressPatternProblem, parseHostPatterns, splitList } from '../../shared/domain/remote-hosts.js';
import type { CliIo } from '../io.js';
import { openManifest } from '../manifest-option.js';
import { terminalProgress } from '../terminal-progress.js';
import { ingestOnCloud } from './ingest-cloud.js';
import { DEFAULT_DIR, intOption } from './options.js';

export const ingestHelp = `tessera ingest: stage, validate and publish one artefact, exactly once

Checks the manifest, fetches the artefact to a staging key unique to this
attempt (computing its SHA-256 as it streams), validates it (a readable,
internally tiled GeoTIFF with a CRS and at least one band, within the size
limit), copies it create-only to scenes/{source}/{item}/{sha256}/{asset}.tif
and only then registers it in the manifest. Run it again: "already published".

Options:
  --href HREF       the artefact: a local path, object:KEY (a key in the source store) or an http(s) URL
  --source NAME     its origin, e.g. sentinel-2-l2a (lower-case letters, digits, . _ -)
  --item-id ID      its id at the origin, e.g. a STAC item id
  --stac HREF       instead of --href/--item-id: a STAC Item (path, object:KEY or URL) whose GeoTIFF
                    assets are ingested together, each as "{item id}/{asset key}"
  --sha256 HEX      the expected SHA-256: a manifest hit then skips the download, other bytes are refused
  --max-bytes N     largest artefact accepted (default 1073741824, 1 GiB)
  --allowed-hosts LIST
                    comma-separated hosts http(s) hrefs may name (example.com, *.example.com): the
                    artefact's, a remote STAC Item's and its assets'. Default: any public host, and a
                    remote Item's assets only on the Item's own host. A remote Item naming object:KEY,
                    file: or a local path is refused whatever this says
  --allow-private-address ADDR
                    fetch from this non-public address (or CIDR block) all the same, e.g. 127.0.0.1 for
                    a server on this machine; repeatable. Default: loopback, private and link-local
                    addresses are refused, on every redirect
  --staging-retention-days N
                    after the run, delete staging objects older than N days (default 7), each
                    conditionally on the version listed: the local counterpart of the clouds'
                    lifecycle rules
  --manifest URL    register in PostgreSQL (postgres://user:password@host:5432/db; table
                    ingest_manifest, created if absent) instead of the SQLite manifest in --dir
  --dir PATH        backend directory (default .tessera)
  --json            print {published, reason, key, checksum, manifest} (one line per artefact)
  --verbose         print the structured logs (JSON lines) on stderr

On a deployed stack:
  --cloud aws|gcp|azure --stack NAME   enqueue the request on the stack's ingest queue (SQS queue /
                    Pub/Sub topic / Storage Queue, from \`pulumi stack output --json --show-secrets\`);
                    the stack's ingest function publishes it exactly as above. The href must be an
                    http(s) URL or object:KEY in the stack's source bucket. --json prints
                    {enqueued, cloud, stack, queue, messageId, request}. Exit 0 once enqueued.
  --outputs FILE    instead of --stack: a file holding those outputs

Exit status: 0 when every artefact is published, already published, or was
published by a concurrent run; 1 when one was refused (the message names what
failed; its staging object is kept for inspection and expires with retention);
2 for bad options.`;

export interface IngestOptionValues {
  readonly href?: string | undefined;
  readonly source?: string | undefined;
  readonly 'item-id'?: string | undefined;
  readonly stac?: string | undefined;
  readonly sha256?: string | undefined;
}

/**
 * The request the options describe, validated. Shared by the local run below
 * and by `--cloud`, which enqueues the same request (toIngestMessage).
 */
export function ingestRequestFromOptions(values: IngestOptionValues): IngestRequest {
  if (values.source === undefined) throw new InvalidParamsError('--source is required, e.g. --source sentinel-2-l2a');
  if (values.stac !== undefined) {
    if (values.href !== undefined || values['item-id'] !== undefined || values.sha256 !== undefined)
      throw new InvalidParamsError('--stac takes the ids and checksums from the item: drop --href, --item-id and --sha256');
    return validateIngestRequest({ kind: 'stac', source: values.source, href: values.stac });
  }
  if (values.href === undefined || values['item-id'] === undefined)
    throw new InvalidParamsError('give --href and --item-id (or --stac for a STAC Item)');
  return validateIngestRequest({
    kind: 'artefact',
    source: values.source,
    externalId: values['item-id'],
    href: values.href,
    checksum: values.sha256,
  });
}

/** What `--json` prints for one artefact. */
export function ingestJson(o: IngestOutcome): Record<string, unknown> {
  return {
    published: o.published,
    reason: o.reason,
    key: o.key ?? null,
    checksum: o.checksum ?? null,
    manifest: o.manifest,
    ...(o.invalid ? { invalid: o.invalid } : {}),
  };
}

export async function ingestCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      href: { type: 'string' },
      source: { type: 'string' },
      'item-id': { type: 'string' },
      stac: { type: 'string' },
      sha256: { type: 'string' },
      'max-bytes': { type: 'string' },
      'allowed-hosts': { type: 'string' },
      'allow-private-address': { type: 'string', multiple: true },
      'staging-retention-days': { type: 'string' },
      manifest: { type: 'string' },
      dir: { type: 'string', default: DEFAULT_DIR },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      // `--cloud aws|gcp|azure --stack NAME | --outputs FILE`: enqueue the same request on a deployed stack (ingest-cloud.ts).
      cloud: { type: 'string' },
      stack: { type: 'string' },
      outputs: { type: 'string' },
    },
  });
  const request = ingestRequestFromOptions(values);
  if (values.cloud !== undefined || values.stack !== undefined || values.outputs !== undefined) {
    if (values.cloud === undefined) throw new InvalidParamsError('--stack and --outputs go with --cloud aws|gcp|azure');
    if (values['allowed-hosts'] !== undefined || values['allow-private-address'] !== undefined)
      throw new InvalidParamsError(
        "--allowed-hosts and --allow-private-address are for a local run; a stack's ingest function keeps to its own tessera:ingestAllowedHosts and reaches public addresses only",
      );
    return ingestOnCloud(request, { cloud: values.cloud, stack: values.stack, outputs: values.outputs, json: values.json }, io);
  }
  const maxBytes = intOption('max-bytes', values['max-bytes'], 1024 ** 3, 1, Number.MAX_SAFE_INTEGER);
  const retentionDays = intOption('staging-retention-days', values['staging-retention-days'], 7, 0, 3650);
  const lane = laneOptions(values['allowed-hosts'], values['allow-private-address']);
  const telemetry = new JsonTelemetry(values.verbose ? (line) => io.stderr(`${line}\n`) : () => {});
  if (values.manifest !== undefined && (values.cloud !== undefined || values.stack !== undefined)) {
    throw new InvalidParamsError('--manifest is for a local run; a stack registers in its own manifest table');
  }
  const backend = createLocalBackend(resolve(io.cwd, values.dir), { telemetry });
  const progress = terminalProgress();
  let opened: Awaited<ReturnType<typeof openManifest>> | undefined;
  try {
    opened = await openManifest(values.manifest, backend);
    progress.phase('fetch');
    const outcomes = await ingest(localIngestDeps(backend, io.cwd, opened.manifest), request, {
      maxBytes,
      ...lane,
      onProgress: (received, total) => progress.update(Math.floor(received / 2 ** 20), Math.ceil((total ?? received) / 2 ** 20), 'MiB'),
    });
    progress.done();
    for (const o of outcomes) {
      if (values.json) io.stdout(`${JSON.stringify(ingestJson(o))}\n`);
      else io.stdout(`${describe(o)}\n`);
      if (o.invalid) io.stderr(`tessera ingest: ArtefactRefusedError [${o.invalid.code}] (${o.invalid.what}): ${o.invalid.message}\n`);
    }
    // Staging expires as a lifecycle rule would expire it on a cloud: only attempts older than the retention.
    await sweepStaging({ store: backend.sources, clock: backend.clock, telemetry }, { retentionMs: retentionDays * 86_400_000 });
    return outcomes.some((o) => o.reason === 'invalid') ? 1 : 0;
  } finally {
    progress.done();
    await opened?.close();
    backend.close();
  }
}

/** `--allowed-hosts` and `--allow-private-address`, checked: a typo is a bad option, never a silently open lane. */
function laneOptions(
  hostsText: string | undefined,
  addresses: readonly string[] | undefined,
): { allowedHosts?: readonly string[]; allowPrivateAddresses?: readonly string[] } {
  const out: { allowedHosts?: readonly string[]; allowPrivateAddresses?: readonly string[] } = {};
  if (hostsText !== undefined) {
    const { hosts, problems } = parseHostPatterns(splitList(hostsText));
    if (problems.length > 0) throw new InvalidParamsError(`--allowed-hosts: ${problems.join('; ')}`);
    if (hosts.length === 0) throw new InvalidParamsError('--allowed-hosts names no host; drop it to allow any public host');
    out.allowedHosts = hosts;
  }
  if (addresses !== undefined) {
    const problems = addresses.map(addressPatternProblem).filter((p) => p !== undefined);
    if (problems.length > 0) throw new InvalidParamsError(`--allow-private-address: ${problems.join('; ')}`);
    out.allowPrivateAddresses = addresses;
  }
  return out;
}

function describe(o: IngestOutcome): string {
  const id = `${o.source}/${o.externalId}`;
  const sum = o.checksum === undefined ? '' : ` sha256 ${o.checksum.slice(0, 12)}`;
  switch (o.reason) {
    case 'published':
      return `${id}: published ${o.key} (${o.manifest?.bytes ?? 0} bytes,${sum}); manifest row registered`;
    case 'already-published':
      return `${id}: already published at ${o.key} (${sum.trim()}) — no-op`;
    case 'concurrent-publisher-won':
      return `${id}: a concurrent run published it first at ${o.key} (${sum.trim()}) — no-op`;
    case 'invalid':
      return `${id}: refused (${o.invalid?.what})${o.stagingKey ? `; staging object kept at ${o.stagingKey}` : ''}`;
    default: {
      const never: never = o.reason;
      return String(never);
    }
  }
}
