import { runWorker } from '../lib/child.js';
import { benchParams } from '../lib/jobs.js';
import { type Row, type SectionResult, times } from '../lib/report.js';
import { ensureScene, freshRunDir } from '../lib/scenes.js';
import { fmt, type Summary, summarize } from '../lib/stats.js';
import type { ScaleOutput } from '../workers/scale.js';

export interface ScaleConfig {
  /** Window counts, smallest first; the growth target compares the last two. */
  readonly windows: readonly number[];
  readonly reps: number;
}

/** The smallest tile the grid accepts: window counts come from small scenes, and fan-out reads only their header. */
const TILE_PX = 16;
/** Ten times the windows may take at most this many times as long (linear is 10x). */
const MAX_GROWTH = 12;

/** rows x cols = n with rows the largest divisor of n not above its square root (400 -> 20x20, 4000 -> 50x80). */
export function gridShape(n: number): { rows: number; cols: number } {
  let rows = Math.floor(Math.sqrt(n));
  while (n % rows !== 0) rows--;
  return { rows, cols: n / rows };
}

interface PerCount {
  readonly windows: number;
  readonly scene: string;
  readonly fanOutMs: Summary;
  readonly assembleMs: Summary;
  readonly totalMs: Summary;
  readonly fanOutPeakMb: Summary;
  readonly assemblePeakMb: Summary;
  /** The larger of the two phases' peaks above their process's idle memory. */
  readonly addedMb: Summary;
  readonly placeholderMs: Summary;
}

const mb = (kb: number | undefined) => (kb ?? 0) / 1024;
const peakOf = (o: ScaleOutput) => mb(o.peak.vmHwmKb ?? o.peak.maxRssKb);
const addedOf = (o: ScaleOutput) => peakOf(o) - mb(o.idle.vmRssKb ?? o.idle.maxRssKb);

/**
 * Section 5: fan-out (to the local SQLite queue) and mosaic assembly for a
 * growing number of windows; time and peak memory of each phase, each in its
 * own process. Assembly needs every tile present: they are tiny placeholder
 * objects written create-only (untimed), since assembly only proves that each
 * expected key exists and builds the VRT from the grid.
 */
export async function scale(cfg: ScaleConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const params = benchParams('scale', { tile_px: TILE_PX });
  const broken: string[] = [];
  const perCount: PerCount[] = [];
  for (const n of cfg.windows) {
    const { rows, cols } = gridShape(n);
    const scene = await ensureScene(cols * TILE_PX, rows * TILE_PX, log);
    const fan: ScaleOutput[] = [];
    const asm: ScaleOutput[] = [];
    for (let rep = 0; rep < cfg.reps; rep++) {
      const dir = freshRunDir(`scale-${n}-${rep}`);
      const f = await runWorker<ScaleOutput>('scale', { phase: 'fan-out', dir, scenePath: scene, params }, { timeoutMs: 1_800_000 });
      const a = await runWorker<ScaleOutput>('scale', { phase: 'assemble', dir, sceneKey: f.sceneKey }, { timeoutMs: 1_800_000 });
      if (f.windows !== n || f.count !== n) broken.push(`fan-out of ${n} windows enqueued ${f.count} of a ${f.windows}-window grid`);
      if (a.count !== n) broken.push(`assembly of ${n} windows listed ${a.count} sources`);
      fan.push(f);
      asm.push(a);
      freshRunDir(`scale-${n}-${rep}`); // 40,000 placeholders: do not keep them around
    }
    const row: PerCount = {
      windows: n,
      scene: `${cols * TILE_PX}x${rows * TILE_PX} px at ${TILE_PX} px tiles`,
      fanOutMs: summarize(fan.map((f) => f.ms)),
      assembleMs: summarize(asm.map((a) => a.ms)),
      totalMs: summarize(fan.map((f, i) => f.ms + (asm[i] as ScaleOutput).ms)),
      fanOutPeakMb: summarize(fan.map(peakOf)),
      assemblePeakMb: summarize(asm.map(peakOf)),
      addedMb: summarize(fan.map((f, i) => Math.max(addedOf(f), addedOf(asm[i] as ScaleOutput)))),
      placeholderMs: summarize(fan.map((f) => f.placeholderMs ?? 0)),
    };
    perCount.push(row);
    log(
      `  ${n.toLocaleString('en-US')} windows: fan-out ${fmt(row.fanOutMs.median)} ms, assembly ${fmt(row.assembleMs.median)} ms, ` +
        `peaks ${fmt(row.fanOutPeakMb.median)} / ${fmt(row.assemblePeakMb.median)} MB`,
    );
  }
  const rows: Row[] = perCount.map((p) => ({
    section: '5 scale',
    metric: `fan-out + assembly, ${p.windows.toLocaleString('en-US')} windows`,
    backend: 'local',
    target: 'context',
    measured:
      `${fmt(p.totalMs.median)} ms (fan-out ${fmt(p.fanOutMs.median)} + assembly ${fmt(p.assembleMs.median)}); ` +
      `peak RSS ${fmt(p.fanOutPeakMb.median)} / ${fmt(p.assemblePeakMb.median)} MB, +${fmt(p.addedMb.median)} MB above idle`,
    ratio: '-',
    status: 'INFO',
  }));
  const [prev, last] = perCount.slice(-2);
  if (prev && last) {
    const k = last.windows / prev.windows;
    const timeGrowth = last.totalMs.median / prev.totalMs.median;
    const memGrowth = last.addedMb.median / Math.max(prev.addedMb.median, 1);
    const limit = (MAX_GROWTH / 10) * k;
    const label = `${prev.windows.toLocaleString('en-US')} -> ${last.windows.toLocaleString('en-US')} windows`;
    rows.push(
      {
        section: '5 scale',
        metric: `time growth, ${label}`,
        backend: 'local',
        target: `<= ${fmt(limit)}x (linear ${fmt(k)}x)`,
        measured: `${fmt(prev.totalMs.median)} -> ${fmt(last.totalMs.median)} ms`,
        ratio: times(timeGrowth),
        status: timeGrowth <= limit ? 'PASS' : 'MISS',
        note:
          timeGrowth <= limit
            ? undefined
            : `worse than linear: fan-out ${times(last.fanOutMs.median / prev.fanOutMs.median)}, assembly ${times(last.assembleMs.median / prev.assembleMs.median)}; see reports/bench.json`,
      },
      {
        section: '5 scale',
        metric: `peak memory growth above idle, ${label}`,
        backend: 'local',
        target: `<= ${fmt(limit)}x (linear ${fmt(k)}x)`,
        measured: `+${fmt(prev.addedMb.median)} -> +${fmt(last.addedMb.median)} MB`,
        ratio: times(memGrowth),
        status: memGrowth <= limit ? 'PASS' : 'MISS',
        note:
          memGrowth <= limit
            ? 'the larger of the two phases, above the process before it started (below 1 MB counts as 1 MB)'
            : 'memory grew faster than the window count; the VRT text and the listing of tiles are the parts that grow with it',
      },
    );
  }
  return {
    name: 'scale',
    rows,
    broken,
    details: {
      tilePx: TILE_PX,
      reps: cfg.reps,
      perCount,
      placeholders: 'one tiny object per window, written create-only through FsObjectStore.putIfAbsent, untimed',
    },
    durationSec: (performance.now() - started) / 1000,
  };
}
