import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { writeAisBatches } from '../../functions/local/ais-batches.js';
import { createLocalBackend } from '../../functions/local/compose.js';
import { runStreamFolder, type StreamRunSummary } from '../../functions/local/stream-runtime.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { DEFAULT_BATCH_PARAMS, featureBatchParams } from '../../shared/domain/feature-batch.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { CliIo } from '../io.js';
import { terminalProgress } from '../terminal-progress.js';
import { DEFAULT_DIR, intOption } from './options.js';

export const streamHelp = `tessera stream: every batch file in a folder into PostGIS, exactly once

Each file is one batch object, as a stream lands them (Amazon Data Firehose, a Pub/Sub
Cloud Storage subscription, Event Hubs Capture): NDJSON (gzip too), an Avro container,
or Parquet (Firehose's record format conversion).
Each is put in the local source store under streams/<its path>, claimed once (one claim
per batch, keyed like a scene: bucket, key, content hash, parameters), and all its records
go into PostGIS in one transaction that also marks the batch done. A record two files
carry counts once; bad records are kept in feature_rejects with their file and line; a
file that is not a batch at all is poison (reported, exit 1). Run it again: every batch
is "done" at its claim and nothing is read. docs/feature-batches.md.

A record: {"vessel": 219000037, "time": "2025-06-01T12:00:00Z", "lon": 4.5, "lat": 55.1,
"speed": 11.2} (vessel or mmsi; time ISO-8601 with a zone or epoch ms; optional "id").

Options:
  --dir PATH        the folder of batch files (every file under it; dot-files skipped)
  --sink URL        the PostGIS database (postgis://user:password@host:5432/db; tables
                    feature_batches, feature_records, feature_rejects and the view
                    feature_counts_h3_minute are created if absent); default $${ENV.featureSink}
  --generate BxR    first write B AIS-like batch files of R records into --dir/ais/ (seeded:
                    1% of records repeated from the batch before, 0.5% bad lines), e.g. 20x1000
  --seed N          the generator's seed (default 42)
  --pipeline NAME   the stream's name (default ${DEFAULT_BATCH_PARAMS.pipeline}): record ids are namespaced by it
  --h3-resolution N the H3 resolution of each record's cell, 0-15 (default ${DEFAULT_BATCH_PARAMS.h3_resolution})
  --concurrency N   batches in flight at once (default 2)
  --backend-dir PATH  the local backend: claims, queue and source store (default ${DEFAULT_DIR})
  --json            print the summary as one JSON object
  --verbose         print the structured logs (JSON lines) on stderr

Exit status: 0 when every batch is in (or was already), 1 when a batch was poison
(its claim is given back; fix the file and run again: a new version is a new batch),
2 for bad options.`;

export async function streamCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      dir: { type: 'string' },
      sink: { type: 'string' },
      generate: { type: 'string' },
      seed: { type: 'string' },
      pipeline: { type: 'string' },
      'h3-resolution': { type: 'string' },
      concurrency: { type: 'string' },
      'backend-dir': { type: 'string', default: DEFAULT_DIR },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
    },
  });
  if (values.dir === undefined) throw new InvalidParamsError('--dir is required: the folder of batch files, e.g. --dir landing/');
  const sinkUrl = values.sink ?? process.env[ENV.featureSink];
  if (sinkUrl === undefined || sinkUrl === '') {
    throw new InvalidParamsError(
      `--sink is required (or ${ENV.featureSink}): the PostGIS URL, e.g. --sink postgis://tessera@localhost:5432/gis`,
    );
  }
  const params = featureBatchParams({
    pipeline: values.pipeline ?? DEFAULT_BATCH_PARAMS.pipeline,
    version: DEFAULT_BATCH_PARAMS.version,
    h3_resolution: intOption('h3-resolution', values['h3-resolution'], DEFAULT_BATCH_PARAMS.h3_resolution, 0, 15),
  });
  const concurrency = intOption('concurrency', values.concurrency, 2, 1, 32);
  const folder = resolve(io.cwd, values.dir);
  if (values.generate !== undefined) {
    const m = /^(\d+)x(\d+)$/.exec(values.generate);
    if (!m) throw new InvalidParamsError(`--generate must be BATCHESxRECORDS, e.g. 20x1000, got ${JSON.stringify(values.generate)}`);
    const batches = intOption('generate', m[1], 0, 1, 100_000);
    const recordsPerBatch = intOption('generate', m[2], 0, 1, 1_000_000);
    const truth = writeAisBatches(folder, { batches, recordsPerBatch, seed: intOption('seed', values.seed, 42, 0, 2 ** 31 - 1) });
    if (!values.json) {
      io.stdout(
        `generated ${truth.files.length} batch files in ${folder}: ${truth.distinctRecords} distinct positions, ` +
          `${truth.duplicateLines} repeated from the batch before, ${truth.badLines} bad lines\n`,
      );
    }
  }
  // The logs go to stderr only with --verbose: the summary is the output.
  const backend = createLocalBackend(
    resolve(io.cwd, values['backend-dir']),
    values.verbose ? { telemetry: new JsonTelemetry((line) => io.stderr(`${line}\n`)) } : {},
  );
  try {
    const summary = await runStreamFolder(backend, sinkUrl, {
      folder,
      params,
      concurrency,
      leaseMs: 120_000,
      retentionMs: 7 * 86_400_000,
      progress: values.json ? { phase() {}, update() {}, done() {} } : terminalProgress(),
    });
    io.stdout(values.json ? `${JSON.stringify(summary)}\n` : render(summary, params.pipeline));
    return summary.batches.deadLettered > 0 ? 1 : 0;
  } finally {
    backend.close();
  }
}

function render(s: StreamRunSummary, pipeline: string): string {
  const n = (x: number) => x.toLocaleString('en-US');
  // Records processed: new ones and those another batch had already put in (both were parsed, keyed and sent).
  const positions = s.records.inserted + s.records.duplicates;
  const rate = s.seconds > 0 ? Math.round(positions / s.seconds) : 0;
  const rows: [string, string][] = [
    ['batch files', `${n(s.files)}${s.alreadyStaged > 0 ? ` (${n(s.alreadyStaged)} already in the store)` : ''}`],
    ['batches inserted', n(s.batches.inserted)],
    ['batches already done (claim)', n(s.batches.claimRejected)],
    ['batches found done in PostGIS', n(s.batches.alreadyDone)],
    ['batches poison (dead-lettered)', n(s.batches.deadLettered)],
    ['records inserted', n(s.records.inserted)],
    ['records already in (duplicates)', n(s.records.duplicates)],
    ['records rejected (kept)', n(s.records.rejected)],
    [
      'claims / commits',
      `${n(s.claimStore.claims)} / ${n(s.claimStore.commits)}${positions > 0 ? ` (${(s.claimStore.claims / positions).toFixed(4)} claims per record)` : ''}`,
    ],
    [`PostGIS, pipeline ${pipeline}`, `${n(s.totals.batches)} batches, ${n(s.totals.records)} records, ${n(s.totals.rejects)} rejects`],
    ['elapsed', `${s.seconds.toFixed(1)} s${rate > 0 ? ` (${n(rate)} records/s)` : ''}`],
  ];
  if (s.batches.sourceChanged > 0) rows.push(['batches whose file changed mid-run', n(s.batches.sourceChanged)]);
  if (s.batches.leaseStolen > 0) rows.push(['leases stolen (ERROR)', n(s.batches.leaseStolen)]);
  if (s.batches.leftOnQueue > 0) rows.push(['retried / left for the next run', n(s.batches.leftOnQueue)]);
  const width = Math.max(...rows.map(([k]) => k.length)) + 2;
  const poison = s.poison.map((p) => `  poison ${p.key}: ${p.error}\n`).join('');
  return `${rows.map(([k, v]) => `${k.padEnd(width)}${v}`).join('\n')}\n${poison}`;
}
