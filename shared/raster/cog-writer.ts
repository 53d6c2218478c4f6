import { InvalidParamsError } from '../domain/errors.js';
import { codecLanes } from './codecs.js';
import type { GeoTransform, RasterCrs } from './georeferencing.js';
import {
  assertClassicSize,
  type BlockCompression,
  COMPRESSION_LEVELS,
  compressTile,
  compressTileAsync,
  imageTags,
  layoutIfds,
  predictTile,
  type TagSpec,
  type TiledImageSpec,
  tileCount,
  tilesAcross,
  validateImageSpec,
  writeHeader,
} from './tiff-writer.js';

export interface EncodeCogOptions {
  readonly width: number;
  readonly height: number;
  /** Row-major pixels, `width * height` long. */
  readonly data: Float32Array;
  readonly geoTransform: GeoTransform;
  readonly crs: RasterCrs;
  readonly noData: number;
  /** Tile size in pixels (a multiple of 16), e.g. 256 or 512. */
  readonly blockSize: number;
  /** DEFLATE (GDAL's default for COG tiles here), ZSTD, or NONE (uncompressed blocks, no predictor). */
  readonly compression: BlockCompression;
  /** 3 (floating-point predictor, GDAL's PREDICTOR=YES for floats) or 1 (none). Default 3 when compressed, 1 without. */
  readonly predictor?: 1 | 3 | undefined;
  /** The codec's level (DEFLATE 1-9, ZSTD 1-22); default GDAL's: ZLEVEL 6, ZSTD_LEVEL 9. */
  readonly level?: number | undefined;
}

/**
 * GDAL's structural metadata ("ghost area") after the 8-byte header. GDAL
 * reports such a file as LAYOUT=COG and readers may trust the block leaders
 * and trailers it announces. The trailing space lets the NO be edited to YES
 * in place, as GDAL writes it (140 bytes after the first line).
 */
export const COG_GHOST_AREA = (() => {
  const body =
    'LAYOUT=IFDS_BEFORE_DATA\n' +
    'BLOCK_ORDER=ROW_MAJOR\n' +
    'BLOCK_LEADER=SIZE_AS_UINT4\n' +
    'BLOCK_TRAILER=LAST_4_BYTES_REPEATED\n' +
    'KNOWN_INCOMPATIBLE_EDITION=NO\n ';
  return `GDAL_STRUCTURAL_METADATA_SIZE=${String(body.length).padStart(6, '0')} bytes\n${body}`;
})();

/** Overview sizes GDAL's COG driver makes: halve (rounding up) until the level fits in one block. */
export function cogOverviewSizes(width: number, height: number, blockSize: number): { width: number; height: number }[] {
  const sizes: { width: number; height: number }[] = [];
  let w = width;
  let h = height;
  while (w > blockSize || h > blockSize) {
    w = Math.ceil(w / 2);
    h = Math.ceil(h / 2);
    sizes.push({ width: w, height: h });
  }
  return sizes;
}

/**
 * Halves a float raster by averaging each 2x2 box over its valid pixels
 * (neither nodata nor NaN); a box with none is nodata. Averaging, not GDAL's
 * default cubic, because it never invents values outside a box's range and
 * handles nodata edges exactly.
 */
export function downsampleAverage(src: Float32Array, width: number, height: number, noData: number, into?: Float32Array): Float32Array {
  const w = Math.ceil(width / 2);
  const h = Math.ceil(height / 2);
  // Every pixel of the result is written, so `into` may be a reused buffer.
  const out = into === undefined ? new Float32Array(w * h) : into.subarray(0, w * h);
  for (let y = 0; y < h; y++) {
    const y0 = 2 * y;
    const y1 = Math.min(y0 + 1, height - 1);
    for (let x = 0; x < w; x++) {
      const x0 = 2 * x;
      const x1 = Math.min(x0 + 1, width - 1);
      let sum = 0;
      let n = 0;
      const a = src[y0 * width + x0] as number;
      const b = src[y0 * width + x1] as number;
      const c = src[y1 * width + x0] as number;
      const d = src[y1 * width + x1] as number;
      // Edge boxes repeat a pixel; weighting it twice is harmless for an average and keeps the loop branch-light.
      if (!Number.isNaN(a) && a !== noData) {
        sum += a;
        n++;
      }
      if (!Number.isNaN(b) && b !== noData) {
        sum += b;
        n++;
      }
      if (!Number.isNaN(c) && c !== noData) {
        sum += c;
        n++;
      }
      if (!Number.isNaN(d) && d !== noData) {
        sum += d;
        n++;
      }
      out[y * w + x] = n === 0 ? noData : sum / n;
    }
  }
  return out;
}

/** Cuts tile (tx, ty) out of a float raster, padding past the edge with `fill`. */
function cutTile(
  src: Float32Array,
  width: number,
  height: number,
  size: number,
  tx: number,
  ty: number,
  fill: number,
  tile: Float32Array,
): Float32Array {
  const x0 = tx * size;
  const y0 = ty * size;
  const w = Math.min(size, width - x0);
  const h = Math.min(size, height - y0);
  if (w < size || h < size) tile.fill(fill);
  for (let r = 0; r < h; r++) {
    const s = (y0 + r) * width + x0;
    tile.set(src.subarray(s, s + w), r * size);
  }
  return tile;
}

/**
 * Scratch buffers an encode returns for the next one, by byte length: the cut block, the predicted block and the
 * overviews, which live only while a COG is encoded. A tile worker encodes the same shapes tile after tile, so it
 * allocates them once instead of per tile (about 1.75 MiB a 512 px tile with 256 px blocks: the predicted bytes
 * of five blocks, the overview and the cut block). Fewer large ArrayBuffers per tile means fewer of V8's full
 * collections, which the external memory they count for triggers (docs/benchmarks.md, "The floor"). Encodes that
 * overlap (several workers in one process, or a yield between blocks) each take their own; what comes back beyond
 * {@link SPARE_PER_SIZE} of a size, or above {@link SPARE_MAX_BYTES}, is left to the collector.
 */
const spare = new Map<number, ArrayBuffer[]>();
const SPARE_PER_SIZE = 4;
const SPARE_MAX_BYTES = 4 << 20;

function takeScratch(bytes: number): ArrayBuffer {
  return spare.get(bytes)?.pop() ?? new ArrayBuffer(bytes);
}

function giveBackScratch(buffers: readonly ArrayBuffer[]): void {
  for (const b of buffers) {
    if (b.byteLength > SPARE_MAX_BYTES) continue;
    const list = spare.get(b.byteLength);
    if (list === undefined) spare.set(b.byteLength, [b]);
    else if (list.length < SPARE_PER_SIZE && !list.includes(b)) list.push(b);
  }
}

interface CogPlan {
  readonly levels: readonly TiledImageSpec[];
  /** Per level, its tile count (row-major). */
  readonly counts: readonly number[];
  /**
   * Tile `i` of level `l` after the predictor, ready to compress: a buffer of
   * its own, made when asked for, so a caller compressing one block at a time
   * holds one predicted block at a time.
   */
  readonly predicted: (l: number, i: number) => Uint8Array;
  /** Blocks compressed at once: 1 for {@link encodeCog}, else the lanes asked for, at most the block count. */
  readonly lanes: number;
  /** Gives the plan's scratch buffers back for the next encode: call once its blocks are all compressed. */
  readonly release: () => void;
}

/**
 * Validates, builds the overview levels and cuts and predicts every tile: everything but compression.
 * With one lane (`lanes` 1, or the synchronous encoder's undefined) every predicted block is written to one
 * scratch buffer: the caller compresses each block (synchronously: the compressor keeps nothing of its input)
 * before asking for the next.
 */
function planCog(opts: EncodeCogOptions, lanesWanted?: number): CogPlan {
  const { width, height, data, noData, blockSize } = opts;
  if (data.length !== width * height) {
    throw new InvalidParamsError(`encodeCog: data holds ${data.length} pixels but ${width}x${height} needs ${width * height}`);
  }
  const base = cogBaseSpec(opts, 'encodeCog');

  const scratch: ArrayBuffer[] = [];
  const take = (bytes: number) => {
    const b = takeScratch(bytes);
    scratch.push(b);
    return b;
  };
  const levels: TiledImageSpec[] = [{ ...base, georeference: { geoTransform: opts.geoTransform, crs: opts.crs } }];
  const pixels: Float32Array[] = [data];
  let prev = data;
  let pw = width;
  let ph = height;
  for (const size of cogOverviewSizes(width, height, blockSize)) {
    prev = downsampleAverage(prev, pw, ph, noData, new Float32Array(take(size.width * size.height * 4)));
    pw = size.width;
    ph = size.height;
    levels.push({ ...base, width: pw, height: ph, subfileType: 1 });
    pixels.push(prev);
  }
  const counts = levels.map(tileCount);
  const lanes =
    lanesWanted === undefined
      ? 1
      : Math.max(
          1,
          Math.min(
            lanesWanted,
            counts.reduce((a, b) => a + b, 0),
          ),
        );
  const tile = new Float32Array(take(blockSize * blockSize * 4));
  // Uncompressed blocks are stored as predicted (compressTile returns them): those need buffers of their own.
  const into = lanes === 1 && base.compression !== 'NONE' ? new Uint8Array(take(tile.byteLength)) : undefined;
  const predicted = (l: number, i: number): Uint8Array => {
    const spec = levels[l] as TiledImageSpec;
    const across = tilesAcross(spec);
    const cut = cutTile(pixels[l] as Float32Array, spec.width, spec.height, blockSize, i % across, Math.floor(i / across), noData, tile);
    return predictTile(spec, cut, into);
  };
  return { levels, counts, lanes, predicted, release: () => giveBackScratch(scratch.splice(0)) };
}

/**
 * The base image of every COG Tessera writes (float32, one sample, the codec's predictor and level),
 * checked: one definition for the in-memory and the streaming writer, so they give the same bytes.
 */
export function cogBaseSpec(
  spec: Pick<EncodeCogOptions, 'width' | 'height' | 'blockSize' | 'compression' | 'predictor' | 'level' | 'noData'>,
  who: string,
): TiledImageSpec {
  if (spec.compression !== 'DEFLATE' && spec.compression !== 'ZSTD' && spec.compression !== 'NONE') {
    throw new InvalidParamsError(`${who}: compression ${String(spec.compression)} is not supported; use DEFLATE, ZSTD or NONE`);
  }
  if (typeof spec.noData !== 'number') throw new InvalidParamsError(`${who}: noData must be a number`);
  const base: TiledImageSpec = {
    width: spec.width,
    height: spec.height,
    blockSize: spec.blockSize,
    dataType: 'float32',
    samplesPerPixel: 1,
    planar: false,
    compression: spec.compression,
    // A predictor only helps a compressor (and TIFF forbids one without compression).
    predictor: spec.predictor ?? (spec.compression === 'NONE' ? 1 : 3),
    level: spec.level ?? (spec.compression === 'NONE' ? 0 : COMPRESSION_LEVELS[spec.compression].gdalDefault),
    noData: spec.noData,
  };
  validateImageSpec(base);
  return base;
}

/**
 * Encodes a float32 raster as a Cloud Optimized GeoTIFF, the way GDAL's COG
 * driver lays one out: classic TIFF, GDAL's ghost area (LAYOUT=IFDS_BEFORE_DATA,
 * row-major blocks with a 4-byte size leader and a 4-byte trailer), the full
 * resolution IFD first, then overview IFDs (averaged, halving until one block
 * holds the level), then tile data from the smallest overview to the full
 * resolution, tiles row-major with increasing offsets. A raster that fits in
 * one block has no overviews (GDAL makes none either: there is nothing coarser
 * to serve than the one block a reader fetches anyway).
 *
 * @example
 * const cog = encodeCog({ width: 512, height: 512, data, geoTransform, crs: { epsg: 32631 },
 *                         noData: -9999, blockSize: 512, compression: 'DEFLATE' });
 */
export function encodeCog(opts: EncodeCogOptions): Uint8Array {
  const plan = planCog(opts);
  try {
    return assembleCog(
      plan.levels,
      plan.counts.map((n, l) => Array.from({ length: n }, (_, i) => compressTile(plan.levels[l] as TiledImageSpec, plan.predicted(l, i)))),
    );
  } finally {
    plan.release();
  }
}

/** How {@link encodeCogAsync} runs the compressor. */
export interface EncodeCogAsyncOptions {
  /**
   * Blocks compressed at once. Default: this process's share of the cores
   * (`codecLanes()`: `os.availableParallelism()`, which honours CPU affinity,
   * divided among sibling worker processes). With 1 the
   * blocks are compressed on the event loop, one by one, yielding to it between
   * blocks.
   */
  readonly lanes?: number | undefined;
}

/**
 * {@link encodeCog} with the event loop free: the same bytes. With more than
 * one core the compression runs on libuv's thread pool, so concurrent tile
 * workers in one process use every core.
 *
 * At most as many blocks are in flight as this process may use cores: on one
 * core the blocks go one after another. Measured on one pinned core with all
 * five blocks of a tile handed to the pool at once, the encode took 51.6 ms
 * where the same blocks compressed one by one took 28.5 ms (docs/benchmarks.md):
 * the pool's threads took turns on the core, each with its own zlib state and
 * buffers (about 1 MiB per block), and evicted each other from the cache.
 *
 * On one core the pool cannot run beside the event loop, so it only adds a
 * thread hand-off per block and node:zlib's stream machinery: measured on one
 * pinned core, a DEFLATE 6 tile took 30 to 37 ms of CPU through the pool and
 * 26 to 30 ms compressed on the event loop (docs/benchmarks.md). So with one
 * lane the blocks are compressed synchronously, one at a time (a few ms each),
 * and the loop gets a turn between blocks: timers such as the lease keeper's
 * renewals wait at most one block.
 */
export async function encodeCogAsync(opts: EncodeCogOptions, how: EncodeCogAsyncOptions = {}): Promise<Uint8Array> {
  const plan = planCog(opts, how.lanes ?? codecLanes());
  try {
    return await compressPlan(plan);
  } finally {
    plan.release();
  }
}

async function compressPlan(plan: CogPlan): Promise<Uint8Array> {
  const lanes = plan.lanes;
  const jobs = plan.counts.flatMap((n, l) => Array.from({ length: n }, (_, i) => ({ l, i })));
  const compressed: Uint8Array[][] = plan.counts.map((n) => new Array<Uint8Array>(n));
  if (lanes === 1) {
    for (const job of jobs) {
      (compressed[job.l] as Uint8Array[])[job.i] = compressTile(plan.levels[job.l] as TiledImageSpec, plan.predicted(job.l, job.i));
      await yieldToEventLoop();
    }
    return assembleCog(plan.levels, compressed);
  }
  let next = 0;
  const lane = async () => {
    while (next < jobs.length) {
      const job = jobs[next++] as (typeof jobs)[number];
      (compressed[job.l] as Uint8Array[])[job.i] = await compressTileAsync(
        plan.levels[job.l] as TiledImageSpec,
        plan.predicted(job.l, job.i),
      );
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return assembleCog(plan.levels, compressed);
}

/** One turn of the event loop (its timers and I/O callbacks run), then back. Shared with cog-strip-writer.ts. */
export const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Lays out the header, the IFDs and the compressed tiles (`encoded[level][tile]`) as a COG.
 * Exported for the strip-by-strip encoder (cog-strip-writer.ts), which makes the same levels without the whole raster.
 */
export function assembleCog(levels: readonly TiledImageSpec[], encoded: readonly (readonly Uint8Array[])[]): Uint8Array {
  const ghost = new TextEncoder().encode(COG_GHOST_AREA);
  const placeholders = levels.map((spec) => imageTags(spec, new Array(tileCount(spec)).fill(0), new Array(tileCount(spec)).fill(0)));
  const { dataStart } = layoutIfds(placeholders, ghost);

  // Data: smallest overview first, full resolution last; each tile behind its 4-byte leader and before its trailer.
  let at = dataStart;
  const offsets: number[][] = levels.map(() => []);
  for (let l = levels.length - 1; l >= 0; l--) {
    for (const t of encoded[l] as Uint8Array[]) {
      at += 4;
      (offsets[l] as number[]).push(at);
      at += t.byteLength + 4;
    }
  }
  assertClassicSize(at);
  const ifds: TagSpec[][] = levels.map((spec, l) =>
    imageTags(
      spec,
      offsets[l] as number[],
      (encoded[l] as Uint8Array[]).map((t) => t.byteLength),
    ),
  );

  const out = new Uint8Array(at);
  writeHeader(out, ifds, ghost);
  const dv = new DataView(out.buffer);
  for (let l = levels.length - 1; l >= 0; l--) {
    const tiles = encoded[l] as Uint8Array[];
    const offs = offsets[l] as number[];
    tiles.forEach((t, i) => {
      const o = offs[i] as number;
      dv.setUint32(o - 4, t.byteLength, true);
      out.set(t, o);
      out.set(t.subarray(Math.max(0, t.byteLength - 4)), o + t.byteLength);
    });
  }
  return out;
}
