import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync, inflateSync } from 'node:zlib';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { applyFloatingPointPredictor } from '../../shared/raster/codecs.js';
import { openGeoTiff } from '../../shared/raster/index.js';
import { LIBDEFLATE_VERSION, libdeflateZlibCompress } from '../../shared/raster/libdeflate.js';
import { benchParams, spreadWindows } from '../lib/jobs.js';
import type { SectionResult } from '../lib/report.js';
import { type Row, times } from '../lib/report.js';
import { ensureScene, freshRunDir } from '../lib/scenes.js';
import { fmt, summarize } from '../lib/stats.js';

export interface CompressorConfig {
  readonly sceneSize: number;
  /** Windows of the scene whose NDVI blocks are compressed. */
  readonly tiles: number;
  /** Rounds per level; each round compresses every block with both, in alternating order. */
  readonly rounds: number;
  readonly levels: readonly number[];
}

/** The most libdeflate's output may exceed zlib's at the same level and still count as the same ratio. */
const SIZE_TOLERANCE = 1.005;

/**
 * The block compressor alone, side by side in one process: libdeflate compiled
 * to WebAssembly (shared/raster/libdeflate.ts, Tessera's DEFLATE encoder) against
 * node:zlib as Tessera drove it before (one output chunk, memLevel 9), at the
 * same levels, on the blocks a tile writes: the bench scene's NDVI in the
 * output's block size, float32 with the floating-point predictor applied.
 * Speed is bytes in per second; size is libdeflate's output over zlib's.
 * Every libdeflate stream is inflated by node:zlib and compared to its block.
 */
export async function compressor(cfg: CompressorConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const scenePath = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const dir = freshRunDir('compressor');
  mkdirSync(join(dir, 'objects', 'scenes'), { recursive: true });
  symlinkSync(scenePath, join(dir, 'objects', 'scenes', 'scene.tif'));
  const raster = await openGeoTiff(new FsObjectStore(dir), 'scenes/scene.tif');
  const tiling = tilingParams(benchParams('compressor'));
  const b = tiling.blockSize;
  const windows = spreadWindows(tileGrid(cfg.sceneSize, cfg.sceneSize, tiling.tilePx), cfg.tiles);
  const blocks: Uint8Array[] = [];
  for (const w of windows) {
    const [red, nir] = (await raster.readWindow({ x: w.x, y: w.y, width: w.width, height: w.height }, [1, 2])) as [
      Uint16Array,
      Uint16Array,
    ];
    for (let by = 0; by + b <= w.height; by += b) {
      for (let bx = 0; bx + b <= w.width; bx += b) {
        const ndvi = new Float32Array(b * b);
        for (let y = 0; y < b; y++) {
          for (let x = 0; x < b; x++) {
            const i = (by + y) * w.width + bx + x;
            const r = red[i] as number;
            const n = nir[i] as number;
            ndvi[y * b + x] = r === 0 && n === 0 ? tiling.noData : (n - r) / (n + r);
          }
        }
        blocks.push(applyFloatingPointPredictor(new Uint8Array(ndvi.buffer), b, b, 4, 1));
      }
    }
  }
  const raw = blocks.reduce((s, x) => s + x.byteLength, 0);
  const broken: string[] = [];
  const rows: Row[] = [];
  const details: Record<string, unknown> = { blocks: blocks.length, blockSize: b, rawBytes: raw, libdeflate: LIBDEFLATE_VERSION };
  const zlib = (x: Uint8Array, level: number) => deflateSync(x, { level, memLevel: 9, chunkSize: Math.max(64, x.byteLength + 1024) });
  for (const level of cfg.levels) {
    for (const x of blocks) {
      if (Buffer.compare(inflateSync(libdeflateZlibCompress(x, level)), x) !== 0)
        broken.push(`libdeflate level ${level}: a block does not inflate to itself`);
    }
    // One untimed round of zlib too (libdeflate's was the check above): both warm, the module's code optimized by V8.
    for (const x of blocks) zlib(x, level);
    const ms = { zlib: [] as number[], libdeflate: [] as number[] };
    const bytes = { zlib: 0, libdeflate: 0 };
    for (let round = 0; round < cfg.rounds; round++) {
      for (const who of round % 2 === 0 ? (['zlib', 'libdeflate'] as const) : (['libdeflate', 'zlib'] as const)) {
        const t0 = performance.now();
        let out = 0;
        for (const x of blocks) out += (who === 'zlib' ? zlib(x, level) : libdeflateZlibCompress(x, level)).byteLength;
        ms[who].push(performance.now() - t0);
        bytes[who] = out;
      }
    }
    const speed = summarize(ms.zlib.map((z, i) => z / (ms.libdeflate[i] as number)));
    const size = bytes.libdeflate / bytes.zlib;
    const mbps = (t: number[]) => raw / 1e6 / (summarize(t).median / 1000);
    rows.push({
      section: 'compressor',
      metric: `DEFLATE ${level} block compressor: libdeflate ${LIBDEFLATE_VERSION} (WebAssembly) vs node:zlib, predicted float32 NDVI blocks`,
      backend: '',
      target: `>= 1.0x, size <= ${SIZE_TOLERANCE}x zlib's`,
      measured: `${fmt(mbps(ms.libdeflate))} vs ${fmt(mbps(ms.zlib))} MB/s; size ${fmt(size, 4)}x (ratio ${fmt(raw / bytes.libdeflate)} vs ${fmt(raw / bytes.zlib)})`,
      ratio: `${times(speed.median)} (${times(speed.min)}-${times(speed.max)})`,
      status: speed.median >= 1 && size <= SIZE_TOLERANCE ? 'PASS' : 'MISS',
      note: `${blocks.length} blocks of ${b} px, ${cfg.rounds} rounds alternating; ratio: zlib's time over libdeflate's`,
    });
    details[`level${level}`] = { msZlib: summarize(ms.zlib), msLibdeflate: summarize(ms.libdeflate), speed, bytes, size };
    log(`  DEFLATE ${level}: libdeflate ${times(speed.median)} zlib's speed, size ${fmt(size, 4)}x`);
  }
  return { name: 'compressor', rows, details, broken, durationSec: (performance.now() - started) / 1000 };
}
