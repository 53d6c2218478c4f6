import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SourceRef } from '../../shared/domain/job-key.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { SENTINEL_LIKE_SCENE, writeSyntheticScene } from '../../shared/raster/index.js';

export interface SceneSpec {
  readonly width: number;
  readonly height: number;
  readonly seed?: number;
  /** Band names, in band order (default B04, B08); one name writes a band file, as Sentinel-2 publishes them. */
  readonly bands?: readonly string[];
  /** Pixel size in metres (default the Sentinel-like 10 m). */
  readonly pixelSize?: number;
}

/** Writes a small synthetic B04/B08 scene (EPSG:32631) and returns its bytes. */
export async function syntheticSceneBytes(spec: SceneSpec): Promise<Uint8Array> {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-scene-'));
  const path = join(dir, 'scene.tif');
  try {
    await writeSyntheticScene(path, {
      width: spec.width,
      height: spec.height,
      ...SENTINEL_LIKE_SCENE,
      ...(spec.bands === undefined ? {} : { bands: spec.bands }),
      ...(spec.pixelSize === undefined ? {} : { pixelSize: spec.pixelSize }),
      seed: spec.seed ?? 7,
    });
    const { readFile } = await import('node:fs/promises');
    return new Uint8Array(await readFile(path));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Uploads a synthetic scene to any ObjectStore, returning the SourceRef a trigger would see. */
export async function putSyntheticScene(store: ObjectStore, bucket: string, key: string, spec: SceneSpec): Promise<SourceRef> {
  const put = await store.putIfAbsent(key, await syntheticSceneBytes(spec));
  const version = put.kind === 'written' ? put.version : (await store.head(key))?.version;
  if (!version) throw new Error(`could not stage ${key}`);
  return { bucket, key, versionToken: version };
}
