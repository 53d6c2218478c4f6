import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type PreflightReport, preflightCommand } from '../../cli/commands/preflight.js';
import { main } from '../../cli/main.js';
import { EXAMPLE_STACK_FILES, loadStackFile } from './stack-files.js';

/**
 * `tessera preflight --stack NAME`: the checks a user can run before
 * `pulumi up`, and the plan drawn from the program under mocks.
 */

const TODAY = new Date('2026-12-01T00:00:00Z');

async function preflight(args: string[], now = TODAY): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await preflightCommand(args, { stdout: (s) => (out += s), stderr: (s) => (err += s), cwd: process.cwd(), now: () => now });
  return { code, out, err };
}

const json = (out: string) => JSON.parse(out) as PreflightReport;

/** A stack file in a fresh folder: the example's keys with some changed. */
function stackFile(stack: string, from: string, changes: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-preflight-test-'));
  const config = { ...loadStackFile(from).config, ...changes };
  writeFileSync(
    join(dir, `Pulumi.${stack}.yaml`),
    `config:\n${Object.entries(config)
      .map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`)
      .join('\n')}\n`,
  );
  return dir;
}

describe('tessera preflight', () => {
  for (const file of EXAMPLE_STACK_FILES) {
    const stack = loadStackFile(file).stack;
    it(`passes the example stack ${stack} and prints its resources, identities and ordering`, async () => {
      const { code, out } = await preflight(['--stack', stack, '--json']);
      expect(code).toBe(0);
      const report = json(out);
      expect(report.deployable).toBe(true);
      expect(report.checks.filter((c) => c.level === 'error')).toEqual([]);
      for (const check of ['config', 'runtime', 'lease', 'visibility', 'retry']) {
        expect(report.checks.find((c) => c.check === check)?.level, check).toBe('ok');
      }
      expect(report.plan?.resourceCount).toBeGreaterThan(20);
      expect(report.plan?.identities.length).toBeGreaterThan(0);
      for (const id of report.plan?.identities ?? []) expect(id.permissions.length, id.principal).toBeGreaterThan(0);
      // Every function or app is created after at least one grant.
      for (const o of report.plan?.ordering ?? []) expect(o.after.length, o.resource).toBeGreaterThan(0);
    });
  }

  it('prints a readable report with what to fix', async () => {
    const { code, out } = await preflight(['--stack', 'gcp-europe-west1']);
    expect(code).toBe(0);
    expect(out).toMatch(/^ {2}ok {4}runtime {4}nodejs24 on Cloud Run functions is supported until 2028-04-30/m);
    expect(out).toContain('fix: pulumi config set gcp:project <your-project-id>');
    expect(out).toMatch(/service account tessera-build {2}\(runs .*\(build\)/);
    expect(out).toMatch(
      /tessera-scene after .*IAMMember tessera-eventarc-agent-role.*IAMMember tessera-trigger-receiver.*Sleep tessera-iam-propagation/,
    );
    expect(out).toContain('pulumi up --stack gcp-europe-west1');
  });

  it('refuses a stack that pins a decommissioned runtime, with the date and the replacement', async () => {
    const dir = stackFile('gcp-old', 'Pulumi.gcp-europe-west1.yaml', { 'tessera:runtime': 'nodejs20' });
    const { code, out } = await preflight(['--stack', 'gcp-old', '--dir', dir]);
    expect(code).toBe(1);
    expect(out).toMatch(/ERROR runtime .*nodejs20 since 2026-10-30; use nodejs22/);
    expect(out).toContain('Refused');
    // No plan for a stack that cannot be deployed.
    expect(out).not.toContain('Plan (');
    const aws = stackFile('aws-old', 'Pulumi.aws-eu-west-1.yaml', { 'tessera:runtime': 'nodejs20.x' });
    expect(json((await preflight(['--stack', 'aws-old', '--dir', aws, '--json'])).out).checks).toContainEqual(
      expect.objectContaining({ level: 'error', check: 'runtime', message: expect.stringMatching(/2026-08-31; use nodejs22\.x/) }),
    );
  });

  it('warns, naming the replacement, when the deployed runtime is within 90 days of its deprecation', async () => {
    const dir = stackFile('gcp-22', 'Pulumi.gcp-europe-west1.yaml', { 'tessera:runtime': 'nodejs22' });
    const { code, out } = await preflight(['--stack', 'gcp-22', '--dir', dir, '--today', '2027-03-01', '--no-plan', '--json']);
    expect(code).toBe(0);
    expect(json(out).checks).toContainEqual(
      expect.objectContaining({ level: 'warn', check: 'runtime', fix: 'pulumi config set tessera:runtime nodejs24' }),
    );
    // The default (nodejs24) has no newer row yet: the table is what needs the update.
    const latest = await preflight(['--stack', 'gcp-europe-west1', '--today', '2028-03-01', '--no-plan', '--json']);
    expect(latest.code).toBe(0);
    expect(json(latest.out).checks).toContainEqual(
      expect.objectContaining({ level: 'warn', check: 'runtime', fix: 'update shared/domain/runtimes.ts' }),
    );
  });

  it('reports every config problem with the setting to change, and exits 1', async () => {
    const dir = stackFile('aws-bad', 'Pulumi.aws-eu-west-1.yaml', { 'tessera:leaseSeconds': '600', 'tessera:maxRecieveCount': '5' });
    const { code, out } = await preflight(['--stack', 'aws-bad', '--dir', dir, '--json']);
    expect(code).toBe(1);
    const messages = json(out)
      .checks.map((c) => c.message)
      .join('\n');
    expect(messages).toContain('at least 901 s');
    expect(messages).toContain('did you mean tessera:maxReceiveCount?');
  });

  it('is wired in the CLI with --help, and refuses bad input with exit status 2', async () => {
    let out = '';
    const io = { stdout: (s: string) => (out += s), stderr: (s: string) => (out += s), cwd: process.cwd() };
    expect(await main(['preflight', '--help'], io)).toBe(0);
    expect(out).toContain('tessera preflight --stack <name>');
    expect(await main(['--help'], io)).toBe(0);
    expect(out).toMatch(/preflight +check a stack before pulumi up/);
    expect((await preflight([])).code).toBe(2);
    expect((await preflight(['--stack', 'no-such-stack'])).err).toContain('no stack file Pulumi.no-such-stack.yaml');
    expect((await preflight(['--stack', 'aws-eu-west-1', '--today', 'tomorrow'])).code).toBe(2);
  });
});
