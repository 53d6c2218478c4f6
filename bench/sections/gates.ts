import { tileGrid } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { runWorker } from '../lib/child.js';
import { benchParams, spreadWindows } from '../lib/jobs.js';
import type { Row, SectionResult } from '../lib/report.js';
import { ensureScene, freshRunDir } from '../lib/scenes.js';
import { fmt, summarize } from '../lib/stats.js';
import type { StageTimings } from '../lib/ungated.js';
import type { GatesPair } from '../workers/gates.js';

export interface GatesConfig {
  readonly sceneSize: number;
  /** Windows per round. */
  readonly tiles: number;
  /** Rounds per child process; each round does its own windows both ways. */
  readonly rounds: number;
  /** Child processes (each a fresh backend and a fresh JIT). */
  readonly reps: number;
}

/** Most the gates may add to the time of a tile. */
const MAX_OVERHEAD = 0.1;

const pct = (x: number) => `${x >= 0 ? '+' : ''}${fmt(x * 100, 2)}%`;

/**
 * Section 3 (time): the gated tile worker against the same worker with no
 * claim and an unconditional write, on the local backend, one core, tile by
 * tile in alternating order. The round trips per job on every backend come
 * from the duplicate section, which counts the first deliveries.
 */
export async function gates(cfg: GatesConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const scene = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const params = benchParams('gates');
  const grid = tileGrid(cfg.sceneSize, cfg.sceneSize, tilingParams(params).tilePx);
  // A window per tile and round where the grid has enough (one warm-up round, then the measured ones).
  const windows = spreadWindows(grid, cfg.tiles * (cfg.rounds + 1));
  const pairs: GatesPair[] = [];
  const stages: StageTimings[] = [];
  for (let rep = 0; rep < cfg.reps; rep++) {
    const dir = freshRunDir(`gates-${rep}`);
    const out = await runWorker<{ pairs: GatesPair[]; stages: StageTimings[] }>(
      'gates',
      { dir, scenePath: scene, params, windows, tilesPerRound: cfg.tiles, rounds: cfg.rounds },
      { pin: true, timeoutMs: 3_600_000 },
    );
    pairs.push(...out.pairs);
    stages.push(...out.stages);
    const o = summarize(out.pairs.map((p) => p.gatedMs / p.ungatedMs - 1));
    log(`  rep ${rep + 1}/${cfg.reps}: gates add ${pct(o.median)} per tile (median of ${o.n} pairs, ${pct(o.min)} to ${pct(o.max)})`);
  }
  const overhead = summarize(pairs.map((p) => p.gatedMs / p.ungatedMs - 1));
  const gated = summarize(pairs.map((p) => p.gatedMs));
  const ungated = summarize(pairs.map((p) => p.ungatedMs));
  const gateCalls = summarize(pairs.map((p) => p.gateCallsMs));
  const plainWrite = summarize(pairs.map((p) => p.plainWriteMs));
  // The gates' own calls against the plain write they replace, over the ungated tile: the same question, without the raster work's noise.
  const direct = (gateCalls.median - plainWrite.median) / ungated.median;
  const stage = {
    readMs: summarize(stages.map((s) => s.readMs)),
    mathMs: summarize(stages.map((s) => s.mathMs)),
    encodeMs: summarize(stages.map((s) => s.encodeMs)),
  };
  const rows: Row[] = [
    {
      section: '3 gates',
      metric: 'time added per tile by claim + create-only write + commit',
      backend: 'local',
      target: `<= +${MAX_OVERHEAD * 100}%`,
      measured: `${pct(overhead.median)} (p25 ${pct(overhead.p25)}, p75 ${pct(overhead.p75)}, n=${overhead.n} pairs): ${fmt(gated.median)} vs ${fmt(ungated.median)} ms/tile`,
      ratio: `${fmt(1 + overhead.median, 3)}x`,
      status: overhead.median <= MAX_OVERHEAD ? 'PASS' : 'MISS',
      note:
        `timed directly, the gates' calls take ${fmt(gateCalls.median)} ms against the plain write's ${fmt(plainWrite.median)} ms: ${pct(direct)} of a tile. ` +
        `Profiled, a tile is window read and decode ${fmt(stage.readMs.median)} ms, band math ${fmt(stage.mathMs.median)} ms, COG encode ${fmt(stage.encodeMs.median)} ms; the plain write ${fmt(plainWrite.median)} ms` +
        (overhead.median <= MAX_OVERHEAD ? '' : '; the gates cost more than a tenth of a tile: see reports/bench.json'),
    },
  ];
  return {
    name: 'gates',
    rows,
    broken: [],
    details: {
      sceneSize: cfg.sceneSize,
      tiles: windows.length,
      rounds: cfg.rounds,
      reps: cfg.reps,
      overhead,
      directOverhead: direct,
      gatedMs: gated,
      ungatedMs: ungated,
      gateCallsMs: gateCalls,
      plainWriteMs: plainWrite,
      stages: stage,
    },
    durationSec: (performance.now() - started) / 1000,
  };
}
