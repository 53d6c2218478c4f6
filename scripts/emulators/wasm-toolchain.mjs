// Debian's clang 14, lld (wasm-ld), wasi-libc and compiler-rt's wasm32 builtins: the toolchain that rebuilds
// shared/raster/libdeflate.wasm from libdeflate's sources (scripts/build-libdeflate.ts), which the unit test compares
// byte for byte with the committed module. Like Chromium and GDAL: installed with apt-get when this runs as root on a
// machine without it (npm test's pretest and .ci/run), else only checked, failing with the command to run; so npm
// test never skips that check. The checks are build-libdeflate.ts's toolchainPresent(), in plain JavaScript.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const PACKAGES = ['clang', 'lld', 'wasi-libc', 'libclang-rt-14-dev-wasm32'];
const HINT = `install the wasm toolchain as root: apt-get update && apt-get install -y ${PACKAGES.join(' ')}`;

function toolchainReady() {
  if (!['/usr/lib/wasm32-wasi/libc.a', '/usr/bin/wasm-ld'].every((f) => existsSync(f))) return false;
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
  if (!toolchainReady()) throw new Error(`no wasm32 toolchain for the libdeflate rebuild check: ${HINT}`);
}
