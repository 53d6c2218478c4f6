import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  applyFloatingPointPredictor,
  applyHorizontalPredictor,
  codecLanes,
  deflate,
  inflateAsync,
  lzwDecode,
  packBitsDecode,
  poolHelps,
  shareCoresWith,
  undoFloatingPointPredictor,
  undoHorizontalPredictor,
  zstdCompress,
  zstdDecompressAsync,
} from '../../../shared/raster/codecs.js';

/** A textbook TIFF LZW encoder (MSB-first codes, early change), independent of the decoder under test. */
function lzwEncode(input: Uint8Array): Uint8Array {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  let width = 9;
  const emit = (code: number) => {
    acc = (acc << width) | code;
    bits += width;
    while (bits >= 8) {
      out.push((acc >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
    acc &= (1 << bits) - 1;
  };
  let table = new Map<string, number>();
  let next = 258;
  const reset = () => {
    table = new Map();
    for (let i = 0; i < 256; i++) table.set(String.fromCharCode(i), i);
    next = 258;
    width = 9;
  };
  reset();
  emit(256);
  let w = '';
  for (const byte of input) {
    const c = String.fromCharCode(byte);
    if (table.has(w + c)) {
      w += c;
      continue;
    }
    emit(table.get(w) as number);
    table.set(w + c, next++);
    // The decoder adds each entry one code later, hence its "early change" and this exact threshold.
    if (next >= 1 << width && width < 12) width++;
    if (next >= 4094) {
      emit(256);
      reset();
    }
    w = c;
  }
  if (w) {
    emit(table.get(w) as number);
    // EOI is written with the width the decoder will have after adding its last entry.
    next++;
    if (next >= 1 << width && width < 12) width++;
  }
  emit(257);
  if (bits > 0) out.push((acc << (8 - bits)) & 0xff);
  return new Uint8Array(out);
}

describe('codecs', () => {
  it('decodes LZW streams, repeated patterns and table resets included', () => {
    const samples = [
      new TextEncoder().encode('TOBEORNOTTOBEORTOBEORNOT#'),
      new Uint8Array(5000).fill(7),
      Uint8Array.from({ length: 20_000 }, (_, i) => (i * 7919) % 251),
    ];
    for (const s of samples) expect(Array.from(lzwDecode(lzwEncode(s), s.byteLength))).toEqual(Array.from(s));
  });

  it('decodes PackBits runs and literals', () => {
    // Apple's example: FE AA 02 80 00 2A FD AA 03 80 00 2A 22 F7 AA
    const packed = new Uint8Array([0xfe, 0xaa, 0x02, 0x80, 0x00, 0x2a, 0xfd, 0xaa, 0x03, 0x80, 0x00, 0x2a, 0x22, 0xf7, 0xaa]);
    const expected = [0xaa, 0xaa, 0xaa, 0x80, 0x00, 0x2a, 0xaa, 0xaa, 0xaa, 0xaa, 0x80, 0x00, 0x2a, 0x22, ...new Array(10).fill(0xaa)];
    expect(Array.from(packBitsDecode(packed, expected.length))).toEqual(expected);
  });

  it('round-trips the horizontal predictor with wrap-around, per sample of interleaved pixels', () => {
    const rows = 3;
    const rowSamples = 10; // 5 pixels x 2 samples
    const a = Uint16Array.from({ length: rows * rowSamples }, (_, i) => (i * 40_503) % 65_536);
    const b = a.slice();
    applyHorizontalPredictor(b, rows, rowSamples, 2);
    expect(b[0]).toBe(a[0]);
    expect(b[2]).toBe((65_536 + (a[2] as number) - (a[0] as number)) % 65_536);
    undoHorizontalPredictor(b, rows, rowSamples, 2);
    expect(Array.from(b)).toEqual(Array.from(a));
  });

  it.each([
    ['float32, one sample per pixel', 4, 1],
    ['float32, three samples per pixel', 4, 3],
    ['float64, two samples per pixel', 8, 2],
  ])('round-trips the floating-point predictor for %s', (_name, bps, stride) => {
    const rows = 4;
    const rowSamples = 6 * stride;
    const values = Array.from({ length: rows * rowSamples }, (_, i) => Math.sin(i) * 10 ** (i % 7));
    const typed = bps === 4 ? new Float32Array(values) : new Float64Array(values);
    const bytes = new Uint8Array(typed.buffer);
    const encoded = applyFloatingPointPredictor(bytes, rows, rowSamples, bps, stride);
    expect(Array.from(encoded)).not.toEqual(Array.from(bytes));
    const decoded = undoFloatingPointPredictor(encoded.slice(), rows, rowSamples, bps, stride);
    expect(Array.from(decoded)).toEqual(Array.from(bytes));
  });

  it('splits float32 into byte planes, most significant first, as libtiff does', () => {
    // 1.0f = 3f800000, 2.0f = 40000000: planes [3f 40][80 00][00 00][00 00], then each byte minus the one before it.
    const bytes = new Uint8Array(new Float32Array([1, 2]).buffer);
    expect(Array.from(applyFloatingPointPredictor(bytes, 1, 2, 4, 1))).toEqual([0x3f, 0x01, 0x40, 0x80, 0x00, 0x00, 0x00, 0x00]);
  });

  // The per-type loops (uint16's with running sums) against the textbook definition, on every element
  // type a TIFF predictor 2 meets, strides 1 to 4 (2 is uint16 interleaved pairs), with wrap-around.
  it.each([
    ['uint16', Uint16Array, 65_536],
    ['uint8', Uint8Array, 256],
    ['int16', Int16Array, 65_536],
    ['uint32', Uint32Array, 2 ** 32],
  ] as const)('undoes the horizontal predictor on %s as the textbook loop does, strides 1 to 4', (_name, T, range) => {
    for (const stride of [1, 2, 3, 4]) {
      const rows = 5;
      const rowSamples = 12 * stride;
      const encoded = new T(rows * rowSamples);
      for (let i = 0; i < encoded.length; i++) encoded[i] = ((i * 2_654_435_761) >>> 0) % range;
      const reference = encoded.slice();
      for (let r = 0; r < rows; r++) {
        for (let i = r * rowSamples + stride; i < (r + 1) * rowSamples; i++) {
          reference[i] = (reference[i] as number) + (reference[i - stride] as number);
        }
      }
      const decoded = encoded.slice();
      undoHorizontalPredictor(decoded, rows, rowSamples, stride);
      expect(Array.from(decoded), `stride ${stride}`).toEqual(Array.from(reference));
      expect(Array.from(decoded), `stride ${stride} differs from its input`).not.toEqual(Array.from(encoded));
    }
  });

  // On one core the decoders run synchronously (the pool cannot run beside the event loop): the same
  // bytes as on the pool, with the decoded size known or not, and a corrupt block rejects either way.
  it.each([
    ['DEFLATE', (b: Uint8Array) => deflate(b, 6), inflateAsync],
    ['ZSTD', (b: Uint8Array) => zstdCompress(b, 3), zstdDecompressAsync],
  ] as const)('%s decodes to the same bytes on the event loop and on the pool', async (_name, encode, decode) => {
    const raw = Uint8Array.from({ length: 256 * 256 * 4 }, (_, i) => (i % 509) ^ (i >> 9));
    const stored = encode(raw);
    for (const expected of [raw.byteLength, undefined]) {
      const onLoop = await decode(stored, expected, false);
      const onPool = await decode(stored, expected, true);
      expect(Buffer.compare(onLoop, raw), `expected ${expected}`).toBe(0);
      expect(Buffer.compare(onPool, raw), `expected ${expected}`).toBe(0);
    }
    const corrupt = stored.slice(0, 40);
    corrupt[10] = (corrupt[10] as number) ^ 0xff;
    await expect(decode(corrupt, raw.byteLength, false)).rejects.toThrow();
    await expect(decode(corrupt, raw.byteLength, true)).rejects.toThrow();
  });
});

describe('the codec lanes of a process that shares the cores with sibling workers', () => {
  it('is the cores divided among the siblings, at least 1; one worker per core gets no pool hand-off', () => {
    const cores = availableParallelism();
    try {
      shareCoresWith(1);
      expect(codecLanes()).toBe(cores);
      shareCoresWith(cores);
      expect(codecLanes()).toBe(1);
      expect(poolHelps()).toBe(false);
      shareCoresWith(cores * 4);
      expect(codecLanes()).toBe(1);
      shareCoresWith(0); // nonsense: treated as alone
      expect(codecLanes()).toBe(cores);
    } finally {
      shareCoresWith(1);
    }
  });
});
