import { describe, expect, it } from 'vitest';
import { BlockCache } from '../../../shared/raster/index.js';

const block = (bytes: number) => new Uint8Array(bytes);

describe('BlockCache', () => {
  it('evicts the least recently used blocks once it holds more bytes than its capacity', () => {
    const cache = new BlockCache<Uint8Array>(100);
    cache.set(1, block(40));
    cache.set(2, block(40));
    expect(cache.get(1)).toBeDefined(); // 1 is now the most recently used
    cache.set(3, block(40));
    expect(cache.get(2)).toBeUndefined();
    expect(cache.get(1)).toBeDefined();
    expect(cache.get(3)).toBeDefined();
    expect(cache.byteLength).toBe(80);
    expect(cache.size).toBe(2);
  });

  it('counts bytes, not entries', () => {
    const cache = new BlockCache<Uint8Array>(100);
    for (let i = 0; i < 10; i++) cache.set(i, block(10));
    expect(cache.size).toBe(10);
    cache.set(99, block(55));
    expect(cache.byteLength).toBeLessThanOrEqual(100);
    expect(cache.size).toBe(5);
  });

  it('does not keep a block larger than its whole capacity, nor anything when its capacity is 0', () => {
    const cache = new BlockCache<Uint8Array>(100);
    cache.set(1, block(50));
    cache.set(2, block(101));
    expect(cache.get(2)).toBeUndefined();
    expect(cache.get(1)).toBeDefined();
    const off = new BlockCache<Uint8Array>(0);
    off.set(1, block(1));
    expect(off.size).toBe(0);
  });

  it('replaces a block stored twice without counting it twice', () => {
    const cache = new BlockCache<Uint8Array>(100);
    cache.set(1, block(30));
    cache.set(1, block(60));
    expect(cache.byteLength).toBe(60);
    cache.clear();
    expect(cache.byteLength).toBe(0);
  });

  it('refuses a negative capacity', () => {
    expect(() => new BlockCache(-1)).toThrow(RangeError);
  });
});
