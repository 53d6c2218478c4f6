import { open } from 'node:fs/promises';
import { InvalidParamsError } from '../domain/errors.js';
import { bandDescriptionItems, buildGdalMetadata } from './gdal-metadata.js';
import type { GeoTransform, RasterCrs } from './georeferencing.js';
import { DATA_TYPES, type RasterDataType, type TypedArray } from './tiff-format.js';
import {
  assertClassicSize,
  type BlockCompression,
  COMPRESSION_LEVELS,
  compressTileAsync,
  encodeTile,
  imageTags,
  layoutIfds,
  predictTile,
  type TiledImageSpec,
  tileCount,
  tileSamples,
  tilesAcross,
  tilesDown,
  validateImageSpec,
  writeHeader,
} from './tiff-writer.js';

export interface GeoTiffLayoutOptions {
  readonly width: number;
  readonly height: number;
  readonly dataType: RasterDataType;
  readonly bandCount: number;
  readonly geoTransform: GeoTransform;
  readonly crs: RasterCrs;
  readonly noData?: number | undefined;
  /** Tile size, a multiple of 16. Default 512. */
  readonly blockSize?: number | undefined;
  /** Default DEFLATE. */
  readonly compression?: BlockCompression | undefined;
  /** Default: 2 for integers and 3 for floats when compressed, 1 otherwise. */
  readonly predictor?: 1 | 2 | 3 | undefined;
  /** `pixel` (PlanarConfiguration 1, GDAL's default) or `band` (2). Default pixel. */
  readonly interleave?: 'pixel' | 'band' | undefined;
  /** Written to GDAL_METADATA so GDAL shows them as band descriptions. */
  readonly bandDescriptions?: readonly string[] | undefined;
  /** The codec's level; default GDAL's (DEFLATE 6, ZSTD 9). */
  readonly level?: number | undefined;
}

/** Turns writer options into the image spec, filling defaults and checking them. */
export function geoTiffSpec(o: GeoTiffLayoutOptions): TiledImageSpec {
  const compression = o.compression ?? 'DEFLATE';
  const isFloat = o.dataType === 'float32' || o.dataType === 'float64';
  if (!(o.dataType in DATA_TYPES)) throw new InvalidParamsError(`cannot write GeoTIFF: unknown data type ${String(o.dataType)}`);
  if (o.bandDescriptions !== undefined && o.bandDescriptions.length !== o.bandCount) {
    throw new InvalidParamsError(`cannot write GeoTIFF: ${o.bandDescriptions.length} band descriptions for ${o.bandCount} bands`);
  }
  const spec: TiledImageSpec = {
    width: o.width,
    height: o.height,
    blockSize: o.blockSize ?? 512,
    dataType: o.dataType,
    samplesPerPixel: o.bandCount,
    planar: (o.interleave ?? 'pixel') === 'band' && o.bandCount > 1,
    compression,
    predictor: o.predictor ?? (compression === 'NONE' ? 1 : isFloat ? 3 : 2),
    level: o.level ?? (compression === 'NONE' ? 0 : (COMPRESSION_LEVELS[compression]?.gdalDefault ?? 0)),
    georeference: { geoTransform: o.geoTransform, crs: o.crs },
    noData: o.noData,
    gdalMetadata: o.bandDescriptions ? buildGdalMetadata(bandDescriptionItems(o.bandDescriptions)) : undefined,
  };
  validateImageSpec(spec);
  return spec;
}

/**
 * Fills one tile's buffer from whole-band arrays: tile (tx, ty) of `plane`
 * (planar) or of all bands interleaved, padding past the edges with `fill`.
 */
function fillTile(
  spec: TiledImageSpec,
  bands: readonly TypedArray[],
  tx: number,
  ty: number,
  plane: number,
  tile: TypedArray,
  fill: number,
): void {
  const bs = spec.blockSize;
  const x0 = tx * bs;
  const y0 = ty * bs;
  const w = Math.min(bs, spec.width - x0);
  const h = Math.min(bs, spec.height - y0);
  if (w < bs || h < bs) tile.fill(fill);
  if (spec.planar || spec.samplesPerPixel === 1) {
    const src = bands[plane] as TypedArray;
    for (let r = 0; r < h; r++) {
      const s = (y0 + r) * spec.width + x0;
      tile.set(src.subarray(s, s + w), r * bs);
    }
    return;
  }
  const spp = spec.samplesPerPixel;
  for (let b = 0; b < spp; b++) {
    const src = bands[b] as TypedArray;
    for (let r = 0; r < h; r++) {
      const s = (y0 + r) * spec.width + x0;
      const d = r * bs * spp + b;
      for (let c = 0; c < w; c++) tile[d + c * spp] = src[s + c] as number;
    }
  }
}

/**
 * Encodes bands held in memory as a tiled GeoTIFF (IFD first, then tiles in
 * order). For small scenes and test fixtures; stream large scenes with
 * {@link TiledGeoTiffFileWriter}.
 *
 * @example
 * const bytes = encodeGeoTiff({ width: 1024, height: 1024, dataType: 'uint16', bandCount: 2, bands: [red, nir],
 *   geoTransform: [500000, 10, 0, 5700000, 0, -10], crs: { epsg: 32631 }, noData: 0, bandDescriptions: ['B04', 'B08'] });
 */
export function encodeGeoTiff(opts: GeoTiffLayoutOptions & { readonly bands: readonly TypedArray[] }): Uint8Array {
  const spec = geoTiffSpec(opts);
  if (opts.bands.length !== opts.bandCount)
    throw new InvalidParamsError(`encodeGeoTiff: ${opts.bands.length} band arrays for ${opts.bandCount} bands`);
  const info = DATA_TYPES[spec.dataType];
  for (const [i, b] of opts.bands.entries()) {
    if (b.length !== spec.width * spec.height)
      throw new InvalidParamsError(`encodeGeoTiff: band ${i + 1} holds ${b.length} pixels, not ${spec.width * spec.height}`);
    if (b.BYTES_PER_ELEMENT !== info.bytes) throw new InvalidParamsError(`encodeGeoTiff: band ${i + 1} is not ${spec.dataType}`);
  }
  const tile = info.create(tileSamples(spec));
  const tiles: Uint8Array[] = [];
  const planes = spec.planar ? spec.samplesPerPixel : 1;
  for (let p = 0; p < planes; p++) {
    for (let ty = 0; ty < tilesDown(spec); ty++) {
      for (let tx = 0; tx < tilesAcross(spec); tx++) {
        fillTile(spec, opts.bands, tx, ty, p, tile, spec.noData ?? 0);
        tiles.push(encodeTile(spec, tile));
      }
    }
  }
  const placeholder = new Array(tiles.length).fill(0);
  const { dataStart } = layoutIfds([imageTags(spec, placeholder, placeholder)], undefined);
  const offsets: number[] = [];
  let at = dataStart;
  for (const t of tiles) {
    offsets.push(at);
    at += t.byteLength;
  }
  assertClassicSize(at);
  const out = new Uint8Array(at);
  writeHeader(
    out,
    [
      imageTags(
        spec,
        offsets,
        tiles.map((t) => t.byteLength),
      ),
    ],
    undefined,
  );
  tiles.forEach((t, i) => {
    out.set(t, offsets[i] as number);
  });
  return out;
}

/** Tiles compressed or written concurrently: enough to keep the thread pool busy, few enough to bound memory. */
const MAX_TILES_IN_FLIGHT = 4;

/**
 * Writes a tiled GeoTIFF to a file one tile at a time, so a scene larger than
 * memory can be produced: it reserves the header (its size is fixed by the tile
 * count), appends each encoded tile, and writes the header with the real
 * offsets on `close`. Tiles must be written in order: band-planar files plane
 * by plane, each row-major.
 *
 * DEFLATE runs on libuv's thread pool while the caller computes the next
 * tiles; at most a few tiles are in flight, and they reach the file in order.
 */
export class TiledGeoTiffFileWriter {
  private readonly offsets: number[] = [];
  private readonly byteCounts: number[] = [];
  private position: number;
  private queued = 0;
  /** Resolves when every queued tile is in the file; rejects with the first failure. */
  private tail: Promise<void> = Promise.resolve();
  private readonly unwritten: Promise<void>[] = [];

  private constructor(
    private readonly file: Awaited<ReturnType<typeof open>>,
    readonly spec: TiledImageSpec,
    dataStart: number,
  ) {
    this.position = dataStart;
  }

  static async create(path: string, opts: GeoTiffLayoutOptions): Promise<TiledGeoTiffFileWriter> {
    const spec = geoTiffSpec(opts);
    const n = tileCount(spec);
    const zeros = new Array(n).fill(0);
    const { dataStart } = layoutIfds([imageTags(spec, zeros, zeros)], undefined);
    const file = await open(path, 'w');
    try {
      await file.write(new Uint8Array(dataStart), 0, dataStart, 0);
    } catch (error) {
      await file.close();
      throw error;
    }
    return new TiledGeoTiffFileWriter(file, spec, dataStart);
  }

  /** Tiles accepted so far. */
  get written(): number {
    return this.queued;
  }

  /**
   * Encodes and appends the next tile; `samples` is `tileSamples(spec)` long, in
   * host order, and may be reused as soon as the returned promise resolves.
   */
  async writeTile(samples: TypedArray): Promise<void> {
    if (this.queued >= tileCount(this.spec))
      throw new InvalidParamsError(`TiledGeoTiffFileWriter: all ${tileCount(this.spec)} tiles are written`);
    if (samples.length !== tileSamples(this.spec)) {
      throw new InvalidParamsError(`TiledGeoTiffFileWriter: a tile holds ${tileSamples(this.spec)} samples, got ${samples.length}`);
    }
    this.queued++;
    const prepared = predictTile(this.spec, samples);
    const encoded = compressTileAsync(this.spec, prepared);
    encoded.catch(() => undefined); // a failure is reported through `tail`, in tile order
    const written = this.tail.then(async () => {
      const bytes = await encoded;
      assertClassicSize(this.position + bytes.byteLength);
      const at = this.position;
      this.position += bytes.byteLength;
      await this.file.write(bytes, 0, bytes.byteLength, at);
      this.offsets.push(at);
      this.byteCounts.push(bytes.byteLength);
    });
    this.tail = written;
    this.unwritten.push(written);
    while (this.unwritten.length >= MAX_TILES_IN_FLIGHT) await this.unwritten.shift();
  }

  /** Waits for every tile, writes the header with the real tile offsets and closes the file. Returns the file size. */
  async close(): Promise<number> {
    try {
      await this.tail;
      const n = tileCount(this.spec);
      if (this.offsets.length !== n) throw new InvalidParamsError(`TiledGeoTiffFileWriter: ${this.offsets.length} of ${n} tiles written`);
      const ifds = [imageTags(this.spec, this.offsets, this.byteCounts)];
      const { dataStart } = layoutIfds(ifds, undefined);
      const header = new Uint8Array(dataStart);
      writeHeader(header, ifds, undefined);
      await this.file.write(header, 0, header.byteLength, 0);
      return this.position;
    } finally {
      await this.file.close();
    }
  }

  /** Closes the file without completing it (after a failure). */
  async abort(): Promise<void> {
    await this.tail.catch(() => undefined);
    await this.file.close();
  }
}
