import type { ScaleOffset } from '../domain/tiling-params.js';

/**
 * Physical values from stored ones (`--unscale`, `params.unscale`): value * scale + offset, as
 * `gdal_translate -unscale` and rio-tiler's `unscale` compute them. Sentinel-2 L2A since processing baseline
 * 04.00 stores reflectance as DN with scale 0.0001 and offset -0.1; band math on the raw DN is wrong for it.
 */

/** No change: what a band without a scale or an offset gets (GDAL's GetScale() 1, GetOffset() 0). */
export const IDENTITY_SCALE: ScaleOffset = { scale: 1, offset: 0 };

/**
 * The scale and offset of band `index` (1-based): the explicit one when given (a STAC Item's `raster:bands`,
 * carried in `params.scale_offset`), else the file's GDAL metadata (GDAL_METADATA items of role `scale` and
 * `offset`), each defaulting as GDAL does when the file gives only one.
 */
export function bandScaleOffset(
  explicit: ScaleOffset | undefined,
  raster: { readonly bandScales: readonly (number | undefined)[]; readonly bandOffsets: readonly (number | undefined)[] },
  index: number,
): ScaleOffset {
  if (explicit !== undefined) return explicit;
  return { scale: raster.bandScales[index - 1] ?? 1, offset: raster.bandOffsets[index - 1] ?? 0 };
}

/**
 * The band's physical values, invalid pixels (already NaN, or `invalid(k)`) NaN. Nodata is decided on the stored
 * values, before the scale: a nodata DN stays nodata whatever it maps to (gdal_translate -unscale keeps the raw
 * nodata too). Computed in float64 and rounded to float32 once, as `gdal_translate -unscale -ot Float32` writes
 * them (GDAL 3.6 computes value * scale + offset in double): the band math then sees the same numbers GDAL's
 * pipeline does.
 */
export function unscaleBand(values: ArrayLike<number>, so: ScaleOffset, n: number, invalid?: (k: number) => boolean): Float64Array {
  const out = new Float64Array(n);
  const { scale, offset } = so;
  for (let k = 0; k < n; k++) {
    const v = values[k] as number;
    out[k] = invalid?.(k) ? Number.NaN : Math.fround(v * scale + offset);
  }
  return out;
}
