import { InvalidEventError, MosaicChangedError, SourceChangedError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import type { Window } from '../domain/tile-grid.js';
import { windows } from '../domain/tile-grid.js';
import type { TilingParams } from '../domain/tiling-params.js';
import type { ObjectHead, ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { decodeImage, encodeImage, type RawImage, renderedBands } from '../raster/image-encoder.js';
import { type DerivedWrite, type DerivedWriteResult, writeDerivedOutput } from './derived-output.js';
import { readInOrder } from './pmtiles-archive.js';
import { levelGrid } from './pyramid-grid.js';
import { tmsTileOf } from './scene-grid.js';
import type { SceneManifest } from './scene-manifest.js';
import { tileOutputKey } from './tile-job.js';

/**
 * The quicklook of a rendered scene (issue 26 section 4; docs/web-maps.md, "TileJSON and quicklook"): one PNG of the
 * mosaic at most {@link QUICKLOOK_MAX_PX} pixels a side, the STAC Item's `thumbnail`, made from the tiles' own pixels
 * (their colours: the scene is already rendered), so it shows what the map shows.
 *
 * Which tiles: the mosaic is the highest zoom's grid; a pyramid's lower zoom whose pixels are at most as fine as the
 * quicklook needs is read instead (its tiles hold the same area at 1/2, 1/4 ... of the pixels), so a quicklook of a
 * zoom 8-14 pyramid reads a few tiles of a low zoom, never the thousands of zoom 14. Then each quicklook pixel is the
 * mean of an f x f box of those pixels (f whole), weighted by alpha where the tiles have alpha, so transparent
 * (nodata) pixels lend no colour and the quicklook is transparent where the whole box is. Integer sums and one
 * rounding: the same bytes on every backend; encoded as PNG by image-encoder.ts (sharp, pinned, every option set).
 *
 * A COG scene has no quicklook: its pixels are float values with no colours until `--format png --rescale` says how.
 */

export const QUICKLOOK_MAX_PX = 1024;
/**
 * The most tiles a quicklook reads: each is a pinned GET and a decode in the mosaic function (300 s). A scene of one zoom
 * with more tiles gets no quicklook (WARN `quicklook-skipped`); a pyramid reads a lower zoom's few tiles instead.
 */
export const QUICKLOOK_MAX_TILES = 4096;
export const QUICKLOOK_CONTENT_TYPE = 'image/png';
const READS_IN_FLIGHT = 8;

/** Where the quicklook's pixels come from: a level of the scene's tiles, the scene's region in it, and the box size. */
interface QuicklookPlan {
  readonly tiles: readonly { readonly key: string; readonly window: Window }[];
  /** The scene's region in the level's pixels. */
  readonly region: { readonly x: number; readonly y: number; readonly width: number; readonly height: number };
  /** Each quicklook pixel is the mean of factor x factor level pixels. */
  readonly factor: number;
  readonly zoom?: number | undefined;
}

function plan(manifest: SceneManifest, tiling: TilingParams): QuicklookPlan {
  const grid = manifest.grid;
  const longest = Math.max(grid.width, grid.height);
  const f = Math.max(1, Math.ceil(longest / QUICKLOOK_MAX_PX));
  const whole = (): QuicklookPlan => ({
    tiles: [...windows(grid)].map((window) => ({
      key: tileOutputKey(manifest.sceneKey, grid, window, tiling.format),
      window,
    })),
    region: { x: 0, y: 0, width: grid.width, height: grid.height },
    factor: f,
    ...(grid.target?.tms === undefined ? {} : { zoom: grid.target.tms.zoom }),
  });
  const tms = grid.target?.tms;
  const minZoom = tiling.target.tms?.minZoom;
  if (tms === undefined || minZoom === undefined) return whole();
  // The coarsest level at least as fine as the quicklook: a shift of 2^k with 2^k <= f, and no lower than the pyramid.
  let k = 0;
  while (2 ** (k + 1) <= f && tms.zoom - (k + 1) >= minZoom && 2 ** (k + 1) <= tiling.tilePx) k++;
  if (k === 0) return whole();
  const s = 2 ** k;
  const level = levelGrid(grid, tiling.tilePx, tms.zoom - k);
  const gt = grid.target?.geoTransform as readonly number[];
  const lgt = level.target.geoTransform;
  const x = (gt[0] as number) - lgt[0];
  const y = (gt[3] as number) - lgt[3];
  const ox = Math.round(x / lgt[1]);
  const oy = Math.round(y / lgt[5]);
  const region = { x: ox, y: oy, width: grid.width / s, height: grid.height / s };
  // Off the level's whole pixels, or outside it (a span round the whole world at that zoom): the highest zoom's tiles.
  const exact = Math.abs(x / lgt[1] - ox) < 1e-6 && Math.abs(y / lgt[5] - oy) < 1e-6;
  if (!exact || ox < 0 || oy < 0 || ox + region.width > level.width || oy + region.height > level.height) return whole();
  const zoom = tms.zoom - k;
  return {
    tiles: [...windows(level)].map((window) => ({
      key: outputKeys.tile(manifest.sceneKey, window, tmsTileOf(level.target, window), tiling.format),
      window,
    })),
    region,
    factor: Math.max(1, Math.ceil(Math.max(region.width, region.height) / QUICKLOOK_MAX_PX)),
    zoom,
  };
}

/** A quicklook's pixels, before encoding. */
export interface QuicklookImage extends RawImage {
  /** The zoom whose tiles it was made from (a pyramid's), or undefined for a scene on no tile matrix set. */
  readonly zoom?: number | undefined;
}

/** How many tiles the quicklook of a scene reads (those of its planned level that overlap the scene). */
export function quicklookTileCount(manifest: SceneManifest, tiling: TilingParams): number {
  const { tiles, region } = plan(manifest, tiling);
  return tiles.filter((t) => overlaps(t.window, region)).length;
}

const overlaps = (w: Window, r: QuicklookPlan['region']): boolean =>
  w.x < r.x + r.width && w.x + w.width > r.x && w.y < r.y + r.height && w.y + w.height > r.y;

/**
 * The quicklook's pixels: the tiles of the planned level read pinned to the listed versions (`heads`, from the
 * assembly's listing of the scene's tiles), decoded, and averaged box by box.
 */
export async function quicklookPixels(
  outputs: ObjectStore,
  manifest: SceneManifest,
  tiling: TilingParams,
  heads: ReadonlyMap<string, ObjectHead>,
): Promise<QuicklookImage> {
  const render = tiling.render;
  if (render === undefined) throw new InvalidEventError(`scene ${manifest.sceneKey}: a quicklook is made of rendered tiles`);
  const p = plan(manifest, tiling);
  const bands = renderedBands(render);
  const channels = bands.length as RawImage['channels'];
  const alpha = bands[channels - 1] === 'Alpha';
  const colours = alpha ? channels - 1 : channels;
  const { region, factor } = p;
  const width = Math.ceil(region.width / factor);
  const height = Math.ceil(region.height / factor);
  const count = new Float64Array(width * height);
  const alphaSum = new Float64Array(width * height);
  const sums = new Float64Array(width * height * colours);
  const wanted = p.tiles.filter(({ window }) => overlaps(window, region));
  await readInOrder(
    wanted,
    READS_IN_FLIGHT,
    async ({ key }) => {
      const head = heads.get(key);
      if (head === undefined) throw new MosaicChangedError(manifest.sceneKey, [key]);
      let bytes: Uint8Array;
      try {
        bytes = await outputs.getRange(key, 0, head.size, { version: head.version });
      } catch (error) {
        if (error instanceof SourceChangedError) throw new MosaicChangedError(manifest.sceneKey, [key]);
        throw error;
      }
      return decodeImage(bytes, channels);
    },
    ({ key, window: w }, image) => {
      if (image.width !== w.width || image.height !== w.height)
        throw new InvalidEventError(
          `tile ${key} is ${image.width}x${image.height} but its window is ${w.width}x${w.height}: not this scene's tile; remove it and backfill the window`,
        );
      const x0 = Math.max(w.x, region.x);
      const x1 = Math.min(w.x + w.width, region.x + region.width);
      const y0 = Math.max(w.y, region.y);
      const y1 = Math.min(w.y + w.height, region.y + region.height);
      const data = image.data;
      for (let py = y0; py < y1; py++) {
        const qRow = Math.floor((py - region.y) / factor) * width;
        let at = ((py - w.y) * w.width + (x0 - w.x)) * channels;
        for (let px = x0; px < x1; px++, at += channels) {
          const q = qRow + Math.floor((px - region.x) / factor);
          count[q] = (count[q] as number) + 1;
          const a = alpha ? (data[at + channels - 1] as number) : 1;
          alphaSum[q] = (alphaSum[q] as number) + a;
          for (let c = 0; c < colours; c++) sums[q * colours + c] = (sums[q * colours + c] as number) + (data[at + c] as number) * a;
        }
      }
    },
  );
  const out = new Uint8Array(width * height * channels);
  for (let q = 0; q < width * height; q++) {
    const n = count[q] as number;
    const a = alphaSum[q] as number;
    if (n === 0 || a === 0) continue;
    for (let c = 0; c < colours; c++) out[q * channels + c] = Math.round((sums[q * colours + c] as number) / a);
    if (alpha) out[q * channels + channels - 1] = Math.round(a / n);
  }
  return { data: out, width, height, channels, zoom: p.zoom };
}

/**
 * Make and write a rendered scene's quicklook (outputKeys.quicklook), or none when it would read more than
 * {@link QUICKLOOK_MAX_TILES} tiles (undefined, WARN). Create-only like every derived output: the same
 * tiles give the same bytes, so a re-run or a duplicate assembly finds `already-present`; this scene's quicklook from
 * before a repair is replaced when `isStale` says so (derived-output.ts). A tile replaced since the listing throws
 * MosaicChangedError (retryable), writing nothing.
 */
export async function writeQuicklook(
  outputs: ObjectStore,
  manifest: SceneManifest,
  tiling: TilingParams,
  heads: ReadonlyMap<string, ObjectHead>,
  telemetry: Telemetry,
  options: { readonly isStale?: DerivedWrite['isStale'] } = {},
): Promise<{ readonly kind: DerivedWriteResult; readonly key: string; readonly width: number; readonly height: number } | undefined> {
  const tiles = quicklookTileCount(manifest, tiling);
  if (tiles > QUICKLOOK_MAX_TILES) {
    telemetry.log('WARN', 'quicklook-skipped', {
      sceneKey: manifest.sceneKey,
      tiles,
      limit: QUICKLOOK_MAX_TILES,
      what: "a pyramid (--zoom MIN-MAX) makes the quicklook from a lower zoom's few tiles",
    });
    return undefined;
  }
  const image = await quicklookPixels(outputs, manifest, tiling, heads);
  const png = await encodeImage(image, 'PNG');
  const key = outputKeys.quicklook(manifest.sceneKey);
  const kind = await writeDerivedOutput(outputs, telemetry, {
    sceneKey: manifest.sceneKey,
    key,
    body: png,
    contentType: QUICKLOOK_CONTENT_TYPE,
    isStale: options.isStale,
  });
  if (kind === 'written')
    telemetry.log('INFO', 'quicklook-written', {
      sceneKey: manifest.sceneKey,
      key,
      width: image.width,
      height: image.height,
      zoom: image.zoom,
    });
  return { kind, key, width: image.width, height: image.height };
}
