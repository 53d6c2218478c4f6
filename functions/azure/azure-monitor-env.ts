import { InvalidParamsError } from '../../shared/domain/errors.js';
import { installedOtelSdk, type OtelSdk, otelSdkFor } from '../otel/otel-env.js';

/**
 * Which OpenTelemetry SDK the Azure app sets up, decided from its settings with no SDK loaded (docs/telemetry.md):
 *
 * - `OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER` = `azure_monitor` (tessera:telemetry `cloud`): Application
 *   Insights, through Microsoft's distro `@azure/monitor-opentelemetry` (azure-monitor.ts), to the component
 *   `APPLICATIONINSIGHTS_CONNECTION_STRING` names, the one the Functions host already sends the app's logs to;
 * - any other `OTEL_*` request (tessera:telemetry `otlp`): the OTLP SDK every cloud uses (functions/otel/otel-sdk.ts);
 * - neither: none, and neither is loaded.
 *
 * Nothing here loads an SDK. The OTLP one is loaded by compose.ts at its top when asked for; the distro by the app's
 * entry (functions/azure/handlers/index.ts), the only module that imports azure-monitor.ts: so only the Functions
 * bundle carries it, not the CLI package, whose `tessera verify` composes Azure runtimes too. compose.ts sets
 * either up through {@link azureOtelSdkFor}.
 */

/** The exporter name, in OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER, of Azure Monitor (infra/azure/telemetry.ts writes it). */
export const AZURE_MONITOR_EXPORTER = 'azure_monitor';
/** The setting the Functions host and the distro both read: the Application Insights component's connection string. */
export const APPLICATIONINSIGHTS_CONNECTION_STRING = 'APPLICATIONINSIGHTS_CONNECTION_STRING';

type Env = Readonly<Record<string, string | undefined>>;

/** What compose.ts sets the SDK up with. */
export interface AzureOtelOptions {
  /** `service.name` unless OTEL_SERVICE_NAME says otherwise: the function app's name. */
  readonly serviceName: string;
}

/** Whether the settings ask for Azure Monitor: either exporter variable says `azure_monitor`, and OTEL_SDK_DISABLED does not say true. */
export function azureMonitorRequested(env: Env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  return env.OTEL_TRACES_EXPORTER?.trim() === AZURE_MONITOR_EXPORTER || env.OTEL_METRICS_EXPORTER?.trim() === AZURE_MONITOR_EXPORTER;
}

/** The OTel samplers that mean "this share of traces", and the distro's own name for it. */
const RATIO_SAMPLERS = ['microsoft.fixed_percentage', 'traceidratio', 'parentbased_traceidratio'];

/** The share of traces sampled, from OTEL_TRACES_SAMPLER(_ARG); 1 without them. */
export function azureMonitorSampling(env: Env): number {
  const sampler = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase();
  if (!sampler) return 1;
  if (sampler === 'always_on' || sampler === 'parentbased_always_on') return 1;
  const fix =
    'set OTEL_TRACES_SAMPLER=microsoft.fixed_percentage and OTEL_TRACES_SAMPLER_ARG to the share of traces kept (tessera:telemetry sampling writes both)';
  if (!RATIO_SAMPLERS.includes(sampler))
    throw new InvalidParamsError(`OTEL_TRACES_SAMPLER=${sampler} is not a sampler the Azure Monitor exporter takes here: ${fix}`);
  const arg = env.OTEL_TRACES_SAMPLER_ARG?.trim();
  const ratio = arg === undefined || arg === '' ? 1 : Number(arg);
  // Application Insights samples in whole percent (the distro rounds the ratio to one): below 1 % it would keep nothing or round.
  if (!(ratio >= 0.01 && ratio <= 1))
    throw new InvalidParamsError(
      `OTEL_TRACES_SAMPLER_ARG must be a share of traces from 0.01 to 1 (Application Insights samples in whole percent), got ${JSON.stringify(arg)}: ${fix}`,
    );
  return ratio;
}

type SetUp = (env: Env, options: AzureOtelOptions) => OtelSdk;

/** azure-monitor.ts's setUpAzureMonitor, recorded when that module is loaded. */
let loadedSetUp: SetUp | undefined;

/** Called by azure-monitor.ts as it loads. */
export function recordAzureMonitorSetUp(setUp: SetUp): void {
  loadedSetUp = setUp;
}

/**
 * The SDK of a runtime composed from `env`: the one this process set up already (a test's), else Azure Monitor's or
 * the OTLP one as `env` asks, else none.
 */
export function azureOtelSdkFor(env: Env, options: AzureOtelOptions): OtelSdk | undefined {
  const installed = installedOtelSdk();
  if (installed) return installed;
  if (!azureMonitorRequested(env)) return otelSdkFor(env, options);
  if (loadedSetUp === undefined)
    throw new InvalidParamsError(
      `the settings a runtime is composed from ask for Azure Monitor (OTEL_*_EXPORTER=${AZURE_MONITOR_EXPORTER}), but its distro was not loaded: ` +
        "the app's entry (functions/azure/handlers/index.ts) loads it when process.env asks; elsewhere import functions/azure/azure-monitor.js " +
        'first, or unset the exporter variables',
    );
  return loadedSetUp(env, options);
}
