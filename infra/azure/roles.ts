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

/** Built-in Azure role definitions (ids are the same in every tenant). */
export const AZURE_ROLES = {
  /** The Functions host keeps its state, keys and leases in blobs of the host storage account: only there. */
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  /** A function that only reads and lists a container: scoped to it, with a condition on the blob path. */
  storageBlobDataReader: '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1',
  /** A function that writes or deletes in a container: scoped to it, with a condition on the blob path per action. */
  storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe',
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
  /** Add messages only: what settling poison in a `-poison` queue takes (the handlers, and the host after maxDequeueCount). */
  storageQueueDataMessageSender: 'c6a89b2d-59bc-44d0-9896-0f6e12d7b80a',
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
  /** Query entities only: the reconcile reads the ingest manifest. */
  storageTableDataReader: '76199698-9eea-4c19-bc75-cec21354c6b6',
  /** Read a Key Vault secret's value: the PostGIS sink URL, scoped to that one secret. */
  keyVaultSecretsUser: '4633458b-17de-408a-b874-0445c86b69e6',
} as const;

/** The blob data actions Tessera's code performs, as Azure authorizes them (the Blob data roles' DataActions). */
const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
export const BLOB_ACTIONS = {
  /** Get Blob, Get Blob Properties (a snapshot or a version too), and, with the `Blob.List` sub-operation, List Blobs. */
  read: `${BLOBS}/read`,
  /** Put Blob, Put Block List, Copy Blob's destination, Snapshot Blob: create and overwrite alike. */
  write: `${BLOBS}/write`,
  /** Create a blob or append to one (Contributor holds it beside write): conditioned like write. */
  add: `${BLOBS}/add/action`,
  delete: `${BLOBS}/delete`,
} as const;
/** The sub-operation of `blobs/read` that is a listing: it carries the request's prefix, not a blob path. */
export const BLOB_LIST = 'Blob.List';
const PATH = `@Resource[${BLOBS}:path]`;
const PREFIX = `@Request[${BLOBS}:prefix]`;

/** One role assignment on one container of the data account, derived from the layout. */
export interface BlobAssignment {
  readonly role: FunctionRole;
  readonly store: StoreName;
  /** Reader when the role only reads and lists the container, Contributor when it writes or deletes there. */
  readonly azureRole: 'storageBlobDataReader' | 'storageBlobDataContributor';
  /** The role-assignment condition (version 2.0) limiting each action to the areas the layout gives it. */
  readonly condition: string;
  /** The areas of the container the role has any access to (for names and descriptions). */
  readonly areas: readonly AreaName[];
}

interface Place {
  readonly prefix: string;
  readonly exact: boolean;
}

/** An ABAC string literal: single-quoted; a quote in a configured prefix has no escape there, so it is refused. */
function literal(value: string): string {
  if (value.includes("'"))
    throw new Error(
      `[infra:azure] the prefix ${JSON.stringify(value)} holds a single quote, which a role-assignment condition cannot express; set tessera:sourcePrefix without one`,
    );
  return `'${value}'`;
}

const anyOf = (matchers: readonly string[]): string => matchers.join(' OR ');
const pathIn = (places: readonly Place[]): string =>
  anyOf(places.map((p) => `${PATH} ${p.exact ? 'StringEquals' : 'StringStartsWith'} ${literal(p.prefix)}`));

/** `((<not the request>) OR (<allowed>))`: the request kind is allowed where a matcher holds, and nowhere if none is given. */
function clause(notRequest: string, allowed: string): string {
  return allowed === '' ? `(${notRequest})` : `((${notRequest}) OR (${allowed}))`;
}

/**
 * The condition of one assignment: read, list, write (with add) and delete, each limited to the places the layout
 * gives it (Microsoft's pattern for path-scoped blob access, one clause per action). A Reader assignment holds only
 * `blobs/read`, so its condition names only that action.
 */
export function blobCondition(
  places: {
    readonly read: readonly Place[];
    readonly list: readonly Place[];
    readonly write: readonly Place[];
    readonly delete: readonly Place[];
  },
  writes: boolean,
): string {
  const clauses = [
    clause(`!(ActionMatches{'${BLOB_ACTIONS.read}'} AND NOT SubOperationMatches{'${BLOB_LIST}'})`, pathIn(places.read)),
    clause(
      `!(ActionMatches{'${BLOB_ACTIONS.read}'} AND SubOperationMatches{'${BLOB_LIST}'})`,
      anyOf(places.list.map((p) => `${PREFIX} StringStartsWith ${literal(p.prefix)}`)),
    ),
  ];
  if (writes) {
    clauses.push(clause(`!(ActionMatches{'${BLOB_ACTIONS.write}'}) AND !(ActionMatches{'${BLOB_ACTIONS.add}'})`, pathIn(places.write)));
    clauses.push(clause(`!(ActionMatches{'${BLOB_ACTIONS.delete}'})`, pathIn(places.delete)));
  }
  return clauses.join(' AND ');
}

const has = (access: readonly ObjectAccess[], ...wanted: ObjectAccess[]): boolean => wanted.some((w) => access.includes(w));

/** The blob role assignments of `role` on a stack whose source prefix is `sourcePrefix`: one per container it touches. */
export function blobAssignments(role: FunctionRole, sourcePrefix: string): readonly BlobAssignment[] {
  const out: BlobAssignment[] = [];
  for (const store of ['sources', 'outputs'] as const) {
    const grants = ROLE_ACCESS[role].filter((g) => AREAS[g.area].store === store);
    if (grants.length === 0) continue;
    const places = { read: [] as Place[], list: [] as Place[], write: [] as Place[], delete: [] as Place[] };
    for (const g of grants) {
      const area: Area = AREAS[g.area];
      const place = { prefix: areaPrefix(g.area, sourcePrefix), exact: area.exact === true };
      if (has(g.access, 'read')) places.read.push(place);
      if (has(g.access, 'list')) {
        if (place.exact)
          throw new Error(`[infra:azure] the layout lists the one-key area ${g.area} for ${role}: a key is read, not listed`);
        places.list.push(place);
      }
      // A pin is a snapshot of the blob (the adapter's `pin`), which Azure authorizes as `blobs/write` on the base
      // blob: no request attribute tells a snapshot from an overwrite, so a `pin` access is a write here.
      if (has(g.access, 'create', 'replace', 'pin')) places.write.push(place);
      if (has(g.access, 'delete')) places.delete.push(place);
    }
    const writes = places.write.length > 0 || places.delete.length > 0;
    out.push({
      role,
      store,
      azureRole: writes ? 'storageBlobDataContributor' : 'storageBlobDataReader',
      condition: blobCondition(places, writes),
      areas: grants.map((g) => g.area),
    });
  }
  return out;
}
