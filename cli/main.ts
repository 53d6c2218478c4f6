#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { TesseraError } from '../shared/domain/errors.js';
import type { CliIo } from './io.js';

type Command = (argv: string[], io: CliIo) => Promise<number>;

/** A command's code and its full help, loaded only when that command runs (or prints its help). */
interface CommandModule {
  readonly run: Command;
  readonly help: string;
}

/**
 * The commands, each loaded on demand: `tessera --help` reads only this table, and `tessera run` loads the
 * local runtime but no cloud SDK, no Pulumi program and no price table (docs/packages.md, "Start-up").
 */
const COMMANDS: Record<string, { readonly summary: string; readonly load: () => Promise<CommandModule> }> = {
  run: {
    summary: 'run the main job on the local backend (scene -> tiles -> mosaic)',
    load: async () => {
      const m = await import('./commands/run.js');
      return { run: m.runCommand, help: m.runHelp };
    },
  },
  replay: {
    summary: "re-deliver a job and prove its output's version is unchanged",
    load: async () => {
      const m = await import('./commands/replay.js');
      return { run: m.replayCommand, help: m.replayHelp };
    },
  },
  backfill: {
    summary: 're-run a scene under a policy: skip | new-key | overwrite',
    load: async () => {
      const m = await import('./commands/backfill.js');
      return { run: m.backfillCommand, help: m.backfillHelp };
    },
  },
  ingest: {
    summary: 'stage, validate and publish an artefact once (manifest: source, id, sha256)',
    load: async () => {
      const m = await import('./commands/ingest.js');
      return { run: m.ingestCommand, help: m.ingestHelp };
    },
  },
  reconcile: {
    summary: 'compare published tiles and committed claims both ways',
    load: async () => {
      const m = await import('./commands/reconcile.js');
      return { run: m.reconcileCommand, help: m.reconcileHelp };
    },
  },
  choose: {
    summary: 'rank provider + region pairs for a job and write a stack file',
    load: async () => {
      const m = await import('./commands/choose.js');
      return { run: m.chooseCommand, help: m.chooseHelp };
    },
  },
  preflight: {
    summary: 'check a stack before pulumi up and print its plan',
    load: async () => {
      const m = await import('./commands/preflight.js');
      return { run: m.preflightCommand, help: m.preflightHelp };
    },
  },
  verify: {
    summary: 'check a deployed stack: smoke, replay, live parity',
    load: async () => {
      const m = await import('./commands/verify.js');
      return { run: m.verifyCommand, help: m.verifyHelp };
    },
  },
  stream: {
    summary: 'every batch file of a folder into PostGIS, one claim per batch (streams)',
    load: async () => {
      const m = await import('./commands/stream.js');
      return { run: m.streamCommand, help: m.streamHelp };
    },
  },
  view: {
    summary: "a web map of a scene's outputs on 127.0.0.1 (COG, PMTiles, TileJSON; footprint, legend, values)",
    load: async () => {
      const m = await import('./commands/view.js');
      return { run: m.viewCommand, help: m.viewHelp };
    },
  },
};

export const mainHelp = `tessera: geospatial tiling with exactly-once effect

Usage: tessera <command> [options]      (in a checkout of the repository: npm run tessera -- <command> ...)

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
  const entry = COMMANDS[name];
  if (!entry) {
    io.stderr(`tessera: unknown command ${JSON.stringify(name)}\n\n${mainHelp}\n`);
    return 2;
  }
  let command: CommandModule;
  try {
    command = await entry.load();
  } catch (error) {
    return missingPackage(name, error, io);
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
    return missingPackage(name, error, io);
  }
}

/**
 * A package the command imports is not installed: in the `tessera` package, the optional peers (`@pulumi/*`), which
 * a project that deploys with Pulumi has and others need not (docs/packages.md). Anything else is rethrown.
 */
function missingPackage(command: string, error: unknown, io: CliIo): number {
  const code = (error as { code?: string } | undefined)?.code;
  const pkg =
    error instanceof Error && code === 'ERR_MODULE_NOT_FOUND' ? /Cannot find package '([^']+)'/.exec(error.message)?.[1] : undefined;
  if (pkg === undefined) throw error;
  io.stderr(`tessera ${command}: needs the package ${pkg}, which is not installed here; install it (npm install ${pkg}) and run again\n`);
  return 1;
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
