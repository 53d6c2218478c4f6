// Debian's clang 14, lld (wasm-ld), wasi-libc and compiler-rt's wasm32 builtins: the toolchain that rebuilds
// shared/raster/libdeflate.wasm from libdeflate's sources (scripts/build-libdeflate.ts), which the unit test compares
// byte for byte with the committed module; with glibc's headers (libc6-dev, which clang pulls in, and
// libc6-dev-arm64-cross) the same clang and lld rebuild the native addons
// shared/raster/libdeflate-linux-{x64,arm64}.node, which test/unit/raster/libdeflate-native.test.ts compares likewise.
// Like Chromium and GDAL: installed with apt-get when this runs as root on a machine without it (npm test's pretest
// and .ci/run), else only checked, failing with the command to run; so npm test never skips those checks. The checks
// are build-libdeflate.ts's toolchainPresent() and the headers and linker its nativeToolchainPresent() looks for, in
// plain JavaScript.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const PACKAGES = ['clang', 'lld', 'wasi-libc', 'libclang-rt-14-dev-wasm32', 'libc6-dev-arm64-cross'];
/** glibc's headers for the native addons: x64 (libc6-dev) and arm64 (libc6-dev-arm64-cross), and lld's ELF linker. */
const NATIVE_FILES = ['/usr/include/stdlib.h', '/usr/aarch64-linux-gnu/include/stdlib.h', '/usr/bin/ld.lld'];
const HINT = `install the toolchain as root: apt-get update && apt-get install -y ${PACKAGES.join(' ')}`;

function toolchainReady() {
  if (![...NATIVE_FILES, '/usr/lib/wasm32-wasi/libc.a', '/usr/bin/wasm-ld'].every((f) => existsSync(f))) return false;
  try {
    const rt = execFileSync('clang', ['--target=wasm32-wasi', '--print-libgcc-file-name'], { encoding: 'utf8' }).trim();
    return existsSync(rt);
  } catch {
    return false;
  }
}

export async function install() {
  if (toolchainReady()) return;
  if (process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    console.error(`[emulators] installing ${PACKAGES.join(' ')} with apt-get`);
    execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '-qq', ...PACKAGES], { stdio: ['ignore', 'ignore', 'inherit'], env });
  }
  if (!toolchainReady()) throw new Error(`no wasm32 or native toolchain for the libdeflate rebuild checks: ${HINT}`);
}
