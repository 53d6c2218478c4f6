import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { REPO_ROOT } from '../../infra/common/packaging.js';
import { ARCHIVE_DIR_ENV } from '../../infra/components/args.js';
import { runProgramUnderMocks } from '../../infra/preflight/mock-run.js';
import { install, PULUMI_BIN_DIR, PULUMI_VENDOR_DIR } from '../../scripts/emulators/pulumi.mjs';
import { resolvedReadmeExample } from './component-docs.js';
import { placeholderArchives, runStack, type StackRun } from './harness.js';
import { EXAMPLE_STACK_FILES, loadStackFile } from './stack-files.js';

/**
 * The program on the real Pulumi engine: the vendored CLI and Node.js language host (vendor/pulumi/) run
 * infra/index.ts for each example stack, with the stand-in provider (test/infra/standin-provider/) in place of the
 * provider plugins no machine here can download. Each stack runs on a throwaway copy of its stack file (stack
 * init rewrites it) in a temporary project whose Pulumi.yaml is the repository's with `main` made absolute, with
 * its own PULUMI_HOME, a file:// backend and a passphrase. What this proves and what it cannot: docs/deploy.md,
 * "The program on the real Pulumi engine".
 */

const run = promisify(execFile);
const STANDIN_BIN = join(REPO_ROOT, 'test', 'infra', 'standin-provider', 'bin');
const STEP_TIMEOUT_MS = 180_000;

/** One event of `pulumi up|destroy --json` (one JSON object per line); only what the test reads. */
interface EngineEvent {
  summaryEvent?: { resourceChanges: Record<string, number>; result: string };
  diagnosticEvent?: { severity: string; message: string };
}
interface PreviewStep {
  op: string;
  urn: string;
  newState: { custom: boolean; type: string };
}
interface Preview {
  steps: PreviewStep[];
  changeSummary: Record<string, number>;
  diagnostics?: { severity: string; message: string }[];
}
interface StateResource {
  urn: string;
  type: string;
  custom?: boolean;
  dependencies?: string[];
}
interface Exported {
  deployment: { resources?: StateResource[] };
}

const isProvider = (type: string) => type.startsWith('pulumi:providers:');

/** Every file under a directory, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** One stack of the Pulumi project in a temporary directory, driven through the real CLI. */
class EngineStack {
  readonly dir = mkdtempSync(join(tmpdir(), 'tessera-pulumi-engine-'));
  readonly project = join(this.dir, 'project');
  readonly journal = join(this.dir, 'standin-journal.log');
  readonly stackFile: string;
  /** Everything the CLI printed, stdout and stderr, over every command. */
  printed = '';
  readonly seconds: Record<string, number> = {};
  private readonly env: NodeJS.ProcessEnv;

  constructor(
    readonly stack: string,
    sourceStackFile: string,
  ) {
    mkdirSync(this.project);
    const projectFile = parse(readFileSync(join(REPO_ROOT, 'Pulumi.yaml'), 'utf8')) as { main: string };
    // The program stays where it is (its imports, node_modules and tsx resolve from the repository).
    writeFileSync(join(this.project, 'Pulumi.yaml'), stringify({ ...projectFile, main: join(REPO_ROOT, projectFile.main) }));
    this.stackFile = join(this.project, `Pulumi.${stack}.yaml`);
    copyFileSync(join(REPO_ROOT, sourceStackFile), this.stackFile);
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PULUMI_')));
    this.env = {
      ...inherited,
      // The vendored CLI and language host, the stand-in plugins, and this Node (the pinned one) for the program.
      PATH: [PULUMI_BIN_DIR, STANDIN_BIN, dirname(process.execPath), process.env.PATH ?? ''].join(':'),
      PULUMI_HOME: join(this.dir, 'home'),
      PULUMI_BACKEND_URL: `file://${join(this.dir, 'state')}`,
      PULUMI_CONFIG_PASSPHRASE: randomBytes(16).toString('hex'),
      PULUMI_SKIP_UPDATE_CHECK: 'true',
      // Nothing to download from here: a plugin not on PATH must fail at once, not after a network timeout.
      PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
      // The file backend rewrites the whole state after every step otherwise (quadratic in resources, a third of
      // a destroy's CPU); only the final state is checked, and it is saved either way.
      PULUMI_SKIP_CHECKPOINTS: 'true',
      TESSERA_STANDIN_LOG: this.journal,
    };
    mkdirSync(join(this.dir, 'state'));
    writeFileSync(this.journal, '');
  }

  /**
   * Runs `pulumi <args>` in the project; throws with what it printed when it fails. What it prints is kept in
   * `printed` unless `showsSecrets` (an export asked to decrypt them).
   */
  async pulumi(step: string, args: readonly string[], showsSecrets = false): Promise<string> {
    const started = Date.now();
    try {
      const { stdout, stderr } = await run(join(PULUMI_BIN_DIR, 'pulumi'), [...args, '--non-interactive'], {
        cwd: this.project,
        env: this.env,
        maxBuffer: 256 * 1024 * 1024,
        timeout: STEP_TIMEOUT_MS,
      });
      if (!showsSecrets) this.printed += stdout + stderr;
      return stdout;
    } catch (e) {
      const { stdout = '', stderr = '' } = e as { stdout?: string; stderr?: string };
      this.printed += stdout + stderr;
      throw new Error(
        `pulumi ${args.join(' ')} (${this.stack}) failed: ${(e as Error).message}\n${stderr.slice(-4000)}\n${stdout.slice(-4000)}`,
      );
    } finally {
      this.seconds[step] = (this.seconds[step] ?? 0) + (Date.now() - started) / 1000;
    }
  }

  /** `pulumi up|destroy --json`: the summary event, after checking no error was reported. */
  async apply(step: string, args: readonly string[]): Promise<Record<string, number>> {
    const events = (await this.pulumi(step, [...args, '--yes', '--skip-preview', '--json']))
      .split('\n')
      .filter((l) => l.trim().startsWith('{'))
      .map((l) => JSON.parse(l) as EngineEvent);
    const errors = events.flatMap((e) => (e.diagnosticEvent?.severity === 'error' ? [e.diagnosticEvent.message] : []));
    expect(errors, `${step}: errors the engine reported`).toEqual([]);
    const summary = events.find((e) => e.summaryEvent)?.summaryEvent;
    expect(summary?.result, `${step}: the summary event`).toBe('succeeded');
    return summary?.resourceChanges ?? {};
  }

  async exportState(showSecrets = false): Promise<{ text: string; resources: StateResource[] }> {
    const text = await this.pulumi('export', ['stack', 'export', ...(showSecrets ? ['--show-secrets'] : [])], showSecrets);
    return { text, resources: (JSON.parse(text) as Exported).deployment.resources ?? [] };
  }

  /** The stand-in's journal (`create <urn>` lines, in the order the engine asked), from line `from` on. */
  journalLines(from = 0): { op: string; urn: string }[] {
    return readFileSync(this.journal, 'utf8')
      .split('\n')
      .filter(Boolean)
      .slice(from)
      .map((line) => {
        const [op = '', urn = ''] = line.split(' ');
        return { op, urn };
      });
  }

  /** Every file of the backend: the state, its history and its backups, as they lie on disk. */
  backendFiles(): string[] {
    return filesUnder(join(this.dir, 'state'));
  }

  /** Point the project at another program (a path, absolute or relative to the project directory). */
  useProgram(main: string): void {
    const projectFile = parse(readFileSync(join(this.project, 'Pulumi.yaml'), 'utf8')) as { main: string };
    writeFileSync(join(this.project, 'Pulumi.yaml'), stringify({ ...projectFile, main }));
  }

  /** Set an environment variable of every later command (the program's too). */
  setEnv(name: string, value: string): void {
    this.env[name] = value;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Ordering pairs the engine broke: `[dependent, dependency]` where the journal has the dependent's `op` before
 * the dependency's (`create`: a dependency must come first; `delete`: last).
 */
function orderViolations(lines: readonly { op: string; urn: string }[], resources: readonly StateResource[], op: 'create' | 'delete') {
  const at = new Map(lines.filter((l) => l.op === op).map((l, i) => [l.urn, i]));
  const violations: string[] = [];
  for (const r of resources) {
    const mine = at.get(r.urn);
    if (mine === undefined) continue;
    for (const dep of r.dependencies ?? []) {
      const theirs = at.get(dep);
      if (theirs === undefined) continue;
      if (op === 'create' ? theirs > mine : theirs < mine)
        violations.push(`${r.urn} ${op}d ${op === 'create' ? 'before' : 'after'} ${dep}`);
    }
  }
  return violations;
}

const customUrns = (resources: readonly StateResource[]) =>
  resources
    .filter((r) => r.custom && !isProvider(r.type))
    .map((r) => r.urn)
    .sort();

beforeAll(async () => {
  // npm test's pretest has done this; a lone `npm run vitest` of this file needs it too (a no-op when done).
  await install();
}, STEP_TIMEOUT_MS);

describe('the vendored Pulumi CLI (vendor/pulumi/)', () => {
  it('refuses a binary whose checksum is not the one in SHA256SUMS', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-pulumi-vendor-'));
    try {
      const vendorDir = join(dir, 'vendor');
      mkdirSync(vendorDir);
      copyFileSync(join(PULUMI_VENDOR_DIR, 'SHA256SUMS'), join(vendorDir, 'SHA256SUMS'));
      for (const file of readdirSync(PULUMI_VENDOR_DIR).filter((f) => f.endsWith('.gz'))) {
        writeFileSync(join(vendorDir, file), gzipSync(Buffer.from(`not ${file}\n`)));
      }
      await expect(install({ vendorDir, binDir: join(dir, 'bin') })).rejects.toThrow(/unpacks to sha256 [0-9a-f]{64}, but SHA256SUMS says/);
      expect(readdirSync(join(dir, 'bin'))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

for (const file of EXAMPLE_STACK_FILES) {
  const { stack, config } = loadStackFile(file);

  // Each step runs the CLI once or twice; on two loaded cores one can take well over the default 60 s.
  describe(`the program on the real Pulumi engine, stack ${stack}`, { timeout: STEP_TIMEOUT_MS }, () => {
    let engine: EngineStack;
    let mock: StackRun;
    /** A PostGIS URL whose password is unique to this run, so any clear copy of it can be found. */
    const password = randomBytes(12).toString('hex');
    const secretUrl = `postgis://tessera:${password}@db.example.org:5432/tiles`;
    let previewUrns: string[] = [];
    /** Every step of the preview: the custom resources, the stack and the component. */
    let previewSteps = 0;
    let upState: StateResource[] = [];
    const done = new Set<string>();
    /** A step needs the ones before it: fail with that, not with a confusing later error. */
    const needs = (step: string) => {
      if (!done.has(step)) throw new Error(`not run: the step "${step}" of ${stack} did not pass`);
    };

    beforeAll(async () => {
      engine = new EngineStack(stack, file);
      const archiveDir = await placeholderArchives();
      mock = await runStack(stack, { ...config, 'tessera:featureSinkUrl': secretUrl });
      await engine.pulumi('init', ['stack', 'init', stack]);
      await engine.pulumi('init', ['config', 'set', 'tessera:archiveDir', archiveDir]);
      await engine.pulumi('init', ['config', 'set', '--secret', 'tessera:featureSinkUrl', secretUrl]);
    }, STEP_TIMEOUT_MS);

    afterAll(() => {
      console.info(
        `[pulumi-engine] ${stack}: ${previewUrns.length} resources; ${Object.entries(engine.seconds)
          .map(([step, s]) => `${step} ${s.toFixed(1)} s`)
          .join(', ')}`,
      );
      engine.remove();
    });

    it('keeps the secret encrypted in the stack file', () => {
      const text = readFileSync(engine.stackFile, 'utf8');
      expect(text).not.toContain(password);
      expect(parse(text).config['tessera:featureSinkUrl']).toEqual({ secure: expect.stringMatching(/^v1:/) });
      done.add('init');
    });

    it("previews as many resources as the mock run declares, with the mock run's URNs", async () => {
      needs('init');
      const preview = JSON.parse(await engine.pulumi('preview', ['preview', '--json'])) as Preview;
      expect((preview.diagnostics ?? []).filter((d) => d.severity === 'error')).toEqual([]);
      expect(preview.steps.every((s) => s.op === 'create')).toBe(true);
      previewSteps = preview.steps.length;
      previewUrns = preview.steps
        .filter((s) => s.newState.custom && !isProvider(s.newState.type))
        .map((s) => s.urn)
        .sort();
      const mockUrns = mock.resources
        .filter((r) => r.custom)
        .map((r) => r.urn)
        .sort();
      expect(previewUrns.length).toBe(mockUrns.length);
      expect(previewUrns).toEqual(mockUrns);
      done.add('preview');
    });

    it('creates every resource once, each after the resources it depends on, with the dependencies the mock run records', async () => {
      needs('preview');
      const changes = await engine.apply('up', ['up']);
      expect(changes).toEqual({ create: previewSteps });
      upState = (await engine.exportState()).resources;
      expect(customUrns(upState)).toEqual(previewUrns);
      const created = engine.journalLines();
      expect(created.every((l) => l.op === 'create')).toBe(true);
      expect(created.map((l) => l.urn).sort()).toEqual(previewUrns);
      expect(orderViolations(created, upState, 'create')).toEqual([]);
      // The graph `tessera preflight` prints (from the mock run) is the one the engine recorded.
      const recorded = Object.fromEntries(
        upState.filter((r) => r.custom && !isProvider(r.type)).map((r) => [r.urn, [...(r.dependencies ?? [])].sort()]),
      );
      const mocked = Object.fromEntries(mock.resources.filter((r) => r.custom).map((r) => [r.urn, [...r.dependencies].sort()]));
      expect(recorded).toEqual(mocked);
      done.add('up');
    });

    it('changes nothing on a second up', async () => {
      needs('up');
      const before = engine.journalLines().length;
      // --expect-no-changes makes the CLI itself fail if the engine plans any change.
      const changes = await engine.apply('second up', ['up', '--expect-no-changes']);
      expect(changes).toEqual({ same: previewSteps });
      expect(engine.journalLines(before)).toEqual([]);
      done.add('second up');
    });

    it('never shows the secret in clear: not in the state, its history, nor anything the CLI printed', async () => {
      needs('second up');
      const exported = await engine.exportState();
      expect(exported.text).not.toContain(password);
      // The value is in the state, encrypted: the absence above is not the program having dropped it.
      expect(exported.text).toContain('"ciphertext"');
      expect((await engine.exportState(true)).text).toContain(password);
      for (const path of engine.backendFiles()) expect(readFileSync(path, 'utf8'), path).not.toContain(password);
      expect(engine.printed).not.toContain(password);
    });

    it('destroys every resource, each before the resources it depends on', async () => {
      needs('up');
      const before = engine.journalLines().length;
      const changes = await engine.apply('destroy', ['destroy']);
      expect(changes).toEqual({ delete: previewSteps });
      const deleted = engine.journalLines(before);
      expect(deleted.every((l) => l.op === 'delete')).toBe(true);
      expect(deleted.map((l) => l.urn).sort()).toEqual(previewUrns);
      expect(orderViolations(deleted, upState, 'delete')).toEqual([]);
      expect(customUrns((await engine.exportState()).resources)).toEqual([]);
      expect(engine.printed).not.toContain(password);
    });
  });
}

/**
 * The components on a stack that predates them, and the README's example, in one more engine run than the stack
 * above has (the former program's `up`, then one `preview`): a stack deployed by the former program (the tiling
 * stack at the top, test/infra/former-program.ts) is previewed with the current program, to which the README's
 * example is added. The aliases must keep every former resource in place; the new component and the example's
 * resources are the only creates.
 */
describe('the components on a stack deployed before them, with the README example beside it', { timeout: STEP_TIMEOUT_MS }, () => {
  const file = 'Pulumi.aws-eu-west-1.yaml';
  const { stack, config } = loadStackFile(file);
  let engine: EngineStack;
  let formerUrns: string[] = [];
  let example: StackRun;
  const done = new Set<string>();

  beforeAll(async () => {
    engine = new EngineStack(stack, file);
    const archiveDir = await placeholderArchives();
    // The example finds its archives as a user's CI job would; it needs only aws:region, which the stack file sets.
    engine.setEnv(ARCHIVE_DIR_ENV, archiveDir);
    // Programs in the project directory: ES modules resolving the SDK and tsx from the repository.
    writeFileSync(join(engine.project, 'package.json'), JSON.stringify({ type: 'module' }));
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(engine.project, 'node_modules'), 'dir');
    writeFileSync(join(engine.project, 'readme-example.ts'), resolvedReadmeExample());
    writeFileSync(
      join(engine.project, 'upgraded.ts'),
      [
        `import main from ${JSON.stringify(join(REPO_ROOT, 'infra', 'index.ts'))};`,
        'export default async function upgraded() {',
        '  const outputs = await main();',
        "  await import('./readme-example.ts');",
        '  return outputs;',
        '}',
        '',
      ].join('\n'),
    );
    engine.useProgram(join(REPO_ROOT, 'test', 'infra', 'former-program.ts'));
    process.env[ARCHIVE_DIR_ENV] = archiveDir;
    try {
      example = await runProgramUnderMocks(stack, config, async () => ({ ...(await import(join(engine.project, 'readme-example.ts'))) }));
    } finally {
      delete process.env[ARCHIVE_DIR_ENV];
    }
    await engine.pulumi('init', ['stack', 'init', stack]);
    await engine.pulumi('init', ['config', 'set', 'tessera:archiveDir', archiveDir]);
  }, STEP_TIMEOUT_MS);

  afterAll(() => {
    console.info(
      `[pulumi-engine] former ${stack} + README example: ${formerUrns.length} former resources; ${Object.entries(engine.seconds)
        .map(([step, s]) => `${step} ${s.toFixed(1)} s`)
        .join(', ')}`,
    );
    engine.remove();
  });

  it('deploys the stack with the former program: the tiling stack at the top', async () => {
    const changes = await engine.apply('former up', ['up']);
    const state = (await engine.exportState()).resources;
    formerUrns = state.filter((r) => !isProvider(r.type) && r.type !== 'pulumi:pulumi:Stack').map((r) => r.urn);
    expect(changes).toEqual({ create: formerUrns.length + 1 });
    expect(formerUrns).toContain(`urn:pulumi:${stack}::tessera::tessera:aws:TilingStack::tessera`);
    expect(formerUrns.filter((u) => u.includes('TesseraAws'))).toEqual([]);
    done.add('former up');
  });

  it('previews the current program on it: every former resource kept under its alias, the component and the example created, nothing deleted or replaced', async () => {
    if (!done.has('former up')) throw new Error('not run: the former program did not deploy');
    engine.useProgram('upgraded.ts');
    const preview = JSON.parse(await engine.pulumi('preview', ['preview', '--json'])) as Preview;
    expect((preview.diagnostics ?? []).filter((d) => d.severity === 'error')).toEqual([]);
    const ops = (op: string) => preview.steps.filter((s) => s.op === op && !isProvider(s.newState.type));
    const created = ops('create').map((s) => s.urn);
    const exampleUrns = example.resources.map((r) => r.urn);
    expect(created.sort()).toEqual([`urn:pulumi:${stack}::tessera::tessera:index:TesseraAws::tessera`, ...exampleUrns].sort());
    const others = preview.steps.filter((s) => s.op !== 'create' && s.op !== 'same' && !isProvider(s.newState.type));
    expect(others.map((s) => `${s.op} ${s.urn}`)).toEqual([]);
    // Each former resource (and the stack) the same, under its new URN: the preview lists no step for it, and no
    // delete of its old URN (what a missing alias gives: a create under the new URN and a delete of the old).
    console.info(`[pulumi-engine] preview of the upgrade: ${JSON.stringify(preview.changeSummary)}`);
    expect(preview.changeSummary).toEqual({ create: created.length, same: formerUrns.length + 1 });
  });
});
