import { type TileFormat, tileExtension } from './render-params.js';
import type { Window } from './tile-grid.js';

/**
 * The one key layout: every object key Tessera builds, every prefix it lives
 * under, and, for each function role, what that role reads, writes, replaces,
 * deletes and lists there.
 *
 * Nothing else in the code names a prefix: the use cases build keys with the
 * builders below, infra derives every grant from {@link ROLE_ACCESS} (AWS policy
 * statements, GCP IAM conditions, Azure role assignments with path conditions),
 * and the test suite checks every request a function makes against the grant
 * the deployed program gives it (docs/iam.md). A new key kind is added here, with
 * its readers and writers, or the enforced-IAM suites fail on the first access.
 * test/unit/domain/key-layout.test.ts greps the rest of the tree for prefix literals.
 */

/** The functions a stack deploys, one identity each. */
export const DEPLOYED_ROLES = ['scene', 'tile', 'mosaic', 'ingest', 'reconcile', 'stream'] as const;
export type DeployedRole = (typeof DEPLOYED_ROLES)[number];
/** The deployed functions, plus `verify` (the operator's smoke test, `tessera verify`, run under its own identity). */
export const FUNCTION_ROLES = [...DEPLOYED_ROLES, 'verify'] as const;
export type FunctionRole = (typeof FUNCTION_ROLES)[number];

/** The two object stores of a stack: the source bucket/container and the output bucket/container. */
export type StoreName = 'sources' | 'outputs';

/**
 * One named place of the layout. `prefix` ends in `/` (everything under it) unless `exact` (one key).
 * The source area's prefix is the stack's `sourcePrefix` (configurable, `scenes/` by default), so it is
 * resolved with {@link areaPrefix}.
 */
export interface Area {
  readonly store: StoreName;
  readonly prefix: string;
  readonly exact?: boolean;
  readonly holds: string;
}

/** Default source prefix: where a new scene starts (tessera:sourcePrefix), and where ingest publishes. */
export const DEFAULT_SOURCE_PREFIX = 'scenes/';

export const AREAS = {
  /** Source scenes (the configured source prefix): uploads and promoted ingest artefacts. */
  source: { store: 'sources', prefix: DEFAULT_SOURCE_PREFIX, holds: 'source scenes, STAC Items and band files' },
  /** Ingest's per-attempt downloads, outside the source prefix (expired by a lifecycle rule). */
  staging: { store: 'sources', prefix: 'staging/', holds: "ingest attempts' downloads before validation" },
  /**
   * Artefacts an operator uploads for the ingest function to fetch as `object:KEY` (docs/deploy.md), outside
   * the source prefix so an upload starts no scene of its own.
   */
  uploads: { store: 'sources', prefix: 'uploads/', holds: 'artefacts uploaded for ingest to fetch (object:KEY hrefs)' },
  /**
   * Feature streams' batch objects (docs/feature-batches.md): where Firehose, a Pub/Sub Cloud Storage subscription or Event Hubs
   * Capture is pointed, outside the source prefix. Each object created here is one batch for the stream function.
   */
  streams: { store: 'sources', prefix: 'streams/', holds: 'feature batch objects landed by a stream (NDJSON, gzip, Avro)' },
  /** COG tiles: `tiles/{scene}/...`. */
  tiles: { store: 'outputs', prefix: 'tiles/', holds: 'output tiles' },
  /** A scene's manifest and lifecycle facts: `scenes/{scene}/...`. */
  scenes: { store: 'outputs', prefix: 'scenes/', holds: 'scene manifests, fan-out chunk markers, superseded tombstones' },
  /** Mosaics, COG mosaics, PMTiles archives, TileJSON, quicklooks, output STAC Items, close-out reports: `mosaics/{scene}.*`. */
  mosaics: {
    store: 'outputs',
    prefix: 'mosaics/',
    holds: 'VRT and COG mosaics, PMTiles archives, TileJSON documents, quicklook PNGs, output STAC Items, close-out reports',
  },
  /** The mosaic sweep's pending index: `index/scenes/{hour}/{scene}`. */
  sceneIndex: { store: 'outputs', prefix: 'index/scenes/', holds: "the mosaic sweep's index of scenes by hour" },
  /** The mosaic sweep's own state: one object. */
  sweepState: { store: 'outputs', prefix: 'index/mosaic-sweep.json', exact: true, holds: "the mosaic sweep's progress" },
  /** The band versions of each STAC Item version, resolved once and reused by every delivery of its event. */
  itemPins: { store: 'outputs', prefix: 'index/item-pins/', holds: 'the band versions each STAC Item version was resolved to' },
  /** `tessera verify`'s own probes: `verify/{run}/...`. */
  verify: { store: 'outputs', prefix: 'verify/', holds: "tessera verify's probe objects" },
} as const satisfies Record<string, Area>;
export type AreaName = keyof typeof AREAS;

/** An area's prefix on a stack whose source prefix is `sourcePrefix`. */
export function areaPrefix(area: AreaName, sourcePrefix: string = DEFAULT_SOURCE_PREFIX): string {
  return area === 'source' ? sourcePrefix : AREAS[area].prefix;
}

/**
 * What a role may do to the objects of an area.
 * - `read`: GET and HEAD, pinned to a version or not.
 * - `create`: a create-only write (S3 `If-None-Match: *`, GCS `ifGenerationMatch=0`, Blob `If-None-Match: *`).
 * - `replace`: a conditional overwrite of an existing object (If-Match / ifGenerationMatch=N). GCS needs
 *   `storage.objects.delete` for it, so a grant of `replace` carries delete rights there.
 * - `delete`: a conditional delete.
 * - `list`: list keys under the area's prefix.
 * - `pin`: hold the version being read for the rest of the scene (`ObjectStore.pin`). S3 and Cloud Storage pin by
 *   version id / generation and need nothing beyond `read`; Azure pins with a snapshot of the blob, which Azure
 *   authorizes as a write of the base blob (no request attribute tells a snapshot from an overwrite).
 */
export type ObjectAccess = 'read' | 'create' | 'replace' | 'delete' | 'list' | 'pin';
export const OBJECT_ACCESSES: readonly ObjectAccess[] = ['read', 'create', 'replace', 'delete', 'list', 'pin'];

export interface AreaGrant {
  readonly area: AreaName;
  readonly access: readonly ObjectAccess[];
  /** Which code needs it: the reason a reviewer reads beside the grant. */
  readonly why: string;
}

/**
 * What each role does to objects: the only source of the object grants infra deploys.
 * Claims, manifests and queues are granted by infra per role too; the enforced-IAM suites check those
 * accesses against the deployed grants the same way.
 */
export const ROLE_ACCESS: Readonly<Record<FunctionRole, readonly AreaGrant[]>> = {
  scene: [
    {
      area: 'source',
      access: ['read', 'list', 'pin'],
      why: 'fan-out pins the scene (or a STAC Item and its bands) to the version its key names and reads its header',
    },
    {
      area: 'scenes',
      access: ['read', 'create', 'list'],
      why: 'fan-out writes the scene manifest and the fanned-out / chunk markers create-only, and reads them back on a duplicate',
    },
    {
      area: 'sceneIndex',
      access: ['read', 'create'],
      why: "fan-out enters the scene in the mosaic sweep's index, and reads the entry back when a duplicate event finds it there (putIfAbsent tells its own bytes from another's)",
    },
    {
      area: 'itemPins',
      access: ['read', 'create'],
      why: "a STAC Item version's band versions are recorded create-only at its first complete delivery and reused by every later one",
    },
  ],
  tile: [
    { area: 'source', access: ['read', 'list'], why: 'a tile job reads its window of the pinned scene' },
    { area: 'tiles', access: ['read', 'create', 'replace', 'list'], why: 'tiles are written create-only and replaced by a repair' },
    {
      area: 'scenes',
      access: ['read', 'create', 'list'],
      why: 'a tile job reads the scene manifest; chunked fan-out writes chunk markers; a superseded scene gets its tombstone',
    },
  ],
  mosaic: [
    { area: 'scenes', access: ['read', 'list'], why: 'the sweep reads manifests and tombstones' },
    { area: 'tiles', access: ['read', 'list'], why: 'a mosaic lists the tiles and a COG mosaic reads their bytes' },
    {
      area: 'mosaics',
      access: ['read', 'create', 'replace', 'list'],
      why: 'mosaics (VRT, COG, PMTiles), TileJSON, quicklooks, STAC Items and close-out reports are written create-only and re-assembled after a repair',
    },
    { area: 'sceneIndex', access: ['read', 'list'], why: 'the sweep lists the scenes waiting by hour' },
    { area: 'sweepState', access: ['read', 'create', 'replace'], why: 'the sweep keeps its progress in one object, compare-and-set' },
  ],
  ingest: [
    {
      area: 'staging',
      access: ['read', 'create', 'list', 'pin'],
      why: "an attempt's download is staged, validated (read pinned to the staged version) and copied from there",
    },
    { area: 'source', access: ['read', 'create', 'list'], why: 'a validated artefact is promoted create-only under the source prefix' },
    {
      area: 'uploads',
      access: ['read'],
      why: 'an object:KEY href names an artefact an operator uploaded under uploads/ (read pinned to the version its head saw)',
    },
  ],
  stream: [
    {
      area: 'streams',
      access: ['read'],
      why: 'a batch object is read once, whole, pinned to the version its event named (its records then go to PostGIS)',
    },
  ],
  reconcile: [
    { area: 'source', access: ['read', 'list'], why: 'reconcile compares the promoted objects with the manifest' },
    { area: 'staging', access: ['read', 'list'], why: 'reconcile reports staging leftovers older than the lifecycle rule' },
  ],
  verify: [
    { area: 'source', access: ['read', 'create', 'delete', 'list'], why: 'verify uploads its smoke scene and removes it' },
    {
      area: 'tiles',
      access: ['read', 'replace', 'delete', 'list'],
      why: "verify checks its scene's tiles, overwrites one conditionally (the repair check) and removes them",
    },
    {
      area: 'scenes',
      access: ['read', 'create', 'delete', 'list'],
      why: "verify reads its scene's manifest, writes its new-key backfill's create-only (as fan-out does: a pyramid's parents read it) and removes them",
    },
    { area: 'mosaics', access: ['read', 'delete', 'list'], why: "verify checks its scene's mosaic and removes it" },
    { area: 'sceneIndex', access: ['read', 'delete', 'list'], why: "verify finds its scene in the sweep's index and removes the entry" },
    { area: 'verify', access: ['read', 'create', 'replace', 'delete', 'list'], why: "verify's own store probes" },
  ],
};

/** The area a key of `store` falls in on a stack with `sourcePrefix`, or undefined (no role may touch it). */
export function areaOfKey(store: StoreName, key: string, sourcePrefix: string = DEFAULT_SOURCE_PREFIX): AreaName | undefined {
  for (const name of Object.keys(AREAS) as AreaName[]) {
    const area: Area = AREAS[name];
    if (area.store !== store) continue;
    const prefix = areaPrefix(name, sourcePrefix);
    if (area.exact === true ? key === prefix : key.startsWith(prefix)) return name;
  }
  return undefined;
}

/** The accesses `role` has to `area` (empty when none). */
export function accessOf(role: FunctionRole, area: AreaName): readonly ObjectAccess[] {
  return ROLE_ACCESS[role].find((g) => g.area === area)?.access ?? [];
}

/** A tile's place in a tile matrix set: `{tms}/{z}/{x}/{y}` (x the column, y the row, from the top left). */
export interface TmsTileIndex {
  readonly tms: string;
  readonly z: number;
  readonly x: number;
  readonly y: number;
}

const { tiles, scenes, mosaics, sceneIndex, sweepState, staging, verify, itemPins, streams } = AREAS;

/** Deterministic output keys: no UUID, no timestamp. */
export const outputKeys = {
  /**
   * `tiles/{scene}/{row}_{col}.tif`, or on a tile matrix set `tiles/{scene}/{tms}/{z}/{x}/{y}.tif`; a rendered
   * format's tile ends in its own extension (`.png`, `.webp`, `.jpg`: shared/domain/render-params.ts).
   */
  tile: (scene: string, window: Pick<Window, 'row' | 'col'>, tms?: TmsTileIndex, format: TileFormat = 'COG'): string =>
    tms === undefined
      ? `${tiles.prefix}${scene}/${window.row}_${window.col}.${tileExtension(format)}`
      : `${tiles.prefix}${scene}/${tms.tms}/${tms.z}/${tms.x}/${tms.y}.${tileExtension(format)}`,
  tilePrefix: (scene: string): string => `${tiles.prefix}${scene}/`,
  /**
   * The URL template of a scene's tiles on tile matrix set `tms` as web maps address them:
   * `tiles/{scene}/{tms}/{z}/{x}/{y}.{ext}`, the placeholders left in (the TileJSON's `tiles`, the STAC Item's `xyz` link).
   */
  tileTemplate: (scene: string, tms: string, format: TileFormat): string =>
    `${tiles.prefix}${scene}/${tms}/{z}/{x}/{y}.${tileExtension(format)}`,
  /** Every scene's tiles. */
  allTiles: (): string => tiles.prefix,
  sceneManifest: (scene: string): string => `${scenes.prefix}${scene}/scene.json`,
  /** Everything of one scene beside its manifest (manifest, markers, tombstone). */
  scenePrefix: (scene: string): string => `${scenes.prefix}${scene}/`,
  /** Every scene's manifest folder. */
  allScenes: (): string => scenes.prefix,
  mosaic: (scene: string): string => `${mosaics.prefix}${scene}.vrt`,
  /** The optional single-COG mosaic (`--mosaic cog`), built from the tiles' keys. */
  cogMosaic: (scene: string): string => `${mosaics.prefix}${scene}.tif`,
  /** The STAC Item describing the output, beside the mosaic. */
  stacItem: (scene: string): string => `${mosaics.prefix}${scene}.stac.json`,
  /** The PMTiles v3 archive of a rendered scene's tiles, every zoom (`--mosaic pmtiles`: docs/web-maps.md). */
  pmtiles: (scene: string): string => `${mosaics.prefix}${scene}.pmtiles`,
  /** The TileJSON 3.0.0 of a rendered scene on WebMercatorQuad: its tile URL template is relative to it (`../tiles/...`). */
  tileJson: (scene: string): string => `${mosaics.prefix}${scene}.tilejson.json`,
  /** A PNG of the mosaic, at most 1024 px a side: the STAC Item's `thumbnail`. */
  quicklook: (scene: string): string => `${mosaics.prefix}${scene}.quicklook.png`,
  /** Every mosaic. */
  allMosaics: (): string => mosaics.prefix,
} as const;

/**
 * The keys of a scene's lifecycle beside its manifest. Every one is written
 * create-only: each records a fact that, once true, stays true.
 */
export const sceneLifecycleKeys = {
  /** Tombstone: an old-version tile job found the source overwritten; the scene can never complete. */
  superseded: (scene: string): string => `${scenes.prefix}${scene}/superseded.json`,
  /** A fan-out chunk whose tile jobs are all enqueued (so a redelivered chunk enqueues nothing). */
  chunkDone: (scene: string, first: number, count: number): string => `${scenes.prefix}${scene}/chunks/${first}-${count}.json`,
  /** Every chunk message of the scene is on the queue (so a redelivered scene event sends none). */
  fannedOut: (scene: string): string => `${scenes.prefix}${scene}/fanned-out.json`,
  /** A scene the mosaic sweep closed out without a mosaic, with the report naming its missing windows. */
  closedOut: (scene: string): string => `${mosaics.prefix}${scene}.closed.json`,
  /** The mosaic sweep's pending index: one entry per scene, under the UTC hour its fan-out ran. */
  indexEntry: (hour: string, scene: string): string => `${sceneIndex.prefix}${hour}/${scene}`,
  indexHour: (hour: string): string => `${sceneIndex.prefix}${hour}/`,
  /** The scene index's root. */
  indexRoot: (): string => sceneIndex.prefix,
} as const;

/** The mosaic sweep's state object. */
export const SWEEP_STATE_KEY: string = sweepState.prefix;

/** Default staging prefix of ingest (outside the source prefix). */
export const DEFAULT_STAGING_PREFIX: string = staging.prefix;

/**
 * The band pins of one STAC Item version under one band selection: `index/item-pins/{id}.json`, where `id` is a
 * digest of the item's bucket, key and version token and of the band keys the selection resolved to (the caller
 * computes it: the layout only places it).
 */
export const itemPinKeys = {
  record: (id: string): string => `${itemPins.prefix}${id}.json`,
} as const;

/** Batch objects of feature streams: `streams/{name}` (a stream's own path under it, e.g. Firehose's `ais/2025/06/01/12/...`). */
export const streamKeys = {
  /** Where every stream lands: the prefix the stream function's trigger filters on. */
  root: (): string => streams.prefix,
  batch: (name: string): string => `${streams.prefix}${name}`,
} as const;

/** `tessera verify`'s probe keys. */
export const verifyKeys = {
  run: (runId: string): string => `${verify.prefix}${runId}/`,
  race: (runId: string): string => `${verify.prefix}${runId}/race.bin`,
  odd: (runId: string, name: string): string => `${verify.prefix}${runId}/odd/${name}`,
  oddPrefix: (runId: string): string => `${verify.prefix}${runId}/odd/`,
} as const;

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const SCENE_KEY = '([0-9a-f]{64})';
const SCENE_MANIFEST_RE = new RegExp(`^${escapeRegExp(scenes.prefix)}${SCENE_KEY}/scene\\.json$`);
const MOSAIC_OR_CLOSED_RE = new RegExp(`^${escapeRegExp(mosaics.prefix)}${SCENE_KEY}\\.(vrt|closed\\.json)$`);
const INDEX_ENTRY_RE = new RegExp(`^${escapeRegExp(sceneIndex.prefix)}(\\d{10})/${SCENE_KEY}$`);

/** Read keys of the layout back into their parts (undefined when a key is not of that kind). */
export const parseKeys = {
  /** The scene of `scenes/{scene}/scene.json`. */
  sceneManifest: (key: string): string | undefined => SCENE_MANIFEST_RE.exec(key)?.[1],
  /** The scene of a VRT mosaic or a close-out report (`mosaics/{scene}.vrt`, `mosaics/{scene}.closed.json`). */
  mosaicOrClosedOut: (key: string): string | undefined => MOSAIC_OR_CLOSED_RE.exec(key)?.[1],
  /** The hour and scene of a sweep index entry (`index/scenes/{hour}/{scene}`). */
  indexEntry: (key: string): { readonly hour: string; readonly scene: string } | undefined => {
    const m = INDEX_ENTRY_RE.exec(key);
    return m ? { hour: m[1] as string, scene: m[2] as string } : undefined;
  },
} as const;
