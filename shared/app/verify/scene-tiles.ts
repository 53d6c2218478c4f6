import { type ProcessingParams, sceneKey, tileJobKey } from '../../domain/job-key.js';
import { tileFormatOf } from '../../domain/render-params.js';
import { type TileGrid, type Window, windowAt, windows } from '../../domain/tile-grid.js';
import { tilingParams } from '../../domain/tiling-params.js';
import { levelGrid, levelTiles, pyramidOf, pyramidScene } from '../pyramid-grid.js';
import { manifestPins, type SceneManifest } from '../scene-manifest.js';
import { makeTileJob, type TileJob, type TileMode, tileOutputKey } from '../tile-job.js';

/**
 * A scene's tiles as `tessera verify` checks, replays, backfills and removes them (shared/app/verify/verify-stack.ts):
 * one zoom's grid, or every zoom of a pyramid (docs/pyramids.md), each tile with the job key its claim row has and the
 * output key its object has. Pure arithmetic on the manifest, as fan-out's and the mosaic's.
 */

/** One tile of a scene: its zoom (a pyramid's; undefined for one zoom), its window of that zoom's grid, its keys. */
export interface SceneTile {
  readonly zoom: number | undefined;
  readonly window: Window;
  readonly jobKey: string;
  readonly outputKey: string;
}

/** The zooms of a scene's tiles, highest first: `[undefined]` for one zoom's scene. */
export function sceneZooms(params: ProcessingParams): readonly (number | undefined)[] {
  const pyramid = pyramidOf(tilingParams(params));
  if (pyramid === undefined) return [undefined];
  return Array.from({ length: pyramid.maxZoom - pyramid.minZoom + 1 }, (_, i) => pyramid.maxZoom - i);
}

/**
 * Every tile of the scene `scene` (its grid, its parameters), the highest zoom's first, each zoom row by row. One zoom:
 * the grid's windows. A pyramid: every tile of every zoom (pyramid-grid.ts `levelTiles`), each job key binding its zoom.
 */
export function sceneTiles(scene: string, grid: TileGrid, params: ProcessingParams): SceneTile[] {
  const tiling = tilingParams(params);
  const pyramid = pyramidOf(tiling);
  if (pyramid === undefined) {
    const format = tileFormatOf(params);
    return [...windows(grid)].map((window) => ({
      zoom: undefined,
      window,
      jobKey: tileJobKey(scene, window),
      outputKey: tileOutputKey(scene, grid, window, format),
    }));
  }
  const p = pyramidScene(scene, grid, tiling);
  const out: SceneTile[] = [];
  for (let z = pyramid.maxZoom; z >= pyramid.minZoom; z--) {
    for (const t of levelTiles(p, z)) out.push({ zoom: z, window: t.window, jobKey: tileJobKey(scene, t.window, z), outputKey: t.key });
  }
  return out;
}

/** Every tile of a manifest's scene ({@link sceneTiles}). */
export const manifestTiles = (m: SceneManifest): SceneTile[] => sceneTiles(m.sceneKey, m.grid, m.params);

/** The window (row, col) of zoom `zoom` of a scene (the scene grid for one zoom, `zoom` undefined). */
export function sceneWindow(m: Pick<SceneManifest, 'grid' | 'params'>, zoom: number | undefined, row: number, col: number): Window {
  if (zoom === undefined) return windowAt(m.grid, row, col);
  return windowAt(levelGrid(m.grid, tilingParams(m.params).tilePx, zoom), row, col);
}

/**
 * The tile job of window `window` of zoom `zoom` of the manifest's scene, pinned as the manifest records; with other
 * parameters (`params`: a new-key backfill, whose scene key they make) or a repair `mode`.
 */
export function sceneJob(
  m: SceneManifest,
  zoom: number | undefined,
  window: Window,
  options: { readonly params?: ProcessingParams | undefined; readonly mode?: TileMode | undefined } = {},
): TileJob {
  const params = options.params ?? m.params;
  const scene = options.params === undefined ? m.sceneKey : sceneKey(m.source, params);
  return makeTileJob(scene, m.source, params, m.grid, window, options.mode ?? { kind: 'create' }, manifestPins(m), undefined, zoom);
}

/**
 * The tile jobs a fan-out of the manifest's scene enqueues (shared/app/fan-out.ts): every window of the scene grid, at
 * the highest zoom for a pyramid (each tile below is enqueued by its children once they are written). What a duplicate
 * scene event publishes again, and what `tessera backfill` sends.
 */
export function fanOutJobs(m: SceneManifest, options: { readonly params?: ProcessingParams | undefined } = {}): TileJob[] {
  const zoom = pyramidOf(tilingParams(m.params))?.maxZoom;
  return [...windows(m.grid)].map((w) => sceneJob(m, zoom, w, options));
}
