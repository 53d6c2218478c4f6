import type { ObjectStore, ReadPin } from '../ports/object-store.port.js';
import { openGeoTiff, type RasterSource } from '../raster/index.js';

/**
 * Opened sources, per object store, keyed by key and read pin (version and
 * handle). A warm function instance processes many windows of one scene:
 * parsing the header once saves one or two range reads per tile. Bounded: a
 * few scenes at most.
 *
 * Why the pin and not the key alone: a cached header holds byte offsets. If
 * the object is overwritten, a header cached for the old version must never
 * steer reads into the new bytes (DEFLATE: "block corrupt"; uncompressed:
 * silently wrong pixels). Each cached source reads with its own pin, so its
 * block reads either come from the version it parsed or throw
 * SourceChangedError; a new version is a different entry with its own header.
 */
const MAX_OPEN = 4;
const cache = new WeakMap<ObjectStore, Map<string, Promise<RasterSource>>>();

export function openSourceCached(store: ObjectStore, key: string, pin: ReadPin): Promise<RasterSource> {
  let perStore = cache.get(store);
  if (!perStore) {
    perStore = new Map();
    cache.set(store, perStore);
  }
  const id = JSON.stringify([key, pin.version, pin.handle ?? null]);
  const hit = perStore.get(id);
  if (hit) {
    perStore.delete(id);
    perStore.set(id, hit); // most recently used last
    return hit;
  }
  const opened = openGeoTiff(store, key, { pin });
  perStore.set(id, opened);
  opened.catch(() => perStore.delete(id));
  while (perStore.size > MAX_OPEN) {
    const oldest = perStore.keys().next().value as string;
    perStore.delete(oldest);
  }
  return opened;
}
