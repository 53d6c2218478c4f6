import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../../shared/domain/canonical-json.js';
import { InvalidEventError, InvalidParamsError } from '../../../shared/domain/errors.js';
import {
  batchEventBody,
  batchJobKey,
  canonicalRecordJson,
  DEFAULT_BATCH_PARAMS,
  featureBatchParams,
  isReject,
  type PositionRecord,
  parseBatchEvent,
  type RecordReject,
  readPositionRecord,
} from '../../../shared/domain/feature-batch.js';
import { sceneKey } from '../../../shared/domain/job-key.js';
import { accessOf, areaOfKey, FUNCTION_ROLES, ROLE_ACCESS, streamKeys } from '../../../shared/domain/key-layout.js';

const SOURCE = { bucket: 'landing', key: 'streams/ais/part-0001.ndjson', versionToken: '3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY' };
const read = (text: string): PositionRecord | RecordReject => readPositionRecord(text, 7, 'ais-positions');
const position = (text: string): PositionRecord => {
  const r = read(text);
  if (isReject(r)) throw new Error(`expected a position, got ${r.reason}: ${r.detail}`);
  return r;
};

describe('batchJobKey', () => {
  it('is one key per object version and parameters, and never a scene key of the same object', () => {
    const key = batchJobKey(SOURCE, DEFAULT_BATCH_PARAMS);
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(batchJobKey({ ...SOURCE }, { ...DEFAULT_BATCH_PARAMS })).toBe(key);
    expect(batchJobKey({ ...SOURCE, versionToken: 'other' }, DEFAULT_BATCH_PARAMS)).not.toBe(key);
    expect(batchJobKey({ ...SOURCE, key: 'streams/ais/part-0002.ndjson' }, DEFAULT_BATCH_PARAMS)).not.toBe(key);
    expect(batchJobKey(SOURCE, { ...DEFAULT_BATCH_PARAMS, version: '2' })).not.toBe(key);
    expect(batchJobKey(SOURCE, { ...DEFAULT_BATCH_PARAMS, h3_resolution: 8 })).not.toBe(key);
    expect(sceneKey(SOURCE, { pipeline: DEFAULT_BATCH_PARAMS.pipeline, version: DEFAULT_BATCH_PARAMS.version })).not.toBe(key);
  });

  it('refuses an object without a version token and parameters that cannot key a batch, saying what to change', () => {
    expect(() => batchJobKey({ ...SOURCE, versionToken: '' }, DEFAULT_BATCH_PARAMS)).toThrow(InvalidEventError);
    expect(() => batchJobKey({ ...SOURCE, key: '/abs' }, DEFAULT_BATCH_PARAMS)).toThrow(/starts with a slash/);
    expect(() => featureBatchParams({ ...DEFAULT_BATCH_PARAMS, h3_resolution: 16 })).toThrow(/0 to 15/);
    expect(() => featureBatchParams({ ...DEFAULT_BATCH_PARAMS, pipeline: 'AIS Positions' })).toThrow(InvalidParamsError);
    expect(() => featureBatchParams({ ...DEFAULT_BATCH_PARAMS, colour: 'red' })).toThrow(/unknown fields colour/);
  });

  it('round-trips the neutral batch event, and calls anything else poison', () => {
    expect(parseBatchEvent(batchEventBody(SOURCE))).toEqual({ kind: 'feature-batch', source: SOURCE });
    expect(() => parseBatchEvent('{"kind":"tile"}')).toThrow(InvalidEventError);
    expect(() => parseBatchEvent('not json')).toThrow(/not JSON/);
  });
});

describe('readPositionRecord', () => {
  it('reads a position with an ISO time, epoch milliseconds, mmsi for vessel, and no speed', () => {
    expect(position('{"vessel":219000001,"time":"2025-06-01T12:00:00Z","lon":4.5,"lat":55.1,"speed":11.2}')).toMatchObject({
      vessel: '219000001',
      timeMs: Date.UTC(2025, 5, 1, 12),
      lon: 4.5,
      lat: 55.1,
      speed: 11.2,
      line: 7,
      givenId: undefined,
    });
    expect(position('{"mmsi":"abc","time":1748779200000,"lon":-180,"lat":90}')).toMatchObject({ vessel: 'abc', speed: null });
    expect(position('{"vessel":1,"time":"2025-06-01T14:00:00+02:00","lon":0,"lat":0}').timeMs).toBe(Date.UTC(2025, 5, 1, 12));
  });

  it('gives a record one identity however it is spelled, and a given id the identity whatever the content', () => {
    const a = position('{"vessel":1,"time":"2025-06-01T12:00:00Z","lon":4.5,"lat":55.1,"speed":10}');
    const b = position('{ "speed" : 10.0, "lat":55.1, "lon":4.5, "time":"2025-06-01T12:00:00Z", "vessel":1 }');
    expect(b.recordId).toBe(a.recordId);
    // A different spelling of the time is a different record (the identity is the record, not its meaning).
    expect(position('{"vessel":1,"time":1748779200000,"lon":4.5,"lat":55.1,"speed":10}').recordId).not.toBe(a.recordId);
    const named = position('{"id":"r-1","vessel":1,"time":"2025-06-01T12:00:00Z","lon":4.5,"lat":55.1}');
    expect(position('{"id":"r-1","vessel":2,"time":"2025-06-02T12:00:00Z","lon":5,"lat":56}').recordId).toBe(named.recordId);
    expect(position('{"id":7,"vessel":2,"time":"2025-06-02T12:00:00Z","lon":5,"lat":56}').givenId).toBe('7');
    // Namespaced by the pipeline.
    expect(
      (readPositionRecord('{"id":"r-1","vessel":1,"time":1748779200000,"lon":0,"lat":0}', 1, 'other') as PositionRecord).recordId,
    ).not.toBe(named.recordId);
  });

  it('keeps the record ids it gave before the flat-record fast path: stored ids never change', () => {
    // Computed with canonicalJson and createHash before canonicalRecordJson and crypto.hash replaced them in this path.
    const ids = [
      '{"vessel":219000001,"time":"2025-06-01T12:00:00Z","lon":4.5,"lat":55.1,"speed":11.2}',
      '{"vessel":1,"time":1748779200000,"lon":-0,"lat":1e-7,"speed":0,"extra":{"b":[1,2,{"z":null}],"a":"\u00e9"},"Z":true,"é":false,"😀":"x"}',
      '{"id":"r-1","vessel":1,"time":"2025-06-01T12:00:00Z","lon":4.5,"lat":55.1}',
      '{"vessel":"a\\"b\\\\c\\n","time":1748779200000.5,"lon":179.999999,"lat":-89.5,"speed":null,"note":"\\u2028"}',
    ].map((text) => (readPositionRecord(text, 1, 'ais-positions') as PositionRecord).recordId);
    expect(ids).toEqual([
      '741c5d8baea7705d6407f6df4b61edf080278c8eb7eb329622f30d348829a6e1',
      '2f04eba2be423e3c158e15208b36178076088a305cb13b3e2a3ba106445bfa88',
      'e6de2ad372cdccb20e3936a949c6e92719a4a50551c53201693414d9b477a73d',
      '2c4651a056b7e1622778f83c89efe46a41b2872772c4d76507a2c64e40ed8d49',
    ]);
  });

  it('canonicalRecordJson is canonicalJson, on the fast path and off it, and refuses what canonicalJson refuses', () => {
    // Keys that sort differently by UTF-16 code unit than by code point or by number, values of every flat kind.
    const keys = ['vessel', 'time', 'lon', 'lat', 'Z', 'a', '_', 'é', '😀', '\uff61', '', 'a b', '10', '9', '__proto__', 'x"y'];
    const values: unknown[] = [0, -0, 1e21, 1e-7, 0.1, 123456789.123, -5e-324, 'x', 'é😀', '\u2028', '"\\', true, false, null];
    let seed = 7;
    // The LCG's high bits (its low bits repeat with a short period).
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return Math.floor((seed / 2147483648) * n);
    };
    for (let i = 0; i < 2000; i++) {
      const text = `{${Array.from({ length: 1 + rand(6) }, () => `${JSON.stringify(keys[rand(keys.length)])}:${JSON.stringify(values[rand(values.length)])}`).join(',')}}`;
      const parsed = JSON.parse(text) as Record<string, unknown>;
      expect(canonicalRecordJson(parsed), text).toBe(canonicalJson(parsed));
    }
    const nested = JSON.parse('{"b":{"y":[1,-0,{"k":"v"}],"x":2},"a":1}') as Record<string, unknown>;
    expect(canonicalRecordJson(nested)).toBe('{"a":1,"b":{"x":2,"y":[1,0,{"k":"v"}]}}');
    // A lone surrogate and a number JSON.parse made infinite have no canonical form: both paths refuse them.
    for (const text of ['{"a":"\\ud800"}', '{"a":1e999}']) {
      const parsed = JSON.parse(text) as Record<string, unknown>;
      expect(() => canonicalJson(parsed)).toThrow(InvalidParamsError);
      expect(() => canonicalRecordJson(parsed)).toThrow(InvalidParamsError);
    }
  });

  it.each([
    ['not JSON', 'AIVDM,1,1,,A,13u?et', 'unparsable'],
    ['an array', '[1,2]', 'not-an-object'],
    ['no vessel', '{"time":1748779200000,"lon":0,"lat":0}', 'no-vessel'],
    ['a vessel with NUL', '{"vessel":"a\\u0000","time":1748779200000,"lon":0,"lat":0}', 'no-vessel'],
    ['an id with NUL', '{"id":"a\\u0000","vessel":1,"time":1748779200000,"lon":0,"lat":0}', 'bad-id'],
    ['a fractional id', '{"id":1.5,"vessel":1,"time":1748779200000,"lon":0,"lat":0}', 'bad-id'],
    ['a local time', '{"vessel":1,"time":"2025-06-01T12:00:00","lon":0,"lat":0}', 'bad-time'],
    ['a time in seconds', '{"vessel":1,"time":1748779200,"lon":0,"lat":0}', 'bad-time'],
    ['no position', '{"vessel":1,"time":1748779200000,"speed":3}', 'no-position'],
    ['a position as text', '{"vessel":1,"time":1748779200000,"lon":"4.5","lat":"55"}', 'no-position'],
    ["AIS's 181/91", '{"vessel":1,"time":1748779200000,"lon":181,"lat":91}', 'out-of-range'],
    ['a latitude past the pole', '{"vessel":1,"time":1748779200000,"lon":0,"lat":-90.5}', 'out-of-range'],
    ['a negative speed', '{"vessel":1,"time":1748779200000,"lon":0,"lat":0,"speed":-1}', 'bad-speed'],
    ['an infinite speed', '{"id":"r-2","vessel":1,"time":1748779200000,"lon":0,"lat":0,"speed":1e999}', 'bad-speed'],
    ['a vessel with a lone surrogate', '{"id":"r-3","vessel":"a\\ud800","time":1748779200000,"lon":0,"lat":0}', 'no-vessel'],
    ['an id with a lone surrogate', '{"id":"\\udc00x","vessel":1,"time":1748779200000,"lon":0,"lat":0}', 'bad-id'],
    ['a field with a lone surrogate', '{"vessel":1,"time":1748779200000,"lon":0,"lat":0,"note":"\\ud800"}', 'unparsable'],
  ] as const)('rejects %s as %s, keeping its line and its start', (_what, text, reason) => {
    const r = read(text);
    expect(isReject(r) ? { reason: r.reason, line: r.line, excerpt: r.excerpt } : r).toEqual({
      reason,
      line: 7,
      excerpt: text.replaceAll('\u0000', '\\u0000'),
    });
  });

  it('keeps at most 200 characters of a rejected line', () => {
    const r = read(`x${'y'.repeat(500)}`) as RecordReject;
    expect(r.excerpt).toHaveLength(203);
  });
});

describe('the streams area of the key layout', () => {
  it('holds batch objects in the source store, read by the stream role alone, written by no function (the producer lands them)', () => {
    const key = streamKeys.batch('ais/2025/06/01/12/part-0001.ndjson');
    expect(areaOfKey('sources', key)).toBe('streams');
    expect(FUNCTION_ROLES.filter((r) => accessOf(r, 'streams').length > 0)).toEqual(['stream']);
    expect(accessOf('stream', 'streams')).toEqual(['read']);
    // The stream role touches nothing else: not the scenes, not the outputs.
    expect(ROLE_ACCESS.stream.map((g) => g.area)).toEqual(['streams']);
    expect(areaOfKey('sources', key, 'scenes/')).toBe('streams');
  });
});
