import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { InstrumentType, PushMetricExporter, ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/**
 * OTLP exporters whose headers are looked up before each export, for what OTEL_EXPORTER_OTLP_HEADERS cannot hold:
 * a token that expires (Google's Telemetry API takes the function's own OAuth token, functions/gcp/telemetry-auth.ts)
 * or a key kept in a secret store rather than in the environment (AWS, functions/aws/compose.ts; docs/telemetry.md).
 * The SDK's own exporters take fixed headers, so one is built per set of headers and replaced when they change.
 * (Parsing the headers' text is otel-env.ts's parseOtlpHeaders: a wiring file needs it without loading exporters.)
 */
export type OtlpHeaderSource = () => Promise<Readonly<Record<string, string>>>;

/** OpenTelemetry's ExportResultCode.FAILED (in @opentelemetry/core, which this package does not depend on directly). */
const EXPORT_FAILED = 1;

/** The exporter for the current headers; a change of headers replaces it (the old one finishes what it sends). */
class ByHeaders<E extends { shutdown(): Promise<void>; forceFlush?(): Promise<void> }> {
  #current: { readonly key: string; readonly exporter: E } | undefined;
  constructor(private readonly make: (headers: Record<string, string>) => E) {}

  for(headers: Readonly<Record<string, string>>): E {
    const key = JSON.stringify(Object.entries(headers).sort());
    if (this.#current?.key !== key) {
      const old = this.#current;
      this.#current = { key, exporter: this.make({ ...headers }) };
      void old?.exporter.shutdown().catch(() => undefined);
    }
    return this.#current.exporter;
  }
  async forceFlush(): Promise<void> {
    await this.#current?.exporter.forceFlush?.();
  }
  async shutdown(): Promise<void> {
    await this.#current?.exporter.shutdown();
  }
}

/** OTLP/HTTP spans with `headers()` added to each export. An export whose headers cannot be had fails, as one the receiver refused. */
export class HeaderedSpanExporter implements SpanExporter {
  readonly #exporters = new ByHeaders((headers) => new OTLPTraceExporter({ headers }));
  constructor(private readonly headers: OtlpHeaderSource) {}

  export(spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]): void {
    this.headers().then(
      (headers) => this.#exporters.for(headers).export(spans, done),
      (error: unknown) => done({ code: EXPORT_FAILED, error: error instanceof Error ? error : new Error(String(error)) }),
    );
  }
  forceFlush(): Promise<void> {
    return this.#exporters.forceFlush();
  }
  shutdown(): Promise<void> {
    return this.#exporters.shutdown();
  }
}

/** OTLP/HTTP metrics with `headers()` added to each export; temporality and aggregation as the plain exporter chooses them. */
export class HeaderedMetricExporter implements PushMetricExporter {
  readonly #exporters = new ByHeaders((headers) => new OTLPMetricExporter({ headers }));
  /** Never exports: answers the reader's questions exactly as the exporters built from the same variables do. */
  readonly #template = new OTLPMetricExporter();
  constructor(private readonly headers: OtlpHeaderSource) {}

  export(metrics: ResourceMetrics, done: Parameters<PushMetricExporter['export']>[1]): void {
    this.headers().then(
      (headers) => this.#exporters.for(headers).export(metrics, done),
      (error: unknown) => done({ code: EXPORT_FAILED, error: error instanceof Error ? error : new Error(String(error)) }),
    );
  }
  selectAggregationTemporality(instrumentType: InstrumentType) {
    return this.#template.selectAggregationTemporality(instrumentType);
  }
  selectAggregation(instrumentType: InstrumentType) {
    return this.#template.selectAggregation(instrumentType);
  }
  forceFlush(): Promise<void> {
    return this.#exporters.forceFlush();
  }
  async shutdown(): Promise<void> {
    await Promise.all([this.#exporters.shutdown(), this.#template.shutdown()]);
  }
}
