import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * libdeflate's compressor as WebAssembly: the DEFLATE encoder of Tessera's
 * tiles (shared/raster/codecs.ts). libdeflate is what GDAL links; it
 * compresses a whole block in one call with no streaming state, about twice
 * as fast as zlib at the same level and usually smaller (docs/benchmarks.md,
 * "compressor"). The module is built from libdeflate's C sources by
 * scripts/build-libdeflate.ts with Debian's clang and wasi-libc; it imports
 * nothing, so the same file runs in every Node on linux x64 and arm64, and
 * WebAssembly's integer semantics make its output the same bytes everywhere.
 *
 * The file is read beside this module (or beside the bundle that inlines it:
 * scripts/build-functions.ts and scripts/build-package.ts ship it there) and
 * checked against {@link LIBDEFLATE_WASM_SHA256}. That constant is the
 * compressor's identity: this file is on the render path, so a new build of
 * the module changes the code version, and with it every key
 * (shared/domain/code-version.ts).
 */

/** The libdeflate release compiled in (scripts/build-libdeflate.ts LIBDEFLATE_CRATE). */
export const LIBDEFLATE_VERSION = '1.26';

/** SHA-256 of shared/raster/libdeflate.wasm; `--check` of the build script proves it is the source build's. */
export const LIBDEFLATE_WASM_SHA256 = 'e6fdf6284923a1b6b1062e196a831b6bd68ffdf73a925f2c694329c1ba0fec47';

/** The file's name, beside this module or its bundle. */
export const LIBDEFLATE_WASM_FILE = 'libdeflate.wasm';

/** libdeflate's levels: 0 (stored) to 12 (near-optimal parsing). */
export const LIBDEFLATE_MAX_LEVEL = 12;

export type LibdeflateErrorCode = 'LIBDEFLATE_MISSING' | 'LIBDEFLATE_CORRUPT' | 'LIBDEFLATE_LEVEL' | 'LIBDEFLATE_FAILED';

/** The compressor could not be loaded or used; the message says what to do. */
export class LibdeflateError extends Error {
  override readonly name = 'LibdeflateError';
  readonly code: LibdeflateErrorCode;
  constructor(code: LibdeflateErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.code = code;
  }
}

/** The part of the WebAssembly JS API used here (the repository's type libraries do not declare it). */
interface WasmApi {
  readonly Module: { new (bytes: Uint8Array): object; imports(module: object): { module: string; name: string }[] };
  readonly Instance: new (module: object, imports: object) => { readonly exports: unknown };
}

/** Node's WebAssembly global. */
export const wasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

interface Exports {
  readonly memory: { readonly buffer: ArrayBuffer };
  malloc(n: number): number;
  free(p: number): void;
  libdeflate_alloc_compressor(level: number): number;
  libdeflate_free_compressor(c: number): void;
  libdeflate_zlib_compress(c: number, in_: number, n: number, out: number, avail: number): number;
  libdeflate_zlib_compress_bound(c: number, n: number): number;
  libdeflate_deflate_compress(c: number, in_: number, n: number, out: number, avail: number): number;
  libdeflate_deflate_compress_bound(c: number, n: number): number;
}

let instance: Exports | undefined;
/** One compressor per level, kept for the process: allocating one costs more than compressing a small block. */
const compressors = new Map<number, number>();
/** One input and one output buffer in the module's memory, grown as blocks need. */
let inPtr = 0;
let inCap = 0;
let outPtr = 0;
let outCap = 0;

/** The module's bytes, checked. Exported for the build's and the tests' checks. */
export function libdeflateWasmBytes(): Uint8Array {
  const url = new URL(`./${LIBDEFLATE_WASM_FILE}`, import.meta.url);
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(url);
  } catch (cause) {
    throw new LibdeflateError(
      'LIBDEFLATE_MISSING',
      `[libdeflate] ${url.pathname} is missing: it ships beside the code that loads it (shared/raster/, or the bundle's folder); ` +
        'rebuild the archive (npm run build:functions) or run node scripts/node.mjs tsx scripts/build-libdeflate.ts',
      { cause },
    );
  }
  const digest = createHash('sha256').update(bytes).digest('hex');
  if (digest !== LIBDEFLATE_WASM_SHA256) {
    throw new LibdeflateError(
      'LIBDEFLATE_CORRUPT',
      `[libdeflate] ${url.pathname} has SHA-256 ${digest}, not ${LIBDEFLATE_WASM_SHA256}: it is not the module this code was built for; ` +
        'restore it from the repository, or rebuild it with scripts/build-libdeflate.ts and update LIBDEFLATE_WASM_SHA256',
    );
  }
  return bytes;
}

function load(): Exports {
  if (instance === undefined) {
    const module = new wasmApi.Module(libdeflateWasmBytes());
    instance = new wasmApi.Instance(module, {}).exports as Exports;
  }
  return instance;
}

function compressorFor(wasm: Exports, level: number): number {
  let c = compressors.get(level);
  if (c === undefined) {
    if (!Number.isInteger(level) || level < 0 || level > LIBDEFLATE_MAX_LEVEL) {
      throw new LibdeflateError(
        'LIBDEFLATE_LEVEL',
        `[libdeflate] level ${level} is not a DEFLATE level; use an integer from 0 to ${LIBDEFLATE_MAX_LEVEL}`,
      );
    }
    c = wasm.libdeflate_alloc_compressor(level);
    if (c === 0)
      throw new LibdeflateError('LIBDEFLATE_FAILED', `[libdeflate] could not allocate a level ${level} compressor (out of memory)`);
    compressors.set(level, c);
  }
  return c;
}

function reserve(wasm: Exports, n: number, m: number): void {
  // Free before allocating, so a growing block reuses the space; sizes round up to 64 KiB to grow rarely.
  const round = (x: number) => Math.ceil(Math.max(x, 1) / 65536) * 65536;
  if (inPtr === 0 || n > inCap) {
    if (inPtr !== 0) wasm.free(inPtr);
    inCap = round(n);
    inPtr = wasm.malloc(inCap);
  }
  if (outPtr === 0 || m > outCap) {
    if (outPtr !== 0) wasm.free(outPtr);
    outCap = round(m);
    outPtr = wasm.malloc(outCap);
  }
  if (inPtr === 0 || outPtr === 0) {
    if (inPtr !== 0) wasm.free(inPtr);
    if (outPtr !== 0) wasm.free(outPtr);
    inPtr = outPtr = inCap = outCap = 0;
    throw new LibdeflateError('LIBDEFLATE_FAILED', `[libdeflate] could not allocate ${n + m} bytes in the module's memory (4 GiB at most)`);
  }
}

function compress(bytes: Uint8Array, level: number, wrapper: 'zlib' | 'raw'): Uint8Array {
  const wasm = load();
  const c = compressorFor(wasm, level);
  const n = bytes.byteLength;
  const bound = wrapper === 'zlib' ? wasm.libdeflate_zlib_compress_bound(c, n) >>> 0 : wasm.libdeflate_deflate_compress_bound(c, n) >>> 0;
  reserve(wasm, n, bound);
  // After malloc: the memory may have grown, which replaces its buffer.
  new Uint8Array(wasm.memory.buffer, inPtr, n).set(bytes);
  const written =
    (wrapper === 'zlib'
      ? wasm.libdeflate_zlib_compress(c, inPtr, n, outPtr, bound)
      : wasm.libdeflate_deflate_compress(c, inPtr, n, outPtr, bound)) >>> 0;
  if (written === 0)
    throw new LibdeflateError('LIBDEFLATE_FAILED', `[libdeflate] a ${n}-byte block did not fit its own bound (${bound} bytes)`);
  return new Uint8Array(wasm.memory.buffer.slice(outPtr, outPtr + written));
}

/** A zlib stream (RFC 1950: TIFF compression 8) of `bytes` at libdeflate's `level`. */
export function libdeflateZlibCompress(bytes: Uint8Array, level: number): Uint8Array {
  return compress(bytes, level, 'zlib');
}

/** A raw DEFLATE stream (RFC 1951) of `bytes` at libdeflate's `level`. */
export function libdeflateRawCompress(bytes: Uint8Array, level: number): Uint8Array {
  return compress(bytes, level, 'raw');
}
