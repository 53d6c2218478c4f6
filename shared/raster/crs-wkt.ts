import {
  type CrsDefinition,
  canonicalTowgs84,
  type Ellipsoid,
  epsgDatums,
  epsgEllipsoids,
  epsgGeodetic,
  epsgUnits,
  fmt,
  normaliseProjection,
  type ProjectionMethod,
  type ProjParam,
  projectionVariant,
  SUPPORTED_METHODS_TEXT,
  toDegrees,
  UnsupportedCrsError,
  WGS84_ELLIPSOID,
} from './crs-definition.js';

/**
 * WKT 1 (GDAL's and ESRI's), WKT2 (2015 and 2019) and PROJJSON read into a CrsDefinition, and a definition written
 * as WKT2:2019 (the VRT's SRS and the STAC Item's `proj:wkt2`).
 *
 * proj4js reads WKT 1 and, through wkt-parser, some WKT2 and PROJJSON, but maps methods by loose name matching and
 * drops what it does not know (a datum ensemble's ellipsoid, a parameter's unit, Polar Stereographic variant B's
 * latitude of standard parallel); a reader of our own maps the methods Tessera models by their EPSG method and
 * parameter codes (or names where a WKT 1 has no codes) and refuses the rest, so what it accepts is computed right.
 */

/** What a CRS text names: an EPSG code (its root carries one), and how to build the definition it spells out. */
export interface ParsedCrsText {
  readonly epsg?: number | undefined;
  readonly definition: () => CrsDefinition;
}

type WktValue = WktNode | string | number | { readonly enum: string };
interface WktNode {
  readonly kw: string;
  readonly args: readonly WktValue[];
}

const isNode = (v: WktValue | undefined): v is WktNode => typeof v === 'object' && v !== null && 'kw' in v;
const norm = (s: string) => s.toLowerCase().replace(/[^a-z0-9]/g, '');
const RAD_PER_DEGREE = Math.PI / 180;

/** Tokenises and parses WKT (`KEYWORD[...]` or `KEYWORD(...)`, quoted strings with `""` escapes, numbers, enums). */
export function parseWktTree(text: string): WktNode {
  let i = 0;
  const fail = (why: string): never => {
    throw new UnsupportedCrsError(`WKT is malformed at character ${i}: ${why}`);
  };
  const ws = () => {
    while (i < text.length && /\s/.test(text[i] as string)) i++;
  };
  const word = (): string => {
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i));
    if (!m) return fail(`expected a keyword, found ${JSON.stringify(text.slice(i, i + 10))}`);
    i += m[0].length;
    return m[0];
  };
  const value = (): WktValue => {
    ws();
    const c = text[i];
    if (c === '"') {
      let out = '';
      i++;
      for (;;) {
        if (i >= text.length) fail('unterminated string');
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            out += '"';
            i += 2;
            continue;
          }
          i++;
          return out;
        }
        out += text[i];
        i++;
      }
    }
    const m = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/.exec(text.slice(i));
    if (m) {
      i += m[0].length;
      return Number(m[0]);
    }
    const kw = word();
    ws();
    if (text[i] === '[' || text[i] === '(') return node(kw);
    return { enum: kw };
  };
  const node = (kw: string): WktNode => {
    const close = text[i] === '[' ? ']' : ')';
    i++;
    const args: WktValue[] = [];
    ws();
    if (text[i] === close) {
      i++;
      return { kw: kw.toUpperCase(), args };
    }
    for (;;) {
      args.push(value());
      ws();
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === close) {
        i++;
        return { kw: kw.toUpperCase(), args };
      }
      fail(`expected , or ${close}`);
    }
  };
  ws();
  const kw = word();
  ws();
  if (text[i] !== '[' && text[i] !== '(') fail('expected [ after the root keyword');
  const root = node(kw);
  ws();
  if (i !== text.length) fail('text after the root object');
  return root;
}

const children = (n: WktNode, ...kws: string[]) => n.args.filter((a): a is WktNode => isNode(a) && kws.includes(a.kw));
const child = (n: WktNode, ...kws: string[]) => children(n, ...kws)[0];
const nameOf = (n: WktNode | undefined) => (typeof n?.args[0] === 'string' ? n.args[0] : undefined);
const numArg = (n: WktNode, k: number, what: string): number => {
  const v = n.args[k];
  if (typeof v !== 'number') throw new UnsupportedCrsError(`WKT ${n.kw}[${nameOf(n) ?? ''}]: ${what} is not a number`);
  return v;
};

/** The EPSG code of an AUTHORITY["EPSG","n"] (WKT 1) or ID["EPSG",n] (WKT2) directly inside `n`. */
function epsgIdOf(n: WktNode | undefined): number | undefined {
  if (n === undefined) return undefined;
  for (const id of children(n, 'ID', 'AUTHORITY')) {
    if (typeof id.args[0] === 'string' && id.args[0].toUpperCase() === 'EPSG') {
      const code = Number(id.args[1]);
      if (Number.isInteger(code) && code > 0) return code;
    }
  }
  return undefined;
}

const WKT1_ROOTS = new Set(['PROJCS', 'GEOGCS']);
const WKT2_PROJECTED = new Set(['PROJCRS', 'PROJECTEDCRS']);
const WKT2_GEOGRAPHIC = new Set(['GEOGCRS', 'GEOGRAPHICCRS', 'GEODCRS', 'GEODETICCRS', 'BASEGEOGCRS', 'BASEGEODCRS']);

/** WKT 1 or 2 text as an EPSG code (when its root has one) and a definition. */
export function parseWkt(text: string): ParsedCrsText {
  const root = parseWktTree(text);
  if (root.kw === 'BOUNDCRS') {
    const source = child(child(root, 'SOURCECRS') ?? root, ...WKT2_PROJECTED, ...WKT2_GEOGRAPHIC);
    if (source === undefined) throw new UnsupportedCrsError('WKT BOUNDCRS has no SOURCECRS holding a projected or geographic CRS');
    // A bound CRS's own datum shift is what GDAL uses, so the shift is part of the definition (not the source's code alone).
    return { definition: () => ({ ...wkt2Crs(source), towgs84: wkt2Towgs84(root) }) };
  }
  if (root.kw === 'COMPD_CS' || root.kw === 'COMPOUNDCRS') {
    throw new UnsupportedCrsError('a compound (horizontal + vertical) CRS is not a raster grid CRS; give its horizontal CRS alone');
  }
  if (WKT1_ROOTS.has(root.kw)) return { epsg: epsgIdOf(root), definition: () => wkt1Crs(root) };
  if (WKT2_PROJECTED.has(root.kw) || WKT2_GEOGRAPHIC.has(root.kw)) return { epsg: epsgIdOf(root), definition: () => wkt2Crs(root) };
  throw new UnsupportedCrsError(
    `WKT ${root.kw}[...] is not a projected or geographic CRS (Tessera reads PROJCS, GEOGCS, PROJCRS, GEOGCRS, BOUNDCRS)`,
  );
}

// ---------------------------------------------------------------------------------------------------------------------
// The geodetic part, shared by WKT 1 and 2

function ellipsoidOf(node: WktNode | undefined, where: string): { ellipsoid: Ellipsoid; name?: string } {
  if (node === undefined) throw new UnsupportedCrsError(`WKT ${where} has no ELLIPSOID / SPHEROID`);
  const known = epsgIdOf(node);
  const table = known === undefined ? undefined : epsgEllipsoids().get(String(known));
  const name = nameOf(node);
  // The table's values are the defining ones; a WKT writer's may carry float noise (298.257222101004 for GRS80).
  if (table !== undefined) return { ellipsoid: { a: table.a, rf: table.rf }, ...(name === undefined ? {} : { name }) };
  const unit = child(node, 'LENGTHUNIT', 'UNIT');
  const a = numArg(node, 1, 'the semi-major axis') * (unit === undefined ? 1 : numArg(unit, 1, 'the unit factor'));
  const rf = numArg(node, 2, 'the inverse flattening');
  return { ellipsoid: { a, rf }, ...(name === undefined ? {} : { name }) };
}

/** A datum's shift to WGS 84 from what names it: WGS 84 itself, or an EPSG datum whose geographic CRS has one. */
function knownDatumShift(name: string | undefined, code: number | undefined, ellipsoid: Ellipsoid): readonly number[] | undefined {
  const n = norm(name ?? '');
  if (code === 6326 || n === 'wgs1984' || n === 'worldgeodeticsystem1984' || n === 'worldgeodeticsystem1984ensemble' || n === 'dwgs1984') {
    return ellipsoid.a === WGS84_ELLIPSOID.a ? [0, 0, 0] : undefined;
  }
  if (code !== undefined) return datumShiftFromTable(code);
  return undefined;
}

function datumShiftFromTable(datumCode: number): readonly number[] | undefined {
  const d = epsgDatums().get(String(datumCode));
  return d?.geographicCrs === undefined ? undefined : epsgGeodetic(d.geographicCrs)?.towgs84;
}

function geodetic(geog: WktNode, wkt1: boolean): Omit<CrsDefinition, 'projection' | 'toMeter'> {
  const datum = child(geog, 'DATUM', 'TRF', 'GEODETICDATUM', 'ENSEMBLE');
  if (datum === undefined) throw new UnsupportedCrsError(`WKT ${geog.kw}[${nameOf(geog) ?? ''}] has no DATUM`);
  const { ellipsoid, name: ellipsoidName } = ellipsoidOf(child(datum, 'ELLIPSOID', 'SPHEROID'), `DATUM[${nameOf(datum) ?? ''}]`);
  const towgs84Node = child(datum, 'TOWGS84');
  const towgs84 = towgs84Node
    ? canonicalTowgs84(towgs84Node.args.map((v) => (typeof v === 'number' ? v : Number.NaN)))
    : knownDatumShift(nameOf(datum), epsgIdOf(datum), ellipsoid);
  const pm = child(geog, 'PRIMEM');
  let primeMeridian = 0;
  if (pm !== undefined) {
    const v = numArg(pm, 1, 'the prime meridian longitude');
    // WKT 1 gives the prime meridian in the GEOGCS's angular unit; WKT2 in its own ANGLEUNIT (degrees by default).
    const unit = wkt1 ? child(geog, 'UNIT') : child(pm, 'ANGLEUNIT', 'UNIT');
    primeMeridian = unit === undefined ? v : toDegrees(v, numArg(unit, 1, 'the angle unit'));
  }
  return {
    ellipsoid,
    ...(towgs84 === undefined ? {} : { towgs84 }),
    primeMeridian,
    names: { crs: nameOf(geog), datum: nameOf(datum), ellipsoid: ellipsoidName },
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// WKT 1 (GDAL and ESRI names)

const WKT1_METHODS: Readonly<Record<string, ProjectionMethod>> = {
  transversemercator: 'tmerc',
  gausskruger: 'tmerc',
  albersconicequalarea: 'aea',
  albers: 'aea',
  lambertazimuthalequalarea: 'laea',
  sinusoidal: 'sinu',
  polarstereographic: 'stere',
  stereographicnorthpole: 'stere',
  stereographicsouthpole: 'stere',
  lambertconformalconic1sp: 'lcc',
  lambertconformalconic2sp: 'lcc',
  lambertconformalconic: 'lcc',
  equirectangular: 'eqc',
  equidistantcylindrical: 'eqc',
  platecarree: 'eqc',
  mercator1sp: 'merc',
  mercator2sp: 'merc',
  mercator: 'merc',
};

type Wkt1Role = 'lat0' | 'lon0' | 'k' | 'sp1' | 'sp2' | 'x' | 'y';
const WKT1_PARAMS: Readonly<Record<string, Wkt1Role>> = {
  latitudeoforigin: 'lat0',
  latitudeofcenter: 'lat0',
  centralmeridian: 'lon0',
  longitudeofcenter: 'lon0',
  longitudeoforigin: 'lon0',
  scalefactor: 'k',
  standardparallel1: 'sp1',
  standardparallel2: 'sp2',
  falseeasting: 'x',
  falsenorthing: 'y',
};

function wkt1Crs(root: WktNode): CrsDefinition {
  const geog = root.kw === 'GEOGCS' ? root : child(root, 'GEOGCS');
  if (geog === undefined) throw new UnsupportedCrsError('WKT PROJCS has no GEOGCS');
  const base = geodetic(geog, true);
  if (root.kw === 'GEOGCS') return { ...base, names: { ...base.names, crs: nameOf(root) }, toMeter: 1 };
  const projection = child(root, 'PROJECTION');
  const methodName = nameOf(projection) ?? '';
  const method = WKT1_METHODS[norm(methodName)];
  if (method === undefined) {
    throw new UnsupportedCrsError(
      `WKT PROJECTION["${methodName}"] is not a projection Tessera models; it models ${SUPPORTED_METHODS_TEXT}`,
    );
  }
  const unit = child(root, 'UNIT');
  const toMeter = unit === undefined ? 1 : numArg(unit, 1, 'the linear unit');
  const angle = child(geog, 'UNIT');
  const radians = angle === undefined ? RAD_PER_DEGREE : numArg(angle, 1, 'the angle unit');
  const r: Partial<Record<Wkt1Role, number>> = {};
  for (const p of children(root, 'PARAMETER')) {
    const pname = nameOf(p) ?? '';
    const role = WKT1_PARAMS[norm(pname)];
    const v = numArg(p, 1, `PARAMETER["${pname}"]`);
    if (role === undefined) {
      if (v === 0) continue;
      throw new UnsupportedCrsError(`WKT PARAMETER["${pname}",${v}] is not one the ${methodName} projection takes in Tessera`);
    }
    r[role] = role === 'x' || role === 'y' ? v * toMeter : role === 'k' ? v : toDegrees(v, radians);
  }
  const kind = norm(methodName);
  const p: Partial<Record<ProjParam, number>> = {};
  const set = (k: ProjParam, v: number | undefined) => {
    if (v !== undefined) p[k] = v;
  };
  set('x_0', r.x);
  set('y_0', r.y);
  set('lon_0', r.lon0);
  switch (method) {
    case 'tmerc':
    case 'laea':
      set('lat_0', r.lat0);
      set('k_0', r.k);
      break;
    case 'sinu':
      set('lat_0', r.lat0);
      break;
    case 'aea':
      set('lat_0', r.lat0);
      set('lat_1', r.sp1);
      set('lat_2', r.sp2);
      break;
    case 'stere': {
      if (kind === 'stereographicnorthpole' || kind === 'stereographicsouthpole') {
        p.lat_0 = kind === 'stereographicnorthpole' ? 90 : -90;
        set('lat_ts', r.sp1 ?? r.lat0);
        set('k_0', r.k);
        break;
      }
      const lat = r.lat0 ?? 90;
      if (Math.abs(Math.abs(lat) - 90) < 1e-12) {
        p.lat_0 = lat;
        set('k_0', r.k);
      } else {
        p.lat_0 = Math.sign(lat) * 90;
        p.lat_ts = lat;
        set('k_0', r.k);
      }
      break;
    }
    case 'lcc':
      set('lat_0', r.lat0);
      set('k_0', r.k);
      if (kind === 'lambertconformalconic1sp' || (r.sp1 === undefined && r.sp2 === undefined)) {
        p.lat_1 = r.lat0 ?? 0;
        p.lat_2 = r.lat0 ?? 0;
      } else {
        set('lat_1', r.sp1);
        set('lat_2', r.sp2 ?? r.sp1);
      }
      break;
    case 'eqc':
      set('lat_0', r.lat0);
      set('lat_ts', r.sp1);
      break;
    case 'merc':
      if (r.lat0 !== undefined && r.lat0 !== 0) {
        throw new UnsupportedCrsError(`WKT ${methodName} with latitude_of_origin ${r.lat0} is not Mercator as EPSG defines it (0)`);
      }
      set('k_0', r.k);
      set('lat_ts', r.sp1);
      break;
  }
  return {
    ...base,
    names: { ...base.names, crs: nameOf(root) },
    projection: { method, params: normaliseProjection(method, p) },
    toMeter,
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// WKT2 and PROJJSON: methods and parameters by EPSG code (or name)

interface MethodEntry {
  readonly method: ProjectionMethod;
  readonly variant: string;
  readonly name: string;
  readonly code?: number;
  /** The parameters written, in order; read back by the same codes. */
  readonly params: readonly (readonly [code: number, name: string, key: ProjParam])[];
}

const LAT_NAT = [8801, 'Latitude of natural origin', 'lat_0'] as const;
const LON_NAT = [8802, 'Longitude of natural origin', 'lon_0'] as const;
const K_NAT = [8805, 'Scale factor at natural origin', 'k_0'] as const;
const FE = [8806, 'False easting', 'x_0'] as const;
const FN = [8807, 'False northing', 'y_0'] as const;
const LAT_FALSE = [8821, 'Latitude of false origin', 'lat_0'] as const;
const LON_FALSE = [8822, 'Longitude of false origin', 'lon_0'] as const;
const SP1 = [8823, 'Latitude of 1st standard parallel', 'lat_1'] as const;
const SP2 = [8824, 'Latitude of 2nd standard parallel', 'lat_2'] as const;
const SP1_TS = [8823, 'Latitude of 1st standard parallel', 'lat_ts'] as const;
const E_FALSE = [8826, 'Easting at false origin', 'x_0'] as const;
const N_FALSE = [8827, 'Northing at false origin', 'y_0'] as const;

/** What Tessera writes and reads, by EPSG method code (PROJ's names; sinusoidal has no EPSG code). */
const METHODS: readonly MethodEntry[] = [
  { method: 'tmerc', variant: '', name: 'Transverse Mercator', code: 9807, params: [LAT_NAT, LON_NAT, K_NAT, FE, FN] },
  { method: 'aea', variant: '', name: 'Albers Equal Area', code: 9822, params: [LAT_FALSE, LON_FALSE, SP1, SP2, E_FALSE, N_FALSE] },
  { method: 'laea', variant: '', name: 'Lambert Azimuthal Equal Area', code: 9820, params: [LAT_NAT, LON_NAT, FE, FN] },
  {
    method: 'laea',
    variant: 'spherical',
    name: 'Lambert Azimuthal Equal Area (Spherical)',
    code: 1027,
    params: [LAT_NAT, LON_NAT, FE, FN],
  },
  { method: 'sinu', variant: '', name: 'Sinusoidal', params: [LON_NAT, FE, FN] },
  { method: 'stere', variant: 'A', name: 'Polar Stereographic (variant A)', code: 9810, params: [LAT_NAT, LON_NAT, K_NAT, FE, FN] },
  {
    method: 'stere',
    variant: 'B',
    name: 'Polar Stereographic (variant B)',
    code: 9829,
    params: [[8832, 'Latitude of standard parallel', 'lat_ts'], [8833, 'Longitude of origin', 'lon_0'], FE, FN],
  },
  { method: 'lcc', variant: '1SP', name: 'Lambert Conic Conformal (1SP)', code: 9801, params: [LAT_NAT, LON_NAT, K_NAT, FE, FN] },
  {
    method: 'lcc',
    variant: '2SP',
    name: 'Lambert Conic Conformal (2SP)',
    code: 9802,
    params: [LAT_FALSE, LON_FALSE, SP1, SP2, E_FALSE, N_FALSE],
  },
  { method: 'eqc', variant: '', name: 'Equidistant Cylindrical', code: 1028, params: [SP1_TS, LAT_NAT, LON_NAT, FE, FN] },
  {
    method: 'eqc',
    variant: 'spherical',
    name: 'Equidistant Cylindrical (Spherical)',
    code: 1029,
    params: [SP1_TS, LAT_NAT, LON_NAT, FE, FN],
  },
  { method: 'merc', variant: 'A', name: 'Mercator (variant A)', code: 9804, params: [LAT_NAT, LON_NAT, K_NAT, FE, FN] },
  { method: 'merc', variant: 'B', name: 'Mercator (variant B)', code: 9805, params: [SP1_TS, LON_NAT, FE, FN] },
];

function methodEntry(name: string, code: number | undefined): MethodEntry {
  const byCode = code === undefined ? undefined : METHODS.find((m) => m.code === code);
  const entry = byCode ?? METHODS.find((m) => norm(m.name) === norm(name));
  if (entry === undefined) {
    const shown = code === undefined ? `"${name}"` : `"${name}" (EPSG method ${code})`;
    throw new UnsupportedCrsError(`the projection method ${shown} is not one Tessera models; it models ${SUPPORTED_METHODS_TEXT}`);
  }
  return entry;
}

/** The definition's parameters from (code, name, value in degrees / metres / unity) triples of a WKT2 CONVERSION or PROJJSON conversion. */
function conversion(
  entry: MethodEntry,
  given: readonly { code?: number | undefined; name: string; value: number }[],
): CrsDefinition['projection'] {
  const p: Partial<Record<ProjParam, number>> = {};
  for (const g of given) {
    const spec = entry.params.find((s) => (g.code !== undefined && s[0] === g.code) || norm(s[1]) === norm(g.name));
    if (spec === undefined) {
      // A parameter the method does not take is harmless only at its neutral value.
      if (g.value === 0 && !/scale/i.test(g.name)) continue;
      if (g.value === 1 && /scale/i.test(g.name)) continue;
      throw new UnsupportedCrsError(`the ${entry.name} projection in Tessera takes no parameter "${g.name}" (${g.value})`);
    }
    p[spec[2]] = g.value;
  }
  if (entry.method === 'stere') {
    if (entry.variant === 'B') p.lat_0 = Math.sign(p.lat_ts ?? 90) * 90;
    else p.lat_0 ??= 90;
  }
  if (entry.method === 'lcc' && entry.variant === '1SP') {
    p.lat_1 = p.lat_0 ?? 0;
    p.lat_2 = p.lat_0 ?? 0;
  }
  if (entry.method === 'merc' && entry.variant === 'A') {
    if ((p.lat_0 ?? 0) !== 0)
      throw new UnsupportedCrsError(`Mercator (variant A) has latitude of natural origin ${p.lat_0}; EPSG requires 0`);
    delete p.lat_0;
  }
  return { method: entry.method, params: normaliseProjection(entry.method, p) };
}

/** A unit node's factor (radians per unit for angles, metres for lengths, 1 for scale). */
const unitFactor = (u: WktNode | undefined, fallback: number) => (u === undefined ? fallback : numArg(u, 1, `${u.kw} factor`));

function wkt2Crs(root: WktNode): CrsDefinition {
  const projected = WKT2_PROJECTED.has(root.kw);
  const geog = projected ? child(root, 'BASEGEOGCRS', 'BASEGEODCRS', 'BASEGEOGRAPHICCRS', 'BASEGEODETICCRS') : root;
  if (geog === undefined) throw new UnsupportedCrsError(`WKT ${root.kw} has no BASEGEOGCRS`);
  if (!projected) {
    const cs = child(root, 'CS');
    const csType = cs?.args[0];
    if (cs !== undefined && !(typeof csType === 'object' && 'enum' in csType && csType.enum.toLowerCase() === 'ellipsoidal')) {
      throw new UnsupportedCrsError(`WKT ${root.kw} with a ${JSON.stringify(csType)} coordinate system is not a geographic 2D CRS`);
    }
  }
  const base = geodetic(geog, false);
  if (!projected) return { ...base, names: { ...base.names, crs: nameOf(root) }, toMeter: 1 };
  const conv = child(root, 'CONVERSION');
  const method = conv === undefined ? undefined : child(conv, 'METHOD', 'PROJECTION');
  if (conv === undefined || method === undefined) throw new UnsupportedCrsError('WKT PROJCRS has no CONVERSION with a METHOD');
  // The CRS's length unit: on the root, else on its axes.
  const rootUnit = child(root, 'LENGTHUNIT', 'UNIT') ?? child(children(root, 'AXIS')[0] ?? root, 'LENGTHUNIT', 'UNIT');
  const toMeter = unitFactor(rootUnit, 1);
  const entry = methodEntry(nameOf(method) ?? '', epsgIdOf(method));
  const given = children(conv, 'PARAMETER').map((p) => {
    const name = nameOf(p) ?? '';
    const code = epsgIdOf(p);
    const raw = numArg(p, 1, `PARAMETER["${name}"]`);
    const spec = entry.params.find((s) => (code !== undefined && s[0] === code) || norm(s[1]) === norm(name));
    const key = spec?.[2];
    const unit = child(p, 'ANGLEUNIT', 'LENGTHUNIT', 'SCALEUNIT', 'UNIT');
    let value = raw;
    if (key === 'x_0' || key === 'y_0') value = raw * unitFactor(unit, toMeter);
    else if (key === 'k_0') value = raw * unitFactor(unit, 1);
    else if (key !== undefined) value = toDegrees(raw, unitFactor(unit, RAD_PER_DEGREE));
    return { code, name, value };
  });
  return { ...base, names: { ...base.names, crs: nameOf(root) }, projection: conversion(entry, given), toMeter };
}

/** The Helmert shift of a BOUNDCRS's ABRIDGEDTRANSFORMATION, as PROJ's +towgs84 (position vector, m, arc-seconds, ppm). */
function wkt2Towgs84(root: WktNode): readonly number[] {
  const target = child(child(root, 'TARGETCRS') ?? root, ...WKT2_GEOGRAPHIC);
  if (target === undefined || !(epsgIdOf(target) === 4326 || /wgs\s*84/i.test(nameOf(target) ?? ''))) {
    throw new UnsupportedCrsError('WKT BOUNDCRS must be bound to WGS 84 (TARGETCRS EPSG:4326), as a +towgs84 shift is');
  }
  const t = child(root, 'ABRIDGEDTRANSFORMATION');
  const method = t === undefined ? undefined : child(t, 'METHOD');
  if (t === undefined || method === undefined) throw new UnsupportedCrsError('WKT BOUNDCRS has no ABRIDGEDTRANSFORMATION with a METHOD');
  const params = children(t, 'PARAMETER').map((p) => {
    const unit = child(p, 'ANGLEUNIT', 'LENGTHUNIT', 'SCALEUNIT', 'UNIT');
    return {
      code: epsgIdOf(p),
      name: nameOf(p) ?? '',
      value: numArg(p, 1, 'a transformation parameter'),
      unitFactor: unit === undefined ? undefined : numArg(unit, 1, 'unit'),
    };
  });
  return helmert(nameOf(method) ?? '', epsgIdOf(method), params, true);
}

const HELMERT_PARAMS: readonly (readonly [number, string, 'm' | 'arcsec' | 'ppm'])[] = [
  [8605, 'X-axis translation', 'm'],
  [8606, 'Y-axis translation', 'm'],
  [8607, 'Z-axis translation', 'm'],
  [8608, 'X-axis rotation', 'arcsec'],
  [8609, 'Y-axis rotation', 'arcsec'],
  [8610, 'Z-axis rotation', 'arcsec'],
  [8611, 'Scale difference', 'ppm'],
];
const RAD_PER_ARCSEC = Math.PI / 180 / 3600;

function helmert(
  methodName: string,
  methodCode: number | undefined,
  params: readonly { code?: number | undefined; name: string; value: number; unitFactor?: number | undefined }[],
  abridged: boolean,
): readonly number[] {
  const n = norm(methodName);
  // Coordinate frame rotation (9607, 9032) is the position vector convention with the rotations' signs flipped.
  const frame = methodCode === 9607 || methodCode === 9032 || n.includes('coordinateframe');
  const translations = methodCode === 9603 || n.includes('geocentrictranslation');
  if (!frame && !translations && !(methodCode === 9606 || methodCode === 9033 || n.includes('positionvector'))) {
    throw new UnsupportedCrsError(`the datum transformation "${methodName}" is not a Helmert shift Tessera applies (+towgs84)`);
  }
  const out = [0, 0, 0, 0, 0, 0, 0];
  HELMERT_PARAMS.forEach(([code, name, unit], i) => {
    const p = params.find((q) => q.code === code || norm(q.name) === norm(name));
    if (p === undefined) return;
    let v = p.value;
    // WKT2's abridged transformation writes the scale without a unit as a factor (1 + ppm / 1e6), as PROJ does.
    // Rounded to 1e-9 ppm: 1.0000067 - 1 is 6.69999999992e-6 in floating point.
    if (unit === 'ppm' && p.unitFactor === undefined && abridged) v = Math.round((v - 1) * 1e15) / 1e9;
    else if (p.unitFactor !== undefined) {
      if (unit === 'm') v *= p.unitFactor;
      else if (unit === 'arcsec') v = (v * p.unitFactor) / RAD_PER_ARCSEC;
      else v = (v * p.unitFactor) / 1e-6;
    }
    out[i] = frame && i >= 3 && i <= 5 ? -v : v;
  });
  return canonicalTowgs84(translations ? out.slice(0, 3) : out);
}

// ---------------------------------------------------------------------------------------------------------------------
// PROJJSON

type Json = Record<string, unknown>;
const isJson = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function jsonEpsg(v: unknown): number | undefined {
  const ids = isJson(v) ? (Array.isArray(v.ids) ? v.ids : [v.id]) : [];
  for (const id of ids) {
    if (isJson(id) && String(id.authority).toUpperCase() === 'EPSG') {
      const code = Number(id.code);
      if (Number.isInteger(code) && code > 0) return code;
    }
  }
  return undefined;
}

/** A PROJJSON unit (a name such as "metre", "degree", "US survey foot", or {name, conversion_factor}): its factor. */
function jsonUnit(u: unknown, fallback: number): number {
  if (u === undefined || u === null) return fallback;
  if (isJson(u) && typeof u.conversion_factor === 'number') return u.conversion_factor;
  const name = typeof u === 'string' ? u : isJson(u) && typeof u.name === 'string' ? u.name : undefined;
  if (name === undefined) throw new UnsupportedCrsError(`PROJJSON unit ${JSON.stringify(u)} is not a unit`);
  const n = norm(name);
  if (n === 'metre' || n === 'meter' || n === 'unity') return 1;
  if (n === 'degree') return RAD_PER_DEGREE;
  for (const unit of epsgUnits().values()) if (norm(unit.name) === n) return unit.factor;
  throw new UnsupportedCrsError(`PROJJSON unit "${name}" is not one Tessera knows; give it as {"name": ..., "conversion_factor": ...}`);
}

const jsonNum = (v: unknown, what: string): number => {
  const n = isJson(v) && 'value' in v ? v.value : v;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new UnsupportedCrsError(`PROJJSON ${what} is not a number`);
  return n;
};

/** PROJJSON (PROJ's JSON encoding of a CRS, schema v0.x) as an EPSG code and a definition. */
export function parseProjJson(json: unknown): ParsedCrsText {
  if (!isJson(json)) throw new UnsupportedCrsError('PROJJSON must be a JSON object');
  const type = json.type;
  if (type === 'BoundCRS') {
    return { definition: () => ({ ...projJsonCrs(json.source_crs), towgs84: projJsonTowgs84(json) }) };
  }
  if (type === 'ProjectedCRS' || type === 'GeographicCRS' || type === 'GeodeticCRS') {
    return { epsg: jsonEpsg(json), definition: () => projJsonCrs(json) };
  }
  throw new UnsupportedCrsError(
    `PROJJSON of type ${JSON.stringify(type)} is not a projected or geographic CRS (ProjectedCRS, GeographicCRS, BoundCRS)`,
  );
}

function projJsonGeodetic(geog: unknown): Omit<CrsDefinition, 'projection' | 'toMeter'> {
  if (!isJson(geog)) throw new UnsupportedCrsError('PROJJSON CRS has no base_crs / datum');
  const datum = isJson(geog.datum) ? geog.datum : isJson(geog.datum_ensemble) ? geog.datum_ensemble : undefined;
  if (datum === undefined) throw new UnsupportedCrsError('PROJJSON geographic CRS has no datum or datum_ensemble');
  const e = datum.ellipsoid;
  if (!isJson(e)) throw new UnsupportedCrsError('PROJJSON datum has no ellipsoid');
  const table = jsonEpsg(e) === undefined ? undefined : epsgEllipsoids().get(String(jsonEpsg(e)));
  let ellipsoid: Ellipsoid;
  if (table !== undefined) ellipsoid = { a: table.a, rf: table.rf };
  else if (e.radius !== undefined)
    ellipsoid = { a: jsonNum(e.radius, 'ellipsoid radius') * jsonUnit(isJson(e.radius) ? e.radius.unit : undefined, 1), rf: 0 };
  else {
    const a = jsonNum(e.semi_major_axis, 'semi_major_axis') * jsonUnit(isJson(e.semi_major_axis) ? e.semi_major_axis.unit : undefined, 1);
    if (e.inverse_flattening !== undefined) ellipsoid = { a, rf: jsonNum(e.inverse_flattening, 'inverse_flattening') };
    else {
      const b = jsonNum(e.semi_minor_axis, 'semi_minor_axis') * jsonUnit(isJson(e.semi_minor_axis) ? e.semi_minor_axis.unit : undefined, 1);
      ellipsoid = { a, rf: b === a ? 0 : a / (a - b) };
    }
  }
  const pm = isJson(datum.prime_meridian) ? datum.prime_meridian : isJson(geog.prime_meridian) ? geog.prime_meridian : undefined;
  const pmLon = pm?.longitude;
  const primeMeridian =
    pmLon === undefined ? 0 : toDegrees(jsonNum(pmLon, 'prime meridian'), jsonUnit(isJson(pmLon) ? pmLon.unit : undefined, RAD_PER_DEGREE));
  const towgs84 = knownDatumShift(typeof datum.name === 'string' ? datum.name : undefined, jsonEpsg(datum), ellipsoid);
  return {
    ellipsoid,
    ...(towgs84 === undefined ? {} : { towgs84 }),
    primeMeridian,
    names: {
      crs: typeof geog.name === 'string' ? geog.name : undefined,
      datum: typeof datum.name === 'string' ? datum.name : undefined,
      ellipsoid: typeof e.name === 'string' ? e.name : undefined,
    },
  };
}

function projJsonCrs(crs: unknown): CrsDefinition {
  if (!isJson(crs)) throw new UnsupportedCrsError('PROJJSON source_crs is not an object');
  const name = typeof crs.name === 'string' ? crs.name : undefined;
  if (crs.type === 'GeographicCRS' || crs.type === 'GeodeticCRS') {
    const base = projJsonGeodetic(crs);
    return { ...base, names: { ...base.names, crs: name }, toMeter: 1 };
  }
  if (crs.type !== 'ProjectedCRS')
    throw new UnsupportedCrsError(`PROJJSON ${JSON.stringify(crs.type)} is not a projected or geographic CRS`);
  const base = projJsonGeodetic(crs.base_crs);
  const conv = crs.conversion;
  if (!isJson(conv) || !isJson(conv.method)) throw new UnsupportedCrsError('PROJJSON ProjectedCRS has no conversion.method');
  const cs = crs.coordinate_system;
  const axis0 = isJson(cs) && Array.isArray(cs.axis) ? cs.axis[0] : undefined;
  const toMeter = jsonUnit(isJson(axis0) ? axis0.unit : undefined, 1);
  const entry = methodEntry(String(conv.method.name ?? ''), jsonEpsg(conv.method));
  const given = (Array.isArray(conv.parameters) ? conv.parameters : []).map((p: unknown) => {
    if (!isJson(p)) throw new UnsupportedCrsError('PROJJSON conversion parameter is not an object');
    const pname = String(p.name ?? '');
    const code = jsonEpsg(p);
    const spec = entry.params.find((s) => (code !== undefined && s[0] === code) || norm(s[1]) === norm(pname));
    const key = spec?.[2];
    const raw = jsonNum(p.value, `parameter "${pname}"`);
    let value = raw;
    // PROJJSON's default units: metre for lengths, degree for angles, unity for scale.
    if (key === 'x_0' || key === 'y_0') value = raw * jsonUnit(p.unit, 1);
    else if (key === 'k_0') value = raw * jsonUnit(p.unit, 1);
    else if (key !== undefined) value = toDegrees(raw, jsonUnit(p.unit, RAD_PER_DEGREE));
    return { code, name: pname, value };
  });
  return { ...base, names: { ...base.names, crs: name }, projection: conversion(entry, given), toMeter };
}

function projJsonTowgs84(bound: Json): readonly number[] {
  const target = bound.target_crs;
  if (!isJson(target) || !(jsonEpsg(target) === 4326 || /wgs\s*84/i.test(String(target.name ?? '')))) {
    throw new UnsupportedCrsError('PROJJSON BoundCRS must be bound to WGS 84 (target_crs EPSG:4326), as a +towgs84 shift is');
  }
  const t = bound.transformation;
  if (!isJson(t) || !isJson(t.method)) throw new UnsupportedCrsError('PROJJSON BoundCRS has no transformation.method');
  const params = (Array.isArray(t.parameters) ? t.parameters : []).filter(isJson).map((p) => ({
    code: jsonEpsg(p),
    name: String(p.name ?? ''),
    value: jsonNum(p.value, `parameter "${String(p.name)}"`),
    unitFactor: p.unit === undefined ? undefined : jsonUnit(p.unit, 1),
  }));
  return helmert(String(t.method.name ?? ''), jsonEpsg(t.method), params, false);
}

// ---------------------------------------------------------------------------------------------------------------------
// WKT2:2019 out

const q = (s: string) => `"${s.replace(/"/g, '""')}"`;
const DEGREE = 'ANGLEUNIT["degree",0.0174532925199433]';
const METRE = 'LENGTHUNIT["metre",1]';

function lengthUnitWkt(toMeter: number): string {
  if (toMeter === 1) return METRE;
  for (const [code, u] of epsgUnits()) {
    if (u.kind === 'length' && Math.abs(u.factor - toMeter) <= 1e-11 * toMeter)
      return `LENGTHUNIT[${q(u.name)},${fmt(u.factor)},ID["EPSG",${code}]]`;
  }
  return `LENGTHUNIT["unknown",${fmt(toMeter)}]`;
}

/** The EPSG method entry a definition is written with. */
export function methodEntryOf(def: CrsDefinition): MethodEntry {
  const projection = def.projection;
  if (projection === undefined) throw new Error('a geographic CRS has no projection method');
  const variant = projectionVariant(projection.method, projection.params);
  const entry = METHODS.find((m) => m.method === projection.method && m.variant === variant);
  if (entry === undefined) throw new Error(`no WKT2 method for ${projection.method} ${variant}`);
  if (projection.method === 'lcc' && variant === '2SP' && projection.params.k_0 !== 1) {
    throw new UnsupportedCrsError(
      'a Lambert conformal conic with two standard parallels and a scale factor other than 1 has no EPSG method',
    );
  }
  return entry;
}

/**
 * A definition as WKT2:2019: what GDAL 3 reads (the VRT's SRS) and STAC's `proj:wkt2` holds. A known shift to WGS 84
 * is written as a BOUNDCRS to EPSG:4326 (WGS 84 itself as its datum, EPSG 6326). Names are the input's where it had
 * them, else "unknown", as GDAL names a user-defined CRS.
 */
export function definitionToWkt2(def: CrsDefinition): string {
  const e = def.ellipsoid;
  // An ellipsoid without a name is named after the EPSG ellipsoid of the same size, as GDAL names it.
  // EPSG's 7000-series ellipsoids first: GRS 1980 (7019) rather than CGCS2000 (1024), which has the same size.
  const sizes = [...epsgEllipsoids()].sort(([a], [b]) => Number(Number(a) < 7000) - Number(Number(b) < 7000) || Number(a) - Number(b));
  const known = sizes.map(([, k]) => k).find((k) => k.a === e.a && Math.abs(k.rf - e.rf) <= 1e-9 * Math.max(1, e.rf));
  const names = { ...def.names, ellipsoid: def.names?.ellipsoid ?? known?.name };
  const wgs84Datum = def.towgs84?.every((v) => v === 0) === true && e.a === WGS84_ELLIPSOID.a && e.rf === WGS84_ELLIPSOID.rf;
  const datum = wgs84Datum
    ? `DATUM["World Geodetic System 1984",ELLIPSOID["WGS 84",6378137,298.257223563,${METRE}],ID["EPSG",6326]]`
    : `DATUM[${q(names.datum ?? `Unknown based on ${names.ellipsoid ?? 'unknown'} ellipsoid`)},ELLIPSOID[${q(names.ellipsoid ?? 'unknown')},${fmt(e.a)},${fmt(e.rf)},${METRE}]]`;
  const primem = `PRIMEM[${q(def.primeMeridian === 0 ? 'Greenwich' : 'unknown')},${fmt(def.primeMeridian)},${DEGREE}]`;
  let crs: string;
  if (def.projection === undefined) {
    crs =
      `GEOGCRS[${q(names.crs ?? 'unknown')},${datum},${primem},CS[ellipsoidal,2],` +
      `AXIS["longitude",east,ORDER[1],${DEGREE}],AXIS["latitude",north,ORDER[2],${DEGREE}]]`;
  } else {
    const entry = methodEntryOf(def);
    const params = entry.params
      .filter(([code, , key]) => !(entry.method === 'eqc' && code === 8801 && def.projection?.params[key] === 0))
      .map(([code, name, key]) => {
        const v = def.projection?.params[key] ?? (key === 'k_0' ? 1 : 0);
        const unit = key === 'x_0' || key === 'y_0' ? METRE : key === 'k_0' ? 'SCALEUNIT["unity",1]' : DEGREE;
        return `PARAMETER[${q(name)},${fmt(v)},${unit},ID["EPSG",${code}]]`;
      });
    const method = entry.code === undefined ? `METHOD[${q(entry.name)}]` : `METHOD[${q(entry.name)},ID["EPSG",${entry.code}]]`;
    const unit = lengthUnitWkt(def.toMeter);
    crs =
      `PROJCRS[${q(names.crs ?? 'unknown')},BASEGEOGCRS["unknown",${datum},${primem}],` +
      `CONVERSION[${q(entry.name)},${method},${params.join(',')}],CS[Cartesian,2],` +
      `AXIS["easting",east,ORDER[1],${unit}],AXIS["northing",north,ORDER[2],${unit}]]`;
  }
  if (def.towgs84 === undefined || wgs84Datum) return crs;
  const t = [...def.towgs84, 0, 0, 0, 0].slice(0, 7);
  // An abridged transformation's units are implied (ISO 19162): metres, arc-seconds, and the scale as a factor, 1 + ppm / 1e6.
  const helmertParams = HELMERT_PARAMS.map(([code, name, unit], i) => {
    const v = unit === 'ppm' ? 1 + (t[i] as number) / 1e6 : (t[i] as number);
    return `PARAMETER[${q(name)},${unit === 'ppm' ? String(v) : fmt(v)},ID["EPSG",${code}]]`;
  });
  return (
    `BOUNDCRS[SOURCECRS[${crs}],TARGETCRS[GEOGCRS["WGS 84",DATUM["World Geodetic System 1984",ELLIPSOID["WGS 84",6378137,298.257223563,${METRE}]],` +
    `PRIMEM["Greenwich",0,${DEGREE}],CS[ellipsoidal,2],AXIS["latitude",north,ORDER[1],${DEGREE}],AXIS["longitude",east,ORDER[2],${DEGREE}],ID["EPSG",4326]]],` +
    `ABRIDGEDTRANSFORMATION["Transformation to WGS84",METHOD["Position Vector transformation (geog2D domain)",ID["EPSG",9606]],${helmertParams.join(',')}]]`
  );
}
