import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import avro from 'avsc';
import { parquetMetadata } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';
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

  describe('Parquet (Firehose record format conversion)', () => {
    /** Written by Apache Arrow's C++ writer as Firehose's Hive serializer writes (scripts/fixtures/firehose-parquet.py). */
    const firehose = new Uint8Array(readFileSync(new URL('../../data/streams/firehose-glue-snappy-int96.parquet', import.meta.url)));
    const FIREHOSE_ROWS = [
      '{"mmsi":244660000,"time":1748779200250,"lon":4.4792,"lat":51.9225,"speed":12.5}',
      '{"mmsi":244660000,"time":1748779210000,"lon":4.4801,"lat":51.923}',
      '{"mmsi":211000001,"time":1748779220000,"lat":53.54,"speed":3,"id":"p-3"}',
      '{"mmsi":"9007199254740993","time":1748779230000,"lon":9.97,"lat":53.54,"speed":0,"id":"p-4"}',
    ];

    it("reads Firehose's shape (SNAPPY, INT96 times, INT64 ids, two row groups): a row a record, nulls absent, times in epoch ms", async () => {
      const meta = parquetMetadata(firehose.slice().buffer);
      expect(meta.schema.map((e) => [e.name, e.type])).toEqual([
        ['schema', undefined],
        ['mmsi', 'INT64'],
        ['time', 'INT96'],
        ['lon', 'DOUBLE'],
        ['lat', 'DOUBLE'],
        ['speed', 'DOUBLE'],
        ['id', 'BYTE_ARRAY'],
      ]);
      expect(meta.row_groups.map((g) => g.columns[0]?.meta_data?.codec)).toEqual(['SNAPPY', 'SNAPPY']);
      const got = await decodeBatch(KEY, firehose);
      expect(got.format).toBe('parquet');
      expect(got.blankLines).toBe(0);
      // A 64-bit id past 2^53 stays exact, as text; the row without lon is left to the record rules (no-position).
      expect(got.entries).toEqual(FIREHOSE_ROWS.map((text, i) => ({ line: i + 1, text })));
    });

    const columns = (vessel: unknown[]) => [
      { name: 'vessel', data: vessel, type: 'STRING' as const },
      { name: 'time', data: [1_748_779_200_000n, 1_748_779_201_000n], type: 'INT64' as const },
      { name: 'lon', data: [4.5, null], type: 'DOUBLE' as const },
      { name: 'lat', data: [51.9, 52], type: 'DOUBLE' as const },
      // No row has a speed: the column's data page holds levels only, and its compressed values are empty.
      { name: 'speed', data: [null, null], type: 'DOUBLE' as const },
    ];

    it('reads GZIP and uncompressed pages the same, whatever the key says, an all-null column (an empty GZIP page) too', async () => {
      for (const codec of ['GZIP', 'UNCOMPRESSED'] as const) {
        const file = parquetWriteBuffer({
          columnData: columns(['a', 'b']),
          codec,
          compressors: { GZIP: (b: Uint8Array) => gzipSync(b) },
        });
        const got = await decodeBatch(`${KEY}.ndjson`, new Uint8Array(file));
        expect(got).toEqual({
          format: 'parquet',
          entries: [
            { line: 1, text: '{"vessel":"a","time":1748779200000,"lon":4.5,"lat":51.9}' },
            { line: 2, text: '{"vessel":"b","time":1748779201000,"lat":52}' },
          ],
          blankLines: 0,
        });
      }
    });

    it('keeps a nested value (a Glue struct, here a JSON column) as nested JSON, a 64-bit id beside it exact', async () => {
      const file = parquetWriteBuffer({
        columnData: [
          { name: 'mmsi', data: [244_660_000n, 2n ** 60n], type: 'INT64' },
          { name: 'meta', data: [{ source: 'ais', n: 1 }, null], type: 'JSON' },
        ],
      });
      expect((await decodeBatch(KEY, new Uint8Array(file))).entries).toEqual([
        { line: 1, text: '{"mmsi":244660000,"meta":{"source":"ais","n":1}}' },
        { line: 2, text: '{"mmsi":"1152921504606846976"}' },
      ]);
    });

    it('keeps a row whose string is not UTF-8 as undecodable, the rows around it read', async () => {
      const file = parquetWriteBuffer({
        columnData: [
          { name: 'vessel', data: [text('ok'), new Uint8Array([0xff, 0xfe])] },
          { name: 'lon', data: [1, 2] },
        ],
        schema: [
          { name: 'root', num_children: 2 },
          { name: 'vessel', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
          { name: 'lon', type: 'DOUBLE', repetition_type: 'OPTIONAL' },
        ],
      });
      expect((await decodeBatch(KEY, new Uint8Array(file))).entries).toEqual([
        { line: 1, text: '{"vessel":"ok","lon":1}' },
        { line: 2, undecodable: 'a string of the row is not UTF-8', excerpt: 'fffe' },
      ]);
    });

    it('calls a Parquet file poison when it is cut short, declares rows it does not hold, or is compressed with a codec Firehose does not write', async () => {
      await expect(decodeBatch(KEY, firehose.subarray(0, firehose.length - 9))).rejects.toThrow(/Parquet file has no readable footer/);
      await expect(decodeBatch(KEY, firehose.subarray(0, 200))).rejects.toBeInstanceOf(BatchUnreadableError);
      // A footer that declares a row more than the row groups hold (the file's num_rows, a compact-thrift i64 after
      // the schema: field header 0x16, then zigzag 2 = 0x04, made 3 = 0x06): the rows that decode are not the batch.
      const two = new Uint8Array(parquetWriteBuffer({ columnData: [{ name: 'lon', data: [1, 2], type: 'DOUBLE' }] }));
      const footerStart = two.length - 8 - new DataView(two.buffer).getUint32(two.length - 8, true);
      const at = two.findIndex((b, i) => i >= footerStart && b === 0x16 && two[i + 1] === 0x04);
      const lying = two.slice();
      lying[at + 1] = 0x06;
      expect(parquetMetadata(lying.slice().buffer).num_rows).toBe(3n);
      await expect(decodeBatch(KEY, lying)).rejects.toThrow(/declares 3 rows but 2 decode/);
      const zstd = parquetWriteBuffer({ columnData: columns(['a', 'b']), codec: 'ZSTD', compressors: { ZSTD: (b: Uint8Array) => b } });
      await expect(decodeBatch(KEY, new Uint8Array(zstd))).rejects.toThrow(
        /compressed with ZSTD; Tessera reads UNCOMPRESSED, SNAPPY, GZIP/,
      );
    });
  });
});
