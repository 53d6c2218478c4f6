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

/** Where the package ships the built page (lib/view-bundle/), beside the code that serves it. */
export const PREBUILT_DIR = 'view-bundle';
/** The page's two files, in the cache's folders and the package's. */
export const VIEW_BUNDLE_FILES = ['view.js', 'view.css'] as const;
/** The npm packages the page is built from; their versions are part of the cache key. */
const PAGE_PACKAGES = ['ol', 'pmtiles', 'proj4', 'esbuild'] as const;

/**
 * `true` in the package (scripts/build-package.ts defines it): its page is prebuilt in {@link PREBUILT_DIR}, and the
 * build from sources, with its import of esbuild (a devDependency), is dead code the package's bundle leaves out.
 * Undefined when running from source.
 */
declare const __TESSERA_VIEW_PREBUILT__: boolean | undefined;
/** The name the package build's esbuild `define` replaces. */
export const VIEW_PREBUILT_DEFINE = '__TESSERA_VIEW_PREBUILT__';

export interface ViewBundle extends PageAssets {
  /** True when the bundle came from the cache or the package, false when this call built it. */
  readonly cached: boolean;
  /** Milliseconds spent building (0 from the cache). */
  readonly buildMs: number;
  readonly dir: string;
}

/**
 * The page's bundle (one minified ES module and one stylesheet): in the installed package, the one it ships
 * prebuilt; from a checkout, built with esbuild from cli/view/page/ and the npm packages it imports (OpenLayers,
 * pmtiles, proj4, and geotiff.js as OpenLayers pins it) on first use and cached under
 * node_modules/.cache/tessera-view/<hash>/: the hash covers the page's sources, this file (the build's options) and
 * the packages' versions, so an edit or an upgrade builds again and nothing stale is served. Nothing comes from a
 * CDN: the server sends these bytes. Two processes building at once each write their own folder and rename it into
 * place; the loser's rename fails on the existing folder and it uses the winner's (same inputs, same bytes).
 */
export async function viewBundle(): Promise<ViewBundle> {
  // A ternary, not an `if`: esbuild drops the branch a defined constant rules out, and with it cachedBundle's esbuild.
  return typeof __TESSERA_VIEW_PREBUILT__ !== 'undefined' && __TESSERA_VIEW_PREBUILT__ ? prebuiltBundle() : cachedBundle();
}

/** The package's page, lib/view-bundle/ beside this code; its ETag a digest of its bytes. */
function prebuiltBundle(): ViewBundle {
  const dir = join(import.meta.dirname, PREBUILT_DIR);
  const missing = VIEW_BUNDLE_FILES.filter((f) => !existsSync(join(dir, f)));
  if (missing.length > 0) {
    throw new InvalidParamsError(
      `tessera view serves the page this package ships prebuilt, and ${missing.map((f) => join(dir, f)).join(' and ')} ` +
        `${missing.length > 1 ? 'are' : 'is'} missing: install the package again (a package built by \`npm run package\` ships them)`,
    );
  }
  const assets = read(dir, '');
  const hash = createHash('sha256').update(assets.js).update('\0').update(assets.css).digest('hex').slice(0, 16);
  return { ...assets, hash, cached: true, buildMs: 0, dir };
}

async function cachedBundle(): Promise<ViewBundle> {
  if (!existsSync(PAGE_DIR)) {
    throw new InvalidParamsError(
      `tessera view builds its page from cli/view/page/ with esbuild, and ${PAGE_DIR} is not there: run it from a clone ` +
        'of the repository after `npm ci`, or from the installed package, which ships the page prebuilt (docs/packages.md)',
    );
  }
  const hash = inputHash();
  const dir = join(VIEW_CACHE_DIR, hash);
  if (VIEW_BUNDLE_FILES.every((f) => existsSync(join(dir, f)))) return { ...read(dir, hash), cached: true, buildMs: 0, dir };
  const started = performance.now();
  const tmp = `${dir}.tmp-${process.pid}-${Date.now().toString(36)}`;
  mkdirSync(tmp, { recursive: true });
  try {
    await buildViewPage(tmp);
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

/**
 * The esbuild step: cli/view/page/ bundled into `outDir` (view.js, view.css). The same inputs give the same bytes (no
 * timestamp, no absolute path, no source map), wherever it runs: the view's cache and the package
 * (scripts/build-package.ts, which ships the result) get identical files.
 */
export async function buildViewPage(outDir: string): Promise<void> {
  const esbuild = await import('esbuild');
  await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: { view: join(PAGE_DIR, 'main.ts') },
    outdir: outDir,
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
  const files = [SHARED_TYPES, import.meta.filename, ...walk(PAGE_DIR)].sort();
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
