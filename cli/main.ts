#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { TesseraError } from '../shared/domain/errors.js';
import { backfillCommand, backfillHelp } from './commands/backfill.js';
import { chooseCommand, chooseHelp } from './commands/choose.js';
import { ingestCommand, ingestHelp } from './commands/ingest.js';
import { preflightCommand, preflightHelp } from './commands/preflight.js';
import { reconcileCommand, reconcileHelp } from './commands/reconcile.js';
import { replayCommand, replayHelp } from './commands/replay.js';
import { runCommand, runHelp } from './commands/run.js';
import { streamCommand, streamHelp } from './commands/stream.js';
import { verifyCommand, verifyHelp } from './commands/verify.js';
import type { CliIo } from './io.js';

type Command = (argv: string[], io: CliIo) => Promise<number>;

const COMMANDS: Record<string, { run: Command; help: string; summary: string }> = {
  run: { run: runCommand, help: runHelp, summary: 'run the main job on the local backend (scene -> tiles -> mosaic)' },
  replay: { run: replayCommand, help: replayHelp, summary: "re-deliver a job and prove its output's version is unchanged" },
  backfill: { run: backfillCommand, help: backfillHelp, summary: 're-run a scene under a policy: skip | new-key | overwrite' },
  ingest: { run: ingestCommand, help: ingestHelp, summary: 'stage, validate and publish an artefact once (manifest: source, id, sha256)' },
  reconcile: { run: reconcileCommand, help: reconcileHelp, summary: 'compare published tiles and committed claims both ways' },
  choose: { run: chooseCommand, help: chooseHelp, summary: 'rank provider + region pairs for a job and write a stack file' },
  preflight: { run: preflightCommand, help: preflightHelp, summary: 'check a stack before pulumi up and print its plan' },
  verify: { run: verifyCommand, help: verifyHelp, summary: 'check a deployed stack: smoke, replay, live parity' },
  stream: { run: streamCommand, help: streamHelp, summary: 'every batch file of a folder into PostGIS, one claim per batch (streams)' },
};

export const mainHelp = `tessera: geospatial tiling with exactly-once effect

Usage: tessera <command> [options]      (npm run tessera -- <command> ...)

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`)
  .join('\n')}

Run \`tessera <command> --help\` for a command's options.`;

export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout(`${mainHelp}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    io.stderr(`tessera: unknown command ${JSON.stringify(name)}\n\n${mainHelp}\n`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.stdout(`${command.help}\n`);
    return 0;
  }
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (error instanceof TesseraError) {
      io.stderr(`tessera ${name}: ${error.name} [${error.code}]: ${error.message}\n`);
      return 1;
    }
    if (error instanceof TypeError && (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.stderr(`tessera ${name}: ${error.message}\n\n${command.help}\n`);
      return 2;
    }
    throw error;
  }
}

export { parseArgs };

const invokedDirectly = process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (invokedDirectly) {
  const code = await main(process.argv.slice(2), {
    stdout: (s) => process.stdout.write(s),
    stderr: (s) => process.stderr.write(s),
    cwd: process.cwd(),
  });
  process.exitCode = code;
}
