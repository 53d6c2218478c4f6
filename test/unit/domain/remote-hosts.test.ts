import { describe, expect, it } from 'vitest';
import { cloudIngestSettings } from '../../../shared/app/ingest-trigger.js';
import { LeaseConfigError } from '../../../shared/domain/errors.js';
import { addressPatternProblem, hostMatches, parseHostPatterns, splitList } from '../../../shared/domain/remote-hosts.js';
import { ENV, parseRuntimeConfig } from '../../../shared/domain/runtime-config.js';

describe('remote hosts > the allow-list of hosts', () => {
  it('normalises hosts, wildcards and IP literals', () => {
    expect(parseHostPatterns(splitList(' Example.COM, *.blob.core.windows.net  10.0.0.1 [::1] earth-search.aws.element84.com.'))).toEqual({
      hosts: ['example.com', '*.blob.core.windows.net', '10.0.0.1', '[::1]', 'earth-search.aws.element84.com'],
      problems: [],
    });
  });

  it.each([
    ['example.com:8443', 'names a port'],
    ['https://example.com', 'is not a host name'],
    ['example.com/items', 'is not a host name'],
    ['user@example.com', 'is not a host name'],
    ['*.com', 'whole top-level domain'],
    ['*.10.0.0.1', 'before an IP address'],
    ['ex*ample.com', 'is not a host name'],
    ['::1', 'without brackets'],
  ])('refuses %s (%s), naming the entry and what to give instead', (entry, why) => {
    const { hosts, problems } = parseHostPatterns([entry]);
    expect(hosts).toEqual([]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(JSON.stringify(entry));
    expect(problems[0]).toContain(why);
    expect(problems[0]).toContain('*.example.com');
  });

  it('matches a host exactly, and *. any host below the domain (never the domain itself, nor a look-alike)', () => {
    const hosts = parseHostPatterns(['stac.example.com', '*.example.org']).hosts;
    expect(hostMatches('STAC.example.com', hosts)).toBe(true);
    expect(hostMatches('stac.example.com.', hosts)).toBe(true);
    expect(hostMatches('x.stac.example.com', hosts)).toBe(false);
    expect(hostMatches('a.b.example.org', hosts)).toBe(true);
    expect(hostMatches('example.org', hosts)).toBe(false);
    expect(hostMatches('evilexample.org', hosts)).toBe(false);
    expect(hostMatches('example.org.evil.net', hosts)).toBe(false);
  });
});

describe('remote hosts > the private-address opt-in', () => {
  it.each(['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8', '::ffff:127.0.0.1', '192.168.0.0/16'])('accepts %s', (entry) => {
    expect(addressPatternProblem(entry)).toBeUndefined();
  });
  it.each(['localhost', '127.0.0.256', '10.0.0.0/33', '::1/129', '1::2::3', '10.0.0.0/8/1', ''])('refuses %j', (entry) => {
    expect(addressPatternProblem(entry)).toContain('is not an IP address or a CIDR block');
  });
});

describe('remote hosts > the function environment', () => {
  const base = {
    [ENV.platform]: 'aws-lambda',
    [ENV.claimsTable]: 'claims',
    [ENV.sourceBucket]: 'sources',
    [ENV.outputBucket]: 'outputs',
    [ENV.tileQueue]: 'tiles',
    [ENV.functionTimeoutSeconds]: '900',
  };

  it('unset: any public host and nothing private; set: what the ingest settings carry', () => {
    const none = parseRuntimeConfig(base);
    expect(cloudIngestSettings(none)).toMatchObject({ allowedHosts: undefined, allowPrivateAddresses: undefined });
    const set = parseRuntimeConfig({
      ...base,
      [ENV.ingestAllowedHosts]: 'stac.example.com,*.Example.org',
      [ENV.ingestAllowPrivateAddresses]: '127.0.0.1',
    });
    expect(cloudIngestSettings(set)).toMatchObject({
      allowedHosts: ['stac.example.com', '*.example.org'],
      allowPrivateAddresses: ['127.0.0.1'],
    });
  });

  it('a bad entry stops the function at start-up, naming the variable', () => {
    expect(() => parseRuntimeConfig({ ...base, [ENV.ingestAllowedHosts]: 'example.com:443' })).toThrow(LeaseConfigError);
    expect(() => parseRuntimeConfig({ ...base, [ENV.ingestAllowedHosts]: 'example.com:443' })).toThrow(/TESSERA_INGEST_ALLOWED_HOSTS/);
    expect(() => parseRuntimeConfig({ ...base, [ENV.ingestAllowPrivateAddresses]: 'localhost' })).toThrow(
      /TESSERA_INGEST_ALLOW_PRIVATE_ADDRESSES: "localhost" is not an IP address/,
    );
  });
});
