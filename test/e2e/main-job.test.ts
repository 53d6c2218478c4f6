import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../cli/main.js';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import { type MainJobSummary, runMainJob } from '../../functions/local/main-job.js';
import { silentProgress } from '../../functions/local/progress.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { outputKeys } from '../../shared/domain/job-key.js';
import { windows } from '../../shared/domain/tile-grid.js';
import { gdalInfo, rootEpsg } from '../unit/raster/gdal-harness.js';

describe('the main job on the local backend', () => {
  it('writes every window once despite duplicates and a stolen lease, and every tile is a georeferenced COG', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-e2e-'));
    const logs: string[] = [];
    const s = await runMainJob({
      dir,
      width: 1000,
      height: 700,
      tilePx: 256,
      workers: 3,
      duplicateRate: 0.25,
      injectSteal: true,
      seed: 3,
      fresh: true,
      progress: silentProgress,
      log: (l) => logs.push(l),
    });
    expect(s).toMatchObject({
      windows: 12,
      gridCount: 12,
      manifestCount: 12,
      tilesWritten: 12,
      leasesStolen: 1,
      leasesTakenOver: 1,
      ok: true,
    });
    expect(s.duplicatesDelivered).toBe(3 + 1);
    // Every duplicate stopped at one of the two gates; the zombie's write is the one refused at the write.
    expect(s.duplicatesStoppedAtClaim + s.duplicatesStoppedAtWrite).toBeGreaterThanOrEqual(s.duplicatesDelivered);
    expect(s.duplicatesStoppedAtWrite).toBeGreaterThanOrEqual(1);
    expect(logs.map((l) => JSON.parse(l)).filter((l) => l.event === 'lease-stolen' && l.level === 'ERROR')).toHaveLength(1);

    const outputs = new FsObjectStore(join(dir, 'outputs'));
    const manifest = await readSceneManifest(outputs, s.sceneKey);
    const [a, b, , d, , f] = manifest.raster.geoTransform;
    let tiles = 0;
    for await (const _ of outputs.list(outputKeys.tilePrefix(s.sceneKey))) tiles++;
    expect(tiles).toBe(12);
    for (const w of windows(manifest.grid)) {
      const info = await gdalInfo(outputs.pathOf(outputKeys.tile(s.sceneKey, w)));
      expect(info.size).toEqual([w.width, w.height]);
      expect(rootEpsg(info)).toBe(32631);
      expect(info.geoTransform[0]).toBeCloseTo(a + w.x * b, 6);
      expect(info.geoTransform[3]).toBeCloseTo(d + w.y * f, 6);
      expect(info.metadata.IMAGE_STRUCTURE?.COMPRESSION).toBe('DEFLATE');
    }
    // The VRT lists exactly the grid's tiles, relative to itself. (gdal3.js mounts only the opened
    // file's folder, so the sources are resolved here; the raster tests open VRTs in GDAL itself.)
    const vrt = readFileSync(s.mosaicPath, 'utf8');
    expect(vrt).toMatch(/<VRTDataset rasterXSize="1000" rasterYSize="700">/);
    const sources = [...vrt.matchAll(/<SourceFilename relativeToVRT="1">([^<]+)<\/SourceFilename>/g)].map((m) => m[1] as string);
    expect(sources).toHaveLength(12);
    expect(new Set(sources).size).toBe(12);
    for (const src of sources) expect(existsSync(resolve(dirname(s.mosaicPath), src))).toBe(true);
  }, 120_000);

  it('`tessera run --json` prints the summary as one JSON object on its last line and exits 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-cli-'));
    let out = '';
    const code = await main(['run', '--size', '512', '--tile', '128', '--workers', '2', '--json', '--dir', dir], {
      stdout: (t) => {
        out += t;
      },
      stderr: () => {},
      cwd: dir,
    });
    expect(code).toBe(0);
    const last = JSON.parse(out.trim().split('\n').at(-1) as string) as MainJobSummary;
    for (const field of [
      'windows',
      'tilesWritten',
      'duplicatesStoppedAtClaim',
      'duplicatesStoppedAtWrite',
      'leasesStolen',
      'manifestCount',
      'mosaicPath',
      'outputDir',
    ]) {
      expect(last).toHaveProperty(field);
    }
    expect(last.manifestCount).toBe(16);
  }, 120_000);

  /** `tessera run` on a 512 px scene in 16 tiles, its JSON summary and its JSON-lines logs. */
  async function cliRun(...extra: string[]): Promise<{ code: number; summary: MainJobSummary; errors: unknown[] }> {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-cli-'));
    let out = '';
    let err = '';
    const args = ['run', '--size', '512', '--tile', '128', '--workers', '2', '--json', '--verbose', '--dir', dir, ...extra];
    const code = await main(args, { stdout: (t) => (out += t), stderr: (t) => (err += t), cwd: dir });
    const errors = err
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: string })
      .filter((l) => l.level === 'ERROR');
    return { code, summary: JSON.parse(out.trim().split('\n').at(-1) as string) as MainJobSummary, errors };
  }

  it('a plain `tessera run` injects no fault: no duplicate delivery, no lease taken over or stolen, no ERROR line', async () => {
    const { code, summary, errors } = await cliRun();
    expect(code).toBe(0);
    expect(summary).toMatchObject({
      tilesWritten: 16,
      duplicatesDelivered: 0,
      duplicatesStoppedAtClaim: 0,
      duplicatesStoppedAtWrite: 0,
      leasesTakenOver: 0,
      leasesStolen: 0,
      poison: 0,
    });
    expect(errors).toEqual([]);
  }, 120_000);

  it('`tessera run --demo` injects 10% duplicate deliveries and a stalled worker whose lease is stolen (logged ERROR)', async () => {
    const { code, summary, errors } = await cliRun('--demo');
    expect(code).toBe(0);
    // ceil(16 x 0.1) = 2 duplicates, and the stalled worker's job is delivered again to the worker that takes it over.
    expect(summary).toMatchObject({ tilesWritten: 16, manifestCount: 16, duplicatesDelivered: 2 + 1, leasesTakenOver: 1, leasesStolen: 1 });
    expect(errors).toEqual([expect.objectContaining({ event: 'lease-stolen' })]);
  }, 120_000);

  it('`--demo-duplicates R` alone injects the duplicates only; --profile refuses the demo faults', async () => {
    const { code, summary, errors } = await cliRun('--demo-duplicates', '0.5');
    expect(code).toBe(0);
    expect(summary).toMatchObject({ tilesWritten: 16, duplicatesDelivered: 8, leasesTakenOver: 0, leasesStolen: 0 });
    expect(summary.duplicatesStoppedAtClaim + summary.duplicatesStoppedAtWrite).toBeGreaterThanOrEqual(8);
    expect(errors).toEqual([]);
    let err = '';
    const refused = await main(['run', '--profile', '--demo'], { stdout: () => {}, stderr: (t) => (err += t), cwd: tmpdir() });
    expect(refused).toBe(1);
    expect(err).toContain('--profile measures tiles one at a time with no fault injected');
  }, 120_000);

  it('`tessera run --help` documents --workers: worker processes, defaulting to the cores this process may use', async () => {
    let out = '';
    const code = await main(['run', '--help'], { stdout: (t) => (out += t), stderr: () => {}, cwd: tmpdir() });
    expect(code).toBe(0);
    expect(out).toMatch(/--workers N\s+worker processes/);
    expect(out).toContain(`os.availableParallelism(): ${availableParallelism()}`);
  });

  it.each([
    [['run', '--tile', '256.5'], /--tile must be a whole number/],
    [['run', '--workers', 'many'], /--workers must be a whole number/],
    [['run', '--bogus'], /Unknown option/],
    [['backfill', '--policy', 'clobber'], /--policy must be skip, new-key or overwrite/],
    [['frobnicate'], /unknown command/],
  ])('`tessera %j` fails with a clear message', async (argv, message) => {
    let err = '';
    const code = await main(argv, { stdout: () => {}, stderr: (t) => (err += t), cwd: tmpdir() });
    expect(code).not.toBe(0);
    expect(err).toMatch(message);
  });
});
