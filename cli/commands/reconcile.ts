import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { reconcileManifest } from '../../shared/app/ingest-reconcile.js';
import { reconcile } from '../../shared/app/reconcile.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { CliIo } from '../io.js';
import { openManifest } from '../manifest-option.js';
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
  --manifest        instead: the published scenes (sources, scenes/) vs the ingest manifest, both
                    ways: objects without a row (a promotion that crashed before its commit: run
                    the same \`tessera ingest\` again) and rows without an object (deleted data)
  --manifest-url URL
                    with --manifest: the PostgreSQL manifest \`tessera ingest --manifest URL\` registered in
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
      manifest: { type: 'boolean', default: false },
      'manifest-url': { type: 'string' },
      dir: { type: 'string', default: DEFAULT_DIR },
      json: { type: 'boolean', default: false },
    },
  });
  const dir = resolve(io.cwd, values.dir);
  if (values['manifest-url'] !== undefined && !values.manifest) throw new InvalidParamsError('--manifest-url goes with --manifest');
  if (values.manifest) return reconcileManifestCommand(dir, values['manifest-url'], values.json, io);
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

/** `--manifest`: the local backend's published prefix vs its SQLite manifest. */
async function reconcileManifestCommand(dir: string, url: string | undefined, json: boolean, io: CliIo): Promise<number> {
  const { backend } = openBackend(dir, false, io.stderr);
  let opened: Awaited<ReturnType<typeof openManifest>> | undefined;
  try {
    opened = await openManifest(url, backend);
    const manifest = opened.manifest;
    const report = await reconcileManifest({ store: backend.sources, manifest, telemetry: backend.telemetry });
    if (json) io.stdout(`${JSON.stringify(report)}\n`);
    else {
      const list = (xs: readonly string[]) => xs.map((x) => `    ${x}\n`).join('');
      io.stdout(
        `reconciled ${report.prefix} with the manifest in ${opened.display}: ${report.objectsChecked} objects, ${report.rowsChecked} rows\n` +
          `  objects without a manifest row (crashed promotion: ingest again to register): ${report.objectsWithoutRow.length}\n${list(report.objectsWithoutRow)}` +
          `  scenes not of the ingest layout (uploaded directly; not an alarm): ${report.notIngested.length}\n` +
          `  manifest rows without an object (published data was deleted): ${report.rowsWithoutObject.length}\n${list(report.rowsWithoutObject.map((r) => `${r.key} (${r.source}/${r.externalId})`))}` +
          `  rows whose object has another size (replaced behind ingestion's back): ${report.sizeMismatches.length}\n${list(report.sizeMismatches.map((m) => `${m.key} (${m.rowBytes} -> ${m.objectBytes} bytes)`))}`,
      );
    }
    return report.objectsWithoutRow.length + report.rowsWithoutObject.length + report.sizeMismatches.length === 0 ? 0 : 1;
  } finally {
    await opened?.close();
    backend.close();
  }
}
