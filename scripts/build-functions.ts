/**
 * `npm run build:functions [-- aws gcp azure] [--out <dir>]`
 *
 * Bundles each cloud's handlers with esbuild (ESM, for the Node major the
 * cloud's deployed runtime runs: shared/domain/runtimes.ts) into the archive
 * its platform takes, and prints the sizes. The infra program deploys these
 * archives (infra/common/packaging.ts holds the paths both sides use).
 *
 * - AWS: one Lambda zip per function (dist/aws/{scene,tile,mosaic}.zip), each
 *   `index.mjs` exporting `handler` (Lambda handler `index.handler`).
 * - GCP: dist/gcp/source.zip, a Cloud Functions source: `index.js` plus a
 *   package.json (`main`, `type: module`, the functions-framework dependency
 *   that Cloud Build installs and that the bundle must share, so it is external).
 * - Azure: dist/azure/app.zip, a run-from-package app: host.json, package.json
 *   (`main: dist/index.js`) and the bundle. `@azure/functions-core` is the only
 *   external: the Functions worker provides it.
 *
 * Nothing else is external but sharp (libvips, the encoder of rendered PNG,
 * WebP and JPEG tiles: shared/raster/image-encoder.ts), a native addon that
 * cannot be bundled: an archive whose bundle imports it ships sharp with the
 * prebuilt binaries of the platform its cloud runs (Lambda: linux-arm64,
 * LAMBDA_ARCHITECTURE; Azure Functions: linux-x64) under node_modules/, from
 * the lockfile of scripts/native/sharp (scripts/native-sharp.mjs); the Cloud
 * Functions source names it in its package.json, which Cloud Build installs on
 * the runtime's linux-x64. The local backend's native SQLite driver
 * (better-sqlite3) must not reach a cloud bundle: the build fails if it does.
 *
 * A bundle that holds the DEFLATE encoder (shared/raster/libdeflate.ts) gets
 * its files beside it: libdeflate.wasm, and the native addon of the platform
 * its cloud runs (libdeflate-linux-arm64.node for Lambda, -linux-x64.node for
 * Cloud Functions and Azure Functions), each checked against the SHA-256 the
 * code was built for, the addon also against its ELF machine.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Metafile, type Plugin } from 'esbuild';
import { ZipFile } from 'yazl';
import { CLOUDS, type Cloud, FUNCTION_ROLES } from '../infra/common/config.js';
import {
  ARCHIVES,
  AZURE_FUNCTION_NAMES,
  AZURE_QUEUES,
  AZURE_TRIGGER_CONNECTION,
  GCP_ENTRY_POINTS,
  HANDLER_ENTRIES,
  LAMBDA_ARCHITECTURE,
  REPO_ROOT,
} from '../infra/common/packaging.js';
import { CODE_VERSION_DEFINE, computeCodeVersion, RENDER_PATH_ROOTS } from '../shared/domain/code-version.js';
import { ENV } from '../shared/domain/runtime-config.js';
import { deployedNodeMajor } from '../shared/domain/runtimes.js';
import { IMAGE_CODEC } from '../shared/raster/image-encoder.js';
import {
  LIBDEFLATE_NATIVE,
  LIBDEFLATE_WASM_FILE,
  LIBDEFLATE_WASM_SHA256,
  type LibdeflateNativeTarget,
  libdeflateNativeFile,
} from '../shared/raster/libdeflate.js';
import { lockedSharpVersion, type SharpTarget, sharpNativeFiles } from './native-sharp.mjs';

/** The module whose `codeVersion()` the build's define fixes. */
const CODE_VERSION_MODULE = 'shared/domain/code-version.ts';
/** Modules that only the local backend may use: its SQLite driver (and the native one it replaced). */
const LOCAL_ONLY = ['node:sqlite', 'better-sqlite3'];
/** A fixed timestamp for every zip entry: the same code gives the same bytes, so Pulumi sees no change. */
const ZIP_MTIME = new Date('2020-01-01T00:00:00Z');
/** Lambda refuses a directly uploaded zip above 50 MB. */
const LAMBDA_DIRECT_UPLOAD_LIMIT = 50 * 1024 * 1024;

/** The build cannot go on: the message says what is missing or wrong. */
export class BuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BuildError';
  }
}

export interface BuildOptions {
  /** Repository root the entry points are relative to. */
  readonly root: string;
  /** Where the archives go (default `<root>/dist`). */
  readonly outDir: string;
  readonly clouds: readonly Cloud[];
  /**
   * Load each bundle once (in a child process, without credentials) and check
   * it exports or registers what infra/ deploys. Default true.
   */
  readonly verify?: boolean;
}

export interface BuiltArchive {
  readonly cloud: Cloud;
  readonly path: string;
  readonly bytes: number;
  /** Files in the zip, in order. */
  readonly entries: readonly string[];
}

/** Entry points (relative to the root) a cloud's build needs. */
export function requiredEntries(cloud: Cloud): string[] {
  switch (cloud) {
    case 'aws':
      return FUNCTION_ROLES.map((role) => HANDLER_ENTRIES.aws[role]);
    case 'gcp':
      return [HANDLER_ENTRIES.gcp];
    case 'azure':
      return [HANDLER_ENTRIES.azure, HANDLER_ENTRIES.azureHostJson];
  }
}

/** Refuses local-only packages with a message that names the importer. */
const refuseLocalOnly: Plugin = {
  name: 'tessera-refuse-local-only',
  setup(b) {
    const filter = new RegExp(`^(${LOCAL_ONLY.join('|')})(/|$)`);
    b.onResolve({ filter }, (args) => ({
      errors: [
        {
          text: `${args.path} is the local backend's SQLite driver and has no place in a cloud function; ${relative(REPO_ROOT, args.importer) || args.importer} imports it (cloud handlers must not import functions/local/)`,
        },
      ],
    }));
    // The local adapters load node:sqlite at run time (after filtering its notice), which onResolve cannot see.
    b.onLoad({ filter: /[\\/]functions[\\/]local[\\/]/ }, (args) => ({
      errors: [{ text: `${relative(REPO_ROOT, args.path)} is local-backend code and cannot be bundled into a cloud function` }],
    }));
  },
};

/**
 * ESM output still meets CommonJS dependencies that call `require` (esbuild
 * leaves calls it cannot resolve, e.g. of Node built-ins, to a runtime
 * `require`); this gives them the one Node gives a CommonJS module.
 * `__dirname` and `__filename` are replaced by their `import.meta` equivalents
 * (Node >= 20.11) instead of being declared here, because bundled ES modules
 * often declare their own and a second declaration would not parse.
 */
const ESM_REQUIRE_SHIM =
  "import { createRequire as __tesseraCreateRequire } from 'node:module';\nconst require = __tesseraCreateRequire(import.meta.url);";

interface Bundle {
  readonly code: Uint8Array;
  readonly map: Uint8Array;
  readonly inputs: readonly string[];
  /** Whether the bundle imports sharp (left external): its archive must ship sharp's binaries. */
  readonly usesSharp: boolean;
  /** Whether the bundle holds the DEFLATE encoder: its archive must ship libdeflate.wasm and its platform's addon beside the bundle. */
  readonly usesLibdeflate: boolean;
  /** With splitting: the chunks the bundle imports (dynamic imports' modules, loaded only when imported), and their maps. */
  readonly chunks: readonly ZipEntry[];
}

/** The module shared/raster/libdeflate.ts loads, relative to the bundle's own file (`new URL(..., import.meta.url)`). */
const LIBDEFLATE_SOURCE = 'shared/raster/libdeflate.ts';

/**
 * The compressor's WebAssembly module as an archive entry in `dir` (the bundle's folder): the one file that runs on
 * linux x64 and arm64 alike, checked against the SHA-256 the code was built for (and so the code version).
 */
function libdeflateEntry(root: string, dir: string): ZipEntry {
  const path = join(root, dirname(LIBDEFLATE_SOURCE), LIBDEFLATE_WASM_FILE);
  if (!existsSync(path)) throw new BuildError(`${path} is missing: run node scripts/node.mjs tsx scripts/build-libdeflate.ts`);
  const data = readFileSync(path);
  const digest = createHash('sha256').update(data).digest('hex');
  if (digest !== LIBDEFLATE_WASM_SHA256) {
    throw new BuildError(
      `${path} has SHA-256 ${digest}, not the ${LIBDEFLATE_WASM_SHA256} the code expects: rebuild it (scripts/build-libdeflate.ts)`,
    );
  }
  return { name: dir === '' ? LIBDEFLATE_WASM_FILE : `${dir}/${LIBDEFLATE_WASM_FILE}`, data };
}

/**
 * The compressor's native addon for `target` (the platform the archive's cloud runs: Lambda linux-arm64, Cloud Functions
 * and Azure Functions linux-x64) as an archive entry in `dir`, beside the WebAssembly module: the loader takes it when
 * it runs on that platform and the module anywhere else. Checked: the SHA-256 the code was built for, and an ELF
 * shared object of the target's machine.
 */
function libdeflateNativeEntry(root: string, dir: string, target: LibdeflateNativeTarget): ZipEntry {
  const file = libdeflateNativeFile(target);
  const path = join(root, dirname(LIBDEFLATE_SOURCE), file);
  if (!existsSync(path)) throw new BuildError(`${path} is missing: run node scripts/node.mjs tsx scripts/build-libdeflate.ts`);
  const data = readFileSync(path);
  const digest = createHash('sha256').update(data).digest('hex');
  const expected = LIBDEFLATE_NATIVE[target].sha256;
  if (digest !== expected) {
    throw new BuildError(`${path} has SHA-256 ${digest}, not the ${expected} the code expects: rebuild it (scripts/build-libdeflate.ts)`);
  }
  const machine = data.length > 20 && data.readUInt32BE(0) === 0x7f454c46 ? data.readUInt16LE(18) : -1;
  if (machine !== ELF_MACHINE[target]) {
    throw new BuildError(
      `${path} is not a ${target} ELF shared object (machine 0x${machine.toString(16)}): rebuild it (scripts/build-libdeflate.ts)`,
    );
  }
  return { name: dir === '' ? file : `${dir}/${file}`, data };
}

/** The compressor's files for an archive whose functions run on `target`: the module, and that platform's addon. */
function libdeflateEntries(root: string, dir: string, target: LibdeflateNativeTarget): ZipEntry[] {
  return [libdeflateEntry(root, dir), libdeflateNativeEntry(root, dir, target)];
}

/** Native packages left out of every bundle and shipped beside it for the target platform (see the file comment). */
const NATIVE_EXTERNALS = ['sharp'];

/**
 * The Node major an archive must run on: the one its cloud deploys on every
 * plan (one Azure archive serves both Flex and Linux Consumption): AWS and GCP
 * 24, Azure 22 (shared/domain/runtimes.ts).
 */
export function nodeMajorFor(cloud: Cloud): number {
  return deployedNodeMajor(cloud);
}

/**
 * What esbuild replaces in every bundle. `__dirname`/`__filename`: see the
 * shim above. The code version: computed here from the tree being bundled,
 * exactly as a process running from source computes it
 * (shared/domain/code-version.ts), and fixed in the bundle, which carries no
 * source files to digest at run time. Same tree, same version, same keys.
 */
export function bundleDefines(root: string): Record<string, string> {
  const defines: Record<string, string> = { __dirname: 'import.meta.dirname', __filename: 'import.meta.filename' };
  // A tree without the render path (a test's stand-in handlers) bundles nothing that reads the version.
  const hasRenderPath = existsSync(join(root, 'package.json')) && RENDER_PATH_ROOTS.every((f) => existsSync(join(root, f)));
  if (hasRenderPath) defines[CODE_VERSION_DEFINE] = JSON.stringify(computeCodeVersion(root));
  return defines;
}

/**
 * `splitting`: what only a dynamic import reaches goes to chunks beside the bundle, read and parsed only when imported.
 * The Azure app's: Application Insights' distro (functions/azure/handlers/index.ts, docs/telemetry.md), some 6 MB that
 * V8 would otherwise parse in every cold start (about 85 ms of CPU) with telemetry off.
 */
async function bundle(
  root: string,
  entry: string,
  outName: string,
  external: readonly string[],
  cloud: Cloud,
  splitting = false,
): Promise<Bundle> {
  const result = await build({
    absWorkingDir: root,
    entryPoints: [join(root, entry)],
    bundle: true,
    platform: 'node',
    target: `node${nodeMajorFor(cloud)}`,
    format: 'esm',
    ...(splitting
      ? { splitting: true, outdir: join(root, '.tessera-build'), entryNames: outName.replace(/\.[cm]?js$/, ''), chunkNames: 'chunk-[hash]' }
      : { outfile: join(root, '.tessera-build', outName) }),
    write: false,
    sourcemap: 'linked',
    sourcesContent: false,
    external: [...external, ...NATIVE_EXTERNALS],
    // The AWS SDK and others offer an ESM build under "module"; prefer it, as Node would with "exports".
    mainFields: ['module', 'main'],
    banner: { js: ESM_REQUIRE_SHIM },
    define: bundleDefines(root),
    plugins: [refuseLocalOnly],
    metafile: true,
    logLevel: 'silent',
    legalComments: 'none',
  }).catch((e: unknown) => {
    const errors = (e as { errors?: { text: string; location?: { file: string; line: number } | null }[] }).errors;
    const detail = errors?.map((x) => `  ${x.location ? `${x.location.file}:${x.location.line}: ` : ''}${x.text}`).join('\n');
    throw new BuildError(`bundling ${entry} failed:\n${detail ?? String(e)}`);
  });
  const code = result.outputFiles.find((f) => f.path.endsWith(outName));
  const map = result.outputFiles.find((f) => f.path.endsWith(`${outName}.map`));
  if (!code || !map) throw new BuildError(`esbuild produced no ${outName} for ${entry}`);
  const inputs = Object.keys((result.metafile as Metafile).inputs);
  if (inputs.includes(CODE_VERSION_MODULE) && !(CODE_VERSION_DEFINE in bundleDefines(root))) {
    throw new BuildError(`${entry} uses the code version, but ${root} has no package.json version or render path to compute it from`);
  }
  const native = inputs.filter((i) => i.endsWith('.node'));
  if (native.length > 0) throw new BuildError(`${entry} pulls in native addons that cannot run on the platform: ${native.join(', ')}`);
  const imports = Object.values((result.metafile as Metafile).outputs).flatMap((o) => o.imports);
  const usesSharp = imports.some((i) => i.external && (i.path === 'sharp' || i.path.startsWith('sharp/')));
  const chunks = result.outputFiles
    .filter((f) => f !== code && f !== map)
    .map((f) => ({ name: relative(join(root, '.tessera-build'), f.path), data: f.contents }));
  return { code: code.contents, map: map.contents, inputs, usesSharp, usesLibdeflate: inputs.includes(LIBDEFLATE_SOURCE), chunks };
}

/** ELF e_machine of each Linux architecture sharp ships for. */
const ELF_MACHINE: Readonly<Record<SharpTarget, number>> = { 'linux-x64': 0x3e, 'linux-arm64': 0xb7 };

/**
 * sharp and `target`'s prebuilt libvips, as archive entries under node_modules/. Checked: the version is the one the
 * code's keys promise (IMAGE_CODEC), and every shared object is an ELF file of the target's architecture. With
 * `verify`, on a machine of that platform, the packaged copy is loaded on its own and encodes a PNG.
 */
function sharpEntries(root: string, target: SharpTarget, checkDir: string, verify: boolean): ZipEntry[] {
  const locked = lockedSharpVersion();
  if (locked !== IMAGE_CODEC.sharp || installedVersion(root, 'sharp') !== IMAGE_CODEC.sharp) {
    throw new BuildError(
      `sharp versions disagree: the code's keys promise ${IMAGE_CODEC.sharp} (IMAGE_CODEC, shared/raster/image-encoder.ts), the repository has ${installedVersion(root, 'sharp')} and scripts/native/sharp/package-lock.json ${locked}; ` +
        'change them together (npm install sharp@<v> --save-exact, and the same in scripts/native/sharp: npm install --package-lock-only)',
    );
  }
  let files: ZipEntry[];
  try {
    files = sharpNativeFiles(target, root);
  } catch (e) {
    throw new BuildError(`sharp for ${target}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const binaries = files.filter((f) => /\.node$|\.so(\.\d+)*$/.test(f.name));
  if (binaries.length < 2)
    throw new BuildError(`sharp for ${target} has no binaries (want @img/sharp-${target} and @img/sharp-libvips-${target})`);
  for (const b of binaries) {
    const d = b.data;
    const machine = d.length > 20 ? Buffer.from(d.buffer, d.byteOffset, d.byteLength).readUInt16LE(18) : -1;
    if (!(d[0] === 0x7f && d[1] === 0x45 && d[2] === 0x4c && d[3] === 0x46) || machine !== ELF_MACHINE[target]) {
      throw new BuildError(
        `${b.name} is not a ${target} ELF shared object (machine 0x${machine.toString(16)}); reinstall: rm -rf node_modules/.tessera-native`,
      );
    }
  }
  if (verify && `${process.platform}-${process.arch}` === target) verifySharp(checkDir, target, files);
  return files;
}

/** The packaged sharp, alone in a folder, loads and encodes a 1x1 PNG on this machine. */
function verifySharp(checkDir: string, target: SharpTarget, files: readonly ZipEntry[]): void {
  const dir = join(checkDir, `sharp-${target}`);
  for (const f of files) {
    mkdirSync(dirname(join(dir, f.name)), { recursive: true });
    writeFileSync(join(dir, f.name), f.data);
  }
  const script = `const sharp = (await import(${JSON.stringify(pathToFileURL(join(dir, 'node_modules/sharp/package.json')).href.replace(/package\.json$/, 'dist/index.mjs'))})).default;
const png = await sharp(Buffer.from([0, 0, 0, 0]), { raw: { width: 1, height: 1, channels: 4 } }).png().toBuffer();
console.log(JSON.stringify({ vips: sharp.versions.vips, png: png.subarray(1, 4).toString() }));`;
  const out = runCheck(dir, script, `sharp ${target}`) as { vips: string; png: string };
  if (out.png !== 'PNG' || out.vips !== IMAGE_CODEC.vips) {
    throw new BuildError(
      `the packaged sharp for ${target} gave libvips ${out.vips} and ${JSON.stringify(out.png)}, want ${IMAGE_CODEC.vips} and a PNG`,
    );
  }
}

async function writeZip(path: string, files: readonly ZipEntry[]): Promise<number> {
  mkdirSync(dirname(path), { recursive: true });
  const zip = new ZipFile();
  for (const f of files) zip.addBuffer(Buffer.from(f.data), f.name, { mtime: ZIP_MTIME, mode: 0o100644 });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  const bytes = Buffer.concat(chunks);
  writeFileSync(path, bytes);
  return bytes.length;
}

function json(value: unknown): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);
}

/** sharp's version for the GCF package.json: the repository's, checked against the code's (IMAGE_CODEC). */
function sharpVersion(root: string): string {
  const v = installedVersion(root, 'sharp');
  if (v !== IMAGE_CODEC.sharp)
    throw new BuildError(
      `sharp ${v} is installed, but the code's keys promise ${IMAGE_CODEC.sharp} (shared/raster/image-encoder.ts): run npm ci`,
    );
  return v;
}

/** The version of a dependency as the repository's lockfile installed it, for the GCF package.json. */
function installedVersion(root: string, pkg: string): string {
  const manifest = join(root, 'node_modules', pkg, 'package.json');
  if (!existsSync(manifest)) throw new BuildError(`${pkg} is not installed under ${root}/node_modules: run npm ci first`);
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version;
}

/** The signature each GCP entry point must be registered with, given how infra/ triggers it. */
export const GCP_SIGNATURES: Readonly<Record<(typeof FUNCTION_ROLES)[number], 'cloudevent' | 'http'>> = {
  // Eventarc delivers a storage CloudEvent.
  scene: 'cloudevent',
  // The push subscription posts a raw Pub/Sub message, which the framework turns into a messagePublished CloudEvent.
  tile: 'cloudevent',
  // Cloud Scheduler posts `{}`: a sweep.
  mosaic: 'http',
  // The ingest subscription pushes raw Pub/Sub messages, as the tile subscription does.
  ingest: 'cloudevent',
  // Cloud Scheduler posts `{}`: a reconcile.
  reconcile: 'http',
  // Eventarc delivers a storage CloudEvent of the source bucket, as to the scene function (docs/feature-batches.md).
  stream: 'cloudevent',
};

/**
 * The queue each Azure function must be triggered by (the tile queue may be named through its app setting);
 * none for the mosaic and the reconcile, timer-triggered (infra/ creates no queue or event subscription for them).
 */
export function azureQueueNames(role: (typeof FUNCTION_ROLES)[number]): string[] {
  if (role === 'mosaic' || role === 'reconcile') return [];
  return role === 'tile' ? [AZURE_QUEUES.tile, `%${ENV.tileQueue}%`] : [AZURE_QUEUES[role]];
}

function runCheck(dir: string, script: string, what: string): unknown {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: dir,
    encoding: 'utf8',
    // No credentials and no stack settings: loading a bundle must not need them.
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' },
    timeout: 60_000,
  });
  const line = r.stdout.trim().split('\n').at(-1) ?? '';
  if (r.status !== 0 || !line.startsWith('{')) {
    throw new BuildError(
      `loading the ${what} bundle failed (it must load without credentials or settings):\n${(r.stderr || r.stdout).trim().slice(0, 2000)}`,
    );
  }
  return JSON.parse(line);
}

/** Every Lambda bundle exports a `handler` function. */
function verifyAws(checkDir: string, role: string, code: Uint8Array): void {
  const dir = join(checkDir, 'aws', role);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'index.mjs'), code);
  const result = runCheck(
    dir,
    "const m = await import('./index.mjs'); console.log(JSON.stringify({ handler: typeof m.handler }));",
    `AWS ${role}`,
  ) as {
    handler: string;
  };
  if (result.handler !== 'function') {
    throw new BuildError(
      `${HANDLER_ENTRIES.aws[role as keyof typeof HANDLER_ENTRIES.aws]} must export a function named handler (Lambda calls index.handler); it exports ${result.handler}`,
    );
  }
}

/** The GCP bundle registers every entry point infra/ deploys, with the signature its trigger delivers. */
function verifyGcp(root: string, checkDir: string, code: Uint8Array): void {
  const dir = join(checkDir, 'gcp');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'index.mjs'), code);
  const registry = pathToFileURL(join(root, 'node_modules/@google-cloud/functions-framework/build/src/function_registry.js')).href;
  const names = Object.values(GCP_ENTRY_POINTS);
  const script = `await import('./index.mjs'); const r = await import(${JSON.stringify(registry)}); const out = {};
for (const n of ${JSON.stringify(names)}) out[n] = r.getRegisteredFunction(n)?.signatureType ?? null;
console.log(JSON.stringify(out));`;
  const found = runCheck(dir, script, 'GCP') as Record<string, string | null>;
  const problems = FUNCTION_ROLES.flatMap((role) => {
    const name = GCP_ENTRY_POINTS[role];
    const want = GCP_SIGNATURES[role];
    const got = found[name];
    if (got === want) return [];
    return [
      got
        ? `${name} is registered as ${got}, but infra/ triggers it as ${want}`
        : `${name} is not registered (want ${want === 'http' ? 'http' : 'cloudEvent'}('${name}', ...))`,
    ];
  });
  if (problems.length > 0) {
    throw new BuildError(
      `${HANDLER_ENTRIES.gcp} does not register what infra/ deploys (infra/common/packaging.ts GCP_ENTRY_POINTS):\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
}

/** A stand-in for the worker's `@azure/functions-core` that records registrations. */
const FAKE_AZURE_CORE = `const registrations = [];
globalThis.__tesseraRegistrations = registrations;
const disposable = { dispose() {} };
module.exports = {
  version: '0.0.0-build-check',
  registerFunction(metadata) { registrations.push(metadata); return disposable; },
  registerHook() { return disposable; },
  setProgrammingModel() {},
  getProgrammingModel() { return undefined; },
  log() {},
};`;

interface AzureRegistration {
  readonly name: string;
  readonly bindings: Readonly<
    Record<string, { readonly type: string; readonly direction?: string; readonly queueName?: string; readonly connection?: string }>
  >;
}

/** The Azure bundle registers scene and tile as queue triggers on the queues infra/ creates, and mosaic as a timer. */
function verifyAzure(checkDir: string, code: Uint8Array, chunks: readonly ZipEntry[]): void {
  const dir = join(checkDir, 'azure');
  mkdirSync(join(dir, 'dist'), { recursive: true });
  for (const c of chunks) writeFileSync(join(dir, 'dist', c.name), c.data);
  mkdirSync(join(dir, 'node_modules/@azure/functions-core'), { recursive: true });
  writeFileSync(join(dir, 'node_modules/@azure/functions-core/index.js'), FAKE_AZURE_CORE);
  writeFileSync(join(dir, 'node_modules/@azure/functions-core/package.json'), '{"name":"@azure/functions-core","main":"index.js"}');
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
  writeFileSync(join(dir, 'dist/index.js'), code);
  const regs = runCheck(
    dir,
    "await import('./dist/index.js'); console.log(JSON.stringify({ r: globalThis.__tesseraRegistrations ?? [] }));",
    'Azure',
  ) as {
    r: AzureRegistration[];
  };
  const problems = FUNCTION_ROLES.flatMap((role) => {
    const name = AZURE_FUNCTION_NAMES[role];
    const reg = regs.r.find((x) => x.name === name);
    const queues = azureQueueNames(role);
    const trigger = reg && Object.values(reg.bindings).find((b) => /trigger$/i.test(b.type));
    if (queues.length === 0) {
      const wantTimer = `app.timer('${name}', { schedule: ... })`;
      if (!reg) return [`${name} is not registered (want ${wantTimer})`];
      return trigger?.type === 'timerTrigger'
        ? []
        : [
            `${name} is registered as ${trigger?.type ?? 'no trigger'}, but infra/ delivers nothing to it: it is a timer sweep (want ${wantTimer})`,
          ];
    }
    const want = `app.storageQueue('${name}', { queueName: '${queues[0]}', connection: '${AZURE_TRIGGER_CONNECTION}' })`;
    if (!reg) return [`${name} is not registered (want ${want})`];
    if (trigger?.type !== 'queueTrigger')
      return [
        `${name} is registered as ${trigger?.type ?? 'no trigger'}, but infra/ delivers its events to a Storage Queue (want ${want})`,
      ];
    if (!queues.includes(trigger.queueName ?? ''))
      return [`${name} listens on queue ${JSON.stringify(trigger.queueName)}, but infra/ delivers to ${queues.join(' or ')}`];
    if (trigger.connection !== AZURE_TRIGGER_CONNECTION) {
      return [
        `${name} connects with ${JSON.stringify(trigger.connection)}, but infra/ configures the identity-based connection ${AZURE_TRIGGER_CONNECTION}`,
      ];
    }
    return [];
  });
  if (problems.length > 0) {
    throw new BuildError(
      `${HANDLER_ENTRIES.azure} does not register what infra/ deploys (infra/common/packaging.ts AZURE_QUEUES):\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
}

/**
 * Build the archives of the given clouds. Fails before bundling anything if
 * an entry point is missing, naming every one.
 */
export async function buildFunctions(options: BuildOptions): Promise<BuiltArchive[]> {
  const { root, outDir, clouds } = options;
  const verify = options.verify ?? true;
  // Inside node_modules so a bundle's external imports resolve to the repository's packages.
  // One per build, so two builds (or a build and the tests) never share it.
  const checkDir = join(root, 'node_modules', `.tessera-build-check-${process.pid}-${Date.now().toString(36)}`);
  const missing = clouds.flatMap((cloud) =>
    requiredEntries(cloud)
      .filter((e) => !existsSync(join(root, e)))
      .map((e) => ({ cloud, e })),
  );
  if (missing.length > 0) {
    const lines = missing.map(({ cloud, e }) => `  - ${e} (${cloud})`).join('\n');
    const ready = clouds.filter((c) => !missing.some((m) => m.cloud === c));
    throw new BuildError(
      `handler entry point${missing.length > 1 ? 's' : ''} missing:\n${lines}\n` +
        'The build bundles existing handlers only; it does not invent them.' +
        (ready.length > 0 ? ` Build the clouds that are ready with: npm run build:functions -- ${ready.join(' ')}` : ''),
    );
  }
  const out: BuiltArchive[] = [];
  try {
    for (const cloud of clouds) {
      for (const archive of await BUILDERS[cloud]({ root, checkDir, verify })) {
        const path = join(outDir, archive.rel);
        const bytes = await writeZip(path, archive.files);
        out.push({ cloud, path, bytes, entries: archive.files.map((f) => f.name) });
      }
    }
  } finally {
    rmSync(checkDir, { recursive: true, force: true });
  }
  return out;
}

interface ZipEntry {
  readonly name: string;
  readonly data: Uint8Array;
}

interface PlannedArchive {
  /** Path relative to the output folder (infra/common/packaging.ts ARCHIVES). */
  readonly rel: string;
  readonly files: readonly ZipEntry[];
}

interface BuildContext {
  readonly root: string;
  readonly checkDir: string;
  readonly verify: boolean;
}

const BUILDERS: Readonly<Record<Cloud, (ctx: BuildContext) => Promise<PlannedArchive[]>>> = {
  /** One Lambda zip per function: `index.mjs` (ESM, every dependency bundled) exporting `handler`. */
  async aws({ root, checkDir, verify }) {
    const archives: PlannedArchive[] = [];
    for (const role of FUNCTION_ROLES) {
      const b = await bundle(root, HANDLER_ENTRIES.aws[role], 'index.mjs', [], 'aws');
      if (verify) verifyAws(checkDir, role, b.code);
      archives.push({
        rel: ARCHIVES.aws[role],
        files: [
          { name: 'index.mjs', data: b.code },
          { name: 'index.mjs.map', data: b.map },
          // The functions' own architecture's addon (LAMBDA_ARCHITECTURE), beside the module.
          ...(b.usesLibdeflate ? libdeflateEntries(root, '', `linux-${LAMBDA_ARCHITECTURE}`) : []),
          // Lambda resolves `import('sharp')` from /var/task/node_modules: the functions' own architecture's binaries.
          ...(b.usesSharp ? sharpEntries(root, `linux-${LAMBDA_ARCHITECTURE}`, checkDir, verify) : []),
        ],
      });
    }
    return archives;
  },

  /** A Cloud Functions source: the bundle, and a package.json that makes Cloud Build install the framework it shares. */
  async gcp({ root, checkDir, verify }) {
    const framework = '@google-cloud/functions-framework';
    const b = await bundle(root, HANDLER_ENTRIES.gcp, 'index.js', [framework], 'gcp');
    if (verify) verifyGcp(root, checkDir, b.code);
    const manifest = {
      name: 'tessera-gcp-functions',
      private: true,
      type: 'module',
      main: 'index.js',
      // Cloud Build's buildpack reads engines.node; it must name the runtime's own major.
      engines: { node: String(nodeMajorFor('gcp')) },
      // sharp, when the bundle imports it: Cloud Build installs it (and its exact prebuilt libvips for the runtime's
      // linux-x64) from the registry, as it installs the framework; the version is the one the code's keys promise.
      dependencies: {
        [framework]: installedVersion(root, framework),
        ...(b.usesSharp ? { sharp: sharpVersion(root) } : {}),
      },
    };
    return [
      {
        rel: ARCHIVES.gcp,
        files: [
          { name: 'index.js', data: b.code },
          { name: 'index.js.map', data: b.map },
          // Cloud Functions (2nd gen) runs linux-x64.
          ...(b.usesLibdeflate ? libdeflateEntries(root, '', 'linux-x64') : []),
          { name: 'package.json', data: json(manifest) },
        ],
      },
    ];
  },

  /** A run-from-package app: host.json at the root, package.json whose `main` is the bundle. */
  async azure({ root, checkDir, verify }) {
    const b = await bundle(root, HANDLER_ENTRIES.azure, 'index.js', ['@azure/functions-core'], 'azure', true);
    if (verify) verifyAzure(checkDir, b.code, b.chunks);
    const hostJson = readFileSync(join(root, HANDLER_ENTRIES.azureHostJson));
    try {
      JSON.parse(hostJson.toString('utf8'));
    } catch (e) {
      throw new BuildError(`${HANDLER_ENTRIES.azureHostJson} is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
    const manifest = {
      name: 'tessera-azure-functions',
      private: true,
      type: 'module',
      main: 'dist/index.js',
      engines: { node: `>=${nodeMajorFor('azure')}` },
    };
    return [
      {
        rel: ARCHIVES.azure,
        files: [
          { name: 'host.json', data: hostJson },
          { name: 'package.json', data: json(manifest) },
          { name: 'dist/index.js', data: b.code },
          { name: 'dist/index.js.map', data: b.map },
          ...b.chunks.map((c) => ({ name: `dist/${c.name}`, data: c.data })),
          ...(b.usesLibdeflate ? libdeflateEntries(root, 'dist', 'linux-x64') : []),
          // A run-from-package app is not built remotely: it ships sharp for the Functions host's linux-x64.
          ...(b.usesSharp ? sharpEntries(root, 'linux-x64', checkDir, verify) : []),
        ],
      },
    ];
  },
};

function humanSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}

/** Parse `[clouds...] [--out dir]`. */
export function parseArgs(argv: readonly string[], root: string): BuildOptions {
  const clouds: Cloud[] = [];
  let outDir = join(root, 'dist');
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--out') {
      const dir = argv[++i];
      if (!dir) throw new BuildError('--out needs a folder');
      outDir = resolve(dir);
    } else if ((CLOUDS as readonly string[]).includes(arg)) {
      clouds.push(arg as Cloud);
    } else {
      throw new BuildError(`unknown argument ${JSON.stringify(arg)}: usage: npm run build:functions -- [aws] [gcp] [azure] [--out <dir>]`);
    }
  }
  return { root, outDir, clouds: clouds.length > 0 ? clouds : [...CLOUDS] };
}

async function main(): Promise<void> {
  const started = Date.now();
  const options = parseArgs(process.argv.slice(2), REPO_ROOT);
  const built = await buildFunctions(options);
  const width = Math.max(...built.map((b) => relative(process.cwd(), b.path).length));
  for (const b of built) {
    const warn = b.cloud === 'aws' && b.bytes > LAMBDA_DIRECT_UPLOAD_LIMIT ? "  (over Lambda's 50 MB direct upload limit)" : '';
    console.log(`${relative(process.cwd(), b.path).padEnd(width)}  ${humanSize(b.bytes).padStart(10)}${warn}`);
  }
  console.log(
    `built ${built.length} archive${built.length === 1 ? '' : 's'} for ${options.clouds.join(', ')} in ${Date.now() - started} ms`,
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((e: unknown) => {
    console.error(`build:functions: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  });
}
