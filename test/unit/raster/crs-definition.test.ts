import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import proj4 from 'proj4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidParamsError, UnsupportedRasterError } from '../../../shared/domain/errors.js';
import {
  CelestialBodyMismatchError,
  type Crs,
  canonicalCrsText,
  crsFromEpsg,
  crsOfRaster,
  crsTransform,
  crsWkt2,
  geographicOf,
  parseCrs,
  sameCrs,
} from '../../../shared/raster/crs.js';
import { UnsupportedCrsError } from '../../../shared/raster/crs-definition.js';
import { definitionFromGeoKeys } from '../../../shared/raster/crs-geokeys.js';
import { encodeGeoTiff, openGeoTiff } from '../../../shared/raster/index.js';
import { CRS_FAMILIES } from '../../support/crs-families.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';

/**
 * Issue 29, section 2: CRSs without an EPSG code. Each family is written by GDAL itself (`gdal_translate -a_srs
 * <PROJ string>` of a float32 raster made with numpy, test/unit/raster/crs-reference.py) and must come back from
 * Tessera's reader as GDAL reads it: the same longitude/latitude for sample pixel corners (PROJ's transformation
 * against proj4js's), and one canonical key from every form GDAL exports it in (WKT 1, WKT2, PROJJSON, PROJ). Then
 * the other way: the WKT2 and the GeoKeys Tessera writes for it are read by GDAL as the same CRS.
 */

const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
const REFERENCE = join(process.cwd(), 'test/unit/raster/crs-reference.py');

interface Written {
  name: string;
  wkt1: string;
  wkt2: string;
  projjson: string;
  proj4: string;
  epsg: string | null;
  points: { x: number; y: number; lon: number; lat: number }[];
}

function python(mode: 'write' | 'read' | 'check', request: unknown): unknown {
  return JSON.parse(execFileSync(PYTHON, [REFERENCE, mode], { input: JSON.stringify(request), encoding: 'utf8', maxBuffer: 64 << 20 }));
}

/** Degrees from a CRS to longitude/latitude as the reference does it: EPSG:4326 on Earth, else the CRS's own geographic CRS. */
function toLonLat(crs: Crs, points: readonly { x: number; y: number }[]): [number, number][] {
  const xs = Float64Array.from(points, (p) => p.x);
  const ys = Float64Array.from(points, (p) => p.y);
  crsTransform(crs, crs.body === 'Earth' ? crsFromEpsg(4326) : geographicOf(crs))(xs, ys);
  return points.map((_, i) => [xs[i] as number, ys[i] as number]);
}

let dir: string;
let written: Written[];
const store = new MemoryObjectStore();
const worst: Record<string, number> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tessera-crs-'));
  written = python(
    'write',
    CRS_FAMILIES.map((f, i) => ({ ...f, path: join(dir, `family-${i}.tif`) })),
  ) as Written[];
  for (const [i] of CRS_FAMILIES.entries()) {
    await store.putIfAbsent(`family-${i}.tif`, new Uint8Array(readFileSync(join(dir, `family-${i}.tif`))));
  }
}, 60_000);

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  console.log(`largest difference from GDAL per family (degrees): ${JSON.stringify(worst)}`);
});

describe('CRSs without an EPSG code, against GDAL', () => {
  CRS_FAMILIES.forEach((family, i) => {
    describe(family.name, () => {
      it('reads the user-defined GeoKeys gdal_translate -a_srs wrote as GDAL reads them', async () => {
        const src = await openGeoTiff(store, `family-${i}.tif`);
        expect(src.crs.epsg).toBeUndefined();
        const crs = crsOfRaster(src.crs, family.name);
        const gdal = written[i] as Written;
        const ours = toLonLat(crs, gdal.points);
        let max = 0;
        gdal.points.forEach((p, k) => {
          const [lon, lat] = ours[k] as [number, number];
          max = Math.max(max, Math.abs(lon - p.lon), Math.abs(lat - p.lat));
        });
        worst[family.name.split(/[:(]/)[0]?.trim() ?? family.name] = Math.max(worst[family.name] ?? 0, Number(max.toExponential(2)));
        // 1e-8 degrees is a millimetre: proj4js's ellipsoidal series (LAEA's authalic latitude) and its Helmert
        // shifts agree with PROJ's to a few 1e-9 degrees.
        expect(max).toBeLessThan(1e-8);
      });

      it('gives one canonical key from GDAL WKT 1, WKT2, PROJJSON and PROJ exports of it', async () => {
        const src = await openGeoTiff(store, `family-${i}.tif`);
        const id = crsOfRaster(src.crs, family.name).id;
        expect(id).toMatch(/^\+proj=/);
        const gdal = written[i] as Written;
        expect(canonicalCrsText(gdal.wkt1)).toBe(id);
        expect(canonicalCrsText(gdal.wkt2)).toBe(id);
        expect(canonicalCrsText(gdal.projjson)).toBe(id);
        expect(canonicalCrsText(JSON.parse(gdal.projjson) as object)).toBe(id);
        expect(canonicalCrsText(gdal.proj4)).toBe(id);
        expect(canonicalCrsText(family.srs)).toBe(id);
      });
    });
  });

  it('writes WKT2 and GeoKeys that GDAL reads as the same CRS', () => {
    const checks = CRS_FAMILIES.map((family, i) => {
      const crs = parseCrs(family.srs);
      const tiff = join(dir, `ours-${i}.tif`);
      writeFileSync(
        tiff,
        encodeGeoTiff({
          width: 16,
          height: 16,
          dataType: 'float32',
          bandCount: 1,
          bands: [new Float32Array(256)],
          geoTransform: family.geoTransform,
          crs: { wkt: crsWkt2(crs) },
          blockSize: 16,
        }),
      );
      const points = (written[i] as Written).points.map((p) => [p.x, p.y]);
      return { name: family.name, reference: family.srs, wkt: crsWkt2(crs), tiff, points };
    });
    const answers = python('check', checks) as {
      name: string;
      referenceProj4: string;
      wkt: { maxDegrees: number; proj4: string };
      tiff: { maxDegrees: number; proj4: string };
    }[];
    console.log(answers.map((a) => `${a.name}: WKT2 ${a.wkt.maxDegrees}, GeoTIFF ${a.tiff.maxDegrees} degrees`).join('\n'));
    for (const a of answers) {
      // GDAL reads the same parameters from Tessera's WKT2 and GeoKeys as from the reference text (its PROJ exports, in canonical form).
      const reference = canonicalCrsText(a.referenceProj4);
      expect({ name: a.name, wkt: canonicalCrsText(a.wkt.proj4), tiff: canonicalCrsText(a.tiff.proj4) }).toEqual({
        name: a.name,
        wkt: reference,
        tiff: reference,
      });
      expect(a.wkt.maxDegrees).toBeLessThan(1e-8);
      expect(a.tiff.maxDegrees).toBeLessThan(1e-8);
    }
  });

  it("computes equirectangular and Mercator variant B where proj4js's own WKT reader does not", () => {
    // Why Tessera reads WKT and PROJJSON itself (docs/reprojection.md): proj4js 2.22 drops the equirectangular's
    // latitude of true scale from WKT2 and PROJJSON, and cannot name Mercator variant B's projection at all.
    const eqc = written[CRS_FAMILIES.findIndex((f) => f.srs.startsWith('+proj=eqc +lat_ts=30'))] as Written;
    const p = eqc.points[3] as Written['points'][number];
    const theirs = proj4(eqc.wkt2, 'EPSG:4326').forward([p.x, p.y]) as number[];
    expect(Math.abs((theirs[0] as number) - p.lon)).toBeGreaterThan(0.1);
    const ours = toLonLat(parseCrs(eqc.wkt2), [p])[0] as [number, number];
    expect(Math.abs(ours[0] - p.lon)).toBeLessThan(1e-9);
    const merc = written[CRS_FAMILIES.findIndex((f) => f.srs.startsWith('+proj=merc'))] as Written;
    expect(() => proj4(merc.wkt2, 'EPSG:4326')).toThrow(/projection name/);
    expect(parseCrs(merc.wkt2).proj4).toMatch(/^\+proj=merc \+lat_ts=20 /);
  });
});

describe("rasterio's test files with CRSs without an EPSG code", () => {
  it.each([
    ['float_raster_with_nodata.tif (Lambert azimuthal equal-area, GRS80)', 'float_raster_with_nodata.tif', /^\+proj=laea /],
    // A UTM zone on an unnamed WGS 84-based datum: ProjectionGeoKey 16018 names the conversion, no parameters.
    ['rgb-byte-tenth.tif (UTM 18N by ProjectionGeoKey 16018)', 'rgb-byte-tenth.tif', /^\+proj=tmerc \+lat_0=0 \+lon_0=-75 \+k_0=0.9996 /],
  ])('reads %s as GDAL does', async (name, file, definition) => {
    const path = join(process.cwd(), 'test/data/public', file);
    const [gdal] = python('read', [{ name, path }]) as Written[];
    await store.putIfAbsent(`public/${file}`, new Uint8Array(readFileSync(path)));
    const crs = crsOfRaster((await openGeoTiff(store, `public/${file}`)).crs, file);
    expect(crs.proj4).toMatch(definition);
    const ours = toLonLat(crs, (gdal as Written).points);
    (gdal as Written).points.forEach((p, k) => {
      expect(Math.abs(((ours[k] as number[])[0] as number) - p.lon)).toBeLessThan(1e-8);
      expect(Math.abs(((ours[k] as number[])[1] as number) - p.lat)).toBeLessThan(1e-8);
    });
    expect(canonicalCrsText((gdal as Written).wkt2)).toBe(crs.id);
  });
});

describe('CRS texts', () => {
  it('keys a WKT or PROJJSON whose root names an EPSG code by that code', () => {
    expect(canonicalCrsText('EPSG:3035')).toBe('EPSG:3035');
    const wkt = execFileSync('gdalsrsinfo', ['-o', 'wkt2', '--single-line', 'EPSG:3035'], { encoding: 'utf8' }).trim();
    expect(canonicalCrsText(wkt)).toBe('EPSG:3035');
    const json = execFileSync('gdalsrsinfo', ['-o', 'projjson', '--single-line', 'EPSG:3413'], { encoding: 'utf8' }).trim();
    expect(canonicalCrsText(json)).toBe('EPSG:3413');
  });

  it('gives one key for one definition written in any order or spelling', () => {
    const a = canonicalCrsText('+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m +no_defs');
    expect(canonicalCrsText('+units=m +ellps=GRS80 +y_0=3210000 +x_0=4321000 +lon_0=10.0 +lat_0=52 +proj=laea')).toBe(a);
    expect(canonicalCrsText('+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +a=6378137 +rf=298.257222101')).toBe(a);
    expect(canonicalCrsText('+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=WGS84')).not.toBe(a);
  });

  it('tells a user-defined UTM and its EPSG code apart by key but not by arithmetic', () => {
    const user = parseCrs('+proj=tmerc +lat_0=0 +lon_0=3 +k=0.9996 +x_0=500000 +y_0=0 +datum=WGS84 +units=m');
    expect(user.id).not.toBe('EPSG:32631');
    expect(sameCrs(user, crsFromEpsg(32631))).toBe(true);
    expect(sameCrs(user, crsFromEpsg(32632))).toBe(false);
  });

  it.each([
    ['+proj=omerc +lat_0=4 +lonc=115 +alpha=53.3 +k=0.99984 +ellps=evrstSS', /not supported|not a projection/],
    ['+proj=krovak +lat_0=49.5 +lon_0=24.8 +ellps=bessel', /not a projection Tessera models/],
    ['+proj=stere +lat_0=45 +lon_0=10 +ellps=WGS84', /at a pole only/],
    ['+proj=laea +lat_0=52 +lon_0=10', /names no ellipsoid/],
    ['+proj=laea +lat_0=52 +lon_0=10 +ellps=GRS80 +nadgrids=ntv2.gsb', /\+nadgrids is not supported/],
    ['+proj=laea +lat_0=52 +lon_0=10 +ellps=GRS80 +lat_ts=3', /takes no lat_ts/],
    [
      'PROJCRS["x",BASEGEOGCRS["x",DATUM["x",ELLIPSOID["x",6378137,298.257223563]]],CONVERSION["x",METHOD["Hotine Oblique Mercator (variant B)",ID["EPSG",9815]]]]',
      /Hotine.*not one Tessera models/,
    ],
    ['COMPOUNDCRS["x",PROJCRS["y"],VERTCRS["z"]]', /compound/],
    ['{"type":"VerticalCRS","name":"x"}', /not a projected or geographic CRS/],
    ['WGS84', /not a CRS Tessera reads/],
  ])('refuses %s, saying what it models', (text, message) => {
    expect(() => parseCrs(text)).toThrow(UnsupportedCrsError);
    expect(() => parseCrs(text)).toThrow(message);
  });

  it('refuses a GeoTIFF projection it does not model, naming the GeoKey', () => {
    // ProjCoordTransGeoKey 3: oblique Mercator.
    const keys = new Map<number, number | number[]>([
      [1024, 1],
      [2048, 4326],
      [3072, 32767],
      [3074, 32767],
      [3075, 3],
    ]);
    expect(() => definitionFromGeoKeys(keys, true)).toThrow(/ProjCoordTransGeoKey 3 \(oblique Mercator\) is not one Tessera models/);
    expect(() =>
      crsOfRaster({ wkt: 'PROJCS["x",GEOGCS["x",DATUM["x",SPHEROID["x",6378137,298.3]]],PROJECTION["Krovak"]]' }, 'scene.tif'),
    ).toThrow(UnsupportedRasterError);
  });
});

describe('non-Earth bodies', () => {
  const mars = '+proj=eqc +lat_ts=0 +lat_0=0 +lon_0=0 +x_0=0 +y_0=0 +R=3396190 +units=m +no_defs';

  it('knows a 3396190 m sphere is not Earth, and never transforms it onto an Earth CRS', () => {
    const crs = parseCrs(mars);
    expect(crs.body).not.toBe('Earth');
    expect(() => crsTransform(crs, crsFromEpsg(4326))).toThrow(CelestialBodyMismatchError);
    expect(() => crsTransform(crsFromEpsg(3857), crs)).toThrow(/different celestial bodies/);
  });

  it('transforms between two CRSs on the same body', () => {
    const polar = parseCrs('+proj=stere +lat_0=90 +lon_0=0 +k=1 +x_0=0 +y_0=0 +R=3396190 +units=m');
    const xs = Float64Array.of(0);
    const ys = Float64Array.of(Math.PI * 3396190 * (80 / 180));
    crsTransform(parseCrs(mars), polar)(xs, ys);
    // 80 degrees north on the sphere is 10 degrees from the pole: 2 R tan(5 degrees) from it.
    expect(Math.hypot(xs[0] as number, ys[0] as number)).toBeCloseTo(2 * 3396190 * Math.tan((5 * Math.PI) / 180), 3);
  });

  it('is an INVALID_PARAMS error when the text is not a CRS at all', () => {
    expect(() => canonicalCrsText('EPSG:99')).toThrow(InvalidParamsError);
  });
});
