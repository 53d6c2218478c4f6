import { gzipSync } from 'node:zlib';
import avro from 'avsc';
import { describe, expect, it } from 'vitest';
import { decodeBatch } from '../../../shared/app/batch-decode.js';
import { BatchUnreadableError, MAX_BATCH_BYTES } from '../../../shared/domain/feature-batch.js';

const text = (s: string) => new TextEncoder().encode(s);
const KEY = 'streams/ais/part-0001';

/**
 * The Avro schema Event Hubs Capture writes (Microsoft's "Capture Event Hubs data in Azure Storage" documentation):
 * the event's payload is `Body`. The file below is written by avsc's encoder with it, with the deflate codec Capture
 * uses; no file captured by Azure itself is in the repository.
 */
const CAPTURE_SCHEMA = {
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
};

/** The schema of a Pub/Sub Cloud Storage subscription in Avro format: the payload is `data`. */
const PUBSUB_SCHEMA = {
  type: 'record',
  name: 'PubsubMessage',
  fields: [
    { name: 'subscription_name', type: 'string' },
    { name: 'message_id', type: 'string' },
    { name: 'publish_time', type: { type: 'long', logicalType: 'timestamp-micros' } },
    { name: 'attributes', type: { type: 'map', values: 'string' } },
    { name: 'data', type: 'bytes' },
  ],
};

async function avroFile(schema: object, records: readonly object[], codec: 'null' | 'deflate'): Promise<Uint8Array> {
  const encoder = new avro.streams.BlockEncoder(avro.Type.forSchema(schema as avro.Schema), { codec, blockSize: 64 });
  const chunks: Buffer[] = [];
  encoder.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<void>((resolve, reject) => {
    encoder.on('end', resolve);
    encoder.on('error', reject);
  });
  for (const r of records) encoder.write(r);
  encoder.end();
  await done;
  return new Uint8Array(Buffer.concat(chunks));
}

describe('decodeBatch', () => {
  it('reads NDJSON lines with their numbers: CRLF, a BOM, blank lines counted, the last newline ending no line', async () => {
    const got = await decodeBatch(KEY, text('\uFEFF{"a":1}\r\n\r\n  \n{"b":2}\n'));
    expect(got).toEqual({
      format: 'ndjson',
      entries: [
        { line: 1, text: '{"a":1}' },
        { line: 4, text: '{"b":2}' },
      ],
      blankLines: 2,
    });
  });

  it('keeps a line that is not UTF-8 as undecodable, without losing the lines around it', async () => {
    const bytes = new Uint8Array([...text('{"a":1}\n'), 0xff, 0xfe, 0x41, ...text('\n{"b":2}')]);
    const got = await decodeBatch(KEY, bytes);
    expect(got.entries).toEqual([
      { line: 1, text: '{"a":1}' },
      { line: 2, undecodable: 'the line is not UTF-8', excerpt: 'fffe41' },
      { line: 3, text: '{"b":2}' },
    ]);
  });

  it("inflates gzip (Firehose's GZIP) by its magic bytes, whatever the key says", async () => {
    const got = await decodeBatch(`${KEY}.ndjson`, gzipSync(text('{"a":1}\n{"b":2}\n')));
    expect(got.format).toBe('ndjson+gzip');
    expect(got.entries.map((e) => ('text' in e ? e.text : e))).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('reads an Event Hubs Capture container (deflate): one entry per event, its Body as text, a null Body undecodable', async () => {
    const event = (n: number, body: string | null) => ({
      SequenceNumber: n,
      Offset: String(n * 100),
      EnqueuedTimeUtc: '6/1/2025 12:00:00 PM',
      SystemProperties: { 'x-opt-enqueued-time': { long: 1_748_779_200_000 } },
      Properties: {},
      Body: body === null ? null : Buffer.from(body, 'utf8'),
    });
    const records = Array.from({ length: 40 }, (_, i) => event(i, JSON.stringify({ vessel: i, time: 0, lon: 1, lat: 2 })));
    records.push(event(40, null));
    const got = await decodeBatch(`${KEY}.avro`, await avroFile(CAPTURE_SCHEMA, records, 'deflate'));
    expect(got.format).toBe('avro');
    expect(got.entries).toHaveLength(41);
    expect(got.entries[0]).toEqual({ line: 1, text: '{"vessel":0,"time":0,"lon":1,"lat":2}' });
    expect(got.entries[40]).toEqual({ line: 41, undecodable: 'the record body is empty (null)', excerpt: '' });
  });

  it('reads a Pub/Sub Cloud Storage subscription Avro file (its data field), and a container of positions themselves', async () => {
    const sub = await avroFile(
      PUBSUB_SCHEMA,
      [{ subscription_name: 's', message_id: '1', publish_time: 1, attributes: {}, data: Buffer.from('{"vessel":1}') }],
      'null',
    );
    expect((await decodeBatch(KEY, sub)).entries).toEqual([{ line: 1, text: '{"vessel":1}' }]);
    const plain = await avroFile(
      {
        type: 'record',
        name: 'Position',
        fields: [
          { name: 'vessel', type: 'long' },
          { name: 'lon', type: 'double' },
        ],
      },
      [{ vessel: 5, lon: 4.5 }],
      'null',
    );
    expect((await decodeBatch(KEY, plain)).entries).toEqual([{ line: 1, text: '{"vessel":5,"lon":4.5}' }]);
  });

  it('calls an object that is not a batch poison: a broken gzip, a truncated Avro container, too many bytes', async () => {
    await expect(decodeBatch(KEY, new Uint8Array([0x1f, 0x8b, 0x08, 0x00, 1, 2, 3]))).rejects.toBeInstanceOf(BatchUnreadableError);
    const records = Array.from({ length: 30 }, (_, i) => ({ vessel: i, lon: i / 10 }));
    const schema = {
      type: 'record',
      name: 'Position',
      fields: [
        { name: 'vessel', type: 'long' },
        { name: 'lon', type: 'double' },
      ],
    };
    const good = await avroFile(schema, records, 'deflate');
    expect((await decodeBatch(KEY, good)).entries).toHaveLength(30);
    // avsc's decoder alone ends quietly on these (no records for a cut header, the last block dropped): a partial batch
    // must never be marked done.
    await expect(decodeBatch(KEY, good.subarray(0, 20))).rejects.toThrow(/header is cut short/);
    await expect(decodeBatch(KEY, good.subarray(0, good.length - 1))).rejects.toThrow(/cut short/);
    const flipped = new Uint8Array(good);
    flipped[good.length - 3] = (flipped[good.length - 3] as number) ^ 0xff;
    await expect(decodeBatch(KEY, flipped)).rejects.toThrow(/sync marker/);
    await expect(decodeBatch(KEY, new Uint8Array(MAX_BATCH_BYTES + 1))).rejects.toThrow(/more than the/);
  });
});
