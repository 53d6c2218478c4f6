import type { ObjectStore } from '../ports/object-store.port.js';
import { openGeoTiff, type RasterSource } from '../raster/index.js';

/**
 * Opened sources, per object store, keyed by bucket/key@version. A warm
 * function instance processes many windows of one scene: parsing the header
 * once saves one or two range reads per tile. Bounded: a few scenes at most.
 */
const MAX_OPEN = 4;
const cache = new WeakMap<ObjectStore, Map<string, Promise<RasterSource>>>();

export function openSourceCached(store: ObjectStore, key: string, version: string): Promise<RasterSource> {
  let perStore = cache.get(store);
  if (!perStore) {
    perStore = new Map();
    cache.set(store, perStore);
  }
  const id = `${key}@${version}`;
  const hit = perStore.get(id);
  if (hit) {
    perStore.delete(id);
    perStore.set(id, hit); // most recently used last
    return hit;
  }
  const opened = openGeoTiff(store, key);
  perStore.set(id, opened);
  opened.catch(() => perStore.delete(id));
  while (perStore.size > MAX_OPEN) {
    const oldest = perStore.keys().next().value as string;
    perStore.delete(oldest);
  }
  return opened;
}
