import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  azureRetryVisibilitySec,
  CONFIG_KEYS,
  type ConfigKey,
  parseStackConfig,
  type StackConfig,
  StackConfigError,
} from '../../infra/common/config.js';
import { OUTPUT_PREFIXES, outputPrefixesMatchDomain } from '../../infra/common/environment.js';
import { azureStorageAccountName, gcpServiceAccountId } from '../../infra/common/naming.js';
import { archivesFor, MissingArchiveError } from '../../infra/common/packaging.js';
import { gcpLabels } from '../../infra/common/tags.js';
import { DEFAULT_PARAMS } from '../../shared/domain/runtime-config.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { checkStackFile, EXAMPLE_STACK_FILES, loadStackFile } from './stack-files.js';

const ctx = { stack: 'test-stack', defaultArchiveDir: '/repo/dist' };
const aws = { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1' };
const gcp = { 'tessera:cloud': 'gcp', 'tessera:region': 'europe-west1', 'gcp:region': 'europe-west1', 'gcp:project': 'p' };
const azure = { 'tessera:cloud': 'azure', 'tessera:region': 'westeurope', 'azure-native:location': 'westeurope' };

function problems(values: Record<string, string>): readonly string[] {
  try {
    parseStackConfig(values, ctx);
  } catch (e) {
    if (e instanceof StackConfigError) return e.problems;
    throw e;
  }
  throw new Error('the configuration was accepted');
}

describe('stack configuration (infra/common/config.ts)', () => {
  it.each(EXAMPLE_STACK_FILES)('accepts the example stack %s', (file) => {
    const cfg: StackConfig = checkStackFile(file);
    expect(`${cfg.cloud}-${cfg.region}`).toBe(loadStackFile(file).stack);
  });

  it('fills every default from the ceiling table when a stack sets only cloud and region', () => {
    expect(parseStackConfig(aws, ctx)).toMatchObject({
      platform: 'aws-lambda',
      lease: { functionTimeoutSec: 900, ceilingSec: 900, leaseSec: 1200, visibilityTimeoutSec: 5400 },
      memoryMb: 2048,
      // AWS's advice for a queue feeding Lambda: at least 5 receives, so a throttled receive does not dead-letter.
      maxReceiveCount: 5,
      source: { prefix: 'scenes/', suffix: '.tif' },
      retentionSec: 604_800,
      tileQueueVisibilitySec: 5400,
      tileMaxConcurrency: 100,
      archiveDir: '/repo/dist',
    });
    expect(parseStackConfig(gcp, ctx)).toMatchObject({
      platform: 'gcf2-event',
      tileTrigger: 'event',
      maxReceiveCount: 5,
      claimsCollection: 'claims',
      ackDeadlineSec: 600,
    });
    expect(parseStackConfig(gcp, ctx).lease).toMatchObject({ functionTimeoutSec: 540, leaseSec: 840 });
    expect(parseStackConfig({ ...gcp, 'tessera:gcpTileTrigger': 'http' }, ctx).lease).toMatchObject({
      functionTimeoutSec: 3600,
      leaseSec: 3900,
    });
    expect(parseStackConfig(azure, ctx)).toMatchObject({
      platform: 'azure-consumption',
      memoryMb: 1536,
      maxReceiveCount: 5,
      retryVisibilitySec: 330,
    });
    expect(parseStackConfig(azure, ctx).lease).toMatchObject({ functionTimeoutSec: 600, leaseSec: 900 });
    expect(parseStackConfig({ ...azure, 'tessera:azurePlan': 'flex' }, ctx).lease).toMatchObject({
      functionTimeoutSec: 1800,
      leaseSec: 2100,
    });
  });

  it('builds the processing parameters from pipelineVersion, tilePx and expression', () => {
    const cfg = parseStackConfig(
      { ...aws, 'tessera:pipelineVersion': '2.1.0', 'tessera:tilePx': '256', 'tessera:expression': 'B08 - B04' },
      ctx,
    );
    expect(cfg.params).toMatchObject({ pipeline: 'ndvi-tiler', version: '2.1.0', tile_px: 256, expression: 'B08 - B04' });
  });

  it('takes the output profile from compression and compressionLevel; a codec alone takes its own default level', () => {
    const output = (extra: Record<string, string>) => parseStackConfig({ ...aws, ...extra }, ctx).params.output;
    expect(output({ 'tessera:compression': 'ZSTD', 'tessera:compressionLevel': '3' })).toMatchObject({ compression: 'ZSTD', level: 3 });
    expect(output({ 'tessera:compression': 'DEFLATE' })).toMatchObject({ compression: 'DEFLATE' });
    expect(tilingParams({ ...DEFAULT_PARAMS, output: output({ 'tessera:compression': 'DEFLATE' }) }).level).toBe(6);
    expect(output({})).toEqual(DEFAULT_PARAMS.output);
    expect(problems({ ...aws, 'tessera:compression': 'LZW' })).toEqual([
      'tessera:compression must be one of DEFLATE, ZSTD, NONE, got "LZW"; e.g. `pulumi config set tessera:compression DEFLATE`',
    ]);
    expect(problems({ ...aws, 'tessera:compression': 'DEFLATE', 'tessera:compressionLevel': '12' })).toEqual([
      expect.stringMatching(/tessera:compressionLevel\): params: output.level \(DEFLATE\) must be between 1 and 9, got 12/),
    ]);
  });

  it('suggests the key a typo meant', () => {
    expect(problems({ ...aws, 'tessera:leaseSecond': '1200' })).toEqual([
      'tessera:leaseSecond is not a Tessera setting; did you mean tessera:leaseSeconds? (known keys: docs/deploy.md)',
    ]);
  });

  it('reports every problem at once, each naming its key', () => {
    const found = problems({
      'tessera:cloud': 'aws',
      'tessera:region': 'eu-west-1',
      'aws:region': 'us-east-1',
      'tessera:memoryMb': '20000',
      'tessera:alertEmail': 'nobody',
      'tessera:tilePx': '8',
      'tessera:azurePlan': 'flex',
    });
    expect(found).toHaveLength(5);
    expect(found.join('\n')).toMatch(/aws:region is "us-east-1" but tessera:region is "eu-west-1"/);
    expect(found.join('\n')).toMatch(/tessera:memoryMb 20000 exceeds the AWS Lambda maximum of 10240 MB/);
    expect(found.join('\n')).toMatch(/tessera:alertEmail must be an e-mail address/);
    expect(found.join('\n')).toMatch(/tile_px must be between 16 and 8192/);
    expect(found.join('\n')).toMatch(/tessera:azurePlan applies to azure stacks only/);
  });

  it('requires the cloud and the region, and refuses an unknown cloud', () => {
    expect(problems({})).toEqual(
      expect.arrayContaining([expect.stringContaining('tessera:cloud is required'), expect.stringContaining('tessera:region is required')]),
    );
    expect(problems({ ...aws, 'tessera:cloud': 'oci' })).toEqual([
      expect.stringContaining('tessera:cloud must be one of aws, gcp, azure, got "oci"'),
    ]);
  });

  it('refuses numbers that are not whole seconds', () => {
    expect(problems({ ...aws, 'tessera:leaseSeconds': '1200s' })).toEqual([
      expect.stringContaining('tessera:leaseSeconds must be a whole number'),
    ]);
    expect(problems({ ...aws, 'tessera:functionTimeoutSeconds': '1.5' })).toEqual([
      expect.stringContaining('tessera:functionTimeoutSeconds must be a whole number'),
    ]);
  });

  it('refuses a lease at or below the ceiling with the least lease that works and how to set it', () => {
    const [message] = problems({ ...aws, 'tessera:leaseSeconds': '900' });
    expect(message).toBe(
      'tessera:leaseSeconds: AWS Lambda: lease 900 s must be longer than the platform ceiling of 900 s, or a worker still running could lose its job to a redelivery; ' +
        'set the lease to at least 901 s (default 1200 s). Change it with `pulumi config set tessera:leaseSeconds <seconds>` or remove it to use the default',
    );
    // Flex has no ceiling: the configured timeout is what the lease must exceed.
    expect(
      problems({ ...azure, 'tessera:azurePlan': 'flex', 'tessera:functionTimeoutSeconds': '3600', 'tessera:leaseSeconds': '3600' })[0],
    ).toContain('at least 3601 s');
  });

  it('refuses the Azure premium plan, which this program does not deploy, and says what to use', () => {
    expect(problems({ ...azure, 'tessera:azurePlan': 'premium' })).toEqual([
      expect.stringContaining('tessera:azurePlan must be one of consumption, flex'),
      expect.stringContaining('use flex for jobs longer than 10 minutes'),
    ]);
  });

  it('keeps maxReceiveCount within what each queue allows', () => {
    expect(problems({ ...gcp, 'tessera:maxReceiveCount': '4' })[0]).toContain('from 5 to 100');
    expect(problems({ ...azure, 'tessera:maxReceiveCount': '2' })[0]).toContain('from 3 to 100');
    expect(parseStackConfig({ ...aws, 'tessera:maxReceiveCount': '1' }, ctx).maxReceiveCount).toBe(1);
  });

  it('refuses a retention no longer than the lease, a source prefix inside the outputs, and a GCP stack without a project', () => {
    expect(problems({ ...aws, 'tessera:retentionSeconds': '1200' })[0]).toContain('must be longer than the lease of 1200 s');
    expect(problems({ ...aws, 'tessera:sourcePrefix': 'tiles/' })[0]).toContain('collides with an output prefix');
    const { 'gcp:project': _p, ...noProject } = gcp;
    expect(problems(noProject)).toEqual([expect.stringContaining('gcp:project is not set')]);
  });

  it('documents every key it reads', () => {
    const keys = Object.keys(CONFIG_KEYS) as ConfigKey[];
    expect(keys).toContain('leaseSeconds');
    for (const k of keys) expect(CONFIG_KEYS[k].length, k).toBeGreaterThan(10);
  });

  it('spaces Azure retries so that the last ones come after a dead attempt’s lease has ended', () => {
    expect(azureRetryVisibilitySec(900, 600, 5)).toBe(330);
    expect(azureRetryVisibilitySec(2100, 600, 3)).toBe(1501);
    for (const [lease, timeout, n] of [
      [900, 600, 5],
      [2100, 600, 3],
      [7200, 1800, 4],
    ] as const) {
      expect((n - 2) * azureRetryVisibilitySec(lease, timeout, n)).toBeGreaterThan(lease - timeout);
    }
  });
});

describe('names, tags and packaging (infra/common)', () => {
  it('derives a valid, stable Azure storage account name per organization, project and stack', () => {
    const name = azureStorageAccountName('org', 'tessera', 'azure-westeurope');
    expect(name).toMatch(/^[a-z0-9]{3,24}$/);
    expect(azureStorageAccountName('org', 'tessera', 'azure-westeurope')).toBe(name);
    expect(azureStorageAccountName('org', 'tessera', 'azure-northeurope')).not.toBe(name);
  });

  it('keeps GCP service account ids within 6-30 characters for any stack name', () => {
    for (const stack of ['gcp-europe-west1', 'gcp-northamerica-northeast1-production-blue']) {
      for (const role of ['scene', 'tile', 'mosaic', 'trigger']) {
        expect(gcpServiceAccountId(stack, role)).toMatch(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/);
      }
    }
  });

  it('reduces tags to valid GCP labels', () => {
    expect(gcpLabels({ project: 'tessera', stack: 'GCP.Europe_West1', 'managed-by': 'pulumi' })).toEqual({
      project: 'tessera',
      stack: 'gcp-europe-west1',
      'managed-by': 'pulumi',
    });
  });

  it('uses the output prefixes the domain writes (tiles/, scenes/, mosaics/)', () => {
    expect(outputPrefixesMatchDomain()).toBe(true);
    expect(OUTPUT_PREFIXES).toEqual({ tiles: 'tiles/', scenes: 'scenes/', mosaics: 'mosaics/' });
  });

  it('names every missing archive and says to build them', () => {
    const empty = mkdtempSync(join(tmpdir(), 'tessera-no-archives-'));
    expect(() => archivesFor('aws', empty)).toThrow(MissingArchiveError);
    expect(() => archivesFor('aws', empty)).toThrow(
      /scene\.zip, .*tile\.zip, .*mosaic\.zip, .*ingest\.zip, .*reconcile\.zip, .*stream\.zip; run npm run build:functions first/,
    );
  });
});
