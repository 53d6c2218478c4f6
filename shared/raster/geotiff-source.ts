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
import { parseGdalMetadata } from './gdal-metadata.js';
import { crsFromGeoKeys, type GeoTransform, geoTransformFromTags, parseGeoKeys, type RasterCrs } from './georeferencing.js';
import { type Ifd, RangeReader, TiffDirectoryReader } from './tiff-directory.js';
import {
  COMPRESSION_NAMES,
  Compression,
  DATA_TYPES,
  dataTypeOf,
  GeoKey,
  PlanarConfiguration,
  Predictor,
  parseNoData,
  type RasterDataType,
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
   * The pixels of `window` for each of `bands` (1-based), row-major, in the
   * raster's own data type. The window must lie inside the raster.
   */
  readWindow(window: RasterWindow, bands: readonly number[]): Promise<TypedArray[]>;
  stats(): RasterReadStats;
}

export interface OpenGeoTiffOptions {
  /** Bytes read by the first range request; IFDs beyond it cost more requests. Default 64 KiB. */
  readonly maxHeaderBytes?: number | undefined;
  /** Capacity of the decoded-block cache in bytes. Default 16 MiB: sixteen 512 x 512 x 2-band uint16 blocks. */
  readonly blockCacheBytes?: number | undefined;
  /** Largest decoded block accepted (a whole-image compressed strip would exceed it). Default 64 MiB. */
  readonly maxBlockBytes?: number | undefined;
  /** Read exactly this version of the object (header and every block), or throw SourceChangedError. */
  readonly pin?: ReadPin | undefined;
}

const DEFAULT_HEADER_BYTES = 64 * 1024;
const DEFAULT_CACHE_BYTES = 16 * 1024 * 1024;
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
]);

const HEADER_TAGS = [
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
 * Supported: uint8/uint16/int16/uint32/int32/float32/float64 samples; no
 * compression, DEFLATE, ZSTD, LZW or PackBits, with or without predictor 2 or 3;
 * pixel-interleaved or band-planar. Errors: NotARasterError (not a TIFF,
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
    blockCacheBytes: opts.blockCacheBytes ?? DEFAULT_CACHE_BYTES,
    maxBlockBytes: opts.maxBlockBytes ?? DEFAULT_MAX_BLOCK_BYTES,
  });
}

function positive(name: string, v: number): number {
  if (!Number.isInteger(v) || v < 16) throw new RangeError(`${name} must be an integer of at least 16, got ${v}`);
  return v;
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
    private readonly layout: Layout,
    cacheBytes: number,
  ) {
    this.littleEndian = littleEndian;
    this.cache = new BlockCache(cacheBytes);
    this.bytesPerSample = DATA_TYPES[dataType].bytes;
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

  static create(
    dir: TiffDirectoryReader,
    ifd: Ifd,
    values: Map<number, Uint8Array>,
    opts: { blockCacheBytes: number; maxBlockBytes: number },
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
    const dataType = dataTypeOf(format, bits);
    if (!dataType) {
      const kind = (
        { 1: 'unsigned integer', 2: 'signed integer', 3: 'floating-point', 5: 'complex integer', 6: 'complex floating-point' } as const
      )[format as 1];
      throw unsupported(
        `${bits}-bit ${kind ?? `sample format ${format}`} samples`,
        'Tessera reads uint8, uint16, int16, uint32, int32, float32 and float64',
      );
    }

    const compression = one(Tag.Compression, Compression.NONE) as number;
    if (!SUPPORTED_COMPRESSIONS.has(compression)) {
      throw unsupported(
        `${COMPRESSION_NAMES[compression] ?? `unknown (${compression})`} compression`,
        'Tessera reads uncompressed, DEFLATE, ZSTD, LZW and PACKBITS: recompress it (gdal_translate -co COMPRESS=DEFLATE)',
      );
    }
    const predictor = one(Tag.Predictor, Predictor.NONE) as number;
    const isFloat = dataType === 'float32' || dataType === 'float64';
    if (predictor === Predictor.HORIZONTAL && isFloat) throw unsupported('the horizontal predictor on floating-point samples');
    if (predictor === Predictor.FLOATING_POINT && !isFloat) throw unsupported('the floating-point predictor on integer samples');
    if (predictor !== Predictor.NONE && predictor !== Predictor.HORIZONTAL && predictor !== Predictor.FLOATING_POINT) {
      throw unsupported(`predictor ${predictor}`);
    }
    const photometric = one(Tag.PhotometricInterpretation);
    if (photometric === 6) throw unsupported('YCbCr photometric interpretation (subsampled colour)');
    const planarConfig = one(Tag.PlanarConfiguration, PlanarConfiguration.CHUNKY) as number;
    if (planarConfig !== PlanarConfiguration.CHUNKY && planarConfig !== PlanarConfiguration.PLANAR) {
      throw new NotARasterError(`${name} is not a valid TIFF: PlanarConfiguration is ${planarConfig}`);
    }
    const planar = planarConfig === PlanarConfiguration.PLANAR && spp > 1;

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
    const bytesPerSample = DATA_TYPES[dataType].bytes;
    const rowBytes = blockWidth * (planar ? 1 : spp) * bytesPerSample;
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
    const md = text(Tag.GdalMetadata);
    if (md) {
      for (const item of parseGdalMetadata(md)) {
        if (item.name === 'DESCRIPTION' && item.role === 'description' && item.sample !== undefined && item.sample < spp) {
          descriptions[item.sample] = item.value;
        }
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
      {
        samplesPerPixel: spp,
        planar,
        compression,
        predictor,
        blockWidth,
        blockHeight,
        across,
        down,
        sliceRows,
        slicesPerBlock: Math.ceil(blockHeight / sliceRows),
        offsets,
        byteCounts,
      },
      opts.blockCacheBytes,
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
            for (let k = 0; k < n; k++) dst[d + k] = data[src + k * stride] as number;
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
    const rowBytes = this.rowSamples * this.bytesPerSample;
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

  /** Decodes one block; DEFLATE runs on libuv's thread pool so concurrent readers use every core. */
  private async decode(loc: BlockLocation, stored: Uint8Array): Promise<TypedArray> {
    const L = this.layout;
    const bps = this.bytesPerSample;
    const samples = loc.rows * this.rowSamples;
    const expected = samples * bps;
    let raw: Uint8Array;
    try {
      switch (L.compression) {
        case Compression.NONE:
          raw = stored.slice(); // own the bytes: the coalesced read buffer may be large
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
    const stride = L.planar ? 1 : L.samplesPerPixel;
    if (L.predictor === Predictor.FLOATING_POINT) {
      raw = undoFloatingPointPredictor(raw, loc.rows, this.rowSamples, bps, stride, !this.littleEndian);
    } else {
      // A typed view needs an aligned, exactly-sized buffer of its own.
      if (raw.byteOffset % bps !== 0 || raw.buffer.byteLength > expected * 2) raw = raw.slice(0, expected);
      if (!this.littleEndian && bps > 1) swapBytes(raw.subarray(0, expected), bps);
    }
    const block = DATA_TYPES[this.dataType].view(raw.buffer, raw.byteOffset, samples);
    if (L.predictor === Predictor.HORIZONTAL) undoHorizontalPredictor(block, loc.rows, this.rowSamples, stride);
    this.counters.blocksDecoded++;
    return block;
  }
}
