import { Buffer } from 'node:buffer';
import { gunzipSync } from 'node:zlib';
import avro from 'avsc';
import { type FileMetaData, type ParquetParsers, parquetMetadata, parquetReadObjects } from 'hyparquet';
import { BatchUnreadableError, MAX_BATCH_BYTES } from '../domain/feature-batch.js';

/**
 * The records of one batch object, as text, whatever the stream landed it as (docs/feature-batches.md, "Formats"):
 *
 * - NDJSON, one record a line: Amazon Data Firehose to S3 (with its newline delimiter on), a Pub/Sub Cloud
 *   Storage subscription in text format, a local file. Gzip (Firehose's GZIP compression) is recognised by its
 *   magic bytes and inflated first.
 * - An Avro object container file (magic `Obj\x01`, null or deflate codec): Event Hubs Capture, whose records
 *   carry the event in `Body` (bytes); a Pub/Sub Cloud Storage subscription in Avro format, whose records carry
 *   it in `data`; or records that are the positions themselves. Decoded by avsc, the npm Avro library.
 * - A Parquet file (magic `PAR1` at both ends; SNAPPY, GZIP or no compression): Amazon Data Firehose with record
 *   format conversion, one row a record, the columns its AWS Glue table declares. Decoded by hyparquet.
 *
 * Which format is read from the bytes, not from the key: Firehose names its objects without an extension unless
 * told otherwise, and a misnamed object must not be misread.
 *
 * A line or record that is not a record (not UTF-8, not JSON) is still an entry, with its line number, so the use
 * case keeps it as a reject. Only an object that is not a batch at all (a broken gzip or Avro container, too
 * large) throws {@link BatchUnreadableError}: poison.
 */
export interface DecodedBatch {
  readonly format: 'ndjson' | 'ndjson+gzip' | 'avro' | 'parquet';
  /** Every record candidate, in order; `line` is 1-based (an NDJSON line, an Avro record's or a Parquet row's index). */
  readonly entries: readonly BatchEntry[];
  /** Empty or whitespace-only NDJSON lines (the newline after the last record makes none). */
  readonly blankLines: number;
}

export type BatchEntry =
  | { readonly line: number; readonly text: string }
  /** Not text: its bytes are not UTF-8, an Avro record holds no payload, a Parquet row a string that is not UTF-8. Kept as a reject. */
  | { readonly line: number; readonly undecodable: string; readonly excerpt: string };

const GZIP = [0x1f, 0x8b] as const;
const AVRO = [0x4f, 0x62, 0x6a, 0x01] as const; // "Obj" 1
const PARQUET = [0x50, 0x41, 0x52, 0x31] as const; // "PAR1"
const startsWith = (bytes: Uint8Array, magic: readonly number[]): boolean => magic.every((b, i) => bytes[i] === b);
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

export async function decodeBatch(key: string, bytes: Uint8Array): Promise<DecodedBatch> {
  if (bytes.byteLength > MAX_BATCH_BYTES) {
    throw new BatchUnreadableError(
      key,
      `it holds ${bytes.byteLength} bytes, more than the ${MAX_BATCH_BYTES} a batch may (lower the stream's buffer size)`,
    );
  }
  if (startsWith(bytes, AVRO)) return { format: 'avro', entries: await avroEntries(key, bytes), blankLines: 0 };
  if (startsWith(bytes, PARQUET)) return { format: 'parquet', entries: await parquetEntries(key, bytes), blankLines: 0 };
  if (startsWith(bytes, GZIP)) {
    let inflated: Buffer;
    try {
      inflated = gunzipSync(bytes, { maxOutputLength: MAX_BATCH_BYTES });
    } catch (cause) {
      throw new BatchUnreadableError(
        key,
        `its gzip stream is broken or inflates past ${MAX_BATCH_BYTES} bytes (${(cause as Error).message})`,
        { cause },
      );
    }
    return { format: 'ndjson+gzip', ...ndjsonEntries(inflated) };
  }
  return { format: 'ndjson', ...ndjsonEntries(bytes) };
}

/** Lines of NDJSON. The whole object is decoded at once when it is valid UTF-8 (the common case), else line by line. */
function ndjsonEntries(bytes: Uint8Array): { entries: BatchEntry[]; blankLines: number } {
  const entries: BatchEntry[] = [];
  let blankLines = 0;
  const take = (line: number, text: string) => {
    const t = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (t.trim() === '') blankLines++;
    else entries.push({ line, text: t });
  };
  let whole: string | undefined;
  try {
    whole = utf8.decode(bytes);
  } catch {
    whole = undefined;
  }
  if (whole !== undefined) {
    const lines = whole.split('\n');
    // The newline that ends the last record ends no line of its own.
    if (lines.at(-1) === '') lines.pop();
    lines.forEach((text, i) => {
      take(i + 1, text);
    });
    return { entries, blankLines };
  }
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let start = 0;
  let line = 0;
  while (start < buf.length) {
    const nl = buf.indexOf(0x0a, start);
    const end = nl < 0 ? buf.length : nl;
    line++;
    const part = buf.subarray(start, end);
    try {
      take(line, utf8.decode(part));
    } catch {
      entries.push({ line, undecodable: 'the line is not UTF-8', excerpt: part.subarray(0, 64).toString('hex') });
    }
    start = end + 1;
  }
  return { entries, blankLines };
}

/** The header of an Avro object container file (the Avro specification, "Object Container Files"). */
const AVRO_HEADER = avro.Type.forSchema({
  type: 'record',
  name: 'org.apache.avro.file.Header',
  fields: [
    { name: 'magic', type: { type: 'fixed', name: 'Magic', size: 4 } },
    { name: 'meta', type: { type: 'map', values: 'bytes' } },
    { name: 'sync', type: { type: 'fixed', name: 'Sync', size: 16 } },
  ],
});
const AVRO_LONG = avro.Type.forSchema('long');

/**
 * The number of records an Avro container's blocks declare, read from its framing: the header, then blocks of
 * (count, size, data, sync marker) up to the last byte. avsc's decoder ends quietly on a container cut short (a
 * truncated header gives no records, a truncated last block is dropped), which would mark a partial batch done;
 * so the framing is walked first, and the decoded records must number what it declares.
 */
function avroDeclaredRecords(key: string, buf: Buffer): number {
  const unreadable = (why: string): never => {
    throw new BatchUnreadableError(key, `its Avro container ${why}`);
  };
  const header = AVRO_HEADER.decode(buf, 0) as { value: { sync: Buffer } | undefined; offset: number };
  if (header.offset < 0 || header.value === undefined) return unreadable('header is cut short');
  const sync = header.value.sync;
  let pos = header.offset;
  let records = 0;
  while (pos < buf.length) {
    const count = AVRO_LONG.decode(buf, pos) as { value: number; offset: number };
    if (count.offset < 0) return unreadable(`block at byte ${pos} is cut short`);
    const size = AVRO_LONG.decode(buf, count.offset) as { value: number; offset: number };
    if (size.offset < 0 || count.value < 0 || size.value < 0) return unreadable(`block at byte ${pos} is cut short or malformed`);
    const end = size.offset + size.value + 16;
    if (end > buf.length) return unreadable(`block at byte ${pos} is cut short (${end - buf.length} bytes missing)`);
    if (!buf.subarray(end - 16, end).equals(sync)) return unreadable(`block at byte ${pos} does not end in the file's sync marker`);
    records += count.value;
    pos = end;
  }
  return records;
}

/** The records of an Avro container, each as the JSON text of its event. */
async function avroEntries(key: string, bytes: Uint8Array): Promise<BatchEntry[]> {
  const declared = avroDeclaredRecords(key, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  let records: unknown[];
  try {
    records = await new Promise<unknown[]>((resolve, reject) => {
      const out: unknown[] = [];
      const decoder = new avro.streams.BlockDecoder();
      decoder.on('data', (record: unknown) => out.push(record));
      decoder.on('error', reject);
      decoder.on('end', () => resolve(out));
      decoder.end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    });
  } catch (cause) {
    throw new BatchUnreadableError(key, `its Avro container does not decode (${(cause as Error).message})`, { cause });
  }
  if (records.length !== declared) {
    throw new BatchUnreadableError(key, `its Avro container declares ${declared} records but ${records.length} decode`);
  }
  return records.map((record, i): BatchEntry => {
    const line = i + 1;
    const r = (typeof record === 'object' && record !== null ? record : {}) as Record<string, unknown>;
    // Event Hubs Capture puts the event in Body, a Pub/Sub Cloud Storage subscription in data.
    const payload = 'Body' in r ? r.Body : 'data' in r ? r.data : undefined;
    if (payload === undefined) {
      // A container of the positions themselves.
      return { line, text: JSON.stringify(record) };
    }
    if (Buffer.isBuffer(payload)) {
      try {
        return { line, text: utf8.decode(payload) };
      } catch {
        return { line, undecodable: 'the record body is not UTF-8', excerpt: payload.subarray(0, 64).toString('hex') };
      }
    }
    if (typeof payload === 'string') return { line, text: payload };
    return { line, undecodable: 'the record body is empty (null)', excerpt: '' };
  });
}

/** The codecs Firehose's Parquet serializer writes (its `Compression`: SNAPPY, the default, GZIP, UNCOMPRESSED). */
const PARQUET_CODECS: ReadonlySet<string> = new Set(['UNCOMPRESSED', 'SNAPPY', 'GZIP']);

/**
 * A GZIP page, inflated to the size its header declares and no further. A page can be empty (a data page v2 of a
 * column whose values are all null keeps only its levels, which are not compressed): zlib takes no limit of 0.
 */
function gunzipPage(input: Uint8Array, outputLength: number): Uint8Array {
  const out = gunzipSync(input, { maxOutputLength: Math.max(outputLength, 1) });
  if (out.byteLength !== outputLength) throw new Error(`a GZIP page inflates to ${out.byteLength} bytes, its header says ${outputLength}`);
  return out;
}

/** A Parquet string value whose bytes are not UTF-8 (hyparquet's own decoder would put U+FFFD in their place). */
class NotUtf8 {
  constructor(readonly bytes: Uint8Array) {}
}

/**
 * How Parquet's typed values become a record's JSON values: times as epoch milliseconds (the record rules read a
 * number `time` as such; Firehose writes a Glue `timestamp` as INT96 nanoseconds), strings decoded strictly.
 */
const PARQUET_PARSERS: Partial<ParquetParsers> = {
  timestampFromMilliseconds: (millis) => Number(millis),
  timestampFromMicroseconds: (micros) => Number(micros / 1000n),
  timestampFromNanoseconds: (nanos) => Number(nanos / 1_000_000n),
  dateFromDays: (days) => days * 86_400_000,
  stringFromBytes: (bytes) => {
    if (bytes === undefined || bytes === null) return bytes;
    try {
      return utf8.decode(bytes);
    } catch {
      return new NotUtf8(bytes);
    }
  },
};

/**
 * JSON for a Parquet value: 64-bit integers as numbers when exact (an MMSI, epoch milliseconds), else as decimal
 * text; a string that is not UTF-8, at any depth, stops the row (thrown, caught by the caller: the row is a reject).
 */
const parquetJson = (_key: string, value: unknown): unknown => {
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (value instanceof NotUtf8) throw value;
  if (value instanceof Uint8Array) return Buffer.from(value).toString('hex');
  return value;
};

/**
 * The rows of a Parquet file, each as the JSON text of a record: a column's null is an absent field (a Glue table
 * gives every row every column; the JSON Firehose converted had only the fields it had). The file's footer is its
 * table of contents, so a file cut short has none and is poison; the decoded rows must number what the footer
 * declares, and the columns' uncompressed size may not pass {@link MAX_BATCH_BYTES}.
 */
async function parquetEntries(key: string, bytes: Uint8Array): Promise<BatchEntry[]> {
  const unreadable = (why: string, cause?: unknown): never => {
    throw new BatchUnreadableError(key, `its Parquet file ${why}`, cause === undefined ? undefined : { cause });
  };
  const file = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes.buffer : bytes.slice().buffer;
  let metadata: FileMetaData;
  try {
    metadata = parquetMetadata(file as ArrayBuffer, { parsers: PARQUET_PARSERS });
  } catch (cause) {
    return unreadable(`has no readable footer: cut short or not Parquet (${(cause as Error).message})`, cause);
  }
  let uncompressed = 0;
  for (const group of metadata.row_groups) {
    uncompressed += Number(group.total_byte_size);
    for (const column of group.columns) {
      const codec = column.meta_data?.codec;
      if (codec !== undefined && !PARQUET_CODECS.has(codec)) {
        unreadable(`is compressed with ${codec}; Tessera reads ${[...PARQUET_CODECS].join(', ')} (what Firehose writes)`);
      }
    }
  }
  if (uncompressed > MAX_BATCH_BYTES) unreadable(`holds ${uncompressed} bytes uncompressed, more than the ${MAX_BATCH_BYTES} a batch may`);
  const declared = Number(metadata.num_rows);
  let rows: Record<string, unknown>[];
  try {
    rows = await parquetReadObjects({
      file: file as ArrayBuffer,
      metadata,
      parsers: PARQUET_PARSERS,
      compressors: { GZIP: gunzipPage },
    });
  } catch (cause) {
    return unreadable(`does not decode (${(cause as Error).message})`, cause);
  }
  if (rows.length !== declared) unreadable(`declares ${declared} rows but ${rows.length} decode`);
  return rows.map((row, i): BatchEntry => parquetRowEntry(row, i + 1));
}

/**
 * A Parquet row as the JSON text of its record. Flat rows of numbers and strings (Firehose's, from a Glue table of
 * scalar columns) are serialised without a replacer, which costs a call per value; a row with a nested value (a
 * Glue struct or array) goes through {@link parquetJson} whole.
 */
function parquetRowEntry(row: Record<string, unknown>, line: number): BatchEntry {
  const record: Record<string, unknown> = {};
  let nested = false;
  try {
    for (const name in row) {
      const value = row[name];
      if (value === null || value === undefined) continue;
      if (typeof value === 'object') {
        if (value instanceof NotUtf8) throw value;
        if (!(value instanceof Uint8Array)) nested = true;
        record[name] = value instanceof Uint8Array ? parquetJson(name, value) : value;
      } else record[name] = typeof value === 'bigint' ? parquetJson(name, value) : value;
    }
    return { line, text: nested ? JSON.stringify(record, parquetJson) : JSON.stringify(record) };
  } catch (error) {
    if (!(error instanceof NotUtf8)) throw error;
    return { line, undecodable: 'a string of the row is not UTF-8', excerpt: Buffer.from(error.bytes.subarray(0, 64)).toString('hex') };
  }
}
