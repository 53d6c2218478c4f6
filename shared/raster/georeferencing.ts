import { RasterWithoutCrsError, UnsupportedRasterError } from '../domain/errors.js';
import { crsFromDefinition, crsOfRaster, crsWkt2 } from './crs.js';
import { definitionFromGeoKeys, geoKeysOfDefinition, geoKeyTags } from './crs-geokeys.js';
import { GeoKey, ModelType, RasterType, USER_DEFINED } from './tiff-format.js';

/** GDAL's affine geotransform: `[originX, pixelWidth, rowRotation, originY, columnRotation, pixelHeight]`. */
export type GeoTransform = readonly [number, number, number, number, number, number];

/**
 * A coordinate reference system as Tessera carries it: an EPSG code (what
 * GeoTIFF GeoKeys hold for nearly every real scene) and/or a WKT string.
 * A CRS without an EPSG code (a GeoTIFF user-defined CRS, a WKT, PROJJSON or
 * PROJ string target) is carried as the WKT2 Tessera writes for it
 * (crs-wkt.ts), which reads back to the same definition.
 * `geographic` says the code names a geographic (lat/lon) CRS rather than a
 * projected one; when absent, writers infer it from the code or the WKT.
 */
export interface RasterCrs {
  readonly epsg?: number | undefined;
  readonly wkt?: string | undefined;
  readonly geographic?: boolean | undefined;
}

/** One GeoKey value: a SHORT, DOUBLEs or an ASCII string, by where the directory says it lives. */
export type GeoKeyValue = number | readonly number[] | string;

/**
 * Decodes a GeoKeyDirectoryTag (34735) with its GeoDoubleParams (34736) and
 * GeoAsciiParams (34737) into key id -> value.
 */
export function parseGeoKeys(
  directory: ArrayLike<number>,
  doubles: ArrayLike<number> | undefined,
  ascii: string | undefined,
): Map<number, GeoKeyValue> {
  const keys = new Map<number, GeoKeyValue>();
  const count = directory[3] ?? 0;
  for (let i = 0; i < count; i++) {
    const base = 4 + i * 4;
    if (base + 3 >= directory.length) break;
    const id = directory[base] as number;
    const location = directory[base + 1] as number;
    const n = directory[base + 2] as number;
    const value = directory[base + 3] as number;
    if (location === 0) {
      keys.set(id, value);
    } else if (location === 34736 && doubles) {
      const v = Array.from({ length: n }, (_, k) => doubles[value + k] as number);
      keys.set(id, n === 1 ? (v[0] as number) : v);
    } else if (location === 34737 && ascii !== undefined) {
      // GeoTIFF terminates each string in GeoAsciiParams with '|'.
      keys.set(id, ascii.slice(value, value + n).replace(/\|$/, ''));
    } else if (location === 34735) {
      keys.set(
        id,
        Array.from({ length: n }, (_, k) => directory[value + k] as number),
      );
    }
  }
  return keys;
}

/**
 * The CRS of a GeoTIFF from its GeoKeys. Throws RasterWithoutCrsError when
 * there are none. A user-defined CRS (ProjectedCSTypeGeoKey or
 * GeographicTypeGeoKey 32767: the method, its parameters, the ellipsoid,
 * datum and units spelled out key by key) is built from its keys
 * (crs-geokeys.ts) and carried as WKT2; one whose method, datum or unit
 * Tessera does not model is UnsupportedRasterError, naming it.
 */
export function crsFromGeoKeys(key: string, keys: ReadonlyMap<number, GeoKeyValue> | undefined): RasterCrs {
  const name = JSON.stringify(key);
  if (!keys || keys.size === 0) {
    throw new RasterWithoutCrsError(
      `${name} has no GeoTIFF GeoKeys, so it has no coordinate reference system and its tiles could not be georeferenced; ` +
        'assign one before uploading (gdal_edit.py -a_srs EPSG:<code> or gdal_translate -a_srs EPSG:<code>)',
    );
  }
  const model = keys.get(GeoKey.GTModelType);
  const projected = keys.get(GeoKey.ProjectedCSType);
  const geographic = keys.get(GeoKey.GeographicType);
  const userDefined = (what: 'projected' | 'geographic'): RasterCrs => {
    try {
      const crs = crsFromDefinition(definitionFromGeoKeys(keys, what === 'projected'));
      return { wkt: crsWkt2(crs), geographic: crs.geographic };
    } catch (cause) {
      throw new UnsupportedRasterError(
        `${name} has a user-defined ${what} CRS (GeoKeys without an EPSG code) that Tessera cannot use: ${(cause as Error).message}; ` +
          'rewrite it with a CRS Tessera models, or assign its EPSG code (gdal_edit.py -a_srs EPSG:<code>)',
        { cause },
      );
    }
  };
  if (model === ModelType.GEOCENTRIC) {
    throw new UnsupportedRasterError(
      `${name} uses a geocentric model (GTModelTypeGeoKey=3); Tessera reads projected or geographic rasters`,
    );
  }
  if (typeof projected === 'number' && model !== ModelType.GEOGRAPHIC) {
    if (projected === USER_DEFINED || projected <= 0) return userDefined('projected');
    return { epsg: projected, geographic: false };
  }
  if (model === ModelType.PROJECTED) return userDefined('projected');
  if (typeof geographic === 'number') {
    if (geographic === USER_DEFINED || geographic <= 0) return userDefined('geographic');
    return { epsg: geographic, geographic: true };
  }
  if (model === ModelType.GEOGRAPHIC) return userDefined('geographic');
  throw new RasterWithoutCrsError(
    `${name} has GeoKeys but neither ProjectedCSTypeGeoKey nor GeographicTypeGeoKey, so its CRS is unknown; ` +
      'assign one with gdal_edit.py -a_srs EPSG:<code>',
  );
}

/**
 * The geotransform from ModelTransformation, or from one ModelTiepoint with
 * ModelPixelScale. PixelIsPoint rasters are shifted by half a pixel, as GDAL does.
 */
export function geoTransformFromTags(
  key: string,
  tags: { transformation?: ArrayLike<number> | undefined; tiepoint?: ArrayLike<number> | undefined; scale?: ArrayLike<number> | undefined },
  rasterType: GeoKeyValue | undefined,
): GeoTransform {
  const name = JSON.stringify(key);
  let gt: [number, number, number, number, number, number];
  const m = tags.transformation;
  const t = tags.tiepoint;
  const s = tags.scale;
  if (m && m.length >= 16) {
    gt = [m[3] as number, m[0] as number, m[1] as number, m[7] as number, m[4] as number, m[5] as number];
  } else if (t && t.length >= 6 && s && s.length >= 2) {
    if (t.length > 6) {
      throw new UnsupportedRasterError(
        `${name} is georeferenced by ${t.length / 6} ground control points, not an affine transform; warp it first (gdalwarp -t_srs EPSG:<code>)`,
      );
    }
    const [i, j, , x, y] = [t[0] as number, t[1] as number, t[2] as number, t[3] as number, t[4] as number];
    const sx = s[0] as number;
    const sy = s[1] as number;
    gt = [x - i * sx, sx, 0, y + j * sy, 0, -sy];
  } else if (t && t.length > 6) {
    throw new UnsupportedRasterError(`${name} is georeferenced by ground control points only; warp it first (gdalwarp -t_srs EPSG:<code>)`);
  } else {
    throw new RasterWithoutCrsError(
      `${name} has a CRS but no ModelTiepoint/ModelPixelScale or ModelTransformation, so its pixels have no position; ` +
        'georeference it (gdal_translate -a_ullr <ulx> <uly> <lrx> <lry>)',
    );
  }
  if (!gt.every(Number.isFinite) || gt[1] * gt[5] - gt[2] * gt[4] === 0) {
    throw new UnsupportedRasterError(`${name} has a degenerate geotransform [${gt.join(', ')}]`);
  }
  if (rasterType === RasterType.PIXEL_IS_POINT) {
    // The tiepoint names a pixel centre; GDAL's geotransform names the corner.
    gt[0] -= 0.5 * gt[1] + 0.5 * gt[2];
    gt[3] -= 0.5 * gt[4] + 0.5 * gt[5];
  }
  return gt;
}

/** The geotransform of a window of a raster: the same pixel size, its own origin. */
export function windowGeoTransform(gt: GeoTransform, window: { readonly x: number; readonly y: number }): GeoTransform {
  return [gt[0] + window.x * gt[1] + window.y * gt[2], gt[1], gt[2], gt[3] + window.x * gt[4] + window.y * gt[5], gt[4], gt[5]];
}

const WKT_ROOT_EPSG = /(?:AUTHORITY\[\s*"EPSG"\s*,\s*"?|ID\[\s*"EPSG"\s*,\s*"?)(\d+)"?\s*\]\s*\]\s*$/i;

/** The EPSG code of a WKT's root object (`AUTHORITY["EPSG","32631"]]` / `ID["EPSG",32631]]` at its end), if it has one. */
export function epsgFromWkt(wkt: string): number | undefined {
  const m = WKT_ROOT_EPSG.exec(wkt.trim());
  return m ? Number(m[1]) : undefined;
}

/** Resolves the EPSG code and kind (geographic or projected) a GeoTIFF writer needs. */
export function resolveCrsForWriting(crs: RasterCrs): { epsg: number; geographic: boolean } {
  const epsg = crs.epsg ?? (crs.wkt === undefined ? undefined : epsgFromWkt(crs.wkt));
  if (epsg === undefined) {
    throw new UnsupportedRasterError(
      'cannot write GeoKeys for a CRS without an EPSG code: Tessera writes CRSs as EPSG codes; pass crs.epsg (or a WKT whose root has an EPSG ID)',
    );
  }
  if (!Number.isInteger(epsg) || epsg <= 0 || epsg >= USER_DEFINED) {
    throw new UnsupportedRasterError(`EPSG code ${epsg} cannot be written as a GeoTIFF GeoKey (codes must be integers from 1 to 32766)`);
  }
  let geographic = crs.geographic;
  if (geographic === undefined && crs.wkt !== undefined) {
    const root = /^\s*([A-Z0-9_]+)\s*\[/i.exec(crs.wkt)?.[1]?.toUpperCase();
    if (root) geographic = root === 'GEOGCS' || root === 'GEOGCRS' || root === 'GEOGRAPHICCRS' || root === 'GEODCRS';
  }
  // EPSG keeps geographic 2D CRSs in 4000-4999 (4326, 4258, 4269, ...); pass `geographic` for the few newer ones outside it.
  return { epsg, geographic: geographic ?? (epsg >= 4000 && epsg <= 4999) };
}

/**
 * The GeoTIFF tags of a CRS: for an EPSG code, the directory {@link geoKeyDirectory} writes; for a CRS without one
 * (carried as WKT), its definition spelled out as GDAL writes a user-defined CRS (crs-geokeys.ts), with the
 * GeoDoubleParams and GeoAsciiParams that holds.
 */
export function geoKeyTagsOf(crs: RasterCrs): { directory: number[]; doubles?: number[]; ascii?: string } {
  const epsg = crs.epsg ?? (crs.wkt === undefined ? undefined : epsgFromWkt(crs.wkt));
  if (epsg !== undefined || crs.wkt === undefined) return { directory: geoKeyDirectory(crs) };
  const parsed = crsOfRaster(crs, 'the CRS to write');
  if (parsed.definition === undefined) return { directory: geoKeyDirectory({ epsg: parsed.epsg, geographic: parsed.geographic }) };
  return geoKeyTags(geoKeysOfDefinition(parsed.definition, parsed.definition.names?.crs ?? 'unknown'));
}

/**
 * The GeoKeyDirectory (as SHORTs) for an EPSG CRS: model type, PixelIsArea,
 * and ProjectedCSTypeGeoKey or GeographicTypeGeoKey. No citation strings:
 * readers resolve the code from their EPSG database, as GDAL does.
 */
export function geoKeyDirectory(crs: RasterCrs): number[] {
  const { epsg, geographic } = resolveCrsForWriting(crs);
  const keys: [number, number][] = [
    [GeoKey.GTModelType, geographic ? ModelType.GEOGRAPHIC : ModelType.PROJECTED],
    [GeoKey.GTRasterType, RasterType.PIXEL_IS_AREA],
    [geographic ? GeoKey.GeographicType : GeoKey.ProjectedCSType, epsg],
  ];
  // Header: KeyDirectoryVersion 1, KeyRevision 1, MinorRevision 0, number of keys.
  return [1, 1, 0, keys.length, ...keys.flatMap(([id, v]) => [id, 0, 1, v])];
}

/**
 * The georeferencing tags for a geotransform: ModelPixelScale + ModelTiepoint
 * for a north-up raster, ModelTransformation otherwise (rotation or south-up).
 */
export function geoTransformTags(gt: GeoTransform): { scale?: number[]; tiepoint?: number[]; transformation?: number[] } {
  if (!gt.every(Number.isFinite)) throw new UnsupportedRasterError(`geotransform [${gt.join(', ')}] has a non-finite term`);
  if (gt[2] === 0 && gt[4] === 0 && gt[1] > 0 && gt[5] < 0) {
    return { scale: [gt[1], -gt[5], 0], tiepoint: [0, 0, 0, gt[0], gt[3], 0] };
  }
  return { transformation: [gt[1], gt[2], 0, gt[0], gt[4], gt[5], 0, gt[3], 0, 0, 0, 0, 0, 0, 0, 1] };
}
