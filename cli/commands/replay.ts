import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { runWorkerProcesses } from '../../functions/local/worker-process.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { toJobMessage } from '../../shared/app/tile-job.js';
import { sceneJob, sceneWindow, sceneZooms } from '../../shared/app/verify/scene-tiles.js';
import { resolveLease } from '../../shared/domain/ceilings.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { CliIo } from '../io.js';
import { loadLastRun, openBackend, parseWindowId } from './last-run.js';
import { DEFAULT_DIR } from './options.js';

export const replayHelp = `tessera replay: re-deliver a tile job and prove re-execution had no effect

Delivers the tile job of one window of the last run's scene again, runs it
through a worker, and compares the output's version token and modification
time before and after. In a zoom pyramid (run --zoom MIN-MAX) every tile of
every zoom is a job: --zoom picks the zoom, --window a window of its grid (a
tile below the highest zoom is built from its children: docs/pyramids.md).

Options:
  --window ROW_COL   the window to replay (default 0_0)
  --zoom Z           a pyramid's zoom (default its highest); a one-zoom scene takes none
  --dir PATH         backend directory (default .tessera)
  --json             print the result as JSON
  --verbose          print the structured logs on stderr

Exit status: 0 when the output is unchanged, 1 when it changed, is missing, or the
replayed job was dead-lettered (it proved nothing).`;

export async function replayCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      window: { type: 'string', default: '0_0' },
      zoom: { type: 'string' },
      dir: { type: 'string', default: DEFAULT_DIR },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
    },
  });
  const dir = resolve(io.cwd, values.dir);
  const run = loadLastRun(dir);
  const { backend, telemetry } = openBackend(dir, values.verbose, io.stderr);
  try {
    const manifest = await readSceneManifest(backend.outputs, run.sceneKey);
    const { row, col } = parseWindowId(values.window);
    const zoom = zoomOf(sceneZooms(manifest.params), values.zoom);
    const job = sceneJob(manifest, zoom, sceneWindow(manifest, zoom, row, col));
    const before = await backend.outputs.head(job.outputKey);
    const deadBefore = (await backend.queue.deadLetters()).length;
    await backend.queue.sendBatch([toJobMessage(job)]);
    const lease = resolveLease({ platform: 'local', functionTimeoutSec: 600 });
    // One worker process, as every local delivery runs (worker-process.ts); its gates' counters come back here.
    await runWorkerProcesses({
      dir: backend.dir,
      workers: 1,
      maxReceiveCount: backend.queue.maxReceiveCount,
      settings: () => ({ owner: 'replay', leaseMs: lease.leaseSec * 1000, retentionMs: 7 * 24 * 3_600_000 }),
      telemetry,
      log: values.verbose ? (line) => io.stderr(`${line}\n`) : undefined,
    });
    const after = await backend.outputs.head(job.outputKey);
    const c = telemetry.counters();
    // A replay dead-lettered (e.g. a message of another build of the render path) proves nothing: not unchanged.
    const deadLettered = (await backend.queue.deadLetters()).length - deadBefore;
    const unchanged =
      deadLettered === 0 &&
      before !== undefined &&
      after !== undefined &&
      before.version === after.version &&
      before.lastModified === after.lastModified;
    const result = {
      window: values.window,
      ...(zoom === undefined ? {} : { zoom }),
      jobKey: job.jobKey,
      outputKey: job.outputKey,
      before: before ? { version: before.version, lastModified: new Date(before.lastModified).toISOString() } : null,
      after: after ? { version: after.version, lastModified: new Date(after.lastModified).toISOString() } : null,
      stoppedAtClaim: c['claim-rejected'],
      stoppedAtWrite: c['write-already-present'],
      written: c.written,
      deadLettered,
      unchanged,
    };
    if (values.json) io.stdout(`${JSON.stringify(result)}\n`);
    else {
      io.stdout(
        `replayed ${job.outputKey}\n` +
          `  before: ${result.before ? `${result.before.version} @ ${result.before.lastModified}` : '(absent)'}\n` +
          `  after:  ${result.after ? `${result.after.version} @ ${result.after.lastModified}` : '(absent)'}\n` +
          `  stopped at the claim: ${result.stoppedAtClaim}, at the write: ${result.stoppedAtWrite}, written: ${result.written}\n` +
          `  ${unchanged ? 'OK: re-execution had no effect' : deadLettered > 0 ? `NOT PROVEN: the replayed job was dead-lettered (${deadLettered}); run with --verbose for why` : before ? 'CHANGED: the output was rewritten' : 'the output did not exist before the replay'}\n`,
      );
    }
    return unchanged ? 0 : 1;
  } finally {
    backend.close();
  }
}

/** The zoom to replay: `--zoom` within a pyramid's range (default its highest), none for a one-zoom scene. */
function zoomOf(zooms: readonly (number | undefined)[], raw: string | undefined): number | undefined {
  const [highest] = zooms;
  if (highest === undefined) {
    if (raw !== undefined)
      throw new InvalidParamsError(`--zoom ${raw}: the last run's scene has one zoom (no pyramid); replay a window without --zoom`);
    return undefined;
  }
  if (raw === undefined) return highest;
  const lowest = zooms[zooms.length - 1] as number;
  const zoom = Number(raw);
  if (!Number.isInteger(zoom) || zoom < lowest || zoom > highest)
    throw new InvalidParamsError(`--zoom ${raw} is not a zoom of the last run's pyramid, whose zooms are ${lowest} to ${highest}`);
  return zoom;
}
