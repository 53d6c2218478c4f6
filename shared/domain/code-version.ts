import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The code version every job key binds: the package version plus a digest of
 * the render path, the source files whose bytes decide a tile's bytes.
 *
 * Why a digest of the sources and not a config string: a config string is
 * bumped by hand, so new band math or a new encoder deployed without a bump
 * kept every key, and messages already queued ran on the new code under the
 * old keys. The digest changes whenever any file on the render path changes,
 * and is the same wherever the same files run: scripts/build-functions.ts
 * computes it with {@link computeCodeVersion} and fixes it in every bundle
 * (esbuild `define` of `__TESSERA_CODE_VERSION__`), and a process running
 * from source (tsx, vitest, the local backend) computes it from the same
 * files the same way, so the local backend, the tests and a cloud build of
 * the same tree agree. See docs/architecture.md, "The code version".
 */

/**
 * Where the render path starts: the tile's three steps (reads, band math,
 * encoder, through their imports), the defaults of the parameters they apply
 * (nodata, block size, compression) and the window geometry. The closure
 * follows value imports only (`import type` leaves no code in a bundle), so
 * the gates (claim, write, commit) can change without changing any key.
 */
export const RENDER_PATH_ROOTS = ['shared/app/render-tile.ts', 'shared/domain/tiling-params.ts', 'shared/domain/tile-grid.ts'] as const;

/** Replaced by the build with the version computed at build time; undefined when running from source. */
declare const __TESSERA_CODE_VERSION__: string | undefined;

/** The name the build's esbuild `define` replaces. */
export const CODE_VERSION_DEFINE = '__TESSERA_CODE_VERSION__';

// `import x from './y.js'`, `export * from './y.js'`, `import './y.js'`: group 1 is `type` for type-only ones.
const IMPORT =
  /(?:^|\n)\s*(?:import|export)(\s+type\b)?[^'";]*?\bfrom\s+['"](\.{1,2}\/[^'"]+)['"]|(?:^|\n)\s*import\s+['"](\.{1,2}\/[^'"]+)['"]/g;

/**
 * The repository files of the render path, sorted: the roots and every file
 * they reach by relative value imports (`./x.js` resolves to `./x.ts`).
 * `read` returns a file's text by repository-relative path, or undefined.
 */
export function renderPathFiles(read: (path: string) => string | undefined, roots: readonly string[] = RENDER_PATH_ROOTS): string[] {
  const seen = new Set<string>();
  const todo = [...roots];
  while (todo.length > 0) {
    const file = todo.pop() as string;
    if (seen.has(file)) continue;
    const text = read(file);
    if (text === undefined) throw new Error(`code version: ${file} is on the render path but cannot be read`);
    seen.add(file);
    for (const m of text.matchAll(IMPORT)) {
      if (m[1] !== undefined) continue;
      const spec = (m[2] ?? m[3]) as string;
      const target = posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, '.ts');
      todo.push(target);
    }
  }
  return [...seen].sort();
}

/**
 * `<package version>+<16 hex digits>`: SHA-256 over the package version and,
 * for every render path file in order, its path and its bytes.
 *
 * @example
 * computeCodeVersion('/work/main') // '0.1.0+3f9c2a7d1e0b5c44'
 */
export function computeCodeVersion(root: string, read: (path: string) => string | undefined = fileReader(root)): string {
  const pkg = read('package.json');
  const version = pkg === undefined ? undefined : (JSON.parse(pkg) as { version?: unknown }).version;
  if (typeof version !== 'string' || version === '') throw new Error(`code version: ${root}/package.json has no version`);
  const hash = createHash('sha256').update(`tessera ${version}\n`);
  for (const file of renderPathFiles(read)) hash.update(`${file}\0${read(file) as string}\0`);
  return `${version}+${hash.digest('hex').slice(0, 16)}`;
}

function fileReader(root: string): (path: string) => string | undefined {
  return (path) => {
    const full = posix.join(root, path);
    return existsSync(full) ? readFileSync(full, 'utf8') : undefined;
  };
}

let running: string | undefined;

/** The code version of this process: fixed by the build, or computed once from the source tree. */
export function codeVersion(): string {
  running ??=
    typeof __TESSERA_CODE_VERSION__ === 'string'
      ? __TESSERA_CODE_VERSION__
      : computeCodeVersion(fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, ''));
  return running;
}
