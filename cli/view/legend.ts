import { COLORMAP_HEX } from '../../shared/raster/colormaps.generated.js';
import type { LegendSpec } from './view-config.js';

/**
 * The ramp shown when the outputs name no colormap: black at the minimum to white at the maximum, as GDAL and QGIS
 * show a single float band (the `greys` colormap runs the other way, white to black, as matplotlib's Greys does).
 */
export const DEFAULT_COLORMAP = 'grey';
const GREY_RAMP: [number, number, number][] = [
  [0, 0, 0],
  [255, 255, 255],
];

/** Stops the page interpolates between: 33 of a table's 256 entries (every eighth, and the last), linear between. */
const STOPS = 33;

/** The colormaps the viewer can draw: the tables `--colormap` renders tiles with (shared/raster/colormaps.generated.ts). */
export const VIEW_COLORMAPS: readonly string[] = Object.keys(COLORMAP_HEX);

/** `STOPS` evenly spaced RGB entries of a 256-entry table, first and last included. */
export function colormapStops(name: string): [number, number, number][] | undefined {
  if (name === DEFAULT_COLORMAP) return GREY_RAMP;
  const hex = (COLORMAP_HEX as Readonly<Record<string, string>>)[name];
  if (hex === undefined || hex.length !== 256 * 6) return undefined;
  const entry = (i: number): [number, number, number] => {
    const at = i * 6;
    return [parseInt(hex.slice(at, at + 2), 16), parseInt(hex.slice(at + 2, at + 4), 16), parseInt(hex.slice(at + 4, at + 6), 16)];
  };
  return Array.from({ length: STOPS }, (_, s) => entry(Math.round((s * 255) / (STOPS - 1))));
}

interface Rendering {
  readonly colormap?: string | undefined;
  readonly min?: number | undefined;
  readonly max?: number | undefined;
  readonly source: string;
}

/**
 * The legend of a scene's outputs: the colormap and value range they were rendered with, read from
 * - the STAC Item's render extension (`properties.renders.<name>.colormap_name` and `.rescale: [[min, max]]`,
 *   https://github.com/stac-extensions/render), the way TiTiler reads it;
 * - else the Item's or its TileJSON's `tessera:colormap` and `tessera:rescale` ([min, max]);
 * - else the scene manifest's rendering (`params.output.colormap` and `.rescale` of `--format png|webp|jpeg`: the
 *   tiles' own colours; without a colormap a rendered level is its grey value, the default ramp);
 * - else the default grey ramp, its range left to the page (min and max of the data's smallest overview).
 * A colormap the viewer does not know falls back to the grey ramp, and the legend says so.
 */
export function legendOf(
  item: { readonly properties?: Record<string, unknown> },
  tileJson: unknown,
  manifestOutput?: Readonly<Record<string, unknown>> | undefined,
): LegendSpec {
  const found =
    fromRenders(item.properties?.renders) ??
    fromTessera(item.properties, 'STAC Item') ??
    fromTessera(tileJson, 'TileJSON') ??
    fromManifest(manifestOutput);
  const name = found?.colormap ?? DEFAULT_COLORMAP;
  const colors = colormapStops(name);
  const range = found?.min !== undefined && found.max !== undefined && found.min < found.max ? { min: found.min, max: found.max } : {};
  if (colors === undefined) {
    return {
      colormap: DEFAULT_COLORMAP,
      colors: colormapStops(DEFAULT_COLORMAP) ?? [],
      ...range,
      source: `${found?.source ?? 'outputs'} name colormap ${JSON.stringify(name)}, which the viewer does not know (${VIEW_COLORMAPS.join(', ')}): grey ramp`,
    };
  }
  return { colormap: name, colors, ...range, source: found?.source ?? 'no colormap named by the outputs: grey ramp' };
}

function fromRenders(renders: unknown): Rendering | undefined {
  if (typeof renders !== 'object' || renders === null) return undefined;
  for (const [name, r] of Object.entries(renders as Record<string, Record<string, unknown>>)) {
    const colormap = typeof r?.colormap_name === 'string' ? r.colormap_name.toLowerCase() : undefined;
    const rescale = Array.isArray(r?.rescale) ? (r.rescale[0] as unknown) : undefined;
    const [min, max] = Array.isArray(rescale) ? rescale.map(Number) : [];
    if (colormap !== undefined || min !== undefined) return { colormap, min, max, source: `STAC Item renders.${name}` };
  }
  return undefined;
}

function fromTessera(doc: unknown, what: string): Rendering | undefined {
  if (typeof doc !== 'object' || doc === null) return undefined;
  const d = doc as Record<string, unknown>;
  const colormap = typeof d['tessera:colormap'] === 'string' ? (d['tessera:colormap'] as string).toLowerCase() : undefined;
  const rescale = Array.isArray(d['tessera:rescale']) ? (d['tessera:rescale'] as unknown[]).map(Number) : undefined;
  if (colormap === undefined && rescale === undefined) return undefined;
  return { colormap, min: rescale?.[0], max: rescale?.[1], source: `${what} tessera:colormap` };
}

/** A rendered scene's `output` parameters (docs/web-maps.md, "Rendered tiles"): its colormap and rescale. */
function fromManifest(output: Readonly<Record<string, unknown>> | undefined): Rendering | undefined {
  if (output === undefined || output.format === undefined || output.format === 'COG') return undefined;
  const colormap = typeof output.colormap === 'string' ? output.colormap.toLowerCase() : DEFAULT_COLORMAP;
  const rescale = Array.isArray(output.rescale) ? output.rescale.map(Number) : undefined;
  return {
    colormap,
    min: rescale?.[0],
    max: rescale?.[1],
    source: `scene manifest: ${String(output.format)} tiles rendered with ${colormap}`,
  };
}
