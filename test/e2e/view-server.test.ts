import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { parseRange, startViewServer, type ViewServer } from '../../cli/view/http-server.js';
import { colormapStops } from '../../cli/view/legend.js';
import { NothingToViewError, type ServedKeys, sceneViewFromItem } from '../../cli/view/scene-view.js';
import type { ViewConfig } from '../../cli/view/view-config.js';

/**
 * `tessera view`'s server and scene reading without a browser (issue 26, section 5): range requests as RFC 9110 has
 * them (206, 416, If-None-Match 304, If-Range), only the scene's keys served (no path out of the root, however
 * encoded), 127.0.0.1 only (a foreign Host is refused), and the outputs a STAC Item links read into layers.
 * test/e2e/view-browser.test.ts drives the same server from Chromium.
 */
const ROOT = resolve(import.meta.dirname, '..', '..');
const dirs: string[] = [];
const tmp = (name: string) => {
  const d = mkdtempSync(join(tmpdir(), `tessera-view-${name}-`));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** A raw HTTP request: the path exactly as written (no URL normalisation) and any Host header. */
function raw(port: number, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  return new Promise((done, fail) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers: { host: `127.0.0.1:${port}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', fail);
    req.end();
  });
}

describe('the view server', () => {
  const body = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
  const config = { title: 't', scene: 's', layers: [], probe: [], notes: [] } as unknown as ViewConfig;
  let server: ViewServer;
  let root: string;

  beforeAll(async () => {
    const base = tmp('server');
    root = join(base, 'objects');
    mkdirSync(join(root, 'tiles', 's'), { recursive: true });
    mkdirSync(join(root, 'pyramid'), { recursive: true });
    writeFileSync(join(root, 'tiles', 's', '0_0.tif'), body);
    writeFileSync(join(root, 'item.json'), '{}');
    writeFileSync(join(root, 'other.json'), '{"not":"served"}');
    // A file beside the root: no request may reach it.
    writeFileSync(join(base, 'secret.txt'), 'secret');
    const served: ServedKeys = { exact: new Set(['item.json']), prefixes: ['tiles/s/', 'pyramid/'], sparse: ['pyramid/'] };
    server = await startViewServer({ root, served, config, assets: { js: Buffer.from('js'), css: Buffer.from('css'), hash: 'h' } });
  });
  afterAll(() => server.close());

  it('listens on 127.0.0.1 only, and serves the page, its bundle and the config', async () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/`);
    const page = await raw(server.port, '/');
    expect(page.status).toBe(200);
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect(page.body.toString()).toContain('<script type="module" src="assets/view.js">');
    expect((await raw(server.port, '/assets/view.js')).body.toString()).toBe('js');
    expect(JSON.parse((await raw(server.port, '/view.json')).body.toString())).toEqual(config);
  });

  it('answers a whole object 200 with Accept-Ranges, a strong ETag and its length; HEAD without a body', async () => {
    const whole = await raw(server.port, '/o/tiles/s/0_0.tif');
    expect(whole.status).toBe(200);
    expect(whole.headers['accept-ranges']).toBe('bytes');
    expect(whole.headers.etag).toMatch(/^"[0-9a-f]+-3e8-[0-9a-f]+"$/);
    expect(whole.headers['content-length']).toBe('1000');
    expect(whole.body.equals(body)).toBe(true);
    const head = await raw(server.port, '/o/tiles/s/0_0.tif', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe('1000');
    expect(head.body.length).toBe(0);
  });

  it('answers one range 206 with Content-Range, past the end 416, several ranges with the whole object', async () => {
    const mid = await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=10-19' });
    expect(mid.status).toBe(206);
    expect(mid.headers['content-range']).toBe('bytes 10-19/1000');
    expect(mid.body.equals(body.subarray(10, 20))).toBe(true);
    const suffix = await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=-5' });
    expect([suffix.status, suffix.headers['content-range']]).toEqual([206, 'bytes 995-999/1000']);
    const open = await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=990-' });
    expect([open.status, open.body.length]).toEqual([206, 10]);
    const clipped = await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=900-5000' });
    expect([clipped.status, clipped.headers['content-range']]).toEqual([206, 'bytes 900-999/1000']);
    const past = await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=1000-1010' });
    expect([past.status, past.headers['content-range']]).toEqual([416, 'bytes */1000']);
    const several = await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=0-1,5-6' });
    expect([several.status, several.body.length]).toEqual([200, 1000]);
  });

  it('answers If-None-Match with the ETag 304, and a Range under a stale If-Range with the whole object', async () => {
    const etag = (await raw(server.port, '/o/tiles/s/0_0.tif', {}, 'HEAD')).headers.etag as string;
    expect((await raw(server.port, '/o/tiles/s/0_0.tif', { 'if-none-match': etag })).status).toBe(304);
    expect((await raw(server.port, '/o/tiles/s/0_0.tif', { 'if-none-match': `"x", W/${etag}` })).status).toBe(304);
    expect((await raw(server.port, '/o/tiles/s/0_0.tif', { 'if-none-match': '"other"' })).status).toBe(200);
    expect((await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=0-9', 'if-range': etag })).status).toBe(206);
    expect((await raw(server.port, '/o/tiles/s/0_0.tif', { range: 'bytes=0-9', 'if-range': '"stale"' })).status).toBe(200);
  });

  it('serves only the keys the scene lists, and no path out of the root however it is written', async () => {
    expect((await raw(server.port, '/o/item.json')).status).toBe(200);
    for (const path of [
      '/o/other.json', // in the root, not the scene's
      '/o/../secret.txt',
      '/o/tiles/s/../../../secret.txt',
      '/o/tiles/s/%2e%2e/%2e%2e/%2e%2e/secret.txt',
      '/o/tiles%2fs%2f..%2f..%2f..%2fsecret.txt',
      '/o/tiles/s/..%5c..%5c..%5csecret.txt',
      '/o//etc/passwd',
      '/o/%2fetc%2fpasswd',
      '/o/tiles/s//0_0.tif',
      '/o/tiles/s/%00.tif',
      '/o/%E0%A4%A',
      '/secret.txt',
      '/../secret.txt',
    ]) {
      const answer = await raw(server.port, path);
      expect([path, answer.status]).toEqual([path, 404]);
      expect(answer.body.toString()).not.toContain('secret');
    }
  });

  it('answers a missing tile of a sparse tile folder 204 (a blank tile skipped), any other missing key 404', async () => {
    expect((await raw(server.port, '/o/pyramid/3/1/2.png')).status).toBe(204);
    expect((await raw(server.port, '/o/tiles/s/9_9.tif')).status).toBe(404);
  });

  it('refuses a foreign Host (a DNS name rebound to 127.0.0.1) and any method but GET and HEAD', async () => {
    expect((await raw(server.port, '/o/item.json', { host: 'attacker.example' })).status).toBe(421);
    expect((await raw(server.port, '/o/item.json', { host: `localhost:${server.port}` })).status).toBe(200);
    const post = await raw(server.port, '/o/item.json', {}, 'POST');
    expect([post.status, post.headers.allow]).toEqual([405, 'GET, HEAD']);
  });

  it('parses byte ranges as RFC 9110 has them', () => {
    expect(parseRange(undefined, 10)).toBeUndefined();
    expect(parseRange('bytes=0-0', 10)).toEqual([0, 0]);
    expect(parseRange('bytes=-20', 10)).toEqual([0, 9]);
    expect(parseRange('bytes=-0', 10)).toBe('unsatisfiable');
    expect(parseRange('bytes=5-2', 10)).toBeUndefined();
    expect(parseRange('items=0-1', 10)).toBeUndefined();
    expect(parseRange('bytes=0-', 0)).toBe('unsatisfiable');
  });
});

/** A STAC Item with assets and links as tessera writes them (and as the PMTiles and TileJSON outputs are linked). */
function writeItem(folder: string, name: string, item: Record<string, unknown>): string {
  mkdirSync(folder, { recursive: true });
  const path = join(folder, name);
  writeFileSync(path, JSON.stringify({ type: 'Feature', stac_version: '1.0.0', geometry: null, links: [], ...item }));
  return path;
}

describe('reading a scene from its STAC Item', () => {
  it('serves what the Item links: the COG mosaic, a PMTiles archive and a TileJSON with its tile folder; remote hrefs are noted', async () => {
    const base = tmp('item');
    const outside = join(base, 'copy');
    mkdirSync(join(outside, 'tiles', 'WebMercatorQuad', '9', '1'), { recursive: true });
    for (const f of ['scene.tif', 'scene.pmtiles']) writeFileSync(join(outside, f), 'x');
    writeFileSync(
      join(outside, 'scene.tilejson.json'),
      JSON.stringify({
        tilejson: '3.0.0',
        tiles: ['tiles/WebMercatorQuad/{z}/{x}/{y}.png'],
        minzoom: 8,
        maxzoom: 9,
        bounds: [2, 50, 3, 51],
      }),
    );
    const item = writeItem(outside, 'item.json', {
      id: 'scene',
      properties: { 'proj:code': 'EPSG:32631', renders: { ndvi: { colormap_name: 'viridis', rescale: [[-1, 1]] } } },
      assets: {
        cog: { href: './scene.tif', type: 'image/tiff; application=geotiff; profile=cloud-optimized', roles: ['data'] },
        pmtiles: { href: './scene.pmtiles', type: 'application/vnd.pmtiles', roles: ['data'] },
        vrt: { href: './scene.vrt', type: 'application/xml', roles: ['data'] },
        remote: { href: 'https://example.com/x.pmtiles', type: 'application/vnd.pmtiles' },
        escape: { href: '../../x.tif', type: 'image/tiff; application=geotiff; profile=cloud-optimized' },
      },
      links: [{ rel: 'tilejson', href: './scene.tilejson.json', type: 'application/json' }],
    });
    const view = await sceneViewFromItem(item);
    expect(view.root).toBe(outside);
    expect(view.config.layers.map((l) => l.kind)).toEqual(['pmtiles', 'xyz', 'cog']);
    expect(view.config.layers[1]).toMatchObject({ template: 'o/tiles/WebMercatorQuad/{z}/{x}/{y}.png', minzoom: 8, maxzoom: 9 });
    expect([...view.served.exact].sort()).toEqual(['item.json', 'scene.pmtiles', 'scene.tif', 'scene.tilejson.json']);
    expect(view.served.prefixes).toEqual(['tiles/WebMercatorQuad/']);
    expect(view.served.sparse).toEqual(['tiles/WebMercatorQuad/']);
    expect(view.config.probe).toEqual([{ key: 'scene.tif', url: 'o/scene.tif' }]);
    expect(view.config.crs?.code).toBe('EPSG:32631');
    expect(view.config.crs?.proj4).toContain('+proj=utm +zone=31');
    expect(view.config.notes.join('\n')).toMatch(/remote: pmtiles at https:\/\/example.com\/x.pmtiles is not served \(not relative/);
    expect(view.config.notes.join('\n')).toMatch(/escape: cog at ..\/..\/x.tif is not served \(outside the folder served\)/);
    // The legend the outputs were rendered with (STAC render extension).
    expect(view.config.legend).toMatchObject({ colormap: 'viridis', min: -1, max: 1, source: 'STAC Item renders.ndvi' });
    expect(view.config.legend.colors[0]).toEqual([68, 1, 84]);
    expect(view.config.legend.colors.at(-1)).toEqual(colormapStops('viridis')?.at(-1));
  });

  it('falls back to the grey ramp over the data for a colormap it does not know, and says so', async () => {
    const folder = tmp('legend');
    writeFileSync(join(folder, 'm.tif'), 'x');
    const item = writeItem(folder, 'item.json', {
      id: 'scene',
      properties: { 'tessera:colormap': 'jet' },
      assets: { cog: { href: 'm.tif', type: 'image/tiff; application=geotiff; profile=cloud-optimized' } },
    });
    const { legend } = (await sceneViewFromItem(item)).config;
    expect(legend).toMatchObject({
      colormap: 'grey',
      colors: [
        [0, 0, 0],
        [255, 255, 255],
      ],
    });
    expect(legend.min).toBeUndefined();
    expect(legend.source).toContain('"jet", which the viewer does not know');
  });

  it('refuses an Item with nothing a browser can read, naming the fix', async () => {
    const folder = tmp('nothing');
    writeFileSync(join(folder, 'scene.vrt'), '<VRTDataset/>');
    const item = writeItem(folder, 'item.json', {
      id: 'scene',
      properties: {},
      assets: { mosaic: { href: './scene.vrt', type: 'application/xml' } },
    });
    await expect(sceneViewFromItem(item)).rejects.toThrow(NothingToViewError);
    await expect(sceneViewFromItem(item)).rejects.toThrow(/run with --mosaic cog/);
  });
});

describe('tessera view and tessera run --view', () => {
  const run = async (argv: string[]) => {
    let out = '';
    let err = '';
    const code = await main(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t), cwd: ROOT });
    return { code, out, err };
  };

  it('has --help, and refuses bad options with the fix', async () => {
    const help = await run(['view', '--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain('--stac ITEM');
    const both = await run(['view', '--stac', 'x.json', '--dir', 'y']);
    expect([both.code, both.err]).toEqual([1, expect.stringContaining('give it alone, or --dir and --scene instead')]);
    const scene = await run(['view', '--scene', 'abc']);
    expect([scene.code, scene.err]).toEqual([1, expect.stringContaining('--scene must be a scene key')]);
    const none = await run(['view', '--dir', tmp('empty')]);
    expect([none.code, none.err]).toEqual([1, expect.stringContaining('NothingToViewError [INVALID_PARAMS]: no run found')]);
    const port = await run(['view', '--port', '70000']);
    expect([port.code, port.err]).toEqual([1, expect.stringContaining('--port must be a whole number from 0 to 65535')]);
  });

  it('run --view serves the run it made, prints the URL (after the summary with --json) and stops on SIGINT', async () => {
    const dir = tmp('run-view');
    const { BROWSER: _noBrowser, ...env } = process.env;
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'cli', 'main.ts'),
        'run',
        '--size',
        '256',
        '--tile',
        '128',
        '--workers',
        '1',
        '--json',
        '--view',
        '--dir',
        dir,
      ],
      { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    const lines = await new Promise<string[]>((done, fail) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const complete = out.split('\n').slice(0, -1);
        if (complete.length >= 2) done(complete);
      });
      child.on('exit', (code) => fail(new Error(`tessera run --view exited ${code}: ${out}`)));
    });
    const summary = JSON.parse(lines[0] as string) as { sceneKey: string; ok: boolean };
    const view = JSON.parse(lines[1] as string) as { url: string; scene: string; layers: unknown[] };
    expect(summary.ok).toBe(true);
    expect(view.scene).toBe(summary.sceneKey);
    expect(view.layers).toEqual([{ kind: 'cog', title: 'COG tiles (4)' }]);
    const config = (await (await fetch(new URL('view.json', view.url))).json()) as ViewConfig;
    expect(config.probe.map((c) => c.bbox?.length)).toEqual([4, 4, 4, 4]);
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  });
});
