import * as authorization from '@pulumi/azure-native/authorization';
import * as keyvault from '@pulumi/azure-native/keyvault';
import * as pulumi from '@pulumi/pulumi';
import { KEY_VAULT_REFERENCE_PREFIX } from '../../shared/domain/runtime-config.js';
import type { AzureStackConfig } from '../common/config.js';
import type { StandardTags } from '../common/tags.js';
import { otelEnvironment } from '../common/telemetry.js';

/**
 * The Azure side of `tessera:telemetry` (infra/common/telemetry.ts, docs/telemetry.md): app settings when the stack
 * exports OpenTelemetry, and nothing at all when it does not.
 *
 * Only `otlp` maps to Azure (parsing refuses `cloud` there): Azure Monitor takes OTLP only through an OpenTelemetry
 * Collector (its `azuremonitor` exporter, or the OTLP ingestion preview behind one), so the app exports to the
 * collector the endpoint names. The app already sends its logs to Application Insights either way.
 * Headers (an API key) go to a Key Vault of their own, and the setting is a Key Vault reference the platform
 * resolves as the app's keyVaultReferenceIdentity (the tile identity), granted Key Vault Secrets User on that one secret.
 */

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
export function azureTelemetry(
  owner: pulumi.Resource,
  name: string,
  cfg: AzureStackConfig,
  at: {
    readonly resourceGroupName: pulumi.Input<string>;
    readonly location: string;
    readonly tenantId: pulumi.Input<string>;
    /** The principal that resolves the app's Key Vault references (its keyVaultReferenceIdentity). */
    readonly reader: pulumi.Input<string>;
    /** Key Vault Secrets User's role definition id. */
    readonly roleDefinitionId: pulumi.Input<string>;
    readonly tags: StandardTags;
  },
): AzureTelemetry {
  const t = cfg.telemetry;
  switch (t.exporter) {
    case 'off':
      return { settings: {}, dependsOn: [] };
    case 'cloud':
      // parseTelemetry refuses it for Azure with the fix; reaching here is a bug, not a configuration.
      throw new Error('tessera:telemetry "cloud" has no Azure mapping: use the otlp exporter with a collector (docs/telemetry.md)');
    case 'otlp': {
      const settings = otelEnvironment(t, cfg.stack, t.endpoint);
      if (t.headers === undefined) return { settings, dependsOn: [] };
      const parent = { parent: owner };
      // As the sink URL's vault: RBAC only, soft delete, nothing but the one role assignment reads it.
      const vault = new keyvault.Vault(
        `${name}-otel`,
        {
          resourceGroupName: at.resourceGroupName,
          location: at.location,
          properties: {
            tenantId: at.tenantId,
            sku: { family: 'A', name: 'standard' },
            enableRbacAuthorization: true,
            enableSoftDelete: true,
            softDeleteRetentionInDays: 90,
            enabledForDeployment: false,
            enabledForDiskEncryption: false,
            enabledForTemplateDeployment: false,
            publicNetworkAccess: 'Enabled',
            networkAcls: { defaultAction: 'Allow', bypass: 'None' },
          },
          tags: at.tags,
        },
        parent,
      );
      const secret = new keyvault.Secret(
        `${name}-otel`,
        {
          resourceGroupName: at.resourceGroupName,
          vaultName: vault.name,
          secretName: OTLP_HEADERS_SECRET_NAME,
          properties: { value: pulumi.secret(t.headers), contentType: 'OTLP exporter headers (tessera:telemetryHeaders)' },
          tags: at.tags,
        },
        parent,
      );
      const reader = new authorization.RoleAssignment(
        `${name}-otel-reader`,
        { principalId: at.reader, principalType: 'ServicePrincipal', roleDefinitionId: at.roleDefinitionId, scope: secret.id },
        parent,
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
