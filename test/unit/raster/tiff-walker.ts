/**
 * A deliberately separate, minimal reader of little-endian classic TIFF
 * structure for tests: it checks what shared/raster/ writes without using
 * shared/raster/'s own reader, and ports the layout rules of GDAL's
 * validate_cloud_optimized_geotiff.py.
 */

export interface WalkedIfd {
  readonly offset: number;
  readonly tags: ReadonlyMap<number, readonly number[] | string>;
}

const SIZES: Record<number, number> = { 1: 1, 2: 1, 3: 2, 4: 4, 7: 1, 11: 4, 12: 8, 16: 8 };

export function walkTiff(bytes: Uint8Array): { firstIfd: number; ifds: WalkedIfd[] } {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes[0] !== 0x49 || bytes[1] !== 0x49 || dv.getUint16(2, true) !== 42) throw new Error('not a little-endian classic TIFF');
  const firstIfd = dv.getUint32(4, true);
  const ifds: WalkedIfd[] = [];
  for (let off = firstIfd; off !== 0; ) {
    const n = dv.getUint16(off, true);
    const tags = new Map<number, readonly number[] | string>();
    for (let i = 0; i < n; i++) {
      const e = off + 2 + i * 12;
      const tag = dv.getUint16(e, true);
      const type = dv.getUint16(e + 2, true);
      const count = dv.getUint32(e + 4, true);
      const size = (SIZES[type] ?? 1) * count;
      const at = size <= 4 ? e + 8 : dv.getUint32(e + 8, true);
      if (type === 2) {
        tags.set(tag, new TextDecoder().decode(bytes.subarray(at, at + count)).replace(/\0$/, ''));
        continue;
      }
      const values: number[] = [];
      for (let k = 0; k < count; k++) {
        const p = at + k * (SIZES[type] ?? 1);
        if (type === 3) values.push(dv.getUint16(p, true));
        else if (type === 4) values.push(dv.getUint32(p, true));
        else if (type === 12) values.push(dv.getFloat64(p, true));
        else if (type === 11) values.push(dv.getFloat32(p, true));
        else values.push(bytes[p] as number);
      }
      tags.set(tag, values);
    }
    ifds.push({ offset: off, tags });
    off = dv.getUint32(off + 2 + n * 12, true);
  }
  return { firstIfd, ifds };
}

function nums(ifd: WalkedIfd, tag: number): readonly number[] {
  const v = ifd.tags.get(tag);
  if (!Array.isArray(v)) throw new Error(`IFD at ${ifd.offset} has no numeric tag ${tag}`);
  return v;
}

/**
 * The errors GDAL's COG validator (with --full-check) would report, as plain
 * sentences; an empty list means the file is a valid COG.
 */
export function cogLayoutErrors(bytes: Uint8Array): string[] {
  const errors: string[] = [];
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const { firstIfd, ifds } = walkTiff(bytes);
  const main = ifds[0];
  if (!main) return ['no IFD'];
  const text = new TextDecoder('latin1').decode(bytes.subarray(8, 8 + 43));
  let expectedIfd = 8;
  let leader = false;
  let trailer = false;
  let rowMajor = false;
  if (text.startsWith('GDAL_STRUCTURAL_METADATA_SIZE=')) {
    const size = Number(text.slice(30, 36));
    const md = new TextDecoder('latin1').decode(bytes.subarray(8 + 43, 8 + 43 + size));
    rowMajor = md.includes('BLOCK_ORDER=ROW_MAJOR');
    leader = md.includes('BLOCK_LEADER=SIZE_AS_UINT4');
    trailer = md.includes('BLOCK_TRAILER=LAST_4_BYTES_REPEATED');
    if (md.includes('KNOWN_INCOMPATIBLE_EDITION=YES')) errors.push('KNOWN_INCOMPATIBLE_EDITION=YES is declared in the file');
    expectedIfd += 43 + size;
    expectedIfd += expectedIfd % 2;
  }
  if (firstIfd !== expectedIfd) errors.push(`the main IFD is at ${firstIfd}, not ${expectedIfd}`);
  const width = (i: WalkedIfd) => nums(i, 256)[0] as number;
  const height = (i: WalkedIfd) => nums(i, 257)[0] as number;
  for (let i = 1; i < ifds.length; i++) {
    const prev = ifds[i - 1] as WalkedIfd;
    const ovr = ifds[i] as WalkedIfd;
    if (width(ovr) > width(prev) || height(ovr) > height(prev)) errors.push(`overview ${i - 1} is larger than the level before it`);
    if (ovr.offset < prev.offset) errors.push(`the IFD of overview ${i - 1} comes before the one of the level before it`);
    if ((nums(ovr, 254)[0] ?? 0) !== 1) errors.push(`overview ${i - 1} is not marked reduced-resolution`);
  }
  const firstBlock = ifds.map((i) => nums(i, 324)[0] as number);
  const last = ifds.length - 1;
  if ((firstBlock[last] as number) < (ifds[last] as WalkedIfd).offset)
    errors.push('the first block of the smallest level comes before its IFD');
  for (let i = last - 1; i >= 0; i--) {
    if ((firstBlock[i] as number) < (firstBlock[i + 1] as number))
      errors.push(`the data of level ${i} comes before the data of level ${i + 1}`);
  }
  ifds.forEach((ifd, level) => {
    if (!ifd.tags.has(322)) errors.push(`level ${level} is not tiled`);
    const offsets = nums(ifd, 324);
    const counts = nums(ifd, 325);
    let lastOffset = 0;
    offsets.forEach((off, k) => {
      const count = counts[k] as number;
      if (rowMajor && off < lastOffset) errors.push(`level ${level}: block ${k} comes before the block before it`);
      if (leader && dv.getUint32(off - 4, true) !== count)
        errors.push(`level ${level}: block ${k} leader says ${dv.getUint32(off - 4, true)}, not ${count}`);
      if (trailer && count >= 4 && dv.getUint32(off + count - 4, true) !== dv.getUint32(off + count, true)) {
        errors.push(`level ${level}: block ${k} trailer does not repeat its last 4 bytes`);
      }
      if (off + count + (trailer ? 4 : 0) > bytes.byteLength) errors.push(`level ${level}: block ${k} runs past the end of the file`);
      lastOffset = off;
    });
  });
  // Every IFD and tag value must precede the first byte of image data (LAYOUT=IFDS_BEFORE_DATA).
  const dataStart = Math.min(...ifds.flatMap((i) => nums(i, 324))) - (leader ? 4 : 0);
  for (const ifd of ifds) if (ifd.offset > dataStart) errors.push(`the IFD at ${ifd.offset} is after the image data`);
  return errors;
}

/**
 * A copy of a little-endian classic TIFF with one inline SHORT or LONG tag of
 * the first IFD set to `value`: how tests make layouts no writer at hand produces.
 */
export function patchTag(bytes: Uint8Array, tag: number, value: number): Uint8Array {
  const out = bytes.slice();
  const dv = new DataView(out.buffer);
  const ifd = dv.getUint32(4, true);
  const n = dv.getUint16(ifd, true);
  for (let i = 0; i < n; i++) {
    const e = ifd + 2 + i * 12;
    if (dv.getUint16(e, true) !== tag) continue;
    const type = dv.getUint16(e + 2, true);
    if (type === 3) dv.setUint16(e + 8, value, true);
    else if (type === 4) dv.setUint32(e + 8, value, true);
    else throw new Error(`tag ${tag} is not an inline SHORT or LONG`);
    return out;
  }
  throw new Error(`tag ${tag} is not in the first IFD`);
}
