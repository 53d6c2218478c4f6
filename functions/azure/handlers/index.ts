/**
 * The Azure app's entry point (infra/common/packaging.ts HANDLER_ENTRIES.azure):
 * loading it registers every function with the v4 programming model.
 */
import { azureMonitorRequested } from '../azure-monitor-env.js';
import { registerFunctions } from './register.js';

// Application Insights' distro (tessera:telemetry `cloud`, docs/telemetry.md), when the app settings ask for it: loaded
// here, not in compose.ts, so only this bundle holds it (the CLI's `tessera verify` composes Azure runtimes too). It is
// set up when the first function composes its runtime (compose.ts azureOtelSdkFor).
if (azureMonitorRequested(process.env)) await import('../azure-monitor.js');

registerFunctions();
