import { createHash } from 'node:crypto';
import { canonicalJson } from '../domain/canonical-json.js';
import { gzip } from './codecs.js';

/**
 * A writer of PMTiles version 3 archives (https://github.com/protomaps/PMTiles/blob/main/spec/v3/spec.md), written
 * here from the specification rather than taken from a library: the archive must be the same bytes on every backend and
 * every re-run (it is written create-only, and a duplicate assembly must find its own bytes in place), so every choice
 * a writer may make is fixed here and documented (docs/web-maps.md, "PMTiles archive"); the npm package `pmtiles` is a
 * reader only, and go-pmtiles is a Go program. Readers used to check it: the `pmtiles` npm reader and
 * `go-pmtiles verify` (test/unit/raster/pmtiles-writer.test.ts, test/e2e/pmtiles-archive.test.ts).
 *
 * Layout, in the order the specification recommends: the 127-byte header, the root directory, the JSON metadata, the
 * leaf directories, the tile data. What this writer fixes:
 * - tiles are added in ascending TileID (the Hilbert order of the specification), and their bytes are laid out in
 *   that order: the archive is clustered;
 * - tile contents are deduplicated by SHA-256: a tile whose bytes were seen before points at the first copy;
 * - consecutive TileIDs with the same content are one entry with a run length (a blank sea of identical tiles is one
 *   entry per row of the Hilbert curve);
 * - directories and metadata are gzip (internal compression 2) by Tessera's deterministic DEFLATE (codecs.ts `gzip`);
 *   tiles are stored as they are (tile compression 1, none: PNG, JPEG and WebP are compressed images);
 * - the root directory holds every entry when it fits the first 16,384 bytes with the header; otherwise entries go
 *   to leaf directories of {@link FIRST_LEAF_SIZE} entries, doubled until the root (one entry per leaf) fits. One
 *   level of leaves, as the specification advises;
 * - the metadata is canonical JSON (RFC 8785), so equal metadata is equal bytes.
 */

/** The tile types this writer stores (the header's tile type: 2 PNG, 3 JPEG, 4 WebP). */
export type PmtilesTileType = 'PNG' | 'JPEG' | 'WEBP';
const TILE_TYPE_CODE: Readonly<Record<PmtilesTileType, number>> = { PNG: 2, JPEG: 3, WEBP: 4 };

export const PMTILES_HEADER_BYTES = 127;
/** The header and the root directory must lie within the first 16,384 bytes. */
export const PMTILES_ROOT_LIMIT = 16_384;
/** Entries per leaf directory to start from; doubled until the root directory fits. */
export const FIRST_LEAF_SIZE = 4096;
/** The highest zoom whose TileIDs this writer computes exactly (4^27 passes 2^53). */
export const PMTILES_MAX_ZOOM = 26;
/** The media type of an archive (the specification's recommendation). */
export const PMTILES_CONTENT_TYPE = 'application/vnd.pmtiles';
/** DEFLATE level of directories and metadata: zlib's default, 6. */
const GZIP_LEVEL = 6;

/** A malformed archive request: tiles out of order, a zoom out of range, an empty tile. A bug of the caller, never retryable. */
export class PmtilesWriteError extends Error {
  constructor(message: string) {
    super(`[pmtiles] ${message}`);
    this.name = 'PmtilesWriteError';
  }
}

/**
 * The TileID of tile (z, x, y): the tiles of every zoom below z, (4^z - 1) / 3, plus the tile's position on the
 * Hilbert curve through the 2^z x 2^z tiles of zoom z (the specification's table: (1, 0, 1) is 2, (12, 3423, 1763)
 * is 19,078,479).
 */
export function zxyToTileId(z: number, x: number, y: number): number {
  if (!Number.isInteger(z) || z < 0 || z > PMTILES_MAX_ZOOM) throw new PmtilesWriteError(`zoom ${z} is outside 0-${PMTILES_MAX_ZOOM}`);
  const n = 2 ** z;
  if (!Number.isInteger(x) || !Number.isInteger(y) || x < 0 || y < 0 || x >= n || y >= n)
    throw new PmtilesWriteError(`tile ${z}/${x}/${y} is outside zoom ${z}, whose tiles are 0-${n - 1} each way`);
  let d = 0;
  for (let s = n / 2; s >= 1; s /= 2) {
    // x and y stay below 2^26, so 32-bit bit operations are exact.
    const rx = (x & s) === 0 ? 0 : 1;
    const ry = (y & s) === 0 ? 0 : 1;
    d += s * s * ((3 * rx) ^ ry);
    // Rotate the quadrant so the curve's next level runs the right way (the classic xy2d).
    if (ry === 0) {
      if (rx === 1) {
        x = n - 1 - x;
        y = n - 1 - y;
      }
      [x, y] = [y, x];
    }
  }
  return (4 ** z - 1) / 3 + d;
}

/** The zoom and tile of a TileID: the inverse of {@link zxyToTileId}. */
export function tileIdToZxy(id: number): { z: number; x: number; y: number } {
  if (!Number.isSafeInteger(id) || id < 0) throw new PmtilesWriteError(`TileID ${id} is not a non-negative integer`);
  let z = 0;
  let base = 0;
  while (base + 4 ** z <= id) {
    base += 4 ** z;
    z++;
  }
  const n = 2 ** z;
  let t = id - base;
  let x = 0;
  let y = 0;
  for (let s = 1; s < n; s *= 2) {
    // t may pass 2^32: arithmetic, not bit operations.
    const rx = Math.floor(t / 2) % 2;
    const ry = (t % 2) ^ rx;
    if (ry === 0) {
      if (rx === 1) {
        x = s - 1 - x;
        y = s - 1 - y;
      }
      [x, y] = [y, x];
    }
    x += s * rx;
    y += s * ry;
    t = Math.floor(t / 4);
  }
  return { z, x, y };
}

/** One directory entry: a tile run (`runLength` >= 1) or a leaf directory (`runLength` 0). */
export interface PmtilesEntry {
  readonly tileId: number;
  readonly offset: number;
  readonly length: number;
  readonly runLength: number;
}

/** A little-endian base-128 varint (protobuf's), for numbers up to 2^53. */
function pushVarint(out: number[], value: number): void {
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

/**
 * A directory as the specification serialises it, before compression: the entry count, then the TileIDs as deltas,
 * the run lengths, the lengths, and the offsets (0 where an entry starts where the one before it ended, else offset + 1).
 */
export function serializeDirectory(entries: readonly PmtilesEntry[]): Uint8Array {
  if (entries.length === 0) throw new PmtilesWriteError('a directory must hold at least one entry');
  const out: number[] = [];
  pushVarint(out, entries.length);
  let last = 0;
  for (const e of entries) {
    pushVarint(out, e.tileId - last);
    last = e.tileId;
  }
  for (const e of entries) pushVarint(out, e.runLength);
  for (const e of entries) pushVarint(out, e.length);
  let end = -1;
  for (const e of entries) {
    pushVarint(out, e.offset === end ? 0 : e.offset + 1);
    end = e.offset + e.length;
  }
  return Uint8Array.from(out);
}

/** What the header says about the archive besides where its sections are. */
export interface PmtilesHeaderFields {
  readonly tileType: PmtilesTileType;
  readonly minZoom: number;
  readonly maxZoom: number;
  /** [west, south, east, north] in degrees; west < east (an extent across the antimeridian is given as -180 to 180). */
  readonly bounds: readonly [number, number, number, number];
  /** [longitude, latitude, zoom]: where a reader may open the map. */
  readonly center: readonly [number, number, number];
}

/** The counts an archive's header records, and its size. */
export interface PmtilesStats {
  /** Tiles the archive answers (the sum of the run lengths). */
  readonly addressedTiles: number;
  /** Directory entries that point at tiles. */
  readonly tileEntries: number;
  /** Distinct tile contents stored. */
  readonly tileContents: number;
  readonly tileDataBytes: number;
  /** Leaf directories (0 when the root holds every entry). */
  readonly leafDirectories: number;
  readonly bytes: number;
}

/**
 * An upper bound of the bytes the directories of `tiles` entries take, gzip included: each entry is at most four
 * varints of 10 bytes; a DEFLATE stream that cannot compress adds 5 bytes per 65,535 and the gzip member 18.
 */
function directoryBound(tiles: number): number {
  const raw = 10 + tiles * 40;
  const leaves = Math.ceil(tiles / FIRST_LEAF_SIZE) + 1;
  return raw + Math.ceil(raw / 65_535) * 5 + leaves * 64 + PMTILES_ROOT_LIMIT;
}

/**
 * Builds one archive from tiles given in ascending TileID. The tile data is copied once into a buffer sized from
 * `maxTileBytes` (the sum of the tiles' sizes, an upper bound: deduplication only shrinks it), with room before it
 * for the header and directories, so {@link finish} returns a view of that buffer without copying the tiles again:
 * the peak is about one archive, not two.
 *
 * @example
 * const w = new PmtilesWriter({ tileType: 'PNG', minZoom: 0, maxZoom: 0, bounds: [-180, -85, 180, 85], center: [0, 0, 0] },
 *   { name: 'demo' }, { maxTiles: 1, maxTileBytes: png.byteLength });
 * w.add(zxyToTileId(0, 0, 0), png);
 * const archive = w.finish();
 */
export class PmtilesWriter {
  private readonly metadata: Uint8Array;
  private readonly buffer: Uint8Array;
  private readonly dataStart: number;
  private dataLength = 0;
  private readonly entries: { tileId: number; offset: number; length: number; runLength: number }[] = [];
  private readonly seen = new Map<string, { offset: number; length: number }>();
  private lastTileId = -1;
  private added = 0;
  private finished = false;

  constructor(
    private readonly fields: PmtilesHeaderFields,
    metadata: Readonly<Record<string, unknown>>,
    private readonly capacity: { readonly maxTiles: number; readonly maxTileBytes: number },
  ) {
    validateFields(fields);
    if (!Number.isSafeInteger(capacity.maxTiles) || capacity.maxTiles <= 0)
      throw new PmtilesWriteError(`maxTiles must be a positive integer, got ${capacity.maxTiles}`);
    if (!Number.isSafeInteger(capacity.maxTileBytes) || capacity.maxTileBytes <= 0)
      throw new PmtilesWriteError(`maxTileBytes must be a positive integer, got ${capacity.maxTileBytes}`);
    this.metadata = gzip(new TextEncoder().encode(canonicalJson(metadata)), GZIP_LEVEL);
    this.dataStart = PMTILES_HEADER_BYTES + this.metadata.byteLength + directoryBound(capacity.maxTiles);
    this.buffer = new Uint8Array(this.dataStart + capacity.maxTileBytes);
  }

  /** Add tile `tileId` (greater than every TileID added before) with its bytes (copied; never empty). */
  add(tileId: number, bytes: Uint8Array): void {
    if (this.finished) throw new PmtilesWriteError('add() after finish()');
    if (!Number.isSafeInteger(tileId) || tileId <= this.lastTileId)
      throw new PmtilesWriteError(`TileID ${tileId} comes after ${this.lastTileId}: tiles must be added in ascending TileID, each once`);
    if (bytes.byteLength === 0) throw new PmtilesWriteError(`tile ${tileId} is empty; a PMTiles entry's length must be greater than 0`);
    const { z } = tileIdToZxy(tileId);
    if (z < this.fields.minZoom || z > this.fields.maxZoom)
      throw new PmtilesWriteError(`tile ${tileId} is of zoom ${z}, outside the archive's ${this.fields.minZoom}-${this.fields.maxZoom}`);
    if (++this.added > this.capacity.maxTiles) throw new PmtilesWriteError(`more than the ${this.capacity.maxTiles} tiles announced`);
    const digest = createHash('sha256').update(bytes).digest('hex');
    let place = this.seen.get(digest);
    if (place === undefined) {
      if (this.dataLength + bytes.byteLength > this.capacity.maxTileBytes)
        throw new PmtilesWriteError(`the tiles pass the ${this.capacity.maxTileBytes} bytes announced`);
      place = { offset: this.dataLength, length: bytes.byteLength };
      this.buffer.set(bytes, this.dataStart + this.dataLength);
      this.dataLength += bytes.byteLength;
      this.seen.set(digest, place);
    }
    const last = this.entries[this.entries.length - 1];
    if (last !== undefined && last.offset === place.offset && last.length === place.length && last.tileId + last.runLength === tileId) {
      last.runLength++;
    } else {
      this.entries.push({ tileId, offset: place.offset, length: place.length, runLength: 1 });
    }
    this.lastTileId = tileId;
  }

  /** The archive's bytes (a view of the writer's buffer) and its counts. */
  finish(): { readonly bytes: Uint8Array; readonly stats: PmtilesStats } {
    if (this.finished) throw new PmtilesWriteError('finish() twice');
    if (this.entries.length === 0) throw new PmtilesWriteError('an archive needs at least one tile');
    this.finished = true;
    const { root, leaves, leafCount } = this.directories();
    const head = PMTILES_HEADER_BYTES + root.byteLength + this.metadata.byteLength + leaves.byteLength;
    const start = this.dataStart - head;
    if (start < 0) throw new PmtilesWriteError('the directories outgrew their bound (a bug of directoryBound)');
    const rootOffset = PMTILES_HEADER_BYTES;
    const metadataOffset = rootOffset + root.byteLength;
    const leafOffset = metadataOffset + this.metadata.byteLength;
    const dataOffset = leafOffset + leaves.byteLength;
    const out = this.buffer.subarray(start, this.dataStart + this.dataLength);
    out.set(root, rootOffset);
    out.set(this.metadata, metadataOffset);
    out.set(leaves, leafOffset);
    const addressedTiles = this.entries.reduce((n, e) => n + e.runLength, 0);
    const stats: PmtilesStats = {
      addressedTiles,
      tileEntries: this.entries.length,
      tileContents: this.seen.size,
      tileDataBytes: this.dataLength,
      leafDirectories: leafCount,
      bytes: out.byteLength,
    };
    writeHeader(out.subarray(0, PMTILES_HEADER_BYTES), this.fields, {
      rootOffset,
      rootLength: root.byteLength,
      metadataOffset,
      metadataLength: this.metadata.byteLength,
      leafOffset,
      leafLength: leaves.byteLength,
      dataOffset,
      dataLength: this.dataLength,
      ...stats,
    });
    return { bytes: out, stats };
  }

  /** The root directory, and the leaf directories when every entry does not fit in the root. */
  private directories(): { root: Uint8Array; leaves: Uint8Array; leafCount: number } {
    const whole = gzip(serializeDirectory(this.entries), GZIP_LEVEL);
    if (PMTILES_HEADER_BYTES + whole.byteLength <= PMTILES_ROOT_LIMIT) return { root: whole, leaves: new Uint8Array(0), leafCount: 0 };
    for (let size = FIRST_LEAF_SIZE; ; size *= 2) {
      const parts: Uint8Array[] = [];
      const rootEntries: PmtilesEntry[] = [];
      let offset = 0;
      for (let i = 0; i < this.entries.length; i += size) {
        const chunk = this.entries.slice(i, i + size);
        const leaf = gzip(serializeDirectory(chunk), GZIP_LEVEL);
        rootEntries.push({ tileId: (chunk[0] as PmtilesEntry).tileId, offset, length: leaf.byteLength, runLength: 0 });
        parts.push(leaf);
        offset += leaf.byteLength;
      }
      const root = gzip(serializeDirectory(rootEntries), GZIP_LEVEL);
      if (PMTILES_HEADER_BYTES + root.byteLength <= PMTILES_ROOT_LIMIT) {
        const leaves = new Uint8Array(offset);
        let at = 0;
        for (const p of parts) {
          leaves.set(p, at);
          at += p.byteLength;
        }
        return { root, leaves, leafCount: parts.length };
      }
    }
  }
}

function validateFields(f: PmtilesHeaderFields): void {
  if (!(f.tileType in TILE_TYPE_CODE)) throw new PmtilesWriteError(`tile type ${JSON.stringify(f.tileType)} is not PNG, JPEG or WEBP`);
  for (const [name, z] of [
    ['minZoom', f.minZoom],
    ['maxZoom', f.maxZoom],
    ['center zoom', f.center[2]],
  ] as const) {
    if (!Number.isInteger(z) || z < 0 || z > PMTILES_MAX_ZOOM) throw new PmtilesWriteError(`${name} ${z} is outside 0-${PMTILES_MAX_ZOOM}`);
  }
  if (f.minZoom > f.maxZoom) throw new PmtilesWriteError(`minZoom ${f.minZoom} is above maxZoom ${f.maxZoom}`);
  if (f.center[2] < f.minZoom || f.center[2] > f.maxZoom)
    throw new PmtilesWriteError(`the center's zoom ${f.center[2]} is outside ${f.minZoom}-${f.maxZoom}`);
  const [w, s, e, n] = f.bounds;
  const lonOk = (v: number) => Number.isFinite(v) && v >= -180 && v <= 180;
  const latOk = (v: number) => Number.isFinite(v) && v >= -90 && v <= 90;
  if (!lonOk(w) || !lonOk(e) || !latOk(s) || !latOk(n) || !(w < e) || !(s < n))
    throw new PmtilesWriteError(`bounds ${JSON.stringify(f.bounds)} are not [west, south, east, north] with west < east and south < north`);
  if (!lonOk(f.center[0]) || !latOk(f.center[1])) throw new PmtilesWriteError(`center ${JSON.stringify(f.center)} is not a position`);
}

/** A coordinate as the header stores it: degrees times 10^7, rounded, as a signed 32-bit integer. */
const e7 = (degrees: number): number => Math.round(degrees * 1e7);

function writeHeader(
  out: Uint8Array,
  f: PmtilesHeaderFields,
  s: {
    readonly rootOffset: number;
    readonly rootLength: number;
    readonly metadataOffset: number;
    readonly metadataLength: number;
    readonly leafOffset: number;
    readonly leafLength: number;
    readonly dataOffset: number;
    readonly dataLength: number;
    readonly addressedTiles: number;
    readonly tileEntries: number;
    readonly tileContents: number;
  },
): void {
  const v = new DataView(out.buffer, out.byteOffset, PMTILES_HEADER_BYTES);
  out.set(new TextEncoder().encode('PMTiles'), 0);
  v.setUint8(7, 3);
  const u64 = (at: number, n: number) => v.setBigUint64(at, BigInt(n), true);
  u64(8, s.rootOffset);
  u64(16, s.rootLength);
  u64(24, s.metadataOffset);
  u64(32, s.metadataLength);
  u64(40, s.leafOffset);
  u64(48, s.leafLength);
  u64(56, s.dataOffset);
  u64(64, s.dataLength);
  u64(72, s.addressedTiles);
  u64(80, s.tileEntries);
  u64(88, s.tileContents);
  v.setUint8(96, 1); // clustered: the tile data is in TileID order
  v.setUint8(97, 2); // internal compression: gzip
  v.setUint8(98, 1); // tile compression: none (the images are compressed)
  v.setUint8(99, TILE_TYPE_CODE[f.tileType]);
  v.setUint8(100, f.minZoom);
  v.setUint8(101, f.maxZoom);
  v.setInt32(102, e7(f.bounds[0]), true);
  v.setInt32(106, e7(f.bounds[1]), true);
  v.setInt32(110, e7(f.bounds[2]), true);
  v.setInt32(114, e7(f.bounds[3]), true);
  v.setUint8(118, f.center[2]);
  v.setInt32(119, e7(f.center[0]), true);
  v.setInt32(123, e7(f.center[1]), true);
}
