import { existsSync, mkdirSync, readdirSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeSyntheticScene } from '../../shared/raster/index.js';
import { REPO_ROOT } from './child.js';

/** Everything the benchmark writes besides its reports (gitignored). */
export const BENCH_DIR = join(REPO_ROOT, '.tessera-bench');
const SCENES_DIR = join(BENCH_DIR, 'scenes');
/**
 * Every bench process's scratch folders, one folder per process: `runs/<pid>/`. Two benchmarks may run at once on one
 * tree (several people or sessions on one machine), and one finishing must not delete the folders of a measurement
 * the other is in (it did, when all of them shared `runs/`).
 */
const RUNS_DIR = join(BENCH_DIR, 'runs');
/** This process's folder under RUNS_DIR. */
const OWN_RUNS_DIR = join(RUNS_DIR, String(process.pid));

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

/** Whether a process of that id is running (on this machine: the runs folder is local). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Remove the runs folders of bench processes that are gone (killed or crashed before their clean-up). Folders of
 * running ones stay, and so does anything not named by a process id.
 */
function removeStaleRuns(): void {
  let names: string[];
  try {
    names = readdirSync(RUNS_DIR);
  } catch {
    return;
  }
  for (const name of names) {
    if (!/^[1-9]\d*$/.test(name)) continue;
    const pid = Number(name);
    if (pid !== process.pid && !alive(pid)) rmSync(join(RUNS_DIR, name), { recursive: true, force: true });
  }
}

let sweptStale = false;

/** A fresh, empty scratch directory for one measurement, under this process's own runs folder. */
export function freshRunDir(name: string): string {
  if (!sweptStale) {
    sweptStale = true;
    removeStaleRuns();
  }
  const dir = join(OWN_RUNS_DIR, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * Remove this process's measurement scratch directories (scenes stay cached), and those of bench processes that are
 * gone; never another running benchmark's.
 */
export function clearRuns(): void {
  rmSync(OWN_RUNS_DIR, { recursive: true, force: true });
  removeStaleRuns();
  try {
    rmdirSync(RUNS_DIR); // only when empty: another benchmark may be creating its folder right now
  } catch {
    // Not empty (another benchmark is running), or not there.
  }
}
