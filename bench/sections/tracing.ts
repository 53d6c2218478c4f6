import { context, propagation, trace } from '@opentelemetry/api';
import { BatchSpanProcessor, InMemorySpanExporter, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../../functions/local/compose.js';
import type { WorkerSettings } from '../../shared/app/backend.js';
import { processTile } from '../../shared/app/process-tile.js';
import { inSpan } from '../../shared/app/tracing.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import { benchParams, jobsFor, sourceRef, spreadWindows } from '../lib/jobs.js';
import type { Row, SectionResult } from '../lib/report.js';
import { ensureScene, freshRunDir } from '../lib/scenes.js';
import { fmt, summarize } from '../lib/stats.js';

export interface TracingConfig {
  readonly sceneSize: number;
  /** Tile pairs (one tile untraced, one traced, order alternating), after one warm-up pair. */
  readonly pairs: number;
  /** No-op spans timed to price tracing off. */
  readonly noopSpans: number;
}

/** Spans a traced delivery makes: delivery, tile, claim, read, render, write, commit. */
const SPANS_PER_TILE = 7;
/** "None measurable": the no-op spans of a tile under a thousandth of it. */
const MAX_OFF = 0.001;

const pct = (x: number) => `${x >= 0 ? '+' : ''}${fmt(x * 100, 2)}%`;

/**
 * Section "tracing" (docs/telemetry.md): what OpenTelemetry costs a tile on the local backend, in this process.
 *
 * Off (no SDK, the core's API calls go to the no-op tracer): priced directly, the no-op span times the spans a
 * delivery makes, over the untraced tile, since a difference of two tile timings could not resolve it. On (the SDK
 * with a batch processor, as the wiring files set it up; spans kept in memory so no network is timed): tiles
 * with and without the SDK registered, in alternating pairs, each with its own job key so every tile does the
 * whole claim, render, write and commit.
 */
export async function tracing(cfg: TracingConfig, log: (line: string) => void): Promise<SectionResult> {
  const started = performance.now();
  const scenePath = await ensureScene(cfg.sceneSize, cfg.sceneSize, log);
  const backend = createLocalBackend(freshRunDir('tracing'));
  const settings: WorkerSettings = { owner: 'bench', leaseMs: 600_000, retentionMs: 3_600_000 };
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  const setTracing = (on: boolean) => {
    trace.disable();
    context.disable();
    propagation.disable();
    if (on) provider.register();
  };
  try {
    await backend.sources.importFile('scenes/tracing.tif', scenePath);
    const source = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, 'scenes/tracing.tif');
    const grid = tileGrid(cfg.sceneSize, cfg.sceneSize, tilingParams(benchParams('tracing')).tilePx);
    const windows = spreadWindows(grid, cfg.pairs + 1);
    const offMs: number[] = [];
    const onMs: number[] = [];
    for (let i = 0; i < windows.length; i++) {
      const window = windows[i];
      if (window === undefined) continue;
      for (const on of i % 2 === 0 ? [false, true] : [true, false]) {
        const [job] = jobsFor(source, benchParams(`tracing-${on ? 'on' : 'off'}`), grid, [window]);
        if (!job) throw new Error('[bench] no job for the window');
        setTracing(on);
        const t = performance.now();
        const outcome = await processTile(backend, settings, job);
        const ms = performance.now() - t;
        if (outcome.kind !== 'written') throw new Error(`[bench] a tracing tile was ${outcome.kind}, not written`);
        // The first pair warms the JIT and the raster caches up.
        if (i > 0) (on ? onMs : offMs).push(ms);
      }
    }
    setTracing(false);
    await provider.forceFlush();
    const spansPerTile = exporter.getFinishedSpans().length / (cfg.pairs + 1);

    // Tracing off: the no-op span, timed in a loop (its allocation and the promise it wraps included).
    const t = performance.now();
    for (let k = 0; k < cfg.noopSpans; k++) await inSpan('bench', {}, async () => undefined);
    const noopUs = ((performance.now() - t) * 1000) / cfg.noopSpans;

    const off = summarize(offMs);
    const on = summarize(onMs);
    const offShare = (noopUs * SPANS_PER_TILE) / 1000 / off.median;
    const pairsOverhead = summarize(onMs.map((ms, k) => ms / (offMs[k] ?? ms) - 1));
    log(`  tracing off: ${fmt(noopUs, 2)} us per no-op span; on: ${pct(pairsOverhead.median)} per tile`);
    const rows: Row[] = [
      {
        section: 'tracing',
        metric: 'time added per tile by OpenTelemetry, tracing off (no OTEL_* variable)',
        backend: 'local',
        target: 'none measurable',
        measured: `${SPANS_PER_TILE} no-op spans x ${fmt(noopUs, 2)} us = ${pct(offShare)} of a ${fmt(off.median)} ms tile`,
        ratio: `${fmt(1 + offShare, 4)}x`,
        status: offShare <= MAX_OFF ? 'PASS' : 'MISS',
        note:
          offShare <= MAX_OFF
            ? `under ${MAX_OFF * 100}% of a tile: below what the paired tile timings below can resolve`
            : 'the no-op spans cost more than a thousandth of a tile: see reports/bench.json',
      },
      {
        section: 'tracing',
        metric: 'time added per tile by OpenTelemetry, tracing on (SDK, batch processor, in-memory exporter)',
        backend: 'local',
        target: '-',
        measured: `${pct(pairsOverhead.median)} (p25 ${pct(pairsOverhead.p25)}, p75 ${pct(pairsOverhead.p75)}, n=${pairsOverhead.n} pairs): ${fmt(on.median)} vs ${fmt(off.median)} ms/tile`,
        ratio: `${fmt(1 + pairsOverhead.median, 3)}x`,
        status: 'INFO',
        note: `${fmt(spansPerTile, 1)} spans per tile (processTile: tile, claim, read, render, write, commit; a delivery adds one); the exporter's network time is not included`,
      },
    ];
    return {
      name: 'tracing',
      rows,
      broken: spansPerTile === SPANS_PER_TILE - 1 ? [] : [`a traced tile made ${spansPerTile} spans, not ${SPANS_PER_TILE - 1}`],
      details: { sceneSize: cfg.sceneSize, pairs: cfg.pairs, noopUs, offMs: off, onMs: on, overhead: pairsOverhead, spansPerTile },
      durationSec: (performance.now() - started) / 1000,
    };
  } finally {
    setTracing(false);
    await provider.shutdown();
    backend.close();
  }
}
