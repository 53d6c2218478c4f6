/**
 * Raster I/O for Tessera's core: window reads of GeoTIFFs by byte range,
 * band math, COG / GeoTIFF / VRT writing and synthetic scenes. Pure
 * TypeScript on node:zlib (and node:fs for the streaming scene writer).
 */
export { BlockCache } from './block-cache.js';
export {
  COG_GHOST_AREA,
  cogOverviewSizes,
  downsampleAverage,
  type EncodeCogAsyncOptions,
  type EncodeCogOptions,
  encodeCog,
  encodeCogAsync,
} from './cog-writer.js';
export {
  type EvaluateOptions,
  type Expression,
  type ExpressionNode,
  evaluate,
  MAX_EXPRESSION_DEPTH,
  MAX_EXPRESSION_LENGTH,
  parseExpression,
} from './expression.js';
export { buildGdalMetadata, type GdalMetadataItem, parseGdalMetadata } from './gdal-metadata.js';
export { epsgFromWkt, type GeoTransform, type RasterCrs, windowGeoTransform } from './georeferencing.js';
export { type OpenGeoTiffOptions, openGeoTiff, type RasterReadStats, type RasterSource, type RasterWindow } from './geotiff-source.js';
export { encodeGeoTiff, type GeoTiffLayoutOptions, TiledGeoTiffFileWriter } from './geotiff-writer.js';
export { SENTINEL_LIKE_SCENE, SyntheticLandscape, type SyntheticSceneOptions, writeSyntheticScene } from './synthetic-scene.js';
export { DATA_TYPES, type RasterDataType, type TypedArray } from './tiff-format.js';
export { type BuildVrtOptions, buildVrt, type GdalDataTypeName, type VrtSource } from './vrt.js';
