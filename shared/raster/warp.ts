import { InvalidGridError } from '../domain/errors.js';
import { RESAMPLINGS, type Resampling } from '../domain/tiling-params.js';
import { type Crs, crsTransform, type PointTransform } from './crs.js';
import type { GeoTransform } from './georeferencing.js';
import type { RasterDataType } from './tiff-format.js';

/**
 * Resampling of one source band onto a target grid, following gdalwarp's (GDAL 3.6) warp kernel so that
 * Tessera's tiles can be checked pixel by pixel against `gdalwarp -r <method>` (test/unit/raster/warp.test.ts,
 * figures in docs/reprojection.md).
 *
 * Conventions, all GDAL's:
 * - A target pixel (i, j) is sampled at its centre (i + 0.5, j + 0.5), mapped to source pixel/line
 *   coordinates (u, v) in which source pixel (k, l) covers [k, k+1) x [l, l+1).
 * - Kernel methods (nearest, bilinear, cubic, cubicspline, lanczos): a target pixel whose centre falls outside
 *   the source raster, or on an invalid source pixel, is nodata (GWKCheckAndComputeSrcOffsets): edges are
 *   never extrapolated, nodata holes never filled from their rim.
 * - nearest: source pixel (trunc(u + 1e-10), trunc(v + 1e-10)); nodata there gives nodata.
 * - bilinear: the four pixels around (u - 0.5, v - 0.5); nodata and outside pixels are dropped and the
 *   weights renormalised over the valid ones (GWKBilinearResample4Sample).
 * - cubic: Keys cubic convolution with a = -0.5 (Catmull-Rom) on the 4 x 4 neighbourhood; where any of the
 *   16 is nodata or outside, GDAL 3.6 falls back to the renormalised bilinear above, and so does this.
 * - bilinear and cubic when downsampling (target pixels more than ~1.05 source pixels wide: GDAL's
 *   `dfXScale < 0.95`): the kernel is stretched by 1/scale, so it averages the footprint instead of aliasing,
 *   with weights renormalised over valid pixels (GWKResample). The scale is one number for the whole
 *   target grid, as gdalwarp computes it for a grid it warps in one chunk.
 * - cubicspline (cubic B-spline, radius 2) and lanczos (windowed sinc, radius 3): GDAL's general kernel
 *   (GWKResample, GWKResampleOptimizedLanczos), never a 4-sample shortcut: nodata and outside taps are dropped
 *   and the weights renormalised; lanczos also gives nodata when fewer than half its taps are valid. When
 *   downsampling their kernels stretch as bilinear's do, except lanczos's weights, which GDAL computes from the
 *   tap's index alone (sinc(i * scale)), not from the sub-pixel position.
 * - average, rms, mode, max, min, med, q1, q3: the target pixel's corners (i, j) and (i + 1, j + 1) are mapped
 *   to the source; the source pixels the box between them touches are the sample (GWKAverageOrModeThread),
 *   nodata skipped. average and rms weight each by the fraction of it inside the box (with GDAL's edge rule);
 *   max, min, the quantiles (med, q1, q3: the sorted valid values at ceil(q * n - 1)) and mode count every pixel
 *   of the box once. mode is the value that first reaches the highest count, counted as GDAL does for the band's
 *   type (see {@link WarpSourceBand.dataType}). These methods test no centre: a box holding one valid pixel has a
 *   value; a box whose corners map more than 2 / scale source pixels off the raster has none (GDAL's margin).
 * - sum: source-centric (GWKSumPreserving): each valid source pixel's value is shared among the target pixels
 *   its mapped quad covers, in proportion to the area covered, so the total is preserved ({@link sumPreserving}).
 *
 * The transform target pixel -> source pixel is evaluated exactly at the ends and middle of each target
 * row and interpolated linearly where that stays within `maxErrorPixels` (0.125 source pixel, gdalwarp's
 * default `-et`), splitting the row in halves where it does not: GDAL's approximate transformer
 * (GDALApproxTransform). `maxErrorPixels: 0` transforms every pixel exactly.
 */

// The methods are named once, with the parameters that choose them.
export { RESAMPLINGS, type Resampling };

/** A raster grid: its CRS, GDAL geotransform and size in pixels. */
export interface RasterGrid {
  readonly crs: Crs;
  readonly geoTransform: GeoTransform;
  readonly width: number;
  readonly height: number;
}

export interface WarpSourceBand extends RasterGrid {
  /** Row-major pixel values, already scaled (scale/offset applied) if the file asks for it. */
  readonly values: ArrayLike<number>;
  /** The nodata value (NaN for NaN nodata), or undefined for none. NaN pixels are never valid. */
  readonly noData?: number | undefined;
  /** Optional per-pixel validity (non-zero = valid), e.g. from a GeoTIFF mask, ANDed with `noData`. */
  readonly mask?: ArrayLike<number> | undefined;
  /**
   * The band's stored type. Only `mode` looks at it, as GDAL's kernel does: uint8, uint16 and int16 are counted
   * as integers (GWKAOM_Imode), any other type (or none given) by float32 equality (GWKAOM_Fmode).
   */
  readonly dataType?: RasterDataType | undefined;
}

export interface WarpOptions {
  /** The approximate transformer's error budget in source pixels; gdalwarp's `-et` (default 0.125). */
  readonly maxErrorPixels?: number;
  /**
   * The target is the window at pixel (x, y) of a larger grid (one tile of a scene's target grid). Its rows
   * are approximated, and the downsampling kernel's scale computed, as gdalwarp does for the whole grid
   * warped in one chunk, so a tile holds the pixels of the same window of the whole warp.
   */
  readonly targetWindowOf?: { readonly grid: RasterGrid; readonly x: number; readonly y: number } | undefined;
  /**
   * The source band is the window at pixel (x, y) of a raster of this size (only the pixels a tile needs
   * are read): the source's own geotransform is the window's. Edges are the whole raster's: a target pixel
   * whose centre falls inside the raster but outside the window is still sampled (the caller reads a window
   * wide enough for the kernel), one outside the raster is nodata.
   */
  readonly sourceWindowOf?: { readonly width: number; readonly height: number; readonly x: number; readonly y: number } | undefined;
}

/** The target band: values in float64 (no rounding: an integer output rounds them, as GDAL does) and validity. */
export interface WarpedBand {
  readonly width: number;
  readonly height: number;
  readonly values: Float64Array;
  /** 1 where the pixel has a value, 0 where it is nodata (its value is then NaN). */
  readonly valid: Uint8Array;
}

const EPSILON = 1e-10;
/** GDAL's SRC_DENSITY_THRESHOLD-equivalent for a renormalised weight sum: below it, no valid source. */
const MIN_WEIGHT = 0.00001;

/** Resamples one source band onto `target` with `resampling`. */
export function warpBand(source: WarpSourceBand, target: RasterGrid, resampling: Resampling, options: WarpOptions = {}): WarpedBand {
  checkGrid('source', source);
  checkGrid('target', target);
  if (source.values.length !== source.width * source.height) {
    throw new InvalidGridError(
      `warp source has ${source.values.length} values for a ${source.width} x ${source.height} grid; pass one value per pixel, row-major`,
    );
  }
  const maxError = options.maxErrorPixels ?? 0.125;
  const whole = options.targetWindowOf ?? { grid: target, x: 0, y: 0 };
  const toSource = pixelTransform(whole.grid, source, maxError, whole.x, whole.y);
  // The raster's own extent, in the window's pixel coordinates: what "outside the source" means.
  const sw = options.sourceWindowOf;
  const minU = sw === undefined ? 0 : -sw.x;
  const minV = sw === undefined ? 0 : -sw.y;
  const maxU = sw === undefined ? source.width : sw.width - sw.x;
  const maxV = sw === undefined ? source.height : sw.height - sw.y;
  const out: WarpedBand = {
    width: target.width,
    height: target.height,
    values: new Float64Array(target.width * target.height).fill(Number.NaN),
    valid: new Uint8Array(target.width * target.height),
  };
  switch (resampling) {
    case 'nearest':
    case 'bilinear':
    case 'cubic':
    case 'cubicspline':
    case 'lanczos': {
      const centres = tileCentres(whole, source, target, maxError, toSource, { minU, minV, maxU, maxV });
      const values = out.values;
      const validOut = out.valid;
      if (resampling === 'nearest' || source.width === 1 || source.height === 1) {
        // The pixel each centre falls on, if valid (sourceValidity's test, made only where a centre falls).
        const index = centres.nearest;
        const sourceValues = source.values;
        const noData = source.noData;
        const mask = source.mask;
        for (let t = 0; t < index.length; t++) {
          const k = index[t] as number;
          if (k < 0) continue;
          const value = sourceValues[k] as number;
          if (Number.isNaN(value) || value === noData || (mask !== undefined && !mask[k])) continue;
          values[t] = value;
          validOut[t] = 1;
        }
        return out;
      }
      const valid = sourceValidity(source);
      const sampler = new Sampler(source.values, valid, source.width, source.height, false);
      const scale = kernelScale(whole.grid, source, { width: maxU - minU, height: maxV - minV, x: minU, y: minV });
      const use4 = scale.x >= 0.95 && scale.y >= 0.95;
      const { us, vs } = centres;
      for (let t = 0; t < us.length; t++) {
        const u = us[t] as number;
        // NaN: a centre off the raster (or the window read).
        if (Number.isNaN(u)) continue;
        const v = vs[t] as number;
        // gdalwarp skips a target pixel whose centre lands on an invalid source pixel before it resamples
        // (its unified source validity mask, which a one-band warp has): bilinear and cubic never fill a
        // nodata hole from its rim.
        if (!sampler.validAt(u, v)) continue;
        let value: number;
        if (resampling === 'lanczos') {
          value = sampler.lanczos(u, v, scale.x, scale.y);
        } else if (use4 && resampling !== 'cubicspline') {
          value = resampling === 'bilinear' ? sampler.bilinear(u, v) : sampler.cubic(u, v);
        } else {
          value = sampler.general(u, v, resampling, scale.x, scale.y);
        }
        if (Number.isNaN(value)) continue;
        values[t] = value;
        validOut[t] = 1;
      }
      return out;
    }
    case 'sum':
      sumPreserving(source, sourceValidity(source), whole, out, maxError, sw);
      return out;
    case 'average':
    case 'rms':
    case 'mode':
    case 'max':
    case 'min':
    case 'med':
    case 'q1':
    case 'q3': {
      const integerMode = source.dataType === 'uint8' || source.dataType === 'uint16' || source.dataType === 'int16';
      const sampler = new Sampler(source.values, sourceValidity(source), source.width, source.height, integerMode);
      const u0 = new Float64Array(target.width);
      const v0 = new Float64Array(target.width);
      const u1 = new Float64Array(target.width);
      const v1 = new Float64Array(target.width);
      // GDAL skips a target pixel whose corners map more than 2 / scale source pixels off the raster (its guard
      // against wild coordinates, GDAL issue 2365); at the raster's edges it decides some masks, so it is kept.
      const scale = kernelScale(whole.grid, source, { width: maxU - minU, height: maxV - minV, x: minU, y: minV });
      const marginX = 2 * Math.max(1, Math.ceil(1 / scale.x));
      const marginY = 2 * Math.max(1, Math.ceil(1 / scale.y));
      const off = (u: number, lo: number, hi: number, margin: number) => !(u - lo >= -margin && u - hi <= margin);
      for (let j = 0; j < target.height; j++) {
        toSource(j, 0, u0, v0);
        toSource(j + 1, 1, u1, v1);
        for (let i = 0; i < target.width; i++) {
          const ua = u0[i] as number;
          const va = v0[i] as number;
          const ub = u1[i] as number;
          const vb = v1[i] as number;
          if (off(ua, minU, maxU, marginX) || off(ub, minU, maxU, marginX) || off(va, minV, maxV, marginY) || off(vb, minV, maxV, marginY))
            continue;
          const value = sampler.box(ua, va, ub, vb, resampling);
          if (Number.isNaN(value)) continue;
          out.values[j * target.width + i] = value;
          out.valid[j * target.width + i] = 1;
        }
      }
      return out;
    }
    default:
      return assertNever(resampling);
  }
}

/**
 * The centres of a target tile's pixels in the source, as the kernel methods sample them: pixel (i, j) at
 * `us[j * width + i]`, `vs[j * width + i]`, NaN where the centre is off the raster (or off the window read), so the
 * pixel is nodata whatever the band; and for nearest, the index of the source pixel it falls on (-1: none).
 */
interface TileCentres {
  key: string;
  us: Float64Array;
  vs: Float64Array;
  nearest: Int32Array;
}

/** The last tiles' centres, most recent first: the bands of one tile, warped one after the other, share them. */
const recentCentres: TileCentres[] = [];
const MAX_RECENT_CENTRES = 2;

/**
 * The centres of every target pixel mapped into the source ({@link TileCentres}), as `toSource` approximates them,
 * those that fall off the raster removed. The bands of a scene file share their grid, so each band of a tile asks for
 * the same centres: they are computed once per tile and handed to every band (issue 26 section 7: they were a third of
 * a z14 PNG tile's time, computed once per band). The key holds everything they depend on, so a hit is the numbers a
 * computation would give. The arrays are reused from tile to tile (the caller only reads them, before its next call).
 */
function tileCentres(
  whole: { readonly grid: RasterGrid; readonly x: number; readonly y: number },
  source: RasterGrid,
  target: RasterGrid,
  maxError: number,
  toSource: RowTransform,
  raster: { readonly minU: number; readonly minV: number; readonly maxU: number; readonly maxV: number },
): TileCentres {
  const g = whole.grid;
  const { minU, minV, maxU, maxV } = raster;
  const key = [
    projectionKey(g, source.crs),
    g.width,
    whole.x,
    whole.y,
    target.width,
    target.height,
    maxError,
    source.geoTransform[0],
    source.geoTransform[1],
    source.geoTransform[3],
    source.geoTransform[5],
    source.width,
    source.height,
    minU,
    minV,
    maxU,
    maxV,
  ].join('\n');
  const at = recentCentres.findIndex((c) => c.key === key);
  if (at >= 0) {
    const hit = recentCentres[at] as TileCentres;
    recentCentres.splice(at, 1);
    recentCentres.unshift(hit);
    return hit;
  }
  const tw = target.width;
  const n = tw * target.height;
  const reused = recentCentres.length >= MAX_RECENT_CENTRES ? recentCentres.pop() : undefined;
  const entry: TileCentres =
    reused !== undefined && reused.us.length === n
      ? reused
      : { key, us: new Float64Array(n), vs: new Float64Array(n), nearest: new Int32Array(n) };
  entry.key = key;
  const { us, vs, nearest } = entry;
  for (let j = 0; j < target.height; j++) {
    toSource(j + 0.5, 0.5, us.subarray(j * tw, (j + 1) * tw), vs.subarray(j * tw, (j + 1) * tw));
  }
  // One point at a time is always exact (GDALApproxTransform transforms five points or fewer exactly).
  const toSourceExact = pixelTransform(whole.grid, source, 0, whole.x, whole.y);
  const u1 = new Float64Array(1);
  const v1 = new Float64Array(1);
  const sw = source.width;
  const sh = source.height;
  for (let j = 0; j < target.height; j++) {
    for (let i = 0; i < tw; i++) {
      const t = j * tw + i;
      let u = us[t] as number;
      let v = vs[t] as number;
      // The centre must fall on the source raster (GWKCheckAndComputeSrcOffsets). Like gdalwarp, a centre the
      // row approximation puts less than a pixel outside it is transformed again on its own, exactly, and
      // tested once more: near an edge the approximation's 0.125 px decide whether a pixel is nodata.
      let edge = rasterEdge(u, v, minU, minV, maxU, maxV);
      if (edge === NEAR) {
        toSourceExact(j + 0.5, i + 0.5, u1, v1);
        u = u1[0] as number;
        v = v1[0] as number;
        us[t] = u;
        vs[t] = v;
        edge = rasterEdge(u, v, minU, minV, maxU, maxV);
      }
      // Off the raster, or inside it but outside the window read (the caller's window was too small for this pixel).
      if (edge !== INSIDE || !(u >= 0 && v >= 0 && u + EPSILON <= sw && v + EPSILON <= sh)) {
        us[t] = Number.NaN;
        vs[t] = Number.NaN;
        nearest[t] = -1;
        continue;
      }
      // nearest's pixel, (trunc(u + 1e-10), trunc(v + 1e-10)), truncated as int32 (both are in [0, size] here: the
      // same integers as Math.trunc, in integer arithmetic, which halves the loop's time).
      nearest[t] = Math.min((v + EPSILON) | 0, sh - 1) * sw + Math.min((u + EPSILON) | 0, sw - 1);
    }
  }
  recentCentres.unshift(entry);
  return entry;
}

/**
 * `sum` as GDAL 3.6 computes it (GWKSumPreserving): source-centric, so the total is preserved whatever the
 * scale. Each valid source pixel's four corners are mapped into the target grid; every target pixel gets the
 * pixel's value times the share of the pixel's (mapped) area it covers: area(pixel quad ∩ target pixel) /
 * area(pixel quad). Upsampling splits a value over the target pixels it spans; downsampling adds whole pixels.
 * A target pixel no valid source pixel reaches is nodata. A quad whose edges cross (a pixel folded by the
 * projection) is skipped, as GDAL does. The corners are mapped as gdalwarp maps them, by the approximate
 * transformer along each row of corners of the whole raster (`maxError` target pixels): corners moved by the
 * approximation move the areas, and so the sums, by far more than the comparison's 1e-3.
 */
function sumPreserving(
  source: WarpSourceBand,
  valid: Uint8Array,
  whole: { readonly grid: RasterGrid; readonly x: number; readonly y: number },
  out: WarpedBand,
  maxError: number,
  window: WarpOptions['sourceWindowOf'],
): void {
  const w = source.width;
  const h = source.height;
  const cw = w + 1;
  const cx = new Float64Array(cw * (h + 1));
  const cy = new Float64Array(cw * (h + 1));
  // Corner rows of the whole raster (its pixel coordinates), approximated over their full width as GDAL's
  // chunk does for a grid it warps in one piece; only this window's corners are computed.
  const sw = window ?? { width: w, height: h, x: 0, y: 0 };
  const [sx0, sdx, , sy0, , sdy] = source.geoTransform;
  const corners: RasterGrid = {
    crs: source.crs,
    geoTransform: [sx0 - sw.x * sdx, sdx, 0, sy0 - sw.y * sdy, 0, sdy],
    width: sw.width + 1,
    height: sw.height + 1,
  };
  const toTarget = pixelTransform(corners, whole.grid, maxError, sw.x, 0);
  for (let r = 0; r <= h; r++) {
    toTarget(r + sw.y, 0, cx.subarray(r * cw, (r + 1) * cw), cy.subarray(r * cw, (r + 1) * cw));
  }
  for (let k = 0; k < cx.length; k++) {
    cx[k] = (cx[k] as number) - whole.x;
    cy[k] = (cy[k] as number) - whole.y;
  }
  const tw = out.width;
  const th = out.height;
  const qx = new Float64Array(4);
  const qy = new Float64Array(4);
  const clip = new PolygonClipper();
  for (let r = 0; r < h; r++) {
    for (let c = 0; c < w; c++) {
      const k = r * w + c;
      if (!valid[k]) continue;
      // Top-left, top-right, bottom-right, bottom-left, as GDAL orders them.
      const corners = [r * cw + c, r * cw + c + 1, (r + 1) * cw + c + 1, (r + 1) * cw + c];
      let finite = true;
      for (let i = 0; i < 4; i++) {
        qx[i] = cx[corners[i] as number] as number;
        qy[i] = cy[corners[i] as number] as number;
        if (!Number.isFinite((qx[i] as number) + (qy[i] as number))) finite = false;
      }
      if (!finite) continue;
      const minX = Math.min(qx[0] as number, qx[1] as number, qx[2] as number, qx[3] as number);
      const maxX = Math.max(qx[0] as number, qx[1] as number, qx[2] as number, qx[3] as number);
      const minY = Math.min(qy[0] as number, qy[1] as number, qy[2] as number, qy[3] as number);
      const maxY = Math.max(qy[0] as number, qy[1] as number, qy[2] as number, qy[3] as number);
      if (!(minX < tw && maxX > 0 && minY < th && maxY > 0)) continue;
      if (selfCrossing(qx, qy)) continue;
      const area = Math.abs(shoelace(qx, qy, 4));
      if (!(area > 0)) continue;
      const value = source.values[k] as number;
      for (let ty = Math.max(0, Math.floor(minY)); ty < Math.min(th, Math.ceil(maxY)); ty++) {
        for (let tx = Math.max(0, Math.floor(minX)); tx < Math.min(tw, Math.ceil(maxX)); tx++) {
          const inside = clip.areaInUnitSquare(qx, qy, tx, ty);
          if (!(inside > 0)) continue;
          const t = ty * tw + tx;
          out.values[t] = (out.valid[t] ? (out.values[t] as number) : 0) + value * (inside / area);
          out.valid[t] = 1;
        }
      }
    }
  }
}

/** Twice the signed area of the polygon (x, y)[0..n). */
function shoelace(x: ArrayLike<number>, y: ArrayLike<number>, n: number): number {
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const j = (i + 1) % n;
    sum += (x[i] as number) * (y[j] as number) - (x[j] as number) * (y[i] as number);
  }
  return sum / 2;
}

/** Whether the quad's opposite edges cross (0-1 with 2-3, or 1-2 with 3-0): a polygon folded by the projection. */
function selfCrossing(x: Float64Array, y: Float64Array): boolean {
  const crosses = (a: number, b: number, c: number, d: number): boolean => {
    const d1 = orient(x, y, c, d, a);
    const d2 = orient(x, y, c, d, b);
    const d3 = orient(x, y, a, b, c);
    const d4 = orient(x, y, a, b, d);
    return d1 * d2 < 0 && d3 * d4 < 0;
  };
  return crosses(0, 1, 2, 3) || crosses(1, 2, 3, 0);
}

function orient(x: Float64Array, y: Float64Array, a: number, b: number, c: number): number {
  return (
    ((x[b] as number) - (x[a] as number)) * ((y[c] as number) - (y[a] as number)) -
    ((y[b] as number) - (y[a] as number)) * ((x[c] as number) - (x[a] as number))
  );
}

/** Sutherland-Hodgman clipping of a quad by the unit square at (tx, ty), reusing its buffers. */
class PolygonClipper {
  private ax = new Float64Array(16);
  private ay = new Float64Array(16);
  private bx = new Float64Array(16);
  private by = new Float64Array(16);

  /** The area of the quad (x, y) inside [tx, tx + 1] x [ty, ty + 1]. */
  areaInUnitSquare(x: Float64Array, y: Float64Array, tx: number, ty: number): number {
    let n = 4;
    for (let i = 0; i < 4; i++) {
      this.ax[i] = (x[i] as number) - tx;
      this.ay[i] = (y[i] as number) - ty;
    }
    // Left, right, top, bottom edges of the unit square, each keeping one side.
    n = this.clipEdge(n, 0, 0, 1);
    n = this.clipEdge(n, 0, 1, -1);
    n = this.clipEdge(n, 1, 0, 1);
    n = this.clipEdge(n, 1, 1, -1);
    return n < 3 ? 0 : Math.abs(shoelace(this.ax, this.ay, n));
  }

  /** Keeps the part with sign * (coord - at) >= 0, coord x (axis 0) or y (axis 1); result back in (ax, ay). */
  private clipEdge(n: number, axis: 0 | 1, at: number, sign: 1 | -1): number {
    const inX = this.ax;
    const inY = this.ay;
    const outX = this.bx;
    const outY = this.by;
    let m = 0;
    for (let i = 0; i < n; i++) {
      const j = (i + 1) % n;
      const pi = sign * ((axis === 0 ? inX[i] : inY[i]) as number) - sign * at;
      const pj = sign * ((axis === 0 ? inX[j] : inY[j]) as number) - sign * at;
      if (pi >= 0) {
        outX[m] = inX[i] as number;
        outY[m] = inY[i] as number;
        m++;
      }
      if (pi >= 0 !== pj >= 0) {
        const t = pi / (pi - pj);
        outX[m] = (inX[i] as number) + t * ((inX[j] as number) - (inX[i] as number));
        outY[m] = (inY[i] as number) + t * ((inY[j] as number) - (inY[i] as number));
        m++;
      }
    }
    this.ax = outX;
    this.ay = outY;
    this.bx = inX;
    this.by = inY;
    return m;
  }
}

/** What {@link rasterEdge} says (numbers: compared per target pixel). */
const INSIDE = 0;
const NEAR = 1;
const OUTSIDE = 2;

/**
 * Where a source pixel/line coordinate lies against the raster [minU, maxU) x [minV, maxV), tested in
 * GWKCheckAndComputeSrcOffsets' order (left, top, right, bottom): inside, outside by less than a pixel on
 * the first side it fails (`NEAR`: gdalwarp retries it with the exact transformer), or outside.
 */
function rasterEdge(
  u: number,
  v: number,
  minU: number,
  minV: number,
  maxU: number,
  maxV: number,
): typeof INSIDE | typeof NEAR | typeof OUTSIDE {
  if (!(u >= minU)) return u > minU - 1 ? NEAR : OUTSIDE;
  if (!(v >= minV)) return v > minV - 1 ? NEAR : OUTSIDE;
  if (u + EPSILON > maxU) return u < maxU + 1 ? NEAR : OUTSIDE;
  if (v + EPSILON > maxV) return v < maxV + 1 ? NEAR : OUTSIDE;
  return INSIDE;
}

function assertNever(value: never): never {
  throw new InvalidGridError(`unknown resampling ${JSON.stringify(value)}; use one of ${RESAMPLINGS.join(', ')}`);
}

function checkGrid(role: string, grid: RasterGrid): void {
  if (!Number.isInteger(grid.width) || !Number.isInteger(grid.height) || grid.width < 1 || grid.height < 1) {
    throw new InvalidGridError(`warp ${role} grid is ${grid.width} x ${grid.height}; width and height must be positive integers`);
  }
  const [, a, b, , d, e] = grid.geoTransform;
  if (b !== 0 || d !== 0) {
    throw new InvalidGridError(
      `warp ${role} grid has a rotated geotransform (${grid.geoTransform.join(', ')}); ` +
        'rotated grids are not supported: north-up (or south-up) only, e.g. `gdalwarp` it to a north-up grid first',
    );
  }
  if (!(a !== 0 && e !== 0 && Number.isFinite(a) && Number.isFinite(e))) {
    throw new InvalidGridError(`warp ${role} grid has pixel size ${a} x ${e}; both must be finite and non-zero`);
  }
}

/** 1 where a source pixel is valid: not nodata, not NaN, and set in the mask if there is one. */
function sourceValidity(source: WarpSourceBand): Uint8Array {
  const n = source.width * source.height;
  const valid = new Uint8Array(n);
  const noData = source.noData;
  for (let k = 0; k < n; k++) {
    const x = source.values[k] as number;
    valid[k] = Number.isNaN(x) || x === noData || (source.mask !== undefined && !source.mask[k]) ? 0 : 1;
  }
  return valid;
}

/**
 * Fills `us`/`vs` with the source pixel/line coordinates of target row `row` (a pixel/line coordinate, e.g.
 * j + 0.5 for centres) at columns `i + colOffset`, i = 0..width-1. NaN where the point does not transform.
 */
type RowTransform = (row: number, colOffset: number, us: Float64Array, vs: Float64Array) => void;

/**
 * Target pixel -> source pixel for the window at (x0, y0) of `grid`: each row is approximated over the
 * grid's whole row (gdalwarp's chunk row), of which only the window's columns are computed.
 */
function pixelTransform(grid: RasterGrid, source: RasterGrid, maxError: number, x0: number, y0: number): RowTransform {
  const rows = new RowApproximation(gridProjection(grid, source.crs), grid.width, source.geoTransform, maxError, x0, y0);
  return (row, colOffset, us, vs) => rows.fill(row, colOffset, us, vs);
}

/** What one grid row's memo holds: for each column evaluated, its point's x and y in the other CRS at `xy[i]`, `xy[i + 1]`. */
interface RowPoints {
  readonly row: number;
  /** By twice the column (see {@link GridProjection.at}). */
  readonly index: Map<number, number>;
  readonly xy: number[];
}

/**
 * At most this many exact points are remembered per grid projection (about 5 MB): a z14 tile row of a Sentinel-2 scene's
 * WebMercatorQuad grid needs about a fifth of them, so consecutive tiles of a row, and the bands of a tile, share them.
 */
const MAX_MEMO_POINTS = 1 << 16;

/**
 * The exact transform of a target grid's pixel/line coordinates into another CRS, with the points of the approximate
 * transformer memoised per (row, column). Every tile of a scene grid approximates its rows over the grid's whole row
 * (so that it holds the same pixels as gdalwarp of the whole grid), which starts with the same exact points at the
 * whole row's ends and middle, then halves and quarters, down to the tile: without the memo a z14 tile row computes
 * those points again for every tile and every band (docs/benchmarks.md section 9). The points are a pure function of
 * (row, column), so a memoised point is the point itself, bit for bit, whatever the tile order.
 */
class GridProjection {
  private readonly project: PointTransform;
  private readonly tx0: number;
  private readonly tdx: number;
  private readonly ty0: number;
  private readonly tdy: number;
  private readonly rows = new Map<number, RowPoints>();
  private points = 0;
  private readonly px = new Float64Array(1);
  private readonly py = new Float64Array(1);
  /** The last point {@link at} evaluated, in the other CRS. */
  x = 0;
  y = 0;

  constructor(grid: RasterGrid, to: Crs) {
    this.project = crsTransform(grid.crs, to);
    [this.tx0, this.tdx, , this.ty0, , this.tdy] = grid.geoTransform;
  }

  /** The memo of grid row `row` (a pixel/line coordinate), made when first asked for. */
  row(row: number): RowPoints {
    let memo = this.rows.get(row);
    if (memo === undefined) {
      memo = { row, index: new Map(), xy: [] };
      this.rows.set(row, memo);
    }
    return memo;
  }

  /** The point at grid pixel/line (col, memo.row), into {@link x} and {@link y}; memoised in `memo`. */
  at(col: number, memo: RowPoints): void {
    // Twice the column: an exact, one-to-one key, and a small integer for the half-pixel columns of centres, which a
    // Map looks up without boxing a double.
    const key = col * 2;
    const i = memo.index.get(key);
    if (i !== undefined) {
      this.x = memo.xy[i] as number;
      this.y = memo.xy[i + 1] as number;
      return;
    }
    this.px[0] = this.tx0 + col * this.tdx;
    this.py[0] = this.ty0 + memo.row * this.tdy;
    this.project(this.px, this.py);
    this.x = this.px[0] as number;
    this.y = this.py[0] as number;
    memo.index.set(key, memo.xy.length);
    memo.xy.push(this.x, this.y);
    if (++this.points > MAX_MEMO_POINTS) this.evict(memo.row);
  }

  /** The points at columns `cols` of grid row `row`, into `xs`/`ys`: not memoised (a span of every pixel of a row). */
  many(cols: Float64Array, row: number, xs: Float64Array, ys: Float64Array): void {
    for (let k = 0; k < cols.length; k++) {
      xs[k] = this.tx0 + (cols[k] as number) * this.tdx;
      ys[k] = this.ty0 + row * this.tdy;
    }
    this.project(xs, ys);
  }

  /** Forgets the oldest rows (first evaluated) down to half the budget, never the row in use. */
  private evict(keep: number): void {
    for (const [row, memo] of this.rows) {
      if (this.points <= MAX_MEMO_POINTS / 2) break;
      if (row === keep) continue;
      this.rows.delete(row);
      this.points -= memo.index.size;
    }
  }
}

/** The few grid projections in use (a scene's grid onto its source), each built once: proj4 parses its definitions once. */
const projections = new Map<string, GridProjection>();
const MAX_PROJECTIONS = 4;

/** Everything a grid's point in another CRS depends on: the two CRSs as crsTransform tells them apart, and the grid's origin and pixel size. */
function projectionKey(grid: RasterGrid, to: Crs): string {
  const [tx0, tdx, , ty0, , tdy] = grid.geoTransform;
  return `${grid.crs.id}\n${grid.crs.proj4}\n${grid.crs.body}\n${to.id}\n${to.proj4}\n${to.body}\n${tx0},${tdx},${ty0},${tdy}`;
}

function gridProjection(grid: RasterGrid, to: Crs): GridProjection {
  const key = projectionKey(grid, to);
  let projection = projections.get(key);
  if (projection === undefined) {
    projection = new GridProjection(grid, to);
    projections.set(key, projection);
    if (projections.size > MAX_PROJECTIONS) projections.delete(projections.keys().next().value as string);
  } else {
    projections.delete(key);
    projections.set(key, projection);
  }
  return projection;
}

/**
 * GDAL's approximate transformer (GDALApproxTransform / GDALApproxTransformInternal) on the rows of a target
 * grid: the first, middle ((n - 1) / 2) and last points of a row are transformed exactly; if the straight line
 * from first to last misses the middle by at most `maxError` (|du| + |dv|, source pixels), every point is
 * interpolated on it; otherwise the row is split into [0, middle) and [middle, n) and each part treated alike,
 * parts of five points or fewer transformed exactly. Same split, same error measure, so the same source
 * coordinates to within rounding, which is what lets nearest agree with gdalwarp pixel for pixel.
 *
 * One object per warp, its recursion passing the three points as numbers: no closure or array per row or
 * segment (they were a tenth of a z14 tile's time).
 */
class RowApproximation {
  private readonly sx0: number;
  private readonly sdx: number;
  private readonly sy0: number;
  private readonly sdy: number;
  // The row being filled: its points k = 0..n-1 are at columns k + colOffset; only k in [lo, hi) are wanted, into us[k - lo].
  private colOffset = 0;
  private lo = 0;
  private hi = 0;
  private row = 0;
  private memo: RowPoints | undefined;
  private us: Float64Array = new Float64Array(0);
  private vs: Float64Array = new Float64Array(0);
  /** The last exact point, in source pixel/line coordinates. */
  private pu = 0;
  private pv = 0;
  private cols = new Float64Array(0);

  constructor(
    private readonly projection: GridProjection,
    private readonly n: number,
    sourceGeoTransform: GeoTransform,
    private readonly maxError: number,
    private readonly x0: number,
    private readonly y0: number,
  ) {
    [this.sx0, this.sdx, , this.sy0, , this.sdy] = sourceGeoTransform;
  }

  fill(row: number, colOffset: number, us: Float64Array, vs: Float64Array): void {
    const count = us.length;
    if (this.maxError <= 0 || this.n <= 5) {
      const cols = this.columns(count);
      for (let k = 0; k < count; k++) cols[k] = k + this.x0 + colOffset;
      this.exact(cols, count, row + this.y0, us, vs);
      return;
    }
    const n = this.n;
    this.colOffset = colOffset;
    this.lo = this.x0;
    this.hi = this.x0 + count;
    this.row = row + this.y0;
    this.memo = this.projection.row(this.row);
    this.us = us;
    this.vs = vs;
    this.point(0);
    const u0 = this.pu;
    const v0 = this.pv;
    this.point((n - 1) >> 1);
    const u1 = this.pu;
    const v1 = this.pv;
    this.point(n - 1);
    const u2 = this.pu;
    const v2 = this.pv;
    if (Number.isFinite(u0 + u1 + u2 + v0 + v1 + v2)) this.span(0, n, u0, u1, u2, v0, v1, v2);
    else this.exactSpan(0, n);
  }

  /** Point k of the row, exactly, into (pu, pv). */
  private point(k: number): void {
    const p = this.projection;
    p.at(k + this.colOffset, this.memo as RowPoints);
    this.pu = (p.x - this.sx0) / this.sdx;
    this.pv = (p.y - this.sy0) / this.sdy;
  }

  /** Points first .. first + count - 1, their first, middle and last transformed exactly: (u0, v0), (u1, v1), (u2, v2). */
  private span(first: number, count: number, u0: number, u1: number, u2: number, v0: number, v1: number, v2: number): void {
    const middle = (count - 1) >> 1;
    const last = first + count - 1;
    const c0 = first + this.colOffset;
    const width = last + this.colOffset - c0;
    const du = (u2 - u0) / width;
    const dv = (v2 - v0) / width;
    const dm = first + middle + this.colOffset - c0;
    const error = Math.abs(u0 + du * dm - u1) + Math.abs(v0 + dv * dm - v1);
    if (error <= this.maxError) {
      const us = this.us;
      const vs = this.vs;
      const lo = this.lo;
      const end = Math.min(last, this.hi - 1);
      for (let k = Math.max(first, lo); k <= end; k++) {
        const d = k + this.colOffset - c0;
        us[k - lo] = u0 + du * d;
        vs[k - lo] = v0 + dv * d;
      }
      return;
    }
    const leftCount = middle;
    const rightFirst = first + middle;
    const rightCount = count - middle;
    if (first < this.hi && first + leftCount > this.lo) {
      if (leftCount > 5) {
        this.point(first + ((leftCount - 1) >> 1));
        const mu = this.pu;
        const mv = this.pv;
        this.point(first + leftCount - 1);
        const lu = this.pu;
        const lv = this.pv;
        if (Number.isFinite(u0 + mu + lu + v0 + mv + lv)) this.span(first, leftCount, u0, mu, lu, v0, mv, lv);
        else this.exactSpan(first, leftCount);
      } else this.exactSpan(first, leftCount);
    }
    if (rightFirst < this.hi && rightFirst + rightCount > this.lo) {
      if (rightCount > 5) {
        this.point(rightFirst + ((rightCount - 1) >> 1));
        const mu = this.pu;
        const mv = this.pv;
        if (Number.isFinite(u1 + mu + u2 + v1 + mv + v2)) this.span(rightFirst, rightCount, u1, mu, u2, v1, mv, v2);
        else this.exactSpan(rightFirst, rightCount);
      } else this.exactSpan(rightFirst, rightCount);
    }
  }

  /** Points first .. first + count - 1 (those wanted), each transformed exactly. */
  private exactSpan(first: number, count: number): void {
    const a = Math.max(first, this.lo);
    const b = Math.min(first + count, this.hi);
    if (b <= a) return;
    const cols = this.columns(b - a);
    for (let k = a; k < b; k++) cols[k - a] = k + this.colOffset;
    this.exact(cols, b - a, this.row, this.us.subarray(a - this.lo, b - this.lo), this.vs.subarray(a - this.lo, b - this.lo));
  }

  /** Columns `cols[0..count)` of grid row `row`, exactly, in source pixel/line coordinates. */
  private exact(cols: Float64Array, count: number, row: number, us: Float64Array, vs: Float64Array): void {
    const c = cols.length === count ? cols : cols.subarray(0, count);
    this.projection.many(c, row, us, vs);
    for (let k = 0; k < count; k++) {
      us[k] = ((us[k] as number) - this.sx0) / this.sdx;
      vs[k] = ((vs[k] as number) - this.sy0) / this.sdy;
    }
  }

  /** A scratch array of at least `count` columns. */
  private columns(count: number): Float64Array {
    if (this.cols.length < count) this.cols = new Float64Array(count);
    return this.cols;
  }
}

/**
 * gdalwarp's dfXScale/dfYScale for a grid warped in one chunk: target size over the size of the source
 * window it needs, snapped to 1 when nearly equal and to 1/n when nearly a whole reduction
 * (GDALWarpKernel::PerformWarp). The source window is the bounding box of the target's edges mapped into
 * the source, 21 points an edge, as GDALWarpOperation::ComputeSourceWindow samples them: a fixed cost
 * whatever the grid's size, so a tile of a wide grid pays the same as a small grid.
 */
function kernelScale(
  target: RasterGrid,
  source: RasterGrid,
  raster: { readonly width: number; readonly height: number; readonly x: number; readonly y: number },
): { x: number; y: number } {
  const steps = 20;
  const n = 4 * (steps + 1);
  const xs = new Float64Array(n);
  const ys = new Float64Array(n);
  const [tx0, tdx, , ty0, , tdy] = target.geoTransform;
  let k = 0;
  for (let s = 0; s <= steps; s++) {
    const t = s / steps;
    for (const [px, py] of [
      [t * target.width, 0],
      [t * target.width, target.height],
      [0, t * target.height],
      [target.width, t * target.height],
    ] as const) {
      xs[k] = tx0 + px * tdx;
      ys[k] = ty0 + py * tdy;
      k++;
    }
  }
  crsTransform(target.crs, source.crs)(xs, ys);
  const [sx0, sdx, , sy0, , sdy] = source.geoTransform;
  let minU = Infinity;
  let maxU = -Infinity;
  let minV = Infinity;
  let maxV = -Infinity;
  for (let i = 0; i < n; i++) {
    // In the whole raster's pixel coordinates (`raster.x`/`y` is where the window read starts in them, negated).
    const u = ((xs[i] as number) - sx0) / sdx - raster.x;
    const v = ((ys[i] as number) - sy0) / sdy - raster.y;
    if (!Number.isFinite(u) || !Number.isFinite(v)) continue;
    minU = Math.min(minU, u);
    maxU = Math.max(maxU, u);
    minV = Math.min(minV, v);
    maxV = Math.max(maxV, v);
  }
  if (!Number.isFinite(minU)) return { x: 1, y: 1 };
  const width = Math.min(raster.width, Math.ceil(maxU)) - Math.max(0, Math.floor(minU));
  const height = Math.min(raster.height, Math.ceil(maxV)) - Math.max(0, Math.floor(minV));
  const snap = (dst: number, src: number): number => {
    if (src <= 0) return 1;
    let scale = dst / src;
    if (src >= dst && src <= dst + 1) scale = 1;
    if (scale < 1) {
      const r = Math.round(1 / scale);
      if (Math.abs(1 / scale - r) < 0.05) scale = 1 / r;
    }
    return scale;
  };
  return { x: snap(target.width, width), y: snap(target.height, height) };
}

/** Keys' cubic convolution kernel with a = -0.5 (GDAL's CubicKernel, written as it is, so sums round alike). */
function cubicKernel(x: number): number {
  const a = Math.abs(x);
  if (a <= 1) return x * x * (1.5 * a - 2.5) + 1;
  if (a <= 2) return x * x * (-0.5 * a + 2.5) - 4 * a + 2;
  return 0;
}

function bilinearKernel(x: number): number {
  const a = Math.abs(x);
  return a <= 1 ? 1 - a : 0;
}

/**
 * The cubic B-spline, (B, C) = (1, 0) of Mitchell and Netravali, times 6 (GDAL's GWKBSpline leaves the 1/6 out:
 * the weights are renormalised anyway).
 */
function bSplineKernel(x: number): number {
  const xp2 = x + 2;
  const xp1 = x + 1;
  const xm1 = x - 1;
  if (!(xp2 > 0)) return 0;
  let v = xp2 * xp2 * xp2;
  if (xp1 > 0) {
    v += -4 * xp1 * xp1 * xp1;
    if (x > 0) {
      v += 6 * x * x * x;
      if (xm1 > 0) v += -4 * xm1 * xm1 * xm1;
    }
  }
  return v;
}

/** Lanczos windowed sinc, radius 3: sinc(x) sinc(x / 3) (GDAL's GWKLanczosSinc). */
function lanczosSinc(x: number): number {
  if (x === 0) return 1;
  const pix = Math.PI * x;
  const pixOverR = pix / 3;
  return (Math.sin(pix) * Math.sin(pixOverR)) / (pix * pixOverR);
}

/**
 * The lanczos weights of taps i = first..last at offset `delta` (0 <= delta < 1): sinc(i - delta) by GDAL's
 * trigonometric identities (GWKResampleOptimizedLanczos), which agree with {@link lanczosSinc} to about 1e-10;
 * the same formula keeps the rounding of integer bands GDAL's. Index i - first of `out`.
 */
function lanczosWeights(delta: number, first: number, last: number, out: Float64Array): void {
  const sinPiDeltaOver3 = Math.sin((-Math.PI / 3) * delta);
  const sin2 = sinPiDeltaOver3 * sinPiDeltaOver3;
  const cosPiDeltaOver3 = Math.sqrt(1 - sin2);
  const sinPiDelta = (3 - 4 * sin2) * sinPiDeltaOver3;
  const invPi2Over3 = 3 / (Math.PI * Math.PI);
  const a = invPi2Over3 * sinPiDelta;
  const b = -0.5 * a * sinPiDeltaOver3;
  const c = 0.8660254037844386 * a * cosPiDeltaOver3;
  const cst = [a * sinPiDeltaOver3, b - c, b + c];
  for (let i = first; i <= last; i++) {
    const x = i - delta;
    out[i - first] = x === 0 ? 1 : (cst[(i + 3) % 3] as number) / (x * x);
  }
}

/** GDAL's 4-tap cubic weights for a fractional offset t in [0, 1) (GWKCubicComputeWeights). */
function cubicWeights(t: number, w: Float64Array): void {
  const half = 0.5 * t;
  const three = 3 * t;
  const half2 = half * t;
  w[0] = half * (-1 + t * (2 - t));
  w[1] = 1 + half2 * (-5 + three);
  w[2] = half * (1 + t * (4 - three));
  w[3] = half2 * (-1 + t);
}

class Sampler {
  private readonly wx = new Float64Array(4);
  private readonly wy = new Float64Array(4);

  /** The X weights of the general kernel and of lanczos, one per tap (the widest a downsampling kernel gets). */
  private weightsX = new Float64Array(16);
  private weightsY = new Float64Array(16);
  /** mode's counts, reused from box to box. */
  private readonly counts = new Map<number, number>();

  constructor(
    private readonly values: ArrayLike<number>,
    private readonly valid: Uint8Array,
    private readonly width: number,
    private readonly height: number,
    private readonly integerMode: boolean,
  ) {}

  /** Whether the pixel the centre (u, v) falls on is valid; u and v in [0, size] (int32 truncation, as in nearest). */
  validAt(u: number, v: number): boolean {
    const x = Math.min((u + EPSILON) | 0, this.width - 1);
    const y = Math.min((v + EPSILON) | 0, this.height - 1);
    return this.valid[y * this.width + x] === 1;
  }

  bilinear(u: number, v: number): number {
    let x = Math.floor(u - 0.5);
    let y = Math.floor(v - 0.5);
    let rx = 1.5 - (u - x);
    let ry = 1.5 - (v - y);
    if (x === -1) {
      x = 0;
      rx = 1;
    }
    if (y === -1) {
      y = 0;
      ry = 1;
    }
    // The four taps written out, in this order (the same sums, bit for bit): a closure per pixel capturing
    // `sum` and `weight` allocated a context per target pixel, which cost several times the arithmetic
    // (one band onto a 512 px tile: 96 ms with the closure, 15 ms without; bench/sections/reproject.ts).
    const w = this.width;
    const h = this.height;
    const inX0 = x >= 0 && x < w;
    const inX1 = x + 1 >= 0 && x + 1 < w;
    const inY0 = y >= 0 && y < h;
    const inY1 = y + 1 >= 0 && y + 1 < h;
    let sum = 0;
    let weight = 0;
    let k = y * w + x;
    let t = rx * ry;
    if (inX0 && inY0 && this.valid[k]) {
      sum += (this.values[k] as number) * t;
      weight += t;
    }
    k = y * w + x + 1;
    t = (1 - rx) * ry;
    if (inX1 && inY0 && this.valid[k]) {
      sum += (this.values[k] as number) * t;
      weight += t;
    }
    k = (y + 1) * w + x;
    t = rx * (1 - ry);
    if (inX0 && inY1 && this.valid[k]) {
      sum += (this.values[k] as number) * t;
      weight += t;
    }
    k = (y + 1) * w + x + 1;
    t = (1 - rx) * (1 - ry);
    if (inX1 && inY1 && this.valid[k]) {
      sum += (this.values[k] as number) * t;
      weight += t;
    }
    if (weight < MIN_WEIGHT) return Number.NaN;
    return weight === 1 ? sum : sum / weight;
  }

  cubic(u: number, v: number): number {
    const x = Math.trunc(u - 0.5);
    const y = Math.trunc(v - 0.5);
    if (x - 1 < 0 || x + 2 >= this.width || y - 1 < 0 || y + 2 >= this.height) return this.bilinear(u, v);
    cubicWeights(u - 0.5 - x, this.wx);
    cubicWeights(v - 0.5 - y, this.wy);
    let total = 0;
    for (let r = 0; r < 4; r++) {
      const base = (y - 1 + r) * this.width + x - 1;
      let rowSum = 0;
      for (let c = 0; c < 4; c++) {
        // Any missing pixel in the 4 x 4: GDAL 3.6 falls back to bilinear rather than renormalising.
        if (!this.valid[base + c]) return this.bilinear(u, v);
        rowSum += (this.wx[c] as number) * (this.values[base + c] as number);
      }
      total += (this.wy[r] as number) * rowSum;
    }
    return total;
  }

  /**
   * GDAL's general kernel (GWKResample): bilinear and cubic when downsampling, cubicspline always. The kernel is
   * stretched by 1/scale below scale 1; taps off the raster are left out, nodata taps skipped, and the weights
   * renormalised (row by row, in GDAL's order of sums). Below a total weight of 1e-6 there is no value.
   */
  general(u: number, v: number, resampling: 'bilinear' | 'cubic' | 'cubicspline', scaleX: number, scaleY: number): number {
    const radius = resampling === 'bilinear' ? 1 : 2;
    const kernel = resampling === 'bilinear' ? bilinearKernel : resampling === 'cubic' ? cubicKernel : bSplineKernel;
    const sx = Math.min(scaleX, 1);
    const sy = Math.min(scaleY, 1);
    const rx = sx < 1 ? Math.ceil(radius / sx) : radius;
    const ry = sy < 1 ? Math.ceil(radius / sy) : radius;
    const x = Math.floor(u - 0.5);
    const y = Math.floor(v - 0.5);
    const dx = u - 0.5 - x;
    const dy = v - 0.5 - y;
    // The window's first tap depends on the parity of the kernel's radius (GDAL's nFiltInitX).
    const iMin = Math.max(((radius + 1) % 2) - rx, -x);
    const iMax = Math.min(rx, this.width - x - 1);
    const jMin = Math.max(((radius + 1) % 2) - ry, -y);
    const jMax = Math.min(ry, this.height - y - 1);
    if (iMax < iMin || jMax < jMin) return Number.NaN;
    const wx = this.tapWeights('x', iMax - iMin + 1);
    for (let i = iMin; i <= iMax; i++) wx[i - iMin] = kernel(sx < 1 ? (i - dx) * sx : i - dx);
    let sum = 0;
    let weight = 0;
    for (let j = jMin; j <= jMax; j++) {
      const base = (y + j) * this.width + x;
      let rowSum = 0;
      let rowWeight = 0;
      for (let i = iMin; i <= iMax; i++) {
        const k = base + i;
        if (!this.valid[k]) continue;
        const w = wx[i - iMin] as number;
        rowSum += (this.values[k] as number) * w;
        rowWeight += w;
      }
      const wy = kernel(sy < 1 ? (j - dy) * sy : j - dy);
      sum += rowSum * wy;
      weight += rowWeight * wy;
    }
    if (weight < 0.000001) return Number.NaN;
    return weight < 0.99999 || weight > 1.00001 ? sum / weight : sum;
  }

  /**
   * Lanczos (GWKResampleOptimizedLanczos): taps within 3 (stretched) of the sample point, nodata skipped, weights
   * renormalised; nodata when fewer than half the taps in the window are valid. Downsampling, GDAL weights each tap
   * by sinc(i * scale), from its index alone, and so does this.
   */
  lanczos(u: number, v: number, scaleX: number, scaleY: number): number {
    const x = Math.floor(u - 0.5);
    const y = Math.floor(v - 0.5);
    const dx = u - 0.5 - x;
    const dy = v - 0.5 - y;
    const [iMin, iMax, wx] = this.lanczosTaps('x', x, dx, scaleX, this.width);
    const [jMin, jMax, wy] = this.lanczosTaps('y', y, dy, scaleY, this.height);
    if (iMax < iMin || jMax < jMin) return Number.NaN;
    let sum = 0;
    let weight = 0;
    let count = 0;
    for (let j = jMin; j <= jMax; j++) {
      const base = (y + j) * this.width + x;
      const w1 = wy[j - jMin] as number;
      for (let i = iMin; i <= iMax; i++) {
        const k = base + i;
        if (!this.valid[k]) continue;
        count++;
        const w2 = w1 * (wx[i - iMin] as number);
        sum += (this.values[k] as number) * w2;
        weight += w2;
      }
    }
    if (weight < 0.000001 || count < Math.trunc(((jMax - jMin + 1) * (iMax - iMin + 1)) / 2)) return Number.NaN;
    return weight < 0.99999 || weight > 1.00001 ? sum * (1 / weight) : sum;
  }

  /** Lanczos's taps along one axis around pixel `p` (offset `delta`), clipped to the raster and to the radius, and their weights. */
  private lanczosTaps(axis: 'x' | 'y', p: number, delta: number, scale: number, size: number): [number, number, Float64Array] {
    const r = scale < 1 ? Math.ceil(3 / scale) : 3;
    let lo = Math.max(-r, -p);
    let hi = Math.min(r, size - p - 1);
    const w = this.tapWeights(axis, 2 * r + 2);
    if (scale < 1) {
      while (lo * scale < -3) lo++;
      while (hi * scale > 3) hi--;
      for (let i = lo; i <= hi; i++) w[i - lo] = lanczosSinc(i * scale);
    } else {
      while (lo - delta < -3) lo++;
      while (hi - delta > 3) hi--;
      if (hi >= lo) lanczosWeights(delta, lo, hi, w);
    }
    return [lo, hi, w];
  }

  private tapWeights(axis: 'x' | 'y', n: number): Float64Array {
    if (axis === 'x') {
      if (this.weightsX.length < n) this.weightsX = new Float64Array(n);
      return this.weightsX;
    }
    if (this.weightsY.length < n) this.weightsY = new Float64Array(n);
    return this.weightsY;
  }

  /**
   * The box methods (GWKAverageOrModeThread) over the source pixels under the box between two mapped corners:
   * average, rms and sum weight each pixel by the fraction of it inside the box; max, min, the quantiles and mode
   * take every pixel of the box once. Nodata skipped; NaN when no pixel is valid.
   */
  box(ua: number, va: number, ub: number, vb: number, method: BoxMethod): number {
    if (!Number.isFinite(ua + va + ub + vb)) return Number.NaN;
    const w = this.width;
    const h = this.height;
    const xMin = Math.min(ua, ub);
    const xMax = Math.max(ua, ub);
    const yMin = Math.min(va, vb);
    const yMax = Math.max(va, vb);
    const x0 = Math.max(Math.floor(xMin + EPSILON), 0);
    let x1 = Math.min(Math.ceil(xMax - EPSILON), w);
    const y0 = Math.max(Math.floor(yMin + EPSILON), 0);
    let y1 = Math.min(Math.ceil(yMax - EPSILON), h);
    // GDAL 3.6's rule, kept so masks agree with it: a box thinner than a pixel takes the pixel after its
    // floor, so a target pixel up to one source pixel beyond the top or left edge takes the edge row's value.
    if (x0 === x1 && x1 < w) x1++;
    if (y0 === y1 && y1 < h) y1++;
    if (x1 <= x0 || y1 <= y0) return Number.NaN;
    switch (method) {
      case 'average':
      case 'rms': {
        let sum = 0;
        let weight = 0;
        for (let py = y0; py < y1; py++) {
          const wy = py === y0 ? (y0 + 1 === y1 ? 1 : 1 - (yMin - y0)) : py + 1 === y1 ? 1 - (y1 - yMax) : 1;
          for (let px = x0; px < x1; px++) {
            const k = py * w + px;
            if (!this.valid[k]) continue;
            const wx = px === x0 ? (x0 + 1 === x1 ? 1 : 1 - (xMin - x0)) : px + 1 === x1 ? 1 - (x1 - xMax) : 1;
            const cell = wx * wy;
            const value = this.values[k] as number;
            sum += (method === 'rms' ? value * value : value) * cell;
            weight += cell;
          }
        }
        if (!(weight > 0)) return Number.NaN;
        return method === 'rms' ? Math.sqrt(sum / weight) : sum / weight;
      }
      case 'max':
      case 'min': {
        let best = Number.NaN;
        for (let py = y0; py < y1; py++) {
          for (let px = x0; px < x1; px++) {
            const k = py * w + px;
            if (!this.valid[k]) continue;
            const value = this.values[k] as number;
            if (Number.isNaN(best) || (method === 'max' ? value > best : value < best)) best = value;
          }
        }
        return best;
      }
      case 'med':
      case 'q1':
      case 'q3': {
        const sample: number[] = [];
        for (let py = y0; py < y1; py++) {
          for (let px = x0; px < x1; px++) {
            const k = py * w + px;
            if (this.valid[k]) sample.push(this.values[k] as number);
          }
        }
        if (sample.length === 0) return Number.NaN;
        sample.sort((a, b) => a - b);
        const q = method === 'med' ? 0.5 : method === 'q1' ? 0.25 : 0.75;
        return sample[Math.ceil(q * sample.length - 1)] as number;
      }
      case 'mode':
        return this.modeOf(x0, x1, y0, y1);
      default:
        return assertNever(method);
    }
  }

  /**
   * mode as GDAL counts it: the first value to reach the highest count wins. Integer bands (GWKAOM_Imode) count
   * the values as integers; any other (GWKAOM_Fmode) compares them as float32 and gives the float32 value, so
   * float64 values equal in float32 are one value. (Fmode's list of entries re-adds a value that did not overtake
   * the leader, but every later match counts on its first entry, so the winner is the histogram's.)
   */
  private modeOf(x0: number, x1: number, y0: number, y1: number): number {
    const counts = this.counts;
    counts.clear();
    let best = Number.NaN;
    let bestCount = 0;
    for (let py = y0; py < y1; py++) {
      for (let px = x0; px < x1; px++) {
        const k = py * this.width + px;
        if (!this.valid[k]) continue;
        const v = this.values[k] as number;
        const value = this.integerMode ? Math.trunc(v) : Math.fround(v);
        const n = (counts.get(value) ?? 0) + 1;
        counts.set(value, n);
        if (n > bestCount) {
          best = value;
          bestCount = n;
        }
      }
    }
    return best;
  }
}

/** The methods that take the box under a target pixel rather than a kernel around its centre. */
type BoxMethod = 'average' | 'rms' | 'mode' | 'max' | 'min' | 'med' | 'q1' | 'q3';

/** Rounds a warped value into an integer band the way GDAL does (round half up, clamped to the type's range). */
export function roundToInteger(value: number, min: number, max: number): number {
  const r = Math.floor(value + 0.5);
  return Math.max(min, Math.min(r, max));
}
