import { availableParallelism } from 'node:os';
import { promisify } from 'node:util';
import {
  constants,
  crc32,
  inflate as inflateCallback,
  inflateSync,
  zstdCompressSync,
  zstdDecompress as zstdDecompressCallback,
  zstdDecompressSync,
} from 'node:zlib';
import { libdeflateRawCompress, libdeflateZlibCompress } from './libdeflate.js';
import type { TypedArray } from './tiff-format.js';

/**
 * Block codecs: DEFLATE encoding (libdeflate compiled to WebAssembly:
 * ./libdeflate.ts), DEFLATE decoding and ZSTD (node:zlib, native), LZW and PackBits
 * decoding, and the TIFF horizontal (2) and floating-point (3) predictors in
 * both directions. Every function works on one block and allocates only its output.
 *
 * node:zlib is driven with one output chunk as large as the result can be
 * (ZSTD's bound, or the block's decoded size): its default 16 KiB
 * chunk makes a 1 MiB block 64 output chunks, each a trip through the
 * stream machinery (and, on the thread pool, a round trip to it), and then a
 * concatenation. Measured on a 1 MiB source block: 5.9 ms synchronous and
 * 8.9 ms on the pool with 16 KiB chunks, 3.3 and 3.5 ms with one chunk
 * (docs/benchmarks.md). The chunk size changes how the bytes are handed
 * over, never the bytes.
 */

/** ZSTD_COMPRESSBOUND: the largest a ZSTD frame of `n` bytes can be. */
function zstdBound(n: number): number {
  return n + (n >> 8) + (n < 128 << 10 ? ((128 << 10) - n) >> 11 : 0) + 64;
}

/** node:zlib refuses chunks under 64 bytes (zlib.constants.Z_MIN_CHUNK). */
const chunk = (n: number) => Math.max(64, n);

/**
 * The output chunk of a decoder whose decoded size is known: a little larger
 * than the result. A chunk exactly as large ends full, and node:zlib then
 * allocates a second chunk of the same size only to learn that the stream has
 * ended (measured on a 1 MiB source block: 3.7 ms with the exact size, 3.3 ms
 * with 64 bytes to spare; docs/benchmarks.md).
 */
const decodedChunk = (expected: number) => chunk(expected + 64);

/**
 * Whether a block's codec call should go to libuv's thread pool: only when
 * this process may use more than one core (`availableParallelism()` honours
 * CPU affinity). On one core the pool cannot run beside the event loop, so
 * it only adds a thread hand-off and node:zlib's stream machinery per block;
 * the synchronous call gives the same bytes in less CPU time.
 */
export const poolHelps = (): boolean => codecLanes() > 1;

let sharedWith = 1;

/**
 * This process shares the cores with `siblings` processes doing the same work
 * (the local backend's worker processes: functions/local/worker-child.ts), so
 * its fair share of libuv's pool is `cores / siblings`. With one worker per
 * core every worker gets one lane: its codec calls run synchronously, and the
 * pool's hand-off cost (4-7 ms a tile, docs/benchmarks.md) buys nothing
 * because the sibling already has the other core busy. Process-wide by nature
 * (the pool is).
 */
export function shareCoresWith(siblings: number): void {
  sharedWith = Number.isInteger(siblings) && siblings >= 1 ? siblings : 1;
}

/** How many blocks this process should have in flight in the pool at once: its share of the cores, at least 1. */
export function codecLanes(): number {
  return Math.max(1, Math.floor(availableParallelism() / sharedWith));
}

/** A synchronous decoder's answer as a promise (its throw a rejection), for the one-core path. */
function settled<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * zlib-wrapped DEFLATE (TIFF compression 8) at `level` (GDAL's default ZLEVEL is 6), by libdeflate, the
 * compressor GDAL links: about 1.2x (level 6) to 1.4x (levels 1 and 9) zlib's speed on predicted NDVI tiles
 * within 0.2% of its size (docs/benchmarks.md, "compressor"). One call per block, no stream state: the bytes
 * depend only on the input, the level and the module (its SHA-256 is on the render path, so in the code version).
 */
export function deflate(bytes: Uint8Array, level: number): Uint8Array {
  return libdeflateZlibCompress(bytes, level);
}

/**
 * A gzip member (RFC 1952) of `bytes`: the raw DEFLATE stream of {@link deflate}'s compressor inside a
 * header written here, not by zlib, so nothing in it depends on the machine: no file name, modification time 0, no
 * extra flags, operating system 255 ("unknown", where zlib writes its build's OS code). What PMTiles' internal
 * compression 2 (gzip) is: its directories and metadata (shared/raster/pmtiles-writer.ts).
 */
export function gzip(bytes: Uint8Array, level: number): Uint8Array {
  const body = libdeflateRawCompress(bytes, level);
  const out = new Uint8Array(10 + body.byteLength + 8);
  out.set([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff], 0);
  out.set(body, 10);
  const trailer = new DataView(out.buffer, 10 + body.byteLength, 8);
  trailer.setUint32(0, crc32(bytes), true);
  // ISIZE: the input's length modulo 2^32.
  trailer.setUint32(4, bytes.byteLength % 2 ** 32, true);
  return out;
}

const inflateOnPool = promisify(inflateCallback);
const zstdDecompressOnPool = promisify(zstdDecompressCallback);

/**
 * zlib-wrapped DEFLATE decoding (TIFF compression 8 / 32946) on libuv's thread
 * pool, leaving the event loop free, when the process has a core for the pool
 * ({@link poolHelps}; else synchronously, the same bytes). `expected` is the
 * decoded size when known (a TIFF block's): the output is then one buffer.
 */
export function inflateAsync(bytes: Uint8Array, expected?: number, onPool = poolHelps()): Promise<Uint8Array> {
  const options = expected === undefined ? {} : { chunkSize: decodedChunk(expected) };
  return onPool ? inflateOnPool(bytes, options) : settled(() => inflateSync(bytes, options));
}

/**
 * {@link deflate} as a promise (its throw a rejection): the same bytes. libdeflate runs on the calling thread
 * (WebAssembly has no libuv pool), so blocks in flight at once run one after the other; kept so callers that
 * overlap compression with other work keep their shape.
 */
export function deflateAsync(bytes: Uint8Array, level: number): Promise<Uint8Array> {
  return settled(() => libdeflateZlibCompress(bytes, level));
}

/** The smallest and largest ZSTD levels Tessera writes (GDAL's ZSTD_LEVEL range; its default is 9). */
export const ZSTD_MIN_LEVEL = 1;
export const ZSTD_MAX_LEVEL = 22;

/**
 * ZSTD options for one frame of `n` bytes: single-threaded (the default;
 * ZSTD's worker threads would make the bytes depend on timing), checksum-free
 * like libtiff's, with the source size pledged (written in the frame header).
 */
function zstdOptions(n: number, level: number) {
  return {
    chunkSize: chunk(zstdBound(n)),
    pledgedSrcSize: n,
    params: { [constants.ZSTD_c_compressionLevel]: level, [constants.ZSTD_c_checksumFlag]: 0 },
  };
}

/**
 * One ZSTD frame (TIFF compression 50000) at `level`, as libtiff writes a block.
 *
 * Synchronous only, on purpose: node:zlib's thread-pool path streams the
 * block (the data with ZSTD_e_continue, then ZSTD_e_end), and libzstd then
 * splits blocks differently than the one-shot call this makes: other bytes
 * for the same pixels (seen at levels 1 to 19; test/unit/raster/zstd-writer.test.ts).
 * Tiles are create-only and compared by content hash, so there is one way to
 * make them. At the levels a tile uses a block takes about 0.6 ms (level 1)
 * to 4 ms (level 9), short enough for the event loop.
 */
export function zstdCompress(bytes: Uint8Array, level: number): Uint8Array {
  return zstdCompressSync(bytes, zstdOptions(bytes.byteLength, level));
}

/** ZSTD decoding (TIFF compression 50000), on libuv's thread pool as {@link inflateAsync}; `expected` as there. */
export function zstdDecompressAsync(bytes: Uint8Array, expected?: number, onPool = poolHelps()): Promise<Uint8Array> {
  const options = expected === undefined ? {} : { chunkSize: decodedChunk(expected) };
  return onPool ? zstdDecompressOnPool(bytes, options) : settled(() => zstdDecompressSync(bytes, options));
}

const LZW_CLEAR = 256;
const LZW_EOI = 257;
const LZW_MAX_CODES = 4096;

/**
 * TIFF LZW (MSB-first codes, 9 to 12 bits, "early change" one code before the
 * table fills). Decodes into a buffer of `expected` bytes and stops there.
 */
export function lzwDecode(input: Uint8Array, expected: number): Uint8Array {
  const out = new Uint8Array(expected);
  const prefix = new Int16Array(LZW_MAX_CODES);
  const suffix = new Uint8Array(LZW_MAX_CODES);
  const lengths = new Uint16Array(LZW_MAX_CODES);
  const firsts = new Uint8Array(LZW_MAX_CODES);
  for (let i = 0; i < 256; i++) {
    prefix[i] = -1;
    suffix[i] = i;
    lengths[i] = 1;
    firsts[i] = i;
  }
  let next = 258;
  let width = 9;
  let old = -1;
  let pos = 0;
  let bitBuffer = 0;
  let bitCount = 0;
  let inPos = 0;
  const inLen = input.byteLength;

  while (pos < expected) {
    while (bitCount < width) {
      if (inPos >= inLen) return out.subarray(0, pos); // ran out without EOI: keep what decoded
      bitBuffer = ((bitBuffer << 8) | (input[inPos++] as number)) >>> 0;
      bitCount += 8;
    }
    const code = (bitBuffer >>> (bitCount - width)) & ((1 << width) - 1);
    bitCount -= width;
    bitBuffer &= (1 << bitCount) - 1;

    if (code === LZW_EOI) break;
    if (code === LZW_CLEAR) {
      next = 258;
      width = 9;
      old = -1;
      continue;
    }
    if (old === -1) {
      if (code > 255) throw new Error(`LZW stream starts with code ${code} after a clear code`);
      out[pos++] = code;
      old = code;
      continue;
    }
    let emit: number;
    let first: number;
    if (code < next) {
      emit = code;
      first = firsts[code] as number;
    } else if (code === next) {
      emit = -1; // the KwKwK case: old string + its own first byte
      first = firsts[old] as number;
    } else {
      throw new Error(`LZW code ${code} is beyond the table (${next})`);
    }
    if (next < LZW_MAX_CODES) {
      prefix[next] = old;
      suffix[next] = first;
      lengths[next] = (lengths[old] as number) + 1;
      firsts[next] = firsts[old] as number;
      next++;
    }
    const c = emit === -1 ? next - 1 : emit;
    const len = lengths[c] as number;
    let end = pos + len - 1;
    let k = c;
    while (k >= 0) {
      if (end < expected) out[end] = suffix[k] as number;
      end--;
      k = prefix[k] as number;
    }
    pos += len;
    old = code;
    if (next + 1 >= 1 << width && width < 12) width++;
  }
  return pos >= expected ? out : out.subarray(0, pos);
}

/** PackBits (Apple / TIFF compression 32773). */
export function packBitsDecode(input: Uint8Array, expected: number): Uint8Array {
  const out = new Uint8Array(expected);
  let i = 0;
  let o = 0;
  while (i < input.byteLength && o < expected) {
    const n = ((input[i++] as number) << 24) >> 24; // as signed byte
    if (n >= 0) {
      const count = Math.min(n + 1, expected - o, input.byteLength - i);
      out.set(input.subarray(i, i + count), o);
      i += n + 1;
      o += count;
    } else if (n !== -128) {
      const count = Math.min(1 - n, expected - o);
      out.fill(input[i++] as number, o, o + count);
      o += count;
    }
  }
  return o >= expected ? out : out.subarray(0, o);
}

/** Reverses byte order of each `size`-byte sample in place (big-endian file on a little-endian host). */
export function swapBytes(bytes: Uint8Array, size: number): void {
  if (size === 2) {
    for (let i = 0; i + 1 < bytes.byteLength; i += 2) {
      const a = bytes[i] as number;
      bytes[i] = bytes[i + 1] as number;
      bytes[i + 1] = a;
    }
  } else if (size === 4 || size === 8) {
    for (let i = 0; i + size <= bytes.byteLength; i += size) bytes.subarray(i, i + size).reverse();
  }
}

/**
 * Undoes the horizontal predictor (2) on samples already in host order:
 * each sample was stored as the difference from the one `stride` samples to its left.
 *
 * One loop per element type, each its own function: V8 keeps type feedback per
 * function, and one loop that has seen several typed-array types (a uint16
 * scene, then a uint8 mask) becomes megamorphic, about 40 times slower on a
 * 512 x 512 x 2 block (0.5 ms against 22 ms measured on the pinned Node 24;
 * docs/benchmarks.md). The bytes are the same whichever loop runs.
 */
export function undoHorizontalPredictor(samples: TypedArray, rows: number, rowSamples: number, stride: number): void {
  if (samples instanceof Uint16Array) undoHorizontalU16(samples, rows, rowSamples, stride);
  else if (samples instanceof Uint8Array) undoHorizontalU8(samples, rows, rowSamples, stride);
  else if (samples instanceof Int16Array) undoHorizontalI16(samples, rows, rowSamples, stride);
  else undoHorizontalAny(samples, rows, rowSamples, stride);
}

/**
 * uint16, the common case (Sentinel-2, Landsat): one or two running sums held
 * in registers, so no sample waits for the store of the one before it. The
 * sums wrap at 16 bits as the typed array's stores do.
 */
function undoHorizontalU16(samples: Uint16Array, rows: number, rowSamples: number, stride: number): void {
  if (stride === 1 || (stride === 2 && rowSamples % 2 === 0)) {
    for (let r = 0; r < rows; r++) {
      const base = r * rowSamples;
      const end = base + rowSamples;
      if (stride === 1) {
        let a = samples[base] as number;
        for (let i = base + 1; i < end; i++) {
          a = (a + (samples[i] as number)) & 0xffff;
          samples[i] = a;
        }
      } else {
        let a = samples[base] as number;
        let b = samples[base + 1] as number;
        for (let i = base + 2; i < end; i += 2) {
          a = (a + (samples[i] as number)) & 0xffff;
          b = (b + (samples[i + 1] as number)) & 0xffff;
          samples[i] = a;
          samples[i + 1] = b;
        }
      }
    }
    return;
  }
  for (let r = 0; r < rows; r++) {
    const base = r * rowSamples;
    for (let i = base + stride, end = base + rowSamples; i < end; i++)
      samples[i] = (samples[i] as number) + (samples[i - stride] as number);
  }
}

function undoHorizontalU8(samples: Uint8Array, rows: number, rowSamples: number, stride: number): void {
  for (let r = 0; r < rows; r++) {
    const base = r * rowSamples;
    for (let i = base + stride, end = base + rowSamples; i < end; i++)
      samples[i] = (samples[i] as number) + (samples[i - stride] as number);
  }
}

function undoHorizontalI16(samples: Int16Array, rows: number, rowSamples: number, stride: number): void {
  for (let r = 0; r < rows; r++) {
    const base = r * rowSamples;
    for (let i = base + stride, end = base + rowSamples; i < end; i++)
      samples[i] = (samples[i] as number) + (samples[i - stride] as number);
  }
}

function undoHorizontalAny(samples: TypedArray, rows: number, rowSamples: number, stride: number): void {
  for (let r = 0; r < rows; r++) {
    const base = r * rowSamples;
    for (let i = base + stride, end = base + rowSamples; i < end; i++) {
      samples[i] = (samples[i] as number) + (samples[i - stride] as number); // typed arrays wrap like C
    }
  }
}

/** Applies the horizontal predictor (2) in place, right to left so every difference uses the original neighbour. */
export function applyHorizontalPredictor(samples: TypedArray, rows: number, rowSamples: number, stride: number): void {
  for (let r = 0; r < rows; r++) {
    const base = r * rowSamples;
    for (let i = base + rowSamples - 1; i >= base + stride; i--) {
      samples[i] = (samples[i] as number) - (samples[i - stride] as number);
    }
  }
}

/**
 * Undoes the floating-point predictor (3) on one block of bytes, returning the
 * samples in little-endian order. Per row, libtiff stores the bytes of every
 * sample as planes, then differences the bytes with `stride` = samples per
 * pixel. On the little-endian hosts that write nearly every TIFF, the planes
 * are most significant first in a little-endian file, but least significant
 * first in a big-endian one (libtiff swaps the samples before splitting them):
 * `bigEndianFile` selects that order, as GDAL reads such files.
 */
export function undoFloatingPointPredictor(
  bytes: Uint8Array,
  rows: number,
  rowSamples: number,
  bytesPerSample: number,
  stride: number,
  bigEndianFile = false,
): Uint8Array {
  const rowBytes = rowSamples * bytesPerSample;
  const out = new Uint8Array(rows * rowBytes);
  for (let r = 0; r < rows; r++) {
    const row = bytes.subarray(r * rowBytes, (r + 1) * rowBytes);
    for (let i = stride; i < rowBytes; i++) row[i] = (row[i] as number) + (row[i - stride] as number);
    const o = r * rowBytes;
    for (let b = 0; b < bytesPerSample; b++) {
      const plane = (bigEndianFile ? b : bytesPerSample - 1 - b) * rowSamples;
      for (let j = 0; j < rowSamples; j++) out[o + j * bytesPerSample + b] = row[plane + j] as number;
    }
  }
  return out;
}

/**
 * Applies the floating-point predictor (3) to little-endian samples (the inverse of {@link undoFloatingPointPredictor}).
 * The result goes to `into` when given (at least as long as `samples`; every byte of its first `samples` bytes is
 * written, so it may be a reused buffer), else to a new buffer.
 */
export function applyFloatingPointPredictor(
  samples: Uint8Array,
  rows: number,
  rowSamples: number,
  bytesPerSample: number,
  stride: number,
  into?: Uint8Array,
): Uint8Array {
  const rowBytes = rowSamples * bytesPerSample;
  const out = into === undefined ? new Uint8Array(rows * rowBytes) : into.subarray(0, rows * rowBytes);
  if (out.byteLength !== rows * rowBytes)
    throw new RangeError(`applyFloatingPointPredictor: into holds ${out.byteLength} bytes, needs ${rows * rowBytes}`);
  if (bytesPerSample === 4 && stride === 1 && samples.byteOffset % 4 === 0) return applyFloat32Predictor(samples, rows, rowSamples, out);
  for (let r = 0; r < rows; r++) {
    const o = r * rowBytes;
    for (let b = 0; b < bytesPerSample; b++) {
      const plane = o + (bytesPerSample - 1 - b) * rowSamples;
      for (let j = 0; j < rowSamples; j++) out[plane + j] = samples[o + j * bytesPerSample + b] as number;
    }
    for (let i = o + rowBytes - 1; i >= o + stride; i--) out[i] = (out[i] as number) - (out[i - stride] as number);
  }
  return out;
}

/**
 * The single-band float32 case in one pass: each sample is read once as a
 * 32-bit word, split into its four byte planes and differenced on the fly
 * (the first byte of a plane follows the last byte of the plane before it).
 */
function applyFloat32Predictor(samples: Uint8Array, rows: number, w: number, out: Uint8Array): Uint8Array {
  const words = new Uint32Array(samples.buffer, samples.byteOffset, rows * w);
  for (let r = 0; r < rows; r++) {
    const base = r * w;
    const o = base * 4;
    const last = words[base + w - 1] as number;
    let p3 = 0;
    let p2 = last >>> 24;
    let p1 = (last >>> 16) & 0xff;
    let p0 = (last >>> 8) & 0xff;
    for (let j = 0; j < w; j++) {
      const v = words[base + j] as number;
      const b3 = v >>> 24;
      const b2 = (v >>> 16) & 0xff;
      const b1 = (v >>> 8) & 0xff;
      const b0 = v & 0xff;
      out[o + j] = b3 - p3;
      out[o + w + j] = b2 - p2;
      out[o + 2 * w + j] = b1 - p1;
      out[o + 3 * w + j] = b0 - p0;
      p3 = b3;
      p2 = b2;
      p1 = b1;
      p0 = b0;
    }
  }
  return out;
}
