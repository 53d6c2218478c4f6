import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import type { RenderParams } from '../../../shared/domain/render-params.js';
import { colormapTable } from '../../../shared/raster/colormaps.js';
import {
  decodeImage,
  encodeImage,
  encodeRenderedTile,
  IMAGE_CODEC,
  levelOf,
  renderedBands,
  renderPixels,
} from '../../../shared/raster/image-encoder.js';

/**
 * Decode with sharp (libvips): the pixels as a reader of the file gets them, as sRGB (grey is r = g = b), with
 * `channels` the file's own bands (2: grey and alpha, 1: grey) and `stride` the decoded ones.
 */
async function decode(bytes: Uint8Array): Promise<{ data: Buffer; channels: number; stride: number; width: number; height: number }> {
  const { channels } = await sharp(bytes).metadata();
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  return { data, channels: channels as number, stride: info.channels, width: info.width, height: info.height };
}

/** The chunk types of a PNG, in order. */
function pngChunks(bytes: Uint8Array): string[] {
  const b = Buffer.from(bytes);
  expect(b.subarray(1, 4).toString()).toBe('PNG');
  const out: string[] = [];
  for (let at = 8; at < b.length; at += 12 + b.readUInt32BE(at)) out.push(b.toString('latin1', at + 4, at + 8));
  return out;
}

const W = 64;
const H = 32;
const NODATA = -9999;
/** NDVI-like values from -1 (left) to 1 (right); the first 8 columns nodata, and one NaN. */
function tile(): Float32Array {
  const px = new Float32Array(W * H);
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) px[y * W + x] = x < 8 ? NODATA : -1 + (2 * (x - 8)) / (W - 9);
  px[W * 5 + 40] = Number.NaN;
  return px;
}
const masked = (px: Float32Array, k: number) => Number.isNaN(px[k] as number) || px[k] === NODATA;

describe('levelOf: a value to one of 256 levels, as matplotlib Normalize and a colormap lookup', () => {
  it('maps min to 0 and max to 255, and clamps values outside the range to the end levels', () => {
    expect([levelOf(-1, -1, 1), levelOf(1, -1, 1), levelOf(-5, -1, 1), levelOf(7, -1, 1), levelOf(0, -1, 1)]).toEqual([
      0, 255, 0, 255, 128,
    ]);
    expect([levelOf(Number.NEGATIVE_INFINITY, 0, 1), levelOf(Number.POSITIVE_INFINITY, 0, 1)]).toEqual([0, 255]);
  });

  it('is the identity on integers 0-255 with --rescale 0,255, so 8-bit data keeps its values', () => {
    for (let v = 0; v <= 255; v++) expect(levelOf(v, 0, 255)).toBe(v);
  });

  it('gives every level an equal share of the range', () => {
    const counts = new Array<number>(256).fill(0);
    const n = 256 * 1000;
    for (let i = 0; i < n; i++) {
      const level = levelOf(-1 + (2 * (i + 0.5)) / n, -1, 1);
      counts[level] = (counts[level] as number) + 1;
    }
    expect(new Set(counts)).toEqual(new Set([1000]));
  });
});

describe('rendered tiles decoded with sharp (shared/raster/image-encoder.ts)', () => {
  it('is the pinned sharp and libvips whose bytes the keys promise', () => {
    expect({ sharp: sharp.versions.sharp, vips: sharp.versions.vips }).toEqual(IMAGE_CODEC);
  });

  it('PNG with a colormap: every valid pixel is its level colour at alpha 255, every nodata, masked or NaN pixel transparent', async () => {
    const px = tile();
    const render: RenderParams = { format: 'PNG', rescale: [-1, 1], colormap: 'rdylgn' };
    const png = await encodeRenderedTile(px, W, H, NODATA, render);
    const img = await decode(png);
    expect([img.width, img.height, img.channels]).toEqual([W, H, 4]);
    const lut = colormapTable('rdylgn');
    let transparent = 0;
    for (let k = 0; k < W * H; k++) {
      const got = [...img.data.subarray(k * 4, k * 4 + 4)];
      if (masked(px, k)) {
        expect(got, `pixel ${k}`).toEqual([0, 0, 0, 0]);
        transparent++;
      } else {
        const l = levelOf(px[k] as number, -1, 1);
        expect(got, `pixel ${k}`).toEqual([lut[l * 3], lut[l * 3 + 1], lut[l * 3 + 2], 255]);
      }
    }
    expect(transparent).toBe(8 * H + 1);
    // The ends of the range are the colormap's ends: red at -1, green at 1.
    expect([...img.data.subarray((W * 3 + 8) * 4, (W * 3 + 8) * 4 + 3)]).toEqual([165, 0, 38]);
    expect([...img.data.subarray((W * 3 + W - 1) * 4, (W * 3 + W - 1) * 4 + 3)]).toEqual([0, 104, 55]);
  });

  it('PNG without a colormap is grey and alpha: the level as the grey value; NaN nodata works too', async () => {
    const px = tile().map((v) => (v === NODATA ? Number.NaN : v));
    const img = await decode(await encodeRenderedTile(px, W, H, Number.NaN, { format: 'PNG', rescale: [-1, 1] }));
    expect([img.channels, img.stride]).toEqual([2, 4]);
    for (let k = 0; k < W * H; k++) {
      const l = levelOf(px[k] as number, -1, 1);
      const want = Number.isNaN(px[k] as number) ? [0, 0, 0, 0] : [l, l, l, 255];
      expect([...img.data.subarray(k * 4, k * 4 + 4)], `pixel ${k}`).toEqual(want);
    }
  });

  it('rescale decides the levels: the same values on [0, 1] clamp the negative half to level 0', async () => {
    const px = tile();
    const img = await decode(await encodeRenderedTile(px, W, H, NODATA, { format: 'PNG', rescale: [0, 1] }));
    for (let k = 0; k < W * H; k++) {
      if (masked(px, k)) continue;
      const v = px[k] as number;
      expect(img.data[k * 4], `pixel ${k}`).toBe(v <= 0 ? 0 : Math.min(255, Math.floor(v * 256)));
    }
  });

  it('WebP keeps transparency exact (lossless alpha) under lossy colour', async () => {
    const px = tile();
    const img = await decode(await encodeRenderedTile(px, W, H, NODATA, { format: 'WEBP', rescale: [-1, 1], colormap: 'viridis' }));
    expect(img.channels).toBe(4);
    for (let k = 0; k < W * H; k++) expect(img.data[k * 4 + 3], `alpha of pixel ${k}`).toBe(masked(px, k) ? 0 : 255);
  });

  it('JPEG paints masked pixels the background it is given, never black (the black border of JPEG map tiles)', async () => {
    const px = tile();
    const render: RenderParams = { format: 'JPEG', rescale: [-1, 1], background: [255, 255, 255] };
    expect(renderedBands(render)).toEqual(['Gray']);
    const img = await decode(await encodeRenderedTile(px, W, H, NODATA, render));
    expect(img.channels).toBe(1);
    // The nodata columns, away from the lossy edge with the data: white.
    for (let y = 0; y < H; y++) for (let x = 0; x < 5; x++) expect(img.data[(y * W + x) * img.stride], `(${x}, ${y})`).toBeGreaterThan(245);
    const rgb = await decode(await encodeRenderedTile(px, W, H, NODATA, { ...render, colormap: 'viridis', background: [0, 0, 255] }));
    expect(rgb.channels).toBe(3);
    const [r, g, b] = rgb.data.subarray(W * 10 * 3 + 6, W * 10 * 3 + 9);
    expect({ r, g, b }).toEqual({
      r: expect.toBeOneOf([...Array(21).keys()]),
      g: expect.toBeOneOf([...Array(21).keys()]),
      b: expect.toSatisfy((v: number) => v > 235),
    });
  });

  it('gives the same bytes for the same pixels, and a PNG holds no timestamp or text: IHDR, pHYs, IDAT, IEND', async () => {
    const px = tile();
    for (const render of [
      { format: 'PNG', rescale: [-1, 1], colormap: 'viridis' },
      { format: 'WEBP', rescale: [-1, 1], colormap: 'magma' },
      { format: 'JPEG', rescale: [-1, 1], background: [10, 20, 30] },
    ] as RenderParams[]) {
      const a = await encodeRenderedTile(px, W, H, NODATA, render);
      const b = await encodeRenderedTile(Float32Array.from(px), W, H, NODATA, render);
      expect(Buffer.from(a).equals(Buffer.from(b)), render.format).toBe(true);
    }
    const png = await encodeImage(renderPixels(px, W, H, NODATA, { format: 'PNG', rescale: [-1, 1] }), 'PNG');
    expect(pngChunks(png)).toEqual(['IHDR', 'pHYs', 'IDAT', 'IEND']);
  });

  it('decodes a grey tile as grey (a pyramid parent reads its children so): PNG grey and alpha, JPEG grey', async () => {
    // 2 x 2 pixels: levels 0, 85, 170 and 255, the last transparent in the PNG.
    const png = await encodeImage({ data: new Uint8Array([0, 255, 85, 255, 170, 255, 255, 0]), width: 2, height: 2, channels: 2 }, 'PNG');
    const grey = await decodeImage(png, 2);
    expect([grey.channels, [...grey.data]]).toEqual([2, [0, 255, 85, 255, 170, 255, 255, 0]]);
    const jpeg = await encodeImage({ data: new Uint8Array(64).fill(200), width: 8, height: 8, channels: 1 }, 'JPEG');
    const flat = await decodeImage(jpeg, 1);
    expect([flat.channels, flat.data.length, Math.abs((flat.data[0] as number) - 200) <= 2]).toEqual([1, 64, true]);
  });

  it('refuses pixels that are not the tile size', () => {
    expect(() => renderPixels(new Float32Array(3), 2, 2, NODATA, { format: 'PNG', rescale: [0, 1] })).toThrow(RangeError);
  });
});
