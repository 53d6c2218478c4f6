/**
 * `npm run build:package [-- --out <dir>] [--no-types] [--no-archives]`, and `npm run package` (the same, then
 * `npm pack` of the result: `tessera-<version>.tgz` in the working directory).
 *
 * Builds the `tessera` package users install (docs/packages.md) into `dist/npm/`:
 *
 * - `lib/`: JavaScript bundled with esbuild, as scripts/build-functions.ts bundles the handlers, one folder,
 *   code splitting, so the entries share the core:
 *   - `cli.js`, the command line (cli/main.ts), which `bin/tessera.mjs` imports after its Node version check;
 *     each command is a chunk of its own, loaded when that command runs, so `tessera --help` reads a few kB;
 *   - `index.js`, `import ... from 'tessera'`: the core and the local runtime (functions/local/index.ts);
 *   - `pulumi.js`, `import ... from 'tessera/pulumi'`: the Pulumi components (infra/components/index.ts);
 *   - `worker-entry.js`, what the local runtime forks per worker process (worker-process.ts finds it beside
 *     its own code);
 *   - `view-bundle/`, the web page `tessera view` serves (view.js, view.css), built by the view's own esbuild step
 *     (cli/view/bundle.ts buildViewPage): the package ships neither the page's sources nor esbuild.
 * - `lib/types/`: `.d.ts` files from tsc for the typed exports, at their sources' repository paths.
 * - `dist/`: the function archives (`npm run build:functions`) that the Pulumi components deploy; they find
 *   them there (infra/components/args.ts packageArchiveDir).
 * - `bin/tessera.mjs`, README.md, and a package.json written here: the repository's own manifest is not the
 *   package's (it pins two Node binaries as optional dependencies, which an installed package must not carry).
 *
 * Every package import stays an import: npm installs the dependencies. The package's
 * dependencies are the repository's that the built code (or its types) imports, and the build fails if the code
 * imports a package that is neither a dependency nor one of the optional peers (a devDependency would be missing
 * on a user's machine), dynamically or not. The code version is fixed in the bundle, as in the functions' bundles
 * (shared/domain/code-version.ts): the package ships no sources to digest.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Metafile, type Plugin } from 'esbuild';
import { buildViewPage, PREBUILT_DIR, VIEW_BUNDLE_FILES, VIEW_PREBUILT_DEFINE } from '../cli/view/bundle.js';
import { CODE_VERSION_DEFINE, computeCodeVersion } from '../shared/domain/code-version.js';
import {
  LIBDEFLATE_NATIVE,
  LIBDEFLATE_WASM_FILE,
  LIBDEFLATE_WASM_SHA256,
  type LibdeflateNativeTarget,
  libdeflateNativeFile,
} from '../shared/raster/libdeflate.js';

const REPO_ROOT = resolve(import.meta.dirname, '..');

/** The package's entry points: output name (in `lib/`) -> source, relative to the repository root. */
export const PACKAGE_ENTRIES = {
  cli: 'cli/main.ts',
  index: 'functions/local/index.ts',
  pulumi: 'infra/components/index.ts',
  'worker-entry': 'functions/local/worker-entry.ts',
} as const;
export type PackageEntry = keyof typeof PACKAGE_ENTRIES;

/** The package's subpath exports that are entries, with their types. */
const EXPORTS: Readonly<Record<string, PackageEntry>> = { '.': 'index', './pulumi': 'pulumi' };

/**
 * Optional peer dependencies: `tessera/pulumi` and the commands that run the Pulumi program under mocks
 * (`preflight`, `choose --write-stack`) import them, a user's Pulumi program already has them. Each is required at
 * the range `^<the version the repository tests with>` (its devDependencies).
 */
export const PEER_PACKAGES = ['@pulumi/pulumi', '@pulumi/aws', '@pulumi/gcp', '@pulumi/azure-native', '@pulumiverse/time'] as const;

/** The Node the package supports (the engines it declares: the repository's, `>=22`); the bundle's syntax target. */
export const PACKAGE_NODE_TARGET = 'node22';

/** The build cannot go on: the message says what is missing or wrong. */
export class PackageBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PackageBuildError';
  }
}

export interface PackageBuildOptions {
  readonly root: string;
  /** The package folder (default `<root>/dist/npm`); emptied first. */
  readonly outDir: string;
  /** Emit `.d.ts` files (default true; the slow part, run beside the archives' build). */
  readonly types?: boolean;
  /** Build the function archives the Pulumi components deploy (default true). */
  readonly archives?: boolean;
  /** Entries to build (default all). */
  readonly entries?: readonly PackageEntry[];
}

/** The page `tessera view` serves, as the package ships it (`lib/view-bundle/`). */
export interface ViewPageBuild {
  /** Its files' sizes in bytes. */
  readonly bytes: Readonly<Record<string, number>>;
  /** sha256 of view.js, then view.css: the same sources and packages give the same digest. */
  readonly sha256: string;
  readonly ms: number;
}

export interface PackageBuild {
  readonly outDir: string;
  /** The package.json written. */
  readonly manifest: PackageManifest;
  /** JavaScript output files (relative to `lib/`) and their sizes in bytes. */
  readonly outputs: Readonly<Record<string, number>>;
  /** The packages the bundle imports at run time. */
  readonly externals: readonly string[];
  /** The prebuilt page of `tessera view`; undefined without the `cli` entry. */
  readonly view: ViewPageBuild | undefined;
  readonly codeVersion: string;
  /** Declaration files written (0 without types): those the exported types reach. */
  readonly declarations: number;
  /** tsc errors in files no exported type reaches (left to `npm run typecheck`). */
  readonly ignoredTypeErrors: readonly string[];
  /** Function archives written under `dist/` (0 without archives). */
  readonly archives: number;
  readonly ms: { readonly bundle: number; readonly types: number; readonly archives: number };
}

interface RepoManifest {
  readonly version: string;
  readonly description?: string;
  readonly engines?: Readonly<Record<string, string>>;
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly devDependencies?: Readonly<Record<string, string>>;
}

/** The package.json of the package. */
export interface PackageManifest {
  readonly name: 'tessera';
  readonly version: string;
  readonly description?: string | undefined;
  readonly type: 'module';
  readonly engines: Readonly<Record<string, string>>;
  readonly bin: { readonly tessera: string };
  readonly exports: Readonly<Record<string, string | Readonly<Record<string, string>>>>;
  readonly files: readonly string[];
  readonly dependencies: Readonly<Record<string, string>>;
  readonly peerDependencies: Readonly<Record<string, string>>;
  readonly peerDependenciesMeta: Readonly<Record<string, { readonly optional: true }>>;
}

/** `@scope/name/sub` -> `@scope/name`, `name/sub` -> `name`. */
export function packageName(specifier: string): string {
  const parts = specifier.split('/');
  return (specifier.startsWith('@') ? parts.slice(0, 2) : parts.slice(0, 1)).join('/');
}

/** The peers at the ranges of the devDependencies the repository tests with. */
export function peerDependencies(repo: RepoManifest): Record<string, string> {
  return Object.fromEntries(
    PEER_PACKAGES.map((pkg) => {
      const version = repo.devDependencies?.[pkg] ?? repo.dependencies?.[pkg];
      if (version === undefined) throw new PackageBuildError(`${pkg} is a peer of the package but not in the repository's package.json`);
      return [pkg, /^\d/.test(version) ? `^${version}` : version];
    }),
  );
}

/**
 * Packages the bundle imports that a user's install would not have: neither a dependency nor a peer dependency.
 * Each with the output file that imports it.
 */
export function undeclaredImports(metafile: Metafile, repo: RepoManifest, libDir: string, root: string): string[] {
  const declared = new Set<string>([...Object.keys(repo.dependencies ?? {}), ...PEER_PACKAGES]);
  const problems = new Set<string>();
  for (const [file, output] of Object.entries(metafile.outputs)) {
    for (const imp of output.imports) {
      if (!imp.external || isBuiltin(imp.path) || imp.path.startsWith('.')) continue;
      const pkg = packageName(imp.path);
      if (declared.has(pkg)) continue;
      const where = repo.devDependencies?.[pkg] !== undefined ? 'a devDependency' : 'not in package.json';
      problems.add(`${pkg} (${where}), imported by lib/${relative(libDir, resolve(root, file))}`);
    }
  }
  return [...problems].sort();
}

/**
 * Every package import stays an import, as Node resolves it from the installed package: a deep import of a package
 * without an `exports` map (`@pulumi/aws/s3`, `@pulumi/aws/getCallerIdentity`), which TypeScript's and tsx's resolution
 * accept, gets the file Node's ES module resolution needs (`@pulumi/aws/s3/index.js`, `.../getCallerIdentity.js`).
 */
function externalPackages(root: string): Plugin {
  return {
    name: 'tessera-external-packages',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => {
        if (isBuiltin(args.path)) return { path: args.path, external: true };
        const pkg = packageName(args.path);
        const sub = args.path.slice(pkg.length + 1);
        const dir = join(root, 'node_modules', pkg);
        if (sub === '' || !existsSync(join(dir, 'package.json'))) return { path: args.path, external: true };
        const { exports } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { exports?: unknown };
        if (exports !== undefined) return { path: args.path, external: true };
        if (existsSync(join(dir, sub, 'index.js'))) return { path: `${pkg}/${sub}/index.js`, external: true };
        if (!/\.[cm]?js$/.test(sub) && existsSync(join(dir, `${sub}.js`))) return { path: `${args.path}.js`, external: true };
        return { path: args.path, external: true };
      });
    },
  };
}

async function bundle(root: string, libDir: string, entries: readonly PackageEntry[], codeVersion: string) {
  const started = Date.now();
  const result = await build({
    absWorkingDir: root,
    entryPoints: Object.fromEntries(entries.map((e) => [e, join(root, PACKAGE_ENTRIES[e])])),
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: PACKAGE_NODE_TARGET,
    outdir: libDir,
    // Every output in one folder: worker-process.ts finds worker-entry.js beside its own chunk.
    chunkNames: 'chunk-[hash]',
    plugins: [externalPackages(root)],
    sourcemap: 'linked',
    sourcesContent: false,
    // The view's page is prebuilt (lib/view-bundle/): its build from sources, and its import of esbuild, drop out.
    define: { [CODE_VERSION_DEFINE]: JSON.stringify(codeVersion), [VIEW_PREBUILT_DEFINE]: 'true' },
    metafile: true,
    logLevel: 'silent',
    legalComments: 'none',
  }).catch((e: unknown) => {
    const errors = (e as { errors?: { text: string; location?: { file: string; line: number } | null }[] }).errors;
    const detail = errors?.map((x) => `  ${x.location ? `${x.location.file}:${x.location.line}: ` : ''}${x.text}`).join('\n');
    throw new PackageBuildError(`bundling the package failed:\n${detail ?? String(e)}`);
  });
  return { metafile: result.metafile as Metafile, ms: Date.now() - started };
}

/**
 * `.d.ts` files for the typed entries with the repository's compiler options, under `lib/types/` at their sources'
 * repository paths, keeping those the entries' types reach (a user's type checker reads no other). tsc runs in a
 * child process, so the archives build beside it. An error in a file the exported types reach fails the build; one
 * elsewhere is left to `npm run typecheck` (declaration-only ones, e.g. TS2742, it does not report: they break no
 * type a user sees).
 */
async function declarations(
  root: string,
  typesDir: string,
  entries: readonly PackageEntry[],
): Promise<{ files: number; ignored: string[] }> {
  const typed = entries.filter((e) => Object.values(EXPORTS).includes(e));
  if (typed.length === 0) return { files: 0, ignored: [] };
  const configDir = join(root, 'node_modules', '.cache', `tessera-package-${process.pid}`);
  mkdirSync(configDir, { recursive: true });
  const config = join(configDir, 'tsconfig.json');
  writeFileSync(
    config,
    JSON.stringify({
      extends: join(root, 'tsconfig.json'),
      compilerOptions: {
        noEmit: false,
        declaration: true,
        emitDeclarationOnly: true,
        outDir: typesDir,
        rootDir: root,
        noUnusedLocals: false,
        noUnusedParameters: false,
      },
      files: typed.map((e) => join(root, PACKAGE_ENTRIES[e])),
      include: [],
    }),
  );
  const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  let output = '';
  try {
    await new Promise<void>((done, fail) => {
      const child = spawn(process.execPath, [tsc, '-p', config, '--pretty', 'false'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.on('data', (c: Buffer) => {
        output += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        output += c.toString();
      });
      child.on('error', fail);
      child.on('close', () => done());
    });
  } finally {
    rmSync(configDir, { recursive: true, force: true });
  }
  const reached = reachedDeclarations(
    typesDir,
    typed.map((e) => PACKAGE_ENTRIES[e].replace(/\.ts$/, '.d.ts')),
  );
  for (const file of filesUnder(typesDir)) if (!reached.has(relative(typesDir, file))) rmSync(file);
  removeEmptyFolders(typesDir);
  const errors = output
    .split('\n')
    .filter((line) => /error TS\d+:/.test(line))
    .map((line) => ({ line, file: /^(.+?)\(\d+,\d+\): error/.exec(line)?.[1] }));
  const fatal = errors.filter((e) => e.file === undefined || reached.has(relative(root, resolve(root, e.file)).replace(/\.ts$/, '.d.ts')));
  if (fatal.length > 0) {
    throw new PackageBuildError(
      `the declaration build (tsc) failed in types the package exports:\n${fatal
        .slice(0, 20)
        .map((e) => `  ${e.line}`)
        .join('\n')}${fatal.length > 20 ? `\n  ... ${fatal.length - 20} more` : ''}`,
    );
  }
  if (reached.size === 0) throw new PackageBuildError(`tsc wrote no declaration file for the entries:\n${output.slice(0, 2000)}`);
  return { files: reached.size, ignored: errors.filter((e) => !fatal.includes(e)).map((e) => e.line) };
}

/** The declaration files (relative to typesDir) the entries reach through relative imports, type imports included. */
export function reachedDeclarations(typesDir: string, entries: readonly string[]): Set<string> {
  const reached = new Set<string>();
  const todo = [...entries];
  for (let file = todo.pop(); file !== undefined; file = todo.pop()) {
    if (reached.has(file) || !existsSync(join(typesDir, file))) continue;
    reached.add(file);
    const text = readFileSync(join(typesDir, file), 'utf8');
    for (const m of text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = join(dirname(file), (m[1] as string).replace(/\.js$/, '.d.ts'));
      todo.push(target.endsWith('.d.ts') ? target : `${target}.d.ts`);
    }
  }
  return reached;
}

function removeEmptyFolders(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) removeEmptyFolders(path);
  }
  if (readdirSync(dir).length === 0) rmSync(dir, { recursive: true });
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** Bare packages the declaration files import (what a user's type checker must find), comments left out. */
export function typeImports(typesDir: string): Set<string> {
  const found = new Set<string>();
  for (const file of filesUnder(typesDir).filter((f) => f.endsWith('.d.ts'))) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (/^\s*(\*|\/\/|\/\*)/.test(line)) continue;
      for (const m of line.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)['"]([^'".][^'"]*)['"]/g)) {
        const spec = m[1] as string;
        if (!isBuiltin(spec)) found.add(packageName(spec));
      }
    }
  }
  return found;
}

/** `pg` -> `@types/pg`, `@scope/name` -> `@types/scope__name`. */
function typesPackageOf(pkg: string): string {
  return `@types/${pkg.startsWith('@') ? pkg.slice(1).replace('/', '__') : pkg}`;
}

/**
 * The package's manifest: the repository's name, version, description and engines; its dependencies those of the
 * repository that the JavaScript imports, and the type packages its declarations need; the optional peers.
 */
export function packageManifest(
  repo: RepoManifest,
  externals: ReadonlySet<string>,
  types: ReadonlySet<string> | undefined,
): PackageManifest {
  const deps = repo.dependencies ?? {};
  const peers = peerDependencies(repo);
  const wanted = new Set<string>();
  const problems: string[] = [];
  for (const pkg of externals) if (deps[pkg] !== undefined) wanted.add(pkg);
  for (const pkg of types ?? []) {
    if (peers[pkg] !== undefined) continue;
    const typesPkg = typesPackageOf(pkg);
    if (deps[typesPkg] !== undefined) wanted.add(typesPkg);
    if (deps[pkg] !== undefined) wanted.add(pkg);
    else if (deps[typesPkg] === undefined && pkg !== 'tessera')
      problems.push(
        `${pkg} (${(repo.devDependencies?.[pkg] ?? repo.devDependencies?.[typesPkg]) ? 'a devDependency' : 'not in package.json'})`,
      );
  }
  if (problems.length > 0) {
    throw new PackageBuildError(
      `the declaration files import packages a user's install would not have: ${problems.join(', ')}; ` +
        'make them dependencies (their @types/ package, for types only), or keep them out of the exported types',
    );
  }
  const exports: Record<string, string | Record<string, string>> = {};
  for (const [subpath, entry] of Object.entries(EXPORTS)) {
    const js = `./lib/${entry}.js`;
    exports[subpath] = types === undefined ? js : { types: `./lib/types/${PACKAGE_ENTRIES[entry].replace(/\.ts$/, '.d.ts')}`, default: js };
  }
  exports['./package.json'] = './package.json';
  return {
    name: 'tessera',
    version: repo.version,
    description: repo.description,
    type: 'module',
    engines: { node: repo.engines?.node ?? '>=22' },
    bin: { tessera: 'bin/tessera.mjs' },
    exports,
    files: ['bin/', 'lib/', 'dist/'],
    dependencies: Object.fromEntries([...wanted].sort().map((pkg) => [pkg, deps[pkg] as string])),
    peerDependencies: peers,
    peerDependenciesMeta: Object.fromEntries(PEER_PACKAGES.map((pkg) => [pkg, { optional: true as const }])),
  };
}

/**
 * The page `tessera view` serves, built into `dir` by the view's own esbuild step (cli/view/bundle.ts buildViewPage,
 * what a checkout's first `tessera view` runs): the bundle's chunks find it beside them (lib/view-bundle/).
 */
async function viewPage(dir: string): Promise<ViewPageBuild> {
  const started = Date.now();
  await buildViewPage(dir).catch((e: unknown) => {
    const errors = (e as { errors?: { text: string }[] }).errors;
    throw new PackageBuildError(`building the page of tessera view failed: ${errors?.map((x) => x.text).join('; ') ?? String(e)}`);
  });
  const h = createHash('sha256');
  const bytes: Record<string, number> = {};
  for (const file of VIEW_BUNDLE_FILES) {
    const data = readFileSync(join(dir, file));
    h.update(data);
    bytes[file] = data.byteLength;
  }
  return { bytes, sha256: h.digest('hex'), ms: Date.now() - started };
}

async function functionArchives(root: string, outDir: string): Promise<number> {
  // Loaded here: it imports the infra configuration, and with it @pulumi/pulumi.
  const { buildFunctions } = await import('./build-functions.js');
  const built = await buildFunctions({ root, outDir, clouds: ['aws', 'gcp', 'azure'] });
  return built.length;
}

/** Build the package folder. Fails before bundling if an entry is missing. */
export async function buildPackage(options: PackageBuildOptions): Promise<PackageBuild> {
  const { root, outDir } = options;
  const entries = options.entries ?? (Object.keys(PACKAGE_ENTRIES) as PackageEntry[]);
  const missing = entries.filter((e) => !existsSync(join(root, PACKAGE_ENTRIES[e])));
  if (missing.length > 0) {
    throw new PackageBuildError(
      `package entry point${missing.length > 1 ? 's' : ''} missing: ${missing.map((e) => `${PACKAGE_ENTRIES[e]} (${e})`).join(', ')}`,
    );
  }
  const repo = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as RepoManifest;
  const libDir = join(outDir, 'lib');
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(libDir, { recursive: true });
  const codeVersion = computeCodeVersion(root);
  const { metafile, ms: bundleMs } = await bundle(root, libDir, entries, codeVersion);
  const undeclared = undeclaredImports(metafile, repo, libDir, root);
  if (undeclared.length > 0) {
    throw new PackageBuildError(
      `the package imports packages a user's install would not have:\n${undeclared.map((u) => `  - ${u}`).join('\n')}\n` +
        `Add each to dependencies (or to the optional peers, PEER_PACKAGES here, for what only tessera/pulumi needs), or stop importing it.`,
    );
  }
  const externals = new Set<string>();
  for (const output of Object.values(metafile.outputs)) {
    for (const imp of output.imports) if (imp.external && !isBuiltin(imp.path)) externals.add(packageName(imp.path));
  }
  // The slow parts side by side: tsc in its own process, the archives' esbuild in its own, the page's esbuild.
  const typesDir = join(libDir, 'types');
  const timed = async <T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> => {
    const t = Date.now();
    return { value: await work(), ms: Date.now() - t };
  };
  const [types, archives, view] = await Promise.all([
    timed(() => ((options.types ?? true) ? declarations(root, typesDir, entries) : Promise.resolve({ files: 0, ignored: [] }))),
    timed(() => ((options.archives ?? true) ? functionArchives(root, join(outDir, 'dist')) : Promise.resolve(0))),
    entries.includes('cli') ? viewPage(join(libDir, PREBUILT_DIR)) : Promise.resolve(undefined),
  ]);

  mkdirSync(join(outDir, 'bin'), { recursive: true });
  copyFileSync(join(root, 'bin', 'tessera.mjs'), join(outDir, 'bin', 'tessera.mjs'));
  // The DEFLATE encoder's WebAssembly module and its native addons for linux x64 and arm64, beside the chunk that
  // loads them (shared/raster/libdeflate.ts reads them with `new URL(..., import.meta.url)`; every chunk is in lib/),
  // as scripts/build-functions.ts ships them: a user's machine of either platform compresses natively, any other with
  // the module. Each is checked against the SHA-256 the bundled code expects.
  if ('shared/raster/libdeflate.ts' in metafile.inputs) {
    const files: [string, string][] = [
      [LIBDEFLATE_WASM_FILE, LIBDEFLATE_WASM_SHA256],
      ...Object.entries(LIBDEFLATE_NATIVE).map(([t, { sha256 }]): [string, string] => [
        libdeflateNativeFile(t as LibdeflateNativeTarget),
        sha256,
      ]),
    ];
    for (const [file, expected] of files) {
      const data = readFileSync(join(root, 'shared/raster', file));
      const digest = createHash('sha256').update(data).digest('hex');
      if (digest !== expected)
        throw new PackageBuildError(
          `shared/raster/${file} has SHA-256 ${digest}, not the ${expected} the code expects: rebuild it (scripts/build-libdeflate.ts)`,
        );
      writeFileSync(join(libDir, file), data);
    }
  }
  if (existsSync(join(root, 'README.md'))) copyFileSync(join(root, 'README.md'), join(outDir, 'README.md'));
  const manifest = packageManifest(repo, externals, (options.types ?? true) ? typeImports(typesDir) : undefined);
  writeFileSync(join(outDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

  const outputs = Object.fromEntries(
    Object.entries(metafile.outputs).map(([file, output]) => [relative(libDir, resolve(root, file)), output.bytes]),
  );
  return {
    outDir,
    manifest,
    outputs,
    externals: [...externals].sort(),
    view,
    codeVersion,
    declarations: types.value.files,
    ignoredTypeErrors: types.value.ignored,
    archives: archives.value,
    ms: { bundle: bundleMs, types: types.ms, archives: archives.ms },
  };
}

/** `npm pack` of a built package folder into `destination`; returns the tarball's path. */
export function packTarball(packageDir: string, destination: string): string {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const r = spawnSync(npm, ['pack', packageDir, '--pack-destination', destination, '--json', '--ignore-scripts'], {
    encoding: 'utf8',
    cwd: destination,
  });
  if (r.status !== 0) throw new PackageBuildError(`npm pack ${packageDir} failed:\n${(r.stderr || r.stdout).trim().slice(0, 2000)}`);
  const [packed] = JSON.parse(r.stdout) as { filename: string }[];
  if (!packed) throw new PackageBuildError(`npm pack ${packageDir} printed no file name`);
  return join(destination, packed.filename);
}

interface CliOptions extends PackageBuildOptions {
  readonly pack: boolean;
}

/** Parse `[--out dir] [--no-types] [--no-archives] [--pack]`. */
export function parseArgs(argv: readonly string[], root: string): CliOptions {
  let outDir = join(root, 'dist', 'npm');
  let types = true;
  let archives = true;
  let pack = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--out') {
      const dir = argv[++i];
      if (!dir) throw new PackageBuildError('--out needs a folder');
      outDir = resolve(dir);
    } else if (arg === '--no-types') types = false;
    else if (arg === '--no-archives') archives = false;
    else if (arg === '--pack') pack = true;
    else
      throw new PackageBuildError(
        `unknown argument ${JSON.stringify(arg)}: usage: npm run build:package -- [--out <dir>] [--no-types] [--no-archives] [--pack]`,
      );
  }
  return { root, outDir, types, archives, pack };
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2), REPO_ROOT);
  const built = await buildPackage(options);
  const bytes = Object.entries(built.outputs)
    .filter(([f]) => f.endsWith('.js'))
    .reduce((n, [, b]) => n + b, 0);
  console.log(
    `built ${relative(process.cwd(), built.outDir) || '.'} (tessera ${built.manifest.version}, code version ${built.codeVersion}): ` +
      `${(bytes / 1024).toFixed(0)} KiB of JavaScript in ${built.ms.bundle} ms, ${built.declarations} declaration files in ${built.ms.types} ms, ` +
      `${built.archives} function archives in ${built.ms.archives} ms` +
      (built.view
        ? `, the page of tessera view (${(Object.values(built.view.bytes).reduce((n, b) => n + b, 0) / 1024).toFixed(0)} KiB, sha256 ${built.view.sha256.slice(0, 16)}) in ${built.view.ms} ms`
        : ''),
  );
  console.log(`dependencies: ${Object.keys(built.manifest.dependencies).join(', ')}`);
  if (built.ignoredTypeErrors.length > 0)
    console.warn(
      `warning: ${built.ignoredTypeErrors.length} tsc errors outside the exported types (npm run typecheck):\n  ${built.ignoredTypeErrors.join('\n  ')}`,
    );
  if (options.pack) console.log(`packed ${relative(process.cwd(), packTarball(built.outDir, process.cwd()))}`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((e: unknown) => {
    console.error(`build:package: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
}
