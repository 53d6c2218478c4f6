import { buildCogMosaic, type CogMosaicTile } from '/work/main/shared/app/cog-mosaic.ts';
import { JsonTelemetry } from '/work/main/shared/app/telemetry.ts';
import { encodeCog, encodeCogAsync, windowGeoTransform, type GeoTransform } from '/work/main/shared/raster/index.ts';
import { MemoryObjectStore } from '/work/main/test/support/memory-object-store.ts';

const mode = process.argv[2] ?? 'stream';
const size = Number(process.argv[3] ?? 4096);
const tilePx = 512;
const GT: GeoTransform = [500_000, 10, 0, 5_700_000, 0, -10];
const NO = -9999;
const px = (x: number, y: number) => (process.env.NOISE ? ((x * 7 + y * 13) % 11) * 0.0013 : 0) + Math.round(Math.sin(x / 37) * Math.cos(y / 23) * 1000) / 1000;
const store = new MemoryObjectStore();
const tiles: CogMosaicTile[] = [];
for (let y = 0; y < size; y += tilePx) for (let x = 0; x < size; x += tilePx) {
  const w = { x, y, width: Math.min(tilePx, size - x), height: Math.min(tilePx, size - y) };
  const d = new Float32Array(w.width * w.height);
  for (let r = 0; r < w.height; r++) for (let c = 0; c < w.width; c++) d[r * w.width + c] = px(x + c, y + r);
  const key = `tiles/s/${y / tilePx}_${x / tilePx}.tif`;
  await store.putIfAbsent(key, encodeCog({ ...w, data: d, geoTransform: windowGeoTransform(GT, w), crs: { epsg: 32631 }, noData: NO, blockSize: 256, compression: 'DEFLATE', level: 9 }));
  tiles.push({ key, window: w });
}
global.gc?.();
const base = process.memoryUsage();
let peak = 0; let live = 0;
const baseLive = (global.gc?.(), process.memoryUsage().arrayBuffers + process.memoryUsage().heapUsed);
const timer = setInterval(() => { const m = process.memoryUsage(); peak = Math.max(peak, m.rss); if (global.gc) { global.gc(); const g = process.memoryUsage(); live = Math.max(live, g.arrayBuffers + g.heapUsed - baseLive); } }, process.env.GCMS ? Number(process.env.GCMS) : 5);
const t0 = performance.now();
let bytes = 0;
if (mode === 'stream') {
  const r = await buildCogMosaic(store, { sceneKey: 's', mosaicKey: 'mosaics/s.tif', width: size, height: size, geoTransform: GT, crs: { epsg: 32631 }, noData: NO, blockSize: 256, compression: 'DEFLATE', level: 9, tiles }, new JsonTelemetry());
  bytes = r.bytes;
} else {
  const d = new Float32Array(size * size);
  for (let y = 0; y < size; y++) for (let x = 0; x < size; x++) d[y * size + x] = px(x, y);
  bytes = (await encodeCogAsync({ width: size, height: size, data: d, geoTransform: GT, crs: { epsg: 32631 }, noData: NO, blockSize: 256, compression: 'DEFLATE', level: 9 })).byteLength;
}
clearInterval(timer);
const m = process.memoryUsage(); peak = Math.max(peak, m.rss);
console.log(JSON.stringify({ mode, size, pixels: size * size, bytes, seconds: +((performance.now() - t0) / 1000).toFixed(2), baseRssMiB: +(base.rss / 2 ** 20).toFixed(0), peakRssMiB: +(peak / 2 ** 20).toFixed(0), liveMiB: +(live / 2 ** 20).toFixed(0) }));
