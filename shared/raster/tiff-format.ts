/**
 * TIFF / GeoTIFF constants shared by the reader and the writers.
 *
 * References: TIFF 6.0 (Adobe, 1992), BigTIFF (libtiff), OGC GeoTIFF 1.1,
 * and GDAL's private tags (GDAL_METADATA 42112, GDAL_NODATA 42113).
 */

/** Tag numbers Tessera reads or writes. */
export const Tag = {
  NewSubfileType: 254,
  ImageWidth: 256,
  ImageLength: 257,
  BitsPerSample: 258,
  Compression: 259,
  PhotometricInterpretation: 262,
  StripOffsets: 273,
  SamplesPerPixel: 277,
  RowsPerStrip: 278,
  StripByteCounts: 279,
  PlanarConfiguration: 284,
  Predictor: 317,
  /** Quantisation and Huffman tables shared by every JPEG block (TIFF Technical Note 2). */
  JPEGTables: 347,
  YCbCrSubSampling: 530,
  TileWidth: 322,
  TileLength: 323,
  TileOffsets: 324,
  TileByteCounts: 325,
  ExtraSamples: 338,
  SampleFormat: 339,
  ModelPixelScale: 33550,
  ModelTiepoint: 33922,
  ModelTransformation: 34264,
  GeoKeyDirectory: 34735,
  GeoDoubleParams: 34736,
  GeoAsciiParams: 34737,
  GdalMetadata: 42112,
  GdalNoData: 42113,
} as const;

/** TIFF field types (TIFF 6.0 section 2, plus the BigTIFF 64-bit types). */
export const FieldType = {
  BYTE: 1,
  ASCII: 2,
  SHORT: 3,
  LONG: 4,
  RATIONAL: 5,
  SBYTE: 6,
  UNDEFINED: 7,
  SSHORT: 8,
  SLONG: 9,
  SRATIONAL: 10,
  FLOAT: 11,
  DOUBLE: 12,
  IFD: 13,
  LONG8: 16,
  SLONG8: 17,
  IFD8: 18,
} as const;
export type FieldType = (typeof FieldType)[keyof typeof FieldType];

/** Bytes per value of each field type; a type missing here is unknown and its entry is ignored, as TIFF 6.0 asks. */
export const FIELD_TYPE_SIZE: Readonly<Record<number, number>> = {
  1: 1,
  2: 1,
  3: 2,
  4: 4,
  5: 8,
  6: 1,
  7: 1,
  8: 2,
  9: 4,
  10: 8,
  11: 4,
  12: 8,
  13: 4,
  16: 8,
  17: 8,
  18: 8,
};

export const Compression = {
  NONE: 1,
  LZW: 5,
  JPEG_OLD: 6,
  JPEG: 7,
  ADOBE_DEFLATE: 8,
  PACKBITS: 32773,
  DEFLATE: 32946,
  LERC: 34887,
  LZMA: 34925,
  ZSTD: 50000,
  WEBP: 50001,
  JXL: 50002,
} as const;

/** Names for the compressions a reader may meet, so an unsupported one is named in the error. */
export const COMPRESSION_NAMES: Readonly<Record<number, string>> = {
  1: 'NONE',
  2: 'CCITT RLE',
  3: 'CCITT Group 3',
  4: 'CCITT Group 4',
  5: 'LZW',
  6: 'old-style JPEG',
  7: 'JPEG',
  8: 'DEFLATE',
  32773: 'PACKBITS',
  32946: 'DEFLATE (old code)',
  34712: 'JPEG2000',
  34887: 'LERC',
  34925: 'LZMA',
  50000: 'ZSTD',
  50001: 'WEBP',
  50002: 'JPEGXL',
};

export const Predictor = { NONE: 1, HORIZONTAL: 2, FLOATING_POINT: 3 } as const;
export const SampleFormat = { UINT: 1, INT: 2, IEEEFP: 3, VOID: 4 } as const;
export const PlanarConfiguration = { CHUNKY: 1, PLANAR: 2 } as const;
export const Photometric = { MIN_IS_BLACK: 1, RGB: 2, MASK: 4, YCBCR: 6 } as const;
/** NewSubfileType bits: a reduced-resolution image (an overview) and a transparency mask. */
export const SubfileType = { REDUCED: 1, MASK: 4 } as const;

/** GeoKey ids (OGC GeoTIFF 1.1, Annex). */
export const GeoKey = {
  GTModelType: 1024,
  GTRasterType: 1025,
  GTCitation: 1026,
  GeographicType: 2048,
  GeogCitation: 2049,
  ProjectedCSType: 3072,
  PCSCitation: 3073,
  ProjLinearUnits: 3076,
} as const;

export const ModelType = { PROJECTED: 1, GEOGRAPHIC: 2, GEOCENTRIC: 3 } as const;
export const RasterType = { PIXEL_IS_AREA: 1, PIXEL_IS_POINT: 2 } as const;
/** GeoTIFF's "user-defined" code: the CRS is described by other keys, not by an EPSG code. */
export const USER_DEFINED = 32767;

/** The sample types Tessera reads and writes. */
export type RasterDataType = 'uint8' | 'uint16' | 'int16' | 'uint32' | 'int32' | 'float32' | 'float64';

export type TypedArray = Uint8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array | Float64Array;

interface DataTypeInfo {
  readonly bits: number;
  readonly sampleFormat: number;
  readonly bytes: number;
  readonly create: (length: number) => TypedArray;
  readonly view: (buffer: ArrayBufferLike, byteOffset: number, length: number) => TypedArray;
  /** GDAL's name, for VRTs. */
  readonly gdalName: string;
}

export const DATA_TYPES: Readonly<Record<RasterDataType, DataTypeInfo>> = {
  uint8: {
    bits: 8,
    sampleFormat: 1,
    bytes: 1,
    create: (n) => new Uint8Array(n),
    view: (b, o, n) => new Uint8Array(b, o, n),
    gdalName: 'Byte',
  },
  uint16: {
    bits: 16,
    sampleFormat: 1,
    bytes: 2,
    create: (n) => new Uint16Array(n),
    view: (b, o, n) => new Uint16Array(b, o, n),
    gdalName: 'UInt16',
  },
  int16: {
    bits: 16,
    sampleFormat: 2,
    bytes: 2,
    create: (n) => new Int16Array(n),
    view: (b, o, n) => new Int16Array(b, o, n),
    gdalName: 'Int16',
  },
  uint32: {
    bits: 32,
    sampleFormat: 1,
    bytes: 4,
    create: (n) => new Uint32Array(n),
    view: (b, o, n) => new Uint32Array(b, o, n),
    gdalName: 'UInt32',
  },
  int32: {
    bits: 32,
    sampleFormat: 2,
    bytes: 4,
    create: (n) => new Int32Array(n),
    view: (b, o, n) => new Int32Array(b, o, n),
    gdalName: 'Int32',
  },
  float32: {
    bits: 32,
    sampleFormat: 3,
    bytes: 4,
    create: (n) => new Float32Array(n),
    view: (b, o, n) => new Float32Array(b, o, n),
    gdalName: 'Float32',
  },
  float64: {
    bits: 64,
    sampleFormat: 3,
    bytes: 8,
    create: (n) => new Float64Array(n),
    view: (b, o, n) => new Float64Array(b, o, n),
    gdalName: 'Float64',
  },
};

/** The data type for a (SampleFormat, BitsPerSample) pair, or undefined when Tessera does not read it. */
export function dataTypeOf(sampleFormat: number, bits: number): RasterDataType | undefined {
  // SampleFormat 4 ("undefined data format") is read as unsigned, as libtiff does.
  const format = sampleFormat === SampleFormat.VOID ? SampleFormat.UINT : sampleFormat;
  for (const [name, info] of Object.entries(DATA_TYPES) as [RasterDataType, DataTypeInfo][]) {
    if (info.sampleFormat === format && info.bits === bits) return name;
  }
  return undefined;
}

/** `-9999`, `nan`, `inf`: how GDAL writes a nodata value in GDAL_NODATA and in VRTs. */
export function formatNoData(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  if (value === Number.POSITIVE_INFINITY) return 'inf';
  if (value === Number.NEGATIVE_INFINITY) return '-inf';
  return String(value);
}

/** Parses GDAL_NODATA text (`-9999`, `nan`, `-inf`, `1e+20`); undefined when it is not a number. */
export function parseNoData(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  if (t === 'nan' || t === '-nan') return Number.NaN;
  if (t === 'inf' || t === '+inf' || t === 'infinity') return Number.POSITIVE_INFINITY;
  if (t === '-inf' || t === '-infinity') return Number.NEGATIVE_INFINITY;
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isNaN(n) ? undefined : n;
}
