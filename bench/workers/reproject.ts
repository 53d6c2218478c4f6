/**
 * Child process of the reprojection section: Tessera's render of reprojected tiles, one process (pinned to
 * one core by the parent). The scene is fanned out as a deployed stack fans it out (fanOutScene, its jobs
 * captured instead of queued); `tiles` of its jobs, spread over the tile matrix set's tiles inside the
 * scene, are rendered with renderTile (shared/app/render-tile.ts: each band's window read and resampled
 * onto the tile, the band math, the COG encode), timed from the first to the last, after one untimed
 * warm-up tile of another copy of the scene (a warm JIT; the timed tiles still read and decode their own
 * blocks). No gates: the section races the raster work against GDAL's, which has none either. The
 * tiles' target grids are returned for GDAL to warp onto, and the first `keep` tiles are written to
 * `outDir` after the clock, for the comparison.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { renderTile } from '../../shared/app/render-tile.js';
import { parseTileJob, type TileJob } from '../../shared/app/tile-job.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { type GeoTransform, parseExpression, windowGeoTransform } from '../../shared/raster/index.js';
import { CapturingQueue, sourceRef } from '../lib/jobs.js';
import { profileTile, type StageTimings } from '../lib/ungated.js';
import { memory, tileWorkerMain } from './common.js';

export interface ReprojectWorkerInput {
  readonly dir: string;
  readonly scenePath: string;
  readonly params: ProcessingParams;
  readonly tiles: number;
  /** How many of the tiles to write to `outDir` (after the clock). */
  readonly keep: number;
  readonly outDir: string;
}

/** One rendered tile: where it lies (for GDAL to warp onto the same grid) and, if kept, its file. */
export interface ReprojectedTile {
  readonly name: string;
  readonly epsg: number;
  readonly geoTransform: GeoTransform;
  readonly width: number;
  readonly height: number;
  readonly out?: string | undefined;
}

export interface ReprojectWorkerOutput {
  readonly elapsedMs: number;
  readonly cpuMs: number;
  readonly perTileMs: number[];
  readonly tiles: ReprojectedTile[];
  /** Tiles of the scene's grid (the tile matrix set's tiles covering the footprint). */
  readonly gridTiles: number;
  /** Every tile fan-out made, by name (`{z}-{x}-{y}` on a tile matrix set): the tile set another tiler is checked against. */
  readonly gridTileNames: string[];
  /** The scene's whole target grid, which every tile is a window of. */
  readonly grid: { readonly epsg: number; readonly geoTransform: GeoTransform; readonly width: number; readonly height: number };
  readonly bytes: number[];
  readonly memory: ReturnType<typeof memory>;
  /** Untimed by the race, on a third copy of the scene: renderTile's steps one by one (read + resample, band math, encode). */
  readonly profile: StageTimings[];
}

/** The scene's tile jobs as fan-out makes them, for `key` already in `sources`. */
async function fannedOut(backend: ReturnType<typeof createLocalBackend>, key: string, params: ProcessingParams): Promise<TileJob[]> {
  const source = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, key);
  const capture = new CapturingQueue();
  await fanOutScene({ ...backend, queue: capture }, { source, params });
  return capture.messages.map((m) => parseTileJob(m.body));
}

/**
 * `n` jobs spread evenly over the grid's inner tiles (not its first or last row or column, which the
 * footprint only partly covers: a tile of nodata is no race), in row-major order.
 */
function spread(jobs: readonly TileJob[], n: number): TileJob[] {
  const rows = Math.max(...jobs.map((j) => j.window.row));
  const cols = Math.max(...jobs.map((j) => j.window.col));
  const inner = jobs.filter((j) => j.window.row > 0 && j.window.row < rows && j.window.col > 0 && j.window.col < cols);
  const pool = inner.length >= n ? inner : [...jobs];
  const take = Math.min(n, pool.length);
  return Array.from({ length: take }, (_, k) => pool[Math.floor((k * pool.length) / take)] as TileJob);
}

/** A tile's name: `{z}-{x}-{y}` on a tile matrix set, else `{row}_{col}` of the grid. */
function tileName(job: TileJob): string {
  const tms = job.grid.target?.tms;
  return tms ? `${tms.zoom}-${tms.minCol + job.window.col}-${tms.minRow + job.window.row}` : `${job.window.row}_${job.window.col}`;
}

async function render(sources: ObjectStore, job: TileJob): Promise<Uint8Array> {
  const tiling = tilingParams(job.params);
  return renderTile(sources, job, tiling, parseExpression(tiling.expression, Object.keys(tiling.bands)));
}

tileWorkerMain(async (input: ReprojectWorkerInput): Promise<ReprojectWorkerOutput> => {
  const backend = createLocalBackend(input.dir);
  try {
    await backend.sources.importFile('scenes/bench.tif', input.scenePath);
    const all = await fannedOut(backend, 'scenes/bench.tif', input.params);
    const jobs = spread(all, input.tiles);
    // Warm-up on another copy of the scene: its own source and block cache, so the timed tiles decode their blocks.
    await backend.sources.importFile('scenes/warmup.tif', input.scenePath);
    const [warm] = spread(await fannedOut(backend, 'scenes/warmup.tif', input.params), 1);
    if (warm) await render(backend.sources, warm);

    const cogs: Uint8Array[] = [];
    const perTileMs: number[] = [];
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    for (const job of jobs) {
      const t = performance.now();
      cogs.push(await render(backend.sources, job));
      perTileMs.push(performance.now() - t);
    }
    const elapsedMs = performance.now() - started;
    // CPU time of the whole process (main thread and libuv's pool): the work, whatever else the core ran.
    const cpu = process.cpuUsage(cpuStarted);

    // Where a tile's time goes, untimed by the race: the same tiles of a third copy (cold blocks again).
    await backend.sources.importFile('scenes/profile.tif', input.scenePath);
    const profiled = await fannedOut(backend, 'scenes/profile.tif', input.params);
    const profile: StageTimings[] = [];
    for (const job of jobs) {
      const same = profiled.find((p) => p.window.row === job.window.row && p.window.col === job.window.col) as TileJob;
      profile.push(await profileTile(backend.sources, same));
    }

    mkdirSync(input.outDir, { recursive: true });
    const tiles = jobs.map((job, k): ReprojectedTile => {
      const target = job.grid.target;
      if (target?.crs.epsg === undefined) throw new Error(`tile job ${job.jobKey} has no target grid: the parameters do not reproject`);
      const name = tileName(job);
      let out: string | undefined;
      if (k < input.keep) {
        out = join(input.outDir, `${name}.tif`);
        writeFileSync(out, cogs[k] as Uint8Array);
      }
      return {
        name,
        epsg: target.crs.epsg,
        geoTransform: windowGeoTransform([...target.geoTransform], job.window),
        width: job.window.width,
        height: job.window.height,
        out,
      };
    });
    const first = jobs[0] as TileJob;
    return {
      grid: {
        epsg: first.grid.target?.crs.epsg as number,
        geoTransform: [...(first.grid.target?.geoTransform ?? [])] as GeoTransform,
        width: first.grid.width,
        height: first.grid.height,
      },
      elapsedMs,
      cpuMs: (cpu.user + cpu.system) / 1000,
      perTileMs,
      tiles,
      gridTiles: all.length,
      gridTileNames: all.map(tileName),
      bytes: cogs.map((c) => c.byteLength),
      memory: memory(),
      profile,
    };
  } finally {
    backend.close();
  }
});
