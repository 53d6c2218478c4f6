import { rm } from 'node:fs/promises';
import { InvalidParamsError } from '../domain/errors.js';
import { MAX_RASTER_SIDE } from '../domain/tile-grid.js';
import type { RasterWindow } from './geotiff-source.js';
import { TiledGeoTiffFileWriter } from './geotiff-writer.js';

export interface SyntheticSceneOptions {
  readonly width: number;
  readonly height: number;
  /** Default 512. */
  readonly blockSize?: number | undefined;
  /** Band names, in band order; each must be one of B02, B03, B04, B08 (Sentinel-2 blue, green, red, near infrared). */
  readonly bands: readonly string[];
  readonly epsg: number;
  /** Upper-left corner, in CRS units. */
  readonly originX: number;
  readonly originY: number;
  /** Pixel size in CRS units (north-up: the geotransform's pixel height is its negative). */
  readonly pixelSize: number;
  /** Default 1. The same seed always gives the same pixels. */
  readonly seed?: number | undefined;
  /** Default 0 (a reflectance never measured as exactly 0). */
  readonly noData?: number | undefined;
  /**
   * Default NONE: measured 3-4x less CPU to write than DEFLATE (zlib level 1,
   * horizontal predictor), and cheaper to read. DEFLATE makes files about 60%
   * of the size, like real Sentinel-2 products.
   */
  readonly compression?: 'DEFLATE' | 'NONE' | undefined;
  /** zlib level for DEFLATE; default 1: scenes are inputs to tests and benchmarks, write speed matters more than size. */
  readonly level?: number | undefined;
  /** Default pixel (GDAL's default INTERLEAVE). */
  readonly interleave?: 'pixel' | 'band' | undefined;
}

/** Reflectance x 10,000 of bare soil (veg = 0), dense vegetation (veg = 1) and water, per band. */
const BAND_MODELS: Readonly<Record<string, { soil: number; vegetation: number; water: number }>> = {
  B02: { soil: 900, vegetation: 400, water: 700 },
  B03: { soil: 1100, vegetation: 700, water: 600 },
  B04: { soil: 1800, vegetation: 300, water: 500 },
  B08: { soil: 2300, vegetation: 4000, water: 250 },
};

/** One in this many pixels is nodata in every band, scattered deterministically. */
const NODATA_ONE_IN = 40_000;

/** A 32-bit integer hash of (seed, x, y): cheap, well mixed, the same on every platform. */
function hash3(seed: number, x: number, y: number): number {
  let h = Math.imul(x, 0x27d4eb2d) ^ Math.imul(y, 0x165667b1) ^ Math.imul(seed, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 15), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A deterministic pseudo-random number in [0, 1) from (seed, k). */
function rand(seed: number, k: number): number {
  return hash3(seed, k, 0x5eed) / 2 ** 32;
}

/**
 * The deterministic landscape behind synthetic scenes: field-sized patches of
 * vegetation (separable sines, so a pixel costs a few multiplications), a
 * meandering river, sensor-like noise and a scatter of nodata pixels. Any
 * window can be computed on its own, which is what lets scenes be streamed
 * and tests know the expected value of every pixel.
 */
/**
 * The georeferencing of Tessera's default synthetic scene: Sentinel-2 style
 * B04/B08 bands, UTM zone 31N (EPSG:32631), 10 m pixels by the Belgian coast (about 51.4° N, 3.0° E).
 */
export const SENTINEL_LIKE_SCENE = {
  bands: ['B04', 'B08'],
  epsg: 32631,
  originX: 500_000,
  originY: 5_700_000,
  pixelSize: 10,
} as const satisfies Partial<SyntheticSceneOptions>;

export class SyntheticLandscape {
  private readonly models: { soil: number; vegetation: number; water: number }[];
  private readonly colA: Float64Array;
  private readonly colB: Float64Array;
  private readonly rowA: Float64Array;
  private readonly rowB: Float64Array;
  private readonly riverY: Float64Array;
  private readonly riverHalfWidth: number;
  readonly seed: number;
  readonly noData: number;

  constructor(
    readonly width: number,
    readonly height: number,
    readonly bands: readonly string[],
    seed = 1,
    noData = 0,
  ) {
    if (
      !Number.isInteger(width) ||
      !Number.isInteger(height) ||
      width <= 0 ||
      height <= 0 ||
      width > MAX_RASTER_SIDE ||
      height > MAX_RASTER_SIDE
    ) {
      throw new InvalidParamsError(`synthetic scene size must be positive integers up to ${MAX_RASTER_SIDE}, got ${width}x${height}`);
    }
    if (bands.length === 0) throw new InvalidParamsError('a synthetic scene needs at least one band');
    this.models = bands.map((b) => {
      const m = BAND_MODELS[b];
      if (!m) throw new InvalidParamsError(`synthetic band ${JSON.stringify(b)} is unknown; use ${Object.keys(BAND_MODELS).join(', ')}`);
      return m;
    });
    if (!Number.isInteger(seed)) throw new InvalidParamsError(`seed must be an integer, got ${seed}`);
    if (!Number.isInteger(noData) || noData < 0 || noData > 65535) throw new InvalidParamsError(`noData must be a uint16, got ${noData}`);
    this.seed = seed;
    this.noData = noData;
    const wave = (n: number, k: number, minPeriod: number, maxPeriod: number, cos: boolean) => {
      const period = minPeriod + (maxPeriod - minPeriod) * rand(seed, k);
      const phase = 2 * Math.PI * rand(seed, k + 1);
      const a = new Float64Array(n);
      for (let i = 0; i < n; i++) a[i] = cos ? Math.cos((2 * Math.PI * i) / period + phase) : Math.sin((2 * Math.PI * i) / period + phase);
      return a;
    };
    this.colA = wave(width, 1, 700, 1500, false);
    this.rowA = wave(height, 3, 600, 1300, false);
    this.colB = wave(width, 5, 90, 220, true);
    this.rowB = wave(height, 7, 80, 240, false);
    const meander = wave(width, 9, Math.max(64, width * 0.5), Math.max(128, width * 0.9), false);
    this.riverY = meander.map((m) => height * (0.55 + 0.1 * m));
    this.riverHalfWidth = Math.max(2, Math.round(Math.min(width, height) / 400));
  }

  /**
   * Fills `out` with the samples of `window` for every band, pixel-interleaved
   * (`bands.length` samples per pixel) when `interleaved`, or for band `band`
   * alone; rows are `rowStride` samples apart.
   */
  fill(window: RasterWindow, out: Uint16Array, rowStride: number, band: number | 'all'): void {
    const first = band === 'all' ? 0 : band;
    const last = band === 'all' ? this.models.length - 1 : band;
    // Hoisted into locals: this loop runs for every pixel of every scene.
    const { colA, colB, rowA, rowB, riverY, riverHalfWidth, seed, noData } = this;
    const soil = Float64Array.from(this.models, (m) => m.soil);
    const gain = Float64Array.from(this.models, (m) => m.vegetation - m.soil);
    const water = Float64Array.from(this.models, (m) => m.water);
    const noiseScale = Float64Array.from(this.models, (_, b) => 0.3 * (1 + b));
    for (let r = 0; r < window.height; r++) {
      const y = window.y + r;
      const ra = 0.32 * (rowA[y] as number);
      const rb = 0.18 * (rowB[y] as number);
      let o = r * rowStride;
      for (let c = 0; c < window.width; c++) {
        const x = window.x + c;
        const h = hash3(seed, x, y);
        if (h % NODATA_ONE_IN === 0) {
          for (let b = first; b <= last; b++) out[o++] = noData;
          continue;
        }
        const veg = 0.5 + (colA[x] as number) * ra + (colB[x] as number) * rb;
        const wet = Math.abs(y - (riverY[x] as number)) < riverHalfWidth;
        // Sensor-like noise from the same hash: up to +-38 units on the first band, more on later ones.
        const noise = ((h >>> 8) & 0xff) - 127.5;
        for (let b = first; b <= last; b++) {
          const base = wet ? (water[b] as number) : (soil[b] as number) + (gain[b] as number) * veg;
          // Rounding and clamping by hand: Math.round/min/max cost half of this loop (measured).
          let v = (base + noise * (noiseScale[b] as number) + 0.5) | 0;
          // biome-ignore lint/complexity/useMathMinMax: a hot loop; see above
          v = v < 1 ? 1 : v > 65535 ? 65535 : v;
          out[o++] = v !== noData ? v : v === 65535 ? v - 1 : v + 1; // a measured value must never read as nodata
        }
      }
    }
  }

  /** The band arrays of a window, as a reader returns them (band order as `bands`). */
  window(window: RasterWindow): Uint16Array[] {
    return this.models.map((_, b) => {
      const a = new Uint16Array(window.width * window.height);
      this.fill(window, a, window.width, b);
      return a;
    });
  }
}

/**
 * Writes a synthetic multi-band uint16 GeoTIFF (tiled, uncompressed or
 * DEFLATE, band names in GDAL_METADATA, the given EPSG CRS and geotransform),
 * streaming tile by tile: memory stays at a few tiles whatever the scene size.
 *
 * @example
 * await writeSyntheticScene('/tmp/scene.tif', { width: 4096, height: 4096, bands: ['B04', 'B08'], epsg: 32631,
 *   originX: 500_000, originY: 5_700_000, pixelSize: 10 });
 */
export async function writeSyntheticScene(path: string, opts: SyntheticSceneOptions): Promise<{ bytes: number }> {
  const noData = opts.noData ?? 0;
  const land = new SyntheticLandscape(opts.width, opts.height, opts.bands, opts.seed ?? 1, noData);
  if (!(opts.pixelSize > 0) || !Number.isFinite(opts.originX) || !Number.isFinite(opts.originY)) {
    throw new InvalidParamsError('a synthetic scene needs a positive pixelSize and a finite origin');
  }
  const writer = await TiledGeoTiffFileWriter.create(path, {
    width: opts.width,
    height: opts.height,
    dataType: 'uint16',
    bandCount: opts.bands.length,
    geoTransform: [opts.originX, opts.pixelSize, 0, opts.originY, 0, -opts.pixelSize],
    crs: { epsg: opts.epsg },
    noData,
    blockSize: opts.blockSize ?? 512,
    compression: opts.compression ?? 'NONE',
    level: opts.level ?? 1,
    interleave: opts.interleave ?? 'pixel',
    bandDescriptions: opts.bands,
  });
  try {
    const spec = writer.spec;
    const bs = spec.blockSize;
    const spp = spec.planar ? 1 : opts.bands.length;
    const tile = new Uint16Array(bs * bs * spp);
    const planes = spec.planar ? opts.bands.length : 1;
    for (let p = 0; p < planes; p++) {
      for (let ty = 0; ty * bs < opts.height; ty++) {
        for (let tx = 0; tx * bs < opts.width; tx++) {
          const w = Math.min(bs, opts.width - tx * bs);
          const h = Math.min(bs, opts.height - ty * bs);
          if (w < bs || h < bs) tile.fill(noData);
          land.fill({ x: tx * bs, y: ty * bs, width: w, height: h }, tile, bs * spp, spec.planar ? p : 'all');
          await writer.writeTile(tile);
        }
      }
    }
    return { bytes: await writer.close() };
  } catch (error) {
    await writer.abort().catch(() => undefined);
    await rm(path, { force: true });
    throw error;
  }
}
