import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trace } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalBackend } from '../../../functions/local/compose.js';
import { runWorker } from '../../../functions/local/worker-pool.js';
import { type OtelSdk, otelRequested, setUpOpenTelemetry } from '../../../functions/otel/otel-sdk.js';
import type { WorkerSettings } from '../../../shared/app/backend.js';
import { deliveryOwner } from '../../../shared/app/deliveries.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { parseTileJob } from '../../../shared/app/tile-job.js';
import { SPAN, SPAN_ATTR } from '../../../shared/app/tracing.js';
import type { ProcessingParams } from '../../../shared/domain/job-key.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { tileGrid } from '../../../shared/domain/tile-grid.js';
import { FakeClock } from '../../support/fake-clock.js';
import { putSyntheticScene } from '../../support/local-scene.js';

const params: ProcessingParams = { ...DEFAULT_PARAMS, tile_px: 128 };
const SCENE = { width: 256, height: 128 } as const; // a 1 x 2 grid
const TILES = tileGrid(SCENE.width, SCENE.height, 128).count;
const settings: WorkerSettings = { owner: 'w1', leaseMs: 60_000, retentionMs: 3_600_000 };

/** Every span's children, by the parent's span id. */
function childrenOf(spans: readonly ReadableSpan[], parent: ReadableSpan): ReadableSpan[] {
  return spans
    .filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId)
    .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
}

let sdk: OtelSdk | undefined;
afterEach(async () => {
  await sdk?.shutdown();
  sdk = undefined;
});

describe('OpenTelemetry', () => {
  it.each([
    [{}, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318' }, true],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://localhost:4318/v1/traces' }, true],
    [{ OTEL_TRACES_EXPORTER: 'console' }, true],
    [{ OTEL_TRACES_EXPORTER: 'none', OTEL_METRICS_EXPORTER: 'none' }, false],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318', OTEL_SDK_DISABLED: 'true' }, false],
  ])('the environment %j asks for it: %s', (env, expected) => {
    expect(otelRequested(env)).toBe(expected);
  });

  it('stays off with no OTEL_* variable: no SDK, the API answers with non-recording spans', () => {
    expect(setUpOpenTelemetry({}, { serviceName: 'test' })).toBeUndefined();
    expect(trace.getTracer('tessera').startSpan('x').isRecording()).toBe(false);
  });

  it('a local run traces each delivery: tile span with job key, owner, lease deadline, tile and outcome; steps as its children; counters as metrics', async () => {
    const spans = new InMemorySpanExporter();
    const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    sdk = setUpOpenTelemetry(
      {},
      {
        serviceName: 'tessera-test',
        spanExporter: spans,
        metricReader: new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 }),
      },
    );
    const clock = new FakeClock();
    const logs = new JsonTelemetry();
    // The wiring file finds the SDK set up and adds the metrics to the telemetry it is given.
    const b = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-otel-')), { clock, telemetry: logs });
    try {
      const source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', SCENE);
      await fanOutScene(b, { source, params });
      // A duplicate of the first job, as at-least-once queues deliver: its claim is refused (done).
      const [first] = await b.queue.receive(1, 0);
      if (!first) throw new Error('fan-out enqueued nothing');
      await b.queue.sendBatch([{ jobKey: parseTileJob(first.body).jobKey, body: first.body }]);
      const stats = await runWorker(b, settings, { pollMs: 1 });
      expect(stats).toMatchObject({ acked: TILES + 1, retried: 0, poison: 0 });
    } finally {
      b.close();
    }

    const finished = spans.getFinishedSpans();
    const deliveries = finished.filter((s) => s.name === SPAN.delivery);
    expect(deliveries).toHaveLength(TILES + 1);
    const outcomes: string[] = [];
    for (const delivery of deliveries) {
      expect(delivery.parentSpanContext).toBeUndefined();
      expect(delivery.attributes[SPAN_ATTR.verdict]).toBe('ack');
      const [tile, ...others] = childrenOf(finished, delivery);
      expect(others).toEqual([]);
      expect(tile?.name).toBe(SPAN.tile);
      if (!tile) continue;
      expect(tile.spanContext().traceId).toBe(delivery.spanContext().traceId);
      const deliveryId = delivery.attributes[SPAN_ATTR.deliveryId] as string;
      const job = tile.attributes[SPAN_ATTR.jobKey];
      expect(delivery.attributes[SPAN_ATTR.jobKey]).toBe(job);
      expect(tile.attributes[SPAN_ATTR.claimOwner]).toBe(deliveryOwner(deliveryId, settings.owner));
      expect(tile.attributes[SPAN_ATTR.tile]).toMatch(/^0_[01]$/);
      const outcome = tile.attributes[SPAN_ATTR.outcome] as string;
      expect(delivery.attributes[SPAN_ATTR.outcome]).toBe(outcome);
      outcomes.push(outcome);
      const steps = childrenOf(finished, tile);
      if (outcome === 'written') {
        expect(tile.attributes[SPAN_ATTR.leaseDeadline]).toBe(clock.now() + settings.leaseMs);
        expect(steps.map((s) => s.name)).toEqual([SPAN.claim, SPAN.read, SPAN.render, SPAN.write, SPAN.commit]);
        expect(steps.map((s) => s.attributes[SPAN_ATTR.outcome] ?? '-')).toEqual(['claimed', '-', '-', 'written', 'committed']);
      } else {
        // The duplicate: refused at the claim, no reads, no lease of its own.
        expect(tile.attributes[SPAN_ATTR.leaseDeadline]).toBeUndefined();
        expect(steps.map((s) => `${s.name}:${String(s.attributes[SPAN_ATTR.outcome])}`)).toEqual([`${SPAN.claim}:done`]);
      }
    }
    expect(outcomes.sort()).toEqual([...Array(TILES).fill('written'), 'claim-rejected'].sort());

    await sdk?.flush();
    const sums = new Map<string, number>();
    for (const rm of metricExporter.getMetrics())
      for (const sm of rm.scopeMetrics)
        for (const m of sm.metrics)
          sums.set(
            m.descriptor.name,
            m.dataPoints.reduce((n, p) => n + Number(p.value), 0),
          );
    // The same figures as the logs' counters, under their names.
    expect(logs.counters()).toMatchObject({ written: TILES, committed: TILES, 'claim-rejected': 1, enqueued: TILES });
    expect(Object.fromEntries(['written', 'committed', 'claim-rejected', 'enqueued'].map((c) => [c, sums.get(`tessera.${c}`)]))).toEqual({
      written: TILES,
      committed: TILES,
      'claim-rejected': 1,
      enqueued: TILES,
    });
  });
});
