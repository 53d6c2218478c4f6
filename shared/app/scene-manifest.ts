import { InvalidEventError, type SourceChangedError } from '../domain/errors.js';
import type { ProcessingParams, SourceRef } from '../domain/job-key.js';
import { outputKeys } from '../domain/job-key.js';
import type { StacItemMetadata } from '../domain/stac-item.js';
import type { TileGrid } from '../domain/tile-grid.js';
import type { ObjectStore, ReadPin } from '../ports/object-store.port.js';
import type { Backend } from './backend.js';
import type { SceneReadPins } from './tile-job.js';

/** What fan-out learned about a scene, stored create-only beside its tiles for assembly and reconcile. */
export interface SceneManifest {
  readonly v: 1;
  readonly sceneKey: string;
  readonly source: SourceRef;
  readonly params: ProcessingParams;
  readonly grid: TileGrid;
  readonly raster: {
    readonly crs: { readonly epsg?: number | undefined; readonly wkt?: string | undefined };
    readonly geoTransform: readonly [number, number, number, number, number, number];
    readonly noData: number | undefined;
    readonly dataType: string;
    readonly bandCount: number;
  };
  /**
   * The read pin fan-out resolved for `source.versionToken`: a backfill days
   * later reads exactly this version (or settles source-changed), never the
   * live object. Absent in manifests written before pinning.
   */
  readonly pin?: ReadPin | undefined;
  /** A multi-file scene: the pin fan-out resolved for each band's object, by band name. */
  readonly pins?: Readonly<Record<string, ReadPin>> | undefined;
  /**
   * When the first fan-out of the scene ran (RFC 3339, the Clock's): the output STAC Item's time when
   * the scene has no source item. Recorded once (the manifest is create-only), so a re-assembly after a
   * crash writes the same item bytes.
   */
  readonly createdAt?: string | undefined;
  /** The STAC Item the scene came from (its anchor object, read pinned at fan-out): id, times, collection. */
  readonly sourceItem?: StacItemMetadata | undefined;
}

import { sceneLifecycleKeys } from '../domain/key-layout.js';

export { sceneLifecycleKeys };

const HOUR_MS = 3_600_000;

/** The index bucket of an instant: its UTC hour as `YYYYMMDDHH`, which sorts as time does. */
export function indexHourOf(ms: number): string {
  return new Date(Math.floor(ms / HOUR_MS) * HOUR_MS).toISOString().slice(0, 13).replace(/[-T]/g, '');
}

/** The instant an index bucket starts. */
export function indexHourStart(hour: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})$/.exec(hour);
  if (!m) throw new InvalidEventError(`index bucket ${JSON.stringify(hour)} is not YYYYMMDDHH`);
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]));
}

export const INDEX_HOUR_MS = HOUR_MS;

export async function readSceneManifest(store: ObjectStore, sceneKey: string): Promise<SceneManifest> {
  const bytes = await store.get(outputKeys.sceneManifest(sceneKey));
  try {
    const m = JSON.parse(new TextDecoder().decode(bytes)) as SceneManifest;
    if (m.v !== 1 || m.sceneKey !== sceneKey) throw new Error('wrong version or scene key');
    return m;
  } catch (cause) {
    throw new InvalidEventError(`scene manifest ${outputKeys.sceneManifest(sceneKey)} is unreadable`, { cause });
  }
}

/** The pin reads of a manifest's scene use: the one fan-out resolved, or (an older manifest) the version token. */
export function manifestPin(manifest: SceneManifest): ReadPin {
  return manifest.pin ?? { version: manifest.source.versionToken };
}

/** Every pin of a manifest's scene: the anchor's and each band object's, for its tile jobs. */
export function manifestPins(manifest: SceneManifest): SceneReadPins {
  return { pin: manifestPin(manifest), ...(manifest.pins === undefined ? {} : { pins: manifest.pins }) };
}

/** The tombstone's content: what changed, seen by which job, when. */
export interface SupersededRecord {
  readonly v: 1;
  readonly sceneKey: string;
  readonly source: SourceRef;
  readonly currentVersion: string | null;
  readonly seenBy: string;
  readonly at: number;
}

/**
 * Mark a scene superseded: its source no longer has the version of its key.
 * Create-only, so the first tile job to notice writes it and every later one
 * finds it `already-present` (success). The mosaic sweep closes such a scene
 * out instead of waiting for tiles that can never come.
 */
export async function markSceneSuperseded(
  backend: Backend,
  sceneKey: string,
  source: SourceRef,
  jobKey: string,
  error: SourceChangedError,
): Promise<'written' | 'already-present'> {
  const record: SupersededRecord = {
    v: 1,
    sceneKey,
    source,
    currentVersion: error.currentVersion ?? null,
    seenBy: jobKey,
    at: backend.clock.now(),
  };
  const put = await backend.outputs.putIfAbsent(sceneLifecycleKeys.superseded(sceneKey), new TextEncoder().encode(JSON.stringify(record)), {
    contentType: 'application/json',
  });
  if (put.kind === 'written') {
    backend.telemetry.log('WARN', 'scene-superseded', {
      sceneKey,
      source: `${source.bucket}/${source.key}`,
      jobKey,
      current: error.currentVersion,
    });
  }
  return put.kind;
}

/** Whether a scene carries the superseded tombstone. */
export async function isSceneSuperseded(store: ObjectStore, sceneKey: string): Promise<boolean> {
  return (await store.head(sceneLifecycleKeys.superseded(sceneKey))) !== undefined;
}
