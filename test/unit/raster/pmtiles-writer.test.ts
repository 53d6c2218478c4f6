import { gunzipSync } from 'node:zlib';
import { PMTiles, tileIdToZxy as readerTileIdToZxy, zxyToTileId as readerZxyToTileId, type Source } from 'pmtiles';
import { describe, expect, it } from 'vitest';
import { gzip } from '../../../shared/raster/codecs.js';
import {
  PMTILES_HEADER_BYTES,
  PMTILES_ROOT_LIMIT,
  type PmtilesHeaderFields,
  PmtilesWriteError,
  PmtilesWriter,
  serializeDirectory,
  tileIdToZxy,
  zxyToTileId,
} from '../../../shared/raster/pmtiles-writer.js';

// Issue 26 section 3: Tessera's own PMTiles v3 writer, read back by the `pmtiles` npm reader (every tile's bytes, the
// metadata, the header). go-pmtiles' `verify` runs on archives of a real run in test/e2e/pmtiles-archive.test.ts.

/** The `pmtiles` reader over bytes in memory. */
function reader(bytes: Uint8Array): PMTiles {
  const source: Source = {
    getKey: () => 'memory',
    getBytes: async (offset, length) => ({ data: bytes.slice(offset, offset + length).buffer }),
  };
  return new PMTiles(source);
}

const FIELDS: PmtilesHeaderFields = {
  tileType: 'PNG',
  minZoom: 0,
  maxZoom: 3,
  bounds: [-10.5, 40.25, 12.125, 55.5],
  center: [1.25, 47.5, 2],
};

/** Distinct tile bytes: a PNG signature (as a real tile starts) and the tile's name, padded to `length`. */
function tile(name: string, length = 40): Uint8Array {
  const out = new Uint8Array(length);
  out.set([0x89, 0x50, 0x4e, 0x47]);
  out.set(new TextEncoder().encode(name).subarray(0, length - 4), 4);
  return out;
}

/** Every tile of zooms 0-3 (85), some sharing bytes: the sea (one content) and a pair of duplicates far apart. */
function pyramid(): Map<string, Uint8Array> {
  const tiles = new Map<string, Uint8Array>();
  const sea = tile('sea', 64);
  for (let z = 0; z <= 3; z++) {
    for (let x = 0; x < 2 ** z; x++) {
      for (let y = 0; y < 2 ** z; y++) {
        const land = z < 2 || x < 2 ** z / 2;
        tiles.set(`${z}/${x}/${y}`, land ? tile(`${z}/${x}/${y}`, 30 + ((x * 7 + y * 3) % 50)) : sea);
      }
    }
  }
  const twin = tile('twin', 33);
  tiles.set('1/0/0', twin);
  tiles.set('3/1/6', twin);
  return tiles;
}

function build(tiles: Map<string, Uint8Array>, fields: PmtilesHeaderFields = FIELDS, metadata: Record<string, unknown> = { name: 'test' }) {
  const ordered = [...tiles].map(([zxy, bytes]) => {
    const [z, x, y] = zxy.split('/').map(Number) as [number, number, number];
    return { id: zxyToTileId(z, x, y), bytes };
  });
  ordered.sort((a, b) => a.id - b.id);
  const w = new PmtilesWriter(fields, metadata, {
    maxTiles: ordered.length,
    maxTileBytes: ordered.reduce((n, t) => n + t.bytes.byteLength, 0),
  });
  for (const t of ordered) w.add(t.id, t.bytes);
  return w.finish();
}

describe('PMTiles TileIDs', () => {
  it('are the specification table’s', () => {
    expect([zxyToTileId(0, 0, 0), zxyToTileId(1, 0, 0), zxyToTileId(1, 0, 1), zxyToTileId(1, 1, 1), zxyToTileId(1, 1, 0)]).toEqual([
      0, 1, 2, 3, 4,
    ]);
    expect(zxyToTileId(2, 0, 0)).toBe(5);
    expect(zxyToTileId(12, 3423, 1763)).toBe(19_078_479);
  });

  it('agree with the pmtiles reader’s both ways, up to zoom 26', () => {
    let seed = 12345;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 2000; i++) {
      const z = Math.floor(next() * 27);
      const x = Math.floor(next() * 2 ** z);
      const y = Math.floor(next() * 2 ** z);
      const id = zxyToTileId(z, x, y);
      expect(id).toBe(readerZxyToTileId(z, x, y));
      expect(tileIdToZxy(id)).toEqual({ z, x, y });
      expect(readerTileIdToZxy(id)).toEqual([z, x, y]);
    }
  });

  it('refuse a tile outside its zoom', () => {
    expect(() => zxyToTileId(3, 8, 0)).toThrow(PmtilesWriteError);
    expect(() => zxyToTileId(27, 0, 0)).toThrow(/zoom 27/);
  });
});

describe('PmtilesWriter', () => {
  it('writes an archive the pmtiles reader reads back: every tile’s bytes, the metadata, the header', async () => {
    const tiles = pyramid();
    const metadata = { name: 'test', description: 'a pyramid', 'tessera:rescale': [-1, 1] };
    const { bytes, stats } = build(tiles, FIELDS, metadata);
    const archive = reader(bytes);
    for (const [zxy, want] of tiles) {
      const [z, x, y] = zxy.split('/').map(Number) as [number, number, number];
      const got = await archive.getZxy(z, x, y);
      expect(got === undefined ? undefined : Buffer.from(got.data), zxy).toEqual(Buffer.from(want));
    }
    expect(await archive.getZxy(4, 0, 0)).toBeUndefined();
    expect(await archive.getMetadata()).toEqual(metadata);
    const h = await archive.getHeader();
    expect(h).toMatchObject({
      specVersion: 3,
      rootDirectoryOffset: PMTILES_HEADER_BYTES,
      leafDirectoryLength: 0,
      clustered: true,
      internalCompression: 2,
      tileCompression: 1,
      tileType: 2,
      minZoom: 0,
      maxZoom: 3,
      minLon: -10.5,
      minLat: 40.25,
      maxLon: 12.125,
      maxLat: 55.5,
      centerZoom: 2,
      centerLon: 1.25,
      centerLat: 47.5,
      numAddressedTiles: 85,
      numTileEntries: stats.tileEntries,
      numTileContents: stats.tileContents,
    });
    expect(h.tileDataOffset + (h.tileDataLength ?? Number.NaN)).toBe(bytes.byteLength);
  });

  it('stores each content once (SHA-256) and a run of the same content as one entry', () => {
    const tiles = pyramid();
    const { stats } = build(tiles);
    // 85 tiles; the sea is one content for 32 + 8 tiles, the twins one for two.
    const distinct = new Set([...tiles.values()].map((b) => Buffer.from(b).toString('hex'))).size;
    expect(stats.addressedTiles).toBe(85);
    expect(stats.tileContents).toBe(distinct);
    expect(stats.tileDataBytes).toBe([...new Set([...tiles.values()])].reduce((n, b) => n + b.byteLength, 0));
    // Sea tiles next to each other on the Hilbert curve share an entry: fewer entries than tiles.
    expect(stats.tileEntries).toBeLessThan(85);
    expect(stats.tileEntries).toBeGreaterThan(distinct);
  });

  it('gives the same bytes twice, and its gzip has no time, name or operating system in it', () => {
    const a = build(pyramid()).bytes;
    const b = build(pyramid()).bytes;
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
    const z = gzip(new TextEncoder().encode('{"a":1}'), 6);
    expect([...z.subarray(0, 10)]).toEqual([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    expect(gunzipSync(z).toString()).toBe('{"a":1}');
  });

  it('puts entries in leaf directories when the root would pass 16 KiB, and the reader still finds every tile', async () => {
    // 21,845 tiles of zooms 0-7, each of its own bytes and a pseudo-random length: too many entries for the root.
    const tiles = new Map<string, Uint8Array>();
    let seed = 7;
    const length = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return 12 + (seed % 1000);
    };
    for (let z = 0; z <= 7; z++)
      for (let x = 0; x < 2 ** z; x++) for (let y = 0; y < 2 ** z; y++) tiles.set(`${z}/${x}/${y}`, tile(`${z}/${x}/${y}`, length()));
    const { bytes, stats } = build(tiles, { ...FIELDS, maxZoom: 7 });
    expect(stats.leafDirectories).toBeGreaterThan(1);
    const archive = reader(bytes);
    const h = await archive.getHeader();
    expect(h.rootDirectoryOffset + h.rootDirectoryLength).toBeLessThanOrEqual(PMTILES_ROOT_LIMIT);
    expect(h.leafDirectoryLength).toBeGreaterThan(0);
    expect(h.numAddressedTiles).toBe(21_845);
    let i = 0;
    for (const [zxy, want] of tiles) {
      if (i++ % 53 !== 0 && !zxy.startsWith('7/127/')) continue;
      const [z, x, y] = zxy.split('/').map(Number) as [number, number, number];
      const got = await archive.getZxy(z, x, y);
      expect(got === undefined ? undefined : Buffer.from(got.data), zxy).toEqual(Buffer.from(want));
    }
  });

  it('serialises a directory as the specification does: count, TileID deltas, run lengths, lengths, offsets (0 when contiguous)', () => {
    const dir = serializeDirectory([
      { tileId: 5, offset: 0, length: 10, runLength: 1 },
      { tileId: 42, offset: 10, length: 300, runLength: 2 },
      { tileId: 69, offset: 0, length: 10, runLength: 1 },
    ]);
    // 3 | 5 37 27 | 1 2 1 | 10 300(0xac 0x02) 10 | 1 (offset 0 + 1: the first entry is not after an earlier one) 0 1
    expect([...dir]).toEqual([3, 5, 37, 27, 1, 2, 1, 10, 0xac, 0x02, 10, 1, 0, 1]);
  });

  it('refuses what would make an invalid archive', () => {
    const w = () => new PmtilesWriter(FIELDS, {}, { maxTiles: 4, maxTileBytes: 1000 });
    const a = w();
    a.add(zxyToTileId(1, 0, 0), tile('a'));
    expect(() => a.add(zxyToTileId(0, 0, 0), tile('b'))).toThrow(/ascending TileID/);
    expect(() => w().add(zxyToTileId(1, 0, 0), new Uint8Array(0))).toThrow(/empty/);
    expect(() => w().add(zxyToTileId(4, 0, 0), tile('c'))).toThrow(/outside the archive's 0-3/);
    expect(() => w().finish()).toThrow(/at least one tile/);
    expect(() => new PmtilesWriter({ ...FIELDS, bounds: [10, 40, -10, 50] }, {}, { maxTiles: 1, maxTileBytes: 1 })).toThrow(/west < east/);
    expect(() => new PmtilesWriter({ ...FIELDS, center: [0, 45, 5] }, {}, { maxTiles: 1, maxTileBytes: 1 })).toThrow(/center's zoom 5/);
  });
});
