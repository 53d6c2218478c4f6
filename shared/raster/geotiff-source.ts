import { InvalidGridError, InvalidParamsError, NotARasterError, UnsupportedRasterError } from '../domain/errors.js';
import { MAX_RASTER_SIDE } from '../domain/tile-grid.js';
import type { ObjectStore, ReadPin } from '../ports/object-store.port.js';
import { BlockCache } from './block-cache.js';
import {
  inflateAsync,
  lzwDecode,
  packBitsDecode,
  swapBytes,
  undoFloatingPointPredictor,
  undoHorizontalPredictor,
  zstdDecompressAsync,
} from './codecs.js';
import { jpegDecode, unpackBits, widenInt8 } from './decoders.js';
import { parseGdalMetadata } from './gdal-metadata.js';
import { crsFromGeoKeys, type GeoTransform, geoTransformFromTags, parseGeoKeys, type RasterCrs } from './georeferencing.js';
import { type Ifd, RangeReader, TiffDirectoryReader } from './tiff-directory.js';
import {
  COMPRESSION_NAMES,
  Compression,
  DATA_TYPES,
  dataTypeOf,
  GeoKey,
  Photometric,
  PlanarConfiguration,
  Predictor,
  parseNoData,
  type RasterDataType,
  SubfileType,
  Tag,
  type TypedArray,
} from './tiff-format.js';

/** A rectangle of pixels: column `x`, row `y`, from the top-left corner. */
export interface RasterWindow {
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

/** What a source has cost so far: the numbers the duplicate-cost benchmark reports. */
export interface RasterReadStats {
  /** Range requests made to the object store, the header read included. */
  readonly rangeReads: number;
  readonly bytesRead: number;
  readonly blocksDecoded: number;
  readonly cacheHits: number;
}

/**
 * A georeferenced multi-band raster read by window. Only the header is read
 * on open; each `readWindow` fetches (by byte range) and decodes just the
 * blocks the window touches.
 */
export interface RasterSource {
  readonly key: string;
  readonly width: number;
  readonly height: number;
  readonly bandCount: number;
  readonly dataType: RasterDataType;
  readonly crs: RasterCrs;
  /** GDAL order: `[originX, pixelWidth, 0, originY, 0, pixelHeight]` for a north-up raster. */
  readonly geoTransform: GeoTransform;
  readonly noData: number | undefined;
  readonly tiled: boolean;
  /** Internal block (tile or strip) size in pixels. */
  readonly blockWidth: number;
  readonly blockHeight: number;
  readonly compression: string;
  /** Band descriptions from GDAL_METADATA (e.g. `B04`), by band, `undefined` where a band has none. */
  readonly bandDescriptions: readonly (string | undefined)[];
  /**
   * GDAL's band scale and offset (GDAL_METADATA items with role "scale" and
   * "offset"), by band, `undefined` where a band has none: the physical value
   * is `raw * scale + offset`. `readWindow` returns raw values, as GDAL's
   * ReadAsArray does; applying them is the expression's business.
   */
  readonly bandScales: readonly (number | undefined)[];
  readonly bandOffsets: readonly (number | undefined)[];
  /**
   * The internal overviews (reduced-resolution copies in the same file, as
   * gdaladdo and the COG driver write them), largest first. Each reads like
   * this source, on a grid as many times coarser as it is smaller, with the
   * same CRS and nodata. The first call walks the IFD chain (for a COG, in
   * the header already read; otherwise one range read per IFD).
   */
  overviews(): Promise<RasterSource[]>;
  /**
   * The per-dataset mask stored in the file (an IFD with the mask subfile
   * type: GDAL's internal mask, `GDAL_TIFF_INTERNAL_MASK`) at this source's
   * size, as one uint8 band of 255 (valid) and 0 (masked), as GDAL's
   * GetMaskBand reads it; `undefined` when the file has none.
   */
  mask(): Promise<RasterSource | undefined>;
  /**
   * The pixels of `window` for each of `bands` (1-based), row-major, in the
   * raster's own data type. The window must lie inside the raster.
   */
  readWindow(window: RasterWindow, bands: readonly number[]): Promise<TypedArray[]>;
  stats(): RasterReadStats;
}

export interface OpenGeoTiffOptions {
  /** Bytes read by the first range request; IFDs beyond it cost more requests. Default 64 KiB. */
  readonly maxHeaderBytes?: number | undefined;
  /**
   * Capacity of the decoded-block cache in bytes. Default: two rows of the image's blocks (every band), at least 16 MiB
   * and at most 128 MiB ({@link defaultBlockCacheBytes}): 44 MiB for a Sentinel-2-sized 10980² two-band uint16 scene
   * in 512 px blocks. Each overview and mask is sized from its own blocks.
   */
  readonly blockCacheBytes?: number | undefined;
  /** Largest decoded block accepted (a whole-image compressed strip would exceed it). Default 64 MiB. */
  readonly maxBlockBytes?: number | undefined;
  /** Read exactly this version of the object (header and every block), or throw SourceChangedError. */
  readonly pin?: ReadPin | undefined;
}

const DEFAULT_HEADER_BYTES = 64 * 1024;
/** The default block cache's bounds ({@link defaultBlockCacheBytes}). */
const MIN_DEFAULT_CACHE_BYTES = 16 * 1024 * 1024;
const MAX_DEFAULT_CACHE_BYTES = 128 * 1024 * 1024;
/** Rows of blocks the default cache holds: a row of tiles may straddle two. */
const CACHED_BLOCK_ROWS = 2;
const DEFAULT_MAX_BLOCK_BYTES = 64 * 1024 * 1024;
/** Uncompressed blocks are read in row slices of about this size, so a one-strip image is still read by window. */
const UNCOMPRESSED_SLICE_BYTES = 1024 * 1024;
/** Blocks whose bytes are at most this far apart are fetched by one range request. */
const COALESCE_GAP_BYTES = 16 * 1024;
const COALESCE_MAX_BYTES = 32 * 1024 * 1024;

const SUPPORTED_COMPRESSIONS: ReadonlySet<number> = new Set([
  Compression.NONE,
  Compression.LZW,
  Compression.ADOBE_DEFLATE,
  Compression.DEFLATE,
  Compression.PACKBITS,
  Compression.ZSTD,
  Compression.JPEG,
]);

/** No real file has more images than this; a longer IFD chain is a loop or corruption, and is not walked further. */
const MAX_IFDS = 256;

const HEADER_TAGS = [
  Tag.NewSubfileType,
  Tag.ImageWidth,
  Tag.ImageLength,
  Tag.BitsPerSample,
  Tag.Compression,
  Tag.PhotometricInterpretation,
  Tag.StripOffsets,
  Tag.SamplesPerPixel,
  Tag.RowsPerStrip,
  Tag.StripByteCounts,
  Tag.PlanarConfiguration,
  Tag.Predictor,
  Tag.JPEGTables,
  Tag.YCbCrSubSampling,
  Tag.TileWidth,
  Tag.TileLength,
  Tag.TileOffsets,
  Tag.TileByteCounts,
  Tag.SampleFormat,
  Tag.ModelPixelScale,
  Tag.ModelTiepoint,
  Tag.ModelTransformation,
  Tag.GeoKeyDirectory,
  Tag.GeoDoubleParams,
  Tag.GeoAsciiParams,
  Tag.GdalMetadata,
  Tag.GdalNoData,
];

/**
 * Opens a GeoTIFF (tiled or stripped, classic or BigTIFF, either byte order)
 * held in an object store, reading only its header by range.
 *
 * Supported: uint8/uint16/int16/uint32/int32/float32/float64 samples, and
 * int8 (read as int16); no compression, DEFLATE, ZSTD, LZW, PackBits or JPEG
 * (grey, RGB or YCbCr), with or without predictor 2 or 3; pixel-interleaved
 * or band-planar; internal overviews and masks (see docs/geotiff.md). Errors: NotARasterError (not a TIFF,
 * empty, truncated), UnsupportedRasterError (names the layout),
 * RasterWithoutCrsError (no GeoKeys or no georeferencing), InvalidGridError
 * (absurd size), ObjectNotFoundError (from the store).
 *
 * @example
 * const src = await openGeoTiff(store, 'scenes/T31UDQ.tif');
 * const [red, nir] = await src.readWindow({ x: 0, y: 0, width: 512, height: 512 }, [1, 2]);
 */
export async function openGeoTiff(store: ObjectStore, key: string, opts: OpenGeoTiffOptions = {}): Promise<RasterSource> {
  const headerBytes = positive('maxHeaderBytes', opts.maxHeaderBytes ?? DEFAULT_HEADER_BYTES);
  const reader = await RangeReader.open(store, key, headerBytes, opts.pin);
  const dir = TiffDirectoryReader.parse(reader);
  const ifd = await dir.readIfd(dir.firstIfdOffset);
  const values = await dir.loadValues(ifd, HEADER_TAGS);
  return GeoTiffSource.create(dir, ifd, values, {
    blockCacheBytes: opts.blockCacheBytes,
    maxBlockBytes: opts.maxBlockBytes ?? DEFAULT_MAX_BLOCK_BYTES,
    chain: new IfdChain(dir, ifd),
  });
}

/** One image of the file: an IFD and its header tag values. */
interface TiffImage {
  readonly ifd: Ifd;
  readonly values: Map<number, Uint8Array>;
}

/**
 * The images after the first (overviews, masks), walked once, when first
 * asked for: a plain GeoTIFF keeps them at its end, so opening must not pay for them.
 */
class IfdChain {
  private walked: Promise<TiffImage[]> | undefined;

  constructor(
    readonly dir: TiffDirectoryReader,
    readonly first: Ifd,
  ) {}

  images(): Promise<TiffImage[]> {
    // A failed walk (a store error) is forgotten, so the next call tries again.
    this.walked ??= this.walk().catch((e: unknown) => {
      this.walked = undefined;
      throw e;
    });
    return this.walked;
  }

  private async walk(): Promise<TiffImage[]> {
    const out: TiffImage[] = [];
    const seen = new Set<number>([this.first.offset]);
    let next = this.first.nextIfdOffset;
    while (next !== 0 && !seen.has(next) && out.length < MAX_IFDS) {
      seen.add(next);
      const ifd = await this.dir.readIfd(next);
      out.push({ ifd, values: await this.dir.loadValues(ifd, HEADER_TAGS) });
      next = ifd.nextIfdOffset;
    }
    return out;
  }
}

/** What an overview or mask image inherits from the full-resolution image: GeoTIFF keeps it in the first IFD only. */
interface BaseImage {
  readonly width: number;
  readonly height: number;
  readonly crs: RasterCrs;
  readonly geoTransform: GeoTransform;
  readonly noData: number | undefined;
  readonly bandDescriptions: readonly (string | undefined)[];
  readonly bandScales: readonly (number | undefined)[];
  readonly bandOffsets: readonly (number | undefined)[];
  /** The image is a mask: one uint8 band, no nodata of its own. */
  readonly isMask: boolean;
}

function positive(name: string, v: number): number {
  if (!Number.isInteger(v) || v < 16) throw new RangeError(`${name} must be an integer of at least 16, got ${v}`);
  return v;
}

/**
 * The block cache's default capacity: {@link CACHED_BLOCK_ROWS} rows of the image's decoded blocks, every band, within
 * [16 MiB, 128 MiB]. Tiles are taken along rows of the target grid (fan-out enqueues them row by row), so consecutive
 * tiles read the same row of blocks, and a row of tiles may straddle two: a cache smaller than that row (the former
 * fixed 16 MiB held 16 of the 22 blocks across a Sentinel-2 scene) evicts every block before the next row of tiles
 * needs it again, and each block was inflated about four times per worker (docs/benchmarks.md section 9).
 */
function defaultBlockCacheBytes(layout: Layout, dataType: RasterDataType): number {
  const bytesPerSample = DATA_TYPES[dataType].bits / 8;
  const rowOfBlocks = layout.across * layout.blockWidth * layout.blockHeight * layout.samplesPerPixel * bytesPerSample;
  return Math.min(MAX_DEFAULT_CACHE_BYTES, Math.max(MIN_DEFAULT_CACHE_BYTES, CACHED_BLOCK_ROWS * rowOfBlocks));
}

/** Where one (virtual) block's bytes are, and which image rows it covers. */
interface BlockLocation {
  readonly id: number;
  readonly plane: number;
  readonly col0: number;
  readonly row0: number;
  readonly rows: number;
  readonly offset: number;
  readonly length: number;
  readonly sparse: boolean;
}

interface Layout {
  readonly samplesPerPixel: number;
  readonly planar: boolean;
  readonly compression: number;
  readonly predictor: number;
  /** Bits of one stored sample: 1 for a bilevel mask, else the data type's (8 for int8, widened to int16 on decode). */
  readonly storedBits: number;
  /** Bytes of one stored row of a block (a 1-bit row is padded to whole bytes). */
  readonly storedRowBytes: number;
  /** SampleFormat int, 8 bits: decoded as int8, handed out as int16. */
  readonly int8: boolean;
  /** JPEGTables (347), for JPEG blocks written as abbreviated streams. */
  readonly jpegTables: Uint8Array | undefined;
  /** PhotometricInterpretation YCbCr: JPEG blocks are converted to RGB. */
  readonly ycbcr: boolean;
  /** YCbCrSubSampling, across and down. */
  readonly subsampling: readonly [number, number];
  readonly blockWidth: number;
  /** Rows of a stored block (tile length, or rows per strip). */
  readonly blockHeight: number;
  readonly across: number;
  readonly down: number;
  /** Rows per virtual block: the block height, or a slice of it for uncompressed data. */
  readonly sliceRows: number;
  readonly slicesPerBlock: number;
  readonly offsets: Float64Array;
  readonly byteCounts: Float64Array;
}

class GeoTiffSource implements RasterSource {
  private readonly cache: BlockCache<TypedArray>;
  private readonly inFlight = new Map<number, Promise<TypedArray>>();
  private counters = { rangeReads: 1, bytesRead: 0, blocksDecoded: 0, cacheHits: 0 };
  /** Bytes of one stored sample (1 for int8, though it is handed out as int16). */
  private readonly bytesPerSample: number;
  /** Samples in one row of a stored block: block width x samples per pixel (chunky) or x 1 (planar). */
  private readonly rowSamples: number;
  private readonly littleEndian: boolean;

  private constructor(
    private readonly reader: RangeReader,
    littleEndian: boolean,
    readonly width: number,
    readonly height: number,
    readonly bandCount: number,
    readonly dataType: RasterDataType,
    readonly crs: RasterCrs,
    readonly geoTransform: GeoTransform,
    readonly noData: number | undefined,
    readonly tiled: boolean,
    readonly bandDescriptions: readonly (string | undefined)[],
    readonly bandScales: readonly (number | undefined)[],
    readonly bandOffsets: readonly (number | undefined)[],
    private readonly layout: Layout,
    private readonly chain: IfdChain | undefined,
    private readonly isMask: boolean,
    private readonly opts: { blockCacheBytes: number | undefined; maxBlockBytes: number },
  ) {
    this.littleEndian = littleEndian;
    this.cache = new BlockCache(opts.blockCacheBytes ?? defaultBlockCacheBytes(layout, dataType));
    this.bytesPerSample = Math.max(1, layout.storedBits / 8);
    this.rowSamples = layout.blockWidth * (layout.planar ? 1 : layout.samplesPerPixel);
    this.counters.bytesRead = reader.head.byteLength;
  }

  get key(): string {
    return this.reader.key;
  }

  get blockWidth(): number {
    return this.layout.blockWidth;
  }

  get blockHeight(): number {
    return this.layout.blockHeight;
  }

  get compression(): string {
    return COMPRESSION_NAMES[this.layout.compression] ?? String(this.layout.compression);
  }

  stats(): RasterReadStats {
    return { ...this.counters };
  }

  async overviews(): Promise<RasterSource[]> {
    if (!this.chain || this.isMask) return [];
    const found: GeoTiffSource[] = [];
    for (const image of await this.chain.images()) {
      if (this.kind(image) !== 'overview') continue;
      const ovr = this.subImage(image, false);
      if (ovr.width < this.width && ovr.bandCount === this.bandCount) found.push(ovr);
    }
    return found.sort((a, b) => b.width - a.width);
  }

  /** The mask source, found once: every tile of a warm instance reads it through the same block cache. */
  private maskSource: Promise<RasterSource | undefined> | undefined;

  mask(): Promise<RasterSource | undefined> {
    this.maskSource ??= this.findMask().catch((e: unknown) => {
      this.maskSource = undefined;
      throw e;
    });
    return this.maskSource;
  }

  private async findMask(): Promise<RasterSource | undefined> {
    if (!this.chain || this.isMask) return undefined;
    for (const image of await this.chain.images()) {
      if (this.kind(image) !== 'mask') continue;
      const m = this.subImage(image, true);
      if (m.width === this.width && m.height === this.height) return m;
    }
    return undefined;
  }

  private kind(image: TiffImage): 'overview' | 'mask' | 'other' {
    const e = image.ifd.entries.get(Tag.NewSubfileType);
    const b = image.values.get(Tag.NewSubfileType);
    const subfile = e && b ? (this.chain?.dir.numbers(e, b)[0] ?? 0) : 0;
    const pe = image.ifd.entries.get(Tag.PhotometricInterpretation);
    const pb = image.values.get(Tag.PhotometricInterpretation);
    const photometric = pe && pb ? this.chain?.dir.numbers(pe, pb)[0] : undefined;
    // GDAL marks a mask with both the subfile bit and the photometric value; either alone is something else.
    if (subfile & SubfileType.MASK) return photometric === Photometric.MASK ? 'mask' : 'other';
    return subfile & SubfileType.REDUCED ? 'overview' : 'other';
  }

  /** An overview or mask image, georeferenced from this one: its grid is this one's, scaled by the ratio of the sizes, as GDAL does. */
  private subImage(image: TiffImage, isMask: boolean): GeoTiffSource {
    const chain = this.chain as IfdChain;
    const base: BaseImage = {
      width: this.width,
      height: this.height,
      crs: this.crs,
      geoTransform: this.geoTransform,
      noData: isMask ? undefined : this.noData,
      bandDescriptions: isMask ? [undefined] : this.bandDescriptions,
      bandScales: isMask ? [undefined] : this.bandScales,
      bandOffsets: isMask ? [undefined] : this.bandOffsets,
      isMask,
    };
    return GeoTiffSource.create(chain.dir, image.ifd, image.values, { ...this.opts, chain }, base);
  }

  static create(
    dir: TiffDirectoryReader,
    ifd: Ifd,
    values: Map<number, Uint8Array>,
    opts: { blockCacheBytes: number | undefined; maxBlockBytes: number; chain: IfdChain },
    base?: BaseImage,
  ): GeoTiffSource {
    const key = dir.reader.key;
    const name = JSON.stringify(key);
    const nums = (tag: number): Float64Array | undefined => {
      const e = ifd.entries.get(tag);
      const b = values.get(tag);
      return e && b ? dir.numbers(e, b) : undefined;
    };
    const one = (tag: number, fallback?: number): number | undefined => nums(tag)?.[0] ?? fallback;
    const text = (tag: number): string | undefined => {
      const b = values.get(tag);
      return b ? dir.text(b) : undefined;
    };
    const unsupported = (what: string, fix = 'convert it with gdal_translate -of COG') =>
      new UnsupportedRasterError(`${name} uses ${what}, which Tessera does not read; ${fix}`);

    const width = one(Tag.ImageWidth);
    const height = one(Tag.ImageLength);
    if (width === undefined || height === undefined)
      throw new NotARasterError(`${name} is not a raster TIFF: it has no ImageWidth/ImageLength`);
    for (const [label, v] of [
      ['width', width],
      ['height', height],
    ] as const) {
      if (!Number.isInteger(v) || v <= 0) throw new NotARasterError(`${name} is not a valid raster: its ${label} is ${v}`);
      if (v > MAX_RASTER_SIDE)
        throw new InvalidGridError(`${name} is ${width}x${height} pixels, more than the ${MAX_RASTER_SIDE} px a side Tessera accepts`);
    }
    const spp = one(Tag.SamplesPerPixel, 1) as number;
    if (!Number.isInteger(spp) || spp < 1 || spp > 65535)
      throw new NotARasterError(`${name} is not a valid raster: SamplesPerPixel is ${spp}`);

    const bitsAll = nums(Tag.BitsPerSample) ?? new Float64Array([1]);
    const formatAll = nums(Tag.SampleFormat) ?? new Float64Array([1]);
    const bits = bitsAll[0] as number;
    const format = formatAll[0] as number;
    if (bitsAll.some((b) => b !== bits)) throw unsupported(`bands of different bit depths (${Array.from(bitsAll).join(', ')})`);
    if (formatAll.some((f) => f !== format)) throw unsupported('bands of different sample formats');
    const photometric = one(Tag.PhotometricInterpretation);
    // A bilevel mask (GDAL writes its internal masks at 1 bit) is read as uint8 0 / 255; int8 is read as int16.
    const bilevelMask = base?.isMask === true && bits === 1 && spp === 1;
    const int8 = format === 2 && bits === 8;
    const dataType = bilevelMask ? 'uint8' : int8 ? 'int16' : dataTypeOf(format, bits);
    if (!dataType) {
      const kind = (
        { 1: 'unsigned integer', 2: 'signed integer', 3: 'floating-point', 5: 'complex integer', 6: 'complex floating-point' } as const
      )[format as 1];
      throw unsupported(
        `${bits}-bit ${kind ?? `sample format ${format}`} samples`,
        'Tessera reads uint8, int8, uint16, int16, uint32, int32, float32 and float64',
      );
    }

    const compression = one(Tag.Compression, Compression.NONE) as number;
    if (!SUPPORTED_COMPRESSIONS.has(compression)) {
      throw unsupported(
        `${COMPRESSION_NAMES[compression] ?? `unknown (${compression})`} compression`,
        'Tessera reads uncompressed, DEFLATE, ZSTD, LZW, PACKBITS and JPEG: recompress it (gdal_translate -co COMPRESS=DEFLATE)',
      );
    }
    const predictor = one(Tag.Predictor, Predictor.NONE) as number;
    const isFloat = dataType === 'float32' || dataType === 'float64';
    if (predictor === Predictor.HORIZONTAL && isFloat) throw unsupported('the horizontal predictor on floating-point samples');
    if (predictor === Predictor.FLOATING_POINT && !isFloat) throw unsupported('the floating-point predictor on integer samples');
    if (predictor !== Predictor.NONE && predictor !== Predictor.HORIZONTAL && predictor !== Predictor.FLOATING_POINT) {
      throw unsupported(`predictor ${predictor}`);
    }
    const planarConfig = one(Tag.PlanarConfiguration, PlanarConfiguration.CHUNKY) as number;
    if (planarConfig !== PlanarConfiguration.CHUNKY && planarConfig !== PlanarConfiguration.PLANAR) {
      throw new NotARasterError(`${name} is not a valid TIFF: PlanarConfiguration is ${planarConfig}`);
    }
    const planar = planarConfig === PlanarConfiguration.PLANAR && spp > 1;
    const jpeg = compression === Compression.JPEG;
    // YCbCr outside JPEG is subsampled raw data; inside JPEG the codec carries the subsampling and converts it back.
    const ycbcr = photometric === Photometric.YCBCR;
    if (ycbcr && !(jpeg && spp === 3 && !planar)) {
      throw unsupported('YCbCr photometric interpretation outside a three-band pixel-interleaved JPEG (subsampled colour)');
    }
    if (jpeg) {
      if (dataType !== 'uint8' || int8)
        throw unsupported(`JPEG compression of ${int8 ? 'int8' : dataType} samples`, 'Tessera reads 8-bit JPEG only');
      if (!planar && spp !== 1 && spp !== 3) {
        throw unsupported(
          `JPEG blocks of ${spp} interleaved bands`,
          'Tessera reads grey, RGB and YCbCr JPEG blocks: rewrite it band-interleaved (gdal_translate -co INTERLEAVE=BAND) or with three bands',
        );
      }
    }

    const tileOffsets = nums(Tag.TileOffsets);
    const tiled = tileOffsets !== undefined;
    let blockWidth: number;
    let blockHeight: number;
    let offsets: Float64Array;
    let byteCounts: Float64Array | undefined;
    if (tiled) {
      blockWidth = one(Tag.TileWidth) ?? 0;
      blockHeight = one(Tag.TileLength) ?? 0;
      offsets = tileOffsets;
      byteCounts = nums(Tag.TileByteCounts);
      if (blockWidth <= 0 || blockHeight <= 0 || !Number.isInteger(blockWidth) || !Number.isInteger(blockHeight)) {
        throw new NotARasterError(`${name} is not a valid tiled TIFF: its tile size is ${blockWidth}x${blockHeight}`);
      }
    } else {
      const stripOffsets = nums(Tag.StripOffsets);
      if (!stripOffsets) throw new NotARasterError(`${name} is not a raster TIFF: it has neither TileOffsets nor StripOffsets`);
      offsets = stripOffsets;
      byteCounts = nums(Tag.StripByteCounts);
      blockWidth = width;
      const rps = one(Tag.RowsPerStrip, 2 ** 32 - 1) as number;
      if (rps <= 0) throw new NotARasterError(`${name} is not a valid TIFF: RowsPerStrip is ${rps}`);
      blockHeight = Math.min(rps, height);
    }
    if (!byteCounts) throw new NotARasterError(`${name} is not a valid TIFF: it has block offsets but no byte counts`);
    const across = Math.ceil(width / blockWidth);
    const down = Math.ceil(height / blockHeight);
    const planes = planar ? spp : 1;
    const expectedBlocks = across * down * planes;
    if (offsets.length < expectedBlocks || byteCounts.length < expectedBlocks) {
      throw new NotARasterError(
        `${name} is a corrupt TIFF: ${width}x${height} in ${blockWidth}x${blockHeight} blocks needs ${expectedBlocks} blocks ` +
          `but it lists ${Math.min(offsets.length, byteCounts.length)}`,
      );
    }
    const rowBytes = Math.ceil((blockWidth * (planar ? 1 : spp) * bits) / 8);
    const blockBytes = rowBytes * blockHeight;
    let sliceRows = blockHeight;
    if (compression === Compression.NONE) {
      sliceRows = Math.max(1, Math.min(blockHeight, Math.floor(UNCOMPRESSED_SLICE_BYTES / rowBytes)));
    } else if (blockBytes > opts.maxBlockBytes) {
      throw unsupported(
        `compressed ${tiled ? 'tiles' : 'strips'} of ${blockWidth}x${blockHeight} pixels (${Math.round(blockBytes / 2 ** 20)} MiB each decoded), too large to read by window`,
        'rewrite it tiled (gdal_translate -co TILED=YES -co BLOCKXSIZE=512 -co BLOCKYSIZE=512)',
      );
    }
    if (dir.reader.knownSize !== undefined) {
      const size = dir.reader.knownSize;
      for (let i = 0; i < expectedBlocks; i++) {
        const end = (offsets[i] as number) + (byteCounts[i] as number);
        if (end > size) throw dir.reader.truncated(`block ${i}`, end, size);
      }
    }

    const layout: Layout = {
      samplesPerPixel: spp,
      planar,
      compression,
      predictor,
      storedBits: bits,
      storedRowBytes: rowBytes,
      int8,
      jpegTables: jpeg ? values.get(Tag.JPEGTables) : undefined,
      ycbcr,
      subsampling: [nums(Tag.YCbCrSubSampling)?.[0] ?? 2, nums(Tag.YCbCrSubSampling)?.[1] ?? 2],
      blockWidth,
      blockHeight,
      across,
      down,
      sliceRows,
      slicesPerBlock: Math.ceil(blockHeight / sliceRows),
      offsets,
      byteCounts,
    };
    const cacheOpts = { blockCacheBytes: opts.blockCacheBytes, maxBlockBytes: opts.maxBlockBytes };
    if (base) {
      // GeoTIFF georeferences the first image only; GDAL gives an overview or mask the same footprint.
      const rx = base.width / width;
      const ry = base.height / height;
      const g = base.geoTransform;
      const gt: GeoTransform = [g[0], g[1] * rx, g[2] * ry, g[3], g[4] * rx, g[5] * ry];
      return new GeoTiffSource(
        dir.reader,
        dir.littleEndian,
        width,
        height,
        spp,
        dataType,
        base.crs,
        gt,
        base.noData,
        tiled,
        base.bandDescriptions,
        base.bandScales,
        base.bandOffsets,
        layout,
        opts.chain,
        base.isMask,
        cacheOpts,
      );
    }
    if (bits === 1) throw unsupported('1-bit samples outside a mask', 'Tessera reads 1-bit data only as a per-dataset mask');

    // Georeferencing comes last: a layout we cannot read is the more useful error.
    const geoDir = nums(Tag.GeoKeyDirectory);
    const geoAscii = text(Tag.GeoAsciiParams);
    const geoKeys = geoDir ? parseGeoKeys(geoDir, nums(Tag.GeoDoubleParams), geoAscii) : undefined;
    const crs = crsFromGeoKeys(key, geoKeys);
    const geoTransform = geoTransformFromTags(
      key,
      { transformation: nums(Tag.ModelTransformation), tiepoint: nums(Tag.ModelTiepoint), scale: nums(Tag.ModelPixelScale) },
      geoKeys?.get(GeoKey.GTRasterType),
    );
    const noDataText = text(Tag.GdalNoData);
    const noData = noDataText === undefined ? undefined : parseNoData(noDataText);
    const descriptions: (string | undefined)[] = new Array(spp).fill(undefined);
    const scales: (number | undefined)[] = new Array(spp).fill(undefined);
    const offsetsByBand: (number | undefined)[] = new Array(spp).fill(undefined);
    const md = text(Tag.GdalMetadata);
    if (md) {
      for (const item of parseGdalMetadata(md)) {
        if (item.sample === undefined || item.sample < 0 || item.sample >= spp) continue;
        if (item.name === 'DESCRIPTION' && item.role === 'description') descriptions[item.sample] = item.value;
        // GDAL writes these as <Item name="SCALE" sample="0" role="scale">; a value that is not a number is not a scale.
        const n = Number(item.value);
        if (item.role === 'scale' && item.value.trim() !== '' && Number.isFinite(n)) scales[item.sample] = n;
        if (item.role === 'offset' && item.value.trim() !== '' && Number.isFinite(n)) offsetsByBand[item.sample] = n;
      }
    }

    return new GeoTiffSource(
      dir.reader,
      dir.littleEndian,
      width,
      height,
      spp,
      dataType,
      crs,
      geoTransform,
      noData,
      tiled,
      descriptions,
      scales,
      offsetsByBand,
      layout,
      opts.chain,
      false,
      cacheOpts,
    );
  }

  async readWindow(window: RasterWindow, bands: readonly number[]): Promise<TypedArray[]> {
    const { x, y, width: w, height: h } = window;
    if (![x, y, w, h].every(Number.isInteger) || w <= 0 || h <= 0 || x < 0 || y < 0 || x + w > this.width || y + h > this.height) {
      throw new InvalidGridError(
        `window x=${x} y=${y} ${w}x${h} is not inside ${JSON.stringify(this.key)} (${this.width}x${this.height}); windows come from tileGrid, which clips them`,
      );
    }
    // A band the raster does not have is a bad parameter, never a transient failure: typed, so every
    // trigger settles the job as poison at once instead of retrying a RangeError into the dead-letter queue.
    if (bands.length === 0) throw new InvalidParamsError('params: bands must name at least one band to read');
    for (const b of bands) {
      if (!Number.isInteger(b) || b < 1 || b > this.bandCount) {
        throw new InvalidParamsError(
          `params: band ${b} does not exist in ${JSON.stringify(this.key)}, which has bands 1 to ${this.bandCount}; fix the band indexes in the processing parameters`,
        );
      }
    }
    const L = this.layout;
    const planes = L.planar ? [...new Set(bands.map((b) => b - 1))] : [0];
    const locations: BlockLocation[] = [];
    const bx0 = Math.floor(x / L.blockWidth);
    const bx1 = Math.floor((x + w - 1) / L.blockWidth);
    const by0 = Math.floor(y / L.blockHeight);
    const by1 = Math.floor((y + h - 1) / L.blockHeight);
    for (const plane of planes) {
      for (let by = by0; by <= by1; by++) {
        const top = by * L.blockHeight;
        const s0 = Math.floor((Math.max(y, top) - top) / L.sliceRows);
        const s1 = Math.floor((Math.min(y + h, top + L.blockHeight) - 1 - top) / L.sliceRows);
        for (let s = s0; s <= s1; s++) {
          for (let bx = bx0; bx <= bx1; bx++) locations.push(this.locate(plane, bx, by, s));
        }
      }
    }
    const blocks = await this.fetchBlocks(locations);

    const create = DATA_TYPES[this.dataType].create;
    const out = bands.map(() => create(w * h));
    const stride = L.planar ? 1 : L.samplesPerPixel;
    for (let i = 0; i < locations.length; i++) {
      const loc = locations[i] as BlockLocation;
      const data = blocks[i] as TypedArray;
      const cx0 = Math.max(x, loc.col0);
      const cx1 = Math.min(x + w, loc.col0 + L.blockWidth, this.width);
      const ry0 = Math.max(y, loc.row0);
      const ry1 = Math.min(y + h, loc.row0 + loc.rows);
      const n = cx1 - cx0;
      for (let j = 0; j < bands.length; j++) {
        const band = (bands[j] as number) - 1;
        if (L.planar && band !== loc.plane) continue;
        const dst = out[j] as TypedArray;
        const sample = L.planar ? 0 : band;
        for (let r = ry0; r < ry1; r++) {
          const src = (r - loc.row0) * this.rowSamples + (cx0 - loc.col0) * stride + sample;
          const d = (r - y) * w + (cx0 - x);
          if (stride === 1) {
            dst.set(data.subarray(src, src + n), d);
          } else {
            gatherSamples(dst, d, data, src, n, stride);
          }
        }
      }
    }
    return out;
  }

  private locate(plane: number, bx: number, by: number, slice: number): BlockLocation {
    const L = this.layout;
    const index = (plane * L.down + by) * L.across + bx;
    const offset = L.offsets[index] as number;
    const count = L.byteCounts[index] as number;
    const top = by * L.blockHeight;
    // Strips end at the image's last row; tiles are always full (padded).
    const storedRows = this.tiled ? L.blockHeight : Math.min(L.blockHeight, this.height - top);
    const rowBytes = L.storedRowBytes;
    const id = ((plane * L.down + by) * L.slicesPerBlock + slice) * L.across + bx;
    const sparse = offset === 0 && count === 0;
    if (L.compression !== Compression.NONE) {
      return { id, plane, col0: bx * L.blockWidth, row0: top, rows: storedRows, offset, length: count, sparse };
    }
    const first = slice * L.sliceRows;
    const rows = Math.min(L.sliceRows, storedRows - first);
    if (!sparse && count < (first + rows) * rowBytes) {
      throw new NotARasterError(
        `${JSON.stringify(this.key)} is a corrupt TIFF: uncompressed block ${index} holds ${count} bytes, fewer than its ${storedRows} rows need`,
      );
    }
    return {
      id,
      plane,
      col0: bx * L.blockWidth,
      row0: top + first,
      rows,
      offset: offset + first * rowBytes,
      length: rows * rowBytes,
      sparse,
    };
  }

  /** Decoded blocks for `locations` (same order): from the cache, from a fetch already under way, or by coalesced range reads. */
  private async fetchBlocks(locations: readonly BlockLocation[]): Promise<TypedArray[]> {
    const found: (TypedArray | Promise<TypedArray> | undefined)[] = [];
    const missing: BlockLocation[] = [];
    for (const loc of locations) {
      const cached = this.cache.get(loc.id);
      if (cached) this.counters.cacheHits++;
      const known = cached ?? this.inFlight.get(loc.id);
      if (known === undefined) missing.push(loc);
      found.push(known);
    }
    const started = this.startFetches(missing);
    return Promise.all(found.map((f, i) => f ?? (started.get((locations[i] as BlockLocation).id) as Promise<TypedArray>)));
  }

  private startFetches(locations: readonly BlockLocation[]): Map<number, Promise<TypedArray>> {
    const promises = new Map<number, Promise<TypedArray>>();
    const stored = [...locations].filter((l) => !l.sparse).sort((a, b) => a.offset - b.offset);
    for (const loc of locations) {
      if (loc.sparse) promises.set(loc.id, Promise.resolve(this.sparseBlock(loc)));
    }
    let i = 0;
    while (i < stored.length) {
      const first = stored[i] as BlockLocation;
      let end = first.offset + first.length;
      let j = i + 1;
      while (j < stored.length) {
        const next = stored[j] as BlockLocation;
        if (next.offset - end > COALESCE_GAP_BYTES || next.offset + next.length - first.offset > COALESCE_MAX_BYTES) break;
        end = Math.max(end, next.offset + next.length);
        j++;
      }
      const group = stored.slice(i, j);
      const bytes = this.readRange(first.offset, end - first.offset, group[0]?.id ?? 0);
      for (const loc of group) {
        const p = bytes
          .then(async (b) => {
            const block = await this.decode(loc, b.subarray(loc.offset - first.offset, loc.offset - first.offset + loc.length));
            this.cache.set(loc.id, block);
            return block;
          })
          .finally(() => this.inFlight.delete(loc.id));
        this.inFlight.set(loc.id, p);
        promises.set(loc.id, p);
      }
      i = j;
    }
    return promises;
  }

  private async readRange(offset: number, length: number, blockId: number): Promise<Uint8Array> {
    const inHead = offset + length <= this.reader.head.byteLength;
    const bytes = await this.reader.read(offset, length, `block ${blockId}`);
    if (!inHead) {
      this.counters.rangeReads++;
      this.counters.bytesRead += length;
    }
    return bytes;
  }

  private sparseBlock(loc: BlockLocation): TypedArray {
    const block = DATA_TYPES[this.dataType].create(loc.rows * this.rowSamples);
    // GDAL reads an absent (sparse) block as nodata, or 0 without one.
    if (this.noData !== undefined && this.noData !== 0) block.fill(this.noData);
    return block;
  }

  /** Decodes one block; DEFLATE and ZSTD run on libuv's thread pool so concurrent readers use every core. */
  private async decode(loc: BlockLocation, stored: Uint8Array): Promise<TypedArray> {
    const L = this.layout;
    const bps = this.bytesPerSample;
    const samples = loc.rows * this.rowSamples;
    const expected = loc.rows * L.storedRowBytes;
    let raw: Uint8Array;
    try {
      switch (L.compression) {
        case Compression.NONE:
          raw = new Uint8Array(stored); // a copy that owns its bytes: the coalesced read buffer may be large
          break;
        case Compression.ADOBE_DEFLATE:
        case Compression.DEFLATE:
          raw = await inflateAsync(stored, expected);
          break;
        case Compression.ZSTD:
          raw = await zstdDecompressAsync(stored, expected);
          break;
        case Compression.LZW:
          raw = lzwDecode(stored, expected);
          break;
        case Compression.PACKBITS:
          raw = packBitsDecode(stored, expected);
          break;
        case Compression.JPEG:
          raw = jpegDecode(stored, L.jpegTables, {
            components: L.planar || L.samplesPerPixel === 1 ? 1 : 3,
            ycbcr: L.ycbcr,
            subsampling: L.subsampling,
            width: L.blockWidth,
            rows: loc.rows,
          });
          break;
        default:
          throw new UnsupportedRasterError(`compression ${L.compression}`);
      }
    } catch (cause) {
      throw new NotARasterError(`${JSON.stringify(this.key)}: block ${loc.id} is corrupt and cannot be decompressed`, { cause });
    }
    if (raw.byteLength < expected) {
      throw new NotARasterError(
        `${JSON.stringify(this.key)}: block ${loc.id} decodes to ${raw.byteLength} bytes, not the ${expected} its size needs`,
      );
    }
    this.counters.blocksDecoded++;
    if (L.storedBits === 1) return unpackBits(raw, loc.rows, this.rowSamples, L.storedRowBytes);
    const stride = L.planar ? 1 : L.samplesPerPixel;
    if (L.predictor === Predictor.FLOATING_POINT) {
      raw = undoFloatingPointPredictor(raw, loc.rows, this.rowSamples, bps, stride, !this.littleEndian);
    } else {
      // A typed view needs an aligned, exactly-sized buffer of its own. Copied by the constructor: a
      // Node Buffer's slice() is a view of the same (possibly misaligned) memory, not a copy.
      if (raw.byteOffset % bps !== 0 || raw.buffer.byteLength > expected * 2) raw = new Uint8Array(raw.subarray(0, expected));
      if (!this.littleEndian && bps > 1) swapBytes(raw.subarray(0, expected), bps);
    }
    if (L.int8) {
      // The predictor's sums wrap at 8 bits, so undo it before widening (on bytes: the same bits as on int8).
      if (L.predictor === Predictor.HORIZONTAL) undoHorizontalPredictor(raw, loc.rows, this.rowSamples, stride);
      return widenInt8(raw, samples);
    }
    const block = DATA_TYPES[this.dataType].view(raw.buffer, raw.byteOffset, samples);
    if (L.predictor === Predictor.HORIZONTAL) undoHorizontalPredictor(block, loc.rows, this.rowSamples, stride);
    return block;
  }
}

/**
 * One band of pixel-interleaved samples: `n` samples `stride` apart from `src`
 * into `dst` at `d`. One loop per common element type, each its own function
 * (see undoHorizontalPredictor in codecs.ts): a loop that has seen several
 * typed-array types is megamorphic, tens of times slower per sample.
 */
function gatherSamples(dst: TypedArray, d: number, src: TypedArray, s: number, n: number, stride: number): void {
  if (dst instanceof Uint16Array && src instanceof Uint16Array) gatherU16(dst, d, src, s, n, stride);
  else if (dst instanceof Uint8Array && src instanceof Uint8Array) gatherU8(dst, d, src, s, n, stride);
  else if (dst instanceof Int16Array && src instanceof Int16Array) gatherI16(dst, d, src, s, n, stride);
  else if (dst instanceof Float32Array && src instanceof Float32Array) gatherF32(dst, d, src, s, n, stride);
  else for (let k = 0; k < n; k++) dst[d + k] = src[s + k * stride] as number;
}

function gatherU16(dst: Uint16Array, d: number, src: Uint16Array, s: number, n: number, stride: number): void {
  for (let k = 0; k < n; k++) dst[d + k] = src[s + k * stride] as number;
}

function gatherU8(dst: Uint8Array, d: number, src: Uint8Array, s: number, n: number, stride: number): void {
  for (let k = 0; k < n; k++) dst[d + k] = src[s + k * stride] as number;
}

function gatherI16(dst: Int16Array, d: number, src: Int16Array, s: number, n: number, stride: number): void {
  for (let k = 0; k < n; k++) dst[d + k] = src[s + k * stride] as number;
}

function gatherF32(dst: Float32Array, d: number, src: Float32Array, s: number, n: number, stride: number): void {
  for (let k = 0; k < n; k++) dst[d + k] = src[s + k * stride] as number;
}
