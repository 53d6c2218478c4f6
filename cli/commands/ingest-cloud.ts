import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ingestEnqueuerOf } from '../../functions/verify/ingest-targets.js';
import { type IngestRequest, parseHref, toIngestMessage } from '../../shared/app/ingest.js';
import { INGEST_CLOUDS, type IngestCloud, IngestOutputsError, parseIngestOutputs } from '../../shared/app/ingest-outputs.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { CliIo } from '../io.js';

/** The `--cloud` part of `tessera ingest` (its help text is in ingest.ts, with the rest). */
export interface CloudIngestOptions {
  readonly cloud: string;
  readonly stack?: string | undefined;
  readonly outputs?: string | undefined;
  readonly json: boolean;
}

/**
 * `tessera ingest --cloud aws|gcp|azure --stack NAME` (or `--outputs FILE`):
 * enqueue the request on the stack's ingest queue and return; the stack's
 * ingest function stages, validates, promotes and registers it exactly as
 * the local run does (same flow, shared/app/ingest.ts), and settles a bad
 * request in its DLQ. The href must be one a function can read: an http(s)
 * URL or `object:KEY` in the stack's source bucket (a local path is refused
 * here, before anything is sent: upload it first).
 *
 * Exit 0 once the queue took the request (it says where; `--json` prints
 * `{ enqueued, cloud, stack, queue, messageId, request }`). Whether it is then
 * published, already published or refused is the function's answer: its logs,
 * the manifest, and `tessera reconcile --manifest` on the stack say.
 */
export async function ingestOnCloud(request: IngestRequest, options: CloudIngestOptions, io: CliIo): Promise<number> {
  if (!(INGEST_CLOUDS as readonly string[]).includes(options.cloud))
    throw new InvalidParamsError(`--cloud must be one of ${INGEST_CLOUDS.join(', ')}, got ${JSON.stringify(options.cloud)}`);
  const cloud = options.cloud as IngestCloud;
  if ((options.stack === undefined) === (options.outputs === undefined))
    throw new InvalidParamsError('--cloud needs exactly one of --stack NAME (reads pulumi stack output) or --outputs FILE');
  if (parseHref(request.href).kind === 'path')
    throw new InvalidParamsError(
      `--cloud ${cloud}: the stack's ingest function cannot read the local path ${JSON.stringify(request.href)}; upload it to the stack's source bucket and pass object:KEY, or pass an http(s) URL`,
    );
  const source = options.stack ?? resolve(io.cwd, options.outputs as string);
  const text = options.stack !== undefined ? await pulumiOutputs(options.stack) : await readOutputs(source);
  const outputs = parseIngestOutputs(text, cloud, source);
  const body = toIngestMessage(request);
  const enqueuer = await ingestEnqueuerOf(outputs);
  const { messageId } = await enqueuer.enqueue(body);
  const stack = options.stack ?? source;
  if (options.json) {
    io.stdout(`${JSON.stringify({ enqueued: true, cloud, stack, queue: enqueuer.name, messageId, request: JSON.parse(body) })}\n`);
  } else {
    const what = request.kind === 'stac' ? `STAC item ${request.href}` : `${request.source}/${request.externalId}`;
    io.stdout(
      `${what}: enqueued on ${enqueuer.name} (message ${messageId}); the stack's ingest function publishes it once ` +
        '(a repeat is "already published"); its logs and the manifest say the outcome\n',
    );
  }
  return 0;
}

async function readOutputs(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (cause) {
    throw new IngestOutputsError(`cannot read outputs file ${path}: ${(cause as Error).message}`, { cause });
  }
}

function pulumiOutputs(stack: string): Promise<string> {
  return new Promise((ok, fail) =>
    execFile(
      'pulumi',
      ['stack', 'output', '--json', '--show-secrets', '--stack', stack],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        error
          ? fail(new IngestOutputsError(`pulumi stack output --stack ${stack} failed: ${stderr.trim() || error.message}`, { cause: error }))
          : ok(stdout),
    ),
  );
}
