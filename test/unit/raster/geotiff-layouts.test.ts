import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RasterWithoutCrsError, UnsupportedRasterError } from '../../../shared/domain/errors.js';
import { openGeoTiff, type RasterSource, type TypedArray } from '../../../shared/raster/index.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';
import { scratchDir } from './gdal-harness.js';

/**
 * Tessera's GeoTIFF reader against GDAL itself (Debian's GDAL and its Python
 * bindings, installed by .ci/run), on real files other projects' suites ship
 * (test/data/public/, see its README) and on layouts GDAL writes from them
 * here. For every case the pixels, nodata, mask, overviews, geotransform
 * and CRS must equal what GDAL reads: integers exactly, floats bit for bit.
 * docs/geotiff.md's table lists these cases.
 */

const PUBLIC = join(process.cwd(), 'test/data/public');
const LANDSAT = join(PUBLIC, 'rgb_deflate.tif');
const scratch = scratchDir();
const store = new MemoryObjectStore();

/** Debian's python3 has osgeo.gdal; a pyenv or venv python on PATH may not. */
const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');

interface GdalBand {
  dtype: string;
  bin: string;
}
interface GdalFacts {
  size: [number, number];
  bandCount: number;
  geoTransform: number[];
  epsg: number | null;
  gcpCount: number;
  noData: (number | 'nan' | null)[];
  scale: (number | null)[];
  offset: (number | null)[];
  bands: GdalBand[];
  mask: string | null;
  overviews: { size: [number, number]; bands: GdalBand[]; mask: string | null }[];
}

/** A file to read: a public one as it is, or one gdal_translate writes from a public one. */
interface Case {
  readonly name: string;
  readonly from: string;
  /** gdal_translate arguments; absent: the public file itself. */
  readonly translate?: readonly string[];
  readonly config?: readonly string[];
  /**
   * gdal_translate arguments for the file GDAL's reading is taken from, when GDAL cannot read this one
   * right: the same pixels in a layout it reads (GDAL 3.6's libtiff misreads big-endian predictor 3).
   */
  readonly reference?: readonly string[];
  /** JPEG is lossy and decoders may differ: the largest difference from GDAL allowed, and the share of pixels that may differ. */
  readonly lossy?: { maxDiff: number; maxShare: number };
}

/**
 * How far jpeg-js's decoding is from libjpeg-turbo's (GDAL's), measured on these files: its inverse DCT
 * rounds differently (grey and RGB: at most 1 level, on 3.2% of samples); YCbCr adds chroma upsampling
 * and conversion, done as libjpeg does them (at most 3 levels, on 5.5% of samples, up to 19% on the
 * COG's 16-pixel overview). With jpeg-js's own replicated chroma the largest difference was 24.
 */
const JPEG = { maxDiff: 1, maxShare: 0.04 };
const YCBCR_JPEG = { maxDiff: 3, maxShare: 0.2 };

const tiled = ['-co', 'TILED=YES', '-co', 'BLOCKXSIZE=256', '-co', 'BLOCKYSIZE=256'];
const CASES: readonly Case[] = [
  { name: 'Landsat 7 RGB (rasterio RGB.byte), DEFLATE, band-planar 3-row strips, nodata 0', from: LANDSAT },
  { name: 'GDAL byte.tif, NAD27 / UTM 11N, one strip', from: join(PUBLIC, 'byte.tif') },
  { name: 'world, EPSG:4326, LZW 256 x 256 tiles', from: join(PUBLIC, 'world.byte.tif') },
  { name: 'uint16 RGBA (alpha band), DEFLATE 1-row strips', from: join(PUBLIC, 'RGBA.uint16.tif') },
  {
    name: 'YCbCr JPEG COG with internal mask and overviews',
    from: join(PUBLIC, 'cogeo.tif'),
    lossy: YCBCR_JPEG,
  },
  { name: 'uint8, uncompressed tiles', from: LANDSAT, translate: [...tiled] },
  { name: 'uint8, PACKBITS strips, pixel-interleaved', from: LANDSAT, translate: ['-co', 'COMPRESS=PACKBITS', '-co', 'INTERLEAVE=PIXEL'] },
  {
    name: 'uint8, ZSTD tiles, band-planar, predictor 2',
    from: LANDSAT,
    translate: [...tiled, '-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=2', '-co', 'INTERLEAVE=BAND'],
  },
  {
    name: 'int8 (SIGNEDBYTE), DEFLATE tiles, predictor 2',
    from: LANDSAT,
    translate: ['-co', 'PIXELTYPE=SIGNEDBYTE', ...tiled, '-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=2'],
  },
  {
    name: 'uint16, LZW tiles, predictor 2',
    from: LANDSAT,
    translate: ['-ot', 'UInt16', '-scale', '0', '255', '0', '65535', ...tiled, '-co', 'COMPRESS=LZW', '-co', 'PREDICTOR=2'],
  },
  {
    name: 'int16, PACKBITS band-planar strips, big-endian',
    from: LANDSAT,
    translate: [
      '-ot',
      'Int16',
      '-scale',
      '0',
      '255',
      '-32768',
      '32767',
      '-co',
      'COMPRESS=PACKBITS',
      '-co',
      'INTERLEAVE=BAND',
      '-co',
      'ENDIANNESS=BIG',
    ],
  },
  {
    name: 'int16, ZSTD strips, predictor 2',
    from: LANDSAT,
    translate: ['-ot', 'Int16', '-scale', '0', '255', '-32768', '32767', '-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=2'],
  },
  {
    name: 'uint32, uncompressed band-planar tiles',
    from: LANDSAT,
    translate: ['-ot', 'UInt32', '-scale', '0', '255', '0', '4294967295', ...tiled, '-co', 'INTERLEAVE=BAND'],
  },
  {
    name: 'int32, ZSTD tiles, predictor 2',
    from: LANDSAT,
    translate: ['-ot', 'Int32', '-scale', '0', '255', '-2147483648', '2147483647', ...tiled, '-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=2'],
  },
  {
    name: 'float32, ZSTD strips, predictor 3',
    from: LANDSAT,
    translate: ['-ot', 'Float32', '-scale', '0', '255', '-1', '1', '-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=3'],
  },
  {
    name: 'float32, LZW band-planar tiles, predictor 3, big-endian',
    from: LANDSAT,
    translate: [
      '-ot',
      'Float32',
      '-scale',
      '0',
      '255',
      '-1e30',
      '1e30',
      ...tiled,
      '-co',
      'COMPRESS=LZW',
      '-co',
      'PREDICTOR=3',
      '-co',
      'INTERLEAVE=BAND',
      '-co',
      'ENDIANNESS=BIG',
    ],
    reference: ['-ot', 'Float32', '-scale', '0', '255', '-1e30', '1e30', ...tiled, '-co', 'INTERLEAVE=BAND', '-co', 'ENDIANNESS=BIG'],
  },
  {
    name: 'float64, DEFLATE tiles, predictor 3',
    from: LANDSAT,
    translate: ['-ot', 'Float64', '-scale', '0', '255', '0', '0.001', ...tiled, '-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=3'],
  },
  {
    name: 'float64, uncompressed band-planar strips',
    from: LANDSAT,
    translate: ['-ot', 'Float64', '-scale', '0', '255', '-5', '5', '-co', 'INTERLEAVE=BAND'],
  },
  { name: 'BigTIFF, DEFLATE tiles', from: LANDSAT, translate: ['-co', 'BIGTIFF=YES', ...tiled, '-co', 'COMPRESS=DEFLATE'] },
  {
    name: 'NaN nodata, float32 with NaN pixels (rasterio float_nan)',
    from: join(PUBLIC, 'float_nan.tif'),
    translate: ['-a_srs', 'EPSG:32618'],
  },
  {
    name: 'scale and offset (GDAL metadata)',
    from: LANDSAT,
    translate: ['-ot', 'UInt16', '-a_scale', '0.0001', '-a_offset', '-0.1', '-co', 'COMPRESS=DEFLATE'],
  },
  {
    name: 'internal 1-bit mask (GDAL_TIFF_INTERNAL_MASK), DEFLATE tiles',
    from: LANDSAT,
    translate: ['-a_nodata', 'none', '-mask', '1', ...tiled, '-co', 'COMPRESS=DEFLATE'],
    config: ['GDAL_TIFF_INTERNAL_MASK', 'YES'],
  },
  {
    name: 'COG with overviews and an internal mask, ZSTD',
    from: LANDSAT,
    translate: [
      '-of',
      'COG',
      '-a_nodata',
      'none',
      '-mask',
      '1',
      '-co',
      'BLOCKSIZE=128',
      '-co',
      'COMPRESS=ZSTD',
      '-co',
      'OVERVIEW_RESAMPLING=NEAREST',
    ],
  },
  { name: 'south-up (positive y resolution, rasterio float.tif)', from: join(PUBLIC, 'float.tif'), translate: ['-a_srs', 'EPSG:32618'] },
  { name: 'south-up Landsat (-a_ullr upside down)', from: LANDSAT, translate: ['-a_ullr', '101985', '2611485', '339315', '2826915'] },
  { name: 'rotated affine geotransform (rasterio rotated.tif)', from: join(PUBLIC, 'rotated.tif'), translate: ['-a_srs', 'EPSG:32618'] },
  {
    name: 'JPEG, grey tiles',
    from: LANDSAT,
    translate: ['-b', '1', ...tiled, '-co', 'COMPRESS=JPEG'],
    lossy: JPEG,
  },
  {
    name: 'JPEG, band-planar strips',
    from: LANDSAT,
    translate: ['-co', 'COMPRESS=JPEG', '-co', 'INTERLEAVE=BAND'],
    lossy: JPEG,
  },
  {
    name: 'JPEG, RGB pixel-interleaved tiles',
    from: LANDSAT,
    translate: [...tiled, '-co', 'COMPRESS=JPEG', '-co', 'PHOTOMETRIC=RGB', '-co', 'INTERLEAVE=PIXEL'],
    lossy: JPEG,
  },
  {
    name: 'JPEG, YCbCr tiles',
    from: LANDSAT,
    translate: [...tiled, '-co', 'COMPRESS=JPEG', '-co', 'PHOTOMETRIC=YCBCR'],
    lossy: YCBCR_JPEG,
  },
];

const files = new Map<string, string>();
const referenceOf = new Map<string, string>();
let facts: Record<string, GdalFacts> = {};

beforeAll(() => {
  const write = (c: Case, args: readonly string[], out: string) => {
    const config = c.config ? ['--config', ...c.config] : [];
    execFileSync('gdal_translate', ['-q', ...config, ...args, c.from, out], { stdio: ['ignore', 'ignore', 'pipe'] });
    return out;
  };
  const paths = CASES.map((c, i) => (c.translate ? write(c, c.translate, join(scratch.dir, `case-${i}.tif`)) : c.from));
  const references = CASES.map((c, i) =>
    c.reference ? write(c, c.reference, join(scratch.dir, `reference-${i}.tif`)) : (paths[i] as string),
  );
  CASES.forEach((c, i) => {
    files.set(c.name, paths[i] as string);
    referenceOf.set(paths[i] as string, references[i] as string);
  });
  const out = execFileSync(PYTHON, [join(process.cwd(), 'test/unit/raster/gdal-reference.py'), scratch.dir, ...new Set(references)], {
    maxBuffer: 64 * 1024 * 1024,
  });
  facts = JSON.parse(out.toString('utf8')) as Record<string, GdalFacts>;
}, 60_000);
afterAll(() => scratch.remove());

async function open(name: string): Promise<{ src: RasterSource; gdal: GdalFacts }> {
  const path = files.get(name) as string;
  const key = `layouts/${name.replace(/\W+/g, '-')}.tif`;
  await store.putIfAbsent(key, readFileSync(path));
  return { src: await openGeoTiff(store, key), gdal: facts[referenceOf.get(path) as string] as GdalFacts };
}

/** GDAL's array as a typed array of its own type. */
function gdalArray(band: GdalBand): TypedArray | Int8Array {
  const b = readFileSync(band.bin);
  const buf = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  const make = {
    uint8: Uint8Array,
    int8: Int8Array,
    uint16: Uint16Array,
    int16: Int16Array,
    uint32: Uint32Array,
    int32: Int32Array,
    float32: Float32Array,
    float64: Float64Array,
  }[band.dtype];
  if (!make) throw new Error(`unexpected GDAL dtype ${band.dtype}`);
  return new make(buf);
}

/** Differences between our samples and GDAL's: floats compared by bit pattern (so NaN equals NaN, -0 differs from 0). */
function compare(ours: TypedArray, theirs: TypedArray | Int8Array): { differing: number; maxDiff: number } {
  expect(ours.length).toBe(theirs.length);
  const float = ours instanceof Float32Array || ours instanceof Float64Array;
  if (float) {
    const a = new Uint8Array(ours.buffer, ours.byteOffset, ours.byteLength);
    const b = new Uint8Array(theirs.buffer, theirs.byteOffset, theirs.byteLength);
    expect(theirs.BYTES_PER_ELEMENT).toBe(ours.BYTES_PER_ELEMENT);
    return { differing: Buffer.compare(a, b) === 0 ? 0 : 1, maxDiff: Buffer.compare(a, b) === 0 ? 0 : Number.POSITIVE_INFINITY };
  }
  let differing = 0;
  let maxDiff = 0;
  for (let i = 0; i < ours.length; i++) {
    const d = Math.abs((ours[i] as number) - (theirs[i] as number));
    if (d !== 0) {
      differing++;
      if (d > maxDiff) maxDiff = d;
    }
  }
  return { differing, maxDiff };
}

async function expectPixels(src: RasterSource, bands: readonly GdalBand[], lossy: Case['lossy']): Promise<void> {
  const all = Array.from({ length: src.bandCount }, (_, i) => i + 1);
  const got = await src.readWindow({ x: 0, y: 0, width: src.width, height: src.height }, all);
  expect(got).toHaveLength(bands.length);
  got.forEach((ours, b) => {
    const { differing, maxDiff } = compare(ours, gdalArray(bands[b] as GdalBand));
    if (!lossy) {
      expect(differing, `band ${b + 1}: samples differing from GDAL's`).toBe(0);
    } else {
      expect(maxDiff, `band ${b + 1}: largest difference from GDAL's`).toBeLessThanOrEqual(lossy.maxDiff);
      expect(differing / ours.length, `band ${b + 1}: share of samples differing`).toBeLessThanOrEqual(lossy.maxShare);
    }
  });
}

describe('openGeoTiff reads what GDAL reads', () => {
  it.each(CASES.map((c) => [c.name, c] as const))('%s', async (name, c) => {
    const { src, gdal } = await open(name);
    expect([src.width, src.height]).toEqual(gdal.size);
    expect(src.bandCount).toBe(gdal.bandCount);
    expect(src.crs.epsg).toBe(gdal.epsg);
    expect(gdal.gcpCount).toBe(0);
    // The geotransform is parsed from the same doubles: equal, not close.
    expect([...src.geoTransform]).toEqual(gdal.geoTransform);
    const noData = gdal.noData[0];
    if (noData === 'nan') expect(src.noData).toBeNaN();
    else expect(src.noData).toBe(noData ?? undefined);
    expect(src.bandScales).toEqual(gdal.scale.map((v) => (v === 1 || v === null ? undefined : v)));
    expect(src.bandOffsets).toEqual(gdal.offset.map((v) => (v === 0 || v === null ? undefined : v)));
    await expectPixels(src, gdal.bands, c.lossy);

    const mask = await src.mask();
    expect(mask === undefined, 'has an internal mask').toBe(gdal.mask === null);
    if (mask && gdal.mask) {
      expect(mask.dataType).toBe('uint8');
      expect(mask.geoTransform).toEqual(src.geoTransform);
      await expectPixels(mask, [{ dtype: 'uint8', bin: gdal.mask }], undefined);
    }

    const overviews = await src.overviews();
    expect(overviews.map((o) => [o.width, o.height])).toEqual(gdal.overviews.map((o) => o.size));
    for (const [i, ovr] of overviews.entries()) {
      const theirs = gdal.overviews[i] as GdalFacts['overviews'][number];
      await expectPixels(ovr, theirs.bands, c.lossy);
      expect(ovr.crs).toEqual(src.crs);
      expect(ovr.geoTransform[1]).toBeCloseTo((src.geoTransform[1] * src.width) / ovr.width, 9);
      const ovrMask = await ovr.mask();
      expect(ovrMask === undefined).toBe(theirs.mask === null);
      if (ovrMask && theirs.mask) await expectPixels(ovrMask, [{ dtype: 'uint8', bin: theirs.mask }], undefined);
    }
  });

  it('reads int8 as int16 holding the same values, negative ones included', async () => {
    const { src, gdal } = await open('int8 (SIGNEDBYTE), DEFLATE tiles, predictor 2');
    expect(src.dataType).toBe('int16');
    const theirs = gdalArray(gdal.bands[0] as GdalBand);
    expect(theirs).toBeInstanceOf(Int8Array);
    expect(theirs.some((v) => v < 0)).toBe(true);
  });

  it('reads a window of a south-up raster as GDAL does: rows in file order, a positive pixel height', async () => {
    const { src, gdal } = await open('south-up Landsat (-a_ullr upside down)');
    expect(src.geoTransform[5]).toBeGreaterThan(0);
    const win = { x: 101, y: 203, width: 300, height: 200 };
    const [ours] = await src.readWindow(win, [2]);
    const whole = gdalArray(gdal.bands[1] as GdalBand);
    const expected = new Uint8Array(win.width * win.height);
    for (let r = 0; r < win.height; r++) {
      expected.set(whole.subarray((win.y + r) * src.width + win.x, (win.y + r) * src.width + win.x + win.width), r * win.width);
    }
    expect(Buffer.compare(Buffer.from(ours as Uint8Array), Buffer.from(expected))).toBe(0);
  });
});

describe('openGeoTiff refuses what it cannot georeference or decode, with a typed error', () => {
  const refusals: readonly [string, () => string, new (...a: never[]) => Error, RegExp][] = [
    ['no CRS (rasterio float.tif)', () => join(PUBLIC, 'float.tif'), RasterWithoutCrsError, /no GeoTIFF GeoKeys/],
    ['no CRS, rotated (rasterio rotated.tif)', () => join(PUBLIC, 'rotated.tif'), RasterWithoutCrsError, /no GeoTIFF GeoKeys/],
    // Issue 29: the CRSs without an EPSG code (rasterio's float_raster_with_nodata.tif, rgb-byte-tenth.tif) are read
    // now, and compared with GDAL in crs-definition.test.ts; a method Tessera does not model is still refused:
    [
      'a user-defined projection Tessera does not model (oblique Mercator)',
      () =>
        translate('omerc', [
          '-a_srs',
          '+proj=omerc +lat_0=4 +lonc=115 +alpha=53.31 +k=0.99984 +x_0=0 +y_0=0 +ellps=WGS84',
          join(PUBLIC, 'byte.tif'),
        ]),
      UnsupportedRasterError,
      /user-defined projected CRS .* not one Tessera models/,
    ],
    [
      'ground control points only',
      () =>
        translate('gcps', [
          '-a_srs',
          'EPSG:26711',
          ...['-gcp', '0', '0', '440720', '3751320', '-gcp', '20', '0', '441920', '3751320', '-gcp', '0', '20', '440720', '3750120'],
          join(PUBLIC, 'byte.tif'),
        ]),
      UnsupportedRasterError,
      /ground control points/,
    ],
    [
      'LERC compression',
      () => translate('lerc', ['-co', 'COMPRESS=LERC', join(PUBLIC, 'byte.tif')]),
      UnsupportedRasterError,
      /LERC compression/,
    ],
    ['complex samples', () => translate('cint16', ['-ot', 'CInt16', join(PUBLIC, 'byte.tif')]), UnsupportedRasterError, /complex integer/],
    [
      'four interleaved bands in one JPEG',
      () => translate('rgba-jpeg', ['-co', 'COMPRESS=JPEG', '-co', 'TILED=YES', join(PUBLIC, 'RGBA.uint16.tif'), '-ot', 'Byte', '-scale']),
      UnsupportedRasterError,
      /JPEG blocks of 4 interleaved bands/,
    ],
  ];

  function translate(name: string, args: readonly string[]): string {
    const out = join(scratch.dir, `refuse-${name}.tif`);
    const src = args.filter((a) => a.startsWith('/'));
    const rest = args.filter((a) => !a.startsWith('/'));
    execFileSync('gdal_translate', ['-q', ...rest, ...src, out], { stdio: ['ignore', 'ignore', 'pipe'] });
    return out;
  }

  it.each(refusals)('%s', async (name, make, type, message) => {
    const key = `refuse/${name.replace(/\W+/g, '-')}.tif`;
    await store.putIfAbsent(key, readFileSync(make()));
    const err = await openGeoTiff(store, key).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(type);
    expect((err as Error).message).toMatch(message);
  });
});
