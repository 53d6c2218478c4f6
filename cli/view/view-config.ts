/**
 * What `tessera view` tells its page: the one JSON document (`/view.json`) the server builds from a scene's outputs
 * and the page draws. Types only, with no Node or DOM import, so the server (cli/view/scene-view.ts) and the page
 * (cli/view/page/main.ts, bundled for the browser) share them.
 *
 * Every URL is relative to the page (`o/<key>`): the server answers only the keys it listed here
 * (cli/view/http-server.ts), so the page cannot ask for anything else.
 */

/** A GeoJSON geometry in WGS84 (the STAC Item's `geometry`). */
export interface GeoJsonGeometry {
  readonly type: 'Polygon' | 'MultiPolygon';
  readonly coordinates: unknown;
}

/** One COG the page reads. */
export interface CogRef {
  readonly url: string;
  /** The object key it is served from (what the page shows and the tests compare). */
  readonly key: string;
  /**
   * For a scene's tiles (no COG mosaic): where the tile lies, `[minx, miny, maxx, maxy]` in the scene's CRS, and its
   * size in pixels, read from its header by the server, so the page opens only the tiles a view needs.
   */
  readonly bbox?: readonly [number, number, number, number] | undefined;
  readonly width?: number | undefined;
  readonly height?: number | undefined;
}

/** A layer the page can show. Rendered layers (PMTiles, XYZ) come first: they are what a web map would show. */
export type ViewLayer =
  /** Raster PMTiles v3 (rendered PNG/WebP/JPEG tiles), read in place by range requests. */
  | { readonly kind: 'pmtiles'; readonly title: string; readonly url: string }
  /** XYZ tiles from a TileJSON (`tiles[0]`, resolved against the TileJSON's own location). */
  | {
      readonly kind: 'xyz';
      readonly title: string;
      readonly template: string;
      readonly minzoom: number;
      readonly maxzoom: number;
      readonly bounds?: readonly [number, number, number, number] | undefined;
    }
  /**
   * Float COGs rendered in the browser with the legend's colour ramp: the COG mosaic (one COG), or the scene's tiles
   * (`mosaic: false`), which the page draws as one layer, reading each tile where a view needs it, as the VRT does.
   */
  | { readonly kind: 'cog'; readonly title: string; readonly cogs: readonly CogRef[]; readonly mosaic: boolean };

/** How values map to colours. `min`/`max` absent: the page reads them from the data (smallest overview). */
export interface LegendSpec {
  /** Colormap name (`greys` when the outputs name none). */
  readonly colormap: string;
  /** Colour stops from `min` (first) to `max` (last), evenly spaced, RGB 0-255. */
  readonly colors: readonly (readonly [number, number, number])[];
  readonly min?: number | undefined;
  readonly max?: number | undefined;
  /** Where the ramp and range came from, shown under the legend. */
  readonly source: string;
}

export interface ViewConfig {
  readonly title: string;
  /** The scene key (the STAC Item's `id`). */
  readonly scene: string;
  /** The STAC Item, served beside the layers. */
  readonly item: string;
  /** The footprint outline (STAC `geometry`), or null for a scene with none (another body than Earth). */
  readonly footprint: GeoJsonGeometry | null;
  /** The scene's CRS for proj4 (`code` is what the COGs' GeoKeys name, e.g. `EPSG:32631`), null when it has none. */
  readonly crs: { readonly code: string; readonly proj4: string } | null;
  readonly layers: readonly ViewLayer[];
  /** The COGs the value under the cursor is read from (full resolution), empty when the outputs hold none. */
  readonly probe: readonly CogRef[];
  readonly legend: LegendSpec;
  /** Outputs found but not shown, and why (e.g. an asset whose href is remote). */
  readonly notes: readonly string[];
}
