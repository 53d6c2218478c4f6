import * as pulumi from '@pulumi/pulumi';
import { KEY_VAULT_REFERENCE_PREFIX } from '../../shared/domain/runtime-config.js';
import type { AzureStackConfig } from '../common/config.js';
import { otelEnvironment } from '../common/telemetry.js';
import { type SecretVaultPlace, secretVault } from './secret-vault.js';

/**
 * The Azure side of `tessera:telemetry` (infra/common/telemetry.ts, docs/telemetry.md): app settings when the stack
 * exports OpenTelemetry, and nothing at all when it does not.
 *
 * - `cloud`: Azure Monitor. The app's functions export to the stack's Application Insights component (workspace-based,
 *   declared by tiling-stack.ts whatever this setting says: the Functions host sends the app's logs there, and the
 *   lease-stolen alert reads them), through Microsoft's distro (functions/azure/azure-monitor.ts). So `cloud` declares
 *   no resource and no grant: it adds the exporter settings, and the app already has the component's connection
 *   string in `APPLICATIONINSIGHTS_CONNECTION_STRING`, as a plain setting: Microsoft documents its ikey as an
 *   identifier, "not considered a secret" (docs/telemetry.md). One component keeps a delivery's spans with the host's
 *   request and log lines of the same invocation.
 * - `otlp`: the collector the endpoint names. Headers (an API key) go to a Key Vault of their own, and the setting is
 *   a Key Vault reference the platform resolves as the app's keyVaultReferenceIdentity (the tile identity), granted
 *   Key Vault Secrets User on that one secret.
 */

/** OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER of a `cloud` stack (functions/azure/azure-monitor-env.ts reads it; a test keeps the two equal). */
export const AZURE_MONITOR_EXPORTER = 'azure_monitor';
/** The distro's name for ratio sampling: Application Insights' own sampler (whole percent, counts scaled by its sample rate). */
export const AZURE_MONITOR_SAMPLER = 'microsoft.fixed_percentage';

/** The Key Vault secret holding the OTLP exporter's headers (tessera:telemetryHeaders). */
export const OTLP_HEADERS_SECRET_NAME = 'otlp-headers';
/** The app setting the platform fills from the secret; the SDK's exporters read it. */
export const OTLP_HEADERS_SETTING = 'OTEL_EXPORTER_OTLP_HEADERS';

export interface AzureTelemetry {
  /** What the app adds to its settings; {} when off. */
  readonly settings: Readonly<Record<string, pulumi.Input<string>>>;
  /** What the app is created after (the reader's role on the headers secret, so the reference resolves at its first start). */
  readonly dependsOn: readonly pulumi.Resource[];
}

/** Declare what `cfg.telemetry` asks for on Azure, under `owner`. */
export function azureTelemetry(owner: pulumi.Resource, name: string, cfg: AzureStackConfig, at: SecretVaultPlace): AzureTelemetry {
  const t = cfg.telemetry;
  switch (t.exporter) {
    case 'off':
      return { settings: {}, dependsOn: [] };
    case 'cloud': {
      const { OTEL_TRACES_SAMPLER: _otlpSampler, OTEL_TRACES_SAMPLER_ARG: ratio, ...common } = otelEnvironment(t, cfg.stack, undefined);
      return {
        settings: {
          OTEL_TRACES_EXPORTER: AZURE_MONITOR_EXPORTER,
          OTEL_METRICS_EXPORTER: AZURE_MONITOR_EXPORTER,
          ...common,
          ...(ratio === undefined ? {} : { OTEL_TRACES_SAMPLER: AZURE_MONITOR_SAMPLER, OTEL_TRACES_SAMPLER_ARG: ratio }),
        },
        dependsOn: [],
      };
    }
    case 'otlp': {
      const settings = otelEnvironment(t, cfg.stack, t.endpoint);
      if (t.headers === undefined) return { settings, dependsOn: [] };
      // As the sink URL's vault: RBAC only, soft delete, nothing but the one role assignment reads it.
      const { secret, reader } = secretVault(
        owner,
        `${name}-otel`,
        { secretName: OTLP_HEADERS_SECRET_NAME, value: t.headers, contentType: 'OTLP exporter headers (tessera:telemetryHeaders)' },
        at,
      );
      return {
        settings: {
          ...settings,
          // Pinned to the version the stack wrote: a rotation through `pulumi up` changes the setting and restarts the app.
          [OTLP_HEADERS_SETTING]: pulumi.interpolate`${KEY_VAULT_REFERENCE_PREFIX}SecretUri=${secret.properties.secretUriWithVersion})`,
        },
        dependsOn: [reader],
      };
    }
  }
}
