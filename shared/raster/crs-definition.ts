import { InvalidParamsError } from '../domain/errors.js';
import {
  EPSG_DATUMS_TSV,
  EPSG_ELLIPSOIDS_TSV,
  EPSG_PRIME_MERIDIANS_TSV,
  EPSG_UNITS_TSV,
  PROJ_ELLIPSOIDS_TSV,
  PROJ_UNITS_TSV,
} from './crs-tables.generated.js';
import { EPSG_PROJ4_TSV } from './epsg-proj4.generated.js';

/**
 * A coordinate reference system that has no EPSG code, as Tessera models it: one of the projection methods below
 * (or geographic lon/lat), its parameters, an ellipsoid, an optional Helmert shift to WGS 84, a prime meridian
 * and a linear unit. GeoTIFF GeoKeys (crs-geokeys.ts), WKT 1 and 2, PROJJSON (crs-wkt.ts) and PROJ strings (here)
 * are all read into this one model, and it is written back out as a canonical PROJ string (what proj4js computes
 * with, and what identifies the CRS in a job key), as GeoKeys (the tiles' own georeferencing) and as WKT2 (VRT and
 * STAC outputs).
 *
 * Why a model of our own rather than handing every text to proj4js: proj4js accepts PROJ strings and some WKT, but
 * for a method it does not know it silently falls back or throws deep inside a transform, and it has no notion of a
 * canonical form or of GeoKeys. Here every input either maps onto a method whose arithmetic proj4js implements as
 * PROJ does (checked against GDAL, test/unit/raster/crs-definition.test.ts) or is refused by name.
 */

/** A CRS definition Tessera cannot use: a method, parameter, datum or unit it does not model. */
export class UnsupportedCrsError extends InvalidParamsError {}

/**
 * The projection methods modelled, by their PROJ names: transverse Mercator, Albers equal-area, Lambert azimuthal
 * equal-area, sinusoidal, polar stereographic (variants A and B), Lambert conformal conic (1SP and 2SP),
 * equidistant cylindrical (equirectangular) and Mercator (variants A and B).
 */
export const PROJECTION_METHODS = ['tmerc', 'aea', 'laea', 'sinu', 'stere', 'lcc', 'eqc', 'merc'] as const;
export type ProjectionMethod = (typeof PROJECTION_METHODS)[number];

/** Projection parameters by their PROJ names: angles in degrees, false easting / northing in metres. */
export type ProjParam = 'lat_0' | 'lon_0' | 'lat_1' | 'lat_2' | 'lat_ts' | 'k_0' | 'x_0' | 'y_0';

export interface Ellipsoid {
  /** Semi-major axis in metres. */
  readonly a: number;
  /** Inverse flattening; 0 for a sphere. */
  readonly rf: number;
}

export interface CrsNames {
  readonly crs?: string | undefined;
  readonly datum?: string | undefined;
  readonly ellipsoid?: string | undefined;
}

export interface CrsDefinition {
  /** Absent: a geographic CRS (longitude, latitude in degrees). */
  readonly projection?: { readonly method: ProjectionMethod; readonly params: Readonly<Partial<Record<ProjParam, number>>> } | undefined;
  readonly ellipsoid: Ellipsoid;
  /** The Helmert shift to WGS 84 (3 or 7 terms, PROJ's +towgs84), when the datum has one; absent: no shift is known. */
  readonly towgs84?: readonly number[] | undefined;
  /** Degrees east of Greenwich. */
  readonly primeMeridian: number;
  /** Metres per unit of the projected coordinates (1 for metres). */
  readonly toMeter: number;
  /** Names kept for the WKT2 written out; never part of the canonical form. */
  readonly names?: CrsNames | undefined;
}

/** Each method's parameters in canonical order, with their defaults. */
const METHOD_PARAMS: Readonly<Record<ProjectionMethod, readonly ProjParam[]>> = {
  tmerc: ['lat_0', 'lon_0', 'k_0', 'x_0', 'y_0'],
  aea: ['lat_0', 'lon_0', 'lat_1', 'lat_2', 'x_0', 'y_0'],
  laea: ['lat_0', 'lon_0', 'x_0', 'y_0'],
  sinu: ['lon_0', 'x_0', 'y_0'],
  stere: ['lat_0', 'lat_ts', 'lon_0', 'k_0', 'x_0', 'y_0'],
  lcc: ['lat_0', 'lon_0', 'lat_1', 'lat_2', 'k_0', 'x_0', 'y_0'],
  eqc: ['lat_ts', 'lat_0', 'lon_0', 'x_0', 'y_0'],
  merc: ['lat_ts', 'lon_0', 'k_0', 'x_0', 'y_0'],
};

export const SUPPORTED_METHODS_TEXT =
  'transverse Mercator, Albers equal-area, Lambert azimuthal equal-area, sinusoidal, polar stereographic (A, B), ' +
  'Lambert conformal conic (1SP, 2SP), equidistant cylindrical (equirectangular), Mercator (A, B), geographic';

/** The parameter set of a method, with defaults filled and variants settled (polar stereographic, Mercator, 1SP conics). */
export function normaliseProjection(
  method: ProjectionMethod,
  given: Readonly<Partial<Record<ProjParam, number>>>,
): Readonly<Partial<Record<ProjParam, number>>> {
  const p: Partial<Record<ProjParam, number>> = {};
  for (const [k, v] of Object.entries(given) as [ProjParam, number][]) {
    if (!METHOD_PARAMS[method].includes(k)) {
      // A parameter the method does not take changes nothing only when it holds its neutral value.
      if (v === (k === 'k_0' ? 1 : 0)) continue;
      throw new UnsupportedCrsError(`the ${method} projection takes no ${k} (got ${v}); remove it`);
    }
    if (!Number.isFinite(v)) throw new UnsupportedCrsError(`the ${method} projection's ${k} is ${v}, not a finite number`);
    p[k] = v;
  }
  for (const k of METHOD_PARAMS[method]) if (p[k] === undefined && k !== 'lat_ts' && k !== 'lat_2') p[k] = k === 'k_0' ? 1 : 0;
  if (method === 'lcc' || method === 'aea') {
    if (given.lat_1 === undefined) throw new UnsupportedCrsError(`the ${method} projection needs lat_1 (its first standard parallel)`);
    p.lat_2 ??= given.lat_1;
  }
  if (method === 'stere') {
    const lat0 = p.lat_0 as number;
    if (Math.abs(Math.abs(lat0) - 90) > 1e-9) {
      throw new UnsupportedCrsError(
        `stereographic projections are supported at a pole only (polar stereographic, lat_0 = 90 or -90); lat_0 is ${lat0}`,
      );
    }
    p.lat_0 = Math.sign(lat0) * 90;
    // Variant B names the latitude of true scale; at the pole itself it is variant A with scale 1.
    if (p.lat_ts !== undefined && Math.abs(Math.abs(p.lat_ts) - 90) < 1e-12) delete p.lat_ts;
    if (p.lat_ts !== undefined) {
      if (p.k_0 !== 1) throw new UnsupportedCrsError('a polar stereographic projection takes lat_ts or a scale factor k_0, not both');
      delete p.k_0;
    }
  }
  if (method === 'merc') {
    if (p.lat_ts === 0) delete p.lat_ts;
    if (p.lat_ts !== undefined) {
      if (p.k_0 !== 1) throw new UnsupportedCrsError('a Mercator projection takes lat_ts or a scale factor k_0, not both');
      delete p.k_0;
    }
  }
  if (method === 'eqc') p.lat_ts ??= 0;
  return p;
}

/** The projection's variant as EPSG names it (1SP / 2SP, A / B), for the WKT2 and GeoKeys written out. */
export function projectionVariant(method: ProjectionMethod, params: Readonly<Partial<Record<ProjParam, number>>>): string {
  if (method === 'lcc') return params.lat_1 === params.lat_2 && params.lat_0 === params.lat_1 ? '1SP' : '2SP';
  if (method === 'stere' || method === 'merc') return params.lat_ts === undefined ? 'A' : 'B';
  return '';
}

// ---------------------------------------------------------------------------------------------------------------------
// Tables (crs-tables.generated.ts, from proj.db and `proj -le` / `-lu`)

function tsv<T>(text: string, row: (cells: string[]) => [string, T]): Map<string, T> {
  const out = new Map<string, T>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [k, v] = row(line.split('\t'));
    out.set(k, v);
  }
  return out;
}

const lazy = <T>(make: () => T): (() => T) => {
  let value: T | undefined;
  return () => {
    value ??= make();
    return value;
  };
};

export const epsgEllipsoids = lazy(() =>
  tsv(EPSG_ELLIPSOIDS_TSV, (c) => [c[0] as string, { a: Number(c[1]), rf: Number(c[2]), name: c[3] as string }]),
);
export const epsgDatums = lazy(() =>
  tsv(EPSG_DATUMS_TSV, (c) => [
    c[0] as string,
    { ellipsoid: Number(c[1]), primeMeridian: Number(c[2]), geographicCrs: c[3] === '' ? undefined : Number(c[3]), name: c[4] as string },
  ]),
);
export const epsgPrimeMeridians = lazy(() =>
  tsv(EPSG_PRIME_MERIDIANS_TSV, (c) => [c[0] as string, { longitude: Number(c[1]), name: c[2] as string }]),
);
export const epsgUnits = lazy(() =>
  tsv(EPSG_UNITS_TSV, (c) => [c[0] as string, { kind: c[1] as string, factor: Number(c[2]), name: c[3] as string }]),
);
const projEllipsoids = lazy(() => tsv(PROJ_ELLIPSOIDS_TSV, (c) => [c[0] as string, { a: Number(c[1]), rf: Number(c[2]) }]));
const projUnits = lazy(() => tsv(PROJ_UNITS_TSV, (c) => [c[0] as string, Number(c[1])]));

/** The bundled EPSG definitions (epsg-proj4.generated.ts): code -> proj4 string. */
export const epsgProj4Table = lazy(() => {
  const table = new Map<number, string>();
  for (const line of EPSG_PROJ4_TSV.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab > 0) table.set(Number(line.slice(0, tab)), line.slice(tab + 1));
  }
  return table;
});

const geodeticCache = new Map<number, Pick<CrsDefinition, 'ellipsoid' | 'towgs84' | 'primeMeridian'> | undefined>();

/**
 * The ellipsoid, shift to WGS 84 and prime meridian of a bundled EPSG geographic CRS (what a user-defined projection on
 * GeographicTypeGeoKey 4269, or an EPSG datum, is based on). Undefined when the code is not bundled or its proj4 string
 * is not one the model reads.
 */
export function epsgGeodetic(code: number): Pick<CrsDefinition, 'ellipsoid' | 'towgs84' | 'primeMeridian'> | undefined {
  if (geodeticCache.has(code)) return geodeticCache.get(code);
  const text = epsgProj4Table().get(code);
  let out: Pick<CrsDefinition, 'ellipsoid' | 'towgs84' | 'primeMeridian'> | undefined;
  if (text !== undefined && /^\+proj=longlat\b/.test(text)) {
    try {
      const def = parseProjString(text);
      out = { ellipsoid: def.ellipsoid, ...(def.towgs84 === undefined ? {} : { towgs84: def.towgs84 }), primeMeridian: def.primeMeridian };
    } catch {
      out = undefined;
    }
  }
  geodeticCache.set(code, out);
  return out;
}

/** PROJ's named prime meridians (`+pm=paris`), degrees east of Greenwich (PROJ's pj_prime_meridians). */
const PROJ_PRIME_MERIDIANS: Readonly<Record<string, number>> = {
  greenwich: 0,
  lisbon: -9.131906111111,
  paris: 2.337229166667,
  bogota: -74.080916666667,
  madrid: -3.687938888889,
  rome: 12.452333333333,
  bern: 7.439583333333,
  jakarta: 106.807719444444,
  ferro: -17.666666666667,
  brussels: 4.367975,
  stockholm: 18.058277777778,
  athens: 23.7163375,
  oslo: 10.722916666667,
  copenhagen: 12.57788,
};

/**
 * PROJ's `+datum=` names Tessera resolves: the ellipsoid and the shift to WGS 84. NAD27's shift needs grids that are
 * not bundled, so it gets none (as EPSG:4267 gets none: docs/reprojection.md).
 */
const PROJ_DATUMS: Readonly<Record<string, { ellps: string; towgs84?: readonly number[] }>> = {
  WGS84: { ellps: 'WGS84', towgs84: [0, 0, 0] },
  NAD83: { ellps: 'GRS80', towgs84: [0, 0, 0] },
  NAD27: { ellps: 'clrk66' },
};

/** WGS 84's ellipsoid. */
export const WGS84_ELLIPSOID: Ellipsoid = { a: 6378137, rf: 298.257223563 };

// ---------------------------------------------------------------------------------------------------------------------
// Celestial bodies

/**
 * Earth's reference ellipsoids all have a semi-major axis within a few km of 6,378 km (the smallest in EPSG, Plessis
 * 1817, 6,376,523 m; spheres of 6,370,997 m and 6,371,007 m): anything outside 6,350-6,400 km is another body (Mars
 * 3,396,190 m, the Moon 1,737,400 m), and is never reprojected onto an Earth CRS.
 */
export function isEarth(e: Ellipsoid): boolean {
  return e.a >= 6_350_000 && e.a <= 6_400_000;
}

/** A key naming the body a definition is on: `Earth`, or the ellipsoid of another body. */
export function bodyOf(def: CrsDefinition): string {
  return isEarth(def.ellipsoid)
    ? 'Earth'
    : `a body of semi-major axis ${fmt(def.ellipsoid.a)} m, inverse flattening ${fmt(def.ellipsoid.rf)}`;
}

// ---------------------------------------------------------------------------------------------------------------------
// PROJ strings

/**
 * A number as the canonical form writes it: 12 significant digits, no -0. A unit conversion or a WKT writer leaves
 * noise in the last digits (GDAL writes GRS80's inverse flattening 298.257222101 as 298.257222101004, 700 km of false
 * easting through US feet as 699999.999999999); 12 digits drop it and keep a micrometre of a false easting.
 */
export function fmt(v: number): string {
  const r = Number(v.toPrecision(12));
  return Object.is(r, -0) ? '0' : String(r);
}

/**
 * The canonical PROJ string of a definition: `+proj=` then the method's parameters in a fixed order with their
 * defaults written out, the ellipsoid as `+a= +rf=` (`+R=` for a sphere), `+towgs84=` when a shift is known, `+pm=`
 * off Greenwich, the unit as `+units=m` or `+to_meter=`, `+no_defs`. Two definitions of the same CRS (from GeoKeys,
 * WKT, PROJJSON or another PROJ string) give the same text; names never enter it.
 */
export function canonicalProjString(def: CrsDefinition): string {
  const parts: string[] = [];
  if (def.projection === undefined) parts.push('+proj=longlat');
  else {
    const { method, params } = def.projection;
    parts.push(`+proj=${method}`);
    for (const k of METHOD_PARAMS[method]) {
      const v = params[k];
      if (v !== undefined) parts.push(`+${k}=${fmt(v)}`);
    }
  }
  const { a, rf } = def.ellipsoid;
  parts.push(rf === 0 ? `+R=${fmt(a)}` : `+a=${fmt(a)} +rf=${fmt(rf)}`);
  if (def.towgs84 !== undefined) parts.push(`+towgs84=${canonicalTowgs84(def.towgs84).map(fmt).join(',')}`);
  if (def.primeMeridian !== 0) parts.push(`+pm=${fmt(def.primeMeridian)}`);
  if (def.projection !== undefined) parts.push(def.toMeter === 1 ? '+units=m' : `+to_meter=${fmt(def.toMeter)}`);
  parts.push('+no_defs');
  return parts.join(' ');
}

/** Seven terms whose rotations and scale are zero are the same shift as their three translations. */
export function canonicalTowgs84(t: readonly number[]): readonly number[] {
  if (t.length !== 3 && t.length !== 7) throw new UnsupportedCrsError(`a towgs84 shift has 3 or 7 terms, not ${t.length}`);
  if (!t.every(Number.isFinite)) throw new UnsupportedCrsError(`towgs84 ${t.join(',')} has a term that is not a number`);
  return t.length === 7 && t.slice(3).every((v) => v === 0) ? t.slice(0, 3) : t;
}

const IGNORED_PROJ_KEYS = new Set(['no_defs', 'wktext', 'type', 'title']);

/**
 * A PROJ string (`+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m`) as a definition.
 * `+proj=utm +zone=N [+south]` is read as the transverse Mercator it is. Keys that would change the arithmetic in
 * ways the model does not carry (`+nadgrids`, `+axis` other than enu, `+lon_wrap`, `+approx`, ...) are refused.
 */
export function parseProjString(text: string): CrsDefinition {
  const kv = new Map<string, string | true>();
  for (const token of text.trim().split(/\s+/)) {
    const t = token.startsWith('+') ? token.slice(1) : token;
    if (t === '') continue;
    const eq = t.indexOf('=');
    const key = (eq < 0 ? t : t.slice(0, eq)).toLowerCase();
    if (kv.has(key)) throw new UnsupportedCrsError(`PROJ string ${JSON.stringify(text)} gives +${key} twice`);
    kv.set(key, eq < 0 ? true : t.slice(eq + 1));
  }
  const used = new Set<string>(['proj']);
  const str = (key: string): string | undefined => {
    const v = kv.get(key);
    used.add(key);
    if (v === true) throw new UnsupportedCrsError(`PROJ parameter +${key} needs a value (+${key}=...)`);
    return v;
  };
  const num = (key: string): number | undefined => {
    const v = str(key);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n)) throw new UnsupportedCrsError(`PROJ parameter +${key}=${v} is not a number`);
    return n;
  };
  const flag = (key: string): boolean => {
    used.add(key);
    return kv.has(key);
  };
  const proj = kv.get('proj');
  if (typeof proj !== 'string') throw new UnsupportedCrsError(`${JSON.stringify(text)} is not a PROJ string: it has no +proj=`);
  for (const key of ['nadgrids', 'geoidgrids', 'lon_wrap', 'over', 'approx', 'gamma', 'alpha', 'lonc']) {
    if (kv.has(key)) throw new UnsupportedCrsError(`PROJ parameter +${key} is not supported by Tessera; remove it or use an EPSG code`);
  }
  const axis = str('axis');
  if (axis !== undefined && axis !== 'enu') {
    throw new UnsupportedCrsError(`PROJ +axis=${axis} is not supported: Tessera's grids are east, north (+axis=enu)`);
  }
  // The ellipsoid: +R, +a with +rf / +b / +f, +ellps, or a +datum's.
  const datumName = str('datum');
  const datum = datumName === undefined ? undefined : PROJ_DATUMS[datumName];
  if (datumName !== undefined && datum === undefined) {
    throw new UnsupportedCrsError(
      `PROJ +datum=${datumName} is not one Tessera resolves (it knows ${Object.keys(PROJ_DATUMS).join(', ')}); give +ellps= and +towgs84= instead`,
    );
  }
  const ellpsName = str('ellps') ?? datum?.ellps;
  let ellipsoid: Ellipsoid | undefined;
  if (ellpsName !== undefined) {
    ellipsoid = projEllipsoids().get(ellpsName);
    if (ellipsoid === undefined) throw new UnsupportedCrsError(`PROJ +ellps=${ellpsName} is not an ellipsoid PROJ names (proj -le)`);
  }
  const R = num('r');
  const a = num('a');
  if (R !== undefined) ellipsoid = { a: R, rf: 0 };
  else if (a !== undefined) {
    const rf = num('rf');
    const b = num('b');
    const f = num('f');
    const es = num('es');
    if (rf !== undefined) ellipsoid = { a, rf };
    else if (b !== undefined) ellipsoid = { a, rf: b === a ? 0 : a / (a - b) };
    else if (f !== undefined) ellipsoid = { a, rf: f === 0 ? 0 : 1 / f };
    else if (es !== undefined) ellipsoid = { a, rf: es === 0 ? 0 : 1 / (1 - Math.sqrt(1 - es)) };
    else if (ellipsoid === undefined) ellipsoid = { a, rf: 0 };
    else ellipsoid = { a, rf: ellipsoid.rf };
  } else {
    for (const key of ['rf', 'b', 'f', 'es']) {
      if (kv.has(key)) throw new UnsupportedCrsError(`PROJ +${key} needs +a (the semi-major axis) beside it`);
    }
  }
  if (ellipsoid === undefined) {
    throw new UnsupportedCrsError(`PROJ string ${JSON.stringify(text)} names no ellipsoid: add +ellps=, +datum=, +a= with +rf=, or +R=`);
  }
  if (!(ellipsoid.a > 0) || !(ellipsoid.rf === 0 || ellipsoid.rf > 1)) {
    throw new UnsupportedCrsError(`PROJ string ${JSON.stringify(text)} has an impossible ellipsoid (a=${ellipsoid.a}, rf=${ellipsoid.rf})`);
  }
  const towgs84Text = str('towgs84');
  const towgs84 = towgs84Text === undefined ? datum?.towgs84 : towgs84Text.split(',').map((v) => Number(v));
  const pmText = str('pm');
  let primeMeridian = 0;
  if (pmText !== undefined) {
    // A named meridian is EPSG's (GDAL reads +pm=paris as EPSG 8903, 2.33722917), else PROJ's own value.
    const epsg = [...epsgPrimeMeridians().values()].find((pm) => pm.name.toLowerCase() === pmText.toLowerCase());
    const named = epsg?.longitude ?? PROJ_PRIME_MERIDIANS[pmText.toLowerCase()];
    primeMeridian = named ?? Number(pmText);
    if (!Number.isFinite(primeMeridian)) throw new UnsupportedCrsError(`PROJ +pm=${pmText} is neither a meridian PROJ names nor degrees`);
  }
  let toMeter = 1;
  const units = str('units');
  const toMeterText = num('to_meter');
  if (toMeterText !== undefined) toMeter = toMeterText;
  else if (units !== undefined) {
    const f = projUnits().get(units);
    if (f === undefined) throw new UnsupportedCrsError(`PROJ +units=${units} is not a unit PROJ names (proj -lu)`);
    toMeter = f;
  }
  if (!(toMeter > 0)) throw new UnsupportedCrsError(`PROJ +to_meter=${toMeter} is not a positive length`);
  const base = {
    ellipsoid,
    ...(towgs84 === undefined ? {} : { towgs84: canonicalTowgs84(towgs84) }),
    primeMeridian,
  };
  const params: Partial<Record<ProjParam, number>> = {};
  const take = (key: ProjParam, ...aliases: string[]) => {
    for (const k of [key, ...aliases]) {
      const v = num(k);
      if (v !== undefined) {
        if (params[key] !== undefined) throw new UnsupportedCrsError(`PROJ string gives ${key} twice (+${k})`);
        params[key] = v;
      }
    }
  };
  let method: ProjectionMethod;
  if (['longlat', 'lonlat', 'latlong', 'latlon'].includes(proj)) {
    finish(kv, used, text);
    return { ...base, toMeter: 1 };
  }
  if (proj === 'utm') {
    const zone = num('zone');
    if (zone === undefined || !Number.isInteger(zone) || zone < 1 || zone > 60) {
      throw new UnsupportedCrsError(`PROJ +proj=utm needs +zone=1..60, got ${JSON.stringify(kv.get('zone') ?? null)}`);
    }
    const south = flag('south');
    method = 'tmerc';
    Object.assign(params, { lat_0: 0, lon_0: zone * 6 - 183, k_0: 0.9996, x_0: 500_000, y_0: south ? 10_000_000 : 0 });
  } else if ((PROJECTION_METHODS as readonly string[]).includes(proj)) {
    method = proj as ProjectionMethod;
    for (const k of ['lat_0', 'lon_0', 'lat_1', 'lat_2', 'lat_ts', 'x_0', 'y_0'] as const) take(k);
    take('k_0', 'k');
  } else {
    throw new UnsupportedCrsError(
      `PROJ +proj=${proj} is not a projection Tessera models; it models ${SUPPORTED_METHODS_TEXT} (PROJ tmerc, utm, aea, laea, sinu, stere, lcc, eqc, merc, longlat)`,
    );
  }
  finish(kv, used, text);
  // PROJ's x_0 and y_0 are metres whatever +units says.
  return { ...base, projection: { method, params: normaliseProjection(method, params) }, toMeter };
}

function finish(kv: ReadonlyMap<string, string | true>, used: ReadonlySet<string>, text: string): void {
  const unknown = [...kv.keys()].filter((k) => !used.has(k) && !IGNORED_PROJ_KEYS.has(k));
  if (unknown.length > 0) {
    throw new UnsupportedCrsError(
      `PROJ string ${JSON.stringify(text)} has parameter(s) ${unknown.map((k) => `+${k}`).join(' ')} that this projection does not take or Tessera does not model; remove them`,
    );
  }
}

/** Looks up an EPSG length unit's metres. */
export function epsgLengthUnit(code: number): number | undefined {
  const u = epsgUnits().get(String(code));
  return u?.kind === 'length' ? u.factor : undefined;
}

/** Looks up an EPSG angle unit, in radians. */
export function epsgAngleUnit(code: number): number | undefined {
  const u = epsgUnits().get(String(code));
  return u?.kind === 'angle' ? u.factor : undefined;
}

/** The value of an angle in degrees, given the unit's size in radians (exact for degrees themselves). */
export function toDegrees(value: number, radiansPerUnit: number): number {
  return Math.abs(radiansPerUnit - Math.PI / 180) < 1e-15 ? value : (value * radiansPerUnit * 180) / Math.PI;
}
