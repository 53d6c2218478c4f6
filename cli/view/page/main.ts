/**
 * `tessera view`'s page: OpenLayers draws the scene's outputs as the server lists them in `/view.json`
 * (cli/view/view-config.ts), everything read from the server that sent the page, by range requests:
 * - a COG mosaic or the scene's COG tiles: OpenLayers' GeoTIFF source (geotiff.js) reads their blocks and overviews,
 *   and a WebGL tile layer colours the float values with the legend's ramp, nodata transparent;
 * - a PMTiles archive (pmtiles' reader) or a TileJSON's XYZ tiles, already rendered;
 * - the footprint outline from the STAC Item, a legend, and the value under the cursor read from the full-resolution
 *   COG at that point.
 * `window.tesseraView` exposes the map's state for the browser test (test/e2e/view-browser.test.ts).
 */
import 'ol/ol.css';
import './view.css';
import { fromUrl, type GeoTIFFImage, type GeoTIFF as GeoTiffFile } from 'geotiff';
import { defaults as defaultControls } from 'ol/control/defaults.js';
import ScaleLine from 'ol/control/ScaleLine.js';
import type { Extent } from 'ol/extent.js';
import GeoJSON from 'ol/format/GeoJSON.js';
import type BaseLayer from 'ol/layer/Base.js';
import TileLayer from 'ol/layer/Tile.js';
import VectorLayer from 'ol/layer/Vector.js';
import WebGLTileLayer from 'ol/layer/WebGLTile.js';
import OlMap from 'ol/Map.js';
import { register } from 'ol/proj/proj4.js';
import { transform, transformExtent } from 'ol/proj.js';
import DataTileSource from 'ol/source/DataTile.js';
import GeoTIFF from 'ol/source/GeoTIFF.js';
import ImageTile from 'ol/source/ImageTile.js';
import VectorSource from 'ol/source/Vector.js';
import { Stroke, Style } from 'ol/style.js';
import TileGrid from 'ol/tilegrid/TileGrid.js';
import View from 'ol/View.js';
import { PMTiles } from 'pmtiles';
import proj4 from 'proj4';
import type { CogRef, LegendSpec, ViewConfig, ViewLayer } from '../view-config.js';

type State = 'loading' | 'idle' | 'error';

interface ProbeResult {
  /** Where the value was read, in the scene's CRS. */
  readonly x: number;
  readonly y: number;
  readonly key: string | undefined;
  /** The value, null for nodata or outside every COG. */
  readonly value: number | null;
}

interface TesseraView {
  state: State;
  error?: string;
  config?: ViewConfig;
  map?: OlMap;
  /** The value range the ramp spans. */
  range?: { min: number; max: number };
  /** The last value the cursor read. */
  probe?: ProbeResult;
  /** The footprint's bounding box on screen, CSS pixels [left, top, right, bottom]. */
  footprintBox(): [number, number, number, number] | null;
  /** Reads the value at a screen pixel, as a cursor move there does. */
  probeAt(pixel: [number, number]): Promise<ProbeResult | null>;
}

declare global {
  interface Window {
    tesseraView: TesseraView;
  }
}

const view: TesseraView = {
  state: 'loading',
  footprintBox: () => null,
  probeAt: async () => null,
};
window.tesseraView = view;

const el = (id: string): HTMLElement => {
  const found = document.getElementById(id);
  if (!found) throw new Error(`page element #${id} missing`);
  return found;
};

const SCENE_CRS_FALLBACK = 'EPSG:3857';

start().catch((error: unknown) => {
  view.state = 'error';
  view.error = error instanceof Error ? error.message : String(error);
  el('probe').textContent = `error: ${view.error}`;
  console.error('tessera view:', error);
});

async function start(): Promise<void> {
  const response = await fetch('view.json');
  if (!response.ok) throw new Error(`view.json: HTTP ${response.status}`);
  const config = (await response.json()) as ViewConfig;
  view.config = config;
  if (config.crs) {
    proj4.defs(config.crs.code, config.crs.proj4);
    register(proj4);
  }
  const sceneCrs = config.crs?.code ?? SCENE_CRS_FALLBACK;
  // A rendered layer (PMTiles, XYZ) is on Web Mercator: the map is too, and the COG is reprojected if shown. With
  // only COGs, the map is on the scene's own CRS, so its pixels are drawn as they are.
  const rendered = config.layers.some((l) => l.kind !== 'cog');
  const projection = rendered || !config.crs ? 'EPSG:3857' : sceneCrs;

  const cogs = config.layers.flatMap((l) => (l.kind === 'cog' ? l.cogs : []));
  const range = await rangeOf(config.legend, cogs.length > 0 ? cogs : config.probe);
  view.range = range;
  drawLegend(config.legend, range);

  const footprint = footprintLayer(config, projection);
  const built = await Promise.all(config.layers.map((l) => buildLayer(l, config, sceneCrs, projection, range)));
  for (const [i, b] of built.entries()) b.layer.setVisible(i === 0);
  const map = new OlMap({
    target: 'map',
    layers: [...built.map((b) => b.layer), ...(footprint ? [footprint.layer] : [])],
    view: new View({ projection, maxZoom: 28 }),
    controls: defaultControls({ attribution: false }).extend([new ScaleLine()]),
  });
  view.map = map;
  for (const b of built) await b.ready;

  const extent = footprint?.extent ?? built.map((b) => b.extent).find((e) => e !== undefined);
  if (extent) map.getView().fit(extent, { padding: [24, 300, 24, 24] });
  drawLayerSwitch(config.layers, built, map);
  drawNotes(config.notes);

  view.footprintBox = () => {
    if (!extent) return null;
    const [minx = 0, miny = 0, maxx = 0, maxy = 0] = extent;
    const a = map.getPixelFromCoordinate([minx, maxy]);
    const b = map.getPixelFromCoordinate([maxx, miny]);
    if (!a || !b) return null;
    return [Math.min(a[0] ?? 0, b[0] ?? 0), Math.min(a[1] ?? 0, b[1] ?? 0), Math.max(a[0] ?? 0, b[0] ?? 0), Math.max(a[1] ?? 0, b[1] ?? 0)];
  };
  wireProbe(map, config, sceneCrs, projection);

  await new Promise<void>((resolve) => {
    map.once('rendercomplete', () => resolve());
    map.render();
  });
  view.state = 'idle';
  document.body.dataset.state = 'idle';
}

interface BuiltLayer {
  readonly layer: BaseLayer;
  /** Resolves when the layer's source knows its extent (a GeoTIFF's header read). */
  readonly ready: Promise<void>;
  extent: Extent | undefined;
}

async function buildLayer(l: ViewLayer, config: ViewConfig, sceneCrs: string, projection: string, range: Range): Promise<BuiltLayer> {
  switch (l.kind) {
    case 'cog':
      return l.mosaic ? cogLayer(l.cogs, config, sceneCrs, projection, range) : tilesLayer(l.cogs, config, sceneCrs, projection, range);
    case 'pmtiles':
      return pmtilesLayer(l.url, projection);
    case 'xyz':
      return xyzLayer(l, projection);
    default:
      return assertNever(l);
  }
}

function assertNever(x: never): never {
  throw new Error(`unknown layer ${JSON.stringify(x)}`);
}

interface Range {
  readonly min: number;
  readonly max: number;
  readonly nodata: number | null;
  readonly from: string;
}

/**
 * The value range the ramp spans: the outputs' own (render extension, TileJSON), else the min and max of the data
 * in the smallest overview of the COG mosaic, or of up to 16 of the scene's tiles spread over it.
 */
async function rangeOf(legend: LegendSpec, cogs: readonly CogRef[]): Promise<Range> {
  const sample = cogs.length <= 16 ? cogs : Array.from({ length: 16 }, (_, i) => cogs[Math.floor((i * cogs.length) / 16)] as CogRef);
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  let nodata: number | null = null;
  for (const cog of sample) {
    const tiff = await openCog(cog.url);
    const first = await tiff.getImage(0);
    nodata = first.getGDALNoData();
    if (legend.min !== undefined && legend.max !== undefined) continue;
    const smallest = await tiff.getImage((await tiff.getImageCount()) - 1);
    const [band] = (await smallest.readRasters({ samples: [0] })) as unknown as ArrayLike<number>[];
    for (const v of Array.from(band ?? [])) {
      if (Number.isNaN(v) || v === nodata) continue;
      if (v < min) min = v;
      if (v > max) max = v;
    }
  }
  if (legend.min !== undefined && legend.max !== undefined) return { min: legend.min, max: legend.max, nodata, from: legend.source };
  if (!(min < max))
    return { min: Number.isFinite(min) ? min - 1 : 0, max: Number.isFinite(max) ? max + 1 : 1, nodata, from: 'data (flat)' };
  return { min, max, nodata, from: `data: min and max of the ${cogs.length === 1 ? 'COG mosaic' : 'tiles'}' smallest overview` };
}

const cogFiles = new Map<string, Promise<GeoTiffFile>>();
function openCog(url: string): Promise<GeoTiffFile> {
  let tiff = cogFiles.get(url);
  if (!tiff) {
    tiff = fromUrl(new URL(url, document.baseURI).href, { allowFullFile: false });
    cogFiles.set(url, tiff);
  }
  return tiff;
}

/**
 * The WebGL colour expression: the ramp over [min, max] of band 1, transparent where band 2 (the mask OpenLayers adds
 * for a nodata value, or the tiles layer's own) is 0 when `masked`.
 */
function colorExpression(legend: LegendSpec, range: Range, masked: boolean): unknown[] {
  const n = legend.colors.length;
  const stops = legend.colors.flatMap((c, i) => [range.min + ((range.max - range.min) * i) / Math.max(1, n - 1), [c[0], c[1], c[2], 1]]);
  const ramp = ['interpolate', ['linear'], ['band', 1], ...stops];
  return masked ? ['case', ['==', ['band', 2], 0], [0, 0, 0, 0], ramp] : ramp;
}

/** The COG mosaic: OpenLayers' GeoTIFF source reads its blocks and overviews by range. */
function cogLayer(cogs: readonly CogRef[], config: ViewConfig, sceneCrs: string, projection: string, range: Range): BuiltLayer {
  const cog = cogs[0] as CogRef;
  const source = new GeoTIFF({
    sources: [{ url: cog.url, ...(range.nodata === null ? {} : { nodata: range.nodata }) }],
    normalize: false,
    interpolate: false,
    projection: sceneCrs,
  });
  const layer = new WebGLTileLayer({ source, style: { color: colorExpression(config.legend, range, range.nodata !== null) as never } });
  const built: BuiltLayer = {
    layer,
    extent: undefined,
    ready: new Promise<void>((resolve, reject) => {
      const done = () => {
        if (source.getState() === 'ready') {
          const e = source.getTileGrid()?.getExtent();
          if (e) built.extent = transformExtent(e, sceneCrs, projection);
          resolve();
        } else if (source.getState() === 'error') reject(source.getError() ?? new Error(`${cog.key} failed to open`));
      };
      source.on('change', done);
      done();
    }),
  };
  return built;
}

/** Pixels of one tile of the page's own tile grid over the scene's COG tiles. */
const GRID_TILE = 256;

/**
 * The scene's COG tiles as one layer, as their VRT mosaic is one raster: a tile grid over the scene in its own CRS
 * (resolutions halving from the tiles' own up to one grid tile for the scene), each grid tile filled from the COG
 * tiles it overlaps, each read by geotiff.js at the overview that suits the resolution (`readRasters` with a bbox and
 * a size picks it), only where the view needs it. Band 2 is the mask: 0 where no tile has a value (nodata, or outside).
 */
function tilesLayer(cogs: readonly CogRef[], config: ViewConfig, sceneCrs: string, projection: string, range: Range): BuiltLayer {
  const placed = cogs.filter((c) => c.bbox !== undefined && c.width !== undefined && c.width > 0);
  const boxes = placed.map((c) => c.bbox as readonly [number, number, number, number]);
  const [minx, miny, maxx, maxy] = [
    Math.min(...boxes.map((b) => b[0])),
    Math.min(...boxes.map((b) => b[1])),
    Math.max(...boxes.map((b) => b[2])),
    Math.max(...boxes.map((b) => b[3])),
  ];
  const extent: Extent = [minx, miny, maxx, maxy];
  const base = Math.min(...placed.map((c) => ((c.bbox?.[2] ?? 0) - (c.bbox?.[0] ?? 0)) / (c.width ?? 1)));
  const levels = Math.max(0, Math.ceil(Math.log2(Math.max(maxx - minx, maxy - miny) / base / GRID_TILE)));
  const resolutions = Array.from({ length: levels + 1 }, (_, i) => base * 2 ** (levels - i));
  const tileGrid = new TileGrid({ extent, origin: [minx, maxy], resolutions, tileSize: GRID_TILE });
  const nodata = range.nodata;
  const source = new DataTileSource({
    projection: sceneCrs,
    tileGrid,
    bandCount: 2,
    interpolate: false,
    wrapX: false,
    loader: async (z, x, y) => {
      const [tx0 = 0, , , ty1 = 0] = tileGrid.getTileCoordExtent([z, x, y]);
      const r = resolutions[z] ?? base;
      const out = new Float32Array(GRID_TILE * GRID_TILE * 2);
      await Promise.all(
        placed.map(async (cog, i) => {
          const b = boxes[i] as readonly [number, number, number, number];
          // The grid pixels whose centres fall inside this COG tile.
          const c0 = Math.max(0, Math.ceil((b[0] - tx0) / r - 0.5));
          const c1 = Math.min(GRID_TILE, Math.ceil((b[2] - tx0) / r - 0.5));
          const r0 = Math.max(0, Math.ceil((ty1 - b[3]) / r - 0.5));
          const r1 = Math.min(GRID_TILE, Math.ceil((ty1 - b[1]) / r - 0.5));
          if (c1 <= c0 || r1 <= r0) return;
          const tiff = await openCog(cog.url);
          const bbox = [tx0 + c0 * r, ty1 - r1 * r, tx0 + c1 * r, ty1 - r0 * r];
          const [band] = (await tiff.readRasters({
            bbox,
            width: c1 - c0,
            height: r1 - r0,
            samples: [0],
            resampleMethod: 'nearest',
          })) as unknown as ArrayLike<number>[];
          if (!band) return;
          const w = c1 - c0;
          for (let row = r0; row < r1; row++) {
            for (let col = c0; col < c1; col++) {
              const v = band[(row - r0) * w + (col - c0)] ?? Number.NaN;
              if (Number.isNaN(v) || v === nodata) continue;
              const at = (row * GRID_TILE + col) * 2;
              out[at] = v;
              out[at + 1] = 1;
            }
          }
        }),
      );
      return out;
    },
  });
  const style = { color: colorExpression(config.legend, range, true) as never };
  return { layer: new WebGLTileLayer({ source, style }), ready: Promise.resolve(), extent: transformExtent(extent, sceneCrs, projection) };
}

/** A 1 x 1 transparent image for a tile the archive or folder does not hold (a blank tile skipped at rendering). */
const emptyTile = () => createImageBitmap(new ImageData(1, 1));

const TILE_TYPES: Readonly<Record<number, string>> = { 2: 'image/png', 3: 'image/jpeg', 4: 'image/webp', 5: 'image/avif' };

async function pmtilesLayer(url: string, projection: string): Promise<BuiltLayer> {
  const archive = new PMTiles(new URL(url, document.baseURI).href);
  const header = await archive.getHeader();
  const type = TILE_TYPES[header.tileType];
  if (type === undefined)
    throw new Error(`PMTiles archive of tile type ${header.tileType}: the viewer shows raster archives (PNG, JPEG, WebP)`);
  const metadata = (await archive.getMetadata()) as { tile_size?: unknown; tileSize?: unknown };
  const tileSize = Number(metadata.tile_size ?? metadata.tileSize ?? 256);
  const extent = transformExtent([header.minLon, header.minLat, header.maxLon, header.maxLat], 'EPSG:4326', projection);
  const source = new ImageTile({
    projection: 'EPSG:3857',
    minZoom: header.minZoom,
    maxZoom: header.maxZoom,
    tileSize,
    wrapX: false,
    loader: async (z, x, y, { signal }) => {
      const tile = await archive.getZxy(z, x, y, signal);
      if (!tile) return emptyTile();
      return createImageBitmap(new Blob([tile.data], { type }));
    },
  });
  return { layer: new TileLayer({ source, extent }), ready: Promise.resolve(), extent };
}

async function xyzLayer(l: Extract<ViewLayer, { kind: 'xyz' }>, projection: string): Promise<BuiltLayer> {
  const extent = l.bounds ? transformExtent([...l.bounds], 'EPSG:4326', projection) : undefined;
  const source = new ImageTile({
    projection: 'EPSG:3857',
    minZoom: l.minzoom,
    maxZoom: l.maxzoom,
    wrapX: false,
    loader: async (z, x, y, { signal }) => {
      const url = l.template.replace('{z}', String(z)).replace('{x}', String(x)).replace('{y}', String(y));
      const response = await fetch(url, { signal });
      // 204: a tile the pyramid skipped (blank); the server answers it so for a TileJSON's tile folder.
      if (response.status === 204) return emptyTile();
      if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
      return createImageBitmap(await response.blob());
    },
  });
  return { layer: new TileLayer({ source, ...(extent ? { extent } : {}) }), ready: Promise.resolve(), extent };
}

function footprintLayer(config: ViewConfig, projection: string): { layer: VectorLayer; extent: Extent } | undefined {
  if (!config.footprint) return undefined;
  const features = new GeoJSON().readFeatures(
    { type: 'Feature', geometry: config.footprint, properties: {} },
    { dataProjection: 'EPSG:4326', featureProjection: projection },
  );
  const source = new VectorSource({ features });
  const layer = new VectorLayer({
    source,
    style: [
      new Style({ stroke: new Stroke({ color: 'rgba(0, 0, 0, 0.6)', width: 4 }) }),
      new Style({ stroke: new Stroke({ color: '#ffd400', width: 2 }) }),
    ],
  });
  const extent = source.getExtent();
  return extent ? { layer, extent } : undefined;
}

function drawLegend(legend: LegendSpec, range: Range): void {
  const box = el('legend');
  box.replaceChildren();
  const bar = document.createElement('div');
  bar.className = 'ramp';
  bar.style.background = `linear-gradient(to right, ${legend.colors.map((c) => `rgb(${c[0]}, ${c[1]}, ${c[2]})`).join(', ')})`;
  const labels = document.createElement('div');
  labels.className = 'ramp-labels';
  const lo = document.createElement('span');
  lo.id = 'legend-min';
  lo.textContent = format(range.min);
  const name = document.createElement('span');
  name.id = 'legend-name';
  name.textContent = legend.colormap;
  const hi = document.createElement('span');
  hi.id = 'legend-max';
  hi.textContent = format(range.max);
  labels.append(lo, name, hi);
  const from = document.createElement('div');
  from.className = 'small';
  from.textContent = range.from === legend.source ? legend.source : `${legend.source}; range from ${range.from}`;
  box.append(bar, labels, from);
}

function drawLayerSwitch(layers: readonly ViewLayer[], built: readonly BuiltLayer[], map: OlMap): void {
  const box = el('layers');
  box.replaceChildren();
  layers.forEach((l, i) => {
    const label = document.createElement('label');
    const input = document.createElement('input');
    input.type = 'radio';
    input.name = 'layer';
    input.checked = i === 0;
    input.addEventListener('change', () => {
      for (const [j, b] of built.entries()) b.layer.setVisible(j === i);
      map.render();
    });
    label.append(input, ` ${l.title}`);
    box.append(label);
  });
}

function drawNotes(notes: readonly string[]): void {
  const box = el('notes');
  box.replaceChildren(
    ...notes.map((n) => {
      const p = document.createElement('p');
      p.className = 'small';
      p.textContent = n;
      return p;
    }),
  );
}

function format(v: number): string {
  return Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
}

/** The value under the cursor: read from the full-resolution image of the COG holding the point. */
function wireProbe(map: OlMap, config: ViewConfig, sceneCrs: string, projection: string): void {
  const out = el('probe');
  if (config.probe.length === 0) {
    out.textContent = 'no COG to read values from';
    return;
  }
  let seq = 0;
  const probeAt = async (pixel: [number, number]): Promise<ProbeResult | null> => {
    const mine = ++seq;
    const coordinate = map.getCoordinateFromPixel(pixel);
    if (!coordinate) return null;
    const [x = 0, y = 0] = transform(coordinate, projection, sceneCrs);
    const result = await valueAt(config.probe, x, y);
    if (mine !== seq) return result; // a later move is being read: show that one
    view.probe = result;
    const [lon = 0, lat = 0] = config.crs ? transform([x, y], sceneCrs, 'EPSG:4326') : [Number.NaN, Number.NaN];
    const where = `${x.toFixed(1)}, ${y.toFixed(1)} (${sceneCrs})${Number.isFinite(lon) ? ` · ${lat.toFixed(5)}°, ${lon.toFixed(5)}°` : ''}`;
    out.textContent =
      result.key === undefined
        ? `outside the scene · ${where}`
        : `value ${result.value === null ? 'nodata' : format(result.value)} · ${where}`;
    out.dataset.value = result.value === null ? '' : String(result.value);
    return result;
  };
  view.probeAt = probeAt;
  map.on('pointermove', (event) => {
    if (!event.dragging) void probeAt([event.pixel[0] ?? 0, event.pixel[1] ?? 0]);
  });
}

const images = new Map<string, Promise<GeoTIFFImage>>();

async function valueAt(cogs: readonly CogRef[], x: number, y: number): Promise<ProbeResult> {
  for (const cog of cogs) {
    const b = cog.bbox;
    if (b && (x < b[0] || x >= b[2] || y <= b[1] || y > b[3])) continue;
    let image = images.get(cog.url);
    if (!image) {
      image = openCog(cog.url).then((t) => t.getImage(0));
      images.set(cog.url, image);
    }
    const img = await image;
    const [ox = 0, oy = 0] = img.getOrigin();
    const [rx = 1, ry = -1] = img.getResolution();
    const col = Math.floor((x - ox) / rx);
    const row = Math.floor((y - oy) / ry);
    if (col < 0 || row < 0 || col >= img.getWidth() || row >= img.getHeight()) continue;
    const [band] = (await img.readRasters({ window: [col, row, col + 1, row + 1], samples: [0] })) as unknown as ArrayLike<number>[];
    const v = band?.[0];
    const nodata = img.getGDALNoData();
    const value = v === undefined || Number.isNaN(v) || v === nodata ? null : v;
    return { x, y, key: cog.key, value };
  }
  return { x, y, key: undefined, value: null };
}
