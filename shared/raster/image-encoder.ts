import type SharpFactory from 'sharp';
import { ImageEncoderUnavailableError } from '../domain/errors.js';
import type { RenderedFormat, RenderParams } from '../domain/render-params.js';
import { colormapTable } from './colormaps.js';

/**
 * Rendered tiles (docs/web-maps.md, "Rendered tiles"): the band math's float32 pixels become 8-bit pixels
 * ({@link renderPixels}: rescale, colormap, transparency) and those an image file ({@link encodeImage}: PNG, WebP
 * or JPEG, encoded by libvips through `sharp`).
 *
 * Why sharp is imported here and not behind a port: a port stands for what differs between backends (a store, a
 * queue, a claim table); an image codec does not, and must not (the same job gives the same bytes on every
 * backend). It is a codec library like node:zlib and jpeg-js beside it, so the core uses it directly. It is a
 * native addon (libvips), so it is loaded on first use, not at import: a process that writes COG tiles only never
 * loads it, and one that cannot load it fails its rendered jobs with a typed error naming the fix. The function
 * build ships its binaries for each cloud's platform (scripts/build-functions.ts; Lambda runs on arm64).
 *
 * Deterministic per code version: the sharp and libvips versions are pinned (package.json, and {@link IMAGE_CODEC}
 * here, which is on the render path, so a version change is a code version change and new keys); every encoder
 * option is set explicitly rather than left to the library's defaults; no metadata is written (sharp strips it
 * unless asked), so a PNG has no tIME or text chunk, only IHDR, IDAT and IEND.
 */

/** The versions whose bytes the keys of this build promise: a process with others refuses to encode. */
export const IMAGE_CODEC = { sharp: '0.35.5', vips: '8.18.7' } as const;

/** The colour interpretation of each band of a rendered tile, as GDAL reads the file back (the VRT mosaic names them). */
export type BandInterpretation = 'Gray' | 'Red' | 'Green' | 'Blue' | 'Alpha';

/** Pixels ready to encode: `channels` bytes a pixel, row-major. */
export interface RawImage {
  readonly data: Uint8Array;
  readonly width: number;
  readonly height: number;
  readonly channels: 1 | 2 | 3 | 4;
}

/**
 * The bands of a rendered tile: PNG grey and alpha, or RGBA with a colormap; WebP always RGBA (it has no grey
 * image); JPEG grey on a grey background, else RGB (it has no alpha: masked pixels take the background).
 */
export function renderedBands(render: Pick<RenderParams, 'format' | 'colormap' | 'background'>): readonly BandInterpretation[] {
  switch (render.format) {
    case 'PNG':
      return render.colormap === undefined ? ['Gray', 'Alpha'] : ['Red', 'Green', 'Blue', 'Alpha'];
    case 'WEBP':
      return ['Red', 'Green', 'Blue', 'Alpha'];
    case 'JPEG': {
      const bg = render.background ?? [0, 0, 0];
      return render.colormap === undefined && bg[0] === bg[1] && bg[1] === bg[2] ? ['Gray'] : ['Red', 'Green', 'Blue'];
    }
  }
}

/**
 * The level (0-255) of value `v` on `[min, max]`: matplotlib's `Normalize` then colormap lookup,
 * floor((v - min) / (max - min) * 256), with max itself level 255 and values outside the range clamped to the end
 * levels. Every level covers an equal share of the range, and an integer `v` of 0-255 on [0, 255] is level `v`.
 */
export function levelOf(v: number, min: number, max: number): number {
  const t = ((v - min) / (max - min)) * 256;
  if (t >= 255) return 255;
  if (t < 0) return 0;
  return Math.floor(t);
}

/**
 * The 8-bit pixels of a tile: each value's level ({@link levelOf}) as a grey value or its colormap colour; a
 * pixel is masked where the band math wrote the output nodata (or NaN), which covers the source's nodata and
 * mask, division by zero and pixels outside the source (render-tile.ts). Masked pixels are transparent
 * (alpha 0, colour 0) in PNG and WebP, and the background colour in JPEG.
 */
export function renderPixels(pixels: ArrayLike<number>, width: number, height: number, noData: number, render: RenderParams): RawImage {
  const n = width * height;
  if (pixels.length !== n) throw new RangeError(`renderPixels: ${pixels.length} values for a ${width}x${height} tile`);
  const [min, max] = render.rescale;
  const lut = render.colormap === undefined ? undefined : colormapTable(render.colormap);
  const bands = renderedBands(render);
  const channels = bands.length as RawImage['channels'];
  const out = new Uint8Array(n * channels);
  const alpha = bands[channels - 1] === 'Alpha';
  const bg = render.background ?? [0, 0, 0];
  if (lut !== undefined && channels === 4 && alpha && LITTLE_ENDIAN) {
    renderColormapRgba(pixels, n, noData, min, max, lut, out);
    return { data: out, width, height, channels };
  }
  const noDataIsNaN = Number.isNaN(noData);
  for (let k = 0, o = 0; k < n; k++, o += channels) {
    const v = pixels[k] as number;
    if (Number.isNaN(v) || (!noDataIsNaN && v === noData)) {
      // Transparent black (the typed array is zeroed), or the JPEG's background.
      if (!alpha) {
        if (channels === 1) out[o] = bg[0];
        else {
          out[o] = bg[0];
          out[o + 1] = bg[1];
          out[o + 2] = bg[2];
        }
      }
      continue;
    }
    const level = levelOf(v, min, max);
    if (lut !== undefined) {
      const e = level * 3;
      out[o] = lut[e] as number;
      out[o + 1] = lut[e + 1] as number;
      out[o + 2] = lut[e + 2] as number;
    } else if (channels === 1 || channels === 2) {
      out[o] = level;
    } else {
      out[o] = level;
      out[o + 1] = level;
      out[o + 2] = level;
    }
    if (alpha) out[o + channels - 1] = 255;
  }
  return { data: out, width, height, channels };
}

/** Whether a Uint32Array's bytes are little-endian (x64 and arm64 are): {@link renderColormapRgba} writes whole pixels. */
const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** The colormap's 256 colours as opaque RGBA pixels, read as little-endian uint32, by colormap table. */
const rgbaTables = new WeakMap<ArrayLike<number>, Uint32Array>();

/**
 * {@link renderPixels} of a colormap to RGBA (a PNG or WebP map tile, the common case), the same bytes written a pixel
 * at a time through a uint32 view of `out` (zeroed: masked pixels stay transparent black): a third of the time of the
 * general loop, which tests every option per pixel and writes a byte at a time.
 */
function renderColormapRgba(
  pixels: ArrayLike<number>,
  n: number,
  noData: number,
  min: number,
  max: number,
  lut: ArrayLike<number>,
  out: Uint8Array,
): void {
  let rgba = rgbaTables.get(lut);
  if (rgba === undefined) {
    rgba = new Uint32Array(256);
    for (let level = 0; level < 256; level++) {
      const e = level * 3;
      rgba[level] = ((lut[e] as number) | ((lut[e + 1] as number) << 8) | ((lut[e + 2] as number) << 16) | (255 << 24)) >>> 0;
    }
    rgbaTables.set(lut, rgba);
  }
  const out32 = new Uint32Array(out.buffer, out.byteOffset, n);
  const span = max - min;
  for (let k = 0; k < n; k++) {
    const v = pixels[k] as number;
    // NaN, or the output nodata (never equal when it is NaN): masked.
    if (Number.isNaN(v) || v === noData) continue;
    // levelOf, inlined: the same expression, so the same level.
    const t = ((v - min) / span) * 256;
    out32[k] = rgba[t >= 255 ? 255 : t < 0 ? 0 : Math.floor(t)] as number;
  }
}

let loading: Promise<typeof SharpFactory> | undefined;

/** sharp, loaded once, checked to be the pinned version. */
function loadSharp(): Promise<typeof SharpFactory> {
  loading ??= (async () => {
    let sharp: typeof SharpFactory;
    try {
      sharp = (await import('sharp')).default;
    } catch (cause) {
      loading = undefined;
      throw new ImageEncoderUnavailableError(
        `[image-encoder] sharp (libvips) cannot be loaded on ${process.platform}-${process.arch}, so PNG, WebP and JPEG tiles cannot be encoded: ` +
          `run npm ci (it installs sharp's prebuilt binaries for this platform), or deploy an archive of npm run build:functions, which ships them; ` +
          `${cause instanceof Error ? cause.message.split('\n')[0] : String(cause)}`,
        { cause },
      );
    }
    const { sharp: version, vips } = sharp.versions;
    if (version !== IMAGE_CODEC.sharp || vips !== IMAGE_CODEC.vips) {
      loading = undefined;
      throw new ImageEncoderUnavailableError(
        `[image-encoder] sharp ${version} with libvips ${vips} is installed, but this build's keys promise the bytes of sharp ${IMAGE_CODEC.sharp} with libvips ${IMAGE_CODEC.vips}: ` +
          `run npm ci from the lockfile; an upgrade changes IMAGE_CODEC in shared/raster/image-encoder.ts too (a new code version, so new keys)`,
      );
    }
    return sharp;
  })();
  return loading;
}

/**
 * One image file of the pixels. Every option is explicit, so the bytes do not move with a library default:
 * - PNG: zlib level 6, no adaptive filtering, no palette (exact colours), not interlaced;
 * - WebP: lossy, quality 80, lossless alpha (alphaQuality 100, so transparency is exact), effort 4;
 * - JPEG: quality 80, 4:2:0 chroma, baseline (not progressive), optimised Huffman tables, libjpeg-turbo's
 *   encoder (not mozjpeg's trellis quantisation).
 */
export async function encodeImage(image: RawImage, format: RenderedFormat): Promise<Uint8Array> {
  const sharp = await loadSharp();
  const raw = sharp(image.data, { raw: { width: image.width, height: image.height, channels: image.channels } });
  // One or two channels are grey (and alpha): kept grey, where sharp would otherwise write them as sRGB.
  const input = image.channels <= 2 ? raw.toColourspace('b-w') : raw;
  let out: ReturnType<typeof sharp>;
  switch (format) {
    case 'PNG':
      out = input.png({ compressionLevel: 6, adaptiveFiltering: false, palette: false, progressive: false });
      break;
    case 'WEBP':
      out = input.webp({
        quality: 80,
        alphaQuality: 100,
        lossless: false,
        nearLossless: false,
        smartSubsample: false,
        effort: 4,
        exact: false,
      });
      break;
    case 'JPEG':
      out = input.jpeg({ quality: 80, chromaSubsampling: '4:2:0', progressive: false, optimiseCoding: true, mozjpeg: false });
      break;
  }
  const buffer = await out.toBuffer();
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

/** A rendered tile's bytes: {@link renderPixels} then {@link encodeImage}. */
export function encodeRenderedTile(
  pixels: ArrayLike<number>,
  width: number,
  height: number,
  noData: number,
  render: RenderParams,
): Promise<Uint8Array> {
  return encodeImage(renderPixels(pixels, width, height, noData, render), render.format);
}

/**
 * The pixels of a rendered tile's bytes (PNG, WebP or JPEG), `channels` bytes a pixel: what a zoom pyramid's tile below
 * its highest zoom is built from (shared/app/pyramid.ts). Decoded by the same pinned libvips; an image written without
 * an alpha channel although `channels` has one (a WebP with every pixel opaque) gets alpha 255, and a grey one, which
 * libvips hands back as sRGB, its grey (and alpha) again.
 */
export async function decodeImage(bytes: Uint8Array, channels: RawImage['channels']): Promise<RawImage> {
  const sharp = await loadSharp();
  const { data, info } = await sharp(bytes).raw().toBuffer({ resolveWithObject: true });
  const have = info.channels;
  const n = info.width * info.height;
  if (have === channels)
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), width: info.width, height: info.height, channels };
  if (channels <= 2 && have >= 3) {
    // A grey tile (PNG grey and alpha, JPEG grey) comes back as sRGB, r = g = b (sharp's output colourspace; naming
    // b-w instead would drop the alpha): its grey is the red channel, its alpha the fourth, if any.
    const out = new Uint8Array(n * channels);
    for (let k = 0; k < n; k++) {
      out[k * channels] = data[k * have] as number;
      if (channels === 2) out[k * channels + 1] = have === 4 ? (data[k * have + 3] as number) : 255;
    }
    return { data: out, width: info.width, height: info.height, channels };
  }
  const alphaAdded = have === channels - 1 && (channels === 2 || channels === 4);
  if (!alphaAdded) throw new RangeError(`decodeImage: a ${have}-channel image where ${channels} channels were written`);
  const out = new Uint8Array(n * channels);
  for (let k = 0; k < n; k++) {
    for (let c = 0; c < have; c++) out[k * channels + c] = data[k * have + c] as number;
    out[k * channels + have] = 255;
  }
  return { data: out, width: info.width, height: info.height, channels };
}
