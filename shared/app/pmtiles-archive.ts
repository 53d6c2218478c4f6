import { InvalidEventError, InvalidParamsError, MosaicChangedError, SourceChangedError, TesseraError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import { type RenderedFormat, tileExtension } from '../domain/render-params.js';
import { windows } from '../domain/tile-grid.js';
import type { TilingParams } from '../domain/tiling-params.js';
import type { ObjectHead, ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { renderedBands } from '../raster/image-encoder.js';
import { PMTILES_CONTENT_TYPE, type PmtilesStats, PmtilesWriter, zxyToTileId } from '../raster/pmtiles-writer.js';
import { type DerivedWrite, type DerivedWriteResult, writeDerivedOutput } from './derived-output.js';
import { levelGrid, tilesPerZoom } from './pyramid-grid.js';
import { tmsTileOf } from './scene-grid.js';
import type { SceneManifest } from './scene-manifest.js';
import { WEB_MAP_TMS, webMapExtent } from './tilejson.js';

/**
 * One PMTiles v3 archive of a rendered scene's tiles, every zoom (`--mosaic pmtiles`, issue 26 section 3;
 * docs/web-maps.md, "PMTiles archive"): assembled after the last tile, as the COG mosaic is, from the tiles' keys (never
 * a listing's extras), each read pinned to the version the assembly listed, and written create-only.
 */

/**
 * The most bytes the tiles of one archive may have (their sum before deduplication): the archive is built in one
 * buffer of that size and written in one create-only request, so the mosaic function (1,024 MB: infra/common/config.ts
 * SUPPORT_FUNCTION_MEMORY_MB) holds it, plus what an SDK may copy of it while sending, with room to spare. The COG
 * mosaic has the same bound (cog-mosaic.ts).
 */
export const MAX_ARCHIVE_BYTES = 256 * 1024 * 1024;
/**
 * The most tiles one archive may have: every tile is one pinned GET by the mosaic function, within its 300 s
 * (SUPPORT_FUNCTION_TIMEOUT_SEC) beside the rest of the assembly, at {@link READS_IN_FLIGHT} in flight.
 */
export const MAX_ARCHIVE_TILES = 65_536;
/**
 * Bytes an RGBA pixel takes in a rendered tile, as the refusal before any claim estimates an archive (its actual size
 * is checked again at assembly); a tile of fewer bands (grey and alpha, RGB, grey) in proportion. About twice the
 * largest tile measured: NDVI of the Sentinel-2 fixture (test/data/public/s2-29RKH) with rdylgn on WebMercatorQuad
 * zooms 9-11, whole tiles at most 0.91 (PNG), 0.04 (WebP) and 0.08 (JPEG) bytes a pixel (docs/web-maps.md).
 */
export const ESTIMATED_BYTES_PER_PIXEL: Readonly<Record<RenderedFormat, number>> = { PNG: 1, WEBP: 0.1, JPEG: 0.15 };
/** Reads of tiles in flight at once. */
const READS_IN_FLIGHT = 8;

/** What an archive of a scene would be: its tiles (every zoom) and their estimated bytes. */
export interface ArchiveEstimate {
  readonly tiles: number;
  readonly bytes: number;
}

/** The estimate of an archive of `tiles` tiles of `tilePx` pixels a side in a rendered format. */
export function estimateArchive(tiles: number, tilePx: number, tiling: Pick<TilingParams, 'render'>): ArchiveEstimate {
  const render = tiling.render;
  if (render === undefined) return { tiles, bytes: 0 };
  const perPixel = ESTIMATED_BYTES_PER_PIXEL[render.format] * (renderedBands(render).length / 4);
  return { tiles, bytes: Math.ceil(tiles * tilePx * tilePx * perPixel) };
}

const mb = (bytes: number): string => `${Math.round(bytes / 1e6).toLocaleString('en-US')} MB`;

/**
 * A scene whose PMTiles archive would pass {@link MAX_ARCHIVE_TILES} or {@link MAX_ARCHIVE_BYTES}, refused at fan-out
 * before any claim (a subclass of InvalidParamsError: bad input, never retried), with the estimate and the fix.
 */
export class ArchiveTooLargeError extends InvalidParamsError {
  readonly estimate: ArchiveEstimate;
  constructor(message: string, estimate: ArchiveEstimate) {
    super(message);
    this.estimate = estimate;
  }
}

/**
 * Refuse a `--mosaic pmtiles` scene whose archive would hold more than one archive may, before any claim: from the
 * scene's target alone (its tiles per zoom), the estimate named with the highest zoom that fits and the other fix.
 */
export function assertArchiveFits(
  target: Parameters<typeof tilesPerZoom>[0],
  tiling: TilingParams,
  limits: { readonly maxTiles?: number | undefined; readonly maxBytes?: number | undefined } = {},
): void {
  const tms = tiling.target.tms;
  if (tiling.mosaic !== 'pmtiles' || tms === undefined || target.target?.tms === undefined) return;
  const maxTiles = limits.maxTiles ?? MAX_ARCHIVE_TILES;
  const maxBytes = limits.maxBytes ?? MAX_ARCHIVE_BYTES;
  const minZoom = tms.minZoom ?? tms.zoom;
  const per = tilesPerZoom(target, tiling.tilePx, minZoom);
  const upTo = (z: number) =>
    estimateArchive(
      per.filter((l) => l.zoom <= z).reduce((n, l) => n + l.tiles, 0),
      tiling.tilePx,
      tiling,
    );
  const all = upTo(tms.zoom);
  if (all.tiles <= maxTiles && all.bytes <= maxBytes) return;
  let fits: { zoom: number; estimate: ArchiveEstimate } | undefined;
  for (let z = tms.zoom - 1; z >= minZoom && fits === undefined; z--) {
    const e = upTo(z);
    if (e.tiles <= maxTiles && e.bytes <= maxBytes) fits = { zoom: z, estimate: e };
  }
  const format = tiling.render?.format ?? 'PNG';
  const asked = tms.minZoom === undefined ? `zoom ${tms.zoom}` : `zooms ${minZoom}-${tms.zoom}`;
  const zoomFix =
    fits === undefined
      ? 'tile a smaller area'
      : `lower the highest zoom: --zoom ${fits.zoom === minZoom ? fits.zoom : `${minZoom}-${fits.zoom}`} makes ${fits.estimate.tiles.toLocaleString('en-US')} tiles, about ${mb(fits.estimate.bytes)}`;
  throw new ArchiveTooLargeError(
    `--mosaic pmtiles: ${asked} of ${WEB_MAP_TMS} make ${all.tiles.toLocaleString('en-US')} tiles for this scene, about ${mb(all.bytes)} as ${format} ` +
      `(estimated at ${ESTIMATED_BYTES_PER_PIXEL[format]} byte${ESTIMATED_BYTES_PER_PIXEL[format] === 1 ? '' : 's'} an RGBA pixel), more than one PMTiles archive may hold ` +
      `(${maxTiles.toLocaleString('en-US')} tiles, ${mb(maxBytes)}: docs/web-maps.md); ${zoomFix}, or leave out --mosaic pmtiles ` +
      '(mosaic "vrt": the tiles stay XYZ tiles, and the TileJSON beside the outputs serves them to a web map)',
    all,
  );
}

/** An archive whose tiles, as listed, pass {@link MAX_ARCHIVE_BYTES} although the estimate let the scene in. */
export class PmtilesTooLargeError extends TesseraError {
  constructor(key: string, tiles: number, bytes: number, maxBytes: number) {
    super(
      'MOSAIC_TOO_LARGE',
      `PMTiles archive ${JSON.stringify(key)} is not built: its ${tiles.toLocaleString('en-US')} tiles have ${bytes.toLocaleString('en-US')} bytes, ` +
        `over the ${maxBytes.toLocaleString('en-US')} one archive may hold (the estimate at fan-out was lower); the tiles and the TileJSON serve ` +
        'the scene as XYZ tiles, or run it again with fewer zooms (--zoom) for an archive',
    );
  }
}

/** One tile of an archive: its key and its place (z, x, y) and TileID. */
export interface ArchiveTile {
  readonly key: string;
  readonly z: number;
  readonly x: number;
  readonly y: number;
  readonly tileId: number;
}

/** Every tile of a scene on WebMercatorQuad, every zoom of its pyramid, in TileID (Hilbert) order: the archive's order. */
export function archiveTiles(manifest: SceneManifest, tiling: TilingParams): ArchiveTile[] {
  const tms = manifest.grid.target?.tms;
  if (tms === undefined || tiling.render === undefined)
    throw new InvalidEventError(`scene ${manifest.sceneKey}: a PMTiles archive is of rendered tiles on ${WEB_MAP_TMS}`);
  const minZoom = tiling.target.tms?.minZoom ?? tms.zoom;
  const out: ArchiveTile[] = [];
  for (let z = tms.zoom; z >= minZoom; z--) {
    const level = levelGrid(manifest.grid, tiling.tilePx, z);
    for (const w of windows(level)) {
      const t = tmsTileOf(level.target, w);
      if (t === undefined) continue;
      const key = outputKeys.tile(manifest.sceneKey, w, t, tiling.format);
      out.push({ key, z, x: t.x, y: t.y, tileId: zxyToTileId(z, t.x, t.y) });
    }
  }
  return out.sort((a, b) => a.tileId - b.tileId);
}

/** What became of a scene's archive. */
export interface ArchiveResult {
  readonly kind: DerivedWriteResult;
  readonly key: string;
  readonly stats: PmtilesStats;
}

/** The first bytes of each format's files: a tile of other bytes is not this scene's. */
const MAGIC: Readonly<Record<RenderedFormat, (b: Uint8Array) => boolean>> = {
  PNG: (b) => b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47,
  JPEG: (b) => b[0] === 0xff && b[1] === 0xd8,
  WEBP: (b) => b[0] === 0x52 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x46 && b[8] === 0x57 && b[9] === 0x45,
};

/**
 * Build and write a scene's PMTiles archive.
 *
 * Timeline (crash points and what each leaves behind):
 * 1. The tiles from the scene's grid (every zoom), in TileID order, each with the version and size the assembly's
 *    listing gave (`heads`; the caller has proved none missing). Their sizes summed: over {@link MAX_ARCHIVE_BYTES}
 *    (or more tiles than {@link MAX_ARCHIVE_TILES}), PmtilesTooLargeError before any read. (crash: nothing written)
 * 2. Each tile read whole, pinned to its listed version ({@link READS_IN_FLIGHT} in flight, consumed in order), and
 *    added to the writer (dedup by SHA-256, run lengths, clustered): a tile replaced since the listing (a repair)
 *    throws MosaicChangedError (retryable: the next assembly lists again). (crash: nothing written)
 * 3. One create-only write of the whole archive (derived-output.ts). Its bytes depend only on the tiles' bytes and the
 *    manifest, so a re-run after a crash, or a duplicate assembly, finds `already-present` with the same bytes (INFO,
 *    `write-already-present`); this scene's archive from before a repair is replaced when `isStale` says so; other
 *    bytes are the `write-occupied` alarm. (crash after the write: the re-run gets `already-present`)
 */
export async function buildSceneArchive(
  outputs: ObjectStore,
  manifest: SceneManifest,
  tiling: TilingParams,
  heads: ReadonlyMap<string, ObjectHead>,
  telemetry: Telemetry,
  options: {
    readonly isStale?: DerivedWrite['isStale'];
    readonly maxBytes?: number | undefined;
  } = {},
): Promise<ArchiveResult> {
  const { sceneKey } = manifest;
  const key = outputKeys.pmtiles(sceneKey);
  const render = tiling.render;
  if (render === undefined) throw new InvalidEventError(`scene ${sceneKey}: a PMTiles archive is of rendered tiles`);
  const tiles = archiveTiles(manifest, tiling);
  const listed = tiles.map((t) => {
    const head = heads.get(t.key);
    if (head === undefined) throw new MosaicChangedError(sceneKey, [t.key]);
    return head;
  });
  const total = listed.reduce((n, h) => n + h.size, 0);
  const maxBytes = options.maxBytes ?? MAX_ARCHIVE_BYTES;
  if (total > maxBytes || tiles.length > MAX_ARCHIVE_TILES) throw new PmtilesTooLargeError(key, tiles.length, total, maxBytes);

  const extent = webMapExtent(manifest, tiling);
  const writer = new PmtilesWriter(
    { tileType: render.format, minZoom: extent.minZoom, maxZoom: extent.maxZoom, bounds: extent.bounds, center: extent.center },
    {
      name: `Tessera scene ${sceneKey.slice(0, 12)}`,
      description: `${JSON.stringify(tiling.expression)} rendered to ${render.format} tiles`,
      type: 'overlay',
      version: '1.0.0',
      format: tileExtension(render.format),
      'tessera:scene': sceneKey,
      'tessera:rescale': [...render.rescale],
      ...(render.colormap === undefined ? {} : { 'tessera:colormap': render.colormap }),
      'tessera:tile_size': tiling.tilePx,
    },
    { maxTiles: tiles.length, maxTileBytes: Math.max(1, total) },
  );
  const isFormat = MAGIC[render.format];
  await readInOrder(
    tiles.map((t, i) => ({ tile: t, head: listed[i] as ObjectHead })),
    READS_IN_FLIGHT,
    ({ tile, head }) => readPinned(outputs, sceneKey, tile.key, head),
    ({ tile }, bytes) => {
      if (!isFormat(bytes))
        throw new InvalidEventError(
          `tile ${tile.key} of scene ${sceneKey} is not a ${render.format} file: the object at its key is not this scene's tile; remove it and backfill the window (tessera backfill --policy new-key)`,
        );
      writer.add(tile.tileId, bytes);
    },
  );
  const { bytes, stats } = writer.finish();
  const kind = await writeDerivedOutput(outputs, telemetry, {
    sceneKey,
    key,
    body: bytes,
    contentType: PMTILES_CONTENT_TYPE,
    isStale: options.isStale,
  });
  if (kind === 'written') telemetry.log('INFO', 'pmtiles-written', { sceneKey, key, ...stats });
  return { kind, key, stats };
}

/** A tile's bytes at exactly the listed version: a tile replaced since (a repair) means the listing is outdated. */
async function readPinned(outputs: ObjectStore, sceneKey: string, key: string, head: ObjectHead): Promise<Uint8Array> {
  let bytes: Uint8Array;
  try {
    bytes = await outputs.getRange(key, 0, head.size, { version: head.version });
  } catch (error) {
    if (error instanceof SourceChangedError) throw new MosaicChangedError(sceneKey, [key]);
    throw error;
  }
  if (bytes.byteLength !== head.size) throw new MosaicChangedError(sceneKey, [key]);
  return bytes;
}

/**
 * `read` over `items` with at most `limit` reads in flight, and `use` called on each answer in the items' order (so
 * only the answers read ahead are held). The first failure stops it; reads already started are left to finish.
 */
export async function readInOrder<T, R>(
  items: readonly T[],
  limit: number,
  read: (item: T) => Promise<R>,
  use: (item: T, value: R) => void | Promise<void>,
): Promise<void> {
  const pending: Promise<R>[] = [];
  let next = 0;
  const start = () => {
    const p = read(items[next++] as T);
    // A read that fails while an earlier one is awaited is reported when its turn comes, not as an unhandled rejection.
    p.catch(() => {});
    pending.push(p);
  };
  while (next < items.length && pending.length < limit) start();
  for (let i = 0; i < items.length; i++) {
    const value = await (pending.shift() as Promise<R>);
    if (next < items.length) start();
    await use(items[i] as T, value);
  }
}
