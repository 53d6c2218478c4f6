import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import type { Plugin } from 'esbuild';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { PageAssets } from './http-server.js';

/** The repository root (cli/view/ is two levels down). */
const ROOT = resolve(import.meta.dirname, '..', '..');
/** The page's sources: everything under it is bundled, and hashed for the cache. */
const PAGE_DIR = join(import.meta.dirname, 'page');
/** The one type file the page shares with the server. */
const SHARED_TYPES = join(import.meta.dirname, 'view-config.ts');
/** Built bundles, one folder per hash of their inputs: npm's usual cache folder, so `npm ci` starts it afresh. */
export const VIEW_CACHE_DIR = join(ROOT, 'node_modules', '.cache', 'tessera-view');

/** Where a package may ship the built page, beside the code that serves it. */
export const PREBUILT_DIR = 'view-bundle';
/** The npm packages the page is built from; their versions are part of the cache key. */
const PAGE_PACKAGES = ['ol', 'pmtiles', 'proj4', 'esbuild'] as const;

export interface ViewBundle extends PageAssets {
  /** True when the bundle came from the cache, false when this call built it. */
  readonly cached: boolean;
  /** Milliseconds spent building (0 from the cache). */
  readonly buildMs: number;
  readonly dir: string;
}

/**
 * The page's bundle (one minified ES module and one stylesheet), built with esbuild from cli/view/page/ and the npm
 * packages it imports (OpenLayers, pmtiles, proj4, and geotiff.js as OpenLayers pins it), on first use and cached
 * under node_modules/.cache/tessera-view/<hash>/: the hash covers the page's sources and the packages' versions, so
 * an edit or an upgrade builds again and nothing stale is served. Nothing comes from a CDN: the server sends these
 * bytes. Two processes building at once each write their own folder and rename it into place; the loser's rename
 * fails on the existing folder and it uses the winner's (same inputs, same bytes).
 */
export async function viewBundle(): Promise<ViewBundle> {
  // A package that ships the page prebuilt (view.js and view.css beside the code, `view-bundle/`) serves it as it is.
  const prebuilt = join(import.meta.dirname, PREBUILT_DIR);
  if (!existsSync(PAGE_DIR) && existsSync(join(prebuilt, 'view.js')) && existsSync(join(prebuilt, 'view.css'))) {
    return { ...read(prebuilt, 'prebuilt'), cached: true, buildMs: 0, dir: prebuilt };
  }
  if (!existsSync(PAGE_DIR)) {
    throw new InvalidParamsError(
      `tessera view builds its page from cli/view/page/ with esbuild, and ${PAGE_DIR} is not there (an installed package ` +
        'ships neither): run `tessera view` from a clone of the repository after `npm ci` (docs/packages.md)',
    );
  }
  const hash = inputHash();
  const dir = join(VIEW_CACHE_DIR, hash);
  if (existsSync(join(dir, 'view.js')) && existsSync(join(dir, 'view.css'))) return { ...read(dir, hash), cached: true, buildMs: 0, dir };
  const started = performance.now();
  const tmp = `${dir}.tmp-${process.pid}-${Date.now().toString(36)}`;
  mkdirSync(tmp, { recursive: true });
  try {
    const esbuild = await import('esbuild');
    await esbuild.build({
      absWorkingDir: ROOT,
      entryPoints: { view: join(PAGE_DIR, 'main.ts') },
      outdir: tmp,
      bundle: true,
      minify: true,
      format: 'esm',
      platform: 'browser',
      target: ['es2022'],
      sourcemap: false,
      legalComments: 'eof',
      logLevel: 'silent',
      tsconfig: join(PAGE_DIR, 'tsconfig.json'),
      plugins: [geotiffAsOlResolvesIt],
    });
    try {
      renameSync(tmp, dir);
    } catch (error) {
      if (!existsSync(join(dir, 'view.js'))) throw error;
      rmSync(tmp, { recursive: true, force: true });
    }
  } catch (error) {
    rmSync(tmp, { recursive: true, force: true });
    throw error;
  }
  // Bundles of earlier sources or packages are never served again: keep only this one.
  for (const old of readdirSync(VIEW_CACHE_DIR)) {
    if (old !== hash && !old.includes('.tmp-')) rmSync(join(VIEW_CACHE_DIR, old), { recursive: true, force: true });
  }
  return { ...read(dir, hash), cached: false, buildMs: Math.round(performance.now() - started), dir };
}

function read(dir: string, hash: string): PageAssets {
  return { js: readFileSync(join(dir, 'view.js')), css: readFileSync(join(dir, 'view.css')), hash };
}

const OL_DIR = join(ROOT, 'node_modules', 'ol');

/**
 * One geotiff.js in the bundle: the page's value probe imports `geotiff` as OpenLayers resolves it (OpenLayers pins
 * its own copy when the project's differs), so both read COGs with the same code.
 */
const geotiffAsOlResolvesIt: Plugin = {
  name: 'geotiff-as-ol-resolves-it',
  setup(build) {
    build.onResolve({ filter: /^geotiff$/ }, async (args) => {
      if (args.pluginData === 'from-ol') return undefined;
      return build.resolve('geotiff', { resolveDir: OL_DIR, kind: args.kind, pluginData: 'from-ol' });
    });
  },
};

/** The folder of the geotiff package OpenLayers resolves. */
function geotiffOfOl(): string {
  const fromOl = createRequire(join(OL_DIR, 'package.json'));
  // Its `exports` hide package.json: walk up from its entry point to the folder whose package.json names it.
  let dir = dirname(fromOl.resolve('geotiff'));
  while (dirname(dir) !== dir && !isGeotiffPackage(dir)) dir = dirname(dir);
  return dir;
}

function isGeotiffPackage(dir: string): boolean {
  const file = join(dir, 'package.json');
  return existsSync(file) && (JSON.parse(readFileSync(file, 'utf8')) as { name?: string }).name === 'geotiff';
}

function inputHash(): string {
  const h = createHash('sha256');
  const files = [SHARED_TYPES, ...walk(PAGE_DIR)].sort();
  for (const f of files) h.update(relative(ROOT, f)).update('\0').update(readFileSync(f)).update('\0');
  const req = createRequire(join(ROOT, 'package.json'));
  for (const pkg of PAGE_PACKAGES) h.update(`${pkg}@${(req(`${pkg}/package.json`) as { version: string }).version}\0`);
  h.update(`geotiff@${(JSON.parse(readFileSync(join(geotiffOfOl(), 'package.json'), 'utf8')) as { version: string }).version}`);
  return h.digest('hex').slice(0, 16);
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [path];
  });
}
