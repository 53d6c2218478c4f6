import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';

/**
 * Whether a process sets up the OpenTelemetry SDK, and the one it set up: no SDK import here, so a wiring file
 * can ask before it loads otel-sdk.ts. Every wiring file loads the SDK's modules (some 600 files, about 0.15 s
 * in every process it starts, a local worker's or a cloud function's cold start) only when this says so
 * (functions/<cloud>/compose.ts, functions/local/compose.ts, docs/packages.md "Start-up").
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

/** What a wiring file sets the SDK up with (otel-sdk.ts OtelSetupOptions, less a test's own exporters). */
export interface OtelWiringOptions {
  /** `service.name` unless OTEL_SERVICE_NAME says otherwise: e.g. `tessera-tile`. */
  readonly serviceName: string;
  /** The OTLP exporters' headers, looked up before each export, for a cloud that needs them (otlp-headers.ts OtlpHeaderSource). */
  readonly otlpHeaders?: (() => Promise<Readonly<Record<string, string>>>) | undefined;
}

type SetUp = (env: Env, options: OtelWiringOptions) => OtelSdk | undefined;

/** otel-sdk.ts's setUpOpenTelemetry, recorded when that module is loaded: a wiring file reaches it through here. */
let loadedSetUp: SetUp | undefined;

/** Called by otel-sdk.ts as it loads. */
export function recordOtelSetUp(setUp: SetUp): void {
  loadedSetUp = setUp;
}

/**
 * The SDK of a runtime a cloud wiring file composes from `env`: the one this process set up already (a test's, with
 * its in-memory exporter), else one set up now when `env` asks for it ({@link otelRequested}), else none. The wiring
 * file loaded otel-sdk.ts before this runs (a dynamic import at its top), when process.env asked for it: a function
 * whose OTEL_* variables are unset never loads the SDK.
 */
export function otelSdkFor(env: Env, options: OtelWiringOptions): OtelSdk | undefined {
  const sdk = installed;
  if (sdk) return sdk;
  if (!otelRequested(env)) return undefined;
  if (loadedSetUp === undefined) {
    throw new InvalidParamsError(
      'the environment a runtime is composed from asks for OpenTelemetry (OTEL_* variables), but the SDK was not loaded: ' +
        'process.env asked for none when the wiring file was loaded. Set the OTEL_* variables in process.env before importing it, or import functions/otel/otel-sdk.js first',
    );
  }
  return loadedSetUp(env, options);
}

/**
 * Headers in OTEL_EXPORTER_OTLP_HEADERS' format (`key=value,key2=value2`, values percent-encoded), as a record.
 * Throws on a pair without `=`, naming its position only: the values are keys. Here, not in otlp-headers.ts, so a
 * wiring file reads its secret's headers without loading the OTLP exporters (otlp-headers.ts re-exports it).
 */
export function parseOtlpHeaders(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  text.split(',').forEach((pair, i) => {
    if (pair.trim() === '') return;
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`OTLP headers: pair ${i + 1} is not key=value`);
    out[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim());
  });
  return out;
}
