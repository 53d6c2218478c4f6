import proj4 from 'proj4';
import { InvalidParamsError } from '../domain/errors.js';
import { EPSG_PROJ4_TSV } from './epsg-proj4.generated.js';

/**
 * Coordinate reference systems by EPSG code, offline.
 *
 * The definitions are PROJ's own (proj.db, the database gdalwarp resolves codes with), exported once as
 * proj4 strings by scripts/generate-epsg-proj4.py into epsg-proj4.generated.ts: nothing is fetched at run
 * time, and the GDAL comparisons in test/unit/raster/ check against the same definitions. proj4js does the
 * arithmetic. Datum shifts: a proj4 string carries `+towgs84` where PROJ knows a single Helmert
 * transformation; a datum that needs a grid (NAD27's `+nadgrids`) is shifted only when the grid is loaded,
 * and no grid is bundled, so such CRSs fall back to no shift (PROJ's own "ballpark" fallback): see
 * docs/reprojection.md.
 */

/** A CRS code Tessera has no definition for (not in EPSG, deprecated, or not expressible in proj4). */
export class UnknownCrsError extends InvalidParamsError {}

export interface Crs {
  readonly epsg: number;
  /** The proj4 definition, as PROJ exported it. */
  readonly proj4: string;
  /** A geographic (lon/lat, degrees) CRS rather than a projected one. */
  readonly geographic: boolean;
}

let table: Map<number, string> | undefined;

function definitions(): Map<number, string> {
  if (table) return table;
  table = new Map();
  for (const line of EPSG_PROJ4_TSV.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab > 0) table.set(Number(line.slice(0, tab)), line.slice(tab + 1));
  }
  return table;
}

/** How many EPSG definitions are bundled. */
export function bundledEpsgCount(): number {
  return definitions().size;
}

/**
 * The CRS for an EPSG code (`4326`, `'EPSG:3857'`, `'epsg:32618'`). Throws UnknownCrsError for a code
 * that is not a non-deprecated geographic 2D or projected CRS in the bundled EPSG set.
 */
export function crsFromEpsg(code: number | string): Crs {
  const text = String(code).trim();
  const m = /^(?:EPSG:)?(\d{4,6})$/i.exec(text);
  if (!m) {
    throw new UnknownCrsError(`${JSON.stringify(text)} is not an EPSG code; write it as EPSG:<number>, e.g. EPSG:3857 or EPSG:32631`);
  }
  const epsg = Number(m[1]);
  const def = definitions().get(epsg);
  if (def === undefined) {
    throw new UnknownCrsError(
      `EPSG:${epsg} is not among the ${definitions().size} geographic 2D and projected CRSs Tessera bundles ` +
        '(deprecated, vertical, compound, geocentric and unknown codes are not); pick its current code with `projinfo EPSG:<code>`',
    );
  }
  return { epsg, proj4: def, geographic: /^\+proj=longlat\b/.test(def) };
}

/** Transforms many points from one CRS to another in place; a point that cannot be transformed becomes NaN. */
export type PointTransform = (xs: Float64Array, ys: Float64Array) => void;

/** A transform between two CRSs (identity when they are the same code). */
export function crsTransform(from: Crs, to: Crs): PointTransform {
  if (from.epsg === to.epsg) return () => {};
  const converter = proj4(from.proj4, to.proj4);
  const point = { x: 0, y: 0 };
  return (xs, ys) => {
    for (let i = 0; i < xs.length; i++) {
      const x = xs[i] as number;
      const y = ys[i] as number;
      if (!Number.isFinite(x) || !Number.isFinite(y)) {
        xs[i] = Number.NaN;
        ys[i] = Number.NaN;
        continue;
      }
      point.x = x;
      point.y = y;
      let out: { x: number; y: number } | undefined;
      try {
        // proj4js throws for some out-of-domain inputs and returns Infinity/NaN for others.
        out = converter.forward(point, true) as { x: number; y: number } | undefined;
      } catch {
        out = undefined;
      }
      if (out && Number.isFinite(out.x) && Number.isFinite(out.y)) {
        xs[i] = out.x;
        ys[i] = out.y;
      } else {
        xs[i] = Number.NaN;
        ys[i] = Number.NaN;
      }
    }
  };
}
