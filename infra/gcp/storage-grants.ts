import {
  AREAS,
  type Area,
  type AreaName,
  areaPrefix,
  type FunctionRole,
  type ObjectAccess,
  ROLE_ACCESS,
  type StoreName,
} from '../../shared/domain/key-layout.js';

/**
 * Cloud Storage grants, derived from the one key layout (shared/domain/key-layout.ts ROLE_ACCESS) with
 * Cloud Storage's own permission semantics (docs/iam.md, "Google Cloud"):
 *
 * - `read` is `storage.objects.get` (a generation-pinned read too);
 * - `create` is `storage.objects.create` (a create-only upload, `ifGenerationMatch=0`, or a copy's destination);
 * - `replace` is `storage.objects.create` AND `storage.objects.delete`: Cloud Storage authorizes any upload
 *   over an existing object, conditional or not, as a create plus a delete of the old generation;
 * - `delete` is `storage.objects.delete`;
 * - `list` is `storage.objects.list`, checked on the bucket (`projects/_/buckets/B`), not on an object.
 *
 * Each object permission is granted per (role, area) by a binding conditioned on the area's object names
 * (`resource.name.startsWith(".../objects/<prefix>")`, or `==` for the one-key area). Such a condition is
 * false for a list request, whose resource is the bucket, so listing has a binding of its own per (role, bucket).
 *
 * The roles: `roles/storage.objectViewer` for get (its list half never applies under an object-name condition),
 * `roles/storage.objectCreator` for create; no predefined role grants delete without also granting create and
 * update (objectUser, objectAdmin), and verify deletes where it must not write, so delete is a custom role holding
 * `storage.objects.delete` only. Listing is a second custom role holding `storage.objects.list` only, bound to the
 * bucket without a condition: the role itself is the limit, since listing names is all it can do.
 */

/** The Cloud Storage permissions a layout access needs. */
export const GCS_PERMISSIONS: Readonly<Record<ObjectAccess, readonly string[]>> = {
  read: ['storage.objects.get'],
  create: ['storage.objects.create'],
  replace: ['storage.objects.create', 'storage.objects.delete'],
  delete: ['storage.objects.delete'],
  list: ['storage.objects.list'],
  // A pin names a generation, read with storage.objects.get: nothing beyond read.
  pin: [],
};

/** The custom roles a stack defines (one per missing primitive, not per access set). */
export const GCS_CUSTOM_ROLES = {
  objectDeleter: {
    title: 'Tessera object deleter',
    description: 'storage.objects.delete only: the delete half of a replace, and verify cleanup (docs/iam.md)',
    permissions: ['storage.objects.delete'],
  },
  objectLister: {
    title: 'Tessera object lister',
    description: 'storage.objects.list only: listing object names of a bucket (docs/iam.md)',
    permissions: ['storage.objects.list'],
  },
} as const;
export type GcsCustomRole = keyof typeof GCS_CUSTOM_ROLES;

/** What one object-scoped binding grants: get, create or delete on the objects of one area. */
export type GcsObjectGrantKind = 'read' | 'create' | 'delete';

/** The role each object-scoped binding carries: a predefined role, or one of the stack's custom roles. */
export const GCS_GRANT_ROLE: Readonly<Record<GcsObjectGrantKind, { readonly predefined: string } | { readonly custom: GcsCustomRole }>> = {
  read: { predefined: 'roles/storage.objectViewer' },
  create: { predefined: 'roles/storage.objectCreator' },
  delete: { custom: 'objectDeleter' },
};

export interface GcsObjectGrant {
  readonly role: FunctionRole;
  readonly area: AreaName;
  readonly store: StoreName;
  readonly kind: GcsObjectGrantKind;
  /** The area's prefix on this stack (the source area's is tessera:sourcePrefix), or its one key when `exact`. */
  readonly prefix: string;
  readonly exact: boolean;
  /** The layout's reason, carried into the binding's condition description. */
  readonly why: string;
}

export interface GcsGrantPlan {
  readonly objects: readonly GcsObjectGrant[];
  /** The buckets the role lists (some area of the bucket has `list`). */
  readonly lists: readonly StoreName[];
}

/** Which object-scoped bindings an access set needs: replace needs delete as well as create on Cloud Storage. */
function kindsFor(access: readonly ObjectAccess[]): GcsObjectGrantKind[] {
  const kinds: GcsObjectGrantKind[] = [];
  if (access.includes('read')) kinds.push('read');
  if (access.includes('create') || access.includes('replace')) kinds.push('create');
  if (access.includes('replace') || access.includes('delete')) kinds.push('delete');
  return kinds;
}

/** Every Cloud Storage binding `role` gets on a stack whose source prefix is `sourcePrefix`, from ROLE_ACCESS. */
export function gcsGrantPlan(role: FunctionRole, sourcePrefix: string): GcsGrantPlan {
  const objects: GcsObjectGrant[] = [];
  const lists = new Set<StoreName>();
  for (const grant of ROLE_ACCESS[role]) {
    const area: Area = AREAS[grant.area];
    const exact = area.exact === true;
    for (const kind of kindsFor(grant.access)) {
      objects.push({
        role,
        area: grant.area,
        store: area.store,
        kind,
        prefix: areaPrefix(grant.area, sourcePrefix),
        exact,
        why: grant.why,
      });
    }
    if (grant.access.includes('list')) {
      if (exact) throw new Error(`[infra:gcp] the layout lists the one-key area ${grant.area} for ${role}: a key is read, not listed`);
      lists.add(area.store);
    }
  }
  return { objects, lists: [...lists].sort() };
}

/**
 * The IAM condition expression limiting an object binding to one area of one bucket. CEL string literals take
 * JSON's escapes, so a configured source prefix with a quote or backslash cannot break out of the literal.
 */
export function objectCondition(bucket: string, prefix: string, exact: boolean): string {
  const name = JSON.stringify(`projects/_/buckets/${bucket}/objects/${prefix}`);
  return exact ? `resource.name == ${name}` : `resource.name.startsWith(${name})`;
}
