import { NotARasterError, UnsupportedRasterError } from '../domain/errors.js';
import type { ObjectStore, ReadPin } from '../ports/object-store.port.js';
import { FIELD_TYPE_SIZE, FieldType } from './tiff-format.js';

/** One IFD entry; its values live at `valueOffset` (inside the entry itself when they fit). */
export interface IfdEntry {
  readonly tag: number;
  readonly type: number;
  readonly count: number;
  readonly valueOffset: number;
  readonly byteLength: number;
}

export interface Ifd {
  readonly offset: number;
  readonly entries: ReadonlyMap<number, IfdEntry>;
  readonly nextIfdOffset: number;
}

/** Refuse a single tag value larger than this: no sane GeoTIFF needs it, and it would be read into memory. */
const MAX_TAG_BYTES = 64 * 1024 * 1024;
/** Out-of-line values closer together than this are fetched in one range read. */
const MAX_VALUE_SPAN = 4 * 1024 * 1024;

/**
 * Byte-range access to one object, with its first bytes kept: the TIFF header
 * and, for files written IFD-first (COGs, Tessera's own), every IFD.
 */
export class RangeReader {
  /** The object size when the first read came back short, which tells it. */
  readonly knownSize: number | undefined;

  private constructor(
    readonly store: ObjectStore,
    readonly key: string,
    readonly head: Uint8Array,
    requested: number,
    /** Every read names this version (see ReadPin): header and blocks come from the same bytes, or fail. */
    readonly pin: ReadPin | undefined,
  ) {
    this.knownSize = head.byteLength < requested ? head.byteLength : undefined;
  }

  static async open(store: ObjectStore, key: string, headBytes: number, pin?: ReadPin): Promise<RangeReader> {
    const head = await store.getRange(key, 0, headBytes, pin);
    return new RangeReader(store, key, head, headBytes, pin);
  }

  /** Exactly `length` bytes at `offset`; a short answer means the file is truncated. */
  async read(offset: number, length: number, what: string): Promise<Uint8Array> {
    if (length === 0) return new Uint8Array(0);
    if (offset + length <= this.head.byteLength) return this.head.subarray(offset, offset + length);
    if (this.knownSize !== undefined && offset + length > this.knownSize) throw this.truncated(what, offset + length, this.knownSize);
    const bytes = await this.store.getRange(this.key, offset, offset + length, this.pin);
    if (bytes.byteLength < length) throw this.truncated(what, offset + length, offset + bytes.byteLength);
    return bytes;
  }

  truncated(what: string, needed: number, size: number): NotARasterError {
    return new NotARasterError(
      `${JSON.stringify(this.key)} is a truncated TIFF: its ${what} ends at byte ${needed} but the object ends at byte ${size}; ` +
        'upload the complete file again',
    );
  }
}

const SIGNATURES: readonly [string, readonly number[]][] = [
  ['a PNG image', [0x89, 0x50, 0x4e, 0x47]],
  ['a JPEG image', [0xff, 0xd8, 0xff]],
  ['a GIF image', [0x47, 0x49, 0x46, 0x38]],
  ['a PDF document', [0x25, 0x50, 0x44, 0x46]],
  ['a ZIP archive', [0x50, 0x4b, 0x03, 0x04]],
  ['a gzip stream', [0x1f, 0x8b]],
  ['a JPEG2000 image', [0x00, 0x00, 0x00, 0x0c, 0x6a, 0x50]],
  ['an HDF5/NetCDF-4 file', [0x89, 0x48, 0x44, 0x46]],
];

/** A short guess at what a non-TIFF object is, for the error message. */
function describeNonTiff(head: Uint8Array): string {
  if (head.byteLength === 0) return 'it is empty';
  for (const [name, sig] of SIGNATURES) {
    if (head.byteLength >= sig.length && sig.every((b, i) => head[i] === b)) return `it looks like ${name}`;
  }
  const sample = head.subarray(0, Math.min(head.byteLength, 512));
  const printable = sample.every((b) => b === 9 || b === 10 || b === 13 || (b >= 32 && b < 127) || b >= 128);
  return printable ? 'it looks like text' : 'its first bytes are not a TIFF header';
}

/** The parsed header of a classic TIFF or BigTIFF file and a way to read its IFDs and tag values. */
export class TiffDirectoryReader {
  private constructor(
    readonly reader: RangeReader,
    readonly littleEndian: boolean,
    readonly bigTiff: boolean,
    readonly firstIfdOffset: number,
  ) {}

  static parse(reader: RangeReader): TiffDirectoryReader {
    const h = reader.head;
    const key = JSON.stringify(reader.key);
    const notTiff = (why: string) =>
      new NotARasterError(`${key} is not a TIFF: ${why}; Tessera reads GeoTIFF and Cloud Optimized GeoTIFF scenes`);
    if (h.byteLength < 8) throw notTiff(h.byteLength === 0 ? 'it is empty' : `it is only ${h.byteLength} bytes long`);
    const le = h[0] === 0x49 && h[1] === 0x49;
    const be = h[0] === 0x4d && h[1] === 0x4d;
    if (!le && !be) throw notTiff(describeNonTiff(h));
    const dv = new DataView(h.buffer, h.byteOffset, h.byteLength);
    const magic = dv.getUint16(2, le);
    if (magic === 42) {
      return new TiffDirectoryReader(reader, le, false, dv.getUint32(4, le));
    }
    if (magic === 43) {
      if (h.byteLength < 16) throw notTiff('its BigTIFF header is cut short');
      if (dv.getUint16(4, le) !== 8 || dv.getUint16(6, le) !== 0) throw notTiff('its BigTIFF header has an unknown offset size');
      return new TiffDirectoryReader(reader, le, true, safeNumber(dv.getBigUint64(8, le), reader.key));
    }
    throw notTiff(`its version number is ${magic}, not 42 (TIFF) or 43 (BigTIFF)`);
  }

  /** Reads the IFD at `offset` (entries only; values are loaded on demand). */
  async readIfd(offset: number): Promise<Ifd> {
    const key = JSON.stringify(this.reader.key);
    if (offset < 8 || (this.reader.knownSize !== undefined && offset >= this.reader.knownSize)) {
      if (this.reader.knownSize !== undefined) throw this.reader.truncated('first IFD', offset + 2, this.reader.knownSize);
      throw new NotARasterError(`${key} is not a valid TIFF: its IFD offset ${offset} is impossible`);
    }
    const countBytes = this.bigTiff ? 8 : 2;
    const entrySize = this.bigTiff ? 20 : 12;
    const head = await this.reader.read(offset, countBytes, 'IFD');
    const hdv = new DataView(head.buffer, head.byteOffset, head.byteLength);
    const count = this.bigTiff ? safeNumber(hdv.getBigUint64(0, this.littleEndian), this.reader.key) : hdv.getUint16(0, this.littleEndian);
    if (count === 0 || count > 4096) throw new NotARasterError(`${key} is not a valid TIFF: its IFD at ${offset} claims ${count} entries`);
    const bodyLength = count * entrySize + (this.bigTiff ? 8 : 4);
    const body = await this.reader.read(offset + countBytes, bodyLength, 'IFD');
    const dv = new DataView(body.buffer, body.byteOffset, body.byteLength);
    const entries = new Map<number, IfdEntry>();
    const inlineSize = this.bigTiff ? 8 : 4;
    for (let i = 0; i < count; i++) {
      const e = i * entrySize;
      const tag = dv.getUint16(e, this.littleEndian);
      const type = dv.getUint16(e + 2, this.littleEndian);
      const size = FIELD_TYPE_SIZE[type];
      if (size === undefined) continue; // unknown field type: TIFF 6.0 says skip the entry
      const n = this.bigTiff
        ? safeNumber(dv.getBigUint64(e + 4, this.littleEndian), this.reader.key)
        : dv.getUint32(e + 4, this.littleEndian);
      const byteLength = n * size;
      const valueField = offset + countBytes + e + (this.bigTiff ? 12 : 8);
      let valueOffset = valueField;
      if (byteLength > inlineSize) {
        valueOffset = this.bigTiff
          ? safeNumber(dv.getBigUint64(e + 12, this.littleEndian), this.reader.key)
          : dv.getUint32(e + 8, this.littleEndian);
      }
      entries.set(tag, { tag, type, count: n, valueOffset, byteLength });
    }
    const next = this.bigTiff
      ? safeNumber(dv.getBigUint64(count * entrySize, this.littleEndian), this.reader.key)
      : dv.getUint32(count * entrySize, this.littleEndian);
    return { offset, entries, nextIfdOffset: next };
  }

  /**
   * Loads the values of several tags at once, fetching every out-of-line value
   * that is not in the cached head with as few range reads as possible.
   */
  async loadValues(ifd: Ifd, tags: readonly number[]): Promise<Map<number, Uint8Array>> {
    const wanted: IfdEntry[] = [];
    for (const tag of tags) {
      const e = ifd.entries.get(tag);
      if (!e) continue;
      if (e.byteLength > MAX_TAG_BYTES) {
        throw new UnsupportedRasterError(
          `${JSON.stringify(this.reader.key)}: tag ${tag} holds ${e.byteLength} bytes, more than the ${MAX_TAG_BYTES} Tessera reads; ` +
            'the file has too many blocks: rewrite it with larger tiles (gdal_translate -co TILED=YES -co BLOCKXSIZE=512 -co BLOCKYSIZE=512)',
        );
      }
      wanted.push(e);
    }
    const out = new Map<number, Uint8Array>();
    const remote = wanted
      .filter((e) => e.valueOffset + e.byteLength > this.reader.head.byteLength)
      .sort((a, b) => a.valueOffset - b.valueOffset);
    for (const e of wanted) {
      if (!remote.includes(e)) out.set(e.tag, await this.reader.read(e.valueOffset, e.byteLength, `tag ${e.tag}`));
    }
    // Group remote values into spans so one request serves neighbours.
    let i = 0;
    while (i < remote.length) {
      const first = remote[i] as IfdEntry;
      let end = first.valueOffset + first.byteLength;
      let j = i + 1;
      while (j < remote.length) {
        const next = remote[j] as IfdEntry;
        const nextEnd = Math.max(end, next.valueOffset + next.byteLength);
        if (nextEnd - first.valueOffset > MAX_VALUE_SPAN) break;
        end = nextEnd;
        j++;
      }
      const span = await this.reader.read(first.valueOffset, end - first.valueOffset, `tag ${first.tag} values`);
      for (let k = i; k < j; k++) {
        const e = remote[k] as IfdEntry;
        const start = e.valueOffset - first.valueOffset;
        out.set(e.tag, span.subarray(start, start + e.byteLength));
      }
      i = j;
    }
    return out;
  }

  /** The numeric values of an entry, whatever its integer or floating-point field type. */
  numbers(entry: IfdEntry, bytes: Uint8Array): Float64Array {
    const le = this.littleEndian;
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const n = entry.count;
    const out = new Float64Array(n);
    switch (entry.type) {
      case FieldType.BYTE:
      case FieldType.UNDEFINED:
      case FieldType.ASCII:
        for (let i = 0; i < n; i++) out[i] = dv.getUint8(i);
        break;
      case FieldType.SBYTE:
        for (let i = 0; i < n; i++) out[i] = dv.getInt8(i);
        break;
      case FieldType.SHORT:
        for (let i = 0; i < n; i++) out[i] = dv.getUint16(i * 2, le);
        break;
      case FieldType.SSHORT:
        for (let i = 0; i < n; i++) out[i] = dv.getInt16(i * 2, le);
        break;
      case FieldType.LONG:
      case FieldType.IFD:
        for (let i = 0; i < n; i++) out[i] = dv.getUint32(i * 4, le);
        break;
      case FieldType.SLONG:
        for (let i = 0; i < n; i++) out[i] = dv.getInt32(i * 4, le);
        break;
      case FieldType.RATIONAL:
        for (let i = 0; i < n; i++) out[i] = dv.getUint32(i * 8, le) / dv.getUint32(i * 8 + 4, le);
        break;
      case FieldType.SRATIONAL:
        for (let i = 0; i < n; i++) out[i] = dv.getInt32(i * 8, le) / dv.getInt32(i * 8 + 4, le);
        break;
      case FieldType.FLOAT:
        for (let i = 0; i < n; i++) out[i] = dv.getFloat32(i * 4, le);
        break;
      case FieldType.DOUBLE:
        for (let i = 0; i < n; i++) out[i] = dv.getFloat64(i * 8, le);
        break;
      case FieldType.LONG8:
      case FieldType.IFD8:
        for (let i = 0; i < n; i++) out[i] = safeNumber(dv.getBigUint64(i * 8, le), this.reader.key);
        break;
      case FieldType.SLONG8:
        for (let i = 0; i < n; i++) out[i] = Number(dv.getBigInt64(i * 8, le));
        break;
      default:
        throw new NotARasterError(`${JSON.stringify(this.reader.key)}: tag ${entry.tag} has unknown field type ${entry.type}`);
    }
    return out;
  }

  /** ASCII values up to the first NUL (TIFF strings are NUL-terminated). */
  text(bytes: Uint8Array): string {
    const nul = bytes.indexOf(0);
    return new TextDecoder('utf-8').decode(nul === -1 ? bytes : bytes.subarray(0, nul));
  }
}

function safeNumber(v: bigint, key: string): number {
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new NotARasterError(`${JSON.stringify(key)} is not a valid TIFF: it holds the impossible offset or count ${v}`);
  }
  return Number(v);
}
