import { canonicalJson } from '../domain/canonical-json.js';
import { InvalidParamsError } from '../domain/errors.js';
import type { StacItemMetadata } from '../domain/stac-item.js';
import type { ObjectStore } from '../ports/object-store.port.js';
import type { Telemetry } from '../ports/telemetry.port.js';
import { type Crs, crsFromEpsg, crsOfRaster, crsTransform } from '../raster/crs.js';
import type { GeoTransform } from '../raster/index.js';
import { PMTILES_CONTENT_TYPE } from '../raster/pmtiles-writer.js';
import { COG_CONTENT_TYPE } from './cog-mosaic.js';
import { type DerivedWrite, type DerivedWriteResult, writeDerivedOutput } from './derived-output.js';

/**
 * The STAC Item that describes a scene's output, written create-only beside
 * its mosaic (outputKeys.stacItem). STAC 1.0.0 (what GDAL, QGIS, pystac and
 * every STAC API read today) with two extensions:
 * - projection v2.0.0: `proj:code` (`EPSG:n`; v2 dropped `proj:epsg`; null with `proj:wkt2` for a CRS
 *   without an EPSG code), `proj:shape`,
 *   `proj:transform`, `proj:bbox`, on the item's properties (every asset shares the target grid);
 * - raster v1.1.0: `raster:bands` on each raster asset (nodata, data_type, spatial_resolution).
 * test/unit/stac-output.test.ts validates items against those versions' JSON Schemas (test/data/stac-schemas/).
 */
export const STAC_VERSION = '1.0.0';
export const PROJECTION_EXTENSION = 'https://stac-extensions.github.io/projection/v2.0.0/schema.json';
export const RASTER_EXTENSION = 'https://stac-extensions.github.io/raster/v1.1.0/schema.json';
/** Web Map Links v1.2.0: the `pmtiles`, `tilejson` and `xyz` links of a rendered scene on WebMercatorQuad. */
export const WEB_MAP_LINKS_EXTENSION = 'https://stac-extensions.github.io/web-map-links/v1.2.0/schema.json';
export const STAC_ITEM_CONTENT_TYPE = 'application/geo+json';
/**
 * The item property naming the tile versions the mosaics were assembled from (a SHA-256 over each tile key
 * and the version token the assembly listed, in grid order). It changes when a repair replaces a tile, which
 * is how a re-assembly tells that the COG mosaic and this item in place are stale (assemble-mosaic.ts).
 */
export const TILE_VERSIONS_PROPERTY = 'tessera:tile_versions';

/** The grid every output asset is on (the scene manifest's `target`): its CRS is an EPSG code, or else its WKT2. */
export interface StacTargetGrid {
  readonly epsg?: number | undefined;
  /** A CRS without an EPSG code, as WKT2 (written as `proj:wkt2`, with `proj:code` null). */
  readonly wkt2?: string | undefined;
  readonly geoTransform: GeoTransform;
  readonly width: number;
  readonly height: number;
  /** On a tile matrix set; `minZoom`: a pyramid's lowest zoom (its mosaics are of `zoom`, the highest: docs/pyramids.md). */
  readonly tms?:
    | {
        readonly id: string;
        readonly zoom: number;
        readonly minCol: number;
        readonly minRow: number;
        readonly minZoom?: number | undefined;
      }
    | undefined;
}

export interface SceneStacItemInput {
  /** The item's id. */
  readonly sceneKey: string;
  /** Where the item is written (outputKeys.stacItem): asset hrefs are relative to it. */
  readonly itemKey: string;
  readonly target: StacTargetGrid;
  readonly noData: number;
  /**
   * Rendered tiles (`output.format` PNG, WEBP, JPEG): the VRT mosaic is 8-bit, one band per entry of `bands`
   * (GDAL colour interpretations: Gray, Red, Green, Blue, Alpha), rather than the band math's float32.
   */
  readonly rendered?: { readonly format: string; readonly bands: readonly string[] } | undefined;
  /** Output keys of the mosaics: the VRT always, the COG when `--mosaic cog` built it. */
  readonly assets: { readonly vrt: string; readonly cog?: string | undefined };
  /**
   * The web map outputs of a rendered scene (docs/web-maps.md): output keys of its PMTiles archive (`--mosaic pmtiles`)
   * and TileJSON (on WebMercatorQuad), the URL template of its XYZ tiles (a key template: outputKeys.tileTemplate) with
   * their media type, and its quicklook PNG (the `thumbnail`) with its size.
   */
  readonly web?:
    | {
        readonly pmtiles?: string | undefined;
        readonly tileJson?: string | undefined;
        readonly xyz?: { readonly template: string; readonly type: string; readonly minZoom: number; readonly maxZoom: number } | undefined;
        readonly thumbnail?: { readonly key: string; readonly width: number; readonly height: number } | undefined;
      }
    | undefined;
  /** The band math the pixels are (for the assets' description). */
  readonly expression?: string | undefined;
  /**
   * The STAC item the scene came from: its time is the output's, and it is
   * linked as `derived_from`. `href` is where a reader finds it (an absolute
   * URI such as `s3://bucket/key`, or a path as the caller knows it).
   */
  readonly source?: { readonly href: string; readonly metadata: StacItemMetadata } | undefined;
  /**
   * The output's time when there is no source item (RFC 3339): one recorded
   * in the scene manifest, never the clock at writing, so a re-write after a
   * crash makes the same bytes.
   */
  readonly datetime?: string | undefined;
  /** Which tile versions the mosaics were assembled from: recorded as {@link TILE_VERSIONS_PROPERTY}. */
  readonly tileVersions?: string | undefined;
}

/** A STAC Item as JSON-ready plain data. */
export type StacItem = Readonly<Record<string, unknown>>;

/** Points along each edge of the grid's footprint: enough that a reprojected edge's curve stays inside the bbox to well under a pixel. */
const EDGE_POINTS = 16;
/** Degrees kept in bbox and geometry: 1e-7 degrees is about a centimetre, and rounding keeps bytes stable across proj4js versions. */
const DEGREE_DECIMALS = 7;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/**
 * The output item of a scene: deterministic (the same input gives the same
 * item, and {@link stacItemBytes} the same bytes), so the create-only write of
 * a re-run finds its own bytes in place.
 *
 * bbox and geometry are WGS84 (lon, lat) of the target grid's footprint, its
 * edges densified before reprojection (a UTM or Web Mercator edge is a curve
 * in lon/lat). A footprint across the antimeridian is a MultiPolygon split at 180 degrees, its bbox's minx
 * greater than its maxx (see {@link footprint}); a grid on another body than Earth has geometry null.
 *
 * @example
 * const item = sceneStacItem({ sceneKey, itemKey: outputKeys.stacItem(sceneKey), target: manifest.target,
 *   noData: -9999, assets: { vrt: outputKeys.mosaic(sceneKey) }, datetime: '2024-06-01T10:30:00Z' });
 */
export function sceneStacItem(input: SceneStacItemInput): StacItem {
  const { target } = input;
  validateGrid(input);
  const crs = targetCrs(target);
  const where = footprint(target, crs);
  const gt = target.geoTransform;
  // raster: spatial_resolution is in metres: given for a CRS in metres; a lon/lat grid's cell is not one length.
  const metres = /\+units=m\b/.test(crs.proj4);
  const band = {
    data_type: 'float32',
    nodata: rasterNoData(input.noData),
    ...(metres
      ? { spatial_resolution: Math.abs(gt[1]) === Math.abs(gt[5]) ? Math.abs(gt[1]) : (Math.abs(gt[1]) + Math.abs(gt[5])) / 2 }
      : {}),
  };
  const about = input.expression === undefined ? 'float32' : `float32 ${JSON.stringify(input.expression)}`;
  const { rendered } = input;
  const assets: Record<string, unknown> = {
    mosaic:
      rendered === undefined
        ? {
            href: relativeHref(input.itemKey, input.assets.vrt),
            type: 'application/xml',
            title: 'VRT mosaic (GDAL virtual raster over the tile COGs)',
            description: `${about}, ${target.width} x ${target.height} pixels; open with GDAL or QGIS, it reads the tiles in place`,
            roles: ['data'],
            'raster:bands': [band],
          }
        : {
            href: relativeHref(input.itemKey, input.assets.vrt),
            type: 'application/xml',
            title: `VRT mosaic (GDAL virtual raster over the ${rendered.format} tiles)`,
            description: `${input.expression === undefined ? 'the band math' : JSON.stringify(input.expression)} rendered to 8-bit ${rendered.bands.join(', ')}, ${target.width} x ${target.height} pixels; open with GDAL or QGIS, it reads the tiles in place`,
            roles: ['visual'],
            'raster:bands': rendered.bands.map(() => ({ data_type: 'uint8' })),
          },
  };
  if (input.assets.cog !== undefined) {
    assets.cog = {
      href: relativeHref(input.itemKey, input.assets.cog),
      type: COG_CONTENT_TYPE,
      title: 'COG mosaic (one Cloud Optimized GeoTIFF with internal overviews)',
      description: `${about}, ${target.width} x ${target.height} pixels`,
      roles: ['data'],
      'raster:bands': [band],
    };
  }
  const { assets: webAssets, links: webLinks } = webMapRefs(input);
  Object.assign(assets, webAssets);
  return {
    type: 'Feature',
    stac_version: STAC_VERSION,
    stac_extensions: [PROJECTION_EXTENSION, RASTER_EXTENSION, ...(webLinks.length === 0 ? [] : [WEB_MAP_LINKS_EXTENSION])],
    id: input.sceneKey,
    // A grid on another body than Earth has no WGS 84 footprint: STAC's geometry is then null and bbox absent.
    ...(where === undefined ? { geometry: null } : { bbox: where.bbox, geometry: where.geometry }),
    properties: {
      ...times(input),
      'proj:code': crs.epsg === undefined ? null : `EPSG:${crs.epsg}`,
      ...(crs.epsg === undefined ? { 'proj:wkt2': target.wkt2 } : {}),
      'proj:shape': [target.height, target.width],
      // STAC's affine order (rasterio's): [a, b, c, d, e, f] from GDAL's [c, a, b, f, d, e].
      'proj:transform': [gt[1], gt[2], gt[0], gt[4], gt[5], gt[3]],
      'proj:bbox': projBbox(target),
      ...(input.tileVersions === undefined ? {} : { [TILE_VERSIONS_PROPERTY]: input.tileVersions }),
      ...(target.tms === undefined
        ? {}
        : {
            description:
              target.tms.minZoom === undefined
                ? `tiles on the OGC TileMatrixSet ${target.tms.id}, zoom ${target.tms.zoom}, from column ${target.tms.minCol}, row ${target.tms.minRow}`
                : `tiles on the OGC TileMatrixSet ${target.tms.id}, zooms ${target.tms.minZoom} to ${target.tms.zoom}; the mosaics are of zoom ${target.tms.zoom}, from column ${target.tms.minCol}, row ${target.tms.minRow}`,
          }),
    },
    links: [
      ...(input.source === undefined
        ? []
        : [
            {
              rel: 'derived_from',
              href: input.source.href,
              type: STAC_ITEM_CONTENT_TYPE,
              title: `source item ${input.source.metadata.id}`,
            },
          ]),
      ...webLinks,
    ],
    assets,
  };
}

/**
 * The assets and Web Map Links of a rendered scene's web map outputs: the PMTiles archive (asset roles `data`, `tiles`;
 * link `pmtiles`), the TileJSON (asset role `tilejson`; link `tilejson`), the XYZ tiles (link `xyz`, a template relative
 * to the item) and the quicklook (asset `thumbnail`, role `thumbnail`). Every href relative to the item.
 */
function webMapRefs(input: SceneStacItemInput): { assets: Record<string, unknown>; links: Record<string, unknown>[] } {
  const web = input.web;
  const assets: Record<string, unknown> = {};
  const links: Record<string, unknown>[] = [];
  if (web === undefined) return { assets, links };
  const href = (key: string) => relativeHref(input.itemKey, key);
  if (web.pmtiles !== undefined) {
    const title = 'PMTiles archive (every zoom of the rendered tiles in one file, read by range requests)';
    assets.pmtiles = { href: href(web.pmtiles), type: PMTILES_CONTENT_TYPE, title, roles: ['data', 'tiles'] };
    links.push({ rel: 'pmtiles', href: href(web.pmtiles), type: PMTILES_CONTENT_TYPE, title });
  }
  if (web.tileJson !== undefined) {
    const title = 'TileJSON 3.0.0 of the rendered tiles (its tile URLs are relative to it)';
    assets.tilejson = { href: href(web.tileJson), type: 'application/json', title, roles: ['tilejson', 'metadata'] };
    links.push({ rel: 'tilejson', href: href(web.tileJson), type: 'application/json', title });
  }
  if (web.xyz !== undefined) {
    links.push({
      rel: 'xyz',
      href: href(web.xyz.template),
      type: web.xyz.type,
      title: `XYZ tiles, zooms ${web.xyz.minZoom} to ${web.xyz.maxZoom} (relative to this item)`,
    });
  }
  if (web.thumbnail !== undefined) {
    assets.thumbnail = {
      href: href(web.thumbnail.key),
      type: 'image/png',
      title: `Quicklook of the mosaic (${web.thumbnail.width} x ${web.thumbnail.height} pixels)`,
      roles: ['thumbnail'],
    };
  }
  return { assets, links };
}

/** The bytes of an item as written: canonical JSON (RFC 8785), so equal items are equal bytes. */
export function stacItemBytes(item: StacItem): Uint8Array {
  return new TextEncoder().encode(canonicalJson(item));
}

/**
 * Create-only write of the item at `key`. `already-present` with the same
 * bytes (a re-run after a crash, a duplicate assembly) is success: INFO and
 * `write-already-present`, counted here. Other bytes at the key are replaced
 * when `options.isStale` shows them to be this scene's item from before a
 * repair, conditionally on the version read (`replaced`, derived-output.ts);
 * else an alarm: `write-occupied`, ERROR, OutputOccupiedError (nothing overwritten).
 */
export async function writeSceneStacItem(
  outputs: ObjectStore,
  key: string,
  item: StacItem,
  telemetry: Telemetry,
  options: { readonly isStale?: DerivedWrite['isStale'] } = {},
): Promise<{ readonly kind: DerivedWriteResult; readonly key: string }> {
  const sceneKey = String(item.id);
  const kind = await writeDerivedOutput(outputs, telemetry, {
    sceneKey,
    key,
    body: stacItemBytes(item),
    contentType: STAC_ITEM_CONTENT_TYPE,
    isStale: options.isStale,
  });
  if (kind === 'written') telemetry.log('INFO', 'stac-item-written', { outputKey: key, id: item.id });
  return { kind, key };
}

/** `datetime` (or null with `start_datetime`/`end_datetime`): the source item's, else the caller's. */
function times(input: SceneStacItemInput): Record<string, string | null> {
  const meta = input.source?.metadata;
  if (meta !== undefined) {
    const out: Record<string, string | null> = { datetime: meta.datetime };
    if (meta.start_datetime !== undefined) out.start_datetime = meta.start_datetime;
    if (meta.end_datetime !== undefined) out.end_datetime = meta.end_datetime;
    for (const [name, value] of Object.entries(out)) {
      if (value !== null && !RFC3339.test(value)) {
        throw new InvalidParamsError(
          `STAC output of ${input.sceneKey}: the source item's ${name} ${JSON.stringify(value)} is not an RFC 3339 date-time`,
        );
      }
    }
    if (out.datetime === null && (out.start_datetime === undefined || out.end_datetime === undefined)) {
      throw new InvalidParamsError(
        `STAC output of ${input.sceneKey}: the source item has datetime null without both start_datetime and end_datetime`,
      );
    }
    return out;
  }
  if (input.datetime === undefined || !RFC3339.test(input.datetime)) {
    throw new InvalidParamsError(
      `STAC output of ${input.sceneKey}: needs a datetime (RFC 3339, e.g. 2024-06-01T10:30:00Z) when the scene has no source STAC item, ` +
        `got ${JSON.stringify(input.datetime)}; pass the time recorded in the scene manifest`,
    );
  }
  return { datetime: input.datetime };
}

/** raster v1.1 nodata: a number, or the strings it defines for the non-finite values. */
function rasterNoData(noData: number): number | string {
  if (Number.isNaN(noData)) return 'nan';
  if (noData === Number.POSITIVE_INFINITY) return 'inf';
  if (noData === Number.NEGATIVE_INFINITY) return '-inf';
  return noData;
}

function validateGrid(input: SceneStacItemInput): void {
  const { width, height, geoTransform } = input.target;
  const fail = (why: string): never => {
    throw new InvalidParamsError(`STAC output of ${input.sceneKey}: ${why}`);
  };
  if (!Number.isInteger(width) || width <= 0 || !Number.isInteger(height) || height <= 0) fail(`the grid is ${width}x${height}`);
  if (geoTransform.length !== 6 || !geoTransform.every(Number.isFinite))
    fail(`geotransform ${JSON.stringify(geoTransform)} is not six finite numbers`);
  if (geoTransform[1] * geoTransform[5] - geoTransform[2] * geoTransform[4] === 0)
    fail(`geotransform ${JSON.stringify(geoTransform)} is degenerate`);
}

/** The grid's pixel corner (col, row) in its CRS. */
function toCrs(gt: GeoTransform, col: number, row: number): [number, number] {
  return [gt[0] + col * gt[1] + row * gt[2], gt[3] + col * gt[4] + row * gt[5]];
}

/** proj:bbox: the footprint's extent in the grid's own CRS, [xmin, ymin, xmax, ymax]. */
function projBbox(target: StacTargetGrid): number[] {
  const corners = [
    toCrs(target.geoTransform, 0, 0),
    toCrs(target.geoTransform, target.width, 0),
    toCrs(target.geoTransform, target.width, target.height),
    toCrs(target.geoTransform, 0, target.height),
  ];
  const xs = corners.map((c) => c[0]);
  const ys = corners.map((c) => c[1]);
  return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
}

/** The target's CRS: its EPSG code's, or the definition its WKT2 spells out. */
function targetCrs(target: StacTargetGrid): Crs {
  if (target.epsg !== undefined) return crsFromEpsg(target.epsg);
  if (target.wkt2 === undefined) throw new InvalidParamsError('STAC output: the target grid has neither an EPSG code nor a WKT2 CRS');
  return crsOfRaster({ wkt: target.wkt2 }, 'the STAC output grid');
}

/**
 * The footprint in WGS84: the grid's outline walked corner to corner with
 * EDGE_POINTS points per edge, reprojected, as closed counter-clockwise rings
 * (RFC 7946) and its bbox. A point outside the CRS's domain is dropped; a
 * footprint with no valid point is an error. Undefined for a CRS on another
 * body than Earth.
 *
 * Across the antimeridian (RFC 7946 section 3.1.9, STAC's bbox rule from RFC 7946
 * section 5.2): the outline is unwrapped as it is walked, cut at 180 degrees into a
 * MultiPolygon of its western and eastern parts, and the bbox runs from the western
 * part's west edge to the eastern part's east edge, so its minx is greater than its
 * maxx. A footprint round a pole is closed along the pole's latitude and spans every
 * longitude (bbox -180 to 180).
 */
function footprint(
  target: StacTargetGrid,
  crs: Crs,
):
  | { bbox: number[]; geometry: { type: 'Polygon'; coordinates: number[][][] } | { type: 'MultiPolygon'; coordinates: number[][][][] } }
  | undefined {
  if (crs.body !== 'Earth') return undefined;
  const { width: w, height: h, geoTransform: gt } = target;
  const pixel: [number, number][] = [];
  const edge = (c0: number, r0: number, c1: number, r1: number) => {
    for (let i = 0; i < EDGE_POINTS; i++) pixel.push([c0 + ((c1 - c0) * i) / EDGE_POINTS, r0 + ((r1 - r0) * i) / EDGE_POINTS]);
  };
  edge(0, 0, 0, h);
  edge(0, h, w, h);
  edge(w, h, w, 0);
  edge(w, 0, 0, 0);
  const xs = new Float64Array(pixel.length);
  const ys = new Float64Array(pixel.length);
  pixel.forEach(([c, r], i) => {
    [xs[i], ys[i]] = toCrs(gt, c, r);
  });
  crsTransform(crs, crsFromEpsg(4326))(xs, ys);
  // Unwrapped: each longitude within 180 degrees of the one before it, so an outline across 180 stays one ring.
  const raw: [number, number][] = [];
  for (let i = 0; i < pixel.length; i++) {
    let lon = xs[i] as number;
    const lat = ys[i] as number;
    if (!Number.isFinite(lon) || !Number.isFinite(lat)) continue;
    const last = raw[raw.length - 1];
    if (last !== undefined) lon += Math.round((last[0] - lon) / 360) * 360;
    raw.push([lon, lat]);
  }
  const first = raw[0];
  const end = raw[raw.length - 1];
  if (raw.length < 3 || first === undefined || end === undefined) {
    throw new InvalidParamsError(`the ${w}x${h} grid in ${crs.id} has no footprint in WGS84 (its corners are outside the CRS's domain)`);
  }
  // Closing the outline adds whole turns when it goes round a pole: close it along the pole instead.
  const turns = Math.round((end[0] - first[0]) / 360);
  let pole: number | undefined;
  if (turns !== 0) {
    pole = raw.reduce((sum, p) => sum + p[1], 0) > 0 ? 90 : -90;
    // Round to the first point again (a whole turn on), up to the pole, back along it, down to the first point.
    const again = first[0] + turns * 360;
    raw.push([again, first[1]], [again, pole], [first[0], pole]);
  }
  // The unwrapped outline starts in [-180, 180); what lies east of 180 is the same ground 360 degrees west.
  const west = Math.min(...raw.map((p) => p[0]));
  const shift = Math.floor((west + 180) / 360) * 360;
  const parts = [0, -360]
    .map((k) => clipToWorld(raw.map(([x, y]) => [x - shift + k, y] as [number, number])))
    .map(roundRing)
    // A piece with no area (the outline touching 180 degrees from one side) is no part of the footprint.
    .filter((ring) => ring.length >= 3 && signedArea(ring) !== 0);
  if (parts.length === 0) {
    throw new InvalidParamsError(`the ${w}x${h} grid in ${crs.id} has no footprint in WGS84 (its corners are outside the CRS's domain)`);
  }
  const rings = parts.map((ring) => {
    // Walked left edge down, bottom edge right, ...: counter-clockwise in lon/lat for a north-up grid; reverse otherwise.
    if (signedArea(ring) < 0) ring.reverse();
    ring.push([...(ring[0] as number[])]);
    return ring;
  });
  const lats = rings.flat().map((p) => p[1] as number);
  const lonsOf = (ring: number[][]) => ring.map((p) => p[0] as number);
  const [west0, east0] = [rings[0] as number[][], rings[rings.length - 1] as number[][]];
  const bbox =
    pole !== undefined && rings.length > 1
      ? [-180, Math.min(...lats), 180, Math.max(...lats)]
      : [Math.min(...lonsOf(west0)), Math.min(...lats), Math.max(...lonsOf(east0)), Math.max(...lats)];
  return {
    bbox,
    geometry:
      rings.length === 1
        ? { type: 'Polygon', coordinates: [rings[0] as number[][]] }
        : { type: 'MultiPolygon', coordinates: rings.map((r) => [r]) },
  };
}

/** Degrees rounded to DEGREE_DECIMALS, consecutive repeats dropped (the ring is left open). */
function roundRing(points: readonly (readonly [number, number])[]): number[][] {
  const round = (v: number) => {
    const r = Number(v.toFixed(DEGREE_DECIMALS));
    return Object.is(r, -0) ? 0 : r;
  };
  const ring: number[][] = [];
  for (const [x, y] of points) {
    const point = [round(x), round(y)];
    const last = ring[ring.length - 1];
    if (last === undefined || last[0] !== point[0] || last[1] !== point[1]) ring.push(point);
  }
  while (ring.length > 1 && ring[0]?.[0] === ring[ring.length - 1]?.[0] && ring[0]?.[1] === ring[ring.length - 1]?.[1]) ring.pop();
  return ring;
}

/** The part of an open ring between longitudes -180 and 180 (Sutherland-Hodgman against each meridian), open. */
function clipToWorld(ring: readonly (readonly [number, number])[]): [number, number][] {
  const clip = (points: readonly (readonly [number, number])[], inside: (x: number) => boolean, edge: number) => {
    const out: [number, number][] = [];
    for (let i = 0; i < points.length; i++) {
      const cur = points[i] as readonly [number, number];
      const prev = points[(i + points.length - 1) % points.length] as readonly [number, number];
      const cross = (): [number, number] => [edge, prev[1] + ((cur[1] - prev[1]) * (edge - prev[0])) / (cur[0] - prev[0])];
      if (inside(cur[0])) {
        if (!inside(prev[0])) out.push(cross());
        out.push([cur[0], cur[1]]);
      } else if (inside(prev[0])) out.push(cross());
    }
    return out;
  };
  return clip(
    clip(ring, (x) => x >= -180, -180),
    (x) => x <= 180,
    180,
  );
}

/** Twice the signed area of an open ring (shoelace): positive when counter-clockwise. */
function signedArea(ring: readonly number[][]): number {
  let sum = 0;
  for (let i = 0; i < ring.length; i++) {
    const [x0, y0] = ring[i] as [number, number];
    const [x1, y1] = ring[(i + 1) % ring.length] as [number, number];
    sum += x0 * y1 - x1 * y0;
  }
  return sum;
}

/** The href of object `to` relative to object `from` (both keys in one store): `./b.vrt`, `../tiles/...`. */
export function relativeHref(from: string, to: string): string {
  const fromDir = from.split('/').slice(0, -1);
  const parts = to.split('/');
  let common = 0;
  while (common < fromDir.length && common < parts.length - 1 && fromDir[common] === parts[common]) common++;
  const up = fromDir.length - common;
  const rest = parts.slice(common).join('/');
  return up === 0 ? `./${rest}` : `${'../'.repeat(up)}${rest}`;
}
