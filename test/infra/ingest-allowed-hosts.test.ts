import { describe, expect, it } from 'vitest';
import { parseStackConfig, StackConfigError } from '../../infra/common/config.js';
import { functionEnvironment } from '../../infra/common/environment.js';
import { ENV, parseRuntimeConfig } from '../../shared/domain/runtime-config.js';

// tessera:ingestAllowedHosts (docs/ingest.md, "Remote hrefs stay in their lane"; docs/deploy.md): checked with the
// rest of the stack, handed to every function as TESSERA_INGEST_ALLOWED_HOSTS, read back by the runtime as written.

const ctx = { stack: 'test-stack', defaultArchiveDir: '/repo/dist' };
const aws = { 'tessera:cloud': 'aws', 'tessera:region': 'eu-west-1', 'aws:region': 'eu-west-1' };
const resources = { claimsTable: 'claims', sourceBucket: 'sources', outputBucket: 'outputs', tileQueue: 'tiles', deadLetterQueue: 'dlq' };

function problems(values: Record<string, string>): readonly string[] {
  try {
    parseStackConfig(values, ctx);
  } catch (e) {
    if (e instanceof StackConfigError) return e.problems;
    throw e;
  }
  throw new Error('the configuration was accepted');
}

describe('tessera:ingestAllowedHosts', () => {
  it('unset: no variable, so the ingest function takes any public host; and no stack ever deploys the private-address opt-in', () => {
    const cfg = parseStackConfig(aws, ctx);
    expect(cfg.ingestAllowedHosts).toBeUndefined();
    const env = functionEnvironment(cfg, cfg.platform, 900, resources);
    expect(env[ENV.ingestAllowedHosts]).toBeUndefined();
    expect(env[ENV.ingestAllowPrivateAddresses]).toBeUndefined();
  });

  it('set: normalised, written to every function and read back by the runtime as the same list', () => {
    const cfg = parseStackConfig({ ...aws, 'tessera:ingestAllowedHosts': 'Earth-Search.aws.element84.com, *.blob.core.windows.net' }, ctx);
    expect(cfg.ingestAllowedHosts).toEqual(['earth-search.aws.element84.com', '*.blob.core.windows.net']);
    const env = functionEnvironment(cfg, cfg.platform, 900, resources) as Record<string, string>;
    expect(env[ENV.ingestAllowedHosts]).toBe('earth-search.aws.element84.com,*.blob.core.windows.net');
    expect(env[ENV.ingestAllowPrivateAddresses]).toBeUndefined();
    expect(parseRuntimeConfig(env).ingestAllowedHosts).toEqual(cfg.ingestAllowedHosts);
  });

  it('a bad entry, or a list naming no host, fails the preview naming the key', () => {
    const bad = problems({ ...aws, 'tessera:ingestAllowedHosts': 'stac.example.com:443,ok.example.com' });
    expect(bad).toHaveLength(1);
    expect(bad[0]).toMatch(/^tessera:ingestAllowedHosts: "stac\.example\.com:443" names a port/);
    expect(problems({ ...aws, 'tessera:ingestAllowedHosts': ' , ' })[0]).toContain('tessera:ingestAllowedHosts is set but names no host');
  });
});
