/**
 * One small raster per CRS family without an EPSG code (issue 29, section 2), placed where its projection is
 * defined and used: the unit test (test/unit/raster/crs-definition.test.ts) and the end-to-end comparison with
 * gdalwarp (test/e2e/crs-gdal.test.ts) write each with `gdal_translate -a_srs <srs>`.
 */
export interface CrsFamily {
  /** A short name for messages and files. */
  readonly id: string;
  readonly name: string;
  readonly srs: string;
  readonly geoTransform: readonly [number, number, number, number, number, number];
  readonly width: number;
  readonly height: number;
}

export const CRS_FAMILIES: readonly CrsFamily[] = [
  {
    id: 'tmerc-utm',
    name: 'transverse Mercator: UTM 32N as a user-defined projection on the WGS 84 ellipsoid',
    srs: '+proj=tmerc +lat_0=0 +lon_0=9 +k=0.9996 +x_0=500000 +y_0=0 +ellps=WGS84 +units=m +no_defs',
    geoTransform: [400_000, 1000, 0, 5_300_000, 0, -1000],
    width: 40,
    height: 30,
  },
  {
    id: 'tmerc',
    name: 'transverse Mercator, not UTM (New Zealand-like, GRS80 with a shift)',
    srs: '+proj=tmerc +lat_0=0 +lon_0=173 +k=0.9996 +x_0=1600000 +y_0=10000000 +ellps=GRS80 +towgs84=0,0,0 +units=m +no_defs',
    geoTransform: [1_500_000, 1000, 0, 5_200_000, 0, -1000],
    width: 40,
    height: 30,
  },
  {
    id: 'aea',
    name: 'Albers equal-area (the CONUS grid of NLCD and Landsat ARD)',
    srs: '+proj=aea +lat_0=23 +lon_0=-96 +lat_1=29.5 +lat_2=45.5 +x_0=0 +y_0=0 +ellps=GRS80 +towgs84=0,0,0,0,0,0,0 +units=m +no_defs',
    geoTransform: [-2_000_000, 30_000, 0, 3_000_000, 0, -30_000],
    width: 40,
    height: 30,
  },
  {
    id: 'laea',
    name: 'Lambert azimuthal equal-area (ETRS89-LAEA parameters, unknown datum)',
    srs: '+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m +no_defs',
    geoTransform: [4_000_000, 10_000, 0, 3_000_000, 0, -10_000],
    width: 40,
    height: 30,
  },
  {
    id: 'sinu',
    name: 'sinusoidal (MODIS, on its 6371007.181 m sphere)',
    srs: '+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181 +units=m +no_defs',
    geoTransform: [-1_111_950.5197, 926.625433, 0, 5_559_752.5983, 0, -926.625433],
    width: 40,
    height: 30,
  },
  {
    id: 'stere-a',
    name: 'polar stereographic variant A (north pole, scale 0.994)',
    srs: '+proj=stere +lat_0=90 +lon_0=-45 +k=0.994 +x_0=2000000 +y_0=2000000 +ellps=WGS84 +units=m +no_defs',
    geoTransform: [1_000_000, 25_000, 0, 2_500_000, 0, -25_000],
    width: 40,
    height: 30,
  },
  {
    id: 'stere-b',
    name: 'polar stereographic variant B (south pole, latitude of true scale -71)',
    srs: '+proj=stere +lat_0=-90 +lat_ts=-71 +lon_0=0 +x_0=0 +y_0=0 +ellps=WGS84 +units=m +no_defs',
    geoTransform: [-500_000, 25_000, 0, 1_000_000, 0, -25_000],
    width: 40,
    height: 30,
  },
  {
    id: 'lcc-1sp',
    name: 'Lambert conformal conic 1SP (Clarke 1880 IGN, Paris meridian, a Helmert shift)',
    srs: '+proj=lcc +lat_1=46.8 +lat_0=46.8 +lon_0=0 +k_0=0.99987742 +x_0=600000 +y_0=2200000 +ellps=clrk80ign +pm=paris +towgs84=-168,-60,320,0,0,0,0 +units=m +no_defs',
    geoTransform: [500_000, 10_000, 0, 2_300_000, 0, -10_000],
    width: 40,
    height: 30,
  },
  {
    id: 'lcc-2sp',
    name: 'Lambert conformal conic 2SP (in US survey feet)',
    srs: '+proj=lcc +lat_0=46.5 +lon_0=3 +lat_1=49 +lat_2=44 +x_0=700000 +y_0=6600000 +ellps=GRS80 +units=us-ft +no_defs',
    geoTransform: [1_800_000, 30_000, 0, 22_500_000, 0, -30_000],
    width: 40,
    height: 30,
  },
  {
    id: 'eqc',
    name: 'equirectangular (equidistant cylindrical, latitude of true scale 30)',
    srs: '+proj=eqc +lat_ts=30 +lat_0=0 +lon_0=0 +x_0=0 +y_0=0 +ellps=WGS84 +units=m +no_defs',
    geoTransform: [100_000, 20_000, 0, 4_000_000, 0, -20_000],
    width: 40,
    height: 30,
  },
  {
    id: 'merc',
    name: 'Mercator variant B (latitude of true scale 20)',
    srs: '+proj=merc +lat_ts=20 +lon_0=100 +x_0=0 +y_0=0 +ellps=WGS84 +units=m +no_defs',
    geoTransform: [-500_000, 20_000, 0, 2_000_000, 0, -20_000],
    width: 40,
    height: 30,
  },
  {
    id: 'longlat',
    name: 'geographic on the Bessel ellipsoid with a seven-term shift',
    srs: '+proj=longlat +ellps=bessel +towgs84=598.1,73.7,418.2,0.202,0.045,-2.455,6.7 +no_defs',
    geoTransform: [5, 0.05, 0, 48, 0, -0.05],
    width: 40,
    height: 30,
  },
  {
    id: 'mars-eqc',
    name: 'Mars: equirectangular on the 3396190 m sphere',
    srs: '+proj=eqc +lat_ts=0 +lat_0=0 +lon_0=0 +x_0=0 +y_0=0 +R=3396190 +units=m +no_defs',
    geoTransform: [0, 5000, 0, 500_000, 0, -5000],
    width: 40,
    height: 30,
  },
];
