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
 * JPEG is lossy and decoders are allowed to differ: jpeg-js's inverse DCT
 * matches libjpeg's integer one, but its YCbCr to RGB conversion uses
 * floating point and its chroma upsampling is by replication where libjpeg
 * interpolates ("fancy upsampling"), so a YCbCr block can differ from GDAL's
 * by a few levels (docs/geotiff.md gives the measured agreement).
 */
export function jpegDecode(stored: Uint8Array, tables: Uint8Array | undefined, block: JpegBlock): Uint8Array {
  const stream = tables && tables.byteLength > 4 ? splice(tables, stored) : stored;
  const image = jpeg.decode(stream, {
    useTArray: true,
    formatAsRGBA: false,
    colorTransform: block.ycbcr,
    tolerantDecoding: false,
    maxResolutionInMP: 1024,
    maxMemoryUsageInMB: 1024,
  });
  if (image.width < block.width || image.height < block.rows) {
    throw new Error(`JPEG block is ${image.width}x${image.height}, smaller than the ${block.width}x${block.rows} block it should fill`);
  }
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
