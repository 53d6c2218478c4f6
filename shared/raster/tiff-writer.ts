import { InvalidParamsError, UnsupportedRasterError } from '../domain/errors.js';
import {
  applyFloatingPointPredictor,
  applyHorizontalPredictor,
  deflate,
  deflateAsync,
  ZSTD_MAX_LEVEL,
  ZSTD_MIN_LEVEL,
  zstdCompress,
} from './codecs.js';
import { type GeoTransform, geoKeyTagsOf, geoTransformTags, type RasterCrs } from './georeferencing.js';
import {
  Compression,
  DATA_TYPES,
  FieldType,
  formatNoData,
  PlanarConfiguration,
  Predictor,
  type RasterDataType,
  Tag,
  type TypedArray,
} from './tiff-format.js';

/**
 * The little-endian classic-TIFF writing core shared by the COG writer, the
 * in-memory GeoTIFF writer and the streaming synthetic-scene writer: one
 * description of a tiled image, the encoding of one tile, and the layout of
 * IFDs ahead of the data (offsets are fixed-size LONGs, so the header size is
 * known before any tile is compressed).
 */

/** How a tile's bytes are stored: TIFF compression 1, 8 (zlib-wrapped DEFLATE) or 50000 (one ZSTD frame per block). */
export type BlockCompression = 'NONE' | 'DEFLATE' | 'ZSTD';

/** The levels each codec accepts, as GDAL's GTiff driver does (ZLEVEL, ZSTD_LEVEL), and its default there. */
export const COMPRESSION_LEVELS: Readonly<Record<Exclude<BlockCompression, 'NONE'>, { min: number; max: number; gdalDefault: number }>> = {
  DEFLATE: { min: 1, max: 9, gdalDefault: 6 },
  ZSTD: { min: ZSTD_MIN_LEVEL, max: ZSTD_MAX_LEVEL, gdalDefault: 9 },
};

const TIFF_COMPRESSION: Readonly<Record<BlockCompression, number>> = {
  NONE: Compression.NONE,
  DEFLATE: Compression.ADOBE_DEFLATE,
  ZSTD: Compression.ZSTD,
};

/** One tag to write; strings are written as NUL-terminated ASCII (UTF-8 bytes). */
export interface TagSpec {
  readonly tag: number;
  readonly type: FieldType;
  readonly values: ArrayLike<number> | string;
}

/** A tiled image as written: everything but the tile data. */
export interface TiledImageSpec {
  readonly width: number;
  readonly height: number;
  readonly blockSize: number;
  readonly dataType: RasterDataType;
  readonly samplesPerPixel: number;
  /** true: one tile set per band (PlanarConfiguration 2); false: pixel-interleaved (1). */
  readonly planar: boolean;
  readonly compression: BlockCompression;
  readonly predictor: 1 | 2 | 3;
  /** The codec's level: zlib's 1-9 for DEFLATE (GDAL's ZLEVEL, default 6), 1-22 for ZSTD (GDAL's ZSTD_LEVEL); unused for NONE. */
  readonly level: number;
  /** 1 marks a reduced-resolution image (an overview). */
  readonly subfileType?: 0 | 1 | undefined;
  readonly georeference?: { readonly geoTransform: GeoTransform; readonly crs: RasterCrs } | undefined;
  readonly noData?: number | undefined;
  /** GDAL_METADATA XML (tag 42112), e.g. band descriptions. */
  readonly gdalMetadata?: string | undefined;
}

/** The largest classic-TIFF offset; BigTIFF writing is not needed by Tessera's outputs or synthetic scenes. */
const MAX_CLASSIC_OFFSET = 2 ** 32 - 1;

export function tilesAcross(spec: TiledImageSpec): number {
  return Math.ceil(spec.width / spec.blockSize);
}

export function tilesDown(spec: TiledImageSpec): number {
  return Math.ceil(spec.height / spec.blockSize);
}

/** Tiles in the image: across x down, per band when planar. */
export function tileCount(spec: TiledImageSpec): number {
  return tilesAcross(spec) * tilesDown(spec) * (spec.planar ? spec.samplesPerPixel : 1);
}

/** Samples in one tile's buffer (tiles are always full size; edges are padded). */
export function tileSamples(spec: TiledImageSpec): number {
  return spec.blockSize * spec.blockSize * (spec.planar ? 1 : spec.samplesPerPixel);
}

/** Checks a spec before anything is written; throws InvalidParamsError naming the bad field. */
export function validateImageSpec(spec: TiledImageSpec): void {
  const fail = (why: string): never => {
    throw new InvalidParamsError(`cannot write GeoTIFF: ${why}`);
  };
  for (const [name, v] of [
    ['width', spec.width],
    ['height', spec.height],
    ['samplesPerPixel', spec.samplesPerPixel],
  ] as const) {
    if (!Number.isInteger(v) || v <= 0) fail(`${name} must be a positive integer, got ${v}`);
  }
  if (spec.width > 2 ** 31 || spec.height > 2 ** 31) fail(`${spec.width}x${spec.height} is too large`);
  // TIFF 6.0: tile width and length must be multiples of 16.
  if (!Number.isInteger(spec.blockSize) || spec.blockSize < 16 || spec.blockSize > 8192 || spec.blockSize % 16 !== 0) {
    fail(`blockSize must be a multiple of 16 from 16 to 8192, got ${spec.blockSize}`);
  }
  if (spec.compression !== 'NONE') {
    const range = COMPRESSION_LEVELS[spec.compression];
    if (range === undefined) fail(`compression ${JSON.stringify(spec.compression)} is not written; use NONE, DEFLATE or ZSTD`);
    // DEFLATE 0 would be "stored" blocks: no compression under a compression tag. NONE says that honestly.
    if (!Number.isInteger(spec.level) || spec.level < range.min || spec.level > range.max)
      fail(`${spec.compression} level must be an integer from ${range.min} to ${range.max}, got ${spec.level}`);
  }
  const isFloat = spec.dataType === 'float32' || spec.dataType === 'float64';
  if (spec.predictor === Predictor.HORIZONTAL && isFloat) fail('predictor 2 is for integer samples; use 3 for floating point');
  if (spec.predictor === Predictor.FLOATING_POINT && !isFloat) fail('predictor 3 is for floating-point samples; use 2 for integers');
  if (spec.predictor !== Predictor.NONE && spec.compression === 'NONE') fail('a predictor needs compression');
}

/**
 * Applies the spec's predictor to one tile's samples (host order,
 * `tileSamples(spec)` long) and returns the bytes to compress or store: always
 * a buffer of its own, so the caller may reuse `samples` at once. With the
 * floating-point predictor the bytes go to `into` when given (a scratch buffer
 * the caller reuses for the next tile once these bytes are compressed: the COG
 * writer's, which allocates one per encode instead of one per block).
 */
export function predictTile(spec: TiledImageSpec, samples: TypedArray, into?: Uint8Array): Uint8Array {
  const bps = DATA_TYPES[spec.dataType].bytes;
  const stride = spec.planar ? 1 : spec.samplesPerPixel;
  const rowSamples = spec.blockSize * stride;
  const view = new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
  if (spec.predictor === Predictor.FLOATING_POINT) return applyFloatingPointPredictor(view, spec.blockSize, rowSamples, bps, stride, into);
  if (spec.predictor === Predictor.HORIZONTAL) {
    const copy = samples.slice();
    applyHorizontalPredictor(copy, spec.blockSize, rowSamples, stride);
    return new Uint8Array(copy.buffer, copy.byteOffset, copy.byteLength);
  }
  return view.slice();
}

/** Compresses one predicted tile with the spec's codec and level (NONE returns the bytes as they are). */
export function compressTile(spec: TiledImageSpec, bytes: Uint8Array): Uint8Array {
  switch (spec.compression) {
    case 'NONE':
      return bytes;
    case 'DEFLATE':
      return deflate(bytes, spec.level);
    case 'ZSTD':
      return zstdCompress(bytes, spec.level);
    default:
      return assertNeverCompression(spec.compression);
  }
}

/**
 * {@link compressTile} with DEFLATE on libuv's thread pool: the same bytes, with the event loop
 * free meanwhile. ZSTD runs here, on the event loop: its thread-pool path gives other bytes (see zstdCompress).
 */
export async function compressTileAsync(spec: TiledImageSpec, bytes: Uint8Array): Promise<Uint8Array> {
  switch (spec.compression) {
    case 'NONE':
      return bytes;
    case 'DEFLATE':
      return deflateAsync(bytes, spec.level);
    case 'ZSTD':
      return zstdCompress(bytes, spec.level);
    default:
      return assertNeverCompression(spec.compression);
  }
}

function assertNeverCompression(c: never): never {
  throw new InvalidParamsError(`cannot write GeoTIFF: compression ${JSON.stringify(c)} is not written; use NONE, DEFLATE or ZSTD`);
}

/** Encodes one tile: predictor, then the spec's compression. The input is not modified. */
export function encodeTile(spec: TiledImageSpec, samples: TypedArray): Uint8Array {
  return compressTile(spec, predictTile(spec, samples));
}

/** The IFD tags of a tiled image, given its tile offsets and byte counts. */
export function imageTags(spec: TiledImageSpec, offsets: ArrayLike<number>, byteCounts: ArrayLike<number>): TagSpec[] {
  const info = DATA_TYPES[spec.dataType];
  const spp = spec.samplesPerPixel;
  const dim = (v: number) => (v <= 0xffff ? FieldType.SHORT : FieldType.LONG);
  const tags: TagSpec[] = [
    { tag: Tag.ImageWidth, type: dim(spec.width), values: [spec.width] },
    { tag: Tag.ImageLength, type: dim(spec.height), values: [spec.height] },
    { tag: Tag.BitsPerSample, type: FieldType.SHORT, values: new Array(spp).fill(info.bits) },
    {
      tag: Tag.Compression,
      type: FieldType.SHORT,
      values: [TIFF_COMPRESSION[spec.compression]],
    },
    { tag: Tag.PhotometricInterpretation, type: FieldType.SHORT, values: [1] }, // MinIsBlack
    { tag: Tag.SamplesPerPixel, type: FieldType.SHORT, values: [spp] },
    {
      tag: Tag.PlanarConfiguration,
      type: FieldType.SHORT,
      values: [spec.planar && spp > 1 ? PlanarConfiguration.PLANAR : PlanarConfiguration.CHUNKY],
    },
    { tag: Tag.TileWidth, type: dim(spec.blockSize), values: [spec.blockSize] },
    { tag: Tag.TileLength, type: dim(spec.blockSize), values: [spec.blockSize] },
    { tag: Tag.TileOffsets, type: FieldType.LONG, values: offsets },
    { tag: Tag.TileByteCounts, type: FieldType.LONG, values: byteCounts },
    { tag: Tag.SampleFormat, type: FieldType.SHORT, values: new Array(spp).fill(info.sampleFormat) },
  ];
  if (spec.subfileType) tags.push({ tag: Tag.NewSubfileType, type: FieldType.LONG, values: [spec.subfileType] });
  if (spec.predictor !== Predictor.NONE) tags.push({ tag: Tag.Predictor, type: FieldType.SHORT, values: [spec.predictor] });
  // MinIsBlack has one colour sample; TIFF wants the others declared as extra (0: unspecified).
  if (spp > 1) tags.push({ tag: Tag.ExtraSamples, type: FieldType.SHORT, values: new Array(spp - 1).fill(0) });
  if (spec.georeference) {
    const { scale, tiepoint, transformation } = geoTransformTags(spec.georeference.geoTransform);
    if (scale) tags.push({ tag: Tag.ModelPixelScale, type: FieldType.DOUBLE, values: scale });
    if (tiepoint) tags.push({ tag: Tag.ModelTiepoint, type: FieldType.DOUBLE, values: tiepoint });
    if (transformation) tags.push({ tag: Tag.ModelTransformation, type: FieldType.DOUBLE, values: transformation });
    // A CRS without an EPSG code is spelled out in GeoKeys, with its parameters in GeoDoubleParams and names in GeoAsciiParams.
    const geoKeys = geoKeyTagsOf(spec.georeference.crs);
    tags.push({ tag: Tag.GeoKeyDirectory, type: FieldType.SHORT, values: geoKeys.directory });
    if (geoKeys.doubles) tags.push({ tag: Tag.GeoDoubleParams, type: FieldType.DOUBLE, values: geoKeys.doubles });
    if (geoKeys.ascii !== undefined) tags.push({ tag: Tag.GeoAsciiParams, type: FieldType.ASCII, values: geoKeys.ascii });
  }
  if (spec.gdalMetadata !== undefined) tags.push({ tag: Tag.GdalMetadata, type: FieldType.ASCII, values: spec.gdalMetadata });
  if (spec.noData !== undefined) tags.push({ tag: Tag.GdalNoData, type: FieldType.ASCII, values: formatNoData(spec.noData) });
  return tags.sort((a, b) => a.tag - b.tag);
}

const TYPE_BYTES: Readonly<Partial<Record<FieldType, number>>> = {
  [FieldType.BYTE]: 1,
  [FieldType.ASCII]: 1,
  [FieldType.SHORT]: 2,
  [FieldType.LONG]: 4,
  [FieldType.DOUBLE]: 8,
};

const encoder = new TextEncoder();

function tagBytes(t: TagSpec): { count: number; size: number; ascii?: Uint8Array } {
  const unit = TYPE_BYTES[t.type];
  if (unit === undefined) throw new Error(`tiff-writer: field type ${t.type} is not written by Tessera`);
  if (typeof t.values === 'string') {
    const ascii = encoder.encode(`${t.values}\0`);
    return { count: ascii.byteLength, size: ascii.byteLength, ascii };
  }
  return { count: t.values.length, size: t.values.length * unit };
}

/** Bytes an IFD takes with its out-of-line values (each kept on a word boundary). */
export function ifdByteLength(tags: readonly TagSpec[]): number {
  let n = 2 + tags.length * 12 + 4;
  for (const t of tags) {
    const { size } = tagBytes(t);
    if (size > 4) n += size + (size % 2);
  }
  return n;
}

/** Writes one IFD at `offset` followed by its out-of-line values. Returns the end offset. */
function writeIfd(out: Uint8Array, offset: number, tags: readonly TagSpec[], nextIfd: number): number {
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  dv.setUint16(offset, tags.length, true);
  let extra = offset + 2 + tags.length * 12 + 4;
  tags.forEach((t, i) => {
    const e = offset + 2 + i * 12;
    const { count, size, ascii } = tagBytes(t);
    dv.setUint16(e, t.tag, true);
    dv.setUint16(e + 2, t.type, true);
    dv.setUint32(e + 4, count, true);
    const at = size > 4 ? extra : e + 8;
    if (size > 4) {
      dv.setUint32(e + 8, extra, true);
      extra += size + (size % 2);
    }
    if (ascii) {
      out.set(ascii, at);
      return;
    }
    const v = t.values as ArrayLike<number>;
    for (let k = 0; k < v.length; k++) {
      const x = v[k] as number;
      switch (t.type) {
        case FieldType.BYTE:
          dv.setUint8(at + k, x);
          break;
        case FieldType.SHORT:
          dv.setUint16(at + k * 2, x, true);
          break;
        case FieldType.LONG:
          if (x > MAX_CLASSIC_OFFSET)
            throw new UnsupportedRasterError(`value ${x} of tag ${t.tag} needs BigTIFF, which Tessera does not write`);
          dv.setUint32(at + k * 4, x, true);
          break;
        case FieldType.DOUBLE:
          dv.setFloat64(at + k * 8, x, true);
          break;
        default:
          throw new Error(`tiff-writer: field type ${t.type} is not written by Tessera`);
      }
    }
  });
  dv.setUint32(offset + 2 + tags.length * 12, nextIfd, true);
  return extra;
}

/** Where each IFD goes, and where the data may start, for IFDs written back to back after the header (and ghost area). */
export function layoutIfds(
  ifds: readonly (readonly TagSpec[])[],
  ghost: Uint8Array | undefined,
): { ifdOffsets: number[]; dataStart: number } {
  let at = 8 + (ghost?.byteLength ?? 0);
  at += at % 2; // IFDs start on a word boundary
  const ifdOffsets: number[] = [];
  for (const tags of ifds) {
    ifdOffsets.push(at);
    at += ifdByteLength(tags);
  }
  return { ifdOffsets, dataStart: at };
}

/** Writes the TIFF header, the ghost area and the chained IFDs into `out` (which must be at least `dataStart` long). */
export function writeHeader(out: Uint8Array, ifds: readonly (readonly TagSpec[])[], ghost: Uint8Array | undefined): void {
  const { ifdOffsets } = layoutIfds(ifds, ghost);
  const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
  out[0] = 0x49; // 'II': little-endian
  out[1] = 0x49;
  dv.setUint16(2, 42, true);
  dv.setUint32(4, ifdOffsets[0] ?? 0, true);
  if (ghost) out.set(ghost, 8);
  ifds.forEach((tags, i) => {
    writeIfd(out, ifdOffsets[i] as number, tags, ifdOffsets[i + 1] ?? 0);
  });
}

/** Throws when a file of `bytes` cannot be a classic TIFF. */
export function assertClassicSize(bytes: number): void {
  if (bytes > MAX_CLASSIC_OFFSET) {
    throw new UnsupportedRasterError(
      `a ${bytes}-byte GeoTIFF needs BigTIFF, which Tessera does not write; use larger compression or a smaller scene`,
    );
  }
}
