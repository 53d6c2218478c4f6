import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../shared/domain/canonical-json.js';
import { codeVersion } from '../../../shared/domain/code-version.js';
import { InvalidEventError, InvalidParamsError } from '../../../shared/domain/errors.js';
import { outputKeys, repairJobKey, sceneKey, tileJobKey } from '../../../shared/domain/job-key.js';
import { decodeEventKey } from '../../../shared/domain/object-key.js';

const params = { pipeline: 'ndvi-tiler', version: '3.2.0', tile_px: 512, expression: '(B08 - B04) / (B08 + B04)' };
const src = { bucket: 'sentinel-scenes', key: 'L2A/T31UDQ/B08.tif', versionToken: '9b2cf5a1-3' };

describe('decodeEventKey', () => {
  it.each([
    ['L2A/T31UDQ%2FB08.tif', 'L2A/T31UDQ/B08.tif'],
    ['my+scene.tif', 'my scene.tif'],
    ['a%2Bb.tif', 'a+b.tif'],
    ['Z%C3%BCrich/%E6%97%A5.tif', 'Zürich/日.tif'],
    ['plain/key.tif', 'plain/key.tif'],
  ])('decodes %j to %j', (raw, decoded) => {
    expect(decodeEventKey(raw)).toBe(decoded);
  });

  it('refuses broken percent-encoding with a typed error', () => {
    expect(() => decodeEventKey('bad%E0%A4%A.tif')).toThrow(InvalidEventError);
  });
});

describe('sceneKey', () => {
  it('is 64 hex characters and stable for the same inputs', () => {
    const k = sceneKey(src, params);
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    expect(sceneKey({ ...src }, { ...params })).toBe(k);
  });

  it('matches the design notes: sha256 of bucket, key, version and canonical params (with the code version) joined by newlines', async () => {
    const { createHash } = await import('node:crypto');
    const withCode = { ...params, code_version: codeVersion() };
    const material = ['sentinel-scenes', 'L2A/T31UDQ/B08.tif', '9b2cf5a1-3', canonicalJson(withCode)].join('\n');
    expect(sceneKey(src, params)).toBe(createHash('sha256').update(material).digest('hex'));
  });

  it('binds the running build by default, and changes with the code version', () => {
    expect(sceneKey(src, params)).toBe(sceneKey(src, params, codeVersion()));
    expect(sceneKey(src, params, '0.1.0+0000000000000000')).not.toBe(sceneKey(src, params));
  });

  it('refuses params that set the code version themselves (it comes from the build)', () => {
    expect(() => sceneKey(src, { ...params, code_version: codeVersion() })).toThrow(/code_version is set from the build/);
  });

  it('gives the same key for the encoded and the decoded event key', () => {
    expect(sceneKey({ ...src, key: decodeEventKey('L2A/T31UDQ%2FB08.tif') }, params)).toBe(sceneKey(src, params));
  });

  it('ignores the order of keys in params', () => {
    const reordered = { expression: params.expression, tile_px: 512, version: '3.2.0', pipeline: 'ndvi-tiler' };
    expect(sceneKey(src, reordered)).toBe(sceneKey(src, params));
  });

  it.each([
    ['the pipeline version', { ...params, version: '3.2.1' }],
    ['a processing parameter', { ...params, tile_px: 256 }],
  ])('changes when %s changes', (_what, changed) => {
    expect(sceneKey(src, changed)).not.toBe(sceneKey(src, params));
  });

  it.each([
    ['bucket', { ...src, bucket: 'other' }],
    ['key', { ...src, key: 'L2A/T31UDQ/B04.tif' }],
    ['version token', { ...src, versionToken: '9b2cf5a1-4' }],
  ])('changes when the source %s changes', (_what, changed) => {
    expect(sceneKey(changed, params)).not.toBe(sceneKey(src, params));
  });

  it('changes every tile job key on a version bump', () => {
    const a = sceneKey(src, params);
    const b = sceneKey(src, { ...params, version: '4.0.0' });
    for (let row = 0; row < 3; row++)
      for (let col = 0; col < 3; col++) expect(tileJobKey(a, { row, col })).not.toBe(tileJobKey(b, { row, col }));
  });

  it.each([
    ['no pipeline', { version: '1' }],
    ['no version', { pipeline: 'p' }],
    ['NaN', { ...params, gain: Number.NaN }],
    ['Infinity', { ...params, gain: Number.POSITIVE_INFINITY }],
    ['undefined', { ...params, gain: undefined }],
    ['a function', { ...params, gain: () => 1 }],
    ['a Date', { ...params, when: new Date(0) }],
    ['a bigint', { ...params, n: 10n }],
  ])('refuses params with %s', (_what, bad) => {
    expect(() => sceneKey(src, bad as never)).toThrow(InvalidParamsError);
  });

  it('refuses a missing version token or an invalid key', () => {
    expect(() => sceneKey({ ...src, versionToken: '' }, params)).toThrow(InvalidEventError);
    expect(() => sceneKey({ ...src, key: '../x.tif' }, params)).toThrow(/invalid/);
  });
});

describe('canonicalJson', () => {
  it.each([
    [{ b: 1, a: 2 }, '{"a":2,"b":1}'],
    [{ x: 0.1, y: 1.0, z: -0, e: 1e21, s: 1e-7 }, '{"e":1e+21,"s":1e-7,"x":0.1,"y":1,"z":0}'],
    [{ n: { d: [3, 'é', null, true] } }, '{"n":{"d":[3,"é",null,true]}}'],
  ])('serialises %j canonically', (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it('gives one form for floats however they were produced', () => {
    expect(canonicalJson({ v: 0.1 + 0.2 })).toBe('{"v":0.30000000000000004}');
    expect(canonicalJson({ v: Number.parseFloat('0.30000000000000004') })).toBe('{"v":0.30000000000000004}');
  });
});

describe('tile and output keys', () => {
  it('are deterministic, carry no time or randomness, and depend on the window', () => {
    const s = sceneKey(src, params);
    expect(outputKeys.tile(s, { row: 3, col: 7 })).toBe(`tiles/${s}/3_7.tif`);
    expect(tileJobKey(s, { row: 3, col: 7 })).toBe(tileJobKey(s, { row: 3, col: 7 }));
    expect(tileJobKey(s, { row: 3, col: 7 })).not.toBe(tileJobKey(s, { row: 7, col: 3 }));
    expect(repairJobKey(tileJobKey(s, { row: 0, col: 0 }), '"etag"')).not.toBe(tileJobKey(s, { row: 0, col: 0 }));
  });
});
