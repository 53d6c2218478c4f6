import type { LogicalResource, RecordedAccess } from './access.js';
import { kindOf, logicalResourceOf } from './resources.js';
import { type Classified, describeRequest, type Requirement, single, type WireRequest } from './wire.js';

/**
 * Azure Storage requests to data actions, from the REST reference's "Permissions for calling data
 * operations" table, alternatives included:
 * - Blob: Get Blob / Get Blob Properties `blobs/read`; List Blobs `blobs/read` (sub-operation `Blob.List`,
 *   recorded as a listing with its prefix); Put Blob `blobs/write`, or `blobs/add/action` when it can only
 *   create (`If-None-Match: *`); Snapshot Blob and Append Block `write` or `add/action`; Put Block,
 *   Put Block List, metadata, properties and leases `write`; Copy Blob the same on the destination and
 *   `read` on the source; Delete Blob `blobs/delete`.
 * - Table: Query Entities `entities/read`; Insert Entity `entities/write` or `add/action`; Update/Merge
 *   (with If-Match) `write` or `update/action`; Insert Or Replace/Merge (no If-Match) `write` or
 *   (`add/action` and `update/action`); Delete Entity `entities/delete`.
 * - Queue: Put Message `messages/add/action` or `messages/write`; Get Messages `messages/process/action`
 *   or (`messages/read` and `messages/delete`); Peek `messages/read`; Delete Message
 *   `messages/process/action` or `messages/delete`; Update Message `messages/write`; Clear `messages/delete`.
 * - Key Vault: Get Secret `Microsoft.KeyVault/vaults/secrets/getSecret/action`.
 */

const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
const CONTAINERS = 'Microsoft.Storage/storageAccounts/blobServices/containers';
const ENTITIES = 'Microsoft.Storage/storageAccounts/tableServices/tables/entities';
const MESSAGES = 'Microsoft.Storage/storageAccounts/queueServices/queues/messages';
const QUEUES = 'Microsoft.Storage/storageAccounts/queueServices/queues';

class Unrecognised extends Error {}

/** Whether this is an Azure data-plane request: every Storage SDK call carries `x-ms-version`; Key Vault its host. */
export function isAzure(wire: WireRequest): boolean {
  return wire.headers['x-ms-version'] !== undefined || /\.vault\.azure\.net(:\d+)?$/.test(wire.authority);
}

export function classifyAzure(wire: WireRequest): Classified {
  try {
    if (/\.vault\.azure\.net(:\d+)?$/.test(wire.authority)) return ok(keyVault(wire));
    const segments = pathSegments(wire);
    const first = segments[0];
    if (first === undefined) throw new Unrecognised(`Azure ${describeRequest(wire)} is an account-level call, not a function's`);
    if (isTableRequest(wire, first)) return ok(table(wire, segments));
    const logical = lookup(first, 'Azure container or queue');
    switch (kindOf(logical)) {
      case 'bucket':
        return ok(blob(wire, logical, segments));
      case 'queue':
        return ok(queue(wire, logical, segments));
      default:
        throw new Unrecognised(`Azure ${describeRequest(wire)}: ${first} is registered as ${logical}, not a container or queue`);
    }
  } catch (error) {
    if (error instanceof Unrecognised) return { kind: 'unrecognised', cloud: 'azure', why: error.message };
    throw error;
  }
}

const ok = (required: Requirement[]): Classified => ({ kind: 'accesses', cloud: 'azure', required });

const access = (wire: WireRequest, action: string, resource: LogicalResource, key?: string, list?: boolean): RecordedAccess => ({
  cloud: 'azure',
  role: wire.role,
  action,
  resource,
  ...(key === undefined ? {} : { key }),
  ...(list ? { list: true } : {}),
  request: describeRequest(wire),
});

function lookup(name: string, what: string): LogicalResource {
  const logical = logicalResourceOf(name);
  if (logical === undefined) throw new Unrecognised(`${what} ${name} is not registered (registerResource where the suite creates it)`);
  return logical;
}

/**
 * The path below the account: Azurite (and any IP endpoint) is addressed path-style,
 * `/<account>/<container>/<blob>`; the cloud host-style, `<account>.blob.core.windows.net/<container>/<blob>`.
 */
function pathSegments(wire: WireRequest): string[] {
  const host = wire.authority.replace(/:\d+$/, '');
  const pathStyle = /^\d+\.\d+\.\d+\.\d+$/.test(host) || host === 'localhost' || host === '[::1]';
  const raw = (wire.path.split('?')[0] ?? '').split('/').filter(Boolean);
  return (pathStyle ? raw.slice(1) : raw).map((s) => decodeURIComponent(s));
}

function isTableRequest(wire: WireRequest, first: string): boolean {
  if (wire.headers.dataserviceversion !== undefined || wire.headers.maxdataserviceversion !== undefined) return true;
  return first === '$batch' || /^Tables(\(|$)/.test(first) || /\(.*\)$/.test(first);
}

// ---------------------------------------------------------------- Blob

function blob(wire: WireRequest, resource: LogicalResource, segments: string[]): Requirement[] {
  const q = new URLSearchParams(wire.path.split('?')[1] ?? '');
  const method = wire.method.toUpperCase();
  const a = (action: string, key?: string, list?: boolean) => access(wire, action, resource, key, list);
  const key = segments.slice(1).join('/');
  const comp = q.get('comp');
  if (key === '') {
    if (q.get('restype') !== 'container') throw new Unrecognised(`Azure Blob ${describeRequest(wire)} is not classified`);
    if (comp === 'list' && method === 'GET') return [single(a(`${BLOBS}/read`, q.get('prefix') ?? '', true))];
    if (comp === null && (method === 'GET' || method === 'HEAD')) return [single(a(`${CONTAINERS}/read`))];
    throw new Unrecognised(`Azure container call ${describeRequest(wire)} is not a function's`);
  }
  const writeOrAdd: Requirement = { anyOf: [[a(`${BLOBS}/write`, key)], [a(`${BLOBS}/add/action`, key)]] };
  const write = single(a(`${BLOBS}/write`, key));
  switch (method) {
    case 'GET':
    case 'HEAD':
      if (comp === 'tags') return [single(a(`${BLOBS}/tags/read`, key))];
      return [single(a(`${BLOBS}/read`, key))];
    case 'DELETE':
      return [single(a(`${BLOBS}/delete`, key))];
    case 'PUT': {
      if (comp === 'tags') return [single(a(`${BLOBS}/tags/write`, key))];
      if (comp === 'snapshot' || comp === 'appendblock') return [writeOrAdd];
      if (comp !== null) return [write]; // block, blocklist, metadata, properties, lease, tier, page, expiry
      // Put Blob, or Copy Blob (x-ms-copy-source): only a create-only request may be authorised by add/action.
      const createOnly = wire.headers['if-none-match'] === '*';
      const target = createOnly ? writeOrAdd : write;
      const source = wire.headers['x-ms-copy-source'];
      return source === undefined ? [target] : [target, copySource(wire, source)];
    }
    default:
      throw new Unrecognised(`Azure Blob ${describeRequest(wire)} is not classified`);
  }
}

function copySource(wire: WireRequest, source: string): Requirement {
  const url = new URL(source);
  const segments = pathSegments({ ...wire, authority: url.host, path: url.pathname });
  const resource = lookup(segments[0] ?? '', 'Azure copy-source container');
  return single(access(wire, `${BLOBS}/read`, resource, segments.slice(1).join('/')));
}

// ---------------------------------------------------------------- Table

function table(wire: WireRequest, segments: string[]): Requirement[] {
  const first = segments[0] ?? '';
  if (first === '$batch')
    throw new Unrecognised('Azure Table entity group transaction ($batch) is not classified (the adapters send none)');
  if (/^Tables(\(|$)/.test(first)) throw new Unrecognised(`Azure Table ${describeRequest(wire)} is a table-level call, not a function's`);
  const name = first.replace(/\(.*$/, '');
  const resource = lookup(name, 'Azure table');
  if (kindOf(resource) !== 'table') throw new Unrecognised(`Azure table ${name} is registered as ${resource}, which is not a table`);
  const entity = /\(PartitionKey=.*RowKey=.*\)$/.test(first);
  const method = (wire.headers['x-http-method'] ?? wire.method).toUpperCase();
  const a = (action: string) => access(wire, `${ENTITIES}/${action}`, resource);
  const ifMatch = wire.headers['if-match'];
  if (method === 'GET') return [single(a('read'))];
  if (method === 'DELETE' && entity) return [single(a('delete'))];
  if (method === 'POST' && !entity) return [{ anyOf: [[a('write')], [a('add/action')]] }];
  if ((method === 'PUT' || method === 'MERGE' || method === 'PATCH') && entity) {
    // With If-Match: Update / Merge Entity. Without: Insert Or Replace / Insert Or Merge (an upsert).
    return ifMatch === undefined
      ? [{ anyOf: [[a('write')], [a('add/action'), a('update/action')]] }]
      : [{ anyOf: [[a('write')], [a('update/action')]] }];
  }
  throw new Unrecognised(`Azure Table ${describeRequest(wire)} is not classified`);
}

// ---------------------------------------------------------------- Queue

function queue(wire: WireRequest, resource: LogicalResource, segments: string[]): Requirement[] {
  const q = new URLSearchParams(wire.path.split('?')[1] ?? '');
  const method = wire.method.toUpperCase();
  const a = (action: string) => access(wire, `${MESSAGES}/${action}`, resource);
  if (segments.length === 1) {
    if ((method === 'GET' || method === 'HEAD') && q.get('comp') === 'metadata') return [single(access(wire, `${QUEUES}/read`, resource))];
    throw new Unrecognised(`Azure queue call ${describeRequest(wire)} is not a function's`);
  }
  if (segments[1] !== 'messages') throw new Unrecognised(`Azure Queue ${describeRequest(wire)} is not classified`);
  const onMessage = segments.length === 3;
  if (!onMessage) {
    switch (method) {
      case 'POST':
        return [{ anyOf: [[a('add/action')], [a('write')]] }];
      case 'GET':
        return q.get('peekonly') === 'true' ? [single(a('read'))] : [{ anyOf: [[a('process/action')], [a('read'), a('delete')]] }];
      case 'DELETE':
        return [single(a('delete'))];
      default:
        throw new Unrecognised(`Azure Queue ${describeRequest(wire)} is not classified`);
    }
  }
  if (method === 'DELETE') return [{ anyOf: [[a('process/action')], [a('delete')]] }];
  if (method === 'PUT') return [single(a('write'))];
  throw new Unrecognised(`Azure Queue ${describeRequest(wire)} is not classified`);
}

// ---------------------------------------------------------------- Key Vault

function keyVault(wire: WireRequest): Requirement[] {
  const segments = (wire.path.split('?')[0] ?? '').split('/').filter(Boolean);
  if (segments[0] !== 'secrets' || segments[1] === undefined || wire.method.toUpperCase() !== 'GET') {
    throw new Unrecognised(`Key Vault ${describeRequest(wire)} is not classified`);
  }
  const resource = lookup(decodeURIComponent(segments[1]), 'Key Vault secret');
  if (kindOf(resource) !== 'secret') throw new Unrecognised(`Key Vault secret ${segments[1]} is registered as ${resource}`);
  return [single(access(wire, 'Microsoft.KeyVault/vaults/secrets/getSecret/action', resource))];
}
