import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CLOUD_RUNTIME_PLATFORMS,
  checkRuntime,
  cloudOfRuntimePlatform,
  DEPLOYED_NODE_MAJORS,
  DEPRECATION_WARNING_DAYS,
  deployedNodeMajor,
  deployedRuntime,
  knownRuntimeIds,
  MAIN_NODE_MAJOR,
  PROJECT_NODE_MAJORS,
  RUNTIME_CLOUDS,
  RUNTIME_PLATFORMS,
  RUNTIMES,
  RUNTIMES_READ_ON,
  testNodeMajor,
} from '../../../shared/domain/runtimes.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const READ_ON = new Date(`${RUNTIMES_READ_ON}T12:00:00Z`);
const day = (iso: string) => new Date(`${iso}T00:00:00Z`);
const ISO = /^\d{4}-\d{2}-\d{2}$/;

describe('the runtime table (shared/domain/runtimes.ts)', () => {
  it('dates every row, cites its provider page, and orders deprecation before the blocks', () => {
    for (const r of RUNTIMES) {
      const name = `${r.platform} ${r.runtimeId}`;
      expect(r.readOn, name).toBe(RUNTIMES_READ_ON);
      expect(r.sourceUrl, name).toMatch(/^https:\/\/(docs\.aws\.amazon\.com|docs\.cloud\.google\.com|learn\.microsoft\.com)\//);
      for (const d of [r.ga, r.deprecated, r.createBlocked, r.updateBlocked]) if (d !== undefined) expect(d, name).toMatch(ISO);
      if (r.deprecated && r.createBlocked) expect(r.deprecated < r.createBlocked, name).toBe(true);
      if (r.createBlocked && r.updateBlocked) expect(r.createBlocked <= r.updateBlocked, name).toBe(true);
      if (r.replacement !== undefined) expect(knownRuntimeIds(r.platform), name).toContain(r.replacement);
      if (r.unconfirmed) expect(r.note, `${name} says what is unconfirmed`).toBeTruthy();
    }
  });

  it('deploys on each cloud the newest LTS that is GA on every plan there: 24 on AWS and GCP, 22 on Azure', () => {
    expect(DEPLOYED_NODE_MAJORS).toEqual({ aws: 24, gcp: 24, azure: 22 });
    expect(RUNTIME_PLATFORMS.map((p) => deployedRuntime(p).runtimeId)).toEqual(['nodejs24.x', 'nodejs24', '22', 'Node|22']);
    for (const p of RUNTIME_PLATFORMS) {
      const row = deployedRuntime(p);
      expect(row, p).toMatchObject({ nodeMajor: deployedNodeMajor(cloudOfRuntimePlatform(p)), stage: 'ga' });
      expect(checkRuntime(p, row.runtimeId, READ_ON).level, p).toBe('ok');
    }
    for (const cloud of RUNTIME_CLOUDS) {
      const major = deployedNodeMajor(cloud);
      expect(major % 2, `${cloud}: an LTS line`).toBe(0);
      for (const p of CLOUD_RUNTIME_PLATFORMS[cloud]) expect(cloudOfRuntimePlatform(p), p).toBe(cloud);
      // Nothing newer qualifies: every newer LTS row of the cloud is missing on, or not GA on, one of its plans.
      for (const newer of RUNTIMES.filter((r) => r.nodeMajor > major && r.nodeMajor % 2 === 0)) {
        const gaOnAll = CLOUD_RUNTIME_PLATFORMS[cloud].every((p) =>
          RUNTIMES.some((r) => r.platform === p && r.nodeMajor === newer.nodeMajor && r.stage === 'ga'),
        );
        expect(gaOnAll, `${cloud}: Node ${newer.nodeMajor} is GA on every plan, so it should be deployed`).toBe(false);
      }
    }
    // Azure stays on 22 for a reason the table states: 24 is Preview on Flex and absent on Linux Consumption.
    expect(RUNTIMES.find((r) => r.platform === 'azure-functions-flex' && r.nodeMajor === 24)?.stage).toBe('preview');
    expect(RUNTIMES.some((r) => r.platform === 'azure-functions-consumption' && r.nodeMajor === 24)).toBe(false);
  });

  it('needs two Nodes, 24 (main: local backend, CLI, every suite) and 22 (the Azure suites again)', () => {
    expect(PROJECT_NODE_MAJORS).toEqual([24, 22]);
    expect(MAIN_NODE_MAJOR).toBe(24);
    expect(RUNTIME_CLOUDS.map(testNodeMajor)).toEqual([24, 24, 22]);
    expect(testNodeMajor('local')).toBe(MAIN_NODE_MAJOR);
  });

  it('still accepts the deployed runtime today (when this fails, the table needs a newer row, which the clouds then move to)', () => {
    for (const p of RUNTIME_PLATFORMS) expect(checkRuntime(p, deployedRuntime(p).runtimeId, new Date()).level, p).not.toBe('refuse');
  });
});

describe('checkRuntime', () => {
  it('refuses Node 20 on every platform on 2026-12-01, giving the date and the replacement', () => {
    expect(checkRuntime('aws-lambda', 'nodejs20.x', READ_ON)).toMatchObject({
      level: 'refuse',
      message: expect.stringMatching(/refuses creating functions on nodejs20\.x since 2026-08-31; use nodejs22\.x/),
    });
    expect(checkRuntime('gcp-functions', 'nodejs20', READ_ON)).toMatchObject({
      level: 'refuse',
      message: expect.stringMatching(/refuses creating functions on nodejs20 since 2026-10-30; use nodejs22/),
    });
    // Azure never blocks: Tessera refuses past the end of support, or nothing would.
    expect(checkRuntime('azure-functions-flex', '20', READ_ON)).toMatchObject({
      level: 'refuse',
      message: expect.stringMatching(/past its end of support \(2026-04-30\).*without security patches; use 22/),
    });
    expect(checkRuntime('azure-functions-consumption', 'Node|20', READ_ON).level).toBe('refuse');
  });

  it('refuses from the first day of a block, and warns on the day before when the deprecation has passed', () => {
    expect(checkRuntime('aws-lambda', 'nodejs22.x', day('2027-06-01'))).toMatchObject({
      level: 'refuse',
      message: expect.stringContaining('since 2027-06-01; use nodejs24.x'),
    });
    expect(checkRuntime('aws-lambda', 'nodejs22.x', day('2027-05-31'))).toMatchObject({
      level: 'warn',
      message: expect.stringMatching(/was deprecated on 2027-04-30; creating functions is refused from 2027-06-01; use nodejs24\.x/),
    });
    // The update block comes later than the create block, and refuses on its own day too.
    expect(checkRuntime('aws-lambda', 'nodejs22.x', day('2027-07-01')).level).toBe('refuse');
  });

  it(`warns within ${DEPRECATION_WARNING_DAYS} days of a deprecation, naming the replacement, and not before`, () => {
    expect(checkRuntime('gcp-functions', 'nodejs22', day('2027-01-30'))).toMatchObject({
      level: 'warn',
      message: expect.stringMatching(/nodejs22 on Cloud Run functions is deprecated on 2027-04-30 \(in 90 days\).*use nodejs24/),
    });
    expect(checkRuntime('gcp-functions', 'nodejs22', day('2027-01-29')).level).toBe('ok');
    expect(checkRuntime('azure-functions-flex', '22', day('2027-03-01'))).toMatchObject({ level: 'warn' });
  });

  it('refuses an unknown id, or one of another platform, listing the ones it knows', () => {
    expect(checkRuntime('aws-lambda', 'nodejs22', READ_ON)).toMatchObject({
      level: 'refuse',
      message: expect.stringContaining('known: nodejs24.x, nodejs22.x, nodejs20.x'),
    });
    expect(checkRuntime('azure-functions-consumption', 'Node|24', READ_ON).message).toContain('known: Node|22, Node|20');
  });

  it('warns on a Preview runtime (Node 24 on Flex Consumption), naming the GA one', () => {
    expect(checkRuntime('azure-functions-flex', '24', READ_ON)).toMatchObject({
      level: 'warn',
      message: expect.stringMatching(/Preview.*use 22/),
    });
  });
});

describe('no Node 20 runtime in infra or the build', () => {
  const files = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile() && /\.(ts|mjs|json|yaml)$/.test(e.name))
      .map((e) => join(e.parentPath, e.name));
  const NODE_20 = /nodejs20|Node\|20|['"]node20['"]|version: '20'|engines: \{ node: '(>=)?20'/;

  it('names no Node 20 runtime id, esbuild target or engines in infra/, scripts/ or the stack files', () => {
    const sources = [
      ...files('infra'),
      ...files('scripts'),
      ...readdirSync(ROOT)
        .filter((f) => /^Pulumi\..*\.yaml$/.test(f))
        .map((f) => join(ROOT, f)),
    ];
    expect(sources.length).toBeGreaterThan(10);
    const hits = sources.filter((f) => NODE_20.test(readFileSync(f, 'utf8'))).map((f) => f.slice(ROOT.length + 1));
    expect(hits).toEqual([]);
  });
});
