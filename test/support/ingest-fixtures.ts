import { syntheticSceneBytes } from './local-scene.js';

/**
 * Artefacts for the ingest tests: a valid tiled GeoTIFF (the synthetic scene),
 * and hand-built TIFFs that validation must refuse, each for one reason.
 */

/** A valid, internally tiled, 2-band GeoTIFF with a CRS (EPSG:32631); `seed` changes its bytes. */
export function validArtefact(seed = 7, width = 64, height = 48): Promise<Uint8Array> {
  return syntheticSceneBytes({ width, height, seed });
}

/**
 * A one-band uint8 TIFF stored in strips (RowsPerStrip = height), uncompressed.
 * With `geo` it carries a pixel scale, a tie point and GeoKeys for EPSG:32631
 * (a georeferenced but untiled raster: `not-tiled`); without, no CRS (`no-crs`).
 */
export function strippedTiff(options: { geo: boolean; width?: number; height?: number }): Uint8Array {
  const w = options.width ?? 32;
  const h = options.height ?? 16;
  const SHORT = 3;
  const LONG = 4;
  const DOUBLE = 12;
  type Entry = { tag: number; type: number; values: number[] };
  const entries: Entry[] = [
    { tag: 256, type: SHORT, values: [w] },
    { tag: 257, type: SHORT, values: [h] },
    { tag: 258, type: SHORT, values: [8] },
    { tag: 259, type: SHORT, values: [1] },
    { tag: 262, type: SHORT, values: [1] },
    { tag: 273, type: LONG, values: [0] }, // StripOffsets: patched below
    { tag: 277, type: SHORT, values: [1] },
    { tag: 278, type: SHORT, values: [h] },
    { tag: 279, type: LONG, values: [w * h] },
  ];
  if (options.geo) {
    entries.push(
      { tag: 33550, type: DOUBLE, values: [10, 10, 0] },
      { tag: 33922, type: DOUBLE, values: [0, 0, 0, 500_000, 5_000_000, 0] },
      { tag: 34735, type: SHORT, values: [1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32631] },
    );
  }
  const size = (t: number) => (t === DOUBLE ? 8 : t === LONG ? 4 : 2);
  const ifdBytes = 2 + entries.length * 12 + 4;
  let extra = 8 + ifdBytes;
  const extras: { at: number; e: Entry }[] = [];
  for (const e of entries) {
    const bytes = e.values.length * size(e.type);
    if (bytes > 4) {
      extras.push({ at: extra, e });
      extra += bytes;
    }
  }
  const dataAt = extra;
  (entries.find((e) => e.tag === 273) as Entry).values[0] = dataAt;
  const buf = Buffer.alloc(dataAt + w * h);
  buf.write('II', 0, 'latin1');
  buf.writeUInt16LE(42, 2);
  buf.writeUInt32LE(8, 4);
  buf.writeUInt16LE(entries.length, 8);
  entries.forEach((e, i) => {
    const at = 10 + i * 12;
    buf.writeUInt16LE(e.tag, at);
    buf.writeUInt16LE(e.type, at + 2);
    buf.writeUInt32LE(e.values.length, at + 4);
    const out = extras.find((x) => x.e === e);
    if (out) buf.writeUInt32LE(out.at, at + 8);
    else if (e.type === LONG) buf.writeUInt32LE(e.values[0] as number, at + 8);
    else
      e.values.forEach((v, j) => {
        buf.writeUInt16LE(v, at + 8 + j * 2);
      });
  });
  buf.writeUInt32LE(0, 10 + entries.length * 12);
  for (const { at, e } of extras) {
    e.values.forEach((v, j) => {
      if (e.type === DOUBLE) buf.writeDoubleLE(v, at + j * 8);
      else if (e.type === LONG) buf.writeUInt32LE(v, at + j * 4);
      else buf.writeUInt16LE(v, at + j * 2);
    });
  }
  for (let i = 0; i < w * h; i++) buf[dataAt + i] = i % 251;
  return new Uint8Array(buf);
}

/** Bytes that are not a TIFF at all. */
export const notARaster = (): Uint8Array => new TextEncoder().encode('this is a README, not a GeoTIFF\n'.repeat(8));

/** A valid artefact cut short: the header parses, the last blocks are missing. */
export async function truncatedArtefact(): Promise<Uint8Array> {
  const full = await validArtefact(11);
  return full.slice(0, Math.floor(full.byteLength * 0.6));
}
