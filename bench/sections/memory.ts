import { runWorker } from '../lib/child.js';
import { benchParams } from '../lib/jobs.js';
import type { Row, SectionResult } from '../lib/report.js';
import { ensureScene, freshRunDir } from '../lib/scenes.js';
import { fmt, summarize } from '../lib/stats.js';
import type { MemoryOutput } from '../workers/memory.js';

export interface MemoryConfig {
  /** Scene sides, smallest first. */
  readonly sizes: readonly number[];
  /** Child processes per size. */
  readonly reps: number;
}

const MAX_PEAK_MB = 300;
const MAX_GROWTH = 0.1;

const mb = (kb: number) => kb / 1024;

/**
 * Section 4: peak resident memory of one tile worker process handling one
 * 512 px tile, for scenes from small to large. Windows are read by range, so
 * the peak should not follow the scene size.
 */
export async function memoryFootprint(cfg: MemoryConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const params = benchParams('memory');
  const perSize: {
    size: number;
    peakMb: ReturnType<typeof summarize>;
    idleMb: ReturnType<typeof summarize>;
    bytesRead: number;
    rangeReads: number;
    tileMs: number;
  }[] = [];
  for (const size of cfg.sizes) {
    const scene = await ensureScene(size, size, log);
    const runs: MemoryOutput[] = [];
    for (let rep = 0; rep < cfg.reps; rep++) {
      const dir = freshRunDir(`memory-${size}-${rep}`);
      runs.push(await runWorker<MemoryOutput>('memory', { dir, scenePath: scene, size, params }, { timeoutMs: 600_000 }));
    }
    const peakMb = summarize(runs.map((r) => mb(r.peak.vmHwmKb ?? r.peak.maxRssKb)));
    const idleMb = summarize(runs.map((r) => mb(r.idle.vmHwmKb ?? r.idle.maxRssKb)));
    const first = runs[0] as MemoryOutput;
    perSize.push({
      size,
      peakMb,
      idleMb,
      bytesRead: first.sourceBytesRead,
      rangeReads: first.rangeReads,
      tileMs: summarize(runs.map((r) => r.tileMs)).median,
    });
    log(
      `  ${size}^2: peak ${fmt(peakMb.median)} MB (process idle ${fmt(idleMb.median)} MB), ${fmt(first.sourceBytesRead / 1024)} KiB read in ${first.rangeReads} range reads`,
    );
  }
  const smallest = perSize[0];
  const largest = perSize[perSize.length - 1];
  if (!smallest || !largest) throw new Error('[bench] memory: no scene sizes configured');
  const growth = largest.peakMb.median / smallest.peakMb.median - 1;
  const worst = Math.max(...perSize.map((p) => p.peakMb.median));
  const rows: Row[] = perSize.map((p) => ({
    section: '4 memory',
    metric: `peak RSS, one 512 px tile of a ${p.size}^2 scene`,
    backend: 'local',
    target: `<= ${MAX_PEAK_MB} MB`,
    measured: `${fmt(p.peakMb.median)} MB (${fmt(p.peakMb.min)}-${fmt(p.peakMb.max)}, n=${p.peakMb.n}); ${fmt(p.bytesRead / 1024)} KiB read`,
    ratio: `${fmt(p.peakMb.median / MAX_PEAK_MB, 2)}x of cap`,
    status: p.peakMb.median <= MAX_PEAK_MB ? 'PASS' : 'MISS',
    note:
      p.peakMb.median <= MAX_PEAK_MB
        ? undefined
        : `the process peaked above ${MAX_PEAK_MB} MB; ${fmt(p.idleMb.median)} MB of it is Node, tsx and the loaded modules before the tile`,
  }));
  rows.push({
    section: '4 memory',
    metric: `peak RSS growth, ${smallest.size}^2 to ${largest.size}^2 scene`,
    backend: 'local',
    target: `<= +${MAX_GROWTH * 100}%`,
    measured: `${growth >= 0 ? '+' : ''}${fmt(growth * 100, 2)}% (${fmt(smallest.peakMb.median)} -> ${fmt(largest.peakMb.median)} MB, worst ${fmt(worst)} MB)`,
    ratio: `${fmt(1 + growth, 3)}x`,
    status: growth <= MAX_GROWTH ? 'PASS' : 'MISS',
    note:
      growth <= MAX_GROWTH
        ? `the process holds ${fmt(smallest.idleMb.median)} MB before its first tile (Node, tsx, the SDK-free core and SQLite); the tile itself adds ${fmt(smallest.peakMb.median - smallest.idleMb.median)} MB`
        : 'memory followed the scene size: something reads or indexes more than the window (the tile offsets of a larger scene are the only part expected to grow)',
  });
  return {
    name: 'memory',
    rows,
    broken: [],
    details: { reps: cfg.reps, perSize, measuredAs: 'VmHWM from /proc/self/status (getrusage maxRSS where /proc is missing), in MiB' },
    durationSec: (performance.now() - started) / 1000,
  };
}
