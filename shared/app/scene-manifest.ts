import { InvalidEventError } from '../domain/errors.js';
import type { ProcessingParams, SourceRef } from '../domain/job-key.js';
import { outputKeys } from '../domain/job-key.js';
import type { TileGrid } from '../domain/tile-grid.js';
import type { ObjectStore } from '../ports/object-store.port.js';

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
}

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
