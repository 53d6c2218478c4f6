/**
 * A least-recently-used cache of decoded blocks, bounded in bytes (not in
 * entries): a 512 x 512 float64 block weighs 2 MiB, a 256 x 256 uint8 one
 * 64 KiB, and only bytes say how much memory a worker really holds.
 */
export class BlockCache<V extends { readonly byteLength: number }> {
  private readonly entries = new Map<number, V>();
  private bytes = 0;

  /** @param capacityBytes 0 disables caching. */
  constructor(readonly capacityBytes: number) {
    if (!Number.isFinite(capacityBytes) || capacityBytes < 0) {
      throw new RangeError(`block cache capacity must be a non-negative number of bytes, got ${capacityBytes}`);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  get byteLength(): number {
    return this.bytes;
  }

  get(key: number): V | undefined {
    const v = this.entries.get(key);
    if (v !== undefined) {
      // Map keeps insertion order: re-inserting marks the entry most recently used.
      this.entries.delete(key);
      this.entries.set(key, v);
    }
    return v;
  }

  /** Stores a block, evicting the least recently used ones; a block larger than the whole cache is not kept. */
  set(key: number, value: V): void {
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.bytes -= old.byteLength;
    }
    if (value.byteLength > this.capacityBytes) return;
    this.entries.set(key, value);
    this.bytes += value.byteLength;
    for (const [k, v] of this.entries) {
      if (this.bytes <= this.capacityBytes) break;
      this.entries.delete(k);
      this.bytes -= v.byteLength;
    }
  }

  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }
}
