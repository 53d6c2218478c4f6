import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync, inflateSync } from 'node:zlib';
import { FsObjectStore } from '../../functions/local/adapters/fs-object-store.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { applyFloatingPointPredictor } from '../../shared/raster/codecs.js';
import { openGeoTiff } from '../../shared/raster/index.js';
import { LIBDEFLATE_VERSION, type LibdeflateCodec, nativeCodec, wasmCodec } from '../../shared/raster/libdeflate.js';
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
 * The block compressor alone, side by side in one process: libdeflate's two
 * builds (shared/raster/libdeflate.ts, Tessera's DEFLATE encoder) — the native
 * Node-API addon of this platform, which Tessera uses where it has one, and the
 * WebAssembly module, its portable fallback — against node:zlib as Tessera drove
 * it before (one output chunk, memLevel 9), at the same levels, on the blocks a
 * tile writes: the bench scene's NDVI in the output's block size, float32 with
 * the floating-point predictor applied. Speed is bytes in per second of CPU time
 * (process.cpuUsage, one thread compresses), in rotating order; size is
 * libdeflate's output over zlib's. Every libdeflate stream is inflated by
 * node:zlib and compared to its block, and the addon's streams must be the
 * module's bytes (a difference breaks the run).
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
  const native = nativeCodec();
  details.native = native !== undefined ? `${process.platform}-${process.arch}` : 'none for this platform';
  const cpuMs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  type Who = 'zlib' | 'wasm' | 'native';
  const compressWith: Record<Who, ((x: Uint8Array, level: number) => Uint8Array) | undefined> = {
    zlib,
    wasm: (x, level) => wasmCodec.zlib(x, level),
    native: native === undefined ? undefined : (x, level) => (native as LibdeflateCodec).zlib(x, level),
  };
  const contenders = (Object.keys(compressWith) as Who[]).filter((w) => compressWith[w] !== undefined);
  for (const level of cfg.levels) {
    // One untimed round of each (the checks below are libdeflate's): all warm, the module's code optimized by V8.
    for (const x of blocks) {
      const w = wasmCodec.zlib(x, level);
      if (Buffer.compare(inflateSync(w), x) !== 0)
        broken.push(`libdeflate (WebAssembly) level ${level}: a block does not inflate to itself`);
      if (native !== undefined && Buffer.compare(native.zlib(x, level), w) !== 0)
        broken.push(`libdeflate level ${level}: the native addon's stream is not the WebAssembly module's bytes`);
      zlib(x, level);
    }
    const ms: Record<Who, number[]> = { zlib: [], wasm: [], native: [] };
    const bytes: Record<Who, number> = { zlib: 0, wasm: 0, native: 0 };
    for (let round = 0; round < cfg.rounds; round++) {
      // Rotate the order, so none always runs first (or after the same one).
      const order = contenders.map((_, k) => contenders[(k + round) % contenders.length] as Who);
      for (const who of order) {
        const f = compressWith[who] as (x: Uint8Array, level: number) => Uint8Array;
        const t0 = cpuMs();
        let out = 0;
        for (const x of blocks) out += f(x, level).byteLength;
        ms[who].push(cpuMs() - t0);
        bytes[who] = out;
      }
    }
    const mbps = (t: number[]) => raw / 1e6 / (summarize(t).median / 1000);
    const ratioOf = (base: Who, who: Who) => summarize(ms[base].map((z, i) => z / (ms[who][i] as number)));
    const size = bytes.wasm / bytes.zlib;
    const sizeNote = `size ${fmt(size, 4)}x (ratio ${fmt(raw / bytes.wasm)} vs ${fmt(raw / bytes.zlib)})`;
    const note = `${blocks.length} blocks of ${b} px, ${cfg.rounds} rounds in rotating order; ratio: the baseline's CPU time over libdeflate's`;
    const levelDetails: Record<string, unknown> = { msZlib: summarize(ms.zlib), msWasm: summarize(ms.wasm), bytes, size };
    for (const who of native !== undefined ? (['native', 'wasm'] as const) : (['wasm'] as const)) {
      const speed = ratioOf('zlib', who);
      rows.push({
        section: 'compressor',
        metric: `DEFLATE ${level} block compressor: libdeflate ${LIBDEFLATE_VERSION} (${who === 'native' ? `native, ${process.platform}-${process.arch}` : 'WebAssembly'}) vs node:zlib, predicted float32 NDVI blocks`,
        backend: '',
        target: `>= 1.0x, size <= ${SIZE_TOLERANCE}x zlib's`,
        measured: `${fmt(mbps(ms[who]))} vs ${fmt(mbps(ms.zlib))} MB/s of CPU; ${sizeNote}`,
        ratio: `${times(speed.median)} (${times(speed.min)}-${times(speed.max)})`,
        status: speed.median >= 1 && size <= SIZE_TOLERANCE ? 'PASS' : 'MISS',
        note,
      });
      levelDetails[`speed${who === 'native' ? 'Native' : 'Wasm'}`] = speed;
    }
    if (native !== undefined) {
      const speed = ratioOf('wasm', 'native');
      rows.push({
        section: 'compressor',
        metric: `DEFLATE ${level} block compressor: libdeflate native vs the same libdeflate as WebAssembly (its fallback), the same bytes`,
        backend: '',
        target: '-',
        measured: `${fmt(mbps(ms.native))} vs ${fmt(mbps(ms.wasm))} MB/s of CPU`,
        ratio: `${times(speed.median)} (${times(speed.min)}-${times(speed.max)})`,
        status: 'INFO',
        note: `${note.replace("the baseline's", "WebAssembly's")}; every stream byte-identical`,
      });
      levelDetails.msNative = summarize(ms.native);
      levelDetails.nativeOverWasm = speed;
      log(`  DEFLATE ${level}: native ${times(ratioOf('zlib', 'native').median)} zlib's speed, ${times(speed.median)} WebAssembly's`);
    }
    details[`level${level}`] = levelDetails;
    log(`  DEFLATE ${level}: WebAssembly ${times(ratioOf('zlib', 'wasm').median)} zlib's speed, size ${fmt(size, 4)}x`);
  }
  return { name: 'compressor', rows, details, broken, durationSec: (performance.now() - started) / 1000 };
}
