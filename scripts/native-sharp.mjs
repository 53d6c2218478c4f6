// sharp (libvips) for the function archives: rendered tiles (PNG, WebP, JPEG: shared/raster/image-encoder.ts) need
// its native binaries for the platform each cloud runs, which need not be this machine's (Lambda runs on arm64).
// npm installs only the running platform's optional packages, so each target's set is installed on its own, from
// the lockfile scripts/native/sharp/package-lock.json, with npm's own platform flags (npm ci --os --cpu --libc,
// the way sharp's documentation installs for another platform), into node_modules/.tessera-native/<target>/.
// From the registry like every npm package; idempotent and quick when the set is there. scripts/build-functions.ts
// copies a set into each archive whose bundle imports sharp; npm test's pretest installs both sets
// (scripts/install-emulators.mjs), so the build test finds them without a network.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
/** The lockfile every target's set is installed from. */
export const SHARP_NATIVE_LOCK_DIR = join(REPO_ROOT, 'scripts/native/sharp');
/** The Linux targets the function archives are built for: Lambda (arm64), Cloud Functions and Azure Functions (x64). */
export const SHARP_TARGETS = ['linux-x64', 'linux-arm64'];

/** The sharp version the lockfile installs (it must be the repository's own: the build checks). */
export function lockedSharpVersion() {
  const lock = JSON.parse(readFileSync(join(SHARP_NATIVE_LOCK_DIR, 'package-lock.json'), 'utf8'));
  return lock.packages['node_modules/sharp'].version;
}

/** Where a target's set lives under a repository root's node_modules. */
export function sharpNativeDir(root, target) {
  return join(root, 'node_modules', '.tessera-native', `sharp-${target}`);
}

const isReady = (dir, target) =>
  existsSync(join(dir, 'node_modules/sharp/package.json')) &&
  existsSync(join(dir, `node_modules/@img/sharp-${target}/package.json`)) &&
  existsSync(join(dir, `node_modules/@img/sharp-libvips-${target}/package.json`)) &&
  JSON.parse(readFileSync(join(dir, 'node_modules/sharp/package.json'), 'utf8')).version === lockedSharpVersion();

/**
 * Install `target`'s set under `root` (default: this repository) unless it is there already; returns its folder.
 * Throws with npm's own words when npm cannot (no registry, or a version the registry no longer serves).
 */
export function installSharpNative(target, root = REPO_ROOT) {
  if (!SHARP_TARGETS.includes(target)) throw new Error(`no sharp set for ${target}; known targets: ${SHARP_TARGETS.join(', ')}`);
  const dir = sharpNativeDir(root, target);
  if (isReady(dir, target)) return dir;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(SHARP_NATIVE_LOCK_DIR, f), join(dir, f));
  const [os, cpu] = target.split('-');
  try {
    execFileSync(
      'npm',
      ['ci', `--os=${os}`, `--cpu=${cpu}`, '--libc=glibc', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'],
      { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' },
    );
  } catch (error) {
    const stderr = error?.stderr?.toString().trim() ?? '';
    throw new Error(`installing sharp's ${target} binaries (npm ci --os=${os} --cpu=${cpu} in ${dir}) failed: ${stderr || error}`);
  }
  if (!isReady(dir, target)) throw new Error(`npm ci in ${dir} did not install sharp's ${target} binaries (@img/sharp-${target})`);
  return dir;
}

/** A package and, recursively, its dependencies (and `extra` packages with theirs), as installed in `modules`. */
function packageClosure(modules, names) {
  const seen = new Set();
  const todo = [...names];
  while (todo.length > 0) {
    const name = todo.pop();
    if (seen.has(name)) continue;
    const manifest = join(modules, name, 'package.json');
    if (!existsSync(manifest)) throw new Error(`${name} is not installed in ${modules}`);
    seen.add(name);
    todo.push(...Object.keys(JSON.parse(readFileSync(manifest, 'utf8')).dependencies ?? {}));
  }
  return [...seen].sort();
}

function filesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    const stat = statSync(path);
    if (stat.isDirectory()) out.push(...filesUnder(path));
    else if (stat.isFile()) out.push(path);
  }
  return out;
}

/**
 * The files of `target`'s set an archive ships, sorted, each as `node_modules/<package>/<path>` and its bytes: sharp,
 * its dependencies, and the target's two binary packages (@img/sharp-<target>, @img/sharp-libvips-<target>). sharp's
 * C++ sources are left out (nothing compiles at run time).
 */
export function sharpNativeFiles(target, root = REPO_ROOT) {
  const modules = join(installSharpNative(target, root), 'node_modules');
  const packages = packageClosure(modules, ['sharp', `@img/sharp-${target}`, `@img/sharp-libvips-${target}`]);
  return packages.flatMap((pkg) =>
    filesUnder(join(modules, pkg))
      .map((path) => ({ name: `node_modules/${relative(modules, path).split('\\').join('/')}`, path }))
      .filter((f) => !f.name.startsWith('node_modules/sharp/src/'))
      .map((f) => ({ name: f.name, data: readFileSync(f.path) })),
  );
}

/** npm test's pretest (scripts/install-emulators.mjs): both sets, so the build test runs without a registry. */
export async function install() {
  for (const target of SHARP_TARGETS) installSharpNative(target);
}
