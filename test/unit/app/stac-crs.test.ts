import { describe, expect, it } from 'vitest';
import { checkStacCrs } from '../../../shared/app/scene-grid.js';
import { InvalidEventError } from '../../../shared/domain/errors.js';
import { parseStacItem, resolveStacAssets } from '../../../shared/domain/stac-item.js';
import { crsWkt2, parseCrs } from '../../../shared/raster/crs.js';
import { encodeGeoTiff } from '../../../shared/raster/index.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';

/**
 * Issue 29, section 2: STAC `proj:code`, `proj:epsg`, `proj:wkt2` and `proj:projjson` on input. The item's
 * declaration (an asset's own fields over the item's properties) is read, and checked at fan-out against the CRS
 * the band file itself carries, which is what Tessera computes with.
 */

const LAEA = '+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m +no_defs';

function item(properties: Record<string, unknown>, asset: Record<string, unknown> = {}) {
  return parseStacItem(
    {
      type: 'Feature',
      stac_version: '1.1.0',
      id: 'x',
      geometry: null,
      properties: { datetime: '2024-06-01T10:56:29Z', ...properties },
      links: [],
      assets: {
        red: { href: './red.tif', type: 'image/tiff; application=geotiff', ...asset },
        nir: { href: './nir.tif', type: 'image/tiff; application=geotiff' },
      },
    },
    'items/x.json',
  );
}

/** One small GeoTIFF in `crs` (an EPSG code or a CRS without one) in a memory store, at `key`. */
async function fileIn(store: MemoryObjectStore, key: string, crs: { epsg: number } | { wkt: string }) {
  const bytes = encodeGeoTiff({
    width: 16,
    height: 16,
    dataType: 'uint8',
    bandCount: 1,
    bands: [new Uint8Array(256)],
    geoTransform: [4_000_000, 100, 0, 3_000_000, 0, -100],
    crs,
    blockSize: 16,
  });
  const put = await store.putIfAbsent(key, bytes);
  return put.kind === 'written' ? put.version : ((await store.head(key))?.version as string);
}

describe('a STAC item declaring its CRS', () => {
  it("reads proj:code, proj:epsg, proj:wkt2 and proj:projjson, an asset's own fields over the item's", () => {
    const wkt2 = crsWkt2(parseCrs(LAEA));
    expect(item({ 'proj:code': 'EPSG:3035' }).assets.red?.crs).toEqual({ text: 'EPSG:3035' });
    expect(item({ 'proj:epsg': 32631 }).assets.nir?.crs).toEqual({ text: 'EPSG:32631' });
    // A null code says "no EPSG code": the WKT2 describes it.
    expect(item({ 'proj:epsg': null, 'proj:wkt2': wkt2 }).assets.red?.crs).toEqual({ text: wkt2 });
    expect(item({ 'proj:code': null, 'proj:projjson': { type: 'ProjectedCRS', name: 'x' } }).assets.red?.crs).toEqual({
      text: '{"type":"ProjectedCRS","name":"x"}',
    });
    const mixed = item({ 'proj:code': 'EPSG:32631' }, { 'proj:code': null, 'proj:wkt2': wkt2 });
    expect(mixed.assets.red?.crs).toEqual({ text: wkt2 });
    expect(mixed.assets.nir?.crs).toEqual({ text: 'EPSG:32631' });
    expect(item({}).assets.red?.crs).toBeUndefined();
    expect(item({ 'proj:epsg': '32631' }).assets.red?.crs).toEqual({ problem: 'properties proj:epsg "32631" is not a positive integer' });
    expect(resolveStacAssets(mixed, 'items/x.json', { R: 'red' }).R?.crs).toEqual({ text: wkt2 });
  });

  it('passes a band file in the CRS the item declares, whatever form it declares it in', async () => {
    const store = new MemoryObjectStore();
    const laea = parseCrs(LAEA);
    const v = await fileIn(store, 'items/red.tif', { wkt: crsWkt2(laea) });
    for (const declared of [{ 'proj:wkt2': crsWkt2(laea) }, { 'proj:code': null, 'proj:wkt2': crsWkt2(laea) }]) {
      const resolved = resolveStacAssets(item(declared), 'items/x.json', { R: 'red' });
      await expect(checkStacCrs(store, 'items/x.json', resolved, () => v)).resolves.toEqual([]);
    }
  });

  it("refuses, naming both, an item whose proj: CRS is not its band file's", async () => {
    const store = new MemoryObjectStore();
    const v = await fileIn(store, 'items/red.tif', { epsg: 3035 });
    const resolved = resolveStacAssets(item({ 'proj:epsg': 32631 }), 'items/x.json', { R: 'red' });
    const err = await checkStacCrs(store, 'items/x.json', resolved, () => v).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidEventError);
    expect((err as Error).message).toMatch(/declares asset "red" \(band R\) in EPSG:32631, but its file "items\/red.tif" is in EPSG:3035/);
    const malformed = resolveStacAssets(item({ 'proj:epsg': -1 }), 'items/x.json', { R: 'red' });
    await expect(checkStacCrs(store, 'items/x.json', malformed, () => v)).rejects.toThrow(/proj:epsg -1 is not a positive integer/);
  });

  it('reports, without refusing, a declaration it cannot read (an IAU code)', async () => {
    const store = new MemoryObjectStore();
    const v = await fileIn(store, 'items/red.tif', { epsg: 3035 });
    const resolved = resolveStacAssets(item({ 'proj:code': 'IAU_2015:49910' }), 'items/x.json', { R: 'red' });
    await expect(checkStacCrs(store, 'items/x.json', resolved, () => v)).resolves.toEqual(['R']);
  });
});
