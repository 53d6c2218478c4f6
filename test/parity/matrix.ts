import type { EmulatorEndpoints } from '../support/emulators/types.js';
import type { AccessCheck } from '../support/iam/access-check.js';
import type { IamRun } from '../support/iam/run.js';
import { BACKEND_NAMES, type BackendName, createParityBackend, EmulatorUnavailableError } from './backends.js';
import { ScenarioContext } from './harness.js';
import { diffPath, diffRecords, type OutcomeRecord } from './outcome.js';
import type { Scenario } from './scenarios.js';

/** Longest one cell may run before it counts as failed (two loaded cores, four backends at once). */
const CELL_TIMEOUT_MS = 150_000;

/** One cell of the matrix: a scenario on a backend. */
export type Cell =
  | { readonly status: 'pass'; readonly record: OutcomeRecord }
  | { readonly status: 'fail'; readonly diff: readonly string[]; readonly record?: OutcomeRecord | undefined }
  /**
   * An emulator limitation: `declared` in the scenario table (with the facts it gets wrong in `diff`),
   * or found at run time (the emulator is not there at all). Never a pass.
   */
  | { readonly status: 'limitation'; readonly reason: string; readonly declared: boolean; readonly diff: readonly string[] };

export interface ScenarioResult {
  readonly scenario: Scenario;
  readonly cells: Readonly<Record<BackendName, Cell>>;
}

/** Where the emulators are, or a reason per cloud why they are not (a start that failed). */
export interface MatrixEnvironment {
  readonly endpoints: EmulatorEndpoints;
  readonly startFailures?: Partial<Record<BackendName, string>>;
  /**
   * The enforced-IAM check (docs/iam.md): every request a cloud cell's functions make is checked against
   * that cloud's grants as the Pulumi program deploys them; an access outside them fails the cell, naming
   * role, action and key. The local backend has no IAM and is not checked.
   */
  readonly iam?: IamRun | undefined;
}

/** Judge one run against the scenario's expectation and its declared limitations. */
export function judge(scenario: Scenario, backend: BackendName, run: { record: OutcomeRecord } | { error: unknown }): Cell {
  if ('error' in run) {
    const e = run.error;
    if (e instanceof EmulatorUnavailableError) return { status: 'limitation', reason: e.message, declared: false, diff: [] };
    return { status: 'fail', diff: [`threw ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`] };
  }
  const diff = diffRecords(scenario.expected, run.record);
  const limitation = scenario.limitations?.[backend];
  if (!limitation) return diff.length === 0 ? { status: 'pass', record: run.record } : { status: 'fail', diff, record: run.record };
  if (diff.length === 0) {
    return {
      status: 'fail',
      diff: [`the declared emulator limitation no longer shows (${limitation.reason}): remove it from the scenario table`],
      record: run.record,
    };
  }
  const covered = (line: string) => limitation.differs.some((p) => diffPath(line) === p || diffPath(line).startsWith(`${p}.`));
  const unexplained = diff.filter((line) => !covered(line));
  if (unexplained.length > 0) return { status: 'fail', diff: unexplained, record: run.record };
  return { status: 'limitation', reason: limitation.reason, declared: true, diff };
}

async function runOnce(
  scenario: Scenario,
  backend: BackendName,
  env: MatrixEnvironment,
): Promise<{ record: OutcomeRecord } | { error: unknown }> {
  const startFailure = env.startFailures?.[backend];
  if (startFailure !== undefined) return { error: new Error(`the ${backend} emulators did not start: ${startFailure}`) };
  let timer: NodeJS.Timeout | undefined;
  try {
    const pb = await createParityBackend(backend, env.endpoints, `s${scenario.id}`, scenario.backendOptions);
    try {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${CELL_TIMEOUT_MS} ms`)), CELL_TIMEOUT_MS);
      });
      return { record: await Promise.race([scenario.run(new ScenarioContext(pb)), timeout]) };
    } finally {
      clearTimeout(timer);
      await pb.close().catch(() => undefined);
    }
  } catch (error) {
    return { error };
  }
}

/**
 * The backends a run covers, from TESSERA_PARITY_BACKENDS (comma-separated,
 * e.g. `azure`; unset or empty: all four). scripts/test.mjs runs the whole
 * matrix on the main Node and the Azure column again on Azure's own Node. A
 * backend left out is not in this run at all: its cells are neither passes
 * nor failures, only absent. An unknown name is an error, never an empty run.
 */
export function parityBackends(value: string | undefined): readonly BackendName[] {
  const names = (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) return BACKEND_NAMES;
  const unknown = names.filter((n) => !(BACKEND_NAMES as readonly string[]).includes(n));
  if (unknown.length > 0) {
    throw new Error(
      `TESSERA_PARITY_BACKENDS: unknown backend(s) ${unknown.join(', ')}; use a comma-separated subset of ${BACKEND_NAMES.join(', ')}`,
    );
  }
  // Matrix order, once each, whatever order the variable gives.
  return BACKEND_NAMES.filter((b) => names.includes(b));
}

/**
 * The scenarios a run covers, from TESSERA_PARITY_SCENARIOS (comma-separated ids, e.g. `51,52`; unset or
 * empty: all). An id that names no scenario is an error, never a silently empty run.
 */
export function parityScenarios(all: readonly Scenario[], value: string | undefined): readonly Scenario[] {
  const ids = (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (ids.length === 0) return all;
  const unknown = ids.filter((id) => !all.some((s) => s.id === id));
  if (unknown.length > 0) {
    throw new Error(`TESSERA_PARITY_SCENARIOS: no scenario with id ${unknown.join(', ')}; ids are the matrix rows (01, 50, ...)`);
  }
  return all.filter((s) => ids.includes(s.id));
}

/** Run one scenario on every backend at once (each in its own namespace) and judge each cell. */
export async function runScenario(
  scenario: Scenario,
  env: MatrixEnvironment,
  backends: readonly BackendName[] = BACKEND_NAMES,
): Promise<ScenarioResult> {
  const checks = await startIamChecks(env.iam, backends);
  let runs: ({ record: OutcomeRecord } | { error: unknown })[];
  const findings: Partial<Record<BackendName, readonly string[]>> = {};
  try {
    runs = await Promise.all(backends.map((b) => runOnce(scenario, b, env)));
  } finally {
    for (const [b, check] of Object.entries(checks) as [BackendName, AccessCheck | Error][]) {
      findings[b] = check instanceof Error ? [check.message] : (env.iam as IamRun).finish(check);
    }
  }
  const cells = Object.fromEntries(
    backends.map((b, i) => [b, withIamFindings(judge(scenario, b, runs[i] as { record: OutcomeRecord }), findings[b] ?? [])]),
  ) as Record<BackendName, Cell>;
  return { scenario, cells };
}

/**
 * One AccessCheck per cloud backend of the run, started before any cell so that the grants (the program under
 * mocks, once per process) are read before the backends are made; a cloud whose grants cannot be read gets
 * the error instead, and its cells fail with it.
 */
async function startIamChecks(
  iam: IamRun | undefined,
  backends: readonly BackendName[],
): Promise<Partial<Record<BackendName, AccessCheck | Error>>> {
  if (iam === undefined) return {};
  const clouds = backends.filter((b): b is Exclude<BackendName, 'local'> => b !== 'local');
  const started = await Promise.all(
    clouds.map((cloud) =>
      iam
        .start(cloud)
        .catch(
          (e: unknown) => new Error(`the grants of the ${cloud} stack could not be read: ${e instanceof Error ? e.message : String(e)}`),
        ),
    ),
  );
  return Object.fromEntries(clouds.map((c, i) => [c, started[i]]));
}

/** A cell whose functions made an access outside their grants fails, whatever its outcome record. */
export function withIamFindings(cell: Cell, findings: readonly string[]): Cell {
  if (findings.length === 0) return cell;
  const lines = findings.map((f) => `iam ${f}`);
  switch (cell.status) {
    case 'pass':
      return { status: 'fail', diff: lines, record: cell.record };
    case 'fail':
      return { ...cell, diff: [...cell.diff, ...lines] };
    case 'limitation':
      return { status: 'fail', diff: [...cell.diff, ...lines] };
    default: {
      const never: never = cell;
      throw new Error(`unknown cell ${JSON.stringify(never)}`);
    }
  }
}

/** Every scenario, one after another (each on all backends at once). */
export async function runMatrix(
  scenarios: readonly Scenario[],
  env: MatrixEnvironment,
  onResult: (r: ScenarioResult) => void = () => {},
): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const s of scenarios) {
    const r = await runScenario(s, env);
    onResult(r);
    results.push(r);
  }
  return results;
}

const MARK: Record<Cell['status'], string> = { pass: '✓', fail: '✗', limitation: '⚠' };

/** Every cell that did not pass, with what it says: the limitation's reason first, then the differing facts. */
function notes(results: readonly ScenarioResult[]): { mark: string; id: string; backend: BackendName; lines: string[] }[] {
  return results.flatMap((r) =>
    BACKEND_NAMES.flatMap((backend) => {
      const c = r.cells[backend];
      if (c.status === 'pass') return [];
      const lines = c.status === 'limitation' ? [c.reason, ...c.diff] : [...c.diff];
      return [{ mark: MARK[c.status], id: r.scenario.id, backend, lines: lines.length > 0 ? lines : ['failed'] }];
    }),
  );
}

function summary(results: readonly ScenarioResult[]): string {
  const cells = results.flatMap((r) => BACKEND_NAMES.map((b) => r.cells[b]));
  const count = (s: Cell['status']) => cells.filter((c) => c.status === s).length;
  return `${results.length} scenarios x ${BACKEND_NAMES.length} backends: ${count('pass')} ✓ pass, ${count('fail')} ✗ fail, ${count('limitation')} ⚠ emulator limitation`;
}

/** The matrix for a terminal: one row per scenario, one mark per backend, then every cell that did not pass and why. */
export function renderMatrix(results: readonly ScenarioResult[]): string {
  const titleWidth = 94;
  const clip = (s: string) => (s.length > titleWidth ? `${s.slice(0, titleWidth - 1)}…` : s.padEnd(titleWidth));
  const lines = [`${clip('scenario')}  ${BACKEND_NAMES.map((b) => b.padEnd(6)).join('')}`];
  for (const r of results)
    lines.push(`${clip(`${r.scenario.id} ${r.scenario.title}`)}  ${BACKEND_NAMES.map((b) => MARK[r.cells[b].status].padEnd(6)).join('')}`);
  const details = notes(results).flatMap((n) => n.lines.map((line) => `  ${n.mark} ${n.id} ${n.backend}: ${line}`));
  if (details.length > 0) lines.push('', ...details);
  lines.push('', summary(results));
  return lines.join('\n');
}

/** The matrix as Markdown (reports/parity.md; the README pastes the table). */
export function renderMarkdown(results: readonly ScenarioResult[], when: Date): string {
  const cellText = (s: string) => s.replace(/\|/g, '\\|');
  const lines = [
    '# Parity matrix',
    '',
    `Generated by \`npm run parity\` on ${when.toISOString()}: ✓ the outcome is identical to the expected one, ✗ it differs (the differing facts are listed below), ⚠ emulator limitation, never a pass. How to read it: [docs/parity.md](../docs/parity.md).`,
    '',
    `| # | scenario | ${BACKEND_NAMES.join(' | ')} |`,
    `|---|---|${BACKEND_NAMES.map(() => ':-:').join('|')}|`,
    ...results.map(
      (r) => `| ${r.scenario.id} | ${cellText(r.scenario.title)} | ${BACKEND_NAMES.map((b) => MARK[r.cells[b].status]).join(' | ')} |`,
    ),
    '',
    summary(results),
  ];
  const details = notes(results).flatMap((n) => [
    `- ${n.mark} **${n.id} ${n.backend}**: ${cellText(n.lines[0] as string)}`,
    ...n.lines.slice(1).map((line) => `  - ${cellText(line)}`),
  ]);
  if (details.length > 0) lines.push('', '## Cells that are not a pass', '', ...details);
  return `${lines.join('\n')}\n`;
}

/** One backend's entry in reports/parity.json. */
export type ReportCell =
  | { readonly pass: true }
  | { readonly pass: false; readonly diff: readonly string[] }
  | { readonly pass: false; readonly limitation: string; readonly diff: readonly string[] };

export interface ReportEntry {
  readonly scenario: string;
  readonly title: string;
  readonly backends: Readonly<Record<BackendName, ReportCell>>;
}

/** reports/parity.json: `[{ scenario, title, backends: { local, aws, gcp, azure } }]`. */
export function reportJson(results: readonly ScenarioResult[]): ReportEntry[] {
  const toCell = (c: Cell): ReportCell =>
    c.status === 'pass'
      ? { pass: true }
      : c.status === 'fail'
        ? { pass: false, diff: c.diff }
        : { pass: false, limitation: c.reason, diff: c.diff };
  return results.map((r) => ({
    scenario: r.scenario.id,
    title: r.scenario.title,
    backends: Object.fromEntries(BACKEND_NAMES.map((b) => [b, toCell(r.cells[b])])) as Record<BackendName, ReportCell>,
  }));
}
