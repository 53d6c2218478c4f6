import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv from 'ajv';
import { describe, expect, it } from 'vitest';
import { COG_CONTENT_TYPE } from '../../shared/app/cog-mosaic.js';
import {
  PROJECTION_EXTENSION,
  RASTER_EXTENSION,
  relativeHref,
  type SceneStacItemInput,
  type StacItem,
  sceneStacItem,
  stacItemBytes,
  writeSceneStacItem,
} from '../../shared/app/stac-output.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { InvalidParamsError, OutputOccupiedError } from '../../shared/domain/errors.js';
import { outputKeys } from '../../shared/domain/job-key.js';
import { parseStacItem } from '../../shared/domain/stac-item.js';
import { crsWkt2, parseCrs } from '../../shared/raster/crs.js';
import { MemoryObjectStore } from '../support/memory-object-store.js';

/**
 * The output STAC Item against the JSON Schemas it claims (STAC 1.0.0 Item,
 * projection v2.0.0, raster v1.1.0: test/data/stac-schemas/, with their
 * README), and its footprint against GDAL's own reprojection of the grid's
 * bounds (OSR TransformBounds, Debian's python3-gdal).
 */

const SCHEMAS = join(process.cwd(), 'test/data/stac-schemas');
const ITEM_SCHEMA = 'https://schemas.stacspec.org/v1.0.0/item-spec/json-schema/item.json#';
/** Debian's python3 has osgeo.gdal; a pyenv or venv python on PATH may not. */
const PYTHON = process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');

// `logger: false`: PROJJSON's schema puts keywords beside a $ref, which draft-07 ignores and ajv would warn about.
const ajv = new Ajv({ allErrors: true, format: 'full', logger: false });
/** STAC's `iri` and `iri-reference` (hrefs, extension URIs): ajv 6 knows only their URI forms, so WHATWG URL parsing decides. */
const parses = (text: string, base?: string) => {
  try {
    return !/\s/.test(text) && new URL(text, base) !== undefined;
  } catch {
    return false;
  }
};
ajv.addFormat('iri', (text: string) => parses(text));
ajv.addFormat('iri-reference', (text: string) => parses(text, 'https://base.invalid/dir/item.json'));
for (const file of readdirSync(SCHEMAS).filter((f) => f.endsWith('.json'))) {
  ajv.addSchema(JSON.parse(readFileSync(join(SCHEMAS, file), 'utf8')));
}

/** Schema errors of `item` against the core Item schema and every extension schema it names (as stac-validator does). */
function schemaErrors(item: unknown): string[] {
  const parsed = JSON.parse(JSON.stringify(item)) as { stac_extensions?: string[] };
  const errors: string[] = [];
  for (const id of [ITEM_SCHEMA, ...(parsed.stac_extensions ?? [])]) {
    const known = ajv.getSchema(id) ?? ajv.getSchema(`${id}#`);
    if (!known) {
      errors.push(`no schema committed for ${id}`);
      continue;
    }
    if (!known(parsed)) errors.push(...(known.errors ?? []).map((e) => `${id}: ${e.dataPath} ${e.message}`));
  }
  return errors;
}

const SCENE = 'a'.repeat(64);
/** A 10 m UTM 31N grid of 10 x 10 km, north of Paris. */
const UTM: SceneStacItemInput = {
  sceneKey: SCENE,
  itemKey: outputKeys.stacItem(SCENE),
  target: { epsg: 32631, geoTransform: [500_000, 10, 0, 5_700_000, 0, -10], width: 1000, height: 1000 },
  noData: -9999,
  assets: { vrt: outputKeys.mosaic(SCENE) },
  expression: '(B08 - B04) / (B08 + B04)',
  datetime: '2024-06-01T10:30:31Z',
};

/** GDAL's WGS84 bounds of a grid (OSR TransformBounds, 21 points per edge). */
function gdalBounds(epsg: number, bounds: number[]): number[] {
  const script = [
    'import json, sys',
    'from osgeo import osr',
    'epsg, b = json.loads(sys.argv[1])',
    's = osr.SpatialReference(); s.ImportFromEPSG(epsg)',
    't = osr.SpatialReference(); t.ImportFromEPSG(4326); t.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)',
    's.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)',
    'print(json.dumps(osr.CoordinateTransformation(s, t).TransformBounds(*b, 21)))',
  ].join('\n');
  return JSON.parse(execFileSync(PYTHON, ['-c', script, JSON.stringify([epsg, bounds])], { encoding: 'utf8' })) as number[];
}

describe('sceneStacItem', () => {
  it('is a valid STAC 1.0.0 Item with the projection v2.0.0 and raster v1.1.0 extensions', () => {
    const item = sceneStacItem({ ...UTM, assets: { vrt: outputKeys.mosaic(SCENE), cog: outputKeys.cogMosaic(SCENE) } });
    expect(schemaErrors(item)).toEqual([]);
    expect(item).toMatchObject({
      type: 'Feature',
      stac_version: '1.0.0',
      id: SCENE,
      stac_extensions: [PROJECTION_EXTENSION, RASTER_EXTENSION],
    });
  });

  it('the schemas catch what is wrong: the validation is not vacuous', () => {
    const item = JSON.parse(JSON.stringify(sceneStacItem(UTM)));
    item.properties['proj:shape'] = [1000];
    item.assets.mosaic['raster:bands'][0].data_type = 'float';
    delete item.properties.datetime;
    item.assets.mosaic.href = 'two words.vrt';
    const errors = schemaErrors(item);
    expect(errors.some((e) => e.startsWith(PROJECTION_EXTENSION))).toBe(true);
    expect(errors.some((e) => e.startsWith(RASTER_EXTENSION))).toBe(true);
    expect(errors.some((e) => e.startsWith(ITEM_SCHEMA) && /datetime/.test(e))).toBe(true);
    expect(errors.some((e) => e.startsWith(ITEM_SCHEMA) && /href/.test(e) && /iri-reference/.test(e))).toBe(true);
  });

  it('describes the target grid: proj:code, proj:shape, proj:transform in STAC order and proj:bbox in the grid’s CRS', () => {
    const { properties } = sceneStacItem(UTM) as { properties: Record<string, unknown> };
    expect(properties['proj:code']).toBe('EPSG:32631');
    expect(properties['proj:shape']).toEqual([1000, 1000]);
    expect(properties['proj:transform']).toEqual([10, 0, 500_000, 0, -10, 5_700_000]);
    expect(properties['proj:bbox']).toEqual([500_000, 5_690_000, 510_000, 5_700_000]);
    expect(properties).not.toHaveProperty('proj:epsg');
  });

  const grids: { name: string; target: SceneStacItemInput['target'] }[] = [
    { name: 'UTM 31N, 10 m', target: UTM.target },
    {
      // Across the central meridian: its top edge's highest latitude is mid-edge, not at a corner.
      name: 'UTM 31N, a 100 km scene across the central meridian (curved edges in lon/lat)',
      target: { epsg: 32631, geoTransform: [450_000, 20, 0, 5_800_000, 0, -20], width: 5000, height: 5000 },
    },
    {
      name: 'WebMercatorQuad zoom 12 tiles',
      target: {
        epsg: 3857,
        geoTransform: [244_598.4, 9.554628535647032, 0, 6_271_072.33, 0, -9.554628535647032],
        width: 2048,
        height: 1536,
        tms: { id: 'WebMercatorQuad', zoom: 12, minCol: 2073, minRow: 1408 },
      },
    },
    { name: 'lon/lat (EPSG:4326), south-up', target: { epsg: 4326, geoTransform: [2, 0.001, 0, 48, 0, 0.001], width: 800, height: 600 } },
  ];
  for (const { name, target } of grids) {
    it(`puts bbox and geometry in WGS84 where GDAL puts the grid’s bounds: ${name}`, () => {
      const item = sceneStacItem({ ...UTM, target }) as { bbox: number[]; geometry: { type: string; coordinates: number[][][] } };
      expect(schemaErrors(item)).toEqual([]);
      const gt = target.geoTransform;
      const xs = [gt[0], gt[0] + target.width * gt[1]];
      const ys = [gt[3], gt[3] + target.height * gt[5]];
      const gdal = gdalBounds(target.epsg as number, [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)]);
      // 1e-6 degrees is about 0.1 m, a hundredth of a 10 m pixel.
      item.bbox.forEach((v, i) => {
        expect(Math.abs(v - (gdal[i] as number))).toBeLessThan(1e-6);
      });
      const ring = item.geometry.coordinates[0] as number[][];
      expect(item.geometry.type).toBe('Polygon');
      expect(ring[0]).toEqual(ring[ring.length - 1]);
      // RFC 7946: the exterior ring is counter-clockwise.
      let twiceArea = 0;
      for (let i = 0; i + 1 < ring.length; i++)
        twiceArea += (ring[i]?.[0] as number) * (ring[i + 1]?.[1] as number) - (ring[i + 1]?.[0] as number) * (ring[i]?.[1] as number);
      expect(twiceArea).toBeGreaterThan(0);
      for (const [lon, lat] of ring as [number, number][]) {
        expect(lon).toBeGreaterThanOrEqual(item.bbox[0] as number);
        expect(lat).toBeGreaterThanOrEqual(item.bbox[1] as number);
        expect(lon).toBeLessThanOrEqual(item.bbox[2] as number);
        expect(lat).toBeLessThanOrEqual(item.bbox[3] as number);
      }
    });
  }

  it('gives raster:bands float32 with the nodata, and the resolution in metres only for a CRS in metres', () => {
    const utm = sceneStacItem(UTM) as { assets: Record<string, Record<string, unknown>> };
    expect(utm.assets.mosaic?.['raster:bands']).toEqual([{ data_type: 'float32', nodata: -9999, spatial_resolution: 10 }]);
    const lonlat = sceneStacItem({ ...UTM, target: grids[3]?.target as SceneStacItemInput['target'] }) as typeof utm;
    expect(lonlat.assets.mosaic?.['raster:bands']).toEqual([{ data_type: 'float32', nodata: -9999 }]);
    const nan = sceneStacItem({ ...UTM, noData: Number.NaN });
    expect((nan as typeof utm).assets.mosaic?.['raster:bands']).toEqual([{ data_type: 'float32', nodata: 'nan', spatial_resolution: 10 }]);
    expect(schemaErrors(nan)).toEqual([]);
  });

  it('links the mosaics relative to the item, and lists the COG mosaic only when it was built', () => {
    const vrtOnly = sceneStacItem(UTM) as { assets: Record<string, Record<string, unknown>> };
    expect(Object.keys(vrtOnly.assets)).toEqual(['mosaic']);
    expect(vrtOnly.assets.mosaic).toMatchObject({ href: `./${SCENE}.vrt`, roles: ['data'] });
    const both = sceneStacItem({ ...UTM, assets: { vrt: outputKeys.mosaic(SCENE), cog: outputKeys.cogMosaic(SCENE) } }) as typeof vrtOnly;
    expect(both.assets.cog).toMatchObject({ href: `./${SCENE}.tif`, type: COG_CONTENT_TYPE, roles: ['data'] });
    expect(COG_CONTENT_TYPE).toBe('image/tiff; application=geotiff; profile=cloud-optimized');
  });

  it('takes its time from the source STAC item and links it as derived_from', () => {
    const source = parseStacItem(
      {
        type: 'Feature',
        stac_version: '1.0.0',
        id: 'S2B_31UDQ_20240601_0_L2A',
        geometry: null,
        properties: { datetime: '2024-06-01T10:56:29.024000Z' },
        links: [],
        assets: { red: { href: './B04.tif' } },
      },
      'scenes/S2/item.json',
    );
    const item = sceneStacItem({
      ...UTM,
      datetime: undefined,
      source: { href: 's3://sources/scenes/S2/item.json', metadata: source.metadata },
    }) as {
      properties: Record<string, unknown>;
      links: unknown[];
    };
    expect(item.properties.datetime).toBe('2024-06-01T10:56:29.024000Z');
    expect(item.links).toEqual([
      {
        rel: 'derived_from',
        href: 's3://sources/scenes/S2/item.json',
        type: 'application/geo+json',
        title: 'source item S2B_31UDQ_20240601_0_L2A',
      },
    ]);
    expect(schemaErrors(item)).toEqual([]);

    const range = sceneStacItem({
      ...UTM,
      source: {
        href: 'item.json',
        metadata: { id: 'mosaic', datetime: null, start_datetime: '2024-06-01T00:00:00Z', end_datetime: '2024-06-30T23:59:59Z' },
      },
    }) as typeof item;
    expect(range.properties).toMatchObject({
      datetime: null,
      start_datetime: '2024-06-01T00:00:00Z',
      end_datetime: '2024-06-30T23:59:59Z',
    });
    expect(schemaErrors(range)).toEqual([]);
  });

  it('refuses to invent a time: no source item and no datetime is a typed error', () => {
    expect(() => sceneStacItem({ ...UTM, datetime: undefined })).toThrow(InvalidParamsError);
    expect(() => sceneStacItem({ ...UTM, datetime: '1 June 2024' })).toThrow(/needs a datetime \(RFC 3339/);
    expect(() =>
      sceneStacItem({ ...UTM, source: { href: 'i.json', metadata: { id: 'x', datetime: null, start_datetime: '2024-06-01T00:00:00Z' } } }),
    ).toThrow(/without both start_datetime and end_datetime/);
  });

  it('rejects a grid that has no footprint with a typed error', () => {
    expect(() => sceneStacItem({ ...UTM, target: { ...UTM.target, width: 0 } })).toThrow(InvalidParamsError);
    expect(() => sceneStacItem({ ...UTM, target: { ...UTM.target, geoTransform: [0, 0, 0, 0, 0, 0] } })).toThrow(/degenerate/);
  });

  it('is deterministic: the same input gives the same bytes, canonical JSON that parses back to the item', () => {
    const a = stacItemBytes(sceneStacItem(UTM));
    const b = stacItemBytes(sceneStacItem({ ...UTM, target: { ...UTM.target, geoTransform: [...UTM.target.geoTransform] } }));
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
    const text = new TextDecoder().decode(a);
    expect(JSON.parse(text)).toEqual(sceneStacItem(UTM));
    expect(text.startsWith('{"assets":')).toBe(true);
  });
});

describe('writeSceneStacItem', () => {
  const key = outputKeys.stacItem(SCENE);

  it('writes create-only; a re-run finds its own bytes: already-present, INFO and counted', async () => {
    const store = new MemoryObjectStore();
    const lines: string[] = [];
    const telemetry = new JsonTelemetry((l) => lines.push(l));
    const item: StacItem = sceneStacItem(UTM);
    expect(await writeSceneStacItem(store, key, item, telemetry)).toEqual({ kind: 'written', key });
    expect(await writeSceneStacItem(store, key, sceneStacItem(UTM), telemetry)).toEqual({ kind: 'already-present', key });
    expect(telemetry.counters()['write-already-present']).toBe(1);
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ level: 'INFO', event: 'write-already-present', outputKey: key }),
    );
    expect(JSON.parse(new TextDecoder().decode(await store.get(key)))).toEqual(item);
  });

  it('does not take another item at the key for its own: write-occupied, ERROR, OutputOccupiedError', async () => {
    const store = new MemoryObjectStore();
    const telemetry = new JsonTelemetry();
    await writeSceneStacItem(store, key, sceneStacItem({ ...UTM, datetime: '2024-06-02T00:00:00Z' }), telemetry);
    await expect(writeSceneStacItem(store, key, sceneStacItem(UTM), telemetry)).rejects.toBeInstanceOf(OutputOccupiedError);
    expect(telemetry.counters()['write-occupied']).toBe(1);
  });
});

describe('relativeHref', () => {
  it.each([
    ['mosaics/s.stac.json', 'mosaics/s.vrt', './s.vrt'],
    ['mosaics/s.stac.json', 'tiles/s/0_0.tif', '../tiles/s/0_0.tif'],
    ['a/b/c.json', 'a/d.tif', '../d.tif'],
    ['item.json', 'x/y.tif', './x/y.tif'],
  ])('from %s to %s is %s', (from, to, href) => {
    expect(relativeHref(from, to)).toBe(href);
  });
});

describe('sceneStacItem footprints across the antimeridian, round a pole, off Earth (issue 29)', () => {
  /** 233 km of UTM 60N across 180 degrees at 52 N (test/unit/app/antimeridian.test.ts's scene). */
  const across: SceneStacItemInput = {
    ...UTM,
    target: { epsg: 32660, geoTransform: [587_200, 100, 0, 5_873_100, 0, -100], width: 2330, height: 2330 },
  };

  it('is a MultiPolygon cut at 180 degrees, its bbox running west edge > east edge (RFC 7946 5.2)', () => {
    const item = sceneStacItem(across) as { bbox: number[]; geometry: { type: string; coordinates: number[][][][] } };
    expect(schemaErrors(item)).toEqual([]);
    expect(item.geometry.type).toBe('MultiPolygon');
    const [west, east] = item.geometry.coordinates.map((polygon) => (polygon[0] as number[][]).map((p) => p[0] as number));
    expect(Math.max(...(west as number[]))).toBe(180);
    expect(Math.min(...(east as number[]))).toBe(-180);
    expect(Math.min(...(west as number[]))).toBeGreaterThan(178);
    expect(Math.max(...(east as number[]))).toBeLessThan(-178);
    const [minx, miny, maxx, maxy] = item.bbox as [number, number, number, number];
    expect(minx).toBe(Math.min(...(west as number[])));
    expect(maxx).toBe(Math.max(...(east as number[])));
    expect(minx).toBeGreaterThan(maxx);
    // The same latitudes as GDAL's bounds of the grid (its longitudes run the short way round, past 180).
    const gt = across.target.geoTransform;
    const gdal = gdalBounds(32660, [gt[0], gt[3] - 2330 * 100, gt[0] + 2330 * 100, gt[3]]);
    expect(miny).toBeCloseTo(gdal[1] as number, 6);
    expect(maxy).toBeCloseTo(gdal[3] as number, 6);
  });

  it('closes a footprint round the north pole along the pole, spanning every longitude', () => {
    const polar: SceneStacItemInput = {
      ...UTM,
      target: { epsg: 3413, geoTransform: [-1_000_000, 10_000, 0, 1_000_000, 0, -10_000], width: 200, height: 200 },
    };
    const item = sceneStacItem(polar) as { bbox: number[]; geometry: { type: string } };
    expect(schemaErrors(item)).toEqual([]);
    expect(item.bbox[0]).toBe(-180);
    expect(item.bbox[2]).toBe(180);
    expect(item.bbox[3]).toBe(90);
    // The corners, 1,414 km from the pole, are the southernmost points: 77.0 N.
    expect(item.bbox[1]).toBeCloseTo(76.9988, 3);
  });

  it('describes a CRS without an EPSG code as proj:wkt2 with proj:code null', () => {
    const laea = parseCrs('+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m +no_defs');
    const item = sceneStacItem({
      ...UTM,
      target: { wkt2: crsWkt2(laea), geoTransform: [4_000_000, 100, 0, 3_000_000, 0, -100], width: 100, height: 100 },
    });
    expect(schemaErrors(item)).toEqual([]);
    const properties = item.properties as Record<string, unknown>;
    expect(properties['proj:code']).toBeNull();
    expect(properties['proj:wkt2']).toBe(crsWkt2(laea));
    expect((item.bbox as number[])[0]).toBeGreaterThan(5);
  });

  it('gives a grid on Mars no Earth footprint: geometry null, no bbox', () => {
    const mars = parseCrs('+proj=eqc +lat_ts=0 +lat_0=0 +lon_0=0 +x_0=0 +y_0=0 +R=3396190 +units=m +no_defs');
    const item = sceneStacItem({
      ...UTM,
      target: { wkt2: crsWkt2(mars), geoTransform: [0, 1000, 0, 0, 0, -1000], width: 100, height: 100 },
    });
    expect(schemaErrors(item)).toEqual([]);
    expect(item.geometry).toBeNull();
    expect(item).not.toHaveProperty('bbox');
  });
});

describe('sceneStacItem of a rendered scene with web map outputs (issue 26 sections 3 and 4)', () => {
  const web = {
    pmtiles: outputKeys.pmtiles(SCENE),
    tileJson: outputKeys.tileJson(SCENE),
    xyz: { template: outputKeys.tileTemplate(SCENE, 'WebMercatorQuad', 'PNG'), type: 'image/png', minZoom: 8, maxZoom: 14 },
    thumbnail: { key: outputKeys.quicklook(SCENE), width: 1024, height: 768 },
  };
  const rendered = { ...UTM, rendered: { format: 'PNG', bands: ['Red', 'Green', 'Blue', 'Alpha'] } };

  it('links the PMTiles archive, the TileJSON, the XYZ tiles (web-map-links v1.2.0) and the quicklook as thumbnail', () => {
    const item = sceneStacItem({ ...rendered, web });
    expect(schemaErrors(item)).toEqual([]);
    expect(item.stac_extensions).toContain('https://stac-extensions.github.io/web-map-links/v1.2.0/schema.json');
    const assets = item.assets as Record<string, { href: string; type: string; roles: string[] }>;
    expect(assets.pmtiles).toMatchObject({ href: `./${SCENE}.pmtiles`, type: 'application/vnd.pmtiles', roles: ['data', 'tiles'] });
    expect(assets.tilejson).toMatchObject({ href: `./${SCENE}.tilejson.json`, type: 'application/json', roles: ['tilejson', 'metadata'] });
    expect(assets.thumbnail).toMatchObject({ href: `./${SCENE}.quicklook.png`, type: 'image/png', roles: ['thumbnail'] });
    expect((item.links as { rel: string; href: string }[]).map((l) => [l.rel, l.href])).toEqual([
      ['pmtiles', `./${SCENE}.pmtiles`],
      ['tilejson', `./${SCENE}.tilejson.json`],
      ['xyz', `../tiles/${SCENE}/WebMercatorQuad/{z}/{x}/{y}.png`],
    ]);
  });

  it('names the web-map-links extension only with its links, and its schema is not vacuous', () => {
    const thumbOnly = sceneStacItem({ ...rendered, web: { thumbnail: web.thumbnail } });
    expect(schemaErrors(thumbOnly)).toEqual([]);
    expect(thumbOnly.stac_extensions).not.toContain('https://stac-extensions.github.io/web-map-links/v1.2.0/schema.json');
    // An xyz link with a {s} placeholder and no href:servers is what the extension's schema forbids.
    const item = sceneStacItem({ ...rendered, web }) as { links: Record<string, unknown>[] };
    const bad = { ...item, links: item.links.map((l) => (l.rel === 'xyz' ? { ...l, href: 'https://{s}.example/{z}/{x}/{y}.png' } : l)) };
    expect(schemaErrors(bad).join('\n')).toContain('web-map-links');
  });
});
