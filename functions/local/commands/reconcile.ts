import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { reconcile } from '../../../shared/app/reconcile.js';
import type { CliIo } from '../cli.js';
import { loadLastRun, openBackend } from './last-run.js';
import { DEFAULT_DIR } from './options.js';

export const reconcileHelp = `tessera reconcile: published tiles vs committed claims, both ways

Reports tiles no committed claim points at (a crash between write and commit,
or a foreign writer), apart from tiles older than the claims' retention whose
claim rows retention deleted, committed claims whose tile is gone (something deleted
published data), and claims whose lease lapsed (a worker died).

Options:
  --scene-key KEY   limit to one scene (default: the last run's scene)
  --all             every scene in the backend
  --dir PATH        backend directory (default .tessera)
  --json            print the report as JSON

Exit status: 0 when both directions agree, 1 when orphans were found.`;

export async function reconcileCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      'scene-key': { type: 'string' },
      all: { type: 'boolean', default: false },
      dir: { type: 'string', default: DEFAULT_DIR },
      json: { type: 'boolean', default: false },
    },
  });
  const dir = resolve(io.cwd, values.dir);
  const scene = values.all ? undefined : (values['scene-key'] ?? loadLastRun(dir).sceneKey);
  const { backend } = openBackend(dir, false, io.stderr);
  try {
    const report = await reconcile(backend, scene);
    if (values.json) io.stdout(`${JSON.stringify(report)}\n`);
    else {
      const list = (xs: readonly string[]) =>
        xs
          .slice(0, 20)
          .map((x) => `    ${x}`)
          .join('\n') + (xs.length > 20 ? `\n    ... ${xs.length - 20} more` : '');
      io.stdout(
        `reconciled ${scene === undefined ? 'all scenes' : `scene ${scene}`}: ${report.objectsChecked} tiles, ${report.claimsChecked} committed claims\n` +
          `  tiles without a committed claim: ${report.objectsWithoutClaim.length}\n${list(report.objectsWithoutClaim)}` +
          `  tiles whose claim expired by retention (older than it; not an alarm): ${report.claimExpiredByRetention.length}\n` +
          `  committed claims without a tile: ${report.claimsWithoutObject.length}\n${list(report.claimsWithoutObject.map((c) => `${c.outputUri} (job ${c.jobId})`))}` +
          `  claims whose lease lapsed: ${report.lapsedClaims.length}\n`,
      );
    }
    return report.objectsWithoutClaim.length + report.claimsWithoutObject.length === 0 ? 0 : 1;
  } finally {
    backend.close();
  }
}
