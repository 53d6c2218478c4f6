import * as authorization from '@pulumi/azure-native/authorization';
import * as keyvault from '@pulumi/azure-native/keyvault';
import * as pulumi from '@pulumi/pulumi';
import type { StandardTags } from '../common/tags.js';

/** Where a secret's vault goes, and who alone may read the secret. */
export interface SecretVaultPlace {
  readonly resourceGroupName: pulumi.Input<string>;
  readonly location: string;
  readonly tenantId: pulumi.Input<string>;
  /** The principal that resolves the app's Key Vault references (its keyVaultReferenceIdentity). */
  readonly reader: pulumi.Input<string>;
  /** Key Vault Secrets User's role definition id. */
  readonly roleDefinitionId: pulumi.Input<string>;
  readonly tags: StandardTags;
}

/** The secret itself: its name in the vault, its value (stored as a Pulumi secret) and what it is. */
export interface SecretVaultEntry {
  readonly secretName: string;
  readonly value: pulumi.Input<string>;
  readonly contentType: string;
}

/**
 * A Key Vault holding one secret (its value a Pulumi secret, so encrypted in the state), and the one role on it: Key
 * Vault Secrets User, scoped to that secret, for the identity that resolves the reference. The vault, the secret and
 * the role assignment are named `name`, `name` and `name-reader`. Used for the PostGIS sink URL and the OTLP headers.
 * - RBAC authorization: no access policy can grant anything beside that role assignment.
 * - Soft delete (90 days) keeps a deleted secret or vault recoverable; purge protection stays off so that the
 *   operator may purge what `pulumi destroy` soft-deleted (a new vault gets a new name anyway).
 * - Network: the platform resolves references from outside any virtual network on Consumption, so the vault takes
 *   public traffic (authorised by Entra ID and the role above), with no trusted-service bypass.
 * - Not enabled for deployments, disk encryption or template deployments: nothing else reads it.
 */
export function secretVault(
  owner: pulumi.Resource,
  name: string,
  entry: SecretVaultEntry,
  at: SecretVaultPlace,
): { readonly vault: keyvault.Vault; readonly secret: keyvault.Secret; readonly reader: authorization.RoleAssignment } {
  const parent = { parent: owner };
  const vault = new keyvault.Vault(
    name,
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
    name,
    {
      resourceGroupName: at.resourceGroupName,
      vaultName: vault.name,
      secretName: entry.secretName,
      properties: { value: pulumi.secret(entry.value), contentType: entry.contentType },
      tags: at.tags,
    },
    parent,
  );
  const reader = new authorization.RoleAssignment(
    `${name}-reader`,
    { principalId: at.reader, principalType: 'ServicePrincipal', roleDefinitionId: at.roleDefinitionId, scope: secret.id },
    parent,
  );
  return { vault, secret, reader };
}
