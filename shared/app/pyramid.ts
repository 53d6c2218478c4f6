import { ObjectNotFoundError, PyramidChildMissingError, UnsupportedRasterError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import type { RenderParams } from '../domain/render-params.js';
import type { Resampling, TilingParams } from '../domain/tiling-params.js';
import { tilingParams } from '../domain/tiling-params.js';
import type { JobMessage } from '../ports/job-queue.port.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import { nextFloat32Up } from '../raster/expression.js';
import { decodeImage, encodeImage, type RawImage, renderedBands } from '../raster/image-encoder.js';
import { openGeoTiff } from '../raster/index.js';
import type { Backend } from './backend.js';
import { type ChildTile, childrenOf, levelGrid, levelTiles, parentWindowOf, pyramidOf, pyramidScene } from './pyramid-grid.js';
import { encodeTile, type RenderedTile } from './render-tile.js';
import { assertJobTarget, jobTarget } from './scene-grid.js';
import { readSceneManifest, type SceneManifest } from './scene-manifest.js';
import { makeTileJob, type SceneReadPins, type TileJob, toJobMessage } from './tile-job.js';

/**
 * Zoom pyramids (issue 26 section 1; docs/pyramids.md). The highest zoom's tiles are rendered from the source as one
 * zoom's are; every tile below is built from its four children once they are written, so a zoom-8 tile reads four
 * tiles' pixels, never the 4^6 tiles' worth of source a zoom-14 pyramid has under it.
 *
 * How a parent waits: it is not on the queue until its children are. Each child, after its create-only write and
 * before its commit, heads its siblings; the one that finds them all written enqueues the parent
 * ({@link enqueueParentWhenReady}). Of any two siblings, the one whose check comes second sees the other's write (each
 * writes before it checks, on stores with read-after-write consistency), so some child always enqueues the parent;
 * two may, and the duplicate stops at the parent's claim. Because the enqueue comes before the commit, a committed
 * child has always run its check: a crash before the commit is redelivered and checks again, a crash after it leaves
 * nothing to do. A parent reads its children's objects, not their claims: a tile's bytes are final once written
 * (create-only, the same render every time), committed or not.
 */

/** Whether a job's tile is below its pyramid's highest zoom: built from its children, not read from the source. */
export function isParentJob(job: TileJob): boolean {
  return job.zoom !== undefined && job.zoom < (job.grid.target?.tms?.zoom ?? job.zoom);
}

/** What the parent step of a tile did. */
export type ParentStep =
  /** Not a pyramid's tile, or one of its lowest zoom: nothing above it. */
  | { readonly kind: 'no-parent' }
  /** A sibling is not written yet: the last sibling to be written enqueues the parent. */
  | { readonly kind: 'waiting'; readonly parentKey: string; readonly missing: number }
  | { readonly kind: 'enqueued'; readonly parentKey: string };

/**
 * Step 3c of a pyramid's tile (shared/app/process-tile.ts), after its write and before its commit: head the other
 * children of its parent and, when every one is written, enqueue the parent's job. A duplicate enqueue is harmless
 * (the parent's claim stops it); a throw (the queue is down) is the caller's to retry, as any failure before the commit.
 */
export async function enqueueParentWhenReady(
  backend: Pick<Backend, 'outputs' | 'queue' | 'telemetry'>,
  job: TileJob,
  fields: Readonly<Record<string, unknown>> = {},
): Promise<ParentStep> {
  if (job.zoom === undefined) return { kind: 'no-parent' };
  const tiling = tilingParams(job.params);
  const pyramid = pyramidOf(tiling);
  if (pyramid === undefined || job.zoom <= pyramid.minZoom) return { kind: 'no-parent' };
  const window = parentWindowOf(job.grid, tiling.tilePx, job.zoom, job.window);
  if (window === undefined) return { kind: 'no-parent' };
  const parent = makeTileJob(
    job.sceneKey,
    job.source,
    job.params,
    job.grid,
    window,
    { kind: 'create' },
    pinsOf(job),
    job.code,
    job.zoom - 1,
  );
  const siblings = childrenOf(pyramidScene(job.sceneKey, job.grid, tiling), job.zoom - 1, window).filter((c) => c.key !== job.outputKey);
  const heads = await Promise.all(siblings.map((c) => backend.outputs.head(c.key)));
  const missing = heads.filter((h) => h === undefined).length;
  const log = { ...fields, parentKey: parent.outputKey, parentJobKey: parent.jobKey };
  if (missing > 0) {
    backend.telemetry.log('INFO', 'pyramid-parent-waiting', { ...log, missing });
    return { kind: 'waiting', parentKey: parent.outputKey, missing };
  }
  await backend.queue.sendBatch([toJobMessage(parent)]);
  backend.telemetry.count('enqueued');
  backend.telemetry.log('INFO', 'pyramid-parent-enqueued', log);
  return { kind: 'enqueued', parentKey: parent.outputKey };
}

const pinsOf = (job: TileJob): SceneReadPins => ({
  ...(job.pin === undefined ? {} : { pin: job.pin }),
  ...(job.pins === undefined ? {} : { pins: job.pins }),
});

/** What building one parent read: the children's pixels and bytes (its read amplification, docs/pyramids.md). */
export interface ParentReads {
  readonly children: number;
  readonly pixelsRead: number;
  readonly bytesRead: number;
}

/**
 * Build a parent tile from its children (step 2 of a pyramid's tile below the highest zoom): each child's 2 x 2 pixel
 * blocks reduce to one pixel, a child outside the scene leaves its quarter nodata. COG tiles reduce their float32
 * values ({@link reducerOf}) and are encoded as any tile (render-tile.ts `encodeTile`, georeferenced on their own zoom's
 * grid); a rendered format's (PNG, WebP, JPEG) reduce their 8-bit pixels ({@link reduceImageBlock}) and are encoded as
 * that image again, as gdal2tiles builds its overview tiles from its base tiles. The job's grid is checked against the
 * scene manifest first (the key binds the zoom and window; the tiles it reads come from the grid): another grid is
 * poison. A child that is not written yet throws PyramidChildMissingError (retryable; only a parent enqueued by hand,
 * e.g. a replay, can meet it).
 */
export async function renderParentTile(
  outputs: ObjectStore,
  job: TileJob,
  tiling: TilingParams,
  manifest?: SceneManifest,
): Promise<RenderedTile & { readonly reads: ParentReads }> {
  const zoom = job.zoom as number;
  const recorded = manifest ?? (await readSceneManifest(outputs, job.sceneKey));
  assertJobTarget(job.jobKey, jobTarget(job.grid), jobTarget(recorded.grid));
  const children = childrenOf(pyramidScene(job.sceneKey, job.grid, tiling), zoom, job.window);
  const level = levelGrid(job.grid, tiling.tilePx, zoom);
  const georef = { crs: level.target.crs, geoTransform: level.target.geoTransform };
  if (tiling.render !== undefined) {
    const { image, reads } = await reduceImages(outputs, job, tiling.render, tiling.tilePx, tiling.target.resampling, children);
    // A parent's pixels feed no feature row (process-tile.ts): the image is all it has.
    return { cog: await encodeImage(image, tiling.render.format), pixels: new Float32Array(0), georef, reads };
  }
  const px = tiling.tilePx;
  const half = px / 2;
  const noData = tiling.noData;
  const pixels = new Float32Array(px * px).fill(noData);
  let bytesRead = 0;
  let pixelsRead = 0;
  const reduce = reducerOf(tiling.target.resampling, noData);
  const nodata32 = Math.fround(noData);
  const valid = (v: number) => !Number.isNaN(v) && v !== nodata32;
  for (const child of children) {
    const { values, bytes } = await readChild(outputs, child.key, px, job);
    bytesRead += bytes;
    pixelsRead += values.length;
    const block = [0, 0, 0, 0];
    for (let i = 0; i < half; i++) {
      const top = 2 * i * px;
      const out = (child.dy * half + i) * px + child.dx * half;
      for (let j = 0; j < half; j++) {
        const k = top + 2 * j;
        let n = 0;
        for (const v of [values[k] as number, values[k + 1] as number, values[k + px] as number, values[k + px + 1] as number]) {
          if (valid(v)) block[n++] = v;
        }
        pixels[out + j] = n === 0 ? noData : reduce(block, n, valid(values[k] as number));
      }
    }
  }
  const cog = await encodeTile(
    { ...job, grid: { width: level.width, height: level.height, target: level.target } },
    tiling,
    georef,
    pixels,
  );
  return { cog, pixels, georef, reads: { children: children.length, pixelsRead, bytesRead } };
}

/**
 * A rendered parent's pixels: each child image decoded (the same pinned libvips that encoded it) and its 2 x 2 blocks
 * reduced ({@link reduceImageBlock}); a quarter without a child is transparent (PNG, WebP) or the background (JPEG).
 */
async function reduceImages(
  outputs: ObjectStore,
  job: TileJob,
  render: RenderParams,
  px: number,
  resampling: Resampling,
  children: readonly ChildTile[],
): Promise<{ image: RawImage; reads: ParentReads }> {
  const bands = renderedBands(render);
  const channels = bands.length as RawImage['channels'];
  const alpha = bands[channels - 1] === 'Alpha';
  const data = new Uint8Array(px * px * channels);
  if (!alpha) {
    // JPEG has no transparency: a missing quarter is painted the background, as a masked pixel is (image-encoder.ts).
    const bg = render.background ?? [0, 0, 0];
    for (let k = 0; k < px * px; k++)
      for (let c = 0; c < channels; c++) data[k * channels + c] = channels === 1 ? bg[0] : (bg[c] as number);
  }
  const half = px / 2;
  let bytesRead = 0;
  let pixelsRead = 0;
  for (const child of children) {
    let bytes: Uint8Array;
    try {
      bytes = await outputs.get(child.key);
    } catch (error) {
      if (error instanceof ObjectNotFoundError) throw new PyramidChildMissingError(job.outputKey, child.key, { cause: error });
      throw error;
    }
    const image = await decodeImage(bytes, channels);
    if (image.width !== px || image.height !== px) {
      throw new UnsupportedRasterError(
        `child tile ${child.key} of pyramid job ${job.jobKey.slice(0, 16)}... is ${image.width}x${image.height}, not a ${px} px tile of this scene: a foreign object holds the key; remove it and backfill the scene (--policy new-key)`,
      );
    }
    bytesRead += bytes.byteLength;
    pixelsRead += px * px;
    for (let i = 0; i < half; i++) {
      for (let j = 0; j < half; j++) {
        const k = 2 * i * px + 2 * j;
        const out = ((child.dy * half + i) * px + child.dx * half + j) * channels;
        reduceImageBlock(image.data, [k, k + 1, k + px, k + px + 1], channels, alpha, resampling, data, out);
      }
    }
  }
  return { image: { data, width: px, height: px, channels }, reads: { children: children.length, pixelsRead, bytesRead } };
}

/**
 * One pixel of a rendered parent from a 2 x 2 block of its child's pixels (`at`: their indexes, north-west first). With
 * an alpha channel (PNG, WebP: 0 where the band math wrote nodata, 255 elsewhere) the opaque pixels count; without one
 * (JPEG) all four do, the background of nodata pixels included. `nearest` and `mode` take the north-west pixel (no new
 * colours); every other resampling the mean of each channel over the counted pixels, rounded half up, opaque. A block
 * with no opaque pixel is transparent.
 */
export function reduceImageBlock(
  src: Uint8Array,
  at: readonly number[],
  channels: number,
  alpha: boolean,
  resampling: Resampling,
  out: Uint8Array,
  o: number,
): void {
  // Called once per parent pixel: no closure or array is made here (under tsx's keepNames a closure per call cost
  // more than the reduction itself: bench/sections/pyramid.ts, docs/benchmarks.md).
  if (resampling === 'nearest' || resampling === 'mode') {
    const k = at[0] as number;
    if (isOpaque(src, k, channels, alpha)) for (let c = 0; c < channels; c++) out[o + c] = src[k * channels + c] as number;
    return;
  }
  let counted = 0;
  for (const k of at) if (isOpaque(src, k, channels, alpha)) counted++;
  if (counted === 0) return;
  const colours = alpha ? channels - 1 : channels;
  for (let c = 0; c < colours; c++) {
    let sum = 0;
    for (const k of at) if (isOpaque(src, k, channels, alpha)) sum += src[k * channels + c] as number;
    out[o + c] = Math.floor(sum / counted + 0.5);
  }
  if (alpha) out[o + channels - 1] = 255;
}

/** Whether pixel `k` of an image counts in a reduction: always without alpha (JPEG), else where alpha is at least 128. */
function isOpaque(src: Uint8Array, k: number, channels: number, alpha: boolean): boolean {
  return !alpha || (src[k * channels + channels - 1] as number) >= 128;
}

/** One child tile's float32 pixels (a tile Tessera wrote: one band, the tile's size), and the bytes read for them. */
async function readChild(
  outputs: ObjectStore,
  key: string,
  px: number,
  job: TileJob,
): Promise<{ values: ArrayLike<number>; bytes: number }> {
  try {
    const tile = await openGeoTiff(outputs, key);
    if (tile.width !== px || tile.height !== px || tile.bandCount !== 1 || tile.dataType !== 'float32') {
      throw new UnsupportedRasterError(
        `child tile ${key} of pyramid job ${job.jobKey.slice(0, 16)}... is ${tile.width}x${tile.height}, ${tile.bandCount} band(s) of ${tile.dataType}, ` +
          `not a ${px} px float32 tile of this scene: a foreign object holds the key; remove it and backfill the scene (--policy new-key)`,
      );
    }
    const [values = new Float32Array(0)] = await tile.readWindow({ x: 0, y: 0, width: px, height: px }, [1]);
    return { values, bytes: tile.stats().bytesRead };
  } catch (error) {
    if (error instanceof ObjectNotFoundError) throw new PyramidChildMissingError(job.outputKey, key, { cause: error });
    throw error;
  }
}

/**
 * How a 2 x 2 block of valid child pixels (`block[0..n)`, in the order north-west, north-east, south-west, south-east
 * of those valid) becomes one parent pixel, by the scene's resampling:
 * - `nearest`: the north-west pixel, nodata if it is nodata (one sample, no new values: classes stay classes);
 * - `mode`: the most frequent value (ties: the first met); `min`, `max`, `sum`, `rms`: as named;
 * - every other method (bilinear, cubic, cubicspline, lanczos, average, med, q1, q3): the mean, as gdaladdo's and
 *   gdal2tiles' `average` overviews.
 * Summed in float64; a result equal to the nodata value in float32 moves to the next float32 above, as the band
 * math's does, so only an all-nodata block reads as nodata.
 */
export function reducerOf(resampling: Resampling, noData: number): (block: number[], n: number, firstValid: boolean) => number {
  const clash = Math.fround(noData);
  const moved = nextFloat32Up(clash);
  const out = (v: number) => (Math.fround(v) === clash ? moved : v);
  switch (resampling) {
    case 'nearest':
      return (block, _n, firstValid) => (firstValid ? (block[0] as number) : noData);
    case 'mode':
      return (block, n) => {
        let best = block[0] as number;
        let bestCount = 0;
        for (let a = 0; a < n; a++) {
          let count = 0;
          for (let b = 0; b < n; b++) if (block[b] === block[a]) count++;
          if (count > bestCount) {
            best = block[a] as number;
            bestCount = count;
          }
        }
        return best;
      };
    case 'min':
      return (block, n) => Math.min(...block.slice(0, n));
    case 'max':
      return (block, n) => Math.max(...block.slice(0, n));
    case 'sum':
      return (block, n) => out(block.slice(0, n).reduce((s, v) => s + v, 0));
    case 'rms':
      return (block, n) => out(Math.sqrt(block.slice(0, n).reduce((s, v) => s + v * v, 0) / n));
    default:
      return (block, n) => {
        let s = 0;
        for (let k = 0; k < n; k++) s += block[k] as number;
        return out(s / n);
      };
  }
}

/**
 * A backfill of a pyramid (shared/app/fan-out.ts, `recorded`): enqueue every missing tile below the highest zoom
 * whose children are all written. Its children completed before (their parent check ran then), so no child would
 * enqueue it again: a parent whose message was dead-lettered, or a tile deleted by hand. Tiles whose children are
 * missing too are enqueued by those children when the backfill's own jobs write them. One listing of the scene's tiles.
 */
export async function enqueueReadyParents(
  backend: Pick<Backend, 'outputs' | 'queue' | 'telemetry'>,
  manifest: SceneManifest,
): Promise<number> {
  const tiling = tilingParams(manifest.params);
  const pyramid = pyramidOf(tiling);
  if (pyramid === undefined) return 0;
  const listed = new Set<string>();
  for await (const head of backend.outputs.list(outputKeys.tilePrefix(manifest.sceneKey))) listed.add(head.key);
  const pins: SceneReadPins = {
    ...(manifest.pin === undefined ? {} : { pin: manifest.pin }),
    ...(manifest.pins === undefined ? {} : { pins: manifest.pins }),
  };
  const batch: JobMessage[] = [];
  const p = pyramidScene(manifest.sceneKey, manifest.grid, tiling);
  for (let z = pyramid.maxZoom - 1; z >= pyramid.minZoom; z--) {
    for (const tile of levelTiles(p, z)) {
      if (listed.has(tile.key)) continue;
      if (!childrenOf(p, z, tile.window).every((c) => listed.has(c.key))) continue;
      const job = makeTileJob(
        manifest.sceneKey,
        manifest.source,
        manifest.params,
        manifest.grid,
        tile.window,
        { kind: 'create' },
        pins,
        undefined,
        z,
      );
      batch.push(toJobMessage(job));
    }
  }
  for (let i = 0; i < batch.length; i += 500) await backend.queue.sendBatch(batch.slice(i, i + 500));
  if (batch.length > 0) {
    backend.telemetry.count('enqueued', batch.length);
    backend.telemetry.log('INFO', 'pyramid-parents-backfilled', { sceneKey: manifest.sceneKey, enqueued: batch.length });
  }
  return batch.length;
}
