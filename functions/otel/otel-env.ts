import type { Telemetry } from '../../shared/ports/telemetry.port.js';

/**
 * Whether a process sets up the OpenTelemetry SDK, and the one it set up: no SDK import here, so a wiring file
 * can ask before it loads otel-sdk.ts. The local runtime loads the SDK's modules (some 600 files, about 0.15 s
 * in every process it starts) only when this says so (functions/local/compose.ts, docs/packages.md "Start-up").
 */

/**
 * The OpenTelemetry SDK of one process, set up by a wiring file (functions/<cloud>/compose.ts,
 * functions/local/compose.ts) only when the standard `OTEL_*` variables ask for it (docs/telemetry.md).
 * The core emits spans through `@opentelemetry/api` alone (shared/app/tracing.ts); this is where they go.
 */
export interface OtelSdk {
  /** Counters as OTel metrics as well: `tessera.<counter>` (the names the logs count under), and the logs as before. */
  telemetry(inner: Telemetry): Telemetry;
  /**
   * Export what is buffered now. A handler awaits it before it answers: Lambda freezes the process, and Cloud
   * Run and Azure Functions throttle its CPU, once the answer is sent, so a batch left for later may never leave.
   */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Whether the environment asks for OpenTelemetry: an OTLP endpoint, or an exporter other than `none`, and not
 * OTEL_SDK_DISABLED. With none of them the SDK is never loaded into the tile path: the API stays a no-op.
 */
export function otelRequested(env: Env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporter = (name: string | undefined) => name !== undefined && name.trim() !== '' && name.trim() !== 'none';
  return (
    Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) ||
    exporter(env.OTEL_TRACES_EXPORTER) ||
    exporter(env.OTEL_METRICS_EXPORTER)
  );
}

/** One SDK per process: compose is called once per runtime, and tests compose many in one process. */
let installed: OtelSdk | undefined;

/** The SDK this process set up (otel-sdk.ts setUpOpenTelemetry), if any: e.g. a test's, with its in-memory exporter. */
export function installedOtelSdk(): OtelSdk | undefined {
  return installed;
}

/** Recorded by otel-sdk.ts when it sets an SDK up, and cleared when that one shuts down. */
export function recordInstalledOtelSdk(sdk: OtelSdk | undefined): void {
  installed = sdk;
}
