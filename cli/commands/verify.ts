import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseStackOutputs, type StackOutputs, StackOutputsError } from '../../shared/app/verify/stack-outputs.js';
import { formatMatrix, type VerifyReport, verifyPassed, verifyStack } from '../../shared/app/verify/verify-stack.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { SENTINEL_LIKE_SCENE, writeSyntheticScene } from '../../shared/raster/index.js';
import { numberOption } from './options.js';

/** Output streams and the directory relative paths are read from. */
export interface VerifyIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
  /** Standard input, for `--outputs -` (default: the process's). */
  stdin?: () => Promise<string>;
}

export const verifyHelp = `tessera verify: check a deployed stack end to end, after pulumi up

Usage: tessera verify --stack <name> [--stack <name> ...] [options]
       tessera verify --outputs <file> [--outputs <file> ...] [options]
       pulumi stack output --json --show-secrets | tessera verify --outputs -

Reads the stack's outputs (from \`pulumi stack output --json --show-secrets --stack <name>\`, or
a file with that JSON) and talks to the stack with the cloud's own credential chain (AWS:
environment, profile, SSO or web identity; Google Cloud: Application Default Credentials;
Azure: DefaultAzureCredential); nothing is hard-coded. For each stack:
  smoke   uploads a small synthetic scene under a unique key to the source bucket
          (create-only), waits for its mosaic (timeout from the stack's lease), and checks
          that the tiles written are the scene's (every zoom's, with tessera:zoom MIN-MAX)
          and every tile a COG, or an image of tessera:format (png, webp, jpeg)
  replay  re-delivers one tile message of that scene through the stack's tile queue (a
          pyramid's: one of its highest zoom and one of its lowest, a parent), then a
          duplicate of the scene event through its scene queue (Google Cloud: the scene's
          whole fan-out through the tile topic, as Eventarc takes no event from outside);
          every tile must keep its version token and modification time, and the claim
          rows stay COMMITTED
  parity  the parity scenarios that run against live stores: 16 concurrent claimers,
          16 create-only writers of one key, odd keys, a poison message into the DLQ,
          and the three backfill policies (skip, new-key, overwrite) on the smoke scene
          through the stack's tile queue (a pyramid's overwrite: refused, its repair
          dead-lettered); the others are listed as not run
  cleanup deletes what the run created (its scene, the tiles, manifest and mosaic made
          for it, its keys, claim rows and dead letters), each delete conditional on the
          version or row state verify last read; what it cannot remove is listed, and a
          job of its scenes the stack dead-lettered unasked (cleanup.faults) fails it
Several stacks print one matrix, a column per stack.

Options:
  --stack <name>      a Pulumi stack (runs pulumi stack output); repeatable
  --outputs <file>    a file of stack outputs, or - for standard input; repeatable
  --timeout <s>       wait at most this long for the smoke scene (default: 3 x lease + 420 s)
  --quiet <s>         Google Cloud: how long to watch after a message went through the tile
                      topic (Pub/Sub has no backlog count; default 15)
  --json              { stack, cloud, smoke: { pass, detail, sceneKey, tiles }, replay,
                      parity: [{ scenario, pass, detail }], cleanup: { ..., left, faults }, seconds }
                      (an array for several stacks)

Testing only: an \`emulator\` object in an outputs file points the clients at local
emulators (AWS: { s3, sqs, dynamodb } URLs; Google Cloud: { gcs, firestore, pubsub };
Azure: { connectionString } of Azurite); infra/ never writes it.

Exit status: 0 every check passed, 1 a check failed, 2 bad input (options, outputs).
Walk-through: docs/deploy.md.`;

/** A command-line mistake: reported with the usage, exit status 2. */
class VerifyUsageError extends Error {
  override readonly name = 'VerifyUsageError';
}

interface Source {
  readonly stack: string;
  read(): Promise<string>;
}

export async function verifyCommand(argv: string[], io: VerifyIo): Promise<number> {
  let opts: Options;
  try {
    opts = parseOptions(argv, io);
  } catch (e) {
    if (
      e instanceof VerifyUsageError ||
      e instanceof InvalidParamsError ||
      (e instanceof TypeError && (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))
    ) {
      io.stderr(`tessera verify: ${e.message}\n\n${verifyHelp}\n`);
      return 2;
    }
    throw e;
  }
  if (opts.sources.length === 0) return 0;
  const targets: { stack: string; outputs: StackOutputs }[] = [];
  for (const source of opts.sources) {
    try {
      targets.push({ stack: source.stack, outputs: parseStackOutputs(await source.read(), source.stack) });
    } catch (e) {
      if (e instanceof StackOutputsError) {
        io.stderr(`tessera verify: ${e.message}\n`);
        return 2;
      }
      throw e;
    }
  }
  const sceneBytes = await smokeSceneBytes();
  const reports: VerifyReport[] = [];
  for (const { stack, outputs } of targets) {
    // Loaded here, not at the top: only verify needs the clouds' SDKs (functions/verify/targets.ts).
    const { verifyTargetOf } = await import('../../functions/verify/targets.js');
    const target = await verifyTargetOf(stack, outputs, { quietMs: opts.quietMs });
    const runId = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    io.stderr(`tessera verify: ${stack} (${outputs.cloud}, ${outputs.region}), run ${runId}\n`);
    reports.push(
      await verifyStack(
        target,
        { runId, sceneBytes, timeoutMs: opts.timeoutMs },
        { progress: (line) => io.stderr(`${line}\n`), sleep: (ms) => new Promise((r) => setTimeout(r, ms)) },
      ),
    );
  }
  if (opts.json) io.stdout(`${JSON.stringify(reports.length === 1 ? reports[0] : reports, null, 2)}\n`);
  else io.stdout(`${formatMatrix(reports)}\n`);
  return reports.every(verifyPassed) ? 0 : 1;
}

interface Options {
  readonly sources: Source[];
  readonly timeoutMs: number | undefined;
  readonly quietMs: number | undefined;
  readonly json: boolean;
}

function parseOptions(argv: string[], io: VerifyIo): Options {
  const { values, positionals } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: {
      stack: { type: 'string', short: 's', multiple: true },
      outputs: { type: 'string', multiple: true },
      timeout: { type: 'string' },
      quiet: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    io.stdout(`${verifyHelp}\n`);
    return { sources: [], timeoutMs: undefined, quietMs: undefined, json: false };
  }
  if (positionals.length > 0) throw new VerifyUsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const sources: Source[] = [
    ...(values.stack ?? []).map((name) => ({ stack: name, read: () => pulumiOutputs(name) })),
    ...(values.outputs ?? []).map((file) =>
      file === '-'
        ? { stack: 'stdin', read: io.stdin ?? readStdin }
        : { stack: basename(file).replace(/\.json$/, ''), read: () => readOutputsFile(resolve(io.cwd, file)) },
    ),
  ];
  if (sources.length === 0) throw new VerifyUsageError('name a stack with --stack, or its outputs with --outputs');
  const timeout = values.timeout === undefined ? undefined : numberOption('timeout', values.timeout, 0, 1, 86_400);
  const quiet = values.quiet === undefined ? undefined : numberOption('quiet', values.quiet, 0, 0, 3600);
  return {
    sources,
    timeoutMs: timeout === undefined ? undefined : timeout * 1000,
    quietMs: quiet === undefined ? undefined : quiet * 1000,
    json: values.json,
  };
}

async function readOutputsFile(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (cause) {
    throw new StackOutputsError(`cannot read outputs file ${path}: ${(cause as Error).message}`, { cause });
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function pulumiOutputs(stack: string): Promise<string> {
  return new Promise((ok, fail) =>
    execFile(
      'pulumi',
      ['stack', 'output', '--json', '--show-secrets', '--stack', stack],
      { maxBuffer: 16 << 20 },
      (error, stdout, stderr) =>
        error
          ? fail(new StackOutputsError(`pulumi stack output --stack ${stack} failed: ${stderr.trim() || error.message}`, { cause: error }))
          : ok(stdout),
    ),
  );
}

/** A 96 x 80 px two-band scene: small enough for any stack, one tile or a few. */
async function smokeSceneBytes(): Promise<Uint8Array> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-verify-'));
  try {
    const path = join(dir, 'scene.tif');
    await writeSyntheticScene(path, { width: 96, height: 80, ...SENTINEL_LIKE_SCENE, seed: 7 });
    return new Uint8Array(await readFile(path));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
