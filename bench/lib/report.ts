import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname } from 'node:path';
import { REPO_ROOT } from './child.js';

/** A row's verdict: a target met, a target missed, or a figure reported for context (no target). */
export type Status = 'PASS' | 'MISS' | 'INFO';

/** One line of the results table. */
export interface Row {
  readonly section: string;
  readonly metric: string;
  /** local, aws, gcp, azure; empty where the row is not about a backend. */
  readonly backend: string;
  readonly target: string;
  readonly measured: string;
  /** The measurement as a ratio against its baseline or target (e.g. `1.8x`), or `-`. */
  readonly ratio: string;
  readonly status: Status;
  /** Why a target was missed (required for MISS), or what an INFO row means. */
  readonly note?: string | undefined;
}

/** What a section hands back: its rows, its raw measurements, and anything that broke the benchmark itself. */
export interface SectionResult {
  readonly name: string;
  readonly rows: Row[];
  readonly details: Record<string, unknown>;
  /** Failures of the benchmark itself (e.g. outputs that do not match); they fail the run, targets never do. */
  readonly broken: string[];
  readonly durationSec: number;
}

/** The machine a run was measured on: the numbers mean little without it. */
export interface MachineInfo {
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGb: number;
  readonly node: string;
  readonly platform: string;
  readonly loadAverageAtStart: readonly number[];
  readonly gdal: string | undefined;
  readonly pinnedToOneCore: boolean;
  readonly commit: string | undefined;
}

export function machineInfo(gdal: string | undefined, pinnedToOneCore: boolean): MachineInfo {
  let commit: string | undefined;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    commit = undefined;
  }
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model.trim() ?? 'unknown',
    cores: cpu.length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    loadAverageAtStart: loadavg().map((l) => Math.round(l * 100) / 100),
    gdal,
    pinnedToOneCore,
    commit,
  };
}

export interface BenchReport {
  readonly generatedAt: string;
  readonly mode: 'full' | 'smoke';
  /** The sections run, when `--only` left some out (the title says so: a partial report is not the full benchmark). */
  readonly only?: readonly string[] | undefined;
  readonly command: string;
  readonly durationSec: number;
  readonly machine: MachineInfo;
  readonly loadAverageAtEnd: readonly number[];
  readonly rows: readonly Row[];
  readonly sections: Record<string, { durationSec: number; broken: string[]; details: Record<string, unknown> }>;
}

const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));

/** The results table as fixed-width text for the terminal. */
export function renderTable(rows: readonly Row[]): string {
  const head = ['section', 'metric', 'backend', 'target', 'measured', 'ratio', 'result'];
  const cells = rows.map((r) => [r.section, r.metric, r.backend, r.target, r.measured, r.ratio, r.status]);
  const widths = head.map((h, i) => Math.min(i === 4 ? 70 : 48, Math.max(h.length, ...cells.map((c) => (c[i] as string).length))));
  const line = (c: readonly string[]) => c.map((v, i) => pad(v, widths[i] as number)).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

const mdCell = (s: string) => s.replace(/\|/g, '\\|');

/** The results table and the notes on every missed target, as Markdown. */
export function renderMarkdown(report: BenchReport): string {
  const m = report.machine;
  const out: string[] = [
    `# Benchmark results (${report.mode}${report.only ? `, only ${report.only.join(', ')}` : ''})`,
    '',
    `Measured ${report.generatedAt} with \`${report.command}\` in ${Math.round(report.durationSec)} s, commit ${m.commit ?? 'unknown'}.`,
    '',
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGb} GB, ${m.platform}, Node ${m.node}, ${m.gdal ?? 'GDAL not used'}. ` +
      `Load average ${m.loadAverageAtStart.join(' / ')} at the start and ${report.loadAverageAtEnd.join(' / ')} at the end ` +
      `(the machine is shared: compare the ratios, which were measured side by side, more than the absolute figures). ` +
      `${m.pinnedToOneCore ? 'Throughput and gate timings ran on one core (taskset -c 0) for every contender.' : 'taskset was not available: timings ran unpinned.'}`,
    '',
    'How to read this: docs/benchmarks.md. Medians over repetitions, with (min-max, n) in brackets.',
    '',
    '| section | metric | backend | target | measured | ratio | result |',
    '|---|---|---|---|---|---|---|',
    ...report.rows.map(
      (r) =>
        `| ${[r.section, r.metric, r.backend, r.target, r.measured, r.ratio, r.status === 'PASS' ? 'PASS' : r.status === 'MISS' ? '**MISS**' : 'info'].map(mdCell).join(' | ')} |`,
    ),
    '',
  ];
  const misses = report.rows.filter((r) => r.status === 'MISS');
  out.push('## Missed targets', '');
  if (misses.length === 0) out.push('None: every target was met in this run.', '');
  for (const r of misses)
    out.push(`- **${r.section} / ${r.metric}${r.backend ? ` (${r.backend})` : ''}**: ${r.measured} against ${r.target}. ${r.note ?? ''}`);
  if (misses.length > 0) out.push('');
  const notes = report.rows.filter((r) => r.status !== 'MISS' && r.note);
  if (notes.length > 0) {
    out.push('## Notes', '');
    for (const r of notes) out.push(`- ${r.section} / ${r.metric}${r.backend ? ` (${r.backend})` : ''}: ${r.note}`);
    out.push('');
  }
  const broken = Object.entries(report.sections).flatMap(([name, s]) => s.broken.map((b) => `${name}: ${b}`));
  if (broken.length > 0) {
    out.push('## The benchmark itself failed', '', ...broken.map((b) => `- ${b}`), '');
  }
  return out.join('\n');
}

export function writeReport(report: BenchReport, jsonPath: string, mdPath: string): void {
  mkdirSync(dirname(jsonPath), { recursive: true });
  mkdirSync(dirname(mdPath), { recursive: true });
  writeFileSync(jsonPath, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(mdPath, renderMarkdown(report));
}

/** `1.23x` */
export const times = (ratio: number): string =>
  `${ratio >= 100 ? Math.round(ratio).toLocaleString('en-US') : Number(ratio.toPrecision(3))}x`;
