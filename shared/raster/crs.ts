import proj4 from 'proj4';
import { InvalidParamsError, UnsupportedRasterError } from '../domain/errors.js';
import { bodyOf, type CrsDefinition, canonicalProjString, epsgProj4Table, parseProjString, UnsupportedCrsError } from './crs-definition.js';
import { definitionToWkt2, type ParsedCrsText, parseProjJson, parseWkt } from './crs-wkt.js';
import type { RasterCrs } from './georeferencing.js';

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

/**
 * A reprojection between CRSs on different celestial bodies (an ellipsoid that is not Earth's, e.g. Mars's 3,396,190 m,
 * onto an Earth CRS or tile matrix set): there is no transformation between them.
 */
export class CelestialBodyMismatchError extends UnsupportedRasterError {}

export interface Crs {
  /** The EPSG code; absent for a CRS defined by its parameters (GeoKeys, WKT, PROJJSON or a PROJ string). */
  readonly epsg?: number | undefined;
  /** The proj4 definition: PROJ's export for an EPSG code, the canonical PROJ string otherwise. */
  readonly proj4: string;
  /** A geographic (lon/lat, degrees) CRS rather than a projected one. */
  readonly geographic: boolean;
  /** What identifies the CRS: `EPSG:<n>`, or the canonical PROJ string of a CRS without a code (crs-definition.ts). */
  readonly id: string;
  /** `Earth`, or the ellipsoid of another body: CRSs on different bodies never transform into each other. */
  readonly body: string;
  /** The parameters of a CRS without an EPSG code (what its GeoKeys, WKT2 and STAC output are written from). */
  readonly definition?: CrsDefinition | undefined;
}

/** A CRS named by an EPSG code. */
export interface EpsgCrs extends Crs {
  readonly epsg: number;
}

const definitions = epsgProj4Table;

/** How many EPSG definitions are bundled. */
export function bundledEpsgCount(): number {
  return definitions().size;
}

/**
 * The CRS for an EPSG code (`4326`, `'EPSG:3857'`, `'epsg:32618'`). Throws UnknownCrsError for a code
 * that is not a non-deprecated geographic 2D or projected CRS in the bundled EPSG set.
 */
export function crsFromEpsg(code: number | string): EpsgCrs {
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
  return { epsg, proj4: def, geographic: /^\+proj=longlat\b/.test(def), id: `EPSG:${epsg}`, body: 'Earth' };
}

/** Transforms many points from one CRS to another in place; a point that cannot be transformed becomes NaN. */
export type PointTransform = (xs: Float64Array, ys: Float64Array) => void;

/**
 * A transform between two CRSs (identity when they are the same CRS). Throws CelestialBodyMismatchError between CRSs
 * on different bodies: proj4js would happily treat Mars's degrees as Earth's, which is no transformation at all.
 */
export function crsTransform(from: Crs, to: Crs): PointTransform {
  if (from.id === to.id) return () => {};
  assertSameBody(from, to);
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

/** Throws CelestialBodyMismatchError when two CRSs are on different bodies. */
export function assertSameBody(from: Crs, to: Crs): void {
  if (from.body === to.body) return;
  throw new CelestialBodyMismatchError(
    `cannot transform between ${from.id} (on ${from.body}) and ${to.id} (on ${to.body}): they are on different ` +
      'celestial bodies; process the scene on its own grid (no --crs / --tms), or name a target CRS on the same body',
  );
}

/**
 * The CRS of a definition without an EPSG code. Throws UnsupportedCrsError when proj4js cannot build it (a spherical
 * transverse Mercator, for one, which proj4js computes only approximately).
 */
export function crsFromDefinition(definition: CrsDefinition): Crs {
  const text = canonicalProjString(definition);
  try {
    proj4(text, crsFromEpsg(4326).proj4);
  } catch (cause) {
    throw new UnsupportedCrsError(`the CRS ${text} cannot be computed by proj4js: ${(cause as Error).message}`, { cause });
  }
  return { proj4: text, geographic: definition.projection === undefined, id: text, body: bodyOf(definition), definition };
}

/** The definition of a bundled EPSG CRS when the model reads its proj4 string (undefined for other methods). */
function epsgDefinition(code: number): CrsDefinition | undefined {
  const text = definitions().get(code);
  if (text === undefined) return undefined;
  try {
    return parseProjString(text);
  } catch {
    return undefined;
  }
}

/** A CRS text in any form Tessera reads, told apart by its first characters. */
function parsedText(input: string | object): ParsedCrsText | { epsg: number } | { proj: string } {
  if (typeof input === 'object') return parseProjJson(input);
  const text = input.trim();
  const code = /^EPSG:(\d{1,6})$/i.exec(text);
  if (code) return { epsg: Number(code[1]) };
  if (text.startsWith('{')) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (cause) {
      throw new UnsupportedCrsError(`the CRS text starts with { but is not JSON (PROJJSON): ${(cause as Error).message}`, { cause });
    }
    return parseProjJson(json);
  }
  if (text.startsWith('+') || /^proj=/.test(text)) return { proj: text };
  if (/^[A-Za-z_]+\s*[[(]/.test(text)) return parseWkt(text);
  throw new UnsupportedCrsError(
    `${JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}...` : text)} is not a CRS Tessera reads: give EPSG:<number>, WKT (1 or 2), PROJJSON or a PROJ string (+proj=...)`,
  );
}

/**
 * A CRS from any form GDAL's `-t_srs` takes and Tessera models: `EPSG:<n>`, WKT 1 or WKT2, PROJJSON (text or object)
 * or a PROJ string. A WKT or PROJJSON whose root carries a bundled EPSG ID is that EPSG CRS; anything else is built
 * from its parameters (crs-definition.ts). Throws UnknownCrsError for an unknown code, UnsupportedCrsError (both
 * INVALID_PARAMS) for a definition Tessera does not model, saying what it does model.
 */
export function parseCrs(input: string | object): Crs {
  const parsed = parsedText(input);
  if ('proj' in parsed) return crsFromDefinition(parseProjString(parsed.proj));
  if (!('definition' in parsed)) return crsFromEpsg(parsed.epsg);
  if (parsed.epsg !== undefined && definitions().has(parsed.epsg)) return crsFromEpsg(parsed.epsg);
  return crsFromDefinition(parsed.definition());
}

/**
 * The canonical text of a CRS, what a job key holds (`params.dst_crs`): `EPSG:<n>`, or the canonical PROJ string of a
 * CRS without a code, so every spelling of one CRS (WKT, PROJJSON, PROJ with parameters in another order) is one key.
 */
export function canonicalCrsText(input: string | object): string {
  return parseCrs(input).id;
}

const rasterCrsCache = new Map<string, Crs>();

/**
 * The CRS a raster or target grid carries ({ epsg } or { wkt }). A WKT is parsed once per distinct text. Throws
 * UnsupportedRasterError naming `what` when the raster has no CRS or one Tessera cannot compute with.
 */
export function crsOfRaster(crs: RasterCrs, what: string): Crs {
  if (crs.epsg !== undefined) return crsFromEpsg(crs.epsg);
  if (crs.wkt === undefined) throw new UnsupportedRasterError(`${what} has no CRS; assign one (gdal_edit.py -a_srs EPSG:<code>)`);
  const cached = rasterCrsCache.get(crs.wkt);
  if (cached !== undefined) return cached;
  let out: Crs;
  try {
    out = parseCrs(crs.wkt);
  } catch (cause) {
    throw new UnsupportedRasterError(`${what}: ${(cause as Error).message}`, { cause });
  }
  if (rasterCrsCache.size > 256) rasterCrsCache.clear();
  rasterCrsCache.set(crs.wkt, out);
  return out;
}

/** The raster CRS form of a CRS (what a target grid, a manifest and a tile job carry): its code, or its WKT2. */
export function rasterCrsOf(crs: Crs): { readonly epsg?: number; readonly wkt?: string } {
  if (crs.epsg !== undefined) return { epsg: crs.epsg };
  return { wkt: crsWkt2(crs) };
}

/** WKT2:2019 of a CRS without an EPSG code (the VRT's SRS, STAC's proj:wkt2). */
export function crsWkt2(crs: Crs): string {
  if (crs.definition === undefined) throw new Error(`crsWkt2: ${crs.id} has an EPSG code; write the code`);
  return definitionToWkt2(crs.definition);
}

/**
 * True when two CRSs compute the same coordinates: the same id, or the same canonical definition (a user-defined UTM
 * and its EPSG code). Used to tell whether band files share a CRS and whether a band already lies on the target grid.
 */
export function sameCrs(a: Crs, b: Crs): boolean {
  if (a.id === b.id) return true;
  const da = a.definition ?? (a.epsg === undefined ? undefined : epsgDefinition(a.epsg));
  const db = b.definition ?? (b.epsg === undefined ? undefined : epsgDefinition(b.epsg));
  return da !== undefined && db !== undefined && canonicalProjString(da) === canonicalProjString(db);
}

/** The keys of a proj4 string that say where its coordinates are computed: the ellipsoid, the datum, the prime meridian. */
const GEODETIC_KEYS = /^\+(?:a|b|rf|f|R|ellps|datum|towgs84|nadgrids|pm)=/;
const geographicCache = new Map<string, Crs>();

/**
 * The geographic (lon, lat in degrees) CRS a CRS is computed on: its ellipsoid, datum and prime meridian, no
 * projection. A point moved between a CRS and its geographic CRS crosses no datum.
 */
export function geographicOf(crs: Crs): Crs {
  if (crs.geographic) return crs;
  const cached = geographicCache.get(crs.id);
  if (cached !== undefined) return cached;
  const text = ['+proj=longlat', ...crs.proj4.split(/\s+/).filter((t) => GEODETIC_KEYS.test(t)), '+no_defs'].join(' ');
  const out: Crs = { proj4: text, geographic: true, id: `geographic of ${crs.id}`, body: crs.body };
  geographicCache.set(crs.id, out);
  return out;
}

const longitudeAxes = new Map<string, { center: number; period: number } | undefined>();

/**
 * For a CRS whose x grows linearly with longitude and wraps at the antimeridian (geographic, Mercator, equidistant
 * cylindrical, cylindrical equal-area): x at its central meridian and the x span of 360 degrees (360 for degrees,
 * 2 pi a k0 for Web Mercator). Undefined for other CRSs. What a footprint across 180 degrees is unwrapped with.
 */
export function longitudeAxis(crs: Crs): { center: number; period: number } | undefined {
  if (longitudeAxes.has(crs.id)) return longitudeAxes.get(crs.id);
  let out: { center: number; period: number } | undefined;
  if (crs.geographic) out = { center: 0, period: 360 };
  else if (/^\+proj=(?:merc|eqc|cea)\b/.test(crs.proj4)) {
    const lon0 = Number(/\+lon_0=(\S+)/.exec(crs.proj4)?.[1] ?? 0);
    const xs = Float64Array.of(lon0 - 90, lon0, lon0 + 90);
    const ys = new Float64Array(3);
    crsTransform(geographicOf(crs), crs)(xs, ys);
    const period = 2 * ((xs[2] as number) - (xs[0] as number));
    if (Number.isFinite(period) && period > 0) out = { center: xs[1] as number, period };
  }
  longitudeAxes.set(crs.id, out);
  return out;
}
