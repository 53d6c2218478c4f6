import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultWorkers, runWorkerProcesses } from '../../functions/local/worker-process.js';
import { assembleMosaic } from '../../shared/app/assemble-mosaic.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { type TileMode, tileOutputKey } from '../../shared/app/tile-job.js';
import { isBackfillPolicy } from '../../shared/domain/backfill-policy.js';
import { resolveLease } from '../../shared/domain/ceilings.js';
import { codeVersion } from '../../shared/domain/code-version.js';
import { InvalidParamsError, MissingTilesError } from '../../shared/domain/errors.js';
import { sceneKey } from '../../shared/domain/job-key.js';
import { tileFormatOf } from '../../shared/domain/render-params.js';
import type { CliIo } from '../io.js';
import { terminalProgress } from '../terminal-progress.js';
import { loadLastRun, openBackend, parseWindowId, saveLastRun } from './last-run.js';
import { DEFAULT_DIR, intOption } from './options.js';

export const backfillHelp = `tessera backfill: re-run the last run's scene under an explicit policy

Policies (there is no unconditional overwrite):
  skip       same job keys: committed tiles are rejected at the claim, gaps are filled
  new-key    a pipeline version bump (--version): every key changes, new tiles and a
             new mosaic land beside the old ones, which stay untouched
  overwrite  repair writes of --windows, each conditional on the tile's current
             version (or --expected); refused if anything touched the tile meanwhile

Options:
  --policy P          skip | new-key | overwrite (required)
  --version V         new-key: the new pipeline version (must differ)
  --windows R_C,...   overwrite: the windows to repair (required)
  --expected TOKEN    overwrite of one window: the version you recorded (default: its current one)
  --workers N         worker processes (default: the cores this process may use, os.availableParallelism())
  --dir PATH          backend directory (default .tessera)
  --json              print the result as JSON
  --verbose           print the structured logs on stderr`;

export async function backfillCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      policy: { type: 'string' },
      version: { type: 'string' },
      windows: { type: 'string' },
      expected: { type: 'string' },
      workers: { type: 'string' },
      dir: { type: 'string', default: DEFAULT_DIR },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
    },
  });
  const policy = values.policy;
  if (!isBackfillPolicy(policy)) throw new InvalidParamsError(`--policy must be skip, new-key or overwrite, got ${JSON.stringify(policy)}`);
  const dir = resolve(io.cwd, values.dir);
  const run = loadLastRun(dir);
  const { backend, telemetry } = openBackend(dir, values.verbose, io.stderr);
  const progress = terminalProgress(process.stderr);
  try {
    const manifest = await readSceneManifest(backend.outputs, run.sceneKey);
    let params = manifest.params;
    if (policy !== 'new-key' && sceneKey(manifest.source, manifest.params) !== run.sceneKey) {
      // The scene key binds the build of the render path that made it: this build's tiles
      // under that key would mix two code versions in one scene (shared/domain/code-version.ts).
      throw new InvalidParamsError(
        `scene ${run.sceneKey.slice(0, 16)}... was made by another build of the render path than this one (${codeVersion()}); ` +
          "--policy skip or overwrite would put this build's tiles under its key. Use --policy new-key, or `tessera run` the scene again",
      );
    }
    let only: ((row: number, col: number) => boolean) | undefined;
    let modeFor: ((row: number, col: number) => TileMode | undefined) | undefined;
    switch (policy) {
      case 'skip':
        break;
      case 'new-key': {
        if (!values.version) throw new InvalidParamsError('--policy new-key needs --version V, the new pipeline version');
        if (values.version === params.version)
          throw new InvalidParamsError(`--version ${values.version} is the current version; a new key needs a new version`);
        params = { ...params, version: values.version };
        break;
      }
      case 'overwrite': {
        if (!values.windows) throw new InvalidParamsError('--policy overwrite needs --windows ROW_COL[,ROW_COL...]');
        const ids = values.windows.split(',').map((w) => parseWindowId(w.trim()));
        if (values.expected !== undefined && ids.length !== 1) throw new InvalidParamsError('--expected applies to exactly one window');
        const expected = new Map<string, string>();
        for (const { row, col } of ids) {
          const key = tileOutputKey(run.sceneKey, manifest.grid, { row, col }, tileFormatOf(manifest.params));
          const head = await backend.outputs.head(key);
          const version = values.expected ?? head?.version;
          if (version === undefined)
            throw new InvalidParamsError(`${key} does not exist: there is nothing to repair; use --policy skip to fill gaps`);
          expected.set(`${row}_${col}`, version);
        }
        only = (row, col) => expected.has(`${row}_${col}`);
        modeFor = (row, col) => {
          const v = expected.get(`${row}_${col}`);
          return v === undefined ? undefined : { kind: 'overwrite', expectedVersion: v };
        };
        break;
      }
      default: {
        const never: never = policy;
        throw new InvalidParamsError(`unknown policy ${String(never)}`);
      }
    }
    progress.phase('fan-out');
    // From the manifest, not the live object: a backfill after an overwrite reads the version its
    // key names (the manifest's pin), or its jobs settle `source-changed`; never the new bytes.
    const fan = await fanOutScene(backend, { source: manifest.source, params, only, modeFor, recorded: manifest });
    const lease = resolveLease({ platform: 'local', functionTimeoutSec: 600 });
    let settled = 0;
    progress.phase('tiles');
    await runWorkerProcesses({
      dir: backend.dir,
      workers: intOption('workers', values.workers, defaultWorkers(), 1, 64),
      maxReceiveCount: backend.queue.maxReceiveCount,
      settings: (i) => ({ owner: `backfill-${i}`, leaseMs: lease.leaseSec * 1000, retentionMs: 7 * 24 * 3_600_000 }),
      telemetry,
      log: values.verbose ? (line) => io.stderr(`${line}\n`) : undefined,
      onSettled: () => progress.update(++settled, fan.enqueued, 'deliveries'),
    });
    progress.done();
    // Tile counters, before the mosaic's own create-only write adds to them.
    const c = telemetry.counters();
    let mosaic: string | undefined;
    let missing = 0;
    try {
      mosaic = (await assembleMosaic(backend, fan.sceneKey)).mosaicKey;
    } catch (error) {
      if (!(error instanceof MissingTilesError)) throw error;
      missing = error.missing.length;
    }
    if (policy === 'new-key') saveLastRun(dir, { sceneKey: fan.sceneKey, source: manifest.source, params });
    const dead = await backend.queue.deadLetters();
    const result = {
      policy,
      sceneKey: fan.sceneKey,
      previousSceneKey: policy === 'new-key' ? run.sceneKey : undefined,
      enqueued: fan.enqueued,
      written: c.written,
      stoppedAtClaim: c['claim-rejected'],
      stoppedAtWrite: c['write-already-present'],
      versionMismatches: c['version-mismatch'],
      deadLettered: dead.length,
      mosaic: mosaic ? backend.outputs.pathOf(mosaic) : undefined,
      missingTiles: missing,
    };
    if (values.json) io.stdout(`${JSON.stringify(result)}\n`);
    else {
      io.stdout(
        `backfill --policy ${policy} of scene ${fan.sceneKey}${result.previousSceneKey ? ` (was ${result.previousSceneKey}, left untouched)` : ''}\n` +
          `  jobs enqueued: ${result.enqueued}\n  tiles written: ${result.written}\n` +
          `  stopped at the claim: ${result.stoppedAtClaim}\n  stopped at the write: ${result.stoppedAtWrite}\n` +
          `  repairs refused (version changed): ${result.versionMismatches}\n` +
          `  mosaic: ${result.mosaic ?? `not assembled, ${missing} tiles missing`}\n`,
      );
    }
    return result.versionMismatches === 0 && missing === 0 ? 0 : 1;
  } finally {
    backend.close();
  }
}
