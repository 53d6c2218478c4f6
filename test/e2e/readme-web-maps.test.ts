import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import { PMTiles, TileType } from 'pmtiles';
import { afterAll, describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { runHelp } from '../../cli/commands/run.js';

/**
 * Issue 26's "done when": the three commands of the README's "## Web maps" section work on a clean clone. Each
 * fenced block of that section follows a marker (`<!-- readme-web-maps:NAME -->`); this test reads the blocks from
 * README.md and runs them as written:
 *
 * - `run`: the pyramid with PNG tiles and a PMTiles archive, on the local backend, in a temporary `--dir` (the README
 *   uses the default `.tessera`);
 * - `view`: `tessera view` on that folder, its page and archive fetched from the URL it prints, then SIGINT (Ctrl-C);
 * - `stack`: the `pulumi config set` lines applied to a copy of the example stack file, as `pulumi config set` writes
 *   them, and the `tessera preflight` line run on it.
 *
 * `npm run tessera -- ARGS` is run as npm runs it, minus npm: the package's `tessera` script with ARGS appended (npm
 * adds nothing else, and without it the command's own exit status is seen, not npm's re-raised signal). Each block of
 * printed lines (`run-output`, `view-output`, `stack-output`) must match lines the command printed, in order; only the
 * backend folder (`.../.tessera/`), a scene key written `abcd...wxyz`, the port and the elapsed seconds may differ.
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const MARKER = 'readme-web-maps';

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null && c.pid !== undefined) process.kill(-c.pid, 'SIGTERM');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tmp(name: string): string {
  const d = mkdtempSync(join(tmpdir(), `tessera-readme-${name}-`));
  dirs.push(d);
  return d;
}

/** The fenced block after `<!-- readme-web-maps:NAME -->` in the README's "## Web maps" section, without its fences. */
function block(name: string): string {
  const section = README.slice(README.indexOf('\n## Web maps\n'));
  if (!README.includes('\n## Web maps\n')) throw new Error('README.md has no "## Web maps" section');
  const end = section.indexOf('\n## ', 1);
  const m = new RegExp(`<!-- ${MARKER}:${name} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(
    end < 0 ? section : section.slice(0, end),
  );
  if (!m?.[1]) throw new Error(`README.md's "## Web maps" has no fenced block after <!-- ${MARKER}:${name} -->`);
  return m[1];
}

/** Words of one shell command line: plain words and '...' / "..." quoting; anything a shell would expand is refused. */
function shellWords(line: string): string[] {
  if (/[$`|;&<>\\*?]/.test(line)) throw new Error(`the README command ${JSON.stringify(line)} needs a shell; keep it plain words`);
  const words: string[] = [];
  for (const m of line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) words.push(m[1] ?? m[2] ?? (m[3] as string));
  return words;
}

/** ARGS of `npm run tessera -- ARGS`. */
function tesseraArgs(line: string): string[] {
  const words = shellWords(line);
  expect(words.slice(0, 4), `${line} starts with npm run tessera --`).toEqual(['npm', 'run', 'tessera', '--']);
  return words.slice(4);
}

/** The package's `tessera` script as a command: its `node` is the Node running this test. */
function tesseraScript(): { command: string; args: string[] } {
  const script = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts.tessera;
  const [node, ...args] = shellWords(script ?? '');
  expect(node, 'the tessera script runs node').toBe('node');
  return { command: process.execPath, args };
}

/** Starts `tessera ARGS` in its own process group (a terminal's Ctrl-C reaches the whole group), stdout collected. */
function start(args: string[]): { proc: ChildProcess; out: () => string; err: () => string; exit: Promise<number | string> } {
  const { command, args: prefix } = tesseraScript();
  const { BROWSER: _noBrowser, ...env } = process.env;
  const proc = spawn(command, [...prefix, ...args], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(proc);
  let out = '';
  let err = '';
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | string>((done) => proc.on('close', (code, signal) => done(code ?? signal ?? 'unknown')));
  return { proc, out: () => out, err: () => err, exit };
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A printed line of the README as a pattern: `.../.tessera/` is the backend folder the test gave, `abcd...wxyz` a
 * 64-digit key, `127.0.0.1:PORT` any port, `elapsed N s` any time; everything else literal, whole line.
 */
function linePattern(line: string, dir: string): RegExp {
  const elapsed = /^elapsed\s+[\d.]+ s$/;
  if (elapsed.test(line)) return elapsed;
  const parts = line.split(/(\.\.\.\/\.tessera\/|\b[0-9a-f]{4}\.\.\.[0-9a-f]{4}\b|127\.0\.0\.1:\d+)/);
  const source = parts
    .map((p, i) => {
      if (i % 2 === 0) return escapeRegExp(p);
      if (p === '.../.tessera/') return escapeRegExp(`${dir}/`);
      if (p.startsWith('127.0.0.1:')) return '127\\.0\\.0\\.1:\\d+';
      return '[0-9a-f]{64}';
    })
    .join('');
  return new RegExp(`^${source}$`);
}

/** Every printed line the README shows is a line of `actual`, in the README's order. */
function expectPrinted(name: string, actual: string, dir = ''): void {
  const lines = actual.split('\n');
  let at = 0;
  for (const shown of block(name).split('\n')) {
    const pattern = linePattern(shown, dir);
    const found = lines.findIndex((l, i) => i >= at && pattern.test(l));
    expect(found, `README ${name} line ${JSON.stringify(shown)} is not printed (after line ${at}) in:\n${actual}`).toBeGreaterThanOrEqual(
      0,
    );
    at = found + 1;
  }
}

/** `--name VALUE` or `--name=VALUE` of an argument list. */
function option(args: readonly string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === `--${name}`) return args[i + 1];
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
}

/** One `NAME   value` line of the run's summary. */
function summaryValue(out: string, name: string): string {
  const m = new RegExp(`^${escapeRegExp(name)}\\s+(.+)$`, 'm').exec(out);
  if (!m?.[1]) throw new Error(`the run printed no "${name}" line:\n${out}`);
  return m[1];
}

/** `pulumi config set KEY [--] VALUE` lines, the stack they are set on, and the preflight line of the stack block. */
function stackBlock(): { stack: string; sets: [string, string][]; preflight: string[] } {
  let stack: string | undefined;
  let preflight: string[] | undefined;
  const sets: [string, string][] = [];
  for (const line of block('stack').split('\n')) {
    const words = shellWords(line);
    if (words[0] === 'pulumi' && words[1] === 'stack' && words[2] === 'select' && words.length === 4) stack = words[3];
    else if (words[0] === 'pulumi' && words[1] === 'config' && words[2] === 'set') {
      // `--` ends the options, so a value may start with `-`; otherwise a word starting with `-` is an option.
      const rest = words.slice(3);
      const positional = rest.includes('--') ? rest.filter((w) => w !== '--') : rest;
      expect(
        positional.filter((w) => w.startsWith('-') && !rest.includes('--')),
        `${line}: no options`,
      ).toEqual([]);
      expect(positional, `${line}: KEY VALUE`).toHaveLength(2);
      sets.push([positional[0] as string, positional[1] as string]);
    } else if (words[0] === 'npm') preflight = tesseraArgs(line);
    else
      throw new Error(`README stack block: ${JSON.stringify(line)} is neither pulumi stack select, pulumi config set nor npm run tessera`);
  }
  if (stack === undefined || preflight === undefined)
    throw new Error('README stack block needs a pulumi stack select line and a preflight line');
  return { stack, sets, preflight };
}

describe(`the README's "## Web maps" commands, as written`, () => {
  const runArgs = tesseraArgs(block('run'));
  const dir = tmp('run');
  let sceneKey = '';
  let tilesWritten = 0;
  let pmtilesKey = '';

  it('1. the pyramid with PNG tiles, a colormap and a PMTiles archive: exit 0, every zoom written, the archive beside the mosaic', async () => {
    expect(runArgs[0]).toBe('run');
    expect(option(runArgs, 'format')).toBe('png');
    expect(option(runArgs, 'mosaic')).toBe('pmtiles');
    expect(option(runArgs, 'colormap')).toBeDefined();
    expect(option(runArgs, 'zoom')).toMatch(/^\d+-\d+$/);
    // The README runs in the default .tessera; the test gives its own folder, so nothing it runs is shared.
    expect(option(runArgs, 'dir'), 'the README command names no --dir').toBeUndefined();

    const run = start([...runArgs, '--dir', dir]);
    const code = await run.exit;
    expect(code, run.err()).toBe(0);
    const out = run.out();

    // Key figures: every tile of every zoom written, the highest zoom's manifest complete, the archive on disk.
    sceneKey = summaryValue(out, 'scene key');
    expect(sceneKey).toMatch(/^[0-9a-f]{64}$/);
    tilesWritten = Number(summaryValue(out, 'tiles written'));
    const [lo, hi] = (option(runArgs, 'zoom') as string).split('-').map(Number) as [number, number];
    expect(summaryValue(out, 'grid')).toContain(`zooms ${lo}-${hi} (${tilesWritten} tiles;`);
    expect(summaryValue(out, 'manifest count / grid count')).toMatch(/^(\d+) \/ \1 {2}OK$/);
    expect(summaryValue(out, 'dead-lettered')).toBe('0');
    const archive = summaryValue(out, 'PMTiles archive');
    expect(existsSync(archive) && statSync(archive).size).toBeGreaterThan(0);
    pmtilesKey = relative(join(dir, 'outputs', 'objects'), archive);
    expect(pmtilesKey).toBe(`mosaics/${sceneKey}.pmtiles`);
    for (const name of ['TileJSON', 'quicklook', 'STAC item']) expect(existsSync(summaryValue(out, name)), name).toBe(true);
    // Last, so that a README line out of date does not stop the view test: the lines the README shows were printed.
    expectPrinted('run-output', out, dir);
  });

  it('2. tessera view: prints its URL, serves the page and the archive by range requests, exits 0 on Ctrl-C', async () => {
    expect(sceneKey, 'the run above succeeded').not.toBe('');
    const viewArgs = tesseraArgs(block('view'));
    expect(viewArgs[0]).toBe('view');
    expect(option(viewArgs, 'dir'), 'the README command names no --dir').toBeUndefined();

    const view = start([...viewArgs, '--dir', dir]);
    // Listening once it has printed everything (the last line says how to stop it); an exit before that is a failure.
    await Promise.race([
      new Promise<void>((done) => {
        const poll = setInterval(() => {
          if (!view.out().includes('Ctrl-C to stop.')) return;
          clearInterval(poll);
          done();
        }, 50);
        void view.exit.finally(() => clearInterval(poll));
      }),
      view.exit.then((code) => {
        throw new Error(`tessera view exited ${code} before listening: ${view.err()}`);
      }),
    ]);
    expectPrinted('view-output', view.out());
    const url = /^tessera view: (http:\/\/127\.0\.0\.1:\d+\/)$/m.exec(view.out())?.[1] as string;

    // The page and its bundle, as a browser fetches them (the browser test draws them: view-browser.test.ts).
    const page = await fetch(url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('assets/view.js');
    const js = await fetch(new URL('assets/view.js', url));
    expect(js.status).toBe(200);
    expect((await js.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
    // The scene the page shows is the run's, and its first layer the archive.
    const config = (await (await fetch(new URL('view.json', url))).json()) as { scene: string };
    expect(config.scene).toBe(sceneKey);

    // The archive, read in place by the `pmtiles` reader the page uses (range requests to the server): every zoom of
    // the run, every tile written, PNG.
    const archive = new PMTiles(new URL(`o/${pmtilesKey}`, url).href);
    const header = await archive.getHeader();
    const [lo, hi] = (option(runArgs, 'zoom') as string).split('-').map(Number) as [number, number];
    expect([header.minZoom, header.maxZoom]).toEqual([lo, hi]);
    expect(header.numAddressedTiles).toBe(tilesWritten);
    expect(header.tileType).toBe(TileType.Png);
    // The lowest zoom's tile under the archive's centre: a PNG.
    const n = 2 ** lo;
    const x = Math.floor(((header.centerLon + 180) / 360) * n);
    const lat = (header.centerLat * Math.PI) / 180;
    const y = Math.floor(((1 - Math.log(Math.tan(lat) + 1 / Math.cos(lat)) / Math.PI) / 2) * n);
    const tile = await archive.getZxy(lo, x, y);
    expect(Buffer.from(tile?.data ?? new ArrayBuffer(0)).subarray(0, 8)).toEqual(
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    );

    process.kill(-(view.proc.pid as number), 'SIGINT');
    expect(await view.exit, view.err()).toBe(0);
  });

  it('3. the cloud stack config turns on the same web-map output and passes tessera preflight', async () => {
    const { stack, sets, preflight } = stackBlock();
    const config = Object.fromEntries(sets);
    // The same tiles as the run: the stack's tessera: keys are the run's options.
    const defaultTile = /--tile N\s+tile size in pixels \(default (\d+)/.exec(runHelp)?.[1];
    expect({
      tms: config['tessera:tms'],
      zoom: config['tessera:zoom'],
      tilePx: config['tessera:tilePx'],
      format: config['tessera:format']?.toLowerCase(),
      rescale: config['tessera:rescale'],
      colormap: config['tessera:colormap'],
      mosaic: config['tessera:mosaic'],
    }).toEqual({
      tms: option(runArgs, 'tms'),
      zoom: option(runArgs, 'zoom'),
      tilePx: option(runArgs, 'tile') ?? defaultTile,
      format: option(runArgs, 'format'),
      rescale: option(runArgs, 'rescale'),
      colormap: option(runArgs, 'colormap'),
      mosaic: option(runArgs, 'mosaic'),
    });
    expect(config['tessera:outputCorsOrigins']).toMatch(/^https:\/\//);

    expect(preflight[0]).toBe('preflight');
    expect(option(preflight, 'stack')).toBe(stack);
    expect(option(preflight, 'dir'), 'the README command names no --dir').toBeUndefined();
    // `pulumi config set` on the selected stack: each key set (replaced or added) under `config:` of its file.
    const stackDir = tmp('stack');
    const file = join(stackDir, `Pulumi.${stack}.yaml`);
    copyFileSync(join(ROOT, basename(file)), file);
    const doc = parseDocument(readFileSync(file, 'utf8'));
    for (const [key, value] of sets) doc.setIn(['config', key], value);
    writeFileSync(file, doc.toString());

    const run = start([...preflight, '--dir', stackDir]);
    expect(await run.exit, `${run.out()}\n${run.err()}`).toBe(0);
    expectPrinted('stack-output', run.out());
    expect(run.out()).toContain(`tessera preflight: stack ${stack} (${file})`);
  });
});
