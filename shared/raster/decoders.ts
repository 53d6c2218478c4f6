import jpeg from 'jpeg-js';

/**
 * Block decoders beyond codecs.ts's lossless ones: JPEG (TIFF compression 7,
 * by jpeg-js, pure JavaScript) and the widening of int8 samples to int16.
 * Each works on one block and allocates only its output.
 */

/** The markers a JPEG stream starts and ends with. */
const SOI = [0xff, 0xd8] as const;
const EOI = [0xff, 0xd9] as const;

/** How to turn one JPEG-compressed block into samples. */
export interface JpegBlock {
  /** Components per pixel in the block: 1 (grey, or one plane of a band-planar file) or 3 (RGB / YCbCr). */
  readonly components: 1 | 3;
  /** PhotometricInterpretation 6: the stream holds YCbCr and is converted to RGB, as GDAL's JPEGCOLORMODE=RGB reads it. */
  readonly ycbcr: boolean;
  /** Pixels across and rows of the block (the JPEG frame's size). */
  readonly width: number;
  readonly rows: number;
  /** YCbCrSubSampling (530): chroma samples are this many pixels apart across and down (TIFF's default is 2, 2). */
  readonly subsampling?: readonly [number, number] | undefined;
}

/**
 * Decodes one JPEG block of a TIFF into pixel-interleaved uint8 samples.
 *
 * TIFF writers (libtiff, so GDAL) keep the quantisation and Huffman tables
 * once, in the JPEGTables tag (347), and write each block as an abbreviated
 * stream without them. The tables stream is spliced in front of the block's
 * (its EOI and the block's SOI dropped), giving the one complete stream a
 * baseline decoder expects.
 *
 * JPEG is lossy and decoders are allowed to differ. jpeg-js's inverse DCT
 * rounds differently from libjpeg's, so a few percent of samples differ from
 * GDAL's by 1. Its YCbCr to RGB conversion uses floating point and upsamples
 * chroma by replication, where libjpeg (so GDAL) interpolates ("fancy
 * upsampling") and converts with integer tables: those two steps are done
 * here as libjpeg does them (jdsample.c, jdcolor.c), on the chroma jpeg-js
 * decodes, so YCbCr blocks differ no more than grey ones (docs/geotiff.md
 * gives the measured agreement).
 */
export function jpegDecode(stored: Uint8Array, tables: Uint8Array | undefined, block: JpegBlock): Uint8Array {
  const stream = tables && tables.byteLength > 4 ? splice(tables, stored) : stored;
  const image = jpeg.decode(stream, {
    useTArray: true,
    formatAsRGBA: false,
    colorTransform: false,
    tolerantDecoding: false,
    maxResolutionInMP: 1024,
    maxMemoryUsageInMB: 1024,
  });
  if (image.width < block.width || image.height < block.rows) {
    throw new Error(`JPEG block is ${image.width}x${image.height}, smaller than the ${block.width}x${block.rows} block it should fill`);
  }
  if (block.ycbcr) yccToRgb(image.data, image.width, image.height, block.subsampling ?? [2, 2]);
  // jpeg-js always hands back three samples a pixel (a grey image repeated);
  // keep the block's own width and rows, and its own components.
  const out = new Uint8Array(block.width * block.rows * block.components);
  const rowIn = image.width * 3;
  for (let r = 0; r < block.rows; r++) {
    const src = r * rowIn;
    const dst = r * block.width * block.components;
    if (block.components === 3) {
      out.set(image.data.subarray(src, src + block.width * 3), dst);
    } else {
      for (let c = 0; c < block.width; c++) out[dst + c] = image.data[src + c * 3] as number;
    }
  }
  return out;
}

/** libjpeg's fixed-point constants (jdcolor.c): 16 fractional bits. */
const SCALEBITS = 16;
const ONE_HALF = 1 << (SCALEBITS - 1);
const FIX = (x: number) => Math.floor(x * (1 << SCALEBITS) + 0.5);
const CR_R = new Int32Array(256);
const CB_B = new Int32Array(256);
const CR_G = new Int32Array(256);
const CB_G = new Int32Array(256);
for (let i = 0; i < 256; i++) {
  const x = i - 128;
  CR_R[i] = (FIX(1.402) * x + ONE_HALF) >> SCALEBITS;
  CB_B[i] = (FIX(1.772) * x + ONE_HALF) >> SCALEBITS;
  CR_G[i] = -FIX(0.71414) * x;
  CB_G[i] = -FIX(0.34414) * x + ONE_HALF;
}
const clamp8 = (v: number) => Math.min(255, Math.max(0, v));

/**
 * In place, Y Cb Cr (chroma as jpeg-js replicates it) to RGB as libjpeg
 * does it: the chroma planes are taken back to their stored resolution
 * (every h-th, v-th sample, which replication leaves intact), upsampled with
 * libjpeg's triangle filter for 2x1 and 2x2 subsampling, and converted with
 * its integer tables. Other subsamplings keep the replicated chroma.
 */
function yccToRgb(data: Uint8Array, width: number, height: number, [h, v]: readonly [number, number]): void {
  const n = width * height;
  const cb = new Uint8Array(n);
  const cr = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    cb[i] = data[i * 3 + 1] as number;
    cr[i] = data[i * 3 + 2] as number;
  }
  if (h === 2 && (v === 1 || v === 2)) {
    fancyUpsample(cb, width, height, v);
    fancyUpsample(cr, width, height, v);
  }
  for (let i = 0; i < n; i++) {
    const y = data[i * 3] as number;
    const b = cb[i] as number;
    const r = cr[i] as number;
    data[i * 3] = clamp8(y + (CR_R[r] as number));
    data[i * 3 + 1] = clamp8(y + (((CB_G[b] as number) + (CR_G[r] as number)) >> SCALEBITS));
    data[i * 3 + 2] = clamp8(y + (CB_B[b] as number));
  }
}

/** libjpeg's h2v1 / h2v2 fancy upsampling (jdsample.c) of one plane whose samples are replicated 2 x v. */
function fancyUpsample(plane: Uint8Array, width: number, height: number, v: number): void {
  const cw = Math.ceil(width / 2);
  const ch = Math.ceil(height / v);
  const src = new Int32Array(cw * ch);
  for (let j = 0; j < ch; j++) for (let i = 0; i < cw; i++) src[j * cw + i] = plane[j * v * width + i * 2] as number;
  const put = (row: number, col: number, value: number) => {
    if (row < height && col < width) plane[row * width + col] = value;
  };
  for (let j = 0; j < ch; j++) {
    const rowsOut = v === 2 ? [0, 1] : [0];
    for (const half of rowsOut) {
      // h2v2: each output row blends its own input row (3/4) with the nearest other one (1/4); edges repeat.
      const other = v === 2 ? Math.min(ch - 1, Math.max(0, half === 0 ? j - 1 : j + 1)) : j;
      const sum = (i: number) =>
        v === 2 ? (src[j * cw + i] as number) * 3 + (src[other * cw + i] as number) : (src[j * cw + i] as number);
      const outRow = j * v + half;
      if (cw === 1) {
        const s = sum(0);
        put(outRow, 0, v === 2 ? (s * 4 + 8) >> 4 : s);
        put(outRow, 1, v === 2 ? (s * 4 + 7) >> 4 : s);
        continue;
      }
      for (let i = 0; i < cw; i++) {
        const s = sum(i);
        const prev = sum(Math.max(0, i - 1));
        const next = sum(Math.min(cw - 1, i + 1));
        if (v === 2) {
          put(outRow, 2 * i, i === 0 ? (s * 4 + 8) >> 4 : (s * 3 + prev + 8) >> 4);
          put(outRow, 2 * i + 1, i === cw - 1 ? (s * 4 + 7) >> 4 : (s * 3 + next + 7) >> 4);
        } else {
          put(outRow, 2 * i, i === 0 ? s : (s * 3 + prev + 1) >> 2);
          put(outRow, 2 * i + 1, i === cw - 1 ? s : (s * 3 + next + 2) >> 2);
        }
      }
    }
  }
}

function splice(tables: Uint8Array, stored: Uint8Array): Uint8Array {
  const tablesEnd =
    tables[tables.byteLength - 2] === EOI[0] && tables[tables.byteLength - 1] === EOI[1] ? tables.byteLength - 2 : tables.byteLength;
  const blockStart = stored[0] === SOI[0] && stored[1] === SOI[1] ? 2 : 0;
  const out = new Uint8Array(tablesEnd + stored.byteLength - blockStart);
  out.set(tables.subarray(0, tablesEnd), 0);
  out.set(stored.subarray(blockStart), tablesEnd);
  return out;
}

/**
 * Signed 8-bit samples (SampleFormat 2, 8 bits: GDAL's Int8, SIGNEDBYTE) as
 * int16: the same values in a type the rest of Tessera carries. Runs after
 * any horizontal predictor has been undone at 8 bits, where its sums wrap.
 */
export function widenInt8(bytes: Uint8Array, samples: number): Int16Array {
  const signed = new Int8Array(bytes.buffer, bytes.byteOffset, samples);
  const out = new Int16Array(samples);
  for (let i = 0; i < samples; i++) out[i] = signed[i] as number;
  return out;
}

/**
 * A bilevel (1-bit) block as uint8 0 / 255, the way GDAL reads its internal
 * masks (GDAL_TIFF_INTERNAL_MASK_TO_8BIT, on by default): most significant
 * bit first (FillOrder 1), each row padded to a whole byte.
 */
export function unpackBits(bytes: Uint8Array, rows: number, width: number, rowBytes: number): Uint8Array {
  const out = new Uint8Array(rows * width);
  for (let r = 0; r < rows; r++) {
    const src = r * rowBytes;
    const dst = r * width;
    for (let c = 0; c < width; c++) {
      if (((bytes[src + (c >> 3)] as number) >> (7 - (c & 7))) & 1) out[dst + c] = 255;
    }
  }
  return out;
}
