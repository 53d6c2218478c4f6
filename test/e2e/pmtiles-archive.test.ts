import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PMTiles, type Source } from 'pmtiles';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import type { MainJobSummary } from '../../functions/local/main-job.js';
import { GO_PMTILES_BIN, GO_PMTILES_VERSION, installedGoPmtilesVersion } from '../../scripts/emulators/pmtiles.mjs';
import { archiveTiles } from '../../shared/app/pmtiles-archive.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { PmtilesWriter, zxyToTileId } from '../../shared/raster/pmtiles-writer.js';

// Issue 26 section 3: the PMTiles archive of a real local run, checked by the PMTiles project's own Go command
// (`pmtiles verify` of go-pmtiles v1.31.2, built into .tools/bin by scripts/emulators/pmtiles.mjs) and read back by the
// `pmtiles` npm reader. go-pmtiles' verify logs "Invalid: ..." for a misplaced entry without failing, so its output
// is checked too.

/** `go-pmtiles verify` of a file: its exit status must be 0 and its log free of "Invalid". */
function verify(path: string): string {
  const r = spawnSync(GO_PMTILES_BIN, ['verify', path], { encoding: 'utf8' });
  const log = `${r.stdout}${r.stderr}`;
  expect(r.status, log).toBe(0);
  expect(log).not.toMatch(/invalid/i);
  expect(log).toContain('Completed verify');
  return log;
}

/** `tessera run` with `args` in a fresh folder: exit code and JSON summary. */
async function run(...args: string[]): Promise<{ code: number; summary: MainJobSummary; err: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-pmtiles-'));
  let out = '';
  let err = '';
  const code = await main(['run', '--workers', '2', '--json', '--dir', join(dir, 'backend'), ...args], {
    stdout: (t) => (out += t),
    stderr: (t) => (err += t),
    cwd: dir,
  });
  return { code, err, summary: JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as MainJobSummary };
}

const fileReader = (path: string) => {
  // A Uint8Array, not a Buffer: Buffer's slice() is a view, Uint8Array's a copy with its own ArrayBuffer.
  const bytes = new Uint8Array(readFileSync(path));
  return new PMTiles({ getKey: () => path, getBytes: async (o, l) => ({ data: bytes.slice(o, o + l).buffer }) } satisfies Source);
};

describe('the PMTiles archive of a local run (tessera run --mosaic pmtiles)', () => {
  it(`is built with go-pmtiles ${GO_PMTILES_VERSION} (scripts/install-emulators.mjs)`, () => {
    expect(existsSync(GO_PMTILES_BIN), `${GO_PMTILES_BIN}: run node scripts/install-emulators.mjs`).toBe(true);
    expect(installedGoPmtilesVersion()).toBe(GO_PMTILES_VERSION);
  });

  it('a PNG pyramid (zooms 13-15, duplicates delivered): passes pmtiles verify, and both readers give every tile’s bytes', async () => {
    const {
      code,
      summary: s,
      err,
    } = await run(
      ...['--size', '512', '--tms', 'WebMercatorQuad', '--zoom', '13-15', '--tile', '256', '--resampling', 'bilinear'],
      ...['--format', 'png', '--rescale=-1,1', '--colormap', 'rdylgn', '--mosaic', 'pmtiles', '--demo-duplicates', '0.25'],
    );
    expect(code, err).toBe(0);
    expect(s.ok).toBe(true);
    const path = s.pmtilesPath as string;
    expect(existsSync(path)).toBe(true);
    verify(path);
    const header = JSON.parse(execFileSync(GO_PMTILES_BIN, ['show', '--header-json', path], { encoding: 'utf8' })) as Record<
      string,
      unknown
    >;
    expect(header).toMatchObject({ tile_type: 'png', tile_compression: 'none', minzoom: 13, maxzoom: 15 });

    const outputs = new FsObjectStore(join(s.outputDir, '..'));
    const manifest = await readSceneManifest(outputs, s.sceneKey);
    const tiles = archiveTiles(manifest, tilingParams(manifest.params));
    expect(tiles.length).toBeGreaterThan(manifest.grid.count);
    const archive = fileReader(path);
    for (const [i, t] of tiles.entries()) {
      const want = Buffer.from(await outputs.get(t.key));
      const got = await archive.getZxy(t.z, t.x, t.y);
      expect(Buffer.from(got?.data ?? new ArrayBuffer(0)).equals(want), t.key).toBe(true);
      // go-pmtiles' own reader too, for a few tiles of each zoom.
      if (i % 7 === 0)
        expect(execFileSync(GO_PMTILES_BIN, ['tile', path, String(t.z), String(t.x), String(t.y)]).equals(want), t.key).toBe(true);
    }
    // The quicklook and the TileJSON beside it.
    const quick = await sharp(s.quicklookPath as string).metadata();
    expect(Math.max(quick.width ?? 0, quick.height ?? 0)).toBeLessThanOrEqual(1024);
    expect(JSON.parse(readFileSync(s.tileJsonPath as string, 'utf8'))).toMatchObject({ tilejson: '3.0.0', minzoom: 13, maxzoom: 15 });
  }, 120_000);

  it('a WebP scene of one zoom passes pmtiles verify (tile type webp)', async () => {
    const {
      code,
      summary: s,
      err,
    } = await run(
      ...['--size', '256', '--tms', 'WebMercatorQuad', '--zoom', '15', '--tile', '256'],
      ...['--format', 'webp', '--rescale=-1,1', '--colormap', 'viridis', '--mosaic', 'pmtiles'],
    );
    expect(code, err).toBe(0);
    verify(s.pmtilesPath as string);
    const header = JSON.parse(execFileSync(GO_PMTILES_BIN, ['show', '--header-json', s.pmtilesPath as string], { encoding: 'utf8' }));
    expect(header).toMatchObject({ tile_type: 'webp', minzoom: 15, maxzoom: 15 });
  }, 60_000);

  it('an archive with leaf directories (21,845 tiles of zooms 0-7) passes pmtiles verify', () => {
    const tiles: { id: number; bytes: Uint8Array }[] = [];
    let seed = 11;
    for (let z = 0; z <= 7; z++)
      for (let x = 0; x < 2 ** z; x++)
        for (let y = 0; y < 2 ** z; y++) {
          seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
          const bytes = new Uint8Array(16 + (seed % 180));
          bytes.set([0x89, 0x50, 0x4e, 0x47, z, x, y]);
          tiles.push({ id: zxyToTileId(z, x, y), bytes });
        }
    tiles.sort((a, b) => a.id - b.id);
    const w = new PmtilesWriter(
      { tileType: 'PNG', minZoom: 0, maxZoom: 7, bounds: [-180, -85.0511287, 180, 85.0511287], center: [0, 0, 3] },
      { name: 'leaves' },
      { maxTiles: tiles.length, maxTileBytes: tiles.reduce((n, t) => n + t.bytes.byteLength, 0) },
    );
    for (const t of tiles) w.add(t.id, t.bytes);
    const { bytes, stats } = w.finish();
    expect(stats.leafDirectories).toBeGreaterThan(1);
    const path = join(mkdtempSync(join(tmpdir(), 'tessera-leaves-')), 'leaves.pmtiles');
    writeFileSync(path, bytes);
    verify(path);
    expect(execFileSync(GO_PMTILES_BIN, ['tile', path, '7', '127', '5'])[4]).toBe(7);
    // verify is not vacuous: the same archive with a wrong count of addressed tiles in its header fails it.
    const wrong = Buffer.from(bytes);
    wrong.writeBigUInt64LE(BigInt(stats.addressedTiles + 1), 72);
    writeFileSync(`${path}.wrong`, wrong);
    const r = spawnSync(GO_PMTILES_BIN, ['verify', `${path}.wrong`], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(`${r.stdout}${r.stderr}`).toContain('AddressedTilesCount');
  });
});
