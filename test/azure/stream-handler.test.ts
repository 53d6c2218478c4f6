import { randomBytes, randomUUID } from 'node:crypto';
import avro from 'avsc';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { AzureRuntime } from '../../functions/azure/compose.js';
import { makeStreamHandler, type StreamEventResult } from '../../functions/azure/handlers/stream.handler.js';
import { streamKeys } from '../../shared/domain/key-layout.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshQueue } from './azurite.js';
import { blobCreatedEvent, invocationContext } from './functions-host.js';
import { type TestStack, testStack } from './stack.js';

/**
 * The Azure stream function (functions/azure/handlers/stream.handler.ts) as the queue trigger runs it for the
 * BlobCreated events Event Grid puts on the stream queue, on Azurite (Blob, Table claims, the poison queue), with an
 * Event Hubs Capture-shaped Avro blob, and the real PostgreSQL + PostGIS the suite starts.
 */
const postgres = requireEndpoints(inject('emulators'), 'postgres');
const blobEndpoint = () => requireEndpoints(inject('emulators'), 'azure').blob;
const db = new pg.Pool({ connectionString: postgres.url, max: 2 });
const vessel = `azure-${randomBytes(4).toString('hex')}`;
let stack: TestStack;
let rt: AzureRuntime;
let queueName: string;
let poison: Awaited<ReturnType<typeof freshQueue>>;

beforeAll(async () => {
  stack = await testStack();
  rt = stack.runtime('instance-1', { [ENV.featureSink]: postgres.url }).rt;
  poison = await freshQueue('streams');
  queueName = poison.queue.name.replace(/^azure-queue:/, '');
});
afterAll(() => db.end());

/** The Avro schema Event Hubs Capture writes (Microsoft's documentation); the event is `Body`. */
const CAPTURE = avro.Type.forSchema({
  type: 'record',
  name: 'EventData',
  namespace: 'Microsoft.ServiceBus.Messaging',
  fields: [
    { name: 'SequenceNumber', type: 'long' },
    { name: 'Offset', type: 'string' },
    { name: 'EnqueuedTimeUtc', type: 'string' },
    { name: 'SystemProperties', type: { type: 'map', values: ['long', 'double', 'string', 'bytes'] } },
    { name: 'Properties', type: { type: 'map', values: ['long', 'double', 'string', 'bytes', 'null'] } },
    { name: 'Body', type: ['null', 'bytes'] },
  ],
});

async function captureFile(bodies: readonly string[]): Promise<Uint8Array> {
  const encoder = new avro.streams.BlockEncoder(CAPTURE, { codec: 'deflate' });
  const chunks: Buffer[] = [];
  encoder.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise((resolve) => encoder.on('end', resolve));
  for (const [i, b] of bodies.entries()) {
    encoder.write({
      SequenceNumber: i,
      Offset: String(i),
      EnqueuedTimeUtc: '6/1/2025 12:00:00 PM',
      SystemProperties: {},
      Properties: {},
      Body: Buffer.from(b),
    });
  }
  encoder.end();
  await ended;
  return new Uint8Array(Buffer.concat(chunks));
}

/** Upload a blob as Capture would, and run the stream function on the event Event Grid queues for it. */
async function deliver(key: string, bytes: Uint8Array, messageId: string = randomUUID(), dequeueCount = 1): Promise<StreamEventResult> {
  const put = await rt.backend.sources.putIfAbsent(key, bytes);
  const etag = put.kind === 'written' ? put.version : ((await rt.backend.sources.head(key))?.version as string);
  const event = blobCreatedEvent(blobEndpoint(), stack.sourceContainer, key, etag, bytes.byteLength, 'PutBlockList');
  const { context } = invocationContext('stream', 'queueTrigger', { id: messageId, dequeueCount }, queueName);
  return makeStreamHandler(() => rt)(event, context);
}

const position = (i: number) => JSON.stringify({ vessel, time: `2025-06-01T12:00:0${i}Z`, lon: -3 + i / 10, lat: 48 });

describe('the Azure stream function', () => {
  it('reads an Event Hubs Capture Avro blob under streams/ into PostGIS once, keyed by its ETag; the same message again is done at its claim', async () => {
    const key = streamKeys.batch('capture/ns/ais/0/2025/06/01/12/00/00.avro');
    const bytes = await captureFile([position(1), position(2), position(3), 'not json']);
    const first = await deliver(key, bytes, 'm-1');
    if (first.kind === 'poison') throw new Error(first.message);
    expect(first).toMatchObject({ kind: 'batch', outcome: { kind: 'inserted', format: 'avro', inserted: 3, rejects: 1 } });
    expect(await deliver(key, bytes, 'm-2')).toMatchObject({ kind: 'batch', outcome: { kind: 'claim-rejected', reason: 'done' } });
    const r = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM feature_records WHERE vessel = $1', [vessel]);
    expect(r.rows).toEqual([{ n: 3 }]);
    const rejects = await db.query(
      'SELECT line, reason FROM feature_rejects j JOIN feature_batches b USING (batch_key) WHERE b.source_bucket = $1 AND b.source_key = $2',
      [stack.sourceContainer, key],
    );
    expect(rejects.rows).toEqual([{ line: 4, reason: 'unparsable' }]);
  });

  it("puts an unreadable batch on the stream queue's poison twin at once, and ignores blobs outside streams/", async () => {
    const key = streamKeys.batch('capture/ns/ais/0/2025/06/01/12/05/00.avro');
    const good = await captureFile([position(4)]);
    // Cut short: avsc alone would read it as an empty batch.
    const result = await deliver(key, good.subarray(0, good.length - 3), 'm-3');
    expect(result).toMatchObject({ kind: 'poison', code: 'BATCH_UNREADABLE' });
    const peeked = await poison.service.getQueueClient(`${queueName}-poison`).peekMessages({ numberOfMessages: 5 });
    expect(peeked.peekedMessageItems.map((m) => Buffer.from(m.messageText, 'base64').toString('utf8')).join('\n')).toContain('05/00.avro');
    expect(await deliver('scenes/x.tif', new Uint8Array([1]), 'm-4')).toMatchObject({ kind: 'ignored', reason: 'outside streams/' });
  });
});
