import type { S3EventRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { notificationOf, versionTokenOf } from '../../../functions/aws/handlers/scene.handler.js';
import { InvalidEventError } from '../../../shared/domain/errors.js';

const record = (object: Partial<S3EventRecord['s3']['object']>): S3EventRecord =>
  ({
    eventSource: 'aws:s3',
    eventName: 'ObjectCreated:Put',
    s3: { bucket: { name: 'b' }, object: { key: 'k.tif', size: 1, sequencer: '0', eTag: '', ...object } },
  }) as S3EventRecord;

describe('versionTokenOf', () => {
  it('prefers the versionId of a versioned bucket', () => {
    expect(versionTokenOf(record({ eTag: 'abc', versionId: '3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY' }))).toBe(
      '3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY',
    );
  });

  it('quotes the ETag as HeadObject returns it when there is no versionId (or S3 says "null")', () => {
    expect(versionTokenOf(record({ eTag: '9b2cf535f27731c974343645a3985328' }))).toBe('"9b2cf535f27731c974343645a3985328"');
    expect(versionTokenOf(record({ eTag: 'd41d8cd98f00b204e9800998ecf8427e-3', versionId: 'null' }))).toBe(
      '"d41d8cd98f00b204e9800998ecf8427e-3"',
    );
    expect(versionTokenOf(record({ eTag: '"already"' }))).toBe('"already"');
  });

  it('refuses a record with neither, as poison', () => {
    expect(() => versionTokenOf(record({ eTag: '' }))).toThrow(InvalidEventError);
  });
});

describe('notificationOf', () => {
  const s3Event = { Records: [record({ eTag: 'e' })] };

  it('reads S3 records directly and out of an SNS envelope', () => {
    expect(notificationOf(s3Event)).toEqual(s3Event.Records);
    expect(notificationOf({ Type: 'Notification', Message: JSON.stringify(s3Event) })).toEqual(s3Event.Records);
  });

  it("recognises S3's configuration test event", () => {
    expect(notificationOf({ Service: 'Amazon S3', Event: 's3:TestEvent', Bucket: 'b' })).toBe('test-event');
  });

  it.each([
    ['a string', 'hello'],
    ['an object without Records', { hello: 1 }],
    ['a record from another source', { Records: [{ eventSource: 'aws:sqs' }] }],
    ['an SNS envelope with a body that is not JSON', { Type: 'Notification', Message: 'not json' }],
  ])('refuses %s as poison', (_label, payload) => {
    expect(() => notificationOf(payload)).toThrow(InvalidEventError);
  });
});
