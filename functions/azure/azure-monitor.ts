import { shutdownAzureMonitor, useAzureMonitor } from '@azure/monitor-opentelemetry';
import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import { OtelTelemetry, tesseraCounters } from '../otel/otel-counters.js';
import { installedOtelSdk, type OtelSdk, recordInstalledOtelSdk } from '../otel/otel-env.js';
import {
  APPLICATIONINSIGHTS_CONNECTION_STRING,
  AZURE_MONITOR_EXPORTER,
  type AzureOtelOptions,
  azureMonitorSampling,
  recordAzureMonitorSetUp,
} from './azure-monitor-env.js';

/**
 * Traces and metrics to Application Insights (tessera:telemetry `cloud` on Azure, docs/telemetry.md), through
 * Microsoft's GA distro `@azure/monitor-opentelemetry`: its exporters send the same spans and counters the OTLP SDK
 * sends (otel-sdk.ts), as Application Insights envelopes, to the component `APPLICATIONINSIGHTS_CONNECTION_STRING` names.
 *
 * Imported only by the app's entry (functions/azure/handlers/index.ts), when the app settings ask for it: only the
 * Azure archive holds it, in chunks of its own that a function with other settings never reads.
 *
 * The distro is set up to add nothing of its own, so what leaves is what the OTLP SDK sends:
 * - no instrumentation (http, Azure SDK, databases, console): their spans would sit below the steps, and the
 *   Functions host already reports each invocation and its logs to the same component;
 * - no standard metrics, performance counters or Live Metrics (the host reports requests and counters already;
 *   Live Metrics would poll its own endpoint every second);
 * - ratio sampling, never its default rate limit (5 traces a second would drop deliveries under load).
 * Left as Microsoft ships it: failed exports kept on local disk and retried, and the exporter's statsbeat and hourly
 * settings poll (APPLICATION_INSIGHTS_NO_STATSBEAT=true turns the statsbeat off).
 */

type Env = Readonly<Record<string, string | undefined>>;

/** What the SDK's tracer and meter providers have, and the API's types do not show. */
interface Flushable {
  forceFlush(): Promise<void>;
}

const flushable = (p: unknown): p is Flushable => typeof (p as Partial<Flushable> | undefined)?.forceFlush === 'function';

/**
 * Set the distro up from `env` (once per process: a second call returns the first SDK), exporting to the component
 * `APPLICATIONINSIGHTS_CONNECTION_STRING` names. Throws an InvalidParamsError naming the fix when a setting is missing
 * or asks for what the distro cannot do.
 */
export function setUpAzureMonitor(env: Env, options: AzureOtelOptions): OtelSdk {
  const installed = installedOtelSdk();
  if (installed) return installed;
  const connectionString = env[APPLICATIONINSIGHTS_CONNECTION_STRING]?.trim();
  if (!connectionString)
    throw new InvalidParamsError(
      `OTEL_*_EXPORTER=${AZURE_MONITOR_EXPORTER} exports to Application Insights, but ${APPLICATIONINSIGHTS_CONNECTION_STRING} is not set: ` +
        "set it to the component's connection string (infra/azure sets it on the app), or use OTEL_EXPORTER_OTLP_ENDPOINT",
    );
  for (const name of ['OTEL_TRACES_EXPORTER', 'OTEL_METRICS_EXPORTER'] as const) {
    const value = env[name]?.trim();
    if (value && value !== AZURE_MONITOR_EXPORTER)
      throw new InvalidParamsError(
        `${name}=${value}, but the other exporter variable is ${AZURE_MONITOR_EXPORTER}: Azure Monitor exports traces and metrics together; set both to ${AZURE_MONITOR_EXPORTER}, or neither`,
      );
  }
  const samplingRatio = azureMonitorSampling(env);
  const off = { enabled: false };
  useAzureMonitor({
    azureMonitorExporterOptions: { connectionString },
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES still win: the SDK merges its env detector over this.
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    samplingRatio,
    tracesPerSecond: 0,
    enableLiveMetrics: false,
    enableStandardMetrics: false,
    enablePerformanceCounters: false,
    instrumentationOptions: {
      http: off,
      azureSdk: off,
      mongoDb: off,
      mySql: off,
      postgreSql: off,
      redis: off,
      redis4: off,
      bunyan: off,
      winston: off,
      console: off,
    },
  });
  // The distro registered its providers globally (the API's ProxyTracerProvider holds the SDK's): flush through them.
  const proxy = trace.getTracerProvider() as { getDelegate?: () => unknown };
  const tracerProvider = proxy.getDelegate?.() ?? proxy;
  const meterProvider = metrics.getMeterProvider();
  if (!flushable(tracerProvider) || !flushable(meterProvider))
    throw new InvalidParamsError(
      'useAzureMonitor registered no SDK tracer or meter provider (OTEL_SDK_DISABLED=true reaches the distro): unset OTEL_SDK_DISABLED, or the exporter variables',
    );
  const counters = tesseraCounters(meterProvider.getMeter('tessera'));
  let closed = false;
  const sdk: OtelSdk = {
    telemetry: (inner) => new OtelTelemetry(inner, counters),
    async flush() {
      if (closed) return;
      // As otel-sdk.ts: an export that fails is the distro's to report and retry (it keeps the batch on disk), not the tile's.
      await Promise.all([tracerProvider.forceFlush(), meterProvider.forceFlush()]).catch(() => undefined);
    },
    async shutdown() {
      closed = true;
      recordInstalledOtelSdk(undefined);
      await shutdownAzureMonitor();
      trace.disable();
      metrics.disable();
      context.disable();
      propagation.disable();
    },
  };
  recordInstalledOtelSdk(sdk);
  process.once('beforeExit', () => void sdk.flush());
  return sdk;
}

// Found by compose.ts through azure-monitor-env.ts (azureOtelSdkFor), which loads this module only when the settings ask.
recordAzureMonitorSetUp(setUpAzureMonitor);
