import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { debuglog } from 'node:util';

/**
 * libdeflate's compressor: the DEFLATE encoder of Tessera's tiles
 * (shared/raster/codecs.ts). libdeflate is what GDAL links; it compresses a
 * whole block in one call with no streaming state, about twice as fast as zlib
 * at the same level and usually smaller (docs/benchmarks.md, "The compressor").
 * Two builds of the same pinned sources, both made by scripts/build-libdeflate.ts
 * with Debian's clang (docs/geotiff.md):
 *
 * - native: a Node-API addon per platform, libdeflate-linux-x64.node (Cloud
 *   Functions, Azure Functions) and libdeflate-linux-arm64.node (Lambda), 1.3x to
 *   1.4x the module's speed (CPU time, x64). Node-API only, so one file serves
 *   Node 22 and 24 (scripts/native/libdeflate/addon.c).
 * - WebAssembly: libdeflate.wasm, which imports nothing and runs in every Node on
 *   every platform: the portable fallback and the reference.
 *
 * The first call takes the addon of the running platform when its file is there
 * (checked against {@link LIBDEFLATE_NATIVE}), else the module, and says which
 * once on Node's debug channel (`NODE_DEBUG=libdeflate`). Both give the same
 * bytes at every level (test/unit/raster/libdeflate-native.test.ts compares them
 * on x64, and on arm64 under qemu), so which one ran never changes a tile.
 *
 * The files are read beside this module (or beside the bundle that inlines it:
 * scripts/build-functions.ts and scripts/build-package.ts ship them there) and
 * checked against their SHA-256 constants below. Those constants are the
 * compressor's identity: this file is on the render path, so a new build of
 * any of them changes the code version, and with it every key
 * (shared/domain/code-version.ts). A file that is there but is not the one the
 * code was built for is an error (LIBDEFLATE_CORRUPT), never a silent fallback.
 */

/** The libdeflate release compiled in (scripts/build-libdeflate.ts LIBDEFLATE_CRATE). */
export const LIBDEFLATE_VERSION = '1.26';

/** SHA-256 of shared/raster/libdeflate.wasm; `--check` of the build script proves it is the source build's. */
export const LIBDEFLATE_WASM_SHA256 = 'e6fdf6284923a1b6b1062e196a831b6bd68ffdf73a925f2c694329c1ba0fec47';

/** The file's name, beside this module or its bundle. */
export const LIBDEFLATE_WASM_FILE = 'libdeflate.wasm';

/** The platforms (`${process.platform}-${process.arch}`) with a native addon: the Linux machines the clouds run. */
export type LibdeflateNativeTarget = 'linux-x64' | 'linux-arm64';

/** SHA-256 of each native addon, shared/raster/libdeflate-<target>.node; `--check` of the build script proves them. */
export const LIBDEFLATE_NATIVE: Readonly<Record<LibdeflateNativeTarget, { readonly sha256: string }>> = {
  'linux-x64': { sha256: 'a59b8dc0c504ae2e841d37eceb69dcbdbe1fdf91c502542ce34802eee6b349e2' },
  'linux-arm64': { sha256: 'beb8e549f75b3b50d66b09356f9d59c10acc0a9f4de6349d4f59321ccdb061ee' },
};

/** The native addon's file name for `target`, beside this module or its bundle. */
export function libdeflateNativeFile(target: LibdeflateNativeTarget): string {
  return `libdeflate-${target}.node`;
}

/** libdeflate's levels: 0 (stored) to 12 (near-optimal parsing). */
export const LIBDEFLATE_MAX_LEVEL = 12;

export type LibdeflateErrorCode =
  | 'LIBDEFLATE_MISSING'
  | 'LIBDEFLATE_CORRUPT'
  | 'LIBDEFLATE_LOAD'
  | 'LIBDEFLATE_LEVEL'
  | 'LIBDEFLATE_FAILED';

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

function checkLevel(level: number): void {
  if (!Number.isInteger(level) || level < 0 || level > LIBDEFLATE_MAX_LEVEL) {
    throw new LibdeflateError(
      'LIBDEFLATE_LEVEL',
      `[libdeflate] level ${level} is not a DEFLATE level; use an integer from 0 to ${LIBDEFLATE_MAX_LEVEL}`,
    );
  }
}

function compressorFor(wasm: Exports, level: number): number {
  let c = compressors.get(level);
  if (c === undefined) {
    checkLevel(level);
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

function wasmCompress(bytes: Uint8Array, level: number, wrapper: 'zlib' | 'raw'): Uint8Array {
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

/** One build of the compressor: both give the same bytes for the same block and level. */
export interface LibdeflateCodec {
  readonly kind: 'native' | 'wasm';
  /** A zlib stream (RFC 1950) of `bytes` at `level`. */
  zlib(bytes: Uint8Array, level: number): Uint8Array;
  /** A raw DEFLATE stream (RFC 1951) of `bytes` at `level`. */
  raw(bytes: Uint8Array, level: number): Uint8Array;
}

/** The WebAssembly build (loaded on first use): the portable one, and the reference the native builds are held to. */
export const wasmCodec: LibdeflateCodec = {
  kind: 'wasm',
  zlib: (bytes, level) => wasmCompress(bytes, level, 'zlib'),
  raw: (bytes, level) => wasmCompress(bytes, level, 'raw'),
};

/** What the addon exports (scripts/native/libdeflate/addon.c). */
interface NativeExports {
  zlibCompress(bytes: Uint8Array, level: number): Uint8Array | null;
  rawCompress(bytes: Uint8Array, level: number): Uint8Array | null;
  readonly version: string;
}

/** The platform key of this process, if it is one with a native addon. */
export function hostNativeTarget(): LibdeflateNativeTarget | undefined {
  const key = `${process.platform}-${process.arch}`;
  return key === 'linux-x64' || key === 'linux-arm64' ? key : undefined;
}

/**
 * The native addon in `file`, checked against `sha256` and loaded; undefined when there is no such file.
 * A file that is there but has another digest, or that this process cannot load, is a {@link LibdeflateError}.
 */
export function loadNativeCodec(file: URL | string, sha256: string): LibdeflateCodec | undefined {
  const path = typeof file === 'string' ? file : fileURLToPath(file);
  if (!existsSync(path)) return undefined;
  const digest = createHash('sha256').update(readFileSync(path)).digest('hex');
  if (digest !== sha256) {
    throw new LibdeflateError(
      'LIBDEFLATE_CORRUPT',
      `[libdeflate] ${path} has SHA-256 ${digest}, not ${sha256}: it is not the addon this code was built for; ` +
        'restore it from the repository (or rebuild the archive: npm run build:functions), or rebuild it with scripts/build-libdeflate.ts and update LIBDEFLATE_NATIVE',
    );
  }
  const module = { exports: {} as Partial<NativeExports> };
  try {
    process.dlopen(module, path);
  } catch (cause) {
    throw new LibdeflateError(
      'LIBDEFLATE_LOAD',
      `[libdeflate] ${path} has the right SHA-256 but this Node cannot load it (${cause instanceof Error ? cause.message : String(cause)}); ` +
        'it is built for glibc Linux and Node-API 8 (Node >= 22); remove the file to use libdeflate.wasm on this machine',
      { cause },
    );
  }
  const native = module.exports;
  if (typeof native.zlibCompress !== 'function' || typeof native.rawCompress !== 'function' || native.version !== LIBDEFLATE_VERSION) {
    throw new LibdeflateError(
      'LIBDEFLATE_LOAD',
      `[libdeflate] ${path} is not libdeflate ${LIBDEFLATE_VERSION}'s addon (version ${String(native.version)}); rebuild it with scripts/build-libdeflate.ts`,
    );
  }
  const { zlibCompress, rawCompress } = native as NativeExports;
  const run = (f: NativeExports['zlibCompress'], bytes: Uint8Array, level: number): Uint8Array => {
    checkLevel(level);
    const out = f(bytes, level);
    if (out === null)
      throw new LibdeflateError('LIBDEFLATE_FAILED', `[libdeflate] a ${bytes.byteLength}-byte block did not fit its own bound`);
    return out;
  };
  return { kind: 'native', zlib: (bytes, level) => run(zlibCompress, bytes, level), raw: (bytes, level) => run(rawCompress, bytes, level) };
}

/** The native addon of `target` beside this module or its bundle (default: this process's platform), or undefined if it has none. */
export function nativeCodec(target: LibdeflateNativeTarget | undefined = hostNativeTarget()): LibdeflateCodec | undefined {
  if (target === undefined) return undefined;
  return loadNativeCodec(new URL(`./${libdeflateNativeFile(target)}`, import.meta.url), LIBDEFLATE_NATIVE[target].sha256);
}

const debug = debuglog('libdeflate');
let active: LibdeflateCodec | undefined;

/** The build this process compresses with: the platform's native addon when its file is there, else the WebAssembly module. */
export function libdeflateCodec(): LibdeflateCodec {
  if (active === undefined) {
    const native = nativeCodec();
    const target = hostNativeTarget();
    if (native === undefined)
      debug(
        target === undefined
          ? `no native addon for ${process.platform}-${process.arch}: libdeflate ${LIBDEFLATE_VERSION} runs as WebAssembly`
          : `${libdeflateNativeFile(target)} is not beside the code: libdeflate ${LIBDEFLATE_VERSION} runs as WebAssembly`,
      );
    else debug(`libdeflate ${LIBDEFLATE_VERSION} runs natively (${libdeflateNativeFile(target as LibdeflateNativeTarget)})`);
    active = native ?? wasmCodec;
  }
  return active;
}

/** A zlib stream (RFC 1950: TIFF compression 8) of `bytes` at libdeflate's `level`. */
export function libdeflateZlibCompress(bytes: Uint8Array, level: number): Uint8Array {
  return libdeflateCodec().zlib(bytes, level);
}

/** A raw DEFLATE stream (RFC 1951) of `bytes` at libdeflate's `level`. */
export function libdeflateRawCompress(bytes: Uint8Array, level: number): Uint8Array {
  return libdeflateCodec().raw(bytes, level);
}
