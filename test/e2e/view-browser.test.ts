import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';
import { outputKeys } from '../../shared/domain/key-layout.js';
import { openGeoTiff, type RasterSource } from '../../shared/raster/geotiff-source.js';

/**
 * Issue 26, sections 5 and 6: `tessera view` in a real browser. Debian's chromium (apt `chromium`, installed by
 * .ci/run), driven by playwright-core, loads the page the real command serves for a scene `tessera run` just made
 * (16 tiles), and the test checks what a person would see: the map is not blank where the scene is (screenshot
 * pixels inside the footprint against the empty margin), every request was answered 200 or 206 (COGs only by
 * ranges), the console has no error, the legend shows the data's range, and the value under the cursor is the COG's
 * own value there, read back with the project's reader. Once with `--mosaic cog` (the COG mosaic; its screenshot is
 * the README's, docs/img/view.png), once with the VRT only (the page draws the tiles).
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const SCREENSHOT = join(ROOT, 'docs', 'img', 'view.png');
const VIEWPORT = { width: 1000, height: 640 };

/** Debian's chromium: TESSERA_CHROMIUM when set, else the apt package's binary. */
function chromiumPath(): string {
  const candidates = [process.env.TESSERA_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => !!p);
  const found = candidates.find((p) => existsSync(p));
  if (found === undefined) {
    throw new Error(
      `no chromium at ${candidates.join(', ')}: install Debian's (apt-get install -y chromium), as .ci/run does, or set TESSERA_CHROMIUM`,
    );
  }
  return found;
}

/** The page's `window.tesseraView` (cli/view/page/main.ts), as far as the test reads it. */
interface Probe {
  x: number;
  y: number;
  key: string | undefined;
  value: number | null;
}
/**
 * Page code (the functions passed to `evaluate`) is sent to the browser as source, without its closure: it names the
 * page's globals through `globalThis` each time (strings would need eval, which the page's CSP forbids).
 */
interface PageGlobals {
  tesseraView: { state: string; error?: string; probe?: Probe | undefined; footprintBox(): [number, number, number, number] | null };
}

const children: ChildProcess[] = [];
const dirs: string[] = [];
let browser: Browser;

beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: chromiumPath(),
    // Root in a container: no sandbox. WebGL (OpenLayers' COG layers) on SwiftShader, Chromium's software renderer.
    args: ['--no-sandbox', '--enable-unsafe-swiftshader', '--use-angle=swiftshader'],
  });
});

afterAll(async () => {
  await browser?.close();
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** `tessera run` on a 512 x 512 synthetic scene in 128-pixel tiles (16) by default, with the mosaic asked for. */
async function runScene(
  mosaic: 'cog' | 'vrt',
  grid: string[] = ['--size', '512', '--tile', '128'],
): Promise<{ dir: string; summary: MainJobSummary }> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-view-'));
  dirs.push(dir);
  let out = '';
  const code = await main(['run', ...grid, '--mosaic', mosaic, '--workers', '1', '--json', '--dir', dir], {
    stdout: (t) => (out += t),
    stderr: () => {},
    cwd: ROOT,
  });
  expect(code).toBe(0);
  const summary = JSON.parse(out.trim().split('\n').pop() as string) as MainJobSummary;
  expect(summary.windows).toBe(16);
  return { dir, summary };
}

/** Starts the real command (`tessera view --json`, $BROWSER unset) and reads the line it prints once listening. */
async function startView(args: string[]): Promise<{ url: string; layers: unknown }> {
  const { BROWSER: _noBrowser, ...env } = process.env;
  const proc = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'cli', 'main.ts'), 'view', ...args, '--json'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(proc);
  let out = '';
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  return new Promise((resolveLine, reject) => {
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) resolveLine(JSON.parse(out.slice(0, nl)) as { url: string; layers: unknown });
    });
    proc.on('exit', (code) => reject(new Error(`tessera view exited ${code} before listening: ${err}`)));
  });
}

interface Loaded {
  page: Page;
  png: Buffer;
  box: [number, number, number, number];
  consoleErrors: string[];
  failed: string[];
  responses: { url: string; status: number; range: string | undefined }[];
}

/** Opens the page, waits until the map is idle (every source open, every visible tile drawn), screenshots it. */
async function load(url: string): Promise<Loaded> {
  const page = await browser.newPage({ viewport: VIEWPORT, deviceScaleFactor: 1 });
  const loaded: Omit<Loaded, 'png' | 'box'> = { page, consoleErrors: [], failed: [], responses: [] };
  page.on('console', (m) => {
    if (m.type() === 'error') loaded.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => loaded.consoleErrors.push(`pageerror: ${e.message}`));
  page.on('requestfailed', (r) => loaded.failed.push(`${r.url()}: ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.url().startsWith(url)) loaded.responses.push({ url: r.url(), status: r.status(), range: r.request().headers().range });
  });
  await page.goto(url);
  await page.waitForFunction(() => (globalThis as unknown as PageGlobals).tesseraView?.state !== 'loading', null, { timeout: 25_000 });
  expect(
    await page.evaluate(
      () => (globalThis as unknown as PageGlobals).tesseraView.error ?? (globalThis as unknown as PageGlobals).tesseraView.state,
    ),
  ).toBe('idle');
  const box = (await page.evaluate(() => (globalThis as unknown as PageGlobals).tesseraView.footprintBox())) as [
    number,
    number,
    number,
    number,
  ];
  expect(box[2] - box[0]).toBeGreaterThan(200);
  expect(box[3] - box[1]).toBeGreaterThan(200);
  return { ...loaded, box, png: await page.screenshot({ type: 'png' }) };
}

/**
 * The map is not blank where the scene is: many colours inside the footprint, the margin beside it one colour, and
 * at most `maxBackground` of the inside the margin's colour.
 */
async function expectNotBlank({ png, box }: Loaded, maxBackground = 0.01): Promise<void> {
  const inset = (box[2] - box[0]) * 0.1;
  const inside = await colours(png, [box[0] + inset, box[1] + inset, box[2] - inset, box[3] - inset]);
  // Left of the footprint, clear of the zoom buttons (top) and the scale line (bottom): the map's empty background.
  const margin = await colours(png, [8, 80, box[0] - 8, VIEWPORT.height - 60]);
  expect(margin.distinct).toBe(1);
  expect(inside.distinct).toBeGreaterThan(64);
  expect(inside.transparent).toBe(0);
  expect(inside.share(margin.top)).toBeLessThan(maxBackground);
}

/** The value the page shows under the cursor is `source`'s pixel at the point it read, for two points of the scene. */
async function expectProbe(
  { page, box }: Loaded,
  expectedKey: (p: Probe) => string,
  source: (key: string) => Promise<RasterSource>,
): Promise<void> {
  for (const [fx, fy] of [
    [0.3, 0.4],
    [0.7, 0.6],
  ] as const) {
    await page.evaluate(() => {
      (globalThis as unknown as PageGlobals).tesseraView.probe = undefined;
    });
    await page.mouse.move(box[0] + (box[2] - box[0]) * fx, box[1] + (box[3] - box[1]) * fy);
    const p = (await (await page.waitForFunction(() => (globalThis as unknown as PageGlobals).tesseraView.probe)).jsonValue()) as Probe;
    expect(p.key).toBe(expectedKey(p));
    const cog = await source(p.key as string);
    const [ox, px, , oy, , py] = cog.geoTransform;
    const [expected] = await cog.readWindow({ x: Math.floor((p.x - ox) / px), y: Math.floor((p.y - oy) / py), width: 1, height: 1 }, [1]);
    expect(p.value).not.toBeNull();
    expect(p.value).toBe(expected?.[0]);
    expect(await page.textContent('#probe')).toContain(`value ${String(Number((p.value as number).toPrecision(5)))}`);
  }
}

/** Every request was answered 200 or 206, none failed, the console has no error, and COGs were read by ranges only. */
function expectCleanLoad({ consoleErrors, failed, responses }: Loaded, cogs = true): void {
  expect(consoleErrors).toEqual([]);
  expect(failed).toEqual([]);
  expect(responses.filter((r) => r.status !== 200 && r.status !== 206)).toEqual([]);
  const cogReads = responses.filter((r) => r.url.endsWith('.tif'));
  expect(cogReads.length > 0).toBe(cogs);
  expect(cogReads.filter((r) => r.status !== 206 || r.range === undefined)).toEqual([]);
}

describe('tessera view in a real browser (Debian chromium, playwright-core)', () => {
  it("shows a scene's COG mosaic with its footprint, legend and the value under the cursor; every request 200 or 206, no console error", async () => {
    const { dir, summary } = await runScene('cog');
    const view = await startView(['--dir', dir, '--port', '0']);
    expect(view.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(view.layers).toEqual([{ kind: 'cog', title: 'COG mosaic' }]);
    const loaded = await load(view.url);
    await expectNotBlank(loaded);

    // The legend: the grey ramp (the outputs name no colormap) over the data's range.
    const { page } = loaded;
    const [min, max] = [Number(await page.textContent('#legend-min')), Number(await page.textContent('#legend-max'))];
    expect(min).toBeLessThan(max);
    expect(await page.textContent('#legend-name')).toBe('grey');

    const outputs = new FsObjectStore(join(dir, 'outputs'));
    await expectProbe(
      loaded,
      () => outputKeys.cogMosaic(summary.sceneKey),
      (key) => openGeoTiff(outputs, key),
    );
    expectCleanLoad(loaded);
    // The README's picture, with the value of the last point under the cursor in the panel.
    mkdirSync(join(ROOT, 'docs', 'img'), { recursive: true });
    writeFileSync(SCREENSHOT, await page.screenshot({ type: 'png' }));
  }, 60_000);

  it("draws a scene's COG tiles as one layer when there is no COG mosaic (the VRT's tiles, read where the view needs them)", async () => {
    const { dir, summary } = await runScene('vrt');
    const view = await startView(['--dir', dir]);
    expect(view.layers).toEqual([{ kind: 'cog', title: 'COG tiles (16)' }]);
    const loaded = await load(view.url);
    await expectNotBlank(loaded);
    const outputs = new FsObjectStore(join(dir, 'outputs'));
    // Each point's value comes from the tile that holds it.
    await expectProbe(
      loaded,
      (p) => {
        expect(p.key?.startsWith(outputKeys.tilePrefix(summary.sceneKey))).toBe(true);
        return p.key as string;
      },
      (key) => openGeoTiff(outputs, key),
    );
    expectCleanLoad(loaded);
  }, 60_000);

  it('shows rendered PNG tiles on WebMercatorQuad as XYZ tiles, with the legend they were rendered with', async () => {
    // 1,024 pixels of 10 m on zoom 13's 256-pixel tiles: 16 tiles.
    const { dir } = await runScene('vrt', [
      '--size',
      '1024',
      '--tile',
      '256',
      '--tms',
      'WebMercatorQuad',
      '--zoom',
      '13',
      '--format',
      'png',
      '--rescale=-1,1',
      '--colormap',
      'rdylgn',
    ]);
    const view = await startView(['--dir', dir]);
    // The run wrote a TileJSON beside the tiles: the page reads the tiles through it (scene-view.ts's order).
    expect(view.layers).toEqual([{ kind: 'xyz', title: 'TileJSON 3.0.0 of the rendered tiles (its tile URLs are relative to it)' }]);
    const loaded = await load(view.url);
    // The footprint is the tile grid's, whole tiles: their pixels past the scene are transparent (nodata).
    await expectNotBlank(loaded, 0.2);
    const { page } = loaded;
    expect(await page.textContent('#legend-name')).toBe('rdylgn');
    expect([await page.textContent('#legend-min'), await page.textContent('#legend-max')]).toEqual(['-1', '1']);
    expect(await page.textContent('#probe')).toBe('no COG to read values from');
    expect(loaded.responses.filter((r) => r.url.endsWith('.png')).length).toBeGreaterThan(0);
    expectCleanLoad(loaded, false);
  }, 60_000);
});

/** Counts the colours of a rectangle of an image, in the browser (drawn on a 2D canvas of a blank page). */
async function colours(
  png: Buffer,
  rect: [number, number, number, number],
): Promise<{ distinct: number; transparent: number; top: number; share: (rgba: number) => number }> {
  const scratch = await browser.newPage();
  const counts = await scratch.evaluate(
    async ({ src, rect: [l, t, r, b] }) => {
      const g = globalThis as unknown as {
        Image: new () => { src: string; width: number; height: number; decode(): Promise<void> };
        document: { createElement(tag: 'canvas'): CanvasLike };
      };
      interface CanvasLike {
        width: number;
        height: number;
        getContext(kind: '2d'): {
          drawImage(img: unknown, x: number, y: number): void;
          getImageData(...a: number[]): { data: Uint8ClampedArray };
        };
      }
      const img = new g.Image();
      img.src = src;
      await img.decode();
      const canvas = g.document.createElement('canvas');
      canvas.width = img.width;
      canvas.height = img.height;
      const ctx = canvas.getContext('2d');
      ctx.drawImage(img, 0, 0);
      const [x0, y0] = [Math.round(l), Math.round(t)];
      const data = ctx.getImageData(x0, y0, Math.round(r) - x0, Math.round(b) - y0).data;
      const seen: Record<number, number> = {};
      for (let i = 0; i < data.length; i += 4) {
        const key = (((data[i] ?? 0) << 24) | ((data[i + 1] ?? 0) << 16) | ((data[i + 2] ?? 0) << 8) | (data[i + 3] ?? 0)) >>> 0;
        seen[key] = (seen[key] ?? 0) + 1;
      }
      return seen;
    },
    { src: `data:image/png;base64,${png.toString('base64')}`, rect },
  );
  await scratch.close();
  const entries = Object.entries(counts).map(([k, n]) => [Number(k), n] as const);
  const total = entries.reduce((s, [, n]) => s + n, 0);
  const top = entries.reduce((a, b) => (b[1] > a[1] ? b : a))[0];
  return {
    distinct: entries.length,
    transparent: entries.filter(([k]) => (k & 0xff) !== 0xff).reduce((s, [, n]) => s + n, 0),
    top,
    share: (rgba) => (counts[rgba] ?? 0) / total,
  };
}
