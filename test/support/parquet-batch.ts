import { gzipSync } from 'node:zlib';
import { type ColumnSource, parquetWriteBuffer } from 'hyparquet-writer';

/**
 * A Parquet file of NDJSON lines, as Firehose's record format conversion lands one: a row a line, a column a field
 * (null where a record has no such field). A column whose values are all numbers is DOUBLE, all strings STRING; a
 * column of both (a stream whose times come as ISO text and as epoch ms, a quoted longitude) is a JSON column, which
 * keeps each value's type where a Glue table would have forced one. A line that is not a JSON object (or `null`: no
 * text at all) is a row whose one value is a string that is not UTF-8, which the reader keeps as an unparsable
 * reject; blank lines are left out (a Parquet row is never blank). For the soak (test/soak/soak-feature-batches.ts)
 * and the benchmark's Parquet row (bench/sections/streams.ts).
 */
export function firehoseParquet(
  lines: readonly (string | null)[],
  options: { readonly codec?: 'SNAPPY' | 'GZIP'; readonly rowGroupSize?: number } = {},
): Uint8Array {
  const notUtf8 = Symbol('not UTF-8');
  const rows = lines.flatMap((text): Record<string, unknown>[] => {
    if (text === null) return [{ raw: notUtf8 }];
    if (text.trim() === '') return [];
    try {
      const value: unknown = JSON.parse(text);
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? [value as Record<string, unknown>] : [{ raw: notUtf8 }];
    } catch {
      return [{ raw: notUtf8 }];
    }
  });
  const names = [...new Set(rows.flatMap((r) => Object.keys(r)))].sort();
  const columns = names.map((name): ColumnSource & { kind: 'raw' | 'DOUBLE' | 'STRING' | 'JSON' } => {
    const values = rows.map((r) => r[name] ?? null);
    if (name === 'raw') return { name, kind: 'raw', data: values.map((v) => (v === notUtf8 ? new Uint8Array([0xc3, 0x28, 0xff]) : null)) };
    const kinds = new Set(values.filter((v) => v !== null).map((v) => typeof v));
    if (kinds.size === 1 && kinds.has('number')) return { name, kind: 'DOUBLE', data: values };
    if (kinds.size === 1 && kinds.has('string')) return { name, kind: 'STRING', data: values };
    return { name, kind: 'JSON', data: values };
  });
  // `raw` is BYTE_ARRAY with the UTF8 annotation: a string column, as any text column a writer declares.
  const schema = [
    { name: 'root', num_children: columns.length },
    ...columns.map((c) => {
      const optional = { name: c.name, repetition_type: 'OPTIONAL' as const };
      if (c.kind === 'raw' || c.kind === 'STRING') return { ...optional, type: 'BYTE_ARRAY' as const, converted_type: 'UTF8' as const };
      if (c.kind === 'JSON') return { ...optional, type: 'BYTE_ARRAY' as const, converted_type: 'JSON' as const };
      return { ...optional, type: 'DOUBLE' as const };
    }),
  ];
  return new Uint8Array(
    parquetWriteBuffer({
      columnData: columns.map(({ name, data }) => ({ name, data })),
      schema,
      codec: options.codec ?? 'SNAPPY',
      compressors: { GZIP: (b: Uint8Array) => gzipSync(b) },
      ...(options.rowGroupSize === undefined ? {} : { rowGroupSize: options.rowGroupSize }),
    }),
  );
}
