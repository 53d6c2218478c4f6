import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SpanStatusCode } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { type OtelSdk, setUpOpenTelemetry } from '../../functions/otel/otel-sdk.js';
import { SPAN, SPAN_ATTR } from '../../shared/app/tracing.js';

/**
 * What the trace tests share: the SDK set up with its in-memory exporters (as a wiring file would find it), a
 * summary of each delivery's span tree that checks parentage on the way, and a local OTLP/HTTP receiver for the
 * tests that let a deployed entry point set the SDK up from OTEL_* variables on its own.
 */

/** The SDK with the in-memory span exporter and a metric reader that exports only when flushed. */
export function inMemoryOtel(serviceName: string): {
  sdk: OtelSdk;
  spans: InMemorySpanExporter;
  metrics: () => Promise<Map<string, number>>;
} {
  const spans = new InMemorySpanExporter();
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const sdk = setUpOpenTelemetry(
    {},
    {
      serviceName,
      spanExporter: spans,
      metricReader: new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 }),
    },
  );
  if (!sdk) throw new Error('setUpOpenTelemetry returned no SDK although an exporter was given');
  return {
    sdk,
    spans,
    metrics: async () => {
      await sdk.flush();
      // Cumulative: the last export holds every counter's running total.
      const last = exporter.getMetrics().at(-1);
      const sums = new Map<string, number>();
      for (const sm of last?.scopeMetrics ?? [])
        for (const m of sm.metrics)
          sums.set(
            m.descriptor.name,
            m.dataPoints.reduce((n, p) => n + Number(p.value), 0),
          );
      return sums;
    },
  };
}

/** One step below a tile span: its name without `tessera.`, and its outcome when it set one (`claim:held`). */
const stepLabel = (s: ReadableSpan): string => {
  const name = s.name.replace(/^tessera\./, '');
  const outcome = s.attributes[SPAN_ATTR.outcome];
  return outcome === undefined ? name : `${name}:${String(outcome)}`;
};

const byStart = (a: ReadableSpan, b: ReadableSpan) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1];

export interface TileTrace {
  readonly jobKey: string;
  readonly owner: string;
  readonly tile: string;
  readonly outcome: string;
  /** Epoch ms, once the claim (or a takeover) set a lease. */
  readonly leaseDeadline: number | undefined;
  /** The tile span's children in start order, as {@link stepLabel} writes them. */
  readonly steps: readonly string[];
}

export interface DeliveryTrace {
  readonly deliveryId: string;
  readonly receiveCount: number | undefined;
  readonly verdict: string;
  readonly outcome: string | undefined;
  readonly jobKey: string | undefined;
  readonly error: boolean;
  readonly tile: TileTrace | undefined;
}

/**
 * Each delivery span's tree, summarised, in start order. Throws unless the parentage is right: every delivery is
 * the root of its own trace; its one child (if any) is the tile span; the tile's children are the steps, below which
 * only client libraries' spans may be (the Firestore SDK's, on GCP); and every span exported belongs to one of these trees.
 */
export function deliveryTraces(spans: readonly ReadableSpan[]): DeliveryTrace[] {
  const childrenOf = (parent: ReadableSpan) =>
    spans.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId).sort(byStart);
  const fail = (what: string, span: ReadableSpan) => {
    throw new Error(`${what}: ${span.name} ${JSON.stringify(span.attributes)}`);
  };
  let seen = 0;
  const out: DeliveryTrace[] = [];
  for (const delivery of spans.filter((s) => s.name === SPAN.delivery).sort(byStart)) {
    if (delivery.parentSpanContext !== undefined) fail('a delivery span has a parent', delivery);
    const children = childrenOf(delivery);
    if (children.length > 1) fail(`a delivery span has ${children.length} children`, delivery);
    seen += 1 + children.length;
    const [tileSpan] = children;
    let tile: TileTrace | undefined;
    if (tileSpan) {
      if (tileSpan.name !== SPAN.tile) fail('the child of a delivery is not a tile span', tileSpan);
      if (tileSpan.spanContext().traceId !== delivery.spanContext().traceId) fail('a tile span is in another trace', tileSpan);
      const steps = childrenOf(tileSpan);
      for (const step of steps) {
        if (!step.name.startsWith('tessera.')) fail('a child of a tile span is not a step', step);
        // Below a step: only the client libraries' own spans (the Firestore SDK traces its calls), in the same trace.
        const below = [step];
        for (let span = below.pop(); span !== undefined; span = below.pop()) {
          seen += 1;
          if (span.spanContext().traceId !== delivery.spanContext().traceId) fail('a span below a tile is in another trace', span);
          if (span !== step && span.name.startsWith('tessera.')) fail('a Tessera span is below a step', span);
          below.push(...childrenOf(span));
        }
      }
      const deadline = tileSpan.attributes[SPAN_ATTR.leaseDeadline];
      tile = {
        jobKey: String(tileSpan.attributes[SPAN_ATTR.jobKey]),
        owner: String(tileSpan.attributes[SPAN_ATTR.claimOwner]),
        tile: String(tileSpan.attributes[SPAN_ATTR.tile]),
        outcome: String(tileSpan.attributes[SPAN_ATTR.outcome]),
        leaseDeadline: deadline === undefined ? undefined : Number(deadline),
        steps: steps.map(stepLabel),
      };
    }
    const a = delivery.attributes;
    out.push({
      deliveryId: String(a[SPAN_ATTR.deliveryId]),
      receiveCount: a[SPAN_ATTR.receiveCount] === undefined ? undefined : Number(a[SPAN_ATTR.receiveCount]),
      verdict: String(a[SPAN_ATTR.verdict]),
      outcome: a[SPAN_ATTR.outcome] === undefined ? undefined : String(a[SPAN_ATTR.outcome]),
      jobKey: a[SPAN_ATTR.jobKey] === undefined ? undefined : String(a[SPAN_ATTR.jobKey]),
      error: delivery.status.code === SpanStatusCode.ERROR,
      tile,
    });
  }
  if (seen !== spans.length) {
    const orphans = spans.filter(
      (s) => s.name !== SPAN.delivery && !spans.some((p) => p.spanContext().spanId === s.parentSpanContext?.spanId),
    );
    throw new Error(`${spans.length - seen} spans are outside every delivery tree: ${orphans.map((s) => s.name).join(', ')}`);
  }
  return out;
}

/** The steps of a tile that went the whole way: claimed, read, rendered, wrote (`write`), committed (`commit`). */
export const fullSteps = (write: 'written' | 'already-present', commit: 'committed' | 'lease-stolen'): string[] => [
  'claim:claimed',
  'read',
  'render',
  `write:${write}`,
  `commit:${commit}`,
];

/** One request an OTLP exporter made. */
export interface OtlpRequest {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
}

/** A local OTLP/HTTP receiver (JSON, the encoding the SDK's http exporters send): records every request, answers 200. */
export async function startOtlpReceiver(): Promise<{ url: string; requests: OtlpRequest[]; close(): Promise<void> }> {
  const requests: OtlpRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Not JSON (a protobuf exporter): kept as text, and the test's expectations say so.
      }
      requests.push({ path: req.url ?? '', headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // The exporters keep their connections alive: close them too, or close() waits for their idle timeout.
        server.closeAllConnections();
      }),
  };
}

interface OtlpAttribute {
  readonly key: string;
  readonly value: { readonly stringValue?: string; readonly intValue?: string | number };
}

/** Span names and the service name of every `/v1/traces` export a receiver got. */
export function exportedSpans(
  requests: readonly OtlpRequest[],
): { service: string | undefined; name: string; attributes: Record<string, unknown> }[] {
  type Body = {
    resourceSpans?: {
      resource?: { attributes?: OtlpAttribute[] };
      scopeSpans?: { spans?: { name: string; attributes?: OtlpAttribute[] }[] }[];
    }[];
  };
  const value = (a: OtlpAttribute) => a.value.stringValue ?? a.value.intValue;
  return requests
    .filter((r) => r.path === '/v1/traces')
    .flatMap((r) =>
      ((r.body as Body).resourceSpans ?? []).flatMap((rs) => {
        const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue;
        return (rs.scopeSpans ?? []).flatMap((ss) =>
          (ss.spans ?? []).map((s) => ({
            service,
            name: s.name,
            attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, value(a)])),
          })),
        );
      }),
    );
}

/** Metric names of every `/v1/metrics` export a receiver got. */
export function exportedMetricNames(requests: readonly OtlpRequest[]): string[] {
  type Body = { resourceMetrics?: { scopeMetrics?: { metrics?: { name: string }[] }[] }[] };
  return requests
    .filter((r) => r.path === '/v1/metrics')
    .flatMap((r) =>
      ((r.body as Body).resourceMetrics ?? []).flatMap((rm) =>
        (rm.scopeMetrics ?? []).flatMap((sm) => (sm.metrics ?? []).map((m) => m.name)),
      ),
    );
}
