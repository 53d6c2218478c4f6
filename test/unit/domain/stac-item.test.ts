import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InvalidEventError, InvalidParamsError } from '../../../shared/domain/errors.js';
import {
  parseStacItem,
  parseStacSelection,
  readStacItem,
  resolveAssetHref,
  resolveStacAssets,
  type StacItemInput,
} from '../../../shared/domain/stac-item.js';

// Real items from other projects' suites (test/data/public/stac/README.md). Each is
// parsed under the key it has in its own repository, so its relative hrefs
// (`../../../tests/data-files/...`) resolve the way its publisher meant them.
const publicItem = (file: string): unknown => JSON.parse(readFileSync(new URL(`../../data/public/stac/${file}`, import.meta.url), 'utf8'));
const S2_KEY = 'examples/sentinel2-l2a-example/S2A_T07HFE_20190212T192646_L2A/S2A_T07HFE_20190212T192646_L2A.json';
const LANDSAT_KEY = 'examples/landsat-c2-l2/LC08_L2SP_047027_20201204_02_T1/LC08_L2SP_047027_20201204_02_T1.json';
const S2_GRANULE =
  'tests/data-files/S2A_MSIL2A_20190212T192651_N0212_R013_T07HFE_20201007T160857.SAFE/GRANULE/L2A_T07HFE_A019029_20190212T192646/IMG_DATA';
const sentinel2 = (): StacItemInput => parseStacItem(publicItem('S2A_T07HFE_20190212T192646_L2A.json'), S2_KEY);
const landsat = (): StacItemInput => parseStacItem(publicItem('LC08_L2SP_047027_20201204_02_T1.json'), LANDSAT_KEY);

/** A minimal valid item; `patch` replaces top-level fields, `props` properties. */
function item(assets: unknown, patch: Record<string, unknown> = {}, props: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'Feature',
    stac_version: '1.0.0',
    id: 'scene-1',
    geometry: null,
    properties: { datetime: '2024-06-01T10:20:30Z', ...props },
    links: [],
    assets,
    ...patch,
  };
}
const parse = (doc: unknown, key = 'S2/T31UDQ/item.json'): StacItemInput => parseStacItem(doc, key);

describe('parseStacItem', () => {
  it('reads a Sentinel-2 L2A item (STAC 1.0, eo:bands, hrefs relative to the item)', () => {
    const s2 = sentinel2();
    expect(s2.stacVersion).toBe('1.0.0');
    expect(s2.itemKey).toBe(S2_KEY);
    expect(s2.metadata).toEqual({
      id: 'S2A_T07HFE_20190212T192646_L2A',
      collection: 'sentinel2-l2a-example',
      datetime: '2019-02-12T19:26:51.024000Z',
    });
    expect(Object.keys(s2.assets)).toHaveLength(41);
    expect(s2.assets.red?.bands).toEqual([{ name: 'B04', commonName: 'red' }]);
    expect(s2.assets.visual?.bands.map((b) => b.commonName)).toEqual(['red', 'green', 'blue']);
    expect(s2.assets.red?.type).toBe('image/tiff; application=geotiff; profile=cloud-optimized');
    // scl lists only raster:bands: one band, unnamed
    expect(s2.assets.scl?.bands).toEqual([{}]);
    expect(s2.assets.safe_manifest?.bands).toEqual([]);
  });

  it('reads a Landsat Collection 2 L2 item (STAC 1.0)', () => {
    const l8 = landsat();
    expect(l8.metadata).toEqual({
      id: 'LC08_L2SP_047027_20201204_02_T1',
      collection: 'landsat-c2-l2',
      datetime: '2020-12-04T19:02:11.194486Z',
    });
    expect(l8.assets.nir08?.bands).toEqual([{ name: 'OLI_B5', commonName: 'nir08' }]);
    expect(l8.assets.thumbnail?.roles).toEqual(['thumbnail']);
  });

  it('reads a STAC 1.1 item, whose bands[] carry eo:common_name', () => {
    const v11 = parse(publicItem('extended-item-1.1.0.json'), 'cs2/20201211_223832_CS2.json');
    expect(v11.stacVersion).toBe('1.1.0');
    expect(v11.metadata.id).toBe('20201211_223832_CS2');
    expect(v11.assets.analytic?.bands).toEqual([
      { name: 'band1', commonName: 'blue' },
      { name: 'band2', commonName: 'green' },
      { name: 'band3', commonName: 'red' },
      { name: 'band4', commonName: 'nir' },
    ]);
  });

  it('keeps a datetime range for the output item', () => {
    const range = parse(
      item(
        { a: { href: 'a.tif' } },
        {},
        { datetime: null, start_datetime: '2024-06-01T00:00:00Z', end_datetime: '2024-06-02T00:00:00+02:00' },
      ),
    );
    expect(range.metadata).toEqual({
      id: 'scene-1',
      datetime: null,
      start_datetime: '2024-06-01T00:00:00Z',
      end_datetime: '2024-06-02T00:00:00+02:00',
    });
  });

  it('accepts the 1.0 and 1.1 release candidates and betas, and patch releases', () => {
    for (const v of ['1.0.0', '1.0.0-rc.4', '1.1.0-beta.1', '1.1.0', '1.1.3']) {
      expect(parse(item({ a: { href: 'a.tif' } }, { stac_version: v })).stacVersion).toBe(v);
    }
  });

  it('keeps an asset called constructor or __proto__ as an asset, not as Object machinery', () => {
    const doc = JSON.parse(
      '{"type":"Feature","stac_version":"1.0.0","id":"x","properties":{"datetime":null,"start_datetime":"2024-01-01T00:00:00Z","end_datetime":"2024-01-02T00:00:00Z"},"assets":{"__proto__":{"href":"p.tif"},"constructor":{"href":"c.tif"}}}',
    );
    const parsed = parse(doc);
    expect(Object.keys(parsed.assets)).toEqual(['__proto__', 'constructor']);
    expect(resolveStacAssets(parsed, parsed.itemKey, { P: '__proto__', C: 'constructor' })).toEqual({
      P: { key: 'S2/T31UDQ/p.tif', index: 1, asset: '__proto__' },
      C: { key: 'S2/T31UDQ/c.tif', index: 1, asset: 'constructor' },
    });
  });

  it.each<[string, unknown, RegExp]>([
    ['a JSON array', [], /is a JSON array, not a STAC Item/],
    ['JSON null', null, /JSON null/],
    ['a string', 'item', /JSON string/],
    ['a Collection', item({}, { type: 'Collection' }), /"type" is "Collection".*one of its Items, not the Collection/],
    ['a FeatureCollection', item({}, { type: 'FeatureCollection' }), /one of its Items/],
    ['no type', item({}, { type: undefined }), /"type" is missing/],
    ['no stac_version', item({ a: { href: 'a.tif' } }, { stac_version: undefined }), /no "stac_version"/],
    [
      'STAC 0.9',
      item({ a: { href: 'a.tif' } }, { stac_version: '0.9.0' }),
      /STAC "0.9.0"; Tessera reads STAC 1.0 and 1.1 Items: migrate it/,
    ],
    ['STAC 2.0', item({ a: { href: 'a.tif' } }, { stac_version: '2.0.0' }), /STAC "2.0.0"/],
    ['no id', item({ a: { href: 'a.tif' } }, { id: '' }), /no "id"/],
    ['a collection that is not a string', item({ a: { href: 'a.tif' } }, { collection: 7 }), /"collection" that is not a string/],
    ['no properties', item({ a: { href: 'a.tif' } }, { properties: undefined }), /no "properties" object/],
    ['no datetime', item({ a: { href: 'a.tif' } }, { properties: {} }), /no properties.datetime/],
    [
      'a null datetime without a range',
      item({ a: { href: 'a.tif' } }, {}, { datetime: null, start_datetime: '2024-06-01T00:00:00Z' }),
      /not both start_datetime and end_datetime/,
    ],
    [
      'a datetime that is not RFC 3339',
      item({ a: { href: 'a.tif' } }, {}, { datetime: '2024-06-01' }),
      /properties.datetime "2024-06-01", which is not an RFC 3339/,
    ],
    ['no assets', item(undefined), /has no assets/],
    ['empty assets', item({}), /has no assets/],
    ['an asset that is not an object', item({ red: 'B04.tif' }), /asset "red" that is not an object/],
    ['an asset without href', item({ red: { type: 'image/tiff' } }), /asset "red" without an "href"/],
    ['an empty href', item({ red: { href: ' ' } }), /asset "red" without an "href"/],
    ['a href that is a number', item({ red: { href: 4 } }), /asset "red" without an "href"/],
    ['a type that is not a string', item({ red: { href: 'a.tif', type: 1 } }), /"type" is not a string/],
    ['roles that are not strings', item({ red: { href: 'a.tif', roles: 'data' } }), /"roles" is not an array of strings/],
    ['eo:bands that is not an array', item({ red: { href: 'a.tif', 'eo:bands': { name: 'B04' } } }), /"eo:bands" is not an array/],
    ['bands that is not an array', item({ red: { href: 'a.tif', bands: 'B04' } }), /"bands" is not an array/],
    ['a band that is not an object', item({ red: { href: 'a.tif', 'eo:bands': ['B04'] } }), /eo:bands\[0\] is not an object/],
    ['a band name that is not a string', item({ red: { href: 'a.tif', bands: [{ name: 4 }] } }), /bands\[0\].name is not a string/],
    [
      'a common name that is not a string',
      item({ red: { href: 'a.tif', 'eo:bands': [{ common_name: ['red'] }] } }),
      /eo:bands\[0\] common name is not a string/,
    ],
  ])('refuses %s with a typed error that names the item', (_what, doc, message) => {
    const act = () => parse(doc);
    expect(act).toThrow(InvalidEventError);
    expect(act).toThrow(message);
    expect(act).toThrow(/STAC item "S2\/T31UDQ\/item.json"/);
  });
});

describe('readStacItem', () => {
  it('decodes UTF-8 JSON bytes', () => {
    const bytes = new TextEncoder().encode(JSON.stringify(item({ 'Zürich 日本': { href: 'Zürich/日本.tif' } })));
    const parsed = readStacItem(bytes, 'S2/item.json');
    expect(resolveStacAssets(parsed, parsed.itemKey, { B: 'Zürich 日本' }).B?.key).toBe('S2/Zürich/日本.tif');
  });

  it.each<[string, Uint8Array, RegExp]>([
    ['text that is not JSON', new TextEncoder().encode('{"type": "Feature",'), /is not UTF-8 JSON/],
    ['bytes that are not UTF-8', new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), /is not UTF-8 JSON/],
    ['a document over the size limit', new Uint8Array(8 * 1024 * 1024 + 1), /over the 8388608-byte limit/],
  ])('refuses %s', (_what, bytes, message) => {
    expect(() => readStacItem(bytes, 'S2/item.json')).toThrow(InvalidEventError);
    expect(() => readStacItem(bytes, 'S2/item.json')).toThrow(message);
  });
});

describe('resolveAssetHref', () => {
  it.each([
    ['B04.tif', 'a/b/B04.tif'],
    ['./B04.tif', 'a/b/B04.tif'],
    ['../20m/B8A.tif', 'a/20m/B8A.tif'],
    ['../../B04.tif', 'B04.tif'],
    ['./x/./y/../B04.tif', 'a/b/x/B04.tif'],
    ['/other/scene/B04.tif', 'other/scene/B04.tif'],
    // hrefs are URI references: `+` is a plus (only form data makes it a space), `%20` a space
    ['my+band.tif', 'a/b/my+band.tif'],
    ['my%20band.tif', 'a/b/my band.tif'],
    // an encoded slash is a slash in the key (object keys have no folders to keep it apart)
    ['x%2FB04.tif', 'a/b/x/B04.tif'],
    ['Z%C3%BCrich/%E6%97%A5%E6%9C%AC.tif', 'a/b/Zürich/日本.tif'],
    ['Zürich/日本.tif', 'a/b/Zürich/日本.tif'],
    ['100%25.tif', 'a/b/100%.tif'],
  ])('resolves %j against a/b/item.json to %j', (href, key) => {
    expect(resolveAssetHref('a/b/item.json', href)).toBe(key);
  });

  it('does not re-decode the item key: it is already decoded', () => {
    expect(resolveAssetHref('scenes/100%/my+scene/item.json', 'B04.tif')).toBe('scenes/100%/my+scene/B04.tif');
    expect(resolveAssetHref('item.json', 'B04.tif')).toBe('B04.tif');
    expect(() => resolveAssetHref('item.json', '../B04.tif')).toThrow(
      /climbs above the root of the source store \(the item is at "item.json"\)/,
    );
  });

  it.each<[string, string, RegExp]>([
    ['.. above the root', '../../../B04.tif', /climbs above the root of the source store/],
    ['.. above the root after a descent', 'x/../../../../B04.tif', /climbs above the root/],
    ['an encoded .. that would climb', '..%2F..%2F..%2FB04.tif', /not a valid object key.*"\.\." path segment/],
    ['an s3:// URL', 's3://bucket/B04.tif', /is a URL; Tessera reads assets from the stack's source store only/],
    ['a gs:// URL', 'gs://bucket/B04.tif', /is a URL/],
    ['an https:// URL', 'https://example.com/B04.tif', /is a URL/],
    ['an az:// URL', 'az://container/B04.tif', /is a URL/],
    ['a file: URL', 'file:///tmp/B04.tif', /is a URL/],
    ['a network-path reference', '//host/B04.tif', /is a URL/],
    ['a query', 'B04.tif?version=2', /query or fragment/],
    ['a fragment', 'B04.tif#band=1', /query or fragment/],
    ['an empty segment', 'x//B04.tif', /empty path segment/],
    ['a folder', 'x/', /empty path segment/],
    ['the folder itself', '.', /names a folder, not a file/],
    ['its parent', '..', /names a folder, not a file/],
    ['a backslash', 'x\\B04.tif', /backslash/],
    ['an encoded control character', 'B04%00.tif', /control character/],
    ['broken percent-encoding', 'B04%E6%97.tif', /not valid percent-encoding/],
  ])('refuses %s', (_what, href, message) => {
    const act = () => resolveAssetHref('a/b/item.json', href, 'red');
    expect(act).toThrow(InvalidEventError);
    expect(act).toThrow(message);
    expect(act).toThrow(/asset "red"/);
  });
});

describe('resolveStacAssets', () => {
  it('picks Sentinel-2 bands by asset key, each relative href resolved against the item', () => {
    const s2 = sentinel2();
    // With each band's raster:bands scale and offset, which --unscale applies (issue 29).
    const scaleOffset = { scale: 0.0001, offset: 0 };
    // And the item's proj:epsg, checked against each file's own CRS at fan-out (issue 29).
    const crs = { text: 'EPSG:32707' };
    expect(resolveStacAssets(s2, S2_KEY, { B04: 'red', B08: 'nir' })).toEqual({
      B04: { key: `${S2_GRANULE}/R10m/T07HFE_20190212T192651_B04_10m.tif`, index: 1, asset: 'red', scaleOffset, crs },
      B08: { key: `${S2_GRANULE}/R10m/T07HFE_20190212T192651_B08_10m.tif`, index: 1, asset: 'nir', scaleOffset, crs },
    });
  });

  it('picks a band by common name when it is carried by exactly one asset of one band', () => {
    // `nir` names asset nir (one band) and nothing else
    // Landsat Collection 2 surface reflectance: scale 0.0000275, offset -0.2 in raster:bands.
    const scaleOffset = { scale: 0.0000275, offset: -0.2 };
    const crs = { text: 'EPSG:32610' };
    expect(resolveStacAssets(landsat(), LANDSAT_KEY, { N: 'nir08', S: 'swir16' })).toEqual({
      N: {
        key: 'tests/data-files/oli-tirs/LC08_L2SP_047027_20201204_20210313_02_T1_SR_B5.TIF',
        index: 1,
        asset: 'nir08',
        scaleOffset,
        crs,
      },
      S: {
        key: 'tests/data-files/oli-tirs/LC08_L2SP_047027_20201204_20210313_02_T1_SR_B6.TIF',
        index: 1,
        asset: 'swir16',
        scaleOffset,
        crs,
      },
    });
  });

  it('picks a band by its eo:bands name', () => {
    expect(resolveStacAssets(landsat(), LANDSAT_KEY, { NIR: 'OLI_B5' }).NIR?.asset).toBe('nir08');
    expect(resolveStacAssets(landsat(), LANDSAT_KEY, { T: 'TIRS_B10' }).T?.asset).toBe('lwir11');
  });

  it('prefers an asset of one band over a multi-band one holding the same common name', () => {
    // Landsat has no visual asset, so give one: red is then carried by `red` and by `rgb` (band 1)
    const doc = item({
      rgb: { href: 'rgb.tif', 'eo:bands': [{ common_name: 'red' }, { common_name: 'green' }, { common_name: 'blue' }] },
      B04: { href: 'B04.tif', 'eo:bands': [{ name: 'B04', common_name: 'red' }] },
    });
    expect(resolveStacAssets(parse(doc), 'S2/T31UDQ/item.json', { R: 'red', G: 'green' })).toEqual({
      R: { key: 'S2/T31UDQ/B04.tif', index: 1, asset: 'B04' },
      G: { key: 'S2/T31UDQ/rgb.tif', index: 2, asset: 'rgb' },
    });
  });

  it('lists the candidates when several one-band assets carry the name (Sentinel-2 B04 at 10, 20 and 60 m)', () => {
    const act = () => resolveStacAssets(sentinel2(), S2_KEY, { B04: 'B04' });
    expect(act).toThrow(InvalidParamsError);
    expect(act).toThrow(/is ambiguous: "red_20m", "red_60m", "red" all hold it; select one by its asset key/);
    expect(() => resolveStacAssets(sentinel2(), S2_KEY, { N: 'B8A' })).toThrow(/"nir08", "nir08_60m" all hold it/);
  });

  it('lists the candidates when only multi-band assets carry the name (STAC 1.1 analytic and visual)', () => {
    const v11 = parse(publicItem('extended-item-1.1.0.json'), 'cs2/item.json');
    expect(() => resolveStacAssets(v11, v11.itemKey, { R: 'red' })).toThrow(/"analytic:3", "visual:1" all hold it/);
  });

  it('resolves STAC 1.1 bands[] by common name and index once the hrefs are in the store', () => {
    const doc = publicItem('extended-item-1.1.0.json') as { assets: Record<string, { href: string }> };
    for (const [name, asset] of Object.entries(doc.assets)) asset.href = `./${name}.tif`;
    const v11 = parse(doc, 'cs2/20201211_223832_CS2.json');
    // `nir` is carried by analytic (band 4) alone; a multi-band asset is then the only choice
    expect(resolveStacAssets(v11, v11.itemKey, { NIR: 'nir', R: 'analytic:3' })).toEqual({
      NIR: { key: 'cs2/analytic.tif', index: 4, asset: 'analytic', crs: { text: 'EPSG:32659' } },
      R: { key: 'cs2/analytic.tif', index: 3, asset: 'analytic', crs: { text: 'EPSG:32659' } },
    });
    // band name `band1` is analytic's band 1 and visual's band 3
    expect(() => resolveStacAssets(v11, v11.itemKey, { B: 'band1' })).toThrow(/"analytic:1", "visual:3" all hold it/);
  });

  it('refuses the real STAC 1.1 item, whose assets are on the web, saying where assets must be', () => {
    const v11 = parse(publicItem('extended-item-1.1.0.json'), 'cs2/item.json');
    expect(() => resolveStacAssets(v11, v11.itemKey, { NIR: 'nir' })).toThrow(
      /asset "analytic" href "https:\/\/storage.googleapis.com\/open-cogs\/stac-examples\/20201211_223832_CS2_analytic.tif" is a URL/,
    );
  });

  it('makes a multi-band asset named by key say which band, and takes ASSET:INDEX', () => {
    const s2 = sentinel2();
    expect(() => resolveStacAssets(s2, S2_KEY, { R: 'visual' })).toThrow(
      /asset "visual" holds 3 bands \(B04\/red, B03\/green, B02\/blue\); say which: "visual:1" \.\. "visual:3"/,
    );
    expect(resolveStacAssets(s2, S2_KEY, { G: 'visual:2' })).toEqual({
      G: { key: `${S2_GRANULE}/R10m/T07HFE_20190212T192651_TCI_10m.tif`, index: 2, asset: 'visual', crs: { text: 'EPSG:32707' } },
    });
    expect(() => resolveStacAssets(s2, S2_KEY, { X: 'visual:4' })).toThrow(/lists 3 bands, so there is no band 4/);
  });

  it('counts the bands of an asset that lists only raster:bands (STAC 1.0), so a multi-band one must say which', () => {
    const doc = item({
      rgb: { href: 'rgb.tif', 'raster:bands': [{ data_type: 'uint8' }, { data_type: 'uint8' }, { data_type: 'uint8' }] },
    });
    const parsed = parse(doc);
    expect(parsed.assets.rgb?.bands).toEqual([{}, {}, {}]);
    expect(() => resolveStacAssets(parsed, parsed.itemKey, { G: 'rgb' })).toThrow(
      /holds 3 bands \(\(unnamed\), \(unnamed\), \(unnamed\)\); say which: "rgb:1" \.\. "rgb:3"/,
    );
    expect(resolveStacAssets(parsed, parsed.itemKey, { G: 'rgb:2' }).G).toEqual({ key: 'S2/T31UDQ/rgb.tif', index: 2, asset: 'rgb' });
  });

  it('refuses an asset that is not a GeoTIFF', () => {
    expect(() => resolveStacAssets(landsat(), LANDSAT_KEY, { T: 'thumbnail' })).toThrow(
      /asset "thumbnail" .* is "image\/jpeg", not a GeoTIFF/,
    );
    expect(() => resolveStacAssets(sentinel2(), S2_KEY, { M: 'granule_metadata' })).toThrow(InvalidParamsError);
  });

  it('refuses a selection the item cannot satisfy, listing its raster assets', () => {
    const act = () => resolveStacAssets(landsat(), LANDSAT_KEY, { B04: 'B4' });
    expect(act).toThrow(InvalidParamsError);
    expect(act).toThrow(
      /no asset is called "B4" and no band has that name or common name; the item's raster assets: qa_pixel; qa_radsat; coastal \(OLI_B1\/coastal\)/,
    );
    expect(() => resolveStacAssets(landsat(), LANDSAT_KEY, { C: 'constructor' })).toThrow(/no asset is called "constructor"/);
  });

  it('refuses an empty selection, an empty band name and an empty value', () => {
    expect(() => resolveStacAssets(landsat(), LANDSAT_KEY, {})).toThrow(/no assets selected.*\{"B04":"red","B08":"nir"\}/);
    expect(() => resolveStacAssets(landsat(), LANDSAT_KEY, { '': 'red' })).toThrow(/has an empty name/);
    expect(() => resolveStacAssets(landsat(), LANDSAT_KEY, { B04: '' })).toThrow(/names no asset/);
  });

  it('refuses a relative href that climbs above the store root when the item sits higher than its publisher put it', () => {
    const shallow = parseStacItem(publicItem('S2A_T07HFE_20190212T192646_L2A.json'), 'S2A_T07HFE_20190212T192646_L2A.json');
    const act = () => resolveStacAssets(shallow, shallow.itemKey, { B04: 'red' });
    expect(act).toThrow(InvalidEventError);
    expect(act).toThrow(/climbs above the root of the source store/);
  });
});

describe('parseStacSelection', () => {
  it('reads a band -> asset object', () => {
    expect(parseStacSelection('{"B04":"red","B08":"nir","G":"visual:2"}', 'TESSERA_STAC_ASSETS')).toEqual({
      B04: 'red',
      B08: 'nir',
      G: 'visual:2',
    });
  });

  it.each([
    ['not JSON', '{B04: red}', /TESSERA_STAC_ASSETS is not JSON/],
    ['an array', '["red"]', /must be a non-empty JSON object/],
    ['empty', '{}', /must be a non-empty JSON object/],
    ['a number for an asset', '{"B04":4}', /band "B04" must name a STAC asset/],
    ['an empty asset', '{"B04":""}', /band "B04" must name a STAC asset/],
  ])('refuses %s', (_what, text, message) => {
    expect(() => parseStacSelection(text, 'TESSERA_STAC_ASSETS')).toThrow(InvalidParamsError);
    expect(() => parseStacSelection(text, 'TESSERA_STAC_ASSETS')).toThrow(message);
  });
});
