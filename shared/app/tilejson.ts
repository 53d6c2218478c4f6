import { canonicalJson } from '../domain/canonical-json.js';
import { InvalidEventError } from '../domain/errors.js';
import { outputKeys } from '../domain/job-key.js';
import { tileExtension } from '../domain/render-params.js';
import type { TilingParams } from '../domain/tiling-params.js';
import type { SceneManifest } from './scene-manifest.js';
import { relativeHref } from './stac-output.js';

/**
 * A rendered scene on WebMercatorQuad as a web map sees it (docs/web-maps.md, "TileJSON and quicklook"): its zooms,
 * its extent in degrees and where to open it, computed from the scene grid alone (no read), so the TileJSON and the
 * PMTiles header of one scene say the same and are the same bytes on every backend and every re-run.
 */

/** The web maps' grid: XYZ tiles are WebMercatorQuad's (the TileJSON's `scheme: xyz` assumes it, PMTiles too). */
export const WEB_MAP_TMS = 'WebMercatorQuad';
export const TILEJSON_VERSION = '3.0.0';
export const TILEJSON_CONTENT_TYPE = 'application/json';
/** WebMercatorQuad's latitude limit: the square world's top and bottom edge. */
const MERCATOR_MAX_LAT = 85.0511287798066;
/** Degrees are rounded to 7 decimals (about a centimetre; what a PMTiles header keeps), so bytes stay put across runtimes. */
const round7 = (v: number): number => {
  const r = Number(v.toFixed(7));
  return Object.is(r, -0) ? 0 : r;
};
/** A map opens at the zoom where the scene is at most this many pixels across. */
const CENTER_PX = 1024;

/** A rendered scene on WebMercatorQuad, as a TileJSON and a PMTiles header describe it. */
export interface WebMapExtent {
  readonly minZoom: number;
  readonly maxZoom: number;
  /** [west, south, east, north], degrees; a scene across the antimeridian gets -180 to 180 (TileJSON bounds never wrap). */
  readonly bounds: readonly [number, number, number, number];
  /** [longitude, latitude, zoom]: the middle of the bounds, at the zoom where the scene is about 1024 px across. */
  readonly center: readonly [number, number, number];
  readonly tilePx: number;
}

/** Whether a scene gets the web map outputs (TileJSON, and the PMTiles archive when asked): rendered tiles on WebMercatorQuad. */
export function isWebMapScene(manifest: SceneManifest, tiling: TilingParams): boolean {
  return tiling.render !== undefined && manifest.grid.target?.tms?.id === WEB_MAP_TMS;
}

/** Longitude of the west edge of tile column `x` of zoom `z`. */
const lonOf = (x: number, z: number): number => (x / 2 ** z) * 360 - 180;
/** Latitude of the north edge of tile row `y` of zoom `z` (the inverse spherical Mercator). */
const latOf = (y: number, z: number): number => (Math.atan(Math.sinh(Math.PI * (1 - (2 * y) / 2 ** z))) * 180) / Math.PI;

/**
 * The extent of a rendered scene on WebMercatorQuad: the tiles of its highest zoom (every lower zoom's tiles hold them),
 * from the tile indices, not the geotransform, so no rounding of metres enters it.
 */
export function webMapExtent(manifest: SceneManifest, tiling: TilingParams): WebMapExtent {
  const grid = manifest.grid;
  const tms = grid.target?.tms;
  if (tms === undefined || tms.id !== WEB_MAP_TMS)
    throw new InvalidEventError(`webMapExtent: scene ${manifest.sceneKey} is not on ${WEB_MAP_TMS} (isWebMapScene first)`);
  const z = tms.zoom;
  const cols = Math.ceil(grid.width / tiling.tilePx);
  const rows = Math.ceil(grid.height / tiling.tilePx);
  const matrix = 2 ** z;
  // A grid across the antimeridian runs past the matrix's last column: its tiles are the first ones again.
  const wraps = tms.minCol + cols > matrix;
  const west = wraps ? -180 : lonOf(tms.minCol, z);
  const east = wraps ? 180 : lonOf(tms.minCol + cols, z);
  const north = Math.min(MERCATOR_MAX_LAT, latOf(tms.minRow, z));
  const south = Math.max(-MERCATOR_MAX_LAT, latOf(tms.minRow + rows, z));
  const middleX = (tms.minCol + cols / 2) % matrix;
  const minZoom = tiling.target.tms?.minZoom ?? z;
  let shift = 0;
  while (Math.max(grid.width, grid.height) / 2 ** shift > CENTER_PX && z - shift > minZoom) shift++;
  return {
    minZoom,
    maxZoom: z,
    bounds: [round7(west), round7(south), round7(east), round7(north)],
    center: [round7(lonOf(middleX, z)), round7(latOf(tms.minRow + rows / 2, z)), z - shift],
    tilePx: tiling.tilePx,
  };
}

/** The TileJSON of a scene, and its bytes. */
export interface SceneTileJson {
  readonly key: string;
  readonly doc: Readonly<Record<string, unknown>>;
  readonly bytes: Uint8Array;
}

/**
 * The TileJSON 3.0.0 of a rendered scene on WebMercatorQuad, written beside its mosaic (outputKeys.tileJson):
 *
 * - `tiles`: the scene's own tile keys as a template relative to the TileJSON (`../tiles/{scene}/WebMercatorQuad/{z}/{x}/{y}.png`).
 *   TileJSON asks for absolute URLs, but the outputs have none until someone serves them (a bucket, a CDN, `tessera view`):
 *   a reader resolves the template against the TileJSON's own URL, as `tessera view` does (docs/web-maps.md).
 * - `bounds`, `center`, `minzoom`, `maxzoom`: {@link webMapExtent}; `scheme` xyz.
 * - `vector_layers: []`: the 3.0.0 JSON schema requires the key (its README exempts raster tiles); an empty list says
 *   there are none, and satisfies both.
 * - `tessera:format`, `tessera:colormap`, `tessera:rescale` (`[min, max]`), `tessera:tile_size`: how the tiles were
 *   rendered, for a legend (the viewer reads `tessera:colormap` and `tessera:rescale`: cli/view/legend.ts); the archive's
 *   href as `tessera:pmtiles` when `--mosaic pmtiles` made one.
 *
 * Canonical JSON (RFC 8785): the same scene gives the same bytes.
 */
export function sceneTileJson(
  manifest: SceneManifest,
  tiling: TilingParams,
  options: { readonly pmtilesKey?: string | undefined } = {},
): SceneTileJson {
  const render = tiling.render;
  if (render === undefined) throw new InvalidEventError(`sceneTileJson: scene ${manifest.sceneKey} has no rendered tiles`);
  const extent = webMapExtent(manifest, tiling);
  const key = outputKeys.tileJson(manifest.sceneKey);
  const template = relativeHref(key, outputKeys.tileTemplate(manifest.sceneKey, WEB_MAP_TMS, render.format));
  const zooms = extent.minZoom === extent.maxZoom ? `zoom ${extent.maxZoom}` : `zooms ${extent.minZoom}-${extent.maxZoom}`;
  const doc: Record<string, unknown> = {
    tilejson: TILEJSON_VERSION,
    name: `Tessera scene ${manifest.sceneKey.slice(0, 12)}`,
    description: `${JSON.stringify(tiling.expression)} rendered to ${render.format} tiles${render.colormap === undefined ? '' : ` with the ${render.colormap} colormap`} over [${render.rescale.join(', ')}], ${zooms}`,
    version: '1.0.0',
    scheme: 'xyz',
    tiles: [template],
    vector_layers: [],
    minzoom: extent.minZoom,
    maxzoom: extent.maxZoom,
    bounds: [...extent.bounds],
    center: [...extent.center],
    'tessera:format': tileExtension(render.format),
    'tessera:rescale': [...render.rescale],
    ...(render.colormap === undefined ? {} : { 'tessera:colormap': render.colormap }),
    'tessera:tile_size': extent.tilePx,
    ...(options.pmtilesKey === undefined ? {} : { 'tessera:pmtiles': relativeHref(key, options.pmtilesKey) }),
  };
  return { key, doc, bytes: new TextEncoder().encode(canonicalJson(doc)) };
}
