import {
  type CrsDefinition,
  type Ellipsoid,
  epsgAngleUnit,
  epsgDatums,
  epsgEllipsoids,
  epsgGeodetic,
  epsgLengthUnit,
  epsgPrimeMeridians,
  epsgUnits,
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
 * GeoTIFF user-defined CRSs (OGC GeoTIFF 1.1, ProjectedCSTypeGeoKey or GeographicTypeGeoKey = 32767): the GeoKeys that
 * spell a CRS out (the projection method in ProjCoordTransGeoKey and its parameters, the ellipsoid, datum, prime
 * meridian and units) read into a CrsDefinition, and a definition written back as GeoKeys, the way GDAL writes them
 * (checked by writing with `gdal_translate -a_srs` and reading GDAL's result back, test/unit/raster/crs-definition.test.ts).
 */

/** GeoKey ids used here (GeoTIFF 1.1, Annex). */
export const K = {
  GTModelType: 1024,
  GTRasterType: 1025,
  GTCitation: 1026,
  GeographicType: 2048,
  GeogCitation: 2049,
  GeogGeodeticDatum: 2050,
  GeogPrimeMeridian: 2051,
  GeogLinearUnits: 2052,
  GeogAngularUnits: 2054,
  GeogAngularUnitSize: 2055,
  GeogEllipsoid: 2056,
  GeogSemiMajorAxis: 2057,
  GeogSemiMinorAxis: 2058,
  GeogInvFlattening: 2059,
  GeogPrimeMeridianLong: 2061,
  GeogTOWGS84: 2062,
  ProjLinearUnitsInterpCorrect: 3059,
  ProjectedCSType: 3072,
  PCSCitation: 3073,
  Projection: 3074,
  ProjCoordTrans: 3075,
  ProjLinearUnits: 3076,
  ProjLinearUnitSize: 3077,
  ProjStdParallel1: 3078,
  ProjStdParallel2: 3079,
  ProjNatOriginLong: 3080,
  ProjNatOriginLat: 3081,
  ProjFalseEasting: 3082,
  ProjFalseNorthing: 3083,
  ProjFalseOriginLong: 3084,
  ProjFalseOriginLat: 3085,
  ProjFalseOriginEasting: 3086,
  ProjFalseOriginNorthing: 3087,
  ProjCenterLong: 3088,
  ProjCenterLat: 3089,
  ProjCenterEasting: 3090,
  ProjCenterNorthing: 3091,
  ProjScaleAtNatOrigin: 3092,
  ProjScaleAtCenter: 3093,
  ProjStraightVertPoleLong: 3095,
} as const;

const USER_DEFINED = 32767;

/** ProjCoordTransGeoKey codes of the methods modelled. */
const CT = {
  TransverseMercator: 1,
  Mercator: 7,
  LambertConfConic_2SP: 8,
  LambertConfConic_1SP: 9,
  LambertAzimEqualArea: 10,
  AlbersEqualArea: 11,
  PolarStereographic: 15,
  Equirectangular: 17,
  Sinusoidal: 24,
} as const;

export type GeoKeyValue = number | readonly number[] | string;

const NAT_LAT = [K.ProjNatOriginLat, K.ProjFalseOriginLat, K.ProjCenterLat];
const NAT_LON = [K.ProjNatOriginLong, K.ProjFalseOriginLong, K.ProjCenterLong];
const FALSE_LAT = [K.ProjFalseOriginLat, K.ProjNatOriginLat, K.ProjCenterLat];
const FALSE_LON = [K.ProjFalseOriginLong, K.ProjNatOriginLong, K.ProjCenterLong];
const CENTER_LAT = [K.ProjCenterLat, K.ProjNatOriginLat, K.ProjFalseOriginLat];
const CENTER_LON = [K.ProjCenterLong, K.ProjNatOriginLong, K.ProjFalseOriginLong];
const EASTING = [K.ProjFalseEasting, K.ProjFalseOriginEasting, K.ProjCenterEasting];
const NORTHING = [K.ProjFalseNorthing, K.ProjFalseOriginNorthing, K.ProjCenterNorthing];
const FALSE_EASTING = [K.ProjFalseOriginEasting, K.ProjFalseEasting, K.ProjCenterEasting];
const FALSE_NORTHING = [K.ProjFalseOriginNorthing, K.ProjFalseNorthing, K.ProjCenterNorthing];
const SCALE = [K.ProjScaleAtNatOrigin, K.ProjScaleAtCenter];

/**
 * Which keys hold each parameter, first the one GDAL writes, then the ones libgeotiff's GTIFFetchProjParms falls back
 * to, per ProjCoordTransGeoKey.
 */
const READ: Readonly<Record<number, { method: ProjectionMethod; keys: Partial<Record<ProjParam | 'lat', readonly number[]>> }>> = {
  [CT.TransverseMercator]: { method: 'tmerc', keys: { lat_0: NAT_LAT, lon_0: NAT_LON, k_0: SCALE, x_0: EASTING, y_0: NORTHING } },
  [CT.Mercator]: {
    method: 'merc',
    keys: { lat: NAT_LAT, lat_ts: [K.ProjStdParallel1], lon_0: NAT_LON, k_0: SCALE, x_0: EASTING, y_0: NORTHING },
  },
  [CT.LambertConfConic_2SP]: {
    method: 'lcc',
    keys: {
      lat_0: FALSE_LAT,
      lon_0: FALSE_LON,
      lat_1: [K.ProjStdParallel1],
      lat_2: [K.ProjStdParallel2],
      x_0: FALSE_EASTING,
      y_0: FALSE_NORTHING,
    },
  },
  [CT.LambertConfConic_1SP]: { method: 'lcc', keys: { lat_0: NAT_LAT, lon_0: NAT_LON, k_0: SCALE, x_0: EASTING, y_0: NORTHING } },
  [CT.LambertAzimEqualArea]: { method: 'laea', keys: { lat_0: CENTER_LAT, lon_0: CENTER_LON, x_0: EASTING, y_0: NORTHING } },
  [CT.AlbersEqualArea]: {
    method: 'aea',
    keys: { lat_0: NAT_LAT, lon_0: NAT_LON, lat_1: [K.ProjStdParallel1], lat_2: [K.ProjStdParallel2], x_0: EASTING, y_0: NORTHING },
  },
  [CT.PolarStereographic]: {
    method: 'stere',
    keys: { lat: NAT_LAT, lon_0: [K.ProjStraightVertPoleLong, ...NAT_LON], k_0: SCALE, x_0: EASTING, y_0: NORTHING },
  },
  [CT.Equirectangular]: {
    method: 'eqc',
    keys: { lat_0: CENTER_LAT, lon_0: CENTER_LON, lat_ts: [K.ProjStdParallel1], x_0: EASTING, y_0: NORTHING },
  },
  [CT.Sinusoidal]: { method: 'sinu', keys: { lon_0: CENTER_LON, x_0: EASTING, y_0: NORTHING } },
};

const CT_NAMES: Readonly<Record<number, string>> = {
  2: 'transverse Mercator (modified Alaska)',
  3: 'oblique Mercator',
  4: 'oblique Mercator (Laborde)',
  5: 'oblique Mercator (Rosenmund)',
  6: 'oblique Mercator (spherical)',
  12: 'azimuthal equidistant',
  13: 'equidistant conic',
  14: 'stereographic (oblique)',
  16: 'oblique stereographic',
  18: 'Cassini-Soldner',
  19: 'gnomonic',
  20: 'Miller cylindrical',
  21: 'orthographic',
  22: 'polyconic',
  23: 'Robinson',
  25: 'Van der Grinten',
  26: 'New Zealand map grid',
  27: 'transverse Mercator (south oriented)',
};

function scalar(keys: ReadonlyMap<number, GeoKeyValue>, id: number): number | undefined {
  const v = keys.get(id);
  if (typeof v === 'number') return v;
  if (Array.isArray(v) && v.length > 0 && typeof v[0] === 'number') return v[0];
  return undefined;
}

function firstOf(keys: ReadonlyMap<number, GeoKeyValue>, ids: readonly number[] | undefined): number | undefined {
  for (const id of ids ?? []) {
    const v = scalar(keys, id);
    if (v !== undefined) return v;
  }
  return undefined;
}

/** The ellipsoid, datum shift and prime meridian of the GeoKeys' geographic CRS. */
function geodeticPart(
  keys: ReadonlyMap<number, GeoKeyValue>,
  degrees: (v: number) => number,
): Omit<CrsDefinition, 'projection' | 'toMeter'> {
  const gcs = scalar(keys, K.GeographicType);
  const names = { datum: citationPart(keys.get(K.GeogCitation), 'Datum'), ellipsoid: citationPart(keys.get(K.GeogCitation), 'Ellipsoid') };
  if (gcs !== undefined && gcs !== USER_DEFINED && gcs > 0) {
    const g = epsgGeodetic(gcs);
    if (g === undefined) {
      throw new UnsupportedCrsError(`GeographicTypeGeoKey ${gcs} is not a geographic CRS among the bundled EPSG definitions`);
    }
    return { ...g, names };
  }
  const datumCode = scalar(keys, K.GeogGeodeticDatum);
  const datum = datumCode === undefined || datumCode === USER_DEFINED ? undefined : epsgDatums().get(String(datumCode));
  if (datumCode !== undefined && datumCode !== USER_DEFINED && datum === undefined) {
    throw new UnsupportedCrsError(`GeogGeodeticDatumGeoKey ${datumCode} is not an EPSG datum Tessera knows`);
  }
  let ellipsoid: Ellipsoid | undefined;
  const ellCode = scalar(keys, K.GeogEllipsoid) ?? datum?.ellipsoid;
  if (ellCode !== undefined && ellCode !== USER_DEFINED) {
    const e = epsgEllipsoids().get(String(ellCode));
    if (e === undefined) throw new UnsupportedCrsError(`GeogEllipsoidGeoKey ${ellCode} is not an EPSG ellipsoid`);
    ellipsoid = { a: e.a, rf: e.rf };
  } else {
    const a = scalar(keys, K.GeogSemiMajorAxis);
    const rf = scalar(keys, K.GeogInvFlattening);
    const b = scalar(keys, K.GeogSemiMinorAxis);
    if (a === undefined || (rf === undefined && b === undefined)) {
      throw new UnsupportedCrsError(
        'the GeoKeys name no ellipsoid (GeogEllipsoidGeoKey, or GeogSemiMajorAxisGeoKey with GeogInvFlatteningGeoKey or GeogSemiMinorAxisGeoKey)',
      );
    }
    // GeoTIFF lengths are in GeogLinearUnits; every writer uses metres, and anything else is refused below.
    ellipsoid = { a, rf: rf !== undefined ? rf : b === a ? 0 : a / (a - (b as number)) };
  }
  const geogLinear = scalar(keys, K.GeogLinearUnits);
  if (geogLinear !== undefined && geogLinear !== 9001) {
    throw new UnsupportedCrsError(`GeogLinearUnitsGeoKey ${geogLinear} is not metres (9001); Tessera reads ellipsoids in metres`);
  }
  let primeMeridian = 0;
  const pmCode = scalar(keys, K.GeogPrimeMeridian) ?? datum?.primeMeridian;
  if (pmCode !== undefined && pmCode !== USER_DEFINED) {
    const pm = epsgPrimeMeridians().get(String(pmCode));
    if (pm === undefined) throw new UnsupportedCrsError(`GeogPrimeMeridianGeoKey ${pmCode} is not an EPSG prime meridian`);
    primeMeridian = pm.longitude;
  } else {
    primeMeridian = degrees(scalar(keys, K.GeogPrimeMeridianLong) ?? 0);
  }
  const t = keys.get(K.GeogTOWGS84);
  let towgs84: readonly number[] | undefined;
  if (Array.isArray(t) && (t.length === 3 || t.length === 7)) towgs84 = t as readonly number[];
  else if (datumCode === 6326 && ellipsoid.a === WGS84_ELLIPSOID.a) towgs84 = [0, 0, 0];
  else if (datum?.geographicCrs !== undefined) towgs84 = epsgGeodetic(datum.geographicCrs)?.towgs84;
  return { ellipsoid, ...(towgs84 === undefined ? {} : { towgs84 }), primeMeridian, names };
}

/** `Datum = WGS84` out of GDAL's GeogCitation `GCS Name = ...|Datum = ...|...`. */
function citationPart(v: GeoKeyValue | undefined, part: string): string | undefined {
  if (typeof v !== 'string') return undefined;
  const m = new RegExp(`${part} = ([^|]*)`).exec(v);
  return m?.[1]?.trim() || undefined;
}

/**
 * A user-defined CRS from its GeoKeys: `projected` says GTModelType is projected. Throws UnsupportedCrsError, naming the
 * key, for a method, unit or datum Tessera does not model.
 */
export function definitionFromGeoKeys(keys: ReadonlyMap<number, GeoKeyValue>, projected: boolean): CrsDefinition {
  const angleCode = scalar(keys, K.GeogAngularUnits);
  let radians = Math.PI / 180;
  if (angleCode === USER_DEFINED) radians = scalar(keys, K.GeogAngularUnitSize) ?? Number.NaN;
  else if (angleCode !== undefined) radians = epsgAngleUnit(angleCode) ?? Number.NaN;
  if (!(radians > 0)) throw new UnsupportedCrsError(`GeogAngularUnitsGeoKey ${angleCode} is not an angle unit Tessera knows`);
  const degrees = (v: number) => toDegrees(v, radians);
  const base = geodeticPart(keys, degrees);
  const crsName = typeof keys.get(K.GTCitation) === 'string' ? (keys.get(K.GTCitation) as string) : undefined;
  if (!projected) return { ...base, names: { ...base.names, crs: crsName }, toMeter: 1 };

  const unitCode = scalar(keys, K.ProjLinearUnits);
  let toMeter = 1;
  if (unitCode === USER_DEFINED) toMeter = scalar(keys, K.ProjLinearUnitSize) ?? Number.NaN;
  else if (unitCode !== undefined) toMeter = epsgLengthUnit(unitCode) ?? Number.NaN;
  if (!(toMeter > 0)) throw new UnsupportedCrsError(`ProjLinearUnitsGeoKey ${unitCode} is not a length unit Tessera knows`);

  const projection = scalar(keys, K.Projection);
  if (projection !== undefined && projection !== USER_DEFINED) {
    // EPSG's UTM conversions: 16001-16060 north, 16101-16160 south (what GDAL writes for a UTM on a user-defined datum).
    const zone = projection > 16100 ? projection - 16100 : projection - 16000;
    if (zone >= 1 && zone <= 60 && (projection < 16061 || projection > 16100)) {
      const south = projection > 16100;
      return {
        ...base,
        names: { ...base.names, crs: crsName },
        projection: {
          method: 'tmerc',
          params: { lat_0: 0, lon_0: zone * 6 - 183, k_0: 0.9996, x_0: 500_000, y_0: south ? 10_000_000 : 0 },
        },
        toMeter,
      };
    }
    throw new UnsupportedCrsError(
      `ProjectionGeoKey ${projection} (an EPSG conversion) is not one Tessera resolves (it resolves the UTM zones 16001-16060 and 16101-16160); ` +
        'rewrite the file with its CRS spelled out (gdal_translate -a_srs "<its PROJ string or WKT>")',
    );
  }
  const ct = scalar(keys, K.ProjCoordTrans);
  const spec = ct === undefined ? undefined : READ[ct];
  if (spec === undefined) {
    const what = ct === undefined ? 'no ProjCoordTransGeoKey' : `ProjCoordTransGeoKey ${ct} (${CT_NAMES[ct] ?? 'unknown'})`;
    throw new UnsupportedCrsError(`a user-defined projection with ${what} is not one Tessera models; it models ${SUPPORTED_METHODS_TEXT}`);
  }
  const p: Partial<Record<ProjParam, number>> = {};
  for (const [k, ids] of Object.entries(spec.keys) as [ProjParam | 'lat', readonly number[]][]) {
    const v = firstOf(keys, ids);
    if (v === undefined) continue;
    if (k === 'x_0' || k === 'y_0') p[k] = v * toMeter;
    else if (k === 'k_0') p[k] = v;
    else if (k !== 'lat') p[k] = degrees(v);
  }
  if (spec.method === 'stere') {
    // libgeotiff: the latitude is ProjNatOriginLat (default 90); at the pole it is variant A, elsewhere the
    // latitude of true scale (variant B, scale 1).
    const lat = degrees(firstOf(keys, spec.keys.lat) ?? 90);
    if (Math.abs(Math.abs(lat) - 90) < 1e-12) p.lat_0 = lat;
    else {
      p.lat_0 = Math.sign(lat) * 90;
      p.lat_ts = lat;
    }
  }
  if (spec.method === 'merc') {
    const lat = firstOf(keys, spec.keys.lat);
    if (lat !== undefined && lat !== 0)
      throw new UnsupportedCrsError(`a Mercator GeoKey latitude of origin of ${lat} is not EPSG's Mercator (0)`);
  }
  if (ct === CT.LambertConfConic_1SP) {
    p.lat_1 = p.lat_0 ?? 0;
    p.lat_2 = p.lat_0 ?? 0;
  }
  return {
    ...base,
    names: { ...base.names, crs: crsName },
    projection: { method: spec.method, params: normaliseProjection(spec.method, p) },
    toMeter,
  };
}

/** The GeoKeys of a definition, as GDAL writes a user-defined CRS: SHORT keys, DOUBLE parameters, ASCII citations. */
export interface GeoKeyEntries {
  readonly shorts: readonly (readonly [number, number])[];
  readonly doubles: readonly (readonly [number, readonly number[]])[];
  readonly ascii: readonly (readonly [number, string])[];
}

/** Which key each parameter is written to, per method and variant (what GDAL 3.6 writes). */
function writeSpec(method: ProjectionMethod, variant: string): { ct: number; keys: Partial<Record<ProjParam, number>> } {
  switch (method) {
    case 'tmerc':
      return { ct: CT.TransverseMercator, keys: { lat_0: K.ProjNatOriginLat, lon_0: K.ProjNatOriginLong, k_0: K.ProjScaleAtNatOrigin } };
    case 'merc':
      return variant === 'B'
        ? { ct: CT.Mercator, keys: { lat_ts: K.ProjStdParallel1, lon_0: K.ProjNatOriginLong } }
        : { ct: CT.Mercator, keys: { lon_0: K.ProjNatOriginLong, k_0: K.ProjScaleAtNatOrigin } };
    case 'lcc':
      return variant === '1SP'
        ? { ct: CT.LambertConfConic_1SP, keys: { lat_0: K.ProjNatOriginLat, lon_0: K.ProjNatOriginLong, k_0: K.ProjScaleAtNatOrigin } }
        : {
            ct: CT.LambertConfConic_2SP,
            keys: { lat_0: K.ProjFalseOriginLat, lon_0: K.ProjFalseOriginLong, lat_1: K.ProjStdParallel1, lat_2: K.ProjStdParallel2 },
          };
    case 'laea':
      return { ct: CT.LambertAzimEqualArea, keys: { lat_0: K.ProjCenterLat, lon_0: K.ProjCenterLong } };
    case 'aea':
      return {
        ct: CT.AlbersEqualArea,
        keys: { lat_0: K.ProjNatOriginLat, lon_0: K.ProjNatOriginLong, lat_1: K.ProjStdParallel1, lat_2: K.ProjStdParallel2 },
      };
    case 'stere':
      return variant === 'B'
        ? { ct: CT.PolarStereographic, keys: { lat_ts: K.ProjNatOriginLat, lon_0: K.ProjStraightVertPoleLong } }
        : {
            ct: CT.PolarStereographic,
            keys: { lat_0: K.ProjNatOriginLat, lon_0: K.ProjStraightVertPoleLong, k_0: K.ProjScaleAtNatOrigin },
          };
    case 'eqc':
      return { ct: CT.Equirectangular, keys: { lat_ts: K.ProjStdParallel1, lat_0: K.ProjCenterLat, lon_0: K.ProjCenterLong } };
    case 'sinu':
      return { ct: CT.Sinusoidal, keys: { lon_0: K.ProjCenterLong } };
  }
}

/**
 * The GeoKeys of a user-defined CRS (GTModelType, GTRasterType PixelIsArea, then the CRS spelled out). WGS 84 itself
 * (its ellipsoid, no shift, Greenwich) is written as GeographicTypeGeoKey 4326, so readers know the datum; any other
 * geodetic part key by key, with GeogTOWGS84GeoKey where a shift is known.
 */
export function geoKeysOfDefinition(def: CrsDefinition, citation: string): GeoKeyEntries {
  const shorts: [number, number][] = [
    [K.GTModelType, def.projection === undefined ? 2 : 1],
    [K.GTRasterType, 1],
  ];
  const doubles: [number, number[]][] = [];
  const ascii: [number, string][] = [[K.GTCitation, citation]];
  const e = def.ellipsoid;
  const wgs84 =
    e.a === WGS84_ELLIPSOID.a &&
    e.rf === WGS84_ELLIPSOID.rf &&
    def.primeMeridian === 0 &&
    def.towgs84?.length === 3 &&
    def.towgs84.every((v) => v === 0);
  if (wgs84) shorts.push([K.GeographicType, 4326]);
  else {
    shorts.push([K.GeographicType, USER_DEFINED], [K.GeogGeodeticDatum, USER_DEFINED], [K.GeogEllipsoid, USER_DEFINED]);
    shorts.push([K.GeogAngularUnits, 9102]);
    doubles.push([K.GeogSemiMajorAxis, [e.a]]);
    if (e.rf === 0) doubles.push([K.GeogSemiMinorAxis, [e.a]]);
    else doubles.push([K.GeogInvFlattening, [e.rf]]);
    if (def.primeMeridian !== 0) shorts.push([K.GeogPrimeMeridian, USER_DEFINED]);
    doubles.push([K.GeogPrimeMeridianLong, [def.primeMeridian]]);
    if (def.towgs84 !== undefined) doubles.push([K.GeogTOWGS84, [...def.towgs84]]);
    ascii.push([K.GeogCitation, 'GCS Name = unknown']);
  }
  if (def.projection !== undefined) {
    const { method, params } = def.projection;
    const { ct, keys } = writeSpec(method, projectionVariant(method, params));
    shorts.push([K.ProjectedCSType, USER_DEFINED], [K.Projection, USER_DEFINED], [K.ProjCoordTrans, ct]);
    // 1e-11: the canonical form keeps 12 digits of a unit (0.304800609601 for the US survey foot).
    const unit = [...epsgUnits()].find(([, u]) => u.kind === 'length' && Math.abs(u.factor - def.toMeter) <= 1e-11 * def.toMeter);
    // Lengths are written in the EPSG unit's own factor, not the canonical form's 12 digits of it.
    const toMeter = unit?.[1].factor ?? def.toMeter;
    if (unit !== undefined) shorts.push([K.ProjLinearUnits, Number(unit[0])]);
    else {
      shorts.push([K.ProjLinearUnits, USER_DEFINED]);
      doubles.push([K.ProjLinearUnitSize, [def.toMeter]]);
    }
    // False easting and northing are in the linear unit; GDAL marks that it wrote them so (3059 = 1).
    if (def.toMeter !== 1) shorts.push([K.ProjLinearUnitsInterpCorrect, 1]);
    for (const [k, id] of Object.entries(keys) as [ProjParam, number][]) doubles.push([id, [params[k] ?? (k === 'k_0' ? 1 : 0)]]);
    const lcc2 = method === 'lcc' && projectionVariant(method, params) === '2SP';
    doubles.push([lcc2 ? K.ProjFalseOriginEasting : K.ProjFalseEasting, [(params.x_0 ?? 0) / toMeter]]);
    doubles.push([lcc2 ? K.ProjFalseOriginNorthing : K.ProjFalseNorthing, [(params.y_0 ?? 0) / toMeter]]);
  }
  return { shorts, doubles, ascii };
}

/**
 * The three GeoTIFF tags of a set of GeoKeys: GeoKeyDirectory (SHORTs, keys sorted by id), GeoDoubleParams and
 * GeoAsciiParams (each string terminated by `|`).
 */
export function geoKeyTags(entries: GeoKeyEntries): { directory: number[]; doubles?: number[]; ascii?: string } {
  const rows: [number, number, number, number][] = [];
  const doubles: number[] = [];
  let ascii = '';
  for (const [id, v] of entries.shorts) rows.push([id, 0, 1, v]);
  for (const [id, v] of entries.doubles) {
    rows.push([id, 34736, v.length, doubles.length]);
    doubles.push(...v);
  }
  for (const [id, s] of entries.ascii) {
    const text = `${s.replace(/\|/g, '/')}|`;
    rows.push([id, 34737, text.length, ascii.length]);
    ascii += text;
  }
  rows.sort((a, b) => a[0] - b[0]);
  const directory = [1, 1, 0, rows.length, ...rows.flat()];
  return { directory, ...(doubles.length > 0 ? { doubles } : {}), ...(ascii.length > 0 ? { ascii } : {}) };
}
