import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Check, CheckLevel } from '../../infra/preflight/checks.js';
import type { Plan } from '../../infra/preflight/plan.js';

/** What the command may touch: output streams, the directory stack files are looked up in, and the day. */
export interface PreflightIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
  /** Today, for the runtime dates (tests pass a fixed day). */
  now?: () => Date;
}

export const preflightHelp = `tessera preflight: every check you can run before \`pulumi up\`, without the Pulumi CLI

Usage: tessera preflight --stack <name> [options]

Reads Pulumi.<name>.yaml and reports, each with what to fix:
  config      the program's own validation of every tessera: key
  runtime     the Node.js runtime's dates against today (a decommissioned one is refused,
              with the date and the replacement; one near deprecation is a warning)
  lease       tile timeout within the platform ceiling, lease above it
  visibility  the trigger keeps a running job for its timeout
  retry       what a redelivery does after an attempt died holding the lease, and the
              dead-letter count
  archives    the build output pulumi up uploads (npm run build:functions)
Then runs the Pulumi program under mocks and prints the plan: the resources, the
identities with their permissions, and the grants each function waits for.

Options:
  --stack <name>      the stack: reads Pulumi.<name>.yaml (required)
  --dir <path>        where the stack file is (default: the current directory, then the repository)
  --today YYYY-MM-DD  check runtime dates against this day instead of today
  --no-plan           the checks only, without running the program under mocks
  --json              machine-readable output

Exit status: 0 deployable (warnings allowed), 1 refused, 2 bad input.
Walk-through: docs/deploy.md.`;

/** A command-line mistake: reported with the usage, exit status 2. */
class PreflightUsageError extends Error {
  override readonly name = 'PreflightUsageError';
}

export interface PreflightReport {
  readonly stack: string;
  readonly file: string;
  readonly today: string;
  readonly deployable: boolean;
  readonly checks: readonly Check[];
  readonly plan: Plan | undefined;
}

export async function preflightCommand(argv: string[], io: PreflightIo): Promise<number> {
  let opts: { stack: string; dir: string | undefined; today: Date; plan: boolean; json: boolean };
  try {
    opts = parseOptions(argv, io);
  } catch (e) {
    if (e instanceof PreflightUsageError || (e instanceof TypeError && (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))) {
      io.stderr(`tessera preflight: ${e.message}\n\n${preflightHelp}\n`);
      return 2;
    }
    throw e;
  }
  // Loaded here, not at the top: the other commands need neither the Pulumi SDK nor the infra program.
  const [{ REPO_ROOT, DEFAULT_ARCHIVE_DIR, ARCHIVES }, { loadStackFile, stackFileName }, { checkStack }] = await Promise.all([
    import('../../infra/common/packaging.js'),
    import('../../infra/preflight/stack-file.js'),
    import('../../infra/preflight/checks.js'),
  ]);
  const name = stackFileName(opts.stack);
  const candidates = opts.dir === undefined ? [join(io.cwd, name), join(REPO_ROOT, name)] : [join(opts.dir, name)];
  const path = candidates.find((p) => existsSync(p));
  if (path === undefined) {
    io.stderr(
      `tessera preflight: no stack file ${name} in ${candidates.map(dirname).join(' or ')}; create it with tessera choose --write-stack, or pass --dir\n`,
    );
    return 2;
  }
  const file = loadStackFile(path);
  const result = checkStack({ stack: file.stack, config: file.config, defaultArchiveDir: DEFAULT_ARCHIVE_DIR, today: opts.today });
  let plan: Plan | undefined;
  if (opts.plan && result.config) {
    const { runProgramUnderMocks } = await import('../../infra/preflight/mock-run.js');
    const { planOf } = await import('../../infra/preflight/plan.js');
    const config: Record<string, string> = { ...file.config };
    if (result.archivesMissing)
      config['tessera:archiveDir'] = placeholderArchives([...Object.values(ARCHIVES.aws), ARCHIVES.gcp, ARCHIVES.azure]);
    else if (config['tessera:archiveDir'] !== undefined && !isAbsolute(config['tessera:archiveDir']))
      config['tessera:archiveDir'] = resolve(REPO_ROOT, config['tessera:archiveDir']);
    plan = planOf(await runProgramUnderMocks(file.stack, config));
  }
  const report: PreflightReport = {
    stack: file.stack,
    file: path,
    today: opts.today.toISOString().slice(0, 10),
    deployable: !result.checks.some((c) => c.level === 'error'),
    checks: result.checks,
    plan,
  };
  if (opts.json) io.stdout(`${JSON.stringify(report, null, 2)}\n`);
  else io.stdout(`${await renderReport(report)}\n`);
  return report.deployable ? 0 : 1;
}

function parseOptions(argv: string[], io: PreflightIo) {
  const { values, positionals } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: {
      stack: { type: 'string', short: 's' },
      dir: { type: 'string' },
      today: { type: 'string' },
      'no-plan': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  if (positionals.length > 0)
    throw new PreflightUsageError(`unexpected argument ${JSON.stringify(positionals[0])}; name the stack with --stack`);
  const stack = values.stack;
  if (stack === undefined || stack === '') throw new PreflightUsageError('--stack <name> is required, e.g. --stack aws-eu-west-1');
  if (!/^[A-Za-z0-9_.-]+$/.test(stack))
    throw new PreflightUsageError(`--stack must be a stack name (letters, digits, - _ .), got ${JSON.stringify(stack)}`);
  let today = io.now?.() ?? new Date();
  if (values.today !== undefined) {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(values.today) || Number.isNaN(Date.parse(`${values.today}T00:00:00Z`)))
      throw new PreflightUsageError(`--today must be a date YYYY-MM-DD, got ${JSON.stringify(values.today)}`);
    today = new Date(`${values.today}T00:00:00Z`);
  }
  return {
    stack,
    dir: values.dir === undefined ? undefined : resolve(io.cwd, values.dir),
    today,
    plan: !values['no-plan'],
    json: values.json,
  };
}

/** Stand-ins for archives not built yet, so the plan can be drawn; `pulumi up` still needs the real ones. */
function placeholderArchives(paths: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-preflight-'));
  for (const rel of paths) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), `placeholder for ${rel}: run npm run build:functions\n`);
  }
  return dir;
}

const MARK: Readonly<Record<CheckLevel, string>> = { ok: 'ok   ', warn: 'warn ', error: 'ERROR' };

async function renderReport(r: PreflightReport): Promise<string> {
  const lines = [`tessera preflight: stack ${r.stack} (${r.file}), runtime dates checked against ${r.today}`, '', 'Checks'];
  for (const c of r.checks) {
    lines.push(`  ${MARK[c.level]} ${c.check.padEnd(10)} ${c.message}`);
    if (c.fix) lines.push(`  ${' '.repeat(16)} fix: ${c.fix}`);
  }
  if (r.plan) {
    const { renderPlan } = await import('../../infra/preflight/plan.js');
    lines.push('', renderPlan(r.plan));
  }
  lines.push(
    '',
    r.deployable
      ? `Deployable. Next: npm run build:functions, then pulumi up --stack ${r.stack} (docs/deploy.md).`
      : 'Refused: fix the errors above, then run tessera preflight again.',
  );
  return lines.join('\n');
}
