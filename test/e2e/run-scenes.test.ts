import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runHelp } from '../../cli/commands/run.js';
import { main } from '../../cli/main.js';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';

/**
 * `tessera run` on real band files and a real STAC Item (issue 14, "done when"): the Sentinel-2 L2A
 * bands rio-tiler-pds ships (test/data/public/s2-29RKH/) and their STAC Item, mirrored as a bucket would
 * hold them: the Item beside its bands, hrefs relative to it.
 */
const DATA = resolve('test/data/public/s2-29RKH');

async function run(argv: string[], cwd: string): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t), cwd });
  return { code, out, err };
}

const summaryOf = (out: string): MainJobSummary => JSON.parse(out.trim().split('\n').pop() as string) as MainJobSummary;

/** The public Item with its COG hrefs made relative (`./B01.tif`), as in a bucket that mirrors the scene. */
function mirroredItem(dir: string): string {
  const item = JSON.parse(readFileSync(join(DATA, 'S2A_29RKH_20200219_0_L2A.json'), 'utf8')) as {
    assets: Record<string, { href: string }>;
  };
  for (const asset of Object.values(item.assets)) asset.href = `./${asset.href.split('/').pop()}`;
  const folder = join(dir, 'S2A_29RKH_20200219_0_L2A');
  mkdirSync(folder, { recursive: true });
  for (const band of ['B01.tif', 'B8A.tif']) copyFileSync(join(DATA, band), join(folder, band));
  const path = join(folder, 'item.json');
  writeFileSync(path, JSON.stringify(item));
  return path;
}

describe('tessera run on band files and STAC Items', () => {
  it('takes a scene from a STAC Item by eo:bands common names, tiles it on WebMercatorQuad and describes it in a STAC Item', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-run-stac-'));
    const item = mirroredItem(dir);
    const { code, out } = await run(
      [
        'run',
        '--stac',
        item,
        '--asset',
        'B01=coastal',
        '--asset',
        'B8A=nir08',
        '--expression',
        '(B8A - B01) / (B8A + B01)',
        '--tms',
        'WebMercatorQuad',
        '--zoom',
        '7',
        '--resampling',
        'bilinear',
        '--workers',
        '1',
        '--json',
        '--dir',
        join(dir, 'backend'),
      ],
      dir,
    );
    expect(code).toBe(0);
    const s = summaryOf(out);
    expect(s).toMatchObject({ ok: true, crs: 'EPSG:3857', tms: 'WebMercatorQuad', zoom: 7 });
    expect(s.source).toBe('local-sources/scenes/S2A_29RKH_20200219_0_L2A/item.json');
    expect(s.bands).toEqual({
      B01: 'local-sources/scenes/S2A_29RKH_20200219_0_L2A/B01.tif',
      B8A: 'local-sources/scenes/S2A_29RKH_20200219_0_L2A/B8A.tif',
    });
    const outputs = new FsObjectStore(join(dir, 'backend', 'outputs'));
    const manifest = await readSceneManifest(outputs, s.sceneKey);
    expect(manifest.sourceItem).toMatchObject({ id: 'S2A_29RKH_20200219_0_L2A', datetime: '2020-02-19T11:34:25.405000Z' });
    const keys: string[] = [];
    for await (const h of outputs.list(`tiles/${s.sceneKey}/`)) keys.push(h.key);
    expect(keys.length).toBe(s.gridCount);
    for (const k of keys) expect(k).toMatch(new RegExp(`^tiles/${s.sceneKey}/WebMercatorQuad/7/\\d+/\\d+\\.tif$`));
    const stac = JSON.parse(readFileSync(s.stacItemPath, 'utf8')) as {
      id: string;
      properties: Record<string, unknown>;
      links: { rel: string; href: string }[];
    };
    expect(stac.id).toBe(s.sceneKey);
    expect(stac.properties.datetime).toBe('2020-02-19T11:34:25.405000Z');
    expect(stac.properties['proj:code']).toBe('EPSG:3857');
    // The source Item, by the URI the source store names it with (a file:// URL on the local backend).
    const source = stac.links.find((l) => l.rel === 'derived_from');
    expect(source?.href).toMatch(/^file:\/\/.*\/sources\/objects\/scenes\/S2A_29RKH_20200219_0_L2A\/item\.json$/);
  }, 120_000);

  it('refuses malformed --band and --asset values, and a bad grid option, before importing anything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-run-bad-'));
    const cases: [string[], RegExp][] = [
      [['--band', 'B04'], /--band "B04": write NAME=INDEX/],
      [['--band', 'B04=missing.tif'], /is not a file/],
      [['--band', 'B04=0'], /band index 0 must be an integer from 1/],
      [['--band', 'B04=1'], /give --scene PATH or --source-key KEY too/],
      [['--asset', 'B04=red'], /--asset names an asset of --stac ITEM/],
      [['--crs', '3857'], /EPSG:<number>/],
      [['--crs', 'EPSG:3857', '--resampling', 'gauss'], /resampling "gauss"/],
      [['--tms', 'WebMercatorQuad'], /--tms and --zoom go together/],
      [['--tms', 'WebMercatorQuad', '--zoom', '3', '--tile', '300'], /tile_px must be 256 or 512/],
    ];
    for (const [argv, message] of cases) {
      const { code, err } = await run(['run', ...argv, '--dir', join(dir, 'backend')], dir);
      expect(code, argv.join(' ')).not.toBe(0);
      expect(err, argv.join(' ')).toMatch(message);
    }
  });

  it('documents every option in --help', async () => {
    const source = readFileSync('cli/commands/run.ts', 'utf8');
    const block = source.slice(source.indexOf('options: {'), source.indexOf('},\n  });'));
    const options = [...block.matchAll(/^\s+'?([a-z][a-z-]*)'?: \{ type:/gm)].map((m) => m[1] as string);
    expect(options.length).toBeGreaterThan(20);
    for (const option of options) expect(runHelp, `--${option}`).toContain(`--${option}`);
  });
});
