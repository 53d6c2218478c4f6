import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { outputKeys } from '../../shared/domain/job-key.js';
import { windows } from '../../shared/domain/tile-grid.js';

/** `tessera run` with `args` in a fresh folder: exit code, the JSON summary (if it ran) and stderr. */
async function run(...args: string[]): Promise<{ code: number; dir: string; summary?: MainJobSummary; err: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-rendered-'));
  let out = '';
  let err = '';
  const code = await main(['run', '--size', '512', '--tile', '128', '--workers', '2', '--json', '--dir', join(dir, 'backend'), ...args], {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    cwd: dir,
  });
  const last = out.trim().split('\n').at(-1);
  return { code, dir, err, ...(last?.startsWith('{') ? { summary: JSON.parse(last) as MainJobSummary } : {}) };
}

describe('rendered tiles on the local backend (tessera run --format png)', () => {
  it('writes every window as a PNG once despite duplicates, and the VRT mosaic shows exactly the tiles', async () => {
    const { code, summary } = await run('--format', 'png', '--rescale=-1,1', '--colormap', 'rdylgn', '--demo-duplicates', '0.25');
    expect(code).toBe(0);
    const s = summary as MainJobSummary;
    expect(s).toMatchObject({ windows: 16, tilesWritten: 16, manifestCount: 16, ok: true, poison: 0 });
    expect(s.duplicatesDelivered).toBe(4);
    expect(s.duplicatesStoppedAtClaim + s.duplicatesStoppedAtWrite).toBeGreaterThanOrEqual(4);

    const outputs = new FsObjectStore(join(s.outputDir, '..'));
    const manifest = await readSceneManifest(outputs, s.sceneKey);
    const keys: string[] = [];
    for await (const head of outputs.list(outputKeys.tilePrefix(s.sceneKey))) keys.push(head.key);
    expect(keys.sort()).toEqual([...windows(manifest.grid)].map((w) => outputKeys.tile(s.sceneKey, w, undefined, 'PNG')).sort());

    // The mosaic as GDAL reads it (Debian's gdal-bin): 8-bit RGBA over the PNG tiles, pixel for pixel.
    const info = JSON.parse(execFileSync('gdalinfo', ['-json', s.mosaicPath], { encoding: 'utf8' })) as {
      size: number[];
      bands: { type: string; colorInterpretation: string }[];
    };
    expect(info.size).toEqual([512, 512]);
    expect(info.bands.map((b) => `${b.type} ${b.colorInterpretation}`)).toEqual(['Byte Red', 'Byte Green', 'Byte Blue', 'Byte Alpha']);
    const flat = join(mkdtempSync(join(tmpdir(), 'tessera-mosaic-')), 'mosaic.png');
    execFileSync('gdal_translate', ['-q', '-of', 'PNG', s.mosaicPath, flat]);
    const mosaic = await sharp(flat).raw().toBuffer();
    let transparent = 0;
    for (const w of windows(manifest.grid)) {
      const png = await outputs.get(outputKeys.tile(s.sceneKey, w, undefined, 'PNG'));
      const { data, info: t } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
      expect([t.width, t.height, t.channels]).toEqual([w.width, w.height, 4]);
      for (let y = 0; y < w.height; y++) {
        const row = data.subarray(y * w.width * 4, (y + 1) * w.width * 4);
        const at = ((w.y + y) * 512 + w.x) * 4;
        expect(mosaic.subarray(at, at + w.width * 4).equals(row), `tile ${w.row}_${w.col} row ${y}`).toBe(true);
        for (let x = 3; x < row.length; x += 4) if (row[x] === 0) transparent++;
      }
    }
    // The synthetic scene has nodata pixels: they are transparent, not black.
    expect(transparent).toBeGreaterThan(0);

    // The STAC Item says what the mosaic is: 8-bit bands over the PNG tiles.
    const item = JSON.parse(readFileSync(s.stacItemPath, 'utf8')) as { assets: { mosaic: { title: string; 'raster:bands': unknown[] } } };
    expect(item.assets.mosaic.title).toContain('PNG tiles');
    expect(item.assets.mosaic['raster:bands']).toEqual(Array(4).fill({ data_type: 'uint8' }));
  }, 120_000);

  it.each([
    [
      ['--format', 'png', '--rescale=-1,1', '--colormap', 'jet'],
      'is not a known colormap; use one of viridis, plasma, magma, inferno, rdylgn, greys',
    ],
    [['--format', 'png', '--rescale=1,-1'], 'MIN must be less than MAX'],
    [['--format', 'webp'], 'needs the range to map: give output.rescale [min, max] (--rescale MIN,MAX'],
    [['--format', 'jpeg', '--rescale=-1,1'], 'JPEG has no transparency'],
    [['--colormap', 'viridis'], '--colormap applies to rendered tiles: add --format png'],
  ])('refuses %j before anything is staged or claimed, naming the fix', async (args, message) => {
    const { code, dir, err } = await run(...args);
    expect(code).not.toBe(0);
    expect(err).toContain('InvalidParamsError');
    expect(err).toContain(message);
    // Nothing was made: no backend folder, so no source staged, no claim row, no tile.
    expect(existsSync(join(dir, 'backend'))).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
  });
});
