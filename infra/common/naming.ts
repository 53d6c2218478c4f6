import { createHash } from 'node:crypto';
import type { Cloud } from './config.js';

/**
 * Names. Most resources are auto-named by Pulumi (logical name plus a random
 * suffix), which keeps globally unique names (buckets, function apps) from
 * colliding and lets a replacement be created before the old one is deleted.
 * The helpers here cover the names a cloud constrains or that other
 * resources must know up front.
 */

/** A short, stable hex digest of the parts, for names that must be unique but deterministic. */
export function shortHash(parts: readonly string[], length = 10): string {
  return createHash('sha256').update(parts.join('\n'), 'utf8').digest('hex').slice(0, length);
}

/** The stack name reduced to lowercase letters, digits and single hyphens. */
export function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/** Logical name of a resource in a stack: `<stack>-<what>`, readable in `pulumi stack` output. */
export function logicalName(stack: string, what: string): string {
  return `${slug(stack)}-${what}`;
}

/**
 * An Azure storage account name: 3-24 lowercase letters and digits, unique in
 * all of Azure. Derived from the organization, project and stack so that a
 * redeploy keeps the same account; `tessera:azureStorageAccountName` overrides it
 * when the derived name is taken.
 */
export function azureStorageAccountName(organization: string, project: string, stack: string): string {
  return `tsr${shortHash([organization, project, stack], 12)}`;
}

/** The Functions host's own storage account name (AzureWebJobsStorage), derived like the data account's. */
export function azureHostStorageAccountName(organization: string, project: string, stack: string): string {
  return `tsh${shortHash([organization, project, stack, 'host'], 12)}`;
}

/**
 * A GCP service account id (6-30 characters, lowercase letters, digits and
 * hyphens, starting with a letter). Unique per project, so it carries the
 * stack: two regions' stacks may share one project.
 */
export function gcpServiceAccountId(stack: string, role: string): string {
  const readable = `ts-${slug(stack)}-${role}`;
  if (readable.length <= 30) return readable;
  return `ts-${shortHash([stack], 8)}-${role}`.slice(0, 30);
}

/**
 * A GCP project custom role id (3-64 letters, digits, underscores and periods). Unique per project, so it carries
 * the stack; a deleted role's id stays reserved until it is purged (37 days; the provider undeletes it within 7).
 */
export function gcpCustomRoleId(stack: string, what: string): string {
  const readable = `tessera_${slug(stack).replace(/-/g, '_')}_${what}`;
  if (readable.length <= 64) return readable;
  return `tessera_${shortHash([stack], 10)}_${what}`.slice(0, 64);
}

/** A log group, metric or alert name prefix per stack. */
export function monitoringPrefix(cloud: Cloud, stack: string): string {
  return cloud === 'aws' ? `/tessera/${slug(stack)}` : `tessera-${slug(stack)}`;
}

/**
 * The stack's own Firestore database id (4-63 lowercase letters, digits and
 * hyphens, starting with a letter). A named database per stack, because the
 * `(default)` database often exists already (App Engine, another stack) and
 * creating it again fails with 409.
 */
export function gcpFirestoreDatabaseId(stack: string): string {
  const readable = `tessera-${slug(stack)}`;
  if (readable.length <= 63) return readable;
  return `tessera-${shortHash([stack], 12)}`;
}
