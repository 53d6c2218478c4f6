import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inflateRawSync, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { buildLibdeflateWasm, LIBDEFLATE_CRATE, sha256 as sha256Of, toolchainPresent } from '../../../scripts/build-libdeflate.js';
import { applyFloatingPointPredictor, deflate, deflateAsync, gzip } from '../../../shared/raster/codecs.js';
import {
  LIBDEFLATE_VERSION,
  LIBDEFLATE_WASM_FILE,
  LIBDEFLATE_WASM_SHA256,
  LibdeflateError,
  libdeflateRawCompress,
  libdeflateWasmBytes,
  libdeflateZlibCompress,
  wasmApi,
} from '../../../shared/raster/libdeflate.js';

const REPO = join(import.meta.dirname, '../../..');

/** A predicted float32 tile like the render path's (NDVI-like ramps with noise and nodata), 256 x 256. */
function predictedTile(seed: number): Uint8Array {
  const w = 256;
  const v = new Float32Array(w * w);
  let s = seed;
  for (let i = 0; i < v.length; i++) {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    const x = i % w;
    const y = Math.floor(i / w);
    v[i] = x < 16 && y < 16 ? -9999 : Math.sin(x / 40) * Math.cos(y / 30) * 0.8 + (s % 1000) / 20_000;
  }
  return applyFloatingPointPredictor(new Uint8Array(v.buffer), w, w, 4, 1);
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

describe('libdeflate compiled to WebAssembly (shared/raster/libdeflate.ts)', () => {
  it('writes zlib and raw streams that node:zlib inflates to the input, at every level, for every kind of block', () => {
    const blocks = [
      new Uint8Array(0),
      new Uint8Array(1),
      new Uint8Array(100_000).fill(7),
      Uint8Array.from({ length: 70_000 }, (_, i) => (i * 2_654_435_761) >>> 24),
      predictedTile(1),
    ];
    for (let level = 0; level <= 12; level++) {
      for (const b of blocks) {
        expect(Buffer.compare(inflateSync(libdeflateZlibCompress(b, level)), b), `zlib level ${level} ${b.byteLength} B`).toBe(0);
        expect(Buffer.compare(inflateRawSync(libdeflateRawCompress(b, level)), b), `raw level ${level} ${b.byteLength} B`).toBe(0);
      }
    }
  });

  it('is the DEFLATE encoder of codecs.ts, synchronous and as a promise, and of its gzip members', async () => {
    const b = predictedTile(2);
    for (const level of [1, 6, 9]) {
      const z = deflate(b, level);
      expect(Buffer.compare(z, libdeflateZlibCompress(b, level))).toBe(0);
      expect(Buffer.compare(await deflateAsync(b, level), z)).toBe(0);
    }
    const g = gzip(b, 6);
    expect(Buffer.compare(g.subarray(10, g.byteLength - 8), libdeflateRawCompress(b, 6))).toBe(0);
  });

  // Outputs are deterministic per code version: these digests are libdeflate 1.26's bytes for these inputs (the
  // same as a native build's: WebAssembly's integer semantics leave nothing to the host). A new module whose bytes
  // differ fails here, and must come with a new LIBDEFLATE_WASM_SHA256 (and so a new code version).
  it('gives the same bytes for the same block and level, call after call (the pinned digests of libdeflate 1.26)', () => {
    const b = predictedTile(3);
    const digests = [1, 6, 9].map((level) => sha(libdeflateZlibCompress(b, level)));
    expect([1, 6, 9].map((level) => sha(libdeflateZlibCompress(b, level)))).toEqual(digests);
    expect(digests).toMatchInlineSnapshot(`
      [
        "ce5fd5effac0092082cc59da74f4ea439b2df6ad21ffc592a0084e122cdcda4d",
        "b775fab4aeee2b9618f4e1e0e8f32286999f29d3421dfc1a9cbf65daee9b0529",
        "6b3fb33d40d9fa712cc5f37d2f24dbf4d2d9fde48405192b31bd7da14413d058",
      ]
    `);
  });

  it('is smaller than the input on predicted float tiles, and smaller at level 9 than at level 1', () => {
    const b = predictedTile(4);
    const l1 = libdeflateZlibCompress(b, 1).byteLength;
    const l9 = libdeflateZlibCompress(b, 9).byteLength;
    expect(l1).toBeLessThan(b.byteLength);
    expect(l9).toBeLessThan(l1);
  });

  it('refuses a level that is not a DEFLATE level, naming the range', () => {
    for (const level of [-1, 13, 1.5, Number.NaN]) {
      expect(() => libdeflateZlibCompress(new Uint8Array(10), level)).toThrow(LibdeflateError);
      expect(() => libdeflateZlibCompress(new Uint8Array(10), level)).toThrow(/use an integer from 0 to 12/);
    }
  });

  it('loads the committed module: the pinned SHA-256, no imports, the libdeflate release the build script pins', () => {
    const bytes = libdeflateWasmBytes();
    expect(sha(bytes)).toBe(LIBDEFLATE_WASM_SHA256);
    expect(sha(readFileSync(join(REPO, 'shared/raster', LIBDEFLATE_WASM_FILE)))).toBe(LIBDEFLATE_WASM_SHA256);
    expect(wasmApi.Module.imports(new wasmApi.Module(bytes))).toEqual([]);
    expect(LIBDEFLATE_VERSION).toBe(LIBDEFLATE_CRATE.libdeflate);
  });

  // The committed artifact is the source build's: libdeflate's C sources from crates.io (pinned crate and SHA-256),
  // Debian's clang 14, wasm-ld and wasi-libc. npm test's pretest installs the toolchain (scripts/emulators/
  // wasm-toolchain.mjs, as .ci/run does) or fails naming it; a bare vitest run without it leaves this one out, and
  // CI=true makes a missing toolchain a failure, never a skip.
  const buildable = toolchainPresent() || process.env.CI === 'true';
  it.runIf(buildable)(
    'is byte-identical to a fresh build from libdeflate’s sources (scripts/build-libdeflate.ts)',
    () => {
      const built = buildLibdeflateWasm();
      expect(sha256Of(built)).toBe(LIBDEFLATE_WASM_SHA256);
    },
    120_000,
  );
});
