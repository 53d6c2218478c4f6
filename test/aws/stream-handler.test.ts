import { randomBytes } from 'node:crypto';
import { PutBucketNotificationConfigurationCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createStreamHandler } from '../../functions/aws/handlers/stream.handler.js';
import { streamKeys } from '../../shared/domain/key-layout.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { requireEndpoints } from '../support/global-setup.js';
import { expectNoAccessDenied } from './iam.js';
import {
  asFunction,
  createQueue,
  createTestRuntime,
  createTestStack,
  drain,
  TEST_SOURCE_PREFIX,
  type TestQueue,
  type TestRuntime,
  type TestStack,
} from './stack.js';

/**
 * The AWS stream function (functions/aws/handlers/stream.handler.ts) driven as the SQS event source mapping drives it,
 * on a stack shaped like infra/'s: the source bucket notifies the scene queue of `incoming/` and the stream queue of
 * `streams/`, the stream queue has its DLQ, the function's S3 requests are signed by the `stream` role's IAM user with
 * the policy the program deploys, and its batches go to the real PostgreSQL + PostGIS the suite starts.
 */
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const db = new pg.Pool({ connectionString: postgres.url, max: 2 });

let stack: TestStack;
let rt: TestRuntime;
let streamQueue: TestQueue;
let streamDlq: TestQueue;
const logs: string[] = [];
/** A vessel id of this run alone: the records of this file never meet another file's in the shared table. */
const vessel = `aws-${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  stack = await createTestStack({ enforced: true });
  const queues = await createQueue('streams', { maxReceiveCount: 3 }, stack.sqs);
  streamQueue = queues.queue;
  streamDlq = queues.dlq as TestQueue;
  await stack.s3.send(
    new PutBucketNotificationConfigurationCommand({
      Bucket: stack.sourceBucket,
      NotificationConfiguration: {
        QueueConfigurations: [
          {
            QueueArn: stack.scenes.arn,
            Events: ['s3:ObjectCreated:*'],
            Filter: { Key: { FilterRules: [{ Name: 'prefix', Value: TEST_SOURCE_PREFIX }] } },
          },
          {
            QueueArn: streamQueue.arn,
            Events: ['s3:ObjectCreated:*'],
            Filter: { Key: { FilterRules: [{ Name: 'prefix', Value: streamKeys.root() }] } },
          },
        ],
      },
    }),
  );
  // As infra/ sets it on the stream function: its own queue's DLQ and count, and the PostGIS URL (here in the clear).
  const env = { ...stack.env, [ENV.deadLetterQueue]: streamDlq.url, [ENV.maxDeliveries]: '3', [ENV.featureSink]: postgres.url };
  rt = createTestRuntime({ env }, stack.clients(), { logs });
});
afterEach(expectNoAccessDenied);
afterAll(() => db.end());

const line = (i: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ vessel, time: new Date(Date.UTC(2025, 5, 1, 12, 0, i)).toISOString(), lon: 4 + i / 100, lat: 55, ...extra });

async function put(key: string, body: string | Uint8Array): Promise<void> {
  await stack.s3.send(new PutObjectCommand({ Bucket: stack.sourceBucket, Key: key, Body: body }));
}

async function batchRows(): Promise<{ source_key: string; records: number; rejects: number }[]> {
  const r = await db.query<{ source_key: string; records: number; rejects: number }>(
    'SELECT source_key, records, rejects FROM feature_batches WHERE source_bucket = $1 ORDER BY source_key',
    [stack.sourceBucket],
  );
  return r.rows;
}

async function recordsOfVessel(): Promise<number> {
  const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM feature_records WHERE vessel = $1', [vessel]);
  return r.rows[0]?.n ?? -1;
}

describe('the AWS stream function', () => {
  it('inserts each batch object under streams/ once, a record two objects carry once, and stops a duplicate notification at its claim', async () => {
    await put(streamKeys.batch('ais/part-0001.ndjson'), [line(1), line(2), '{"vessel":"x","time":0}', line(3)].join('\n'));
    await put(streamKeys.batch('ais/part-0002.ndjson'), [line(3), line(4)].join('\n'));
    const handler = asFunction('stream', createStreamHandler(rt));
    const first = await drain(streamQueue, handler);
    // Two notifications, and the s3:TestEvent S3 (and moto) sends when the configuration is set, which the handler acks.
    const bodies = first.events.flatMap((e) => e.Records.map((r) => r.body));
    expect(bodies.filter((b) => b.includes('ObjectCreated'))).toHaveLength(2);
    expect(await batchRows()).toEqual([
      { source_key: streamKeys.batch('ais/part-0001.ndjson'), records: 3, rejects: 1 },
      { source_key: streamKeys.batch('ais/part-0002.ndjson'), records: 2, rejects: 0 },
    ]);
    expect(await recordsOfVessel()).toBe(4);
    // The notification of the first object, delivered again (S3 delivers at least once): done at its claim.
    const notification = bodies.find((b) => b.includes('part-0001')) as string;
    await stack.sqs.send(new SendMessageCommand({ QueueUrl: streamQueue.url, MessageBody: notification }));
    await drain(streamQueue, handler);
    expect(await recordsOfVessel()).toBe(4);
    const counters = rt.backend.telemetry.counters();
    expect(counters['batch-inserted']).toBe(2);
    expect(counters['records-duplicate']).toBe(1);
    expect(counters['claim-rejected']).toBe(1);
  });

  it('dead-letters an object that is not a batch at its first delivery, in the stream queue DLQ', async () => {
    await put(streamKeys.batch('ais/broken.ndjson.gz'), new Uint8Array([0x1f, 0x8b, 0x08, 0x00, 9, 9, 9]));
    const r = await drain(streamQueue, asFunction('stream', createStreamHandler(rt)));
    expect(r.responses.flatMap((x) => x.batchItemFailures)).toEqual([]);
    const dead = await stack.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: streamDlq.url, MaxNumberOfMessages: 10, MessageAttributeNames: ['All'] }),
    );
    expect(dead.Messages).toHaveLength(1);
    expect(dead.Messages?.[0]?.Body).toContain('broken.ndjson.gz');
    expect(logs.some((l) => l.includes('"event":"poison-batch"'))).toBe(true);
    expect((await batchRows()).map((b) => b.source_key)).not.toContain(streamKeys.batch('ais/broken.ndjson.gz'));
  });

  it('ignores an object outside streams/ that reaches it anyway, and reads nothing of it', async () => {
    const before = rt.backend.telemetry.counters()['event-ignored'];
    const outside = JSON.stringify({
      Records: [
        {
          eventSource: 'aws:s3',
          eventName: 'ObjectCreated:Put',
          s3: { bucket: { name: stack.sourceBucket }, object: { key: `${TEST_SOURCE_PREFIX}scene.tif`, eTag: '"0"' } },
        },
      ],
    });
    await stack.sqs.send(new SendMessageCommand({ QueueUrl: streamQueue.url, MessageBody: outside }));
    await drain(streamQueue, asFunction('stream', createStreamHandler(rt)));
    expect(rt.backend.telemetry.counters()['event-ignored']).toBe(before + 1);
  });
});
