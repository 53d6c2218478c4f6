import type { BackendName } from '../parity/backends.js';
import { anomalyCount, SOAK_PATHS, type SoakBackendReport } from './soak-driver.js';
import { BATCH_ANOMALY_KINDS } from './soak-feature-batches.js';

/** reports/soak.json, in the issue's shape. */
export interface SoakReport {
  readonly seed: number;
  readonly backends: Partial<Record<BackendName, SoakBackendReport>>;
}

/** `npm run soak`'s default sizes: at least 10,000 deliveries locally and 2,000 per cloud emulator. */
export const soakDefaults = {
  deliveries: { local: 10_000, aws: 2_000, gcp: 2_000, azure: 2_000 } as Record<BackendName, number>,
};

/** The one command that reruns a soak with the same seed, sizes, backends and faults. */
export function reproduceCommand(
  seed: number,
  deliveries: Readonly<Record<BackendName, number>>,
  backends: readonly BackendName[],
  faults: string,
  /** The kinds of event, when narrowed (`--events`); all by default. */
  events?: string | undefined,
): string {
  const sizes = backends.map((b) => `${b}=${deliveries[b]}`).join(',');
  return `npm run soak -- --seed ${seed} --deliveries ${sizes} --backends ${backends.join(',')} --faults ${faults}${events === undefined ? '' : ` --events ${events}`}`;
}

const COLUMNS: readonly (keyof SoakBackendReport)[] = [
  'deliveries',
  'duplicatesDelivered',
  'tilesExpected',
  'tilesCorrect',
  'duplicateWrites',
  'missingTiles',
  'divergentTiles',
  'wedgedJobs',
  'falseAlarms',
  'deadLettered',
  'deadLetteredExplained',
  'gdalCompared',
  'gdalMismatches',
  'iamFindings',
  'seconds',
];

/** reports/soak.md: the same table as the JSON, the faults per backend, and every anomaly, one per line. */
export function renderSoakMarkdown(
  report: SoakReport,
  anomalies: Partial<Record<BackendName, readonly string[]>>,
  run: {
    readonly command: string;
    readonly wallSeconds: number;
    readonly at: Date;
    /** The IAM check's line per cloud backend (requests checked, denials), docs/iam.md. */
    readonly iam?: readonly string[] | undefined;
    /** The GDAL comparison of each sampled reference tile, one line each. */
    readonly gdal?: readonly string[] | undefined;
  },
): string {
  const names = Object.keys(report.backends) as BackendName[];
  const lines = [
    '# Randomized fault soak',
    '',
    `Seed ${report.seed}, ${run.at.toISOString()}, ${run.wallSeconds} s wall (backends at once). Reproduce: \`${run.command}\``,
    '',
    `| backend | ${COLUMNS.join(' | ')} | anomalies |`,
    `| --- | ${COLUMNS.map(() => '---:').join(' | ')} | ---: |`,
  ];
  for (const b of names) {
    const r = report.backends[b] as SoakBackendReport;
    lines.push(`| ${b} | ${COLUMNS.map((c) => String(r[c])).join(' | ')} | ${anomalyCount(r)} |`);
  }
  lines.push(
    '',
    '## Paths',
    '',
    "Each path's own oracle (docs/soak.md), per backend: runs / checked / anomalies. The tile oracle's counts above cover the tiles of every path.",
    '',
    `| path | ${names.join(' | ')} |`,
    `| --- | ${names.map(() => '---:').join(' | ')} |`,
  );
  for (const p of SOAK_PATHS)
    lines.push(
      `| ${p} | ${names
        .map((b) => {
          const x = (report.backends[b] as SoakBackendReport).paths[p];
          return `${x.runs} / ${x.checked} / ${x.anomalies}`;
        })
        .join(' | ')} |`,
    );
  const fb = (b: BackendName) => (report.backends[b] as SoakBackendReport).featureBatches;
  lines.push(
    '',
    '## Feature batches',
    '',
    'Each backend\'s generated batch objects, delivered as batch events on its queue to the stream function, and the record-level oracle (docs/soak.md, "Feature batches"): each anomaly kind is a count that must be 0.',
    '',
    `| | ${names.join(' | ')} |`,
    `| --- | ${names.map(() => '---:').join(' | ')} |`,
  );
  const fbRows: [string, (b: BackendName) => string][] = [
    ['batch events', (b) => String(fb(b).events)],
    ['objects (+ poison)', (b) => `${fb(b).objects} (+ ${fb(b).poisonObjects})`],
    [
      'formats',
      (b) =>
        Object.entries(fb(b).formats)
          .map(([f, n]) => `${f} ${n}`)
          .join(', '),
    ],
    ['deliveries (redeliveries)', (b) => `${fb(b).deliveries} (${fb(b).redeliveries})`],
    ['valid lines / distinct records', (b) => `${fb(b).validLines} / ${fb(b).distinctRecords}`],
    ['bad lines / blank lines', (b) => `${fb(b).badLines} / ${fb(b).blankLines}`],
    ['rows: records / rejects / batches', (b) => `${fb(b).recordRows} / ${fb(b).rejectRows} / ${fb(b).batchRows}`],
    ['dead-lettered', (b) => String(fb(b).deadLettered)],
    ...BATCH_ANOMALY_KINDS.map((k): [string, (b: BackendName) => string] => [`anomaly: ${k}`, (b) => String(fb(b).anomalies[k])]),
  ];
  for (const [row, cell] of fbRows) lines.push(`| ${row} | ${names.map(cell).join(' | ')} |`);
  const kinds = [...new Set(names.flatMap((b) => Object.keys((report.backends[b] as SoakBackendReport).faultsByKind)))].sort();
  lines.push(
    '',
    '## Faults injected (that fired)',
    '',
    `| fault | ${names.join(' | ')} |`,
    `| --- | ${names.map(() => '---:').join(' | ')} |`,
  );
  for (const k of kinds)
    lines.push(`| ${k} | ${names.map((b) => String((report.backends[b] as SoakBackendReport).faultsByKind[k] ?? 0)).join(' | ')} |`);
  lines.push(
    '',
    `Every fault kind is scheduled in every run; one that never fired is an anomaly: ${
      names.flatMap((b) => (report.backends[b] as SoakBackendReport).unfiredFaultKinds.map((k) => `${b} ${k}`)).join(', ') || 'none'
    }.`,
  );
  if (run.gdal !== undefined && run.gdal.length > 0) {
    lines.push(
      '',
      '## Reference tiles against GDAL',
      '',
      "A sample of the reference render's tiles, each compared with GDAL's own render of its window (test/soak/gdal-check.ts, the thresholds of the GDAL comparison tests):",
      '',
      ...run.gdal.map((l) => `- ${l}`),
    );
  }
  if (run.iam !== undefined && run.iam.length > 0) {
    lines.push(
      '',
      '## IAM',
      '',
      "Every request of each cloud backend's functions, checked against that role's grants as the Pulumi program deploys them (docs/iam.md); a denied access is an anomaly (`iamFindings`).",
      '',
      ...run.iam.map((l) => `- ${l}`),
    );
  }
  lines.push('', '## Anomalies', '');
  let any = false;
  for (const b of names) {
    for (const a of anomalies[b] ?? []) {
      lines.push(`- ${b}: ${a}`);
      any = true;
    }
  }
  if (!any) lines.push('None: every anomaly count is 0 on every backend.');
  return `${lines.join('\n')}\n`;
}
