import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chooseCommand, chooseHelp } from '../../../cli/commands/choose.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-choose-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function choose(...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await chooseCommand(argv, { stdout: (s) => (stdout += s), stderr: (s) => (stderr += s), cwd: dir });
  return { code, stdout, stderr };
}

describe('tessera choose > output', () => {
  it('prints a ranked table with the lease and timeouts, and what was ruled out', async () => {
    const run = await choose('westeurope', '--runtime', '12m', '--memory', '3GB', '--limit', '3');
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    const lines = run.stdout.split('\n');
    expect(lines[0]).toBe(
      'Choosing for: 12 min job, 3 GB peak, event trigger, data in westeurope (azure: West Europe (Netherlands)); cost weight 0.2.',
    );
    expect(lines[2]).toMatch(
      /^#\s+cloud\s+region\s+location\s+plan\s+distance\s+timeout\s+lease\s+queue vis\.\s+memory\s+\$\/scene\s+\$\/month\s+largest line\s+notes$/,
    );
    expect(lines[3]).toMatch(
      /^1\s+azure\s+westeurope\s+West Europe \(Netherlands\)\s+Flex Consumption\s+0 km\s+1800 s\s+2100 s\s+-\s+4 GB\s+\$[\d.,]+\s+\$[\d.,]+\s+Flex Consumption on-demand compute \(\d+ %\)\s+same region$/,
    );
    expect(run.stdout).toContain('Priced for 1 scene a month of 100 MB (5120 x 5120 px, 2 uint16 bands), 400 tiles each');
    expect(run.stdout).toContain('Cost of #1 (Flex Consumption in westeurope), a month:');
    expect(run.stdout).toMatch(/\(3 of \d+ feasible choices; --limit 0 shows all\)/);
    expect(run.stdout).toContain('  - Azure Functions Consumption: 12 min job exceeds the 10 min ceiling; use Flex Consumption');
  });

  it('prints machine-readable JSON with every choice', async () => {
    const run = await choose('--lat', '53.3', '--lon', '-6.3', '--runtime', '720', '--memory', '3072', '--clouds', 'aws', '--json');
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout);
    // The shape issue 17 asks for, exactly.
    expect(Object.keys(out)).toEqual(['workload', 'choices', 'ruledOut']);
    expect(out.workload).toMatchObject({
      data: { lat: 53.3, lon: -6.3, pricedAs: null },
      runtimeSec: 720,
      memoryMb: 3072,
      currency: 'USD',
    });
    expect(out.choices.length).toBeGreaterThan(10);
    expect(out.choices.every((c: { cloud: string }) => c.cloud === 'aws')).toBe(true);
    expect(Object.keys(out.choices[0])).toEqual(['cloud', 'region', 'plan', 'feasible', 'costPerScene', 'costPerMonth', 'lines', 'notes']);
    expect(out.choices[0]).toMatchObject({ cloud: 'aws', region: 'eu-west-1', plan: 'Lambda', feasible: true });
    expect(Object.keys(out.choices[0].lines[0])).toEqual(['item', 'quantity', 'unit', 'unitPrice', 'cost']);
    expect(out.choices[0].notes).toContain(
      "the data's cloud is not known (coordinates only): transfer from it is not priced; give --data CLOUD:REGION",
    );
    expect(out.ruledOut).toEqual([]);
  });

  it('prints the cost lines of the choice --breakdown names', async () => {
    const run = await choose(
      '--data',
      'aws:eu-west-1',
      '--runtime',
      '20s',
      '--memory',
      '2GB',
      '--cost-weight',
      '0',
      '--limit',
      '2',
      '--breakdown',
      '2',
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Cost of #2 (Flex Consumption in northeurope), a month:');
    expect(run.stdout).toMatch(/\n {2}egress of source reads from aws eu-west-1\s+0\.098\s+GB\s+\$0\.09\s+\$0\.0088\s+\d+ %\n/);
  });

  it('prints a warning shared by several rows once, with their numbers', async () => {
    const run = await choose(
      '--lat',
      '48.14',
      '--lon',
      '11.58',
      '--runtime',
      '40m',
      '--memory',
      '3GB',
      '--trigger',
      'http',
      '--limit',
      '3',
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'Check before deploying:\n  #1, #2, #3: the queue redelivers after 600 s while the 40 min job still runs: expect duplicate deliveries (the lease turns them away)\n',
    );
  });

  it('exits 1 and says why when nothing can run the job', async () => {
    const run = await choose('us-east-1', '--runtime', '40m', '--memory', '1GB', '--clouds', 'aws,gcp');
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('No provider, region and plan can run this job.');
    expect(run.stdout).toContain('AWS Lambda: 40 min job exceeds the 15 min ceiling');
  });

  it('lists the region catalog', async () => {
    const run = await choose('--list-regions');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^azure\s+westeurope\s+West Europe \(Netherlands\)\s+52\.3667, 4\.9\s+Consumption: yes; Flex Consumption: yes/m,
    );
    expect(run.stdout).toContain('CATALOG_SOURCES');
  });

  it('answers --help with the usage', async () => {
    const run = await choose('--help');
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`${chooseHelp}\n`);
  });
});

describe('tessera choose > strict input', () => {
  it.each<[string, string[], RegExp]>([
    [
      'an unknown region, with close matches',
      ['eu-wset-1', '--runtime', '5m', '--memory', '1GB'],
      /unknown region code "eu-wset-1"; did you mean eu-west-1/,
    ],
    ['a bad runtime', ['eu-west-1', '--runtime', '12 parsecs', '--memory', '1GB'], /runtime "12 parsecs" has an unknown unit "parsecs"/],
    ['a bad memory', ['eu-west-1', '--runtime', '5m', '--memory', 'lots'], /memory "lots" is not a memory size/],
    ['a missing runtime', ['eu-west-1', '--memory', '1GB'], /--runtime is required/],
    ['no location', ['--runtime', '5m', '--memory', '1GB'], /say where the data is/],
    [
      'a region and coordinates',
      ['eu-west-1', '--lat', '1', '--lon', '2', '--runtime', '5m', '--memory', '1GB'],
      /either a region code or --lat\/--lon/,
    ],
    ['half a coordinate', ['--lat', '1', '--runtime', '5m', '--memory', '1GB'], /--lat and --lon go together/],
    ['a latitude that is not a number', ['--lat', '0x10', '--lon', '2', '--runtime', '5m', '--memory', '1GB'], /--lat must be a number/],
    ['a latitude off the globe', ['--lat', '91', '--lon', '2', '--runtime', '5m', '--memory', '1GB'], /latitude 91 is not within -90..90/],
    ['an unknown trigger', ['eu-west-1', '--runtime', '5m', '--memory', '1GB', '--trigger', 'cron'], /--trigger must be event or http/],
    [
      'an unknown cloud',
      ['eu-west-1', '--runtime', '5m', '--memory', '1GB', '--clouds', 'aws,ibm'],
      /--clouds takes a comma-separated list/,
    ],
    [
      'a cost weight out of range',
      ['eu-west-1', '--runtime', '5m', '--memory', '1GB', '--cost-weight', '3'],
      /cost weight must be within 0..1/,
    ],
    ['an unknown flag', ['eu-west-1', '--runtime', '5m', '--memory', '1GB', '--fast'], /Unknown option '--fast'/],
    ['--pick without --write-stack', ['eu-west-1', '--runtime', '5m', '--memory', '1GB', '--pick', '2'], /go with --write-stack/],
    ['two region codes', ['eu-west-1', 'eu-west-2', '--runtime', '5m', '--memory', '1GB'], /one region code at most/],
  ])('refuses %s with exit status 2', async (_name, argv, message) => {
    const run = await choose(...argv);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
  });
});

describe('tessera choose > --write-stack', () => {
  it('writes the top choice, then refuses to overwrite it unless --force', async () => {
    const args = ['eu-west-1', '--runtime', '12m', '--memory', '3GB', '--write-stack'];
    const first = await choose(...args);
    expect(first.code).toBe(0);
    const path = join(dir, 'Pulumi.aws-eu-west-1.yaml');
    expect(first.stderr).toContain(`wrote ${path}`);
    const written = await readFile(path, 'utf8');
    expect(written).toContain('  tessera:cloud: aws\n  tessera:region: eu-west-1\n  aws:region: eu-west-1\n');

    await writeFile(path, 'hand-edited\n');
    const second = await choose(...args);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain('already exists; not overwriting it (pass --force');
    expect(await readFile(path, 'utf8')).toBe('hand-edited\n');

    const forced = await choose(...args, '--force');
    expect(forced.code).toBe(0);
    expect(await readFile(path, 'utf8')).toBe(written);
  });

  it('refuses an --out-dir that does not exist rather than creating it', async () => {
    const run = await choose('westeurope', '--runtime', '5m', '--memory', '1GB', '--write-stack', '--out-dir', 'missing');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`--out-dir ${join(dir, 'missing')} does not exist`);
  });

  it('writes the n-th choice with --pick into an --out-dir relative to the working directory', async () => {
    const json = JSON.parse((await choose('westeurope', '--runtime', '5m', '--memory', '1GB', '--json')).stdout);
    const second = json.choices[1];
    await mkdir(join(dir, 'stacks'));
    const run = await choose('westeurope', '--runtime', '5m', '--memory', '1GB', '--write-stack', '--pick', '2', '--out-dir', 'stacks');
    expect(run.code).toBe(0);
    const text = await readFile(join(dir, 'stacks', `Pulumi.${second.cloud}-${second.region}.yaml`), 'utf8');
    expect(text).toContain(`  tessera:region: ${second.region}\n`);
    expect(text).toContain(`# ${second.plan} in ${second.region}`);
  });

  it('refuses a --pick beyond the choices', async () => {
    const run = await choose('us-east-1', '--runtime', '12m', '--memory', '1GB', '--clouds', 'aws', '--write-stack', '--pick', '999');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--pick 999 but there are \d+ feasible choices/);
  });

  it('asks for the GCP project before writing a GCP stack', async () => {
    const run = await choose('europe-west1', '--runtime', '5m', '--memory', '1GB', '--clouds', 'gcp', '--write-stack');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('a GCP stack needs its project: pass --gcp-project <id>');
    const bad = await choose(
      'europe-west1',
      '--runtime',
      '5m',
      '--memory',
      '1GB',
      '--clouds',
      'gcp',
      '--write-stack',
      '--gcp-project',
      'Bad_Project',
    );
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('got "Bad_Project"');
  });
});
