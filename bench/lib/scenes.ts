import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeSyntheticScene } from '../../shared/raster/index.js';
import { REPO_ROOT } from './child.js';

/** Everything the benchmark writes besides its reports (gitignored). */
export const BENCH_DIR = join(REPO_ROOT, '.tessera-bench');
const SCENES_DIR = join(BENCH_DIR, 'scenes');
const RUNS_DIR = join(BENCH_DIR, 'runs');

/** The synthetic scene every section reads: Sentinel-2-like red and near-infrared, uint16, nodata 0. */
export const SCENE = {
  bands: ['B04', 'B08'] as const,
  epsg: 32631,
  originX: 500_000,
  originY: 5_700_000,
  pixelSize: 10,
  noData: 0,
  /** Internal tiling of the source scene (a COG-like 512 px block). */
  blockSize: 512,
  /**
   * DEFLATE (zlib level 1, horizontal predictor), like the compressed COGs real
   * scenes arrive as: every contender pays to decode what it reads. Pinned here
   * (the writer's default is uncompressed) so runs stay comparable.
   */
  compression: 'DEFLATE',
  level: 1,
  seed: 7,
} as const;

/**
 * The path of a cached synthetic scene of `width` x `height` pixels, written
 * on first use. The same size and seed always give the same pixels, so a
 * scene written by an earlier run is the same input (a 16384^2 scene takes
 * minutes to write). Written beside its final name and renamed, so an
 * interrupted run never leaves a truncated scene behind.
 */
export async function ensureScene(width: number, height = width, log: (line: string) => void = () => {}): Promise<string> {
  mkdirSync(SCENES_DIR, { recursive: true });
  const path = join(
    SCENES_DIR,
    `synthetic-${width}x${height}-b${SCENE.blockSize}-${SCENE.compression.toLowerCase()}-seed${SCENE.seed}.tif`,
  );
  if (existsSync(path)) return path;
  const tmp = `${path}.${process.pid}.part`;
  const started = performance.now();
  log(`writing a ${width}x${height} synthetic scene to ${path} (cached for later runs)`);
  try {
    await writeSyntheticScene(tmp, {
      width,
      height,
      bands: [...SCENE.bands],
      epsg: SCENE.epsg,
      originX: SCENE.originX,
      originY: SCENE.originY,
      pixelSize: SCENE.pixelSize,
      noData: SCENE.noData,
      blockSize: SCENE.blockSize,
      compression: SCENE.compression,
      level: SCENE.level,
      seed: SCENE.seed,
    });
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true });
  }
  log(`  ${width}x${height} scene written in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return path;
}

/** A fresh, empty scratch directory for one measurement. */
export function freshRunDir(name: string): string {
  const dir = join(RUNS_DIR, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Remove every measurement's scratch directory (scenes stay cached). */
export function clearRuns(): void {
  rmSync(RUNS_DIR, { recursive: true, force: true });
}
