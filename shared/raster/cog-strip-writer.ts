import { InvalidParamsError } from '../domain/errors.js';
import { codecLanes } from './codecs.js';
import { assembleCog, cogBaseSpec, cogOverviewSizes, downsampleAverage, type EncodeCogOptions, yieldToEventLoop } from './cog-writer.js';
import { compressTile, compressTileAsync, predictTile, type TiledImageSpec, tilesAcross } from './tiff-writer.js';

/** The raster a strip-by-strip COG describes: {@link EncodeCogOptions} without the pixels. */
export type CogStripSpec = Omit<EncodeCogOptions, 'data'>;

/**
 * Rows `[y, y + rows)` of the full-resolution raster, row-major, `rows * width`
 * long. Asked for in order, top to bottom, `blockSize` rows at a time (the last
 * strip may be shorter); the encoder does not keep the array after the call
 * that consumed it returns, so the reader may reuse its buffer.
 */
export type StripReader = (y: number, rows: number) => Promise<Float32Array>;

export interface EncodeCogByStripsOptions {
  /** Blocks compressed at once; default `codecLanes()`, as encodeCogAsync. */
  readonly lanes?: number | undefined;
  /**
   * The most compressed bytes to hold (the blocks, before the file is laid
   * out). Checked after every block, so an oversized raster is refused when
   * it crosses the line, not after it has filled the memory: `exceeded` makes
   * the error thrown.
   */
  readonly budget?: { readonly maxBytes: number; readonly exceeded: (bytes: number) => Error } | undefined;
}

/** One level of the pyramid being built: its rows not yet cut into blocks, and its finished blocks. */
interface Level {
  readonly spec: TiledImageSpec;
  /** `blockSize` rows of this level, filled top down. */
  readonly rows: Float32Array;
  filled: number;
  /** Rows of this level already cut into blocks. */
  done: number;
  readonly blocks: Uint8Array[];
}

/**
 * {@link encodeCog} without the whole raster in memory: the same bytes for the
 * same pixels (test/unit/app/cog-mosaic.test.ts compares them), made from
 * strips of `blockSize` rows read one after another. What is held: the
 * compressed blocks (the file, less its header), one block row of each level
 * (about `2 * blockSize * width` pixels in all) and the strip being read.
 *
 * Why the same bytes: each overview row `y` averages rows `2y` and
 * `min(2y + 1, height - 1)` of the level above. A block row holds an even
 * number of rows (`blockSize` is a multiple of 16) unless it is the level's
 * last, whose last row is the level's last row; so halving each block row on
 * its own gives the rows halving the whole level would, and the blocks of each
 * level come out in the same row-major order. Compression is per block, as in
 * encodeCog, and the layout is cog-writer.ts's own (assembleCog).
 */
export async function encodeCogByStrips(spec: CogStripSpec, read: StripReader, how: EncodeCogByStripsOptions = {}): Promise<Uint8Array> {
  const { width, height, blockSize, noData } = spec;
  // The same base image as encodeCog's (cog-writer.ts): a different spec would give other bytes.
  const base = cogBaseSpec(spec, 'encodeCogByStrips');
  const specs: TiledImageSpec[] = [
    { ...base, georeference: { geoTransform: spec.geoTransform, crs: spec.crs } },
    ...cogOverviewSizes(width, height, blockSize).map(
      (s): TiledImageSpec => ({ ...base, width: s.width, height: s.height, subfileType: 1 }),
    ),
  ];
  const levels: Level[] = specs.map((s) => ({ spec: s, rows: new Float32Array(blockSize * s.width), filled: 0, done: 0, blocks: [] }));
  const lanes = Math.max(1, how.lanes ?? codecLanes());
  const tile = new Float32Array(blockSize * blockSize);
  let held = 0;

  const compressBlockRow = async (level: Level, rows: number): Promise<void> => {
    const across = tilesAcross(level.spec);
    const w = level.spec.width;
    // Cut and predict one block when its turn comes: at most `lanes` predicted blocks are alive at once.
    const predicted = (tx: number): Uint8Array => {
      const x0 = tx * blockSize;
      const cols = Math.min(blockSize, w - x0);
      if (cols < blockSize || rows < blockSize) tile.fill(noData);
      for (let r = 0; r < rows; r++) tile.set(level.rows.subarray(r * w + x0, r * w + x0 + cols), r * blockSize);
      return predictTile(level.spec, tile);
    };
    const out = new Array<Uint8Array>(across);
    const account = (tx: number, compressed: Uint8Array) => {
      // node:zlib hands back a view of its output chunk (sized for the worst case, about the raw block):
      // kept as is, every held block would pin a raw block's worth of memory. A copy of its own instead.
      const block = compressed.byteLength < compressed.buffer.byteLength ? compressed.slice() : compressed;
      out[tx] = block;
      held += block.byteLength + 8; // the block, its 4-byte leader and its 4-byte trailer
      if (how.budget && held > how.budget.maxBytes) throw how.budget.exceeded(held);
    };
    if (lanes === 1) {
      for (let tx = 0; tx < across; tx++) {
        account(tx, compressTile(level.spec, predicted(tx)));
        await yieldToEventLoop();
      }
    } else {
      let next = 0;
      const lane = async () => {
        while (next < across) {
          const tx = next++;
          account(tx, await compressTileAsync(level.spec, predicted(tx)));
        }
      };
      await Promise.all(Array.from({ length: Math.min(lanes, across) }, lane));
    }
    level.blocks.push(...out);
  };

  const push = async (l: number, pixels: Float32Array, count: number): Promise<void> => {
    const level = levels[l] as Level;
    const w = level.spec.width;
    let from = 0;
    while (from < count) {
      const take = Math.min(count - from, blockSize - level.filled);
      level.rows.set(pixels.subarray(from * w, (from + take) * w), level.filled * w);
      level.filled += take;
      from += take;
      if (level.filled === blockSize || level.done + level.filled === level.spec.height) {
        const rows = level.filled;
        await compressBlockRow(level, rows);
        level.done += rows;
        level.filled = 0;
        if (l + 1 < levels.length) {
          await push(l + 1, downsampleAverage(level.rows.subarray(0, rows * w), w, rows, noData), Math.ceil(rows / 2));
        }
      }
    }
  };

  for (let y = 0; y < height; y += blockSize) {
    const rows = Math.min(blockSize, height - y);
    const strip = await read(y, rows);
    if (strip.length !== rows * width) {
      throw new InvalidParamsError(
        `encodeCogByStrips: strip at row ${y} holds ${strip.length} pixels but ${width}x${rows} needs ${rows * width}`,
      );
    }
    await push(0, strip, rows);
  }
  return assembleCog(
    specs,
    levels.map((l) => l.blocks),
  );
}
