/**
 * Builds shared/raster/libdeflate.wasm from libdeflate's C sources: the DEFLATE
 * compressor of Tessera's tiles (shared/raster/libdeflate.ts, docs/geotiff.md).
 *
 *   node scripts/node.mjs tsx scripts/build-libdeflate.ts [--check] [--json]
 *
 * The sources come from crates.io, the one registry that carries libdeflate's
 * release tree as it is: the `libdeflate-sys` crate bundles it under
 * `libdeflate/` (version and the crate's SHA-256 pinned below, so another
 * upload can never slip in). cargo fetches it (the crate cache is reused when
 * it holds it). The compiler is Debian's: `apt-get install clang lld wasi-libc
 * libclang-rt-14-dev-wasm32` (clang 14, wasm-ld, wasi-libc's malloc and memcpy,
 * compiler-rt's wasm32 builtins); .ci/run installs them.
 *
 * One line of libdeflate's sources is changed before compiling ({@link WORD_PATCH}): its
 * machine word, `size_t`, is 32 bits on wasm32, but WebAssembly has native 64-bit
 * integers, so the word is made `uint64_t` as on the 64-bit hosts GDAL runs on. The
 * compressor's bit buffer and its match extension then work 8 bytes at a time: about
 * 7% faster at level 1 and up to 5% at levels 6 and 9 on predicted NDVI blocks, the
 * same bytes (docs/benchmarks.md, "The compressor").
 *
 * The module imports nothing (no WASI call is reached: the library does no I/O),
 * so the same bytes run in every Node on linux x64 and arm64, in Lambda, Cloud
 * Functions and Azure Functions alike. The build is reproducible: the same
 * sources and the same Debian toolchain give the same bytes (--strip-all drops
 * names and the producers section; nothing path- or time-dependent remains).
 * --check rebuilds into memory and fails unless the committed artifact is
 * byte-identical (test/unit/raster/libdeflate.test.ts runs it).
 *
 * The same sources also build the native route (issue 30): a Node-API addon
 * (scripts/native/libdeflate/addon.c, Node-API 8 only, so one binary serves
 * Node 22 and 24) per Linux architecture Tessera deploys on,
 * shared/raster/libdeflate-linux-x64.node (Cloud Functions, Azure Functions)
 * and shared/raster/libdeflate-linux-arm64.node (Lambda), compiled by the same
 * Debian clang with lld, arm64 cross-compiled (--target=aarch64-linux-gnu). The
 * addon links no C library (-nostdlib, no DT_NEEDED): malloc, free, memcpy and
 * the few calls of libdeflate's CPU feature probe resolve in the node process
 * that loads it; it only needs glibc's headers to compile (x64: libc6-dev, which
 * clang pulls in; arm64: libc6-dev-arm64-cross) and the Node-API headers of the
 * npm package node-api-headers (a devDependency at an exact version). libdeflate's
 * sources are compiled as released (no word patch: size_t is 64 bits there).
 * Only the two Node-API entry points are exported (a version script), --strip-all
 * and --build-id=none leave nothing path- or time-dependent, so the build is
 * reproducible as the module's is, and --check covers the three artifacts.
 * The loader (shared/raster/libdeflate.ts) takes the addon of the running
 * platform when it is there and the WebAssembly module otherwise; the two give
 * the same bytes at every level (test/unit/raster/libdeflate-native.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { libdeflateNativeFile, wasmApi } from '../shared/raster/libdeflate.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The crate that carries libdeflate's sources, and its registry checksum (Cargo.lock's `checksum`). */
export const LIBDEFLATE_CRATE = {
  name: 'libdeflate-sys',
  version: '1.26.1',
  sha256: 'd7870e5fbd2766179a937c725fb11f4ca0ef025d982beb61bd3ce755425bd19c',
  /** The libdeflate release inside it (libdeflate.h LIBDEFLATE_VERSION_STRING). */
  libdeflate: '1.26',
} as const;

/** Where the artifact lives, beside its loader. */
export const WASM_PATH = join(ROOT, 'shared/raster/libdeflate.wasm');

/** The compressor's translation units (no decompressor, no gzip/crc32: Tessera writes zlib streams and raw DEFLATE). */
const SOURCES = ['lib/utils.c', 'lib/adler32.c', 'lib/deflate_compress.c', 'lib/zlib_compress.c'];

/**
 * The one change to libdeflate's sources: its machine word (common_defs.h) is `size_t`, 32 bits on wasm32;
 * WebAssembly's i64 is native, so the word is made 64 bits, as on x86-64 and arm64. Nothing in libdeflate takes
 * the word for a pointer or a size (it is the bit buffer's and the match extension's unit), so the output is the
 * same bytes (test/unit/raster/libdeflate.test.ts pins them).
 */
export const WORD_PATCH = {
  file: 'common_defs.h',
  from: 'typedef size_t machine_word_t;',
  to: 'typedef uint64_t machine_word_t; /* Tessera: 64-bit word on wasm32 (scripts/build-libdeflate.ts) */',
} as const;

/** The native addons' Node-API glue, compiled with the compressor's sources. */
const ADDON_SOURCE = join(ROOT, 'scripts/native/libdeflate/addon.c');

/** The Node-API headers: the npm package node-api-headers, at the exact version package.json pins. */
const NODE_API_HEADERS = { name: 'node-api-headers', version: '1.9.0' } as const;

/**
 * The native targets: the platform key the loader matches (`${process.platform}-${process.arch}`), clang's target,
 * libdeflate's CPU feature probe for that architecture (its adler32 picks AVX2 or NEON dot products at run time; the
 * compressor's output does not depend on it), glibc's headers for that target, and the ELF machine the result must be.
 */
export const NATIVE_TARGETS = {
  'linux-x64': {
    triple: 'x86_64-linux-gnu',
    cpuFeatures: 'lib/x86/cpu_features.c',
    include: ['/usr/include/x86_64-linux-gnu', '/usr/include'],
    headerPackage: 'libc6-dev',
    elfMachine: 0x3e,
  },
  'linux-arm64': {
    triple: 'aarch64-linux-gnu',
    cpuFeatures: 'lib/arm/cpu_features.c',
    include: ['/usr/aarch64-linux-gnu/include'],
    headerPackage: 'libc6-dev-arm64-cross',
    elfMachine: 0xb7,
  },
} as const;
export type NativeBuildTarget = keyof typeof NATIVE_TARGETS;

/** Where each native artifact lives: beside its loader, named as the loader looks for it. */
export const nativePath = (target: NativeBuildTarget): string => join(ROOT, 'shared/raster', libdeflateNativeFile(target));

const NATIVE_INSTALL_HINT = 'apt-get install clang lld libc6-dev libc6-dev-arm64-cross (Debian 12), and npm ci (node-api-headers)';

/** What the loader calls (shared/raster/libdeflate.ts). */
const EXPORTS = [
  'malloc',
  'free',
  'libdeflate_alloc_compressor',
  'libdeflate_free_compressor',
  'libdeflate_zlib_compress',
  'libdeflate_zlib_compress_bound',
  'libdeflate_deflate_compress',
  'libdeflate_deflate_compress_bound',
];

/** Debian's paths: the wasi-libc sysroot (/usr/include/wasm32-wasi, /usr/lib/wasm32-wasi) and compiler-rt's builtins. */
const SYSROOT = '/usr';
const TOOLCHAIN_FILES = ['/usr/lib/wasm32-wasi/libc.a', '/usr/bin/wasm-ld'];
const INSTALL_HINT = 'apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32 (Debian 12)';

export class LibdeflateBuildError extends Error {
  override readonly name = 'LibdeflateBuildError';
}

/** Whether Debian's clang, wasm-ld, wasi-libc and the wasm32 builtins are installed. */
export function toolchainPresent(): boolean {
  if (!TOOLCHAIN_FILES.every((f) => existsSync(f))) return false;
  try {
    const rt = execFileSync('clang', ['--target=wasm32-wasi', '--print-libgcc-file-name'], { encoding: 'utf8' }).trim();
    return existsSync(rt);
  } catch {
    return false;
  }
}

function cargoHome(): string {
  return process.env.CARGO_HOME ?? join(homedir(), '.cargo');
}

/** The crate file in cargo's cache, if there. */
function cachedCrate(): string | undefined {
  const cache = join(cargoHome(), 'registry', 'cache');
  if (!existsSync(cache)) return undefined;
  for (const index of readdirSync(cache)) {
    const file = join(cache, index, `${LIBDEFLATE_CRATE.name}-${LIBDEFLATE_CRATE.version}.crate`);
    if (existsSync(file)) return file;
  }
  return undefined;
}

/** The pinned crate's bytes: from cargo's cache, else fetched by cargo from crates.io. Checked against the pinned SHA-256. */
function crateBytes(): Buffer {
  let file = cachedCrate();
  if (file === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-libdeflate-fetch-'));
    try {
      writeFileSync(
        join(dir, 'Cargo.toml'),
        `[package]\nname = "fetch-libdeflate"\nversion = "0.0.0"\nedition = "2021"\n\n[lib]\npath = "lib.rs"\n\n` +
          `[dependencies]\n${LIBDEFLATE_CRATE.name} = "=${LIBDEFLATE_CRATE.version}"\n`,
      );
      writeFileSync(join(dir, 'lib.rs'), '');
      execFileSync('cargo', ['fetch', '--quiet'], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (e) {
      throw new LibdeflateBuildError(
        `cargo could not fetch ${LIBDEFLATE_CRATE.name} ${LIBDEFLATE_CRATE.version} from crates.io (${e instanceof Error ? e.message : String(e)}); ` +
          'install Rust (cargo) and reach crates.io, or put the crate in cargo’s cache',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    file = cachedCrate();
    if (file === undefined)
      throw new LibdeflateBuildError(
        `cargo fetched, but ${LIBDEFLATE_CRATE.name}-${LIBDEFLATE_CRATE.version}.crate is not in ${cargoHome()}/registry/cache`,
      );
  }
  const bytes = readFileSync(file);
  const got = createHash('sha256').update(bytes).digest('hex');
  if (got !== LIBDEFLATE_CRATE.sha256) {
    throw new LibdeflateBuildError(`${file} has SHA-256 ${got}, not the pinned ${LIBDEFLATE_CRATE.sha256}; delete it and fetch again`);
  }
  return bytes;
}

/** Unpacks the pinned, checked sources into a scratch folder, hands `build` libdeflate's folder, and removes it after. */
function withSources<T>(build: (src: string) => T): T {
  const crate = crateBytes();
  const dir = mkdtempSync(join(tmpdir(), 'tessera-libdeflate-'));
  try {
    const tarball = join(dir, 'crate.tar.gz');
    writeFileSync(tarball, crate);
    execFileSync('tar', ['-xzf', tarball, '-C', dir]);
    const src = join(dir, `${LIBDEFLATE_CRATE.name}-${LIBDEFLATE_CRATE.version}`, 'libdeflate');
    const header = readFileSync(join(src, 'libdeflate.h'), 'utf8');
    if (!header.includes(`#define LIBDEFLATE_VERSION_STRING\t"${LIBDEFLATE_CRATE.libdeflate}"`)) {
      throw new LibdeflateBuildError(`the crate does not carry libdeflate ${LIBDEFLATE_CRATE.libdeflate}`);
    }
    return build(src);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Compiles the pinned sources to the module's bytes (in a scratch folder, removed after). */
export function buildLibdeflateWasm(): Uint8Array {
  if (!toolchainPresent()) throw new LibdeflateBuildError(`the wasm32 toolchain is missing: ${INSTALL_HINT}`);
  return withSources((src) => {
    const defs = join(src, WORD_PATCH.file);
    const text = readFileSync(defs, 'utf8');
    if (text.split(WORD_PATCH.from).length !== 2) {
      throw new LibdeflateBuildError(`${WORD_PATCH.file} does not declare the machine word as expected (${WORD_PATCH.from})`);
    }
    writeFileSync(defs, text.replace(WORD_PATCH.from, WORD_PATCH.to));
    const out = join(src, 'libdeflate.wasm');
    execFileSync(
      'clang',
      [
        '--target=wasm32-wasi',
        `--sysroot=${SYSROOT}`,
        '-O2',
        '-msimd128',
        '-mbulk-memory',
        '-DNDEBUG',
        // Relative paths only, so the scratch folder's name appears nowhere.
        '-I.',
        '-nostartfiles',
        '-Wl,--no-entry',
        '-Wl,--strip-all',
        '-Wl,--gc-sections',
        '-Wl,-z,stack-size=262144',
        ...EXPORTS.map((e) => `-Wl,--export=${e}`),
        ...SOURCES,
        '-o',
        out,
      ],
      { cwd: src, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const wasm = new Uint8Array(readFileSync(out));
    const imports = wasmApi.Module.imports(new wasmApi.Module(wasm));
    if (imports.length > 0) {
      throw new LibdeflateBuildError(
        `libdeflate.wasm imports ${imports.map((i) => `${i.module}.${i.name}`).join(', ')}; it must import nothing`,
      );
    }
    return wasm;
  });
}

/** The node-api-headers package's include folder, if installed at the pinned version. */
function nodeApiInclude(): string | undefined {
  const dir = join(ROOT, 'node_modules', NODE_API_HEADERS.name);
  if (!existsSync(join(dir, 'package.json'))) return undefined;
  const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: string };
  return version === NODE_API_HEADERS.version ? join(dir, 'include') : undefined;
}

/** Whether clang, lld, the target's glibc headers and the Node-API headers are there for a native build. */
export function nativeToolchainPresent(target: NativeBuildTarget): boolean {
  if (nodeApiInclude() === undefined || !existsSync('/usr/bin/ld.lld')) return false;
  if (!NATIVE_TARGETS[target].include.some((d) => existsSync(join(d, 'stdlib.h')))) return false;
  try {
    execFileSync('clang', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The ELF e_machine of `bytes`, or undefined if they are not an ELF file. */
export function elfMachine(bytes: Uint8Array): number | undefined {
  if (bytes.byteLength < 20 || bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c || bytes[3] !== 0x46) return undefined;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).readUInt16LE(18);
}

/**
 * Compiles the pinned sources and the Node-API glue to `target`'s addon (in a scratch folder, removed after): a
 * shared object that exports the two Node-API entry points and nothing else, and needs no library.
 */
export function buildLibdeflateNative(target: NativeBuildTarget): Uint8Array {
  const t = NATIVE_TARGETS[target];
  const napi = nodeApiInclude();
  if (napi === undefined || !nativeToolchainPresent(target)) {
    throw new LibdeflateBuildError(`the ${target} toolchain is missing (${t.headerPackage} for its headers): ${NATIVE_INSTALL_HINT}`);
  }
  return withSources((src) => {
    // Relative paths only, so the scratch folder's name appears nowhere (nor would it: no debug info is emitted).
    cpSync(napi, join(src, 'node-api'), { recursive: true });
    writeFileSync(join(src, 'addon.c'), readFileSync(ADDON_SOURCE));
    writeFileSync(join(src, 'exports.map'), '{\n  global: napi_register_module_v1; node_api_module_get_api_version_v1;\n  local: *;\n};\n');
    const resource = execFileSync('clang', ['-print-resource-dir'], { encoding: 'utf8' }).trim();
    const out = `libdeflate-${target}.node`;
    execFileSync(
      'clang',
      [
        `--target=${t.triple}`,
        // Clang's own headers and the target's glibc headers, nothing of the host's by accident.
        '-nostdinc',
        '-isystem',
        join(resource, 'include'),
        ...t.include.flatMap((d) => ['-isystem', d]),
        '-I.',
        '-Inode-api',
        '-O2',
        '-DNDEBUG',
        '-fPIC',
        '-fvisibility=hidden',
        '-fno-stack-protector',
        '-ffunction-sections',
        '-fdata-sections',
        '-shared',
        '-nostdlib',
        '-fuse-ld=lld',
        '-Wl,--version-script=exports.map',
        '-Wl,--gc-sections',
        '-Wl,--strip-all',
        '-Wl,--build-id=none',
        '-Wl,-z,relro,-z,now',
        ...SOURCES,
        t.cpuFeatures,
        'addon.c',
        '-o',
        out,
      ],
      { cwd: src, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const bytes = new Uint8Array(readFileSync(join(src, out)));
    if (elfMachine(bytes) !== t.elfMachine) {
      throw new LibdeflateBuildError(`${out} is not an ELF shared object for ${target} (machine ${elfMachine(bytes) ?? 'none'})`);
    }
    return bytes;
  });
}

export const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

interface ArtifactResult {
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
  readonly committed: string | undefined;
  readonly identical: boolean;
}

function writeOrCheck(path: string, built: Uint8Array, check: boolean): ArtifactResult {
  const digest = sha256(built);
  const committed = existsSync(path) ? sha256(readFileSync(path)) : undefined;
  if (!check) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, built);
  }
  return { path, bytes: built.byteLength, sha256: digest, committed, identical: committed === digest };
}

function main(argv: readonly string[]): void {
  const check = argv.includes('--check');
  const json = argv.includes('--json');
  if (argv.includes('--help')) {
    console.log(
      'usage: node scripts/node.mjs tsx scripts/build-libdeflate.ts [--check] [--json]\n' +
        `  builds ${WASM_PATH} from ${LIBDEFLATE_CRATE.name} ${LIBDEFLATE_CRATE.version} (libdeflate ${LIBDEFLATE_CRATE.libdeflate}) with ${INSTALL_HINT},\n` +
        `  and the native addons ${Object.keys(NATIVE_TARGETS)
          .map((t) => nativePath(t as NativeBuildTarget))
          .join(', ')} with ${NATIVE_INSTALL_HINT}\n` +
        '  --check  rebuild in memory and fail unless every committed artifact is byte-identical\n' +
        '  --json   print the result as JSON',
    );
    return;
  }
  const artifacts = [
    writeOrCheck(WASM_PATH, buildLibdeflateWasm(), check),
    ...(Object.keys(NATIVE_TARGETS) as NativeBuildTarget[]).map((t) => writeOrCheck(nativePath(t), buildLibdeflateNative(t), check)),
  ];
  if (json) console.log(JSON.stringify({ libdeflate: LIBDEFLATE_CRATE.libdeflate, artifacts }));
  else
    for (const a of artifacts)
      console.log(
        `${check ? 'checked' : 'wrote'} ${a.path}: ${a.bytes} bytes, sha256 ${a.sha256}${check ? (a.identical ? ' (identical)' : ` (committed: ${a.committed ?? 'none'})`) : ''}`,
      );
  const differ = artifacts.filter((a) => !a.identical);
  if (check && differ.length > 0) {
    console.error(
      `${differ.map((a) => a.path).join(', ')} differ${differ.length === 1 ? 's' : ''} from the source build: run node scripts/node.mjs tsx scripts/build-libdeflate.ts ` +
        'and update LIBDEFLATE_WASM_SHA256 / LIBDEFLATE_NATIVE in shared/raster/libdeflate.ts',
    );
    process.exitCode = 1;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    main(process.argv.slice(2));
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exitCode = 1;
  }
}
