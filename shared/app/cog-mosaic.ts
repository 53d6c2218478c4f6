import { InvalidParamsError, MissingTilesError, TesseraError } from '../domain/errors.js';
import type { ObjectHead, ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { type CogStripSpec, encodeCogByStrips } from '../raster/cog-strip-writer.js';
import { openGeoTiff, type RasterWindow } from '../raster/index.js';
import { type DerivedWrite, writeDerivedOutput } from './derived-output.js';

/**
 * The largest COG mosaic by pixels: 16384 x 16384 (1 GiB as float32, never
 * held: see {@link buildCogMosaic}). Past it, the compressed file nears what
 * one function's memory and a classic TIFF (4 GiB) can hold.
 */
export const MAX_COG_MOSAIC_PIXELS = 16_384 * 16_384;

/**
 * The most compressed bytes a COG mosaic may have: the blocks are held until
 * the file is laid out, then copied into it, so the live peak is about twice
 * this plus two block rows of pixels. Measured on an 8192 x 8192 mosaic (a
 * 168 MiB file): 215 MiB live at most, but the process grew by 488 MiB (freed
 * tile reads and strips the collector had not returned yet). At 256 MiB that
 * is about 750 MB, inside the 1024 MB of the cloud mosaic functions
 * (infra/common/config.ts SUPPORT_FUNCTION_MEMORY_MB); docs/outputs.md.
 */
export const MAX_COG_MOSAIC_BYTES = 256 * 1024 * 1024;

/** A mosaic too large to build as one COG here: the VRT mosaic (same tiles, no copy) serves it instead. */
export class CogMosaicTooLargeError extends TesseraError {
  readonly mosaicKey: string;
  constructor(mosaicKey: string, what: string, vrtKey: string | undefined) {
    super(
      'MOSAIC_TOO_LARGE',
      `COG mosaic ${JSON.stringify(mosaicKey)} is not built: ${what}; ` +
        `open the VRT mosaic${vrtKey === undefined ? '' : ` ${JSON.stringify(vrtKey)}`} instead (it reads the same tiles in place), ` +
        'or make a COG from it on a machine with `gdal_translate -of COG <vrt> out.tif`',
    );
    this.mosaicKey = mosaicKey;
  }
}

/** One tile of the mosaic: its output key and where it sits in the mosaic's pixel grid. */
export interface CogMosaicTile {
  readonly key: string;
  readonly window: RasterWindow;
}

/** The mosaic's raster (size, georeferencing, nodata, codec: the tiles' own), and where its tiles and bytes live. */
export interface CogMosaicInput extends Omit<CogStripSpec, 'predictor'> {
  /** For the errors and logs (MissingTilesError names the scene). */
  readonly sceneKey: string;
  /** Where the COG goes: outputKeys.cogMosaic(scene). */
  readonly mosaicKey: string;
  /** The VRT mosaic of the same scene, named in the error that refuses an oversized COG. */
  readonly vrtKey?: string | undefined;
  /**
   * The deterministic tile list from the scene manifest (sceneTiles), never a
   * listing: a listing would take in a stray object and could not tell a
   * missing tile from one not yet listed. A pixel no tile covers is nodata;
   * where windows overlap, the later tile wins.
   */
  readonly tiles: readonly CogMosaicTile[];
  /** Default MAX_COG_MOSAIC_PIXELS. */
  readonly maxPixels?: number | undefined;
  /** Default MAX_COG_MOSAIC_BYTES. */
  readonly maxBytes?: number | undefined;
}

export interface CogMosaicResult {
  /**
   * `already-present`: an earlier build (or a duplicate one) wrote exactly these bytes. `replaced`: the key held
   * this scene's COG from before a repair (the caller's `isStale` said so), replaced on condition of its version.
   */
  readonly kind: 'written' | 'already-present' | 'replaced';
  readonly key: string;
  /** Size of the COG in bytes. */
  readonly bytes: number;
  readonly width: number;
  readonly height: number;
}

/** Heads and tile reads in flight at once: enough to hide a store's latency, few enough to bound the memory of tiles read ahead. */
const CONCURRENCY = 8;

/**
 * Build one Cloud Optimized GeoTIFF of a scene from its tiles (`--mosaic cog`).
 *
 * Timeline (crash points and what each leaves behind):
 * 1. head every tile of the list: a missing one fails the build at once, naming all missing
 *    (MissingTilesError, nothing read or written). The version each head returns is the pin for its reads.
 *    (crash: nothing written)
 * 2. read the tiles a block row at a time, top to bottom, each pinned to the version its head returned
 *    (a tile overwritten meanwhile by a repair throws SourceChangedError: run the build again), place
 *    them, and encode the COG with averaged internal overviews strip by strip (cog-strip-writer.ts).
 *    Held: the compressed blocks, one block row per level, and the tiles of the rows being read
 *    (about `(tile height + blockSize) * width` pixels); never the whole raster. Oversized: refused with
 *    CogMosaicTooLargeError before reading (pixels), or when the compressed blocks cross `maxBytes`.
 *    (crash: nothing written)
 * 3. create-only write of the COG. The bytes depend only on the tiles' pixels and the input, so a
 *    re-run after a crash, or a duplicate build, finds `already-present` with the same bytes: success,
 *    INFO and `write-already-present`. Other bytes at the key are replaced when `options.isStale` shows
 *    them to be this scene's COG from before a repair of a tile, conditionally on the version read
 *    (`replaced`, derived-output.ts); else they are an alarm: `write-occupied`, ERROR, OutputOccupiedError
 *    (nothing overwritten).
 *    (crash after the write: the re-run gets `already-present`)
 *
 * Counted here, not by the caller: `write-already-present`, `mosaic-replaced` and `write-occupied`.
 */
export async function buildCogMosaic(
  outputs: ObjectStore,
  input: CogMosaicInput,
  telemetry: Telemetry,
  options: { readonly isStale?: DerivedWrite['isStale'] } = {},
): Promise<CogMosaicResult> {
  const { sceneKey, mosaicKey, width, height, noData } = input;
  validateInput(input);
  const maxPixels = input.maxPixels ?? MAX_COG_MOSAIC_PIXELS;
  if (width * height > maxPixels) {
    throw new CogMosaicTooLargeError(
      mosaicKey,
      `${width}x${height} is ${width * height} pixels, over the ${maxPixels} a COG mosaic may have`,
      input.vrtKey,
    );
  }

  const heads = await mapLimit(input.tiles, CONCURRENCY, (t) => outputs.head(t.key));
  const missing = input.tiles.filter((_, i) => heads[i] === undefined).map((t) => t.key);
  if (missing.length > 0) {
    telemetry.log('ERROR', 'mosaic-missing-tiles', { sceneKey, mosaicKey, missing: missing.length, first: missing.slice(0, 5) });
    throw new MissingTilesError(sceneKey, missing, input.tiles.length);
  }

  const maxBytes = input.maxBytes ?? MAX_COG_MOSAIC_BYTES;
  const placer = new TilePlacer(outputs, input, heads as ObjectHead[]);
  const cog = await encodeCogByStrips(
    {
      width,
      height,
      geoTransform: input.geoTransform,
      crs: input.crs,
      noData,
      blockSize: input.blockSize,
      compression: input.compression,
      level: input.level,
    },
    (y, rows) => placer.strip(y, rows),
    {
      budget: {
        maxBytes,
        exceeded: (bytes) =>
          new CogMosaicTooLargeError(
            mosaicKey,
            `its compressed blocks passed ${bytes} bytes, over the ${maxBytes} a COG mosaic may hold`,
            input.vrtKey,
          ),
      },
    },
  );

  const kind = await writeDerivedOutput(outputs, telemetry, {
    sceneKey,
    key: mosaicKey,
    body: cog,
    contentType: COG_CONTENT_TYPE,
    isStale: options.isStale,
  });
  if (kind === 'written')
    telemetry.log('INFO', 'cog-mosaic-written', { sceneKey, mosaicKey, tiles: input.tiles.length, bytes: cog.byteLength });
  return { kind, key: mosaicKey, bytes: cog.byteLength, width, height };
}

/** The media type of a COG (the STAC best practice's, also what the item's asset says). */
export const COG_CONTENT_TYPE = 'image/tiff; application=geotiff; profile=cloud-optimized';

function validateInput(input: CogMosaicInput): void {
  const fail = (why: string): never => {
    throw new InvalidParamsError(`COG mosaic ${JSON.stringify(input.mosaicKey)}: ${why}`);
  };
  for (const [name, v] of [
    ['width', input.width],
    ['height', input.height],
  ] as const) {
    if (!Number.isInteger(v) || v <= 0) fail(`${name} must be a positive integer, got ${v}`);
  }
  if (input.tiles.length === 0) fail('the tile list is empty; a mosaic needs the tiles of its scene manifest');
  for (const { key, window: w } of input.tiles) {
    const inside =
      Number.isInteger(w.x) && Number.isInteger(w.y) && Number.isInteger(w.width) && Number.isInteger(w.height) && w.x >= 0 && w.y >= 0;
    if (!inside || w.width <= 0 || w.height <= 0 || w.x + w.width > input.width || w.y + w.height > input.height) {
      fail(`tile ${JSON.stringify(key)} has window ${JSON.stringify(w)}, which is not inside the ${input.width}x${input.height} mosaic`);
    }
  }
}

/**
 * Fills strips of the mosaic from its tiles. A tile is read whole (one pinned
 * window read: tiles are small) the first time a strip touches it and dropped
 * once the strips have passed its last row, so only the tiles of the rows
 * being encoded are in memory.
 */
class TilePlacer {
  /** Tile indexes by top row, so each strip finds its tiles without scanning all of them. */
  private readonly order: number[];
  private nextToOpen = 0;
  private readonly loaded = new Map<number, Float32Array>();

  constructor(
    private readonly outputs: ObjectStore,
    private readonly input: CogMosaicInput,
    private readonly heads: readonly ObjectHead[],
  ) {
    // Ties keep the list order, so "the later tile wins" holds where windows overlap.
    this.order = input.tiles.map((_, i) => i).sort((a, b) => this.tile(a).window.y - this.tile(b).window.y || a - b);
  }

  private tile(i: number) {
    return this.input.tiles[i] as CogMosaicTile;
  }

  async strip(y0: number, rows: number): Promise<Float32Array> {
    const { width, noData } = this.input;
    const y1 = y0 + rows;
    const opening: number[] = [];
    while (this.nextToOpen < this.order.length && this.tile(this.order[this.nextToOpen] as number).window.y < y1) {
      opening.push(this.order[this.nextToOpen++] as number);
    }
    const read = await mapLimit(opening, CONCURRENCY, (i) => this.read(i));
    opening.forEach((i, k) => {
      this.loaded.set(i, read[k] as Float32Array);
    });

    const strip = new Float32Array(rows * width).fill(noData);
    // In list order, so where windows overlap the later tile wins.
    for (const i of [...this.loaded.keys()].sort((a, b) => a - b)) {
      const w = this.tile(i).window;
      const pixels = this.loaded.get(i) as Float32Array;
      const from = Math.max(y0, w.y);
      const to = Math.min(y1, w.y + w.height);
      for (let y = from; y < to; y++) {
        const src = (y - w.y) * w.width;
        strip.set(pixels.subarray(src, src + w.width), (y - y0) * width + w.x);
      }
      if (w.y + w.height <= y1) this.loaded.delete(i);
    }
    return strip;
  }

  private async read(i: number): Promise<Float32Array> {
    const { key, window: w } = this.tile(i);
    const head = this.heads[i] as ObjectHead;
    // Pinned to the version head() saw: a tile replaced between the head and this read is not mixed in.
    // No block cache: the tile is read by one window, so a decoded block is never asked for twice.
    const source = await openGeoTiff(this.outputs, key, { pin: { version: head.version }, blockCacheBytes: 0 });
    if (source.width !== w.width || source.height !== w.height) {
      throw new InvalidParamsError(
        `tile ${JSON.stringify(key)} is ${source.width}x${source.height} but the scene manifest places a ${w.width}x${w.height} window there; ` +
          'the tile is not this scene’s (check the tile key and the manifest)',
      );
    }
    const [band] = await source.readWindow({ x: 0, y: 0, width: w.width, height: w.height }, [1]);
    return band instanceof Float32Array ? band : Float32Array.from(band as ArrayLike<number>);
  }
}

/** `fn` over `items`, at most `limit` at a time; the answers in the items' order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return out;
}
