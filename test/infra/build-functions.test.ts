import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { inflateRawSync, inflateSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { ARCHIVES, AZURE_QUEUES, GCP_ENTRY_POINTS, HANDLER_ENTRIES, LAMBDA_ARCHITECTURE, REPO_ROOT } from '../../infra/common/packaging.js';
import { BuildError, buildFunctions, nodeMajorFor, parseArgs } from '../../scripts/build-functions.js';
import { deployedNodeMajor, deployedRuntime } from '../../shared/domain/runtimes.js';
import { IMAGE_CODEC } from '../../shared/raster/image-encoder.js';
import { LIBDEFLATE_NATIVE, LIBDEFLATE_WASM_FILE, LIBDEFLATE_WASM_SHA256, libdeflateNativeFile } from '../../shared/raster/libdeflate.js';

/**
 * build:functions against a throwaway repository root holding small
 * handlers (the real ones belong to the cloud issues), with the real
 * node_modules linked in so esbuild bundles real dependencies.
 */

/** Read a zip's entries (name -> bytes) from its central directory. */
function unzip(path: string): Map<string, Buffer> {
  const zip = readFileSync(path);
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  const files = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    const method = zip.readUInt16LE(at + 10);
    const size = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extra = zip.readUInt16LE(at + 30);
    const comment = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const name = zip.toString('utf8', at + 46, at + 46 + nameLength);
    const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const raw = zip.subarray(dataAt, dataAt + size);
    files.set(name, method === 8 ? inflateRawSync(raw) : Buffer.from(raw));
    at += 46 + nameLength + extra + comment;
  }
  return files;
}

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

const GOOD: Record<string, string> = {
  [HANDLER_ENTRIES.aws.scene]: 'export const handler = async () => ({ batchItemFailures: [] });\n',
  [HANDLER_ENTRIES.aws.tile]:
    "import { S3Client } from '@aws-sdk/client-s3';\nconst s3 = new S3Client({ region: 'eu-west-1' });\nexport const handler = async () => ({ batchItemFailures: [], s3: typeof s3 });\n",
  [HANDLER_ENTRIES.aws.mosaic]: 'export async function handler() { return { assembled: [] }; }\n',
  [HANDLER_ENTRIES.aws.ingest]: 'export const handler = async () => ({ batchItemFailures: [] });\n',
  [HANDLER_ENTRIES.aws.reconcile]: 'export async function handler() { return { objectsWithoutRow: [] }; }\n',
  [HANDLER_ENTRIES.aws.stream]: 'export const handler = async () => ({ batchItemFailures: [] });\n',
  [HANDLER_ENTRIES.gcp]: [
    "import { cloudEvent, http } from '@google-cloud/functions-framework';",
    `cloudEvent('${GCP_ENTRY_POINTS.scene}', async () => {});`,
    `cloudEvent('${GCP_ENTRY_POINTS.tile}', async () => {});`,
    `http('${GCP_ENTRY_POINTS.mosaic}', (_req, res) => { res.send('{}'); });`,
    `cloudEvent('${GCP_ENTRY_POINTS.ingest}', async () => {});`,
    `http('${GCP_ENTRY_POINTS.reconcile}', (_req, res) => { res.send('{}'); });`,
    `cloudEvent('${GCP_ENTRY_POINTS.stream}', async () => {});`,
    '',
  ].join('\n'),
  [HANDLER_ENTRIES.azure]: [
    "import { app } from '@azure/functions';",
    `app.storageQueue('scene', { queueName: '${AZURE_QUEUES.scene}', connection: 'TESSERA_STORAGE', handler: async () => {} });`,
    "app.storageQueue('tile', { queueName: '%TESSERA_TILE_QUEUE%', connection: 'TESSERA_STORAGE', handler: async () => {} });",
    "app.timer('mosaic', { schedule: '0 */5 * * * *', handler: async () => {} });",
    "app.timer('cleanup', { schedule: '0 7 * * * *', handler: async () => {} });",
    `app.storageQueue('ingest', { queueName: '${AZURE_QUEUES.ingest}', connection: 'TESSERA_STORAGE', handler: async () => {} });`,
    "app.timer('reconcile', { schedule: '0 0 3 * * 1', handler: async () => {} });",
    `app.storageQueue('stream', { queueName: '${AZURE_QUEUES.stream}', connection: 'TESSERA_STORAGE', handler: async () => {} });`,
    '',
  ].join('\n'),
  [HANDLER_ENTRIES.azureHostJson]: '{ "version": "2.0", "functionTimeout": "00:10:00" }\n',
};

/** A repository root with the given handler files and the real node_modules. */
function fakeRoot(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'tessera-build-'));
  roots.push(root);
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  return root;
}

async function buildError(root: string, clouds: ('aws' | 'gcp' | 'azure')[]): Promise<string> {
  try {
    await buildFunctions({ root, outDir: join(root, 'dist'), clouds });
  } catch (e) {
    expect(e).toBeInstanceOf(BuildError);
    return (e as Error).message;
  }
  throw new Error('the build succeeded, but a failure was expected');
}

describe('npm run build:functions (scripts/build-functions.ts)', () => {
  it('writes each platform its archive: Lambda zips, a GCF source, an Azure run-from-package app', async () => {
    const root = fakeRoot(GOOD);
    const built = await buildFunctions({ root, outDir: join(root, 'dist'), clouds: ['aws', 'gcp', 'azure'] });
    expect(built.map((b) => b.path.slice(root.length + 1)).sort()).toEqual(
      [...Object.values(ARCHIVES.aws), ARCHIVES.gcp, ARCHIVES.azure].map((a) => `dist/${a}`).sort(),
    );
    for (const b of built) expect(b.bytes).toBeGreaterThan(100);

    const tile = unzip(join(root, 'dist', ARCHIVES.aws.tile));
    expect([...tile.keys()]).toEqual(['index.mjs', 'index.mjs.map']);
    // The AWS SDK is bundled, not left to the runtime's copy.
    expect(tile.get('index.mjs')?.toString()).toContain('S3Client');
    expect(tile.get('index.mjs')?.toString()).not.toMatch(/from ["']@aws-sdk\//);

    const gcp = unzip(join(root, 'dist', ARCHIVES.gcp));
    expect([...gcp.keys()].sort()).toEqual(['index.js', 'index.js.map', 'package.json']);
    const manifest = JSON.parse(gcp.get('package.json')?.toString() ?? '{}') as {
      main: string;
      type: string;
      dependencies: Record<string, string>;
      engines: { node: string };
    };
    expect(manifest).toMatchObject({ main: 'index.js', type: 'module' });
    // Cloud Build's buildpack picks Node from engines.node: it must be the runtime's major, never 20.
    expect(manifest.engines.node).toBe(String(deployedRuntime('gcp-functions').nodeMajor));
    expect(manifest.dependencies['@google-cloud/functions-framework']).toMatch(/^\d+\.\d+\.\d+$/);
    // The framework is the platform's (installed from package.json), never a second bundled copy.
    expect(gcp.get('index.js')?.toString()).toMatch(/from ["']@google-cloud\/functions-framework["']/);

    const azure = unzip(join(root, 'dist', ARCHIVES.azure));
    expect([...azure.keys()]).toEqual(['host.json', 'package.json', 'dist/index.js', 'dist/index.js.map']);
    expect(JSON.parse(azure.get('package.json')?.toString() ?? '{}')).toMatchObject({
      main: 'dist/index.js',
      type: 'module',
      engines: { node: `>=${deployedNodeMajor('azure')}` },
    });
    expect(azure.get('host.json')?.toString()).toBe(GOOD[HANDLER_ENTRIES.azureHostJson]);
  });

  it('bundles each cloud for the Node major of the runtime it deploys (esbuild target, engines), never Node 20', () => {
    expect(nodeMajorFor('aws')).toBe(deployedRuntime('aws-lambda').nodeMajor);
    expect(nodeMajorFor('gcp')).toBe(deployedRuntime('gcp-functions').nodeMajor);
    expect(nodeMajorFor('azure')).toBe(
      Math.min(deployedRuntime('azure-functions-flex').nodeMajor, deployedRuntime('azure-functions-consumption').nodeMajor),
    );
    expect({ aws: nodeMajorFor('aws'), gcp: nodeMajorFor('gcp'), azure: nodeMajorFor('azure') }).toEqual({ aws: 24, gcp: 24, azure: 22 });
  });

  it('gives the same bytes for the same code, so an unchanged build deploys nothing', async () => {
    const root = fakeRoot(GOOD);
    const first = await buildFunctions({ root, outDir: join(root, 'a'), clouds: ['aws'] });
    const second = await buildFunctions({ root, outDir: join(root, 'b'), clouds: ['aws'] });
    for (const [i, b] of first.entries()) expect(readFileSync(b.path).equals(readFileSync(second[i]?.path as string))).toBe(true);
  });

  it('fails naming every missing handler entry point, and offers the clouds that are ready', async () => {
    const { [HANDLER_ENTRIES.gcp]: _gcp, [HANDLER_ENTRIES.azureHostJson]: _host, ...rest } = GOOD;
    const message = await buildError(fakeRoot(rest), ['aws', 'gcp', 'azure']);
    expect(message).toContain(`- ${HANDLER_ENTRIES.gcp} (gcp)`);
    expect(message).toContain(`- ${HANDLER_ENTRIES.azureHostJson} (azure)`);
    expect(message).toContain('npm run build:functions -- aws');
  });

  it('refuses to bundle the local SQLite driver into a cloud function', async () => {
    const root = fakeRoot({
      ...GOOD,
      [HANDLER_ENTRIES.aws.scene]:
        "import { DatabaseSync } from 'node:sqlite';\nexport const handler = async () => new DatabaseSync(':memory:');\n",
    });
    const message = await buildError(root, ['aws']);
    expect(message).toContain('node:sqlite');
    expect(message).toContain(HANDLER_ENTRIES.aws.scene);
  });

  it('fails when a Lambda bundle exports no handler', async () => {
    const message = await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.aws.mosaic]: 'export const sweep = async () => 1;\n' }), ['aws']);
    expect(message).toContain('must export a function named handler');
  });

  it('fails when the GCP bundle registers an entry point with the wrong signature or not at all', async () => {
    const wrong = GOOD[HANDLER_ENTRIES.gcp]?.replace(
      `http('${GCP_ENTRY_POINTS.mosaic}', (_req, res) => { res.send('{}'); });`,
      `cloudEvent('${GCP_ENTRY_POINTS.mosaic}', async () => {});`,
    );
    const message = await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.gcp]: wrong as string }), ['gcp']);
    expect(message).toContain(`${GCP_ENTRY_POINTS.mosaic} is registered as cloudevent, but infra/ triggers it as http`);
    const none = await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.gcp]: "import '@google-cloud/functions-framework';\n" }), ['gcp']);
    expect(none).toContain(`${GCP_ENTRY_POINTS.scene} is not registered`);
  });

  it('fails when the Azure bundle listens somewhere infra/ does not deliver', async () => {
    const eventGrid = GOOD[HANDLER_ENTRIES.azure]?.replace(
      `app.storageQueue('scene', { queueName: '${AZURE_QUEUES.scene}', connection: 'TESSERA_STORAGE', handler: async () => {} });`,
      "app.eventGrid('scene', { handler: async () => {} });",
    );
    const message = await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.azure]: eventGrid as string }), ['azure']);
    expect(message).toContain('scene is registered as eventGridTrigger, but infra/ delivers its events to a Storage Queue');
    // The mosaic is a timer sweep: infra/ creates no queue and no event subscription for it.
    const queued = GOOD[HANDLER_ENTRIES.azure]?.replace(
      "app.timer('mosaic', { schedule: '0 */5 * * * *', handler: async () => {} });",
      "app.storageQueue('mosaic', { queueName: 'tessera-mosaics', connection: 'TESSERA_STORAGE', handler: async () => {} });",
    );
    expect(await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.azure]: queued as string }), ['azure'])).toContain(
      'mosaic is registered as queueTrigger, but infra/ delivers nothing to it: it is a timer sweep',
    );
  });

  it('checks the ingest and reconcile entry points as it checks the tiling ones, on every cloud', async () => {
    // AWS: one archive per function, each exporting handler.
    expect(Object.keys(ARCHIVES.aws).sort()).toEqual(['ingest', 'mosaic', 'reconcile', 'scene', 'stream', 'tile']);
    const noIngest = await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.aws.ingest]: 'export const ingest = 1;\n' }), ['aws']);
    expect(noIngest).toContain(`${HANDLER_ENTRIES.aws.ingest} must export a function named handler`);
    // GCP: ingest is a Pub/Sub push (cloudEvent), reconcile a Cloud Scheduler call (http).
    const gcpWrong = GOOD[HANDLER_ENTRIES.gcp]?.replace(
      `cloudEvent('${GCP_ENTRY_POINTS.ingest}', async () => {});`,
      `http('${GCP_ENTRY_POINTS.ingest}', (_req, res) => { res.send('{}'); });`,
    );
    expect(await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.gcp]: gcpWrong as string }), ['gcp'])).toContain(
      `${GCP_ENTRY_POINTS.ingest} is registered as http, but infra/ triggers it as cloudevent`,
    );
    // Azure: ingest listens on the ingest queue infra/ creates; reconcile is a timer.
    const azureWrong = GOOD[HANDLER_ENTRIES.azure]?.replace(`queueName: '${AZURE_QUEUES.ingest}'`, "queueName: 'tessera-ingests'");
    expect(await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.azure]: azureWrong as string }), ['azure'])).toContain(
      `ingest listens on queue "tessera-ingests", but infra/ delivers to ${AZURE_QUEUES.ingest}`,
    );
    const noReconcile = GOOD[HANDLER_ENTRIES.azure]?.replace(
      "app.timer('reconcile', { schedule: '0 0 3 * * 1', handler: async () => {} });",
      '',
    );
    expect(await buildError(fakeRoot({ ...GOOD, [HANDLER_ENTRIES.azure]: noReconcile as string }), ['azure'])).toContain(
      'reconcile is not registered',
    );
  });

  it('takes the clouds and the output folder from the command line', () => {
    expect(parseArgs([], '/r')).toEqual({ root: '/r', outDir: '/r/dist', clouds: ['aws', 'gcp', 'azure'] });
    expect(parseArgs(['gcp', '--out', '/tmp/x'], '/r')).toEqual({ root: '/r', outDir: '/tmp/x', clouds: ['gcp'] });
    expect(() => parseArgs(['oci'], '/r')).toThrow(/unknown argument "oci"/);
  });

  it('ships libdeflate.wasm and the native addon of the platform each cloud runs beside every bundle that holds the DEFLATE encoder: Lambda linux-arm64, GCF and Azure linux-x64', async () => {
    // Handlers that write tiles reach shared/raster/libdeflate.ts (through codecs.ts); the scene one here does not.
    const wasm = readFileSync(join(REPO_ROOT, 'shared/raster', LIBDEFLATE_WASM_FILE));
    const arm64 = libdeflateNativeFile(`linux-${LAMBDA_ARCHITECTURE}`);
    const x64 = libdeflateNativeFile('linux-x64');
    const addons = {
      [arm64]: readFileSync(join(REPO_ROOT, 'shared/raster', arm64)),
      [x64]: readFileSync(join(REPO_ROOT, 'shared/raster', x64)),
    };
    const loader = readFileSync(join(REPO_ROOT, 'shared/raster/libdeflate.ts'), 'utf8');
    const importer = (entry: string) => {
      const spec = relative(dirname(entry), 'shared/raster/libdeflate.js');
      return `import { libdeflateCodec, libdeflateZlibCompress } from '${spec.startsWith('.') ? spec : `./${spec}`}';\n`;
    };
    const compress = "libdeflateZlibCompress(new TextEncoder().encode('tessera '.repeat(500)), 6)";
    const files = {
      ...GOOD,
      'shared/raster/libdeflate.ts': loader,
      [HANDLER_ENTRIES.aws.tile]:
        `${importer(HANDLER_ENTRIES.aws.tile)}export const handler = async () => ({ z: Buffer.from(${compress}).toString('base64'), kind: libdeflateCodec().kind });\n`,
      [HANDLER_ENTRIES.gcp]: `${importer(HANDLER_ENTRIES.gcp)}${GOOD[HANDLER_ENTRIES.gcp]}export const z = () => ${compress};\n`,
      [HANDLER_ENTRIES.azure]: `${importer(HANDLER_ENTRIES.azure)}${GOOD[HANDLER_ENTRIES.azure]}export const z = () => ${compress};\n`,
    };
    const root = fakeRoot(files);
    writeFileSync(join(root, 'shared/raster', LIBDEFLATE_WASM_FILE), wasm);
    for (const [name, data] of Object.entries(addons)) writeFileSync(join(root, 'shared/raster', name), data);
    await buildFunctions({ root, outDir: join(root, 'dist'), clouds: ['aws', 'gcp', 'azure'] });
    /** ELF e_machine: x86-64 0x3e, AArch64 0xb7. */
    const ELF_MACHINE = { 'linux-x64': 0x3e, 'linux-arm64': 0xb7 } as const;
    const machine = (b: Buffer | undefined) => (b !== undefined && b.readUInt32BE(0) === 0x7f454c46 ? b.readUInt16LE(18) : undefined);
    const tile = unzip(join(root, 'dist', ARCHIVES.aws.tile));
    expect([...tile.keys()]).toEqual(['index.mjs', 'index.mjs.map', LIBDEFLATE_WASM_FILE, arm64]);
    expect(Buffer.compare(tile.get(LIBDEFLATE_WASM_FILE) as Buffer, wasm)).toBe(0);
    expect(machine(tile.get(arm64))).toBe(ELF_MACHINE[`linux-${LAMBDA_ARCHITECTURE}`]);
    expect(Buffer.compare(tile.get(arm64) as Buffer, addons[arm64] as Buffer)).toBe(0);
    expect([...unzip(join(root, 'dist', ARCHIVES.aws.scene)).keys()]).toEqual(['index.mjs', 'index.mjs.map']);
    const gcp = unzip(join(root, 'dist', ARCHIVES.gcp));
    expect(gcp.has(LIBDEFLATE_WASM_FILE)).toBe(true);
    expect(machine(gcp.get(x64))).toBe(ELF_MACHINE['linux-x64']);
    expect([...gcp.keys()].filter((k) => k.endsWith('.node'))).toEqual([x64]);
    const azure = unzip(join(root, 'dist', ARCHIVES.azure));
    expect(azure.has(`dist/${LIBDEFLATE_WASM_FILE}`)).toBe(true);
    expect(machine(azure.get(`dist/${x64}`))).toBe(ELF_MACHINE['linux-x64']);
    expect([...azure.keys()].filter((k) => k.endsWith('.node'))).toEqual([`dist/${x64}`]);
    for (const b of [gcp.get(x64), azure.get(`dist/${x64}`)]) expect(Buffer.compare(b as Buffer, addons[x64] as Buffer)).toBe(0);

    // The Lambda archive as deployed, on this machine: its handler writes a zlib stream. This machine is not the
    // archive's arm64, so the loader finds no addon for it and falls back to the module, and says so once on Node's
    // debug channel (NODE_DEBUG=libdeflate), nowhere else.
    const task = mkdtempSync(join(tmpdir(), 'tessera-lambda-task-'));
    roots.push(task);
    for (const [name, data] of tile) writeFileSync(join(task, name), data);
    const invoke = "const h = (await import('./index.mjs')).handler; await h(); console.log(JSON.stringify(await h()))";
    const runIn = (dir: string, env: Record<string, string>) =>
      spawnSync(process.execPath, ['--input-type=module', '-e', invoke], {
        cwd: dir,
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', ...env },
      });
    const quiet = runIn(task, {});
    expect(quiet.stderr).toBe('');
    const lambda = JSON.parse(quiet.stdout) as { z: string; kind: string };
    expect(inflateSync(Buffer.from(lambda.z, 'base64')).toString()).toBe('tessera '.repeat(500));
    const hostTarget = `${process.platform}-${process.arch}`;
    expect(lambda.kind).toBe(hostTarget === `linux-${LAMBDA_ARCHITECTURE}` ? 'native' : 'wasm');
    const debug = runIn(task, { NODE_DEBUG: 'libdeflate' });
    const lines = debug.stderr.split('\n').filter((l) => l.includes('LIBDEFLATE'));
    expect(lines).toHaveLength(1);
    if (hostTarget !== `linux-${LAMBDA_ARCHITECTURE}`) expect(lines[0]).toMatch(/runs as WebAssembly/);

    // A file that is not the one the code was built for fails the build, naming the fix: the module, or an addon.
    writeFileSync(join(root, 'shared/raster', arm64), Buffer.concat([addons[arm64] as Buffer, Buffer.from([0])]));
    expect(await buildError(root, ['aws'])).toMatch(
      new RegExp(`not the ${LIBDEFLATE_NATIVE[`linux-${LAMBDA_ARCHITECTURE}`].sha256} the code expects: rebuild it`),
    );
    writeFileSync(join(root, 'shared/raster', arm64), addons[arm64] as Buffer);
    writeFileSync(join(root, 'shared/raster', LIBDEFLATE_WASM_FILE), Buffer.concat([wasm, Buffer.from([0])]));
    expect(await buildError(root, ['aws'])).toMatch(new RegExp(`not the ${LIBDEFLATE_WASM_SHA256} the code expects: rebuild it`));
  }, 120_000);

  it('ships sharp with the prebuilt libvips of the platform each cloud runs a rendering bundle on: Lambda linux-arm64, Azure linux-x64, GCF from Cloud Build', async () => {
    // Handlers that render tiles import sharp (shared/raster/image-encoder.ts loads it on first use); the scene one does not.
    const renders = "export const handler = async () => { const { default: sharp } = await import('sharp'); return sharp.versions; };\n";
    const root = fakeRoot({
      ...GOOD,
      [HANDLER_ENTRIES.aws.tile]: renders,
      [HANDLER_ENTRIES.gcp]: `${GOOD[HANDLER_ENTRIES.gcp]}export const render = async () => (await import('sharp')).default.versions;\n`,
      [HANDLER_ENTRIES.azure]: `${GOOD[HANDLER_ENTRIES.azure]}export const render = async () => (await import('sharp')).default.versions;\n`,
    });
    await buildFunctions({ root, outDir: join(root, 'dist'), clouds: ['aws', 'gcp', 'azure'] });
    /** ELF e_machine: x86-64 0x3e, AArch64 0xb7. */
    const machine = (b: Buffer | undefined) => (b !== undefined && b.readUInt32BE(0) === 0x7f454c46 ? b.readUInt16LE(18) : undefined);
    const sharpVersion = (zip: Map<string, Buffer>) =>
      (JSON.parse(zip.get('node_modules/sharp/package.json')?.toString() ?? '{}') as { version?: string }).version;

    expect(LAMBDA_ARCHITECTURE).toBe('arm64');
    const tile = unzip(join(root, 'dist', ARCHIVES.aws.tile));
    expect(sharpVersion(tile)).toBe(IMAGE_CODEC.sharp);
    expect(tile.get('index.mjs')?.toString()).toMatch(/import\(["']sharp["']\)/);
    const armAddon = `node_modules/@img/sharp-linux-arm64/lib/sharp-linux-arm64-${IMAGE_CODEC.sharp}.node`;
    expect(machine(tile.get(armAddon))).toBe(0xb7);
    expect(machine(tile.get(`node_modules/@img/sharp-libvips-linux-arm64/lib/libvips-cpp.so.${IMAGE_CODEC.vips}`))).toBe(0xb7);
    for (const dep of ['detect-libc', 'semver', '@img/colour']) expect(tile.has(`node_modules/${dep}/package.json`), dep).toBe(true);
    expect([...tile.keys()].filter((k) => k.includes('linux-x64'))).toEqual([]);
    // Only the bundles that import sharp carry it.
    expect([...unzip(join(root, 'dist', ARCHIVES.aws.scene)).keys()]).toEqual(['index.mjs', 'index.mjs.map']);

    const gcp = unzip(join(root, 'dist', ARCHIVES.gcp));
    expect([...gcp.keys()].sort()).toEqual(['index.js', 'index.js.map', 'package.json']);
    const manifest = JSON.parse(gcp.get('package.json')?.toString() ?? '{}') as { dependencies: Record<string, string> };
    expect(manifest.dependencies.sharp).toBe(IMAGE_CODEC.sharp);
    expect(gcp.get('index.js')?.toString()).toMatch(/import\(["']sharp["']\)/);

    const azure = unzip(join(root, 'dist', ARCHIVES.azure));
    expect(sharpVersion(azure)).toBe(IMAGE_CODEC.sharp);
    expect(machine(azure.get(`node_modules/@img/sharp-linux-x64/lib/sharp-linux-x64-${IMAGE_CODEC.sharp}.node`))).toBe(0x3e);
    expect(machine(azure.get(`node_modules/@img/sharp-libvips-linux-x64/lib/libvips-cpp.so.${IMAGE_CODEC.vips}`))).toBe(0x3e);
    // The Azure app as deployed (this machine is linux-x64, as the Functions host): its own sharp encodes a PNG.
    const app = mkdtempSync(join(tmpdir(), 'tessera-azure-app-'));
    roots.push(app);
    for (const [name, data] of azure) {
      mkdirSync(dirname(join(app, name)), { recursive: true });
      writeFileSync(join(app, name), data);
    }
    const script =
      "const sharp = (await import('sharp')).default; const png = await sharp(Buffer.alloc(4), { raw: { width: 1, height: 1, channels: 4 } }).png().toBuffer(); console.log(sharp.versions.vips, png.subarray(1, 4).toString());";
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: join(app, 'dist'),
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe(`${IMAGE_CODEC.vips} PNG`);
  }, 240_000);
});
