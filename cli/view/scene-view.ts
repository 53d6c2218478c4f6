import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix, resolve, sep } from 'node:path';
import { fromFile } from 'geotiff';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { outputKeys } from '../../shared/domain/key-layout.js';
import { validateObjectKey } from '../../shared/domain/object-key.js';
import { crsFromEpsg, parseCrs } from '../../shared/raster/crs.js';
import { legendOf } from './legend.js';
import type { CogRef, GeoJsonGeometry, ViewConfig, ViewLayer } from './view-config.js';

/**
 * `tessera view` found nothing it can show (no STAC Item, or an Item with no COG, PMTiles or TileJSON and no tiles
 * beside it). INVALID_PARAMS: the message names the run or option that makes one.
 */
export class NothingToViewError extends InvalidParamsError {}

/**
 * The keys the server answers: exact keys (the Item, the COG mosaic, a PMTiles archive, a TileJSON) and key
 * prefixes (a scene's tiles, a TileJSON's tile folder). Anything else is 404, whatever is on disk.
 */
export interface ServedKeys {
  readonly exact: ReadonlySet<string>;
  readonly prefixes: readonly string[];
  /**
   * Prefixes of tile folders a pyramid may leave holes in (blank tiles skipped): a missing key there is answered
   * 204 No Content, an empty tile, not 404.
   */
  readonly sparse: readonly string[];
}

/** A scene's outputs, ready to serve: the page's config, the folder keys resolve in, and the keys it may serve. */
export interface SceneView {
  readonly config: ViewConfig;
  /** The folder every served key is a path under (the local backend's `outputs/objects`). */
  readonly root: string;
  readonly served: ServedKeys;
  /** The Item's own key under `root`. */
  readonly itemKey: string;
}

/**
 * Tiles past this many are not drawn from the tiles: a zoomed-out view would read them all in the browser. The COG
 * mosaic (or a pyramid) serves such a scene.
 */
export const MAX_VIEW_TILES = 1024;

/** URL (relative to the page) of an object key: every segment percent-encoded, served by `/o/<key>`. */
export const objectUrl = (key: string): string => `o/${key.split('/').map(encodeURIComponent).join('/')}`;

/** Link relations that point at other STAC documents or sources, never at a layer of this scene. */
const NOT_LAYERS = new Set(['self', 'root', 'parent', 'collection', 'derived_from', 'via', 'license']);

interface StacLike {
  readonly id?: unknown;
  readonly bbox?: unknown;
  readonly geometry?: unknown;
  readonly properties?: Record<string, unknown>;
  readonly assets?: Record<string, StacRef>;
  readonly links?: readonly StacRef[];
}
interface StacRef {
  readonly href?: unknown;
  readonly type?: unknown;
  readonly rel?: unknown;
  readonly roles?: unknown;
  readonly title?: unknown;
}

/**
 * The scene of a local backend: `scene` (a scene key), else the last run's (`<dir>/last-run.json`), read from the
 * STAC Item the mosaic assembly wrote (`outputKeys.stacItem`).
 */
export async function sceneViewFromDir(dir: string, scene: string | undefined): Promise<SceneView> {
  const root = join(resolve(dir), 'outputs', 'objects');
  const sceneKey = scene ?? lastRunScene(dir);
  const itemKey = outputKeys.stacItem(sceneKey);
  const path = join(root, ...itemKey.split('/'));
  if (!existsSync(path)) {
    throw new NothingToViewError(
      `no STAC Item for scene ${sceneKey} in ${dir} (${path}): the mosaic assembly writes it; run \`tessera run --dir ${dir}\` ` +
        'until it prints "STAC item", or pass --stac ITEM',
    );
  }
  return await sceneViewFromItem(path);
}

function lastRunScene(dir: string): string {
  const file = join(resolve(dir), 'last-run.json');
  if (!existsSync(file))
    throw new NothingToViewError(`no run found in ${dir}: run \`tessera run\` first, or pass --dir, --scene or --stac`);
  const run = JSON.parse(readFileSync(file, 'utf8')) as { sceneKey?: unknown };
  if (typeof run.sceneKey !== 'string')
    throw new NothingToViewError(`${file} names no scene key: run \`tessera run\` again, or pass --scene`);
  return run.sceneKey;
}

/**
 * A STAC Item file and the outputs it describes. When the Item lies where the key layout puts it
 * (`<root>/<outputKeys.stacItem(id)>`), `<root>` is served: its COG mosaic, PMTiles and TileJSON, and the scene's
 * tiles. Otherwise the Item's folder is, and only what its hrefs name.
 */
export async function sceneViewFromItem(itemPath: string): Promise<SceneView> {
  const path = resolve(itemPath);
  let item: StacLike;
  try {
    item = JSON.parse(readFileSync(path, 'utf8')) as StacLike;
  } catch (cause) {
    throw new InvalidParamsError(`--stac ${itemPath}: not a readable JSON file (${(cause as Error).message}); give a STAC Item's path`, {
      cause,
    });
  }
  if (typeof item.id !== 'string' || item.properties === undefined || typeof item.assets !== 'object' || item.assets === null) {
    throw new InvalidParamsError(`--stac ${itemPath}: not a STAC Item (it needs id, properties and assets); give the Item tessera wrote`);
  }
  const scene = item.id;
  const layoutKey = safeKey(scene) ? outputKeys.stacItem(scene) : undefined;
  const inLayout = layoutKey !== undefined && path.split(sep).join('/').endsWith(`/${layoutKey}`);
  const root = inLayout ? path.slice(0, path.length - layoutKey.length - 1) : dirname(path);
  const itemKey = inLayout ? layoutKey : posix.basename(path.split(sep).join('/'));

  const exact = new Set<string>([itemKey]);
  const prefixes: string[] = [];
  const sparse: string[] = [];
  const notes: string[] = [];
  const layers: ViewLayer[] = [];
  let cogMosaic: CogRef | undefined;
  let tileJson: unknown;

  const refs: [string, StacRef][] = [
    ...Object.entries(item.assets ?? {}),
    ...(item.links ?? [])
      .filter((l) => !NOT_LAYERS.has(String(l.rel)))
      .map((l, i): [string, StacRef] => [`link ${i} (${String(l.rel)})`, l]),
  ];
  for (const [name, ref] of refs) {
    const kind = kindOf(ref);
    if (kind === undefined) continue;
    const key = keyOfHref(itemKey, ref.href);
    if (typeof key !== 'string' || !existsSync(join(root, ...key.split('/')))) {
      notes.push(`${name}: ${kind} at ${String(ref.href)} is not served (${typeof key === 'string' ? 'no such file' : key.why})`);
      continue;
    }
    const title = typeof ref.title === 'string' ? ref.title : name;
    if (kind === 'cog' && cogMosaic === undefined) {
      cogMosaic = { url: objectUrl(key), key };
      exact.add(key);
    } else if (kind === 'pmtiles' && !layers.some((l) => l.kind === 'pmtiles')) {
      layers.push({ kind: 'pmtiles', title, url: objectUrl(key) });
      exact.add(key);
    } else if (kind === 'tilejson' && !layers.some((l) => l.kind === 'xyz')) {
      const xyz = xyzOfTileJson(root, key, title, notes);
      if (xyz === undefined) continue;
      tileJson = xyz.json;
      layers.push(xyz.layer);
      exact.add(key);
      prefixes.push(xyz.prefix);
      sparse.push(xyz.prefix);
    }
  }

  // On the layout, the scene's manifest says how its tiles were made (format, colormap, rescale): read beside the Item.
  const output = inLayout ? manifestOutput(root, scene) : undefined;
  if (inLayout && !layers.some((l) => l.kind !== 'cog')) {
    const rendered = renderedTiles(root, scene, item.bbox);
    if (rendered !== undefined) {
      layers.push(rendered.layer);
      prefixes.push(rendered.prefix);
      sparse.push(rendered.prefix);
    }
  }

  let cogs: CogRef[] = cogMosaic === undefined ? [] : [cogMosaic];
  if (cogMosaic === undefined && inLayout) {
    cogs = sceneTiles(root, scene);
    if (cogs.length > MAX_VIEW_TILES) {
      notes.push(
        `${cogs.length} COG tiles and no COG mosaic: too many to read in the browser (at most ${MAX_VIEW_TILES}); run with --mosaic cog`,
      );
      cogs = [];
    } else if (cogs.length > 0) {
      cogs = await withBounds(root, cogs);
      prefixes.push(outputKeys.tilePrefix(scene));
    }
  }
  if (cogs.length > 0) {
    layers.push({
      kind: 'cog',
      title: cogMosaic === undefined ? `COG tiles (${cogs.length})` : 'COG mosaic',
      cogs,
      mosaic: cogMosaic !== undefined,
    });
  }
  if (layers.length === 0) {
    throw new NothingToViewError(
      `the STAC Item ${path} links no COG mosaic, PMTiles archive or TileJSON the viewer can read, and no COG tiles lie beside it` +
        `${notes.length > 0 ? ` (${notes.join('; ')})` : ''}: run with --mosaic cog, or view the Item where tessera wrote it (--dir)`,
    );
  }

  return {
    root,
    itemKey,
    served: { exact, prefixes, sparse },
    config: {
      title: `Tessera scene ${scene.slice(0, 12)}`,
      scene,
      item: objectUrl(itemKey),
      footprint: footprintOf(item.geometry),
      crs: crsOf(item.properties),
      layers,
      probe: cogs,
      legend: legendOf(item, tileJson, output),
      notes,
    },
  };
}

type LayerKind = 'cog' | 'pmtiles' | 'tilejson';

/** What an asset or link is to the viewer, by its media type first, then its href's extension. */
function kindOf(ref: StacRef): LayerKind | undefined {
  const type = typeof ref.type === 'string' ? ref.type.toLowerCase() : '';
  const href = typeof ref.href === 'string' ? (ref.href.toLowerCase().split(/[?#]/)[0] ?? '') : '';
  const roles = Array.isArray(ref.roles) ? ref.roles.map(String) : [];
  if (type.includes('profile=cloud-optimized')) return 'cog';
  if (type === 'application/vnd.pmtiles' || href.endsWith('.pmtiles')) return 'pmtiles';
  if (ref.rel === 'tilejson' || roles.includes('tilejson') || href.endsWith('tilejson.json') || href.endsWith('.tilejson'))
    return 'tilejson';
  if (roles.includes('data') && type.startsWith('image/tiff') && (href.endsWith('.tif') || href.endsWith('.tiff'))) return 'cog';
  return undefined;
}

/** A relative href resolved against the Item's key into a key under the same root, or why it cannot be served. */
function keyOfHref(itemKey: string, href: unknown): string | { why: string } {
  if (typeof href !== 'string' || href === '') return { why: 'no href' };
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('/'))
    return { why: 'not relative to the Item: the viewer serves local files only' };
  const joined = posix.normalize(posix.join(posix.dirname(itemKey), decodeURI(href.split(/[?#]/)[0] ?? '')));
  if (joined.startsWith('../') || joined === '..') return { why: 'outside the folder served' };
  return safeKey(joined) ? joined : { why: 'not a valid object key' };
}

function safeKey(key: string): boolean {
  try {
    validateObjectKey(key);
    return true;
  } catch {
    return false;
  }
}

/**
 * A TileJSON's first tile template as an XYZ layer, resolved against the TileJSON's own key, and the key prefix its
 * tiles lie under (the template up to its first `{`, cut back to a `/`).
 */
function xyzOfTileJson(
  root: string,
  key: string,
  title: string,
  notes: string[],
): { layer: ViewLayer; prefix: string; json: unknown } | undefined {
  let json: { tiles?: unknown; minzoom?: unknown; maxzoom?: unknown; bounds?: unknown };
  try {
    json = JSON.parse(readFileSync(join(root, ...key.split('/')), 'utf8'));
  } catch (cause) {
    notes.push(`TileJSON ${key} is not JSON (${(cause as Error).message})`);
    return undefined;
  }
  const template = Array.isArray(json.tiles) ? json.tiles[0] : undefined;
  if (typeof template !== 'string' || !template.includes('{z}')) {
    notes.push(`TileJSON ${key} has no tiles[0] template with {z}/{x}/{y}`);
    return undefined;
  }
  const literal = template.slice(0, template.indexOf('{'));
  const base = keyOfHref(key, `${literal.slice(0, literal.lastIndexOf('/') + 1)}x`);
  if (typeof base !== 'string') {
    notes.push(`TileJSON ${key}: tiles ${template} ${base.why}`);
    return undefined;
  }
  const prefix = base.slice(0, -1);
  const rest = template.slice(literal.lastIndexOf('/') + 1);
  const bounds =
    Array.isArray(json.bounds) && json.bounds.length === 4 ? (json.bounds.map(Number) as [number, number, number, number]) : undefined;
  return {
    prefix,
    json,
    layer: {
      kind: 'xyz',
      title,
      template: `${objectUrl(`${prefix}x`).slice(0, -1)}${rest}`,
      minzoom: typeof json.minzoom === 'number' ? json.minzoom : 0,
      maxzoom: typeof json.maxzoom === 'number' ? json.maxzoom : 22,
      ...(bounds === undefined ? {} : { bounds }),
    },
  };
}

/**
 * The COG tiles of a scene (`outputKeys.tile`), from the folder: the finest zoom only when the tiles are a pyramid
 * on a tile matrix set (`{tms}/{z}/{x}/{y}.tif`), every window otherwise (`{row}_{col}.tif`).
 */
function sceneTiles(root: string, scene: string): CogRef[] {
  const prefix = outputKeys.tilePrefix(scene);
  const dir = join(root, ...prefix.split('/').filter(Boolean));
  if (!existsSync(dir)) return [];
  const found: { key: string; z: number }[] = [];
  const walk = (folder: string, rel: string) => {
    for (const name of readdirSync(folder).sort()) {
      const full = join(folder, name);
      if (statSync(full).isDirectory()) walk(full, `${rel}${name}/`);
      else if (name.endsWith('.tif')) {
        const parts = `${rel}${name}`.split('/');
        found.push({ key: `${prefix}${rel}${name}`, z: parts.length === 4 ? Number(parts[1]) : 0 });
      }
    }
  };
  walk(dir, '');
  const finest = Math.max(...found.map((t) => t.z));
  return found.filter((t) => t.z === finest).map((t) => ({ key: t.key, url: objectUrl(t.key) }));
}

/** `params.output` of the scene's manifest (`outputKeys.sceneManifest`), when it is beside the Item. */
function manifestOutput(root: string, scene: string): Record<string, unknown> | undefined {
  const path = join(root, ...outputKeys.sceneManifest(scene).split('/'));
  if (!existsSync(path)) return undefined;
  try {
    const manifest = JSON.parse(readFileSync(path, 'utf8')) as { params?: { output?: unknown } };
    const output = manifest.params?.output;
    return typeof output === 'object' && output !== null ? (output as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The tile matrix set whose tiles are a web map's XYZ tiles as they are. */
const WEB_MERCATOR = 'WebMercatorQuad';
const RENDERED_EXTENSIONS = ['png', 'webp', 'jpg'] as const;

/**
 * Rendered tiles (PNG, WebP, JPEG) on WebMercatorQuad, `tiles/{scene}/WebMercatorQuad/{z}/{x}/{y}.{ext}`, are XYZ
 * tiles already: an XYZ layer over them, zooms from the folders found, for a scene without a TileJSON. Rendered
 * tiles on another grid carry no georeferencing of their own (their VRT mosaic does): not shown.
 */
function renderedTiles(root: string, scene: string, bbox: unknown): { layer: ViewLayer; prefix: string } | undefined {
  const prefix = `${outputKeys.tilePrefix(scene)}${WEB_MERCATOR}/`;
  const dir = join(root, ...prefix.split('/').filter(Boolean));
  if (!existsSync(dir)) return undefined;
  const zooms = readdirSync(dir)
    .filter((z) => /^\d{1,2}$/.test(z))
    .map(Number)
    .sort((a, b) => a - b);
  for (const z of zooms) {
    const xs = readdirSync(join(dir, String(z)));
    const first = xs.length > 0 ? readdirSync(join(dir, String(z), xs[0] as string))[0] : undefined;
    const ext = RENDERED_EXTENSIONS.find((e) => first?.endsWith(`.${e}`));
    if (ext === undefined) continue;
    const b = Array.isArray(bbox) && bbox.length === 4 ? (bbox.map(Number) as [number, number, number, number]) : undefined;
    return {
      prefix,
      layer: {
        kind: 'xyz',
        title: `${ext.toUpperCase()} tiles (${WEB_MERCATOR})`,
        template: `${objectUrl(`${prefix}x`).slice(0, -1)}{z}/{x}/{y}.${ext}`,
        minzoom: z,
        maxzoom: zooms.at(-1) ?? z,
        ...(b === undefined || b[0] > b[2] ? {} : { bounds: b }),
      },
    };
  }
  return undefined;
}

/** Each tile's bounds and size, from its own GeoTIFF header (geotiff.js reads the first bytes of the file). */
async function withBounds(root: string, cogs: readonly CogRef[]): Promise<CogRef[]> {
  const out: CogRef[] = [];
  for (const cog of cogs) {
    const tiff = await fromFile(join(root, ...cog.key.split('/')));
    try {
      const image = await tiff.getImage(0);
      const [minx = 0, miny = 0, maxx = 0, maxy = 0] = image.getBoundingBox();
      out.push({ ...cog, bbox: [minx, miny, maxx, maxy], width: image.getWidth(), height: image.getHeight() });
    } finally {
      await tiff.close();
    }
  }
  return out;
}

function footprintOf(geometry: unknown): GeoJsonGeometry | null {
  const g = geometry as { type?: unknown; coordinates?: unknown } | null | undefined;
  if (g && (g.type === 'Polygon' || g.type === 'MultiPolygon') && Array.isArray(g.coordinates)) {
    return { type: g.type, coordinates: g.coordinates };
  }
  return null;
}

/** The Item's CRS (projection extension: `proj:code`, else `proj:wkt2`) as a proj4 definition for the page. */
function crsOf(properties: Record<string, unknown> | undefined): ViewConfig['crs'] {
  const code = properties?.['proj:code'];
  const wkt2 = properties?.['proj:wkt2'];
  if (typeof code === 'string' && /^EPSG:\d+$/i.test(code)) {
    const crs = crsFromEpsg(code);
    return { code: crs.id, proj4: crs.proj4 };
  }
  if (typeof wkt2 === 'string') {
    // No EPSG code for the page to name it by: the COGs carry their CRS as parameters, so the page names it itself.
    return { code: 'TESSERA:SCENE', proj4: parseCrs(wkt2).proj4 };
  }
  return null;
}
