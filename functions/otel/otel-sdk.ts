import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { ConsoleMetricExporter, MeterProvider, type MetricReader, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  NodeTracerProvider,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { OtelTelemetry, tesseraCounters } from './otel-counters.js';
import { installedOtelSdk, type OtelSdk, otelRequested, recordInstalledOtelSdk, recordOtelSetUp } from './otel-env.js';
import { HeaderedMetricExporter, HeaderedSpanExporter, type OtlpHeaderSource } from './otlp-headers.js';

// Re-exported: the wiring files and tests that import them from here keep doing so.
export { installedOtelSdk, type OtelSdk, otelRequested } from './otel-env.js';

export interface OtelSetupOptions {
  /** `service.name` unless OTEL_SERVICE_NAME says otherwise: e.g. `tessera-tile`. */
  readonly serviceName: string;
  /** Replace the exporter OTEL_TRACES_EXPORTER names (a test's InMemorySpanExporter); spans are then exported at once. */
  readonly spanExporter?: SpanExporter | undefined;
  /** Replace the reader OTEL_METRICS_EXPORTER names (a test's reader). */
  readonly metricReader?: MetricReader | undefined;
  /**
   * Headers the OTLP exporters add to each export, looked up then (otlp-headers.ts): a token that expires, a key read
   * from the cloud's secret store. The wiring file of a cloud that needs them supplies them.
   */
  readonly otlpHeaders?: OtlpHeaderSource | undefined;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Set up the SDK when the environment asks for it ({@link otelRequested}), once per process; undefined otherwise.
 *
 * OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER: `otlp` (the default: OTLP over HTTP, JSON-encoded, its endpoint and headers
 * read by the exporter from OTEL_EXPORTER_OTLP_*), `console`, or `none`. Everything else standard (OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*, OTEL_METRIC_EXPORT_INTERVAL) is read by the SDK itself.
 */
export function setUpOpenTelemetry(env: Env, options: OtelSetupOptions): OtelSdk | undefined {
  const installed = installedOtelSdk();
  if (installed) return installed;
  if (!otelRequested(env) && options.spanExporter === undefined) return undefined;
  // Application Insights' exporter is the Azure functions' own (functions/azure/azure-monitor.ts): here it would export nothing.
  for (const name of ['OTEL_TRACES_EXPORTER', 'OTEL_METRICS_EXPORTER'] as const)
    if (env[name]?.trim() === 'azure_monitor')
      throw new InvalidParamsError(
        `${name}=azure_monitor is the Azure functions' exporter (Application Insights, docs/telemetry.md); this runtime exports otlp or console: set OTEL_EXPORTER_OTLP_ENDPOINT instead, or unset ${name}`,
      );
  const resource = resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || options.serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const tracesExporter = (env.OTEL_TRACES_EXPORTER || 'otlp').trim();
  const spanProcessors: SpanProcessor[] = [];
  if (options.spanExporter) spanProcessors.push(new SimpleSpanProcessor(options.spanExporter));
  else if (tracesExporter === 'console') spanProcessors.push(new SimpleSpanProcessor(new ConsoleSpanExporter()));
  else if (tracesExporter === 'otlp')
    spanProcessors.push(
      new BatchSpanProcessor(options.otlpHeaders ? new HeaderedSpanExporter(options.otlpHeaders) : new OTLPTraceExporter()),
    );
  const tracerProvider = new NodeTracerProvider({ resource, spanProcessors });
  // Registers the AsyncLocalStorage context manager too: a step's span finds its tile's, and the tile its delivery's.
  tracerProvider.register();

  const metricsExporter = (env.OTEL_METRICS_EXPORTER || 'otlp').trim();
  const readers: MetricReader[] = [];
  if (options.metricReader) readers.push(options.metricReader);
  else if (metricsExporter === 'console' || metricsExporter === 'otlp') {
    readers.push(
      new PeriodicExportingMetricReader({
        exporter:
          metricsExporter === 'console'
            ? new ConsoleMetricExporter()
            : options.otlpHeaders
              ? new HeaderedMetricExporter(options.otlpHeaders)
              : new OTLPMetricExporter(),
      }),
    );
  }
  const meterProvider = new MeterProvider({ resource, readers });
  metrics.setGlobalMeterProvider(meterProvider);
  const meter = meterProvider.getMeter('tessera');
  const counters = tesseraCounters(meter);

  const sdk: OtelSdk = {
    telemetry: (inner) => new OtelTelemetry(inner, counters),
    async flush() {
      // Telemetry never fails a delivery: an export that fails is the SDK's to report (its diag logger), not the tile's.
      await Promise.all([tracerProvider.forceFlush(), meterProvider.forceFlush()]).catch(() => undefined);
    },
    async shutdown() {
      recordInstalledOtelSdk(undefined);
      await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
      // Unregister, so a later setup (a test's, after this one's) can register its own providers.
      trace.disable();
      metrics.disable();
      context.disable();
      propagation.disable();
    },
  };
  recordInstalledOtelSdk(sdk);
  // A CLI or a local worker ends when its loop empties: export what is left then (a process.exit() skips this).
  process.once('beforeExit', () => void sdk.flush());
  return sdk;
}

// Found by the wiring files through otel-env.ts (otelSdkFor), which load this module only when OTEL_* ask for it.
recordOtelSetUp(setUpOpenTelemetry);
