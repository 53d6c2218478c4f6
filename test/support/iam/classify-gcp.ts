import { createRequire } from 'node:module';
import protobuf from 'protobufjs';
import type { LogicalResource, RecordedAccess } from './access.js';
import { kindOf, logicalResourceOf, registerResource } from './resources.js';
import { type Classified, describeRequest, type Requirement, single, type WireRequest } from './wire.js';

/**
 * GCP requests to IAM permissions, with GCP's own semantics:
 * - Cloud Storage JSON API (the SDK's only API): get `storage.objects.get`, list `storage.objects.list`
 *   with its prefix, upload `storage.objects.create`, and an upload that may replace an object
 *   (`ifGenerationMatch` other than 0, or none: the recorder does not look the name up) also
 *   `storage.objects.delete`; delete `storage.objects.delete`; a metadata patch `storage.objects.update`;
 *   rewrite/copy `get` on the source and `create` (+ `delete`) on the destination; compose the same with
 *   every source.
 * - Firestore (gRPC; "Required permissions for API methods"): reads `datastore.entities.get`, queries
 *   and listings `get` + `list`, Commit per write: an update with `exists: false` is `create`, with
 *   `exists: true` or an `updateTime` precondition `update`, with none `create` + `update`, a delete
 *   `delete`; BeginTransaction/Rollback `datastore.databases.get`.
 * - Pub/Sub (gRPC): Publish `pubsub.topics.publish`; Pull, StreamingPull, Acknowledge and
 *   ModifyAckDeadline `pubsub.subscriptions.consume`.
 * - Secret Manager: AccessSecretVersion `secretmanager.versions.access`.
 */

class Unrecognised extends Error {}

const GCS_PATH = /^\/(?:(upload|download)\/)?storage\/v1(\/.*)?$/;

/** Whether this is a Google API request: a gRPC method of a `google.` package, or the Cloud Storage JSON API. */
export function isGcp(wire: WireRequest): boolean {
  const path = wire.path.split('?')[0] ?? '';
  return path.startsWith('/google.') || GCS_PATH.test(path) || /^\/v1\/projects\/[^/]+\/secrets\//.test(path);
}

export function classifyGcp(wire: WireRequest): Classified {
  const path = wire.path.split('?')[0] ?? '';
  try {
    if (path.startsWith('/google.firestore.v1.Firestore/')) return ok(firestore(wire, path.split('/').pop() ?? ''));
    if (path.startsWith('/google.pubsub.v1.')) return ok(pubsub(wire, path));
    if (path.startsWith('/google.cloud.secretmanager.v1.SecretManagerService/') || path.startsWith('/v1/projects/')) {
      return ok(secretManager(wire, path));
    }
    if (GCS_PATH.test(path)) return ok(gcs(wire));
    return { kind: 'unrecognised', cloud: 'gcp', why: `Google API ${path} is not classified` };
  } catch (error) {
    if (error instanceof Unrecognised) return { kind: 'unrecognised', cloud: 'gcp', why: error.message };
    throw error;
  }
}

const ok = (required: Requirement[]): Classified => ({ kind: 'accesses', cloud: 'gcp', required });

const access = (wire: WireRequest, action: string, resource: LogicalResource, key?: string, list?: boolean): RecordedAccess => ({
  cloud: 'gcp',
  role: wire.role,
  action,
  resource,
  ...(key === undefined ? {} : { key }),
  ...(list ? { list: true } : {}),
  request: describeRequest(wire),
});

function lookup(name: string, what: string, expected: 'bucket' | 'table' | 'queue' | 'secret'): LogicalResource {
  const logical = logicalResourceOf(name);
  if (logical === undefined) throw new Unrecognised(`${what} ${name} is not registered (registerResource where the suite creates it)`);
  if (kindOf(logical) !== expected) throw new Unrecognised(`${what} ${name} is registered as ${logical}, which is not a ${expected}`);
  return logical;
}

// ---------------------------------------------------------------- Cloud Storage

/** `create`, plus `delete` when the write may replace a live object (GCS authorises an overwrite as both). */
function objectWrite(wire: WireRequest, resource: LogicalResource, key: string, ifGenerationMatch: string | null): Requirement[] {
  const create = single(access(wire, 'storage.objects.create', resource, key));
  return ifGenerationMatch === '0' ? [create] : [create, single(access(wire, 'storage.objects.delete', resource, key))];
}

function gcs(wire: WireRequest): Requirement[] {
  const [rawPath = '', query = ''] = wire.path.split('?');
  const m = GCS_PATH.exec(rawPath);
  const api = m?.[1];
  // Object names travel percent-encoded (`%2F` for `/`), so splitting on `/` keeps them whole.
  const seg = (m?.[2] ?? '').split('/').filter(Boolean).map(decodeURIComponent);
  const q = new URLSearchParams(query);
  const method = wire.method.toUpperCase();
  if (seg[0] !== 'b' || seg[1] === undefined)
    throw new Unrecognised(`Cloud Storage ${describeRequest(wire)} is not an object or bucket call of a function`);
  const resource = lookup(seg[1], 'GCS bucket', 'bucket');
  const a = (action: string, key?: string, list?: boolean) => single(access(wire, action, resource, key, list));
  if (seg.length === 2) {
    if (method === 'GET') return [a('storage.buckets.get')];
    throw new Unrecognised(`Cloud Storage bucket call ${describeRequest(wire)} is not classified`);
  }
  if (seg[2] !== 'o') throw new Unrecognised(`Cloud Storage ${describeRequest(wire)} is not classified`);
  const object = seg[3];
  if (api === 'upload') {
    if (method === 'PUT' && q.has('upload_id')) return []; // a resumable session's later requests: authorised at its start
    if (method !== 'POST') throw new Unrecognised(`Cloud Storage upload ${describeRequest(wire)} is not classified`);
    const name = q.get('name') ?? multipartName(wire);
    return objectWrite(wire, resource, name, q.get('ifGenerationMatch'));
  }
  if (object === undefined) {
    if (method === 'GET') return [a('storage.objects.list', q.get('prefix') ?? '', true)];
    // A metadata-only insert (no media): a create like an upload.
    if (method === 'POST') return objectWrite(wire, resource, bodyName(wire), q.get('ifGenerationMatch'));
    throw new Unrecognised(`Cloud Storage ${describeRequest(wire)} is not classified`);
  }
  if (seg.length === 4) {
    switch (method) {
      case 'GET':
      case 'HEAD':
        return [a('storage.objects.get', object)];
      case 'DELETE':
        return [a('storage.objects.delete', object)];
      case 'PATCH':
      case 'PUT':
        return [a('storage.objects.update', object)];
      default:
        throw new Unrecognised(`Cloud Storage ${describeRequest(wire)} is not classified`);
    }
  }
  if (method === 'POST' && seg[4] === 'compose' && seg.length === 5) {
    const sources = composeSources(wire);
    return [...objectWrite(wire, resource, object, q.get('ifGenerationMatch')), ...sources.map((s) => a('storage.objects.get', s))];
  }
  if (method === 'POST' && (seg[4] === 'rewriteTo' || seg[4] === 'copyTo') && seg[5] === 'b' && seg[7] === 'o' && seg[8] !== undefined) {
    const destination = lookup(seg[6] ?? '', 'GCS bucket', 'bucket');
    return [a('storage.objects.get', object), ...objectWrite(wire, destination, seg[8], q.get('ifGenerationMatch'))];
  }
  throw new Unrecognised(`Cloud Storage ${describeRequest(wire)} is not classified`);
}

/** A multipart upload whose name is not in the query: the first part is the object's JSON metadata. */
function multipartName(wire: WireRequest): string {
  const text = wire.body.toString('utf8', 0, Math.min(wire.body.length, 65_536));
  const json = /\r?\n\r?\n(\{[\s\S]*?\})\r?\n--/.exec(text)?.[1];
  const name = json === undefined ? undefined : (JSON.parse(json) as { name?: unknown }).name;
  if (typeof name !== 'string')
    throw new Unrecognised(`Cloud Storage upload ${describeRequest(wire)} names no object (query or metadata part)`);
  return name;
}

function bodyName(wire: WireRequest): string {
  if (!wire.bodyComplete) throw new Unrecognised('Cloud Storage insert body too long to read its name');
  const name = (JSON.parse(wire.body.toString('utf8') || '{}') as { name?: unknown }).name;
  if (typeof name !== 'string') throw new Unrecognised(`Cloud Storage insert ${describeRequest(wire)} names no object`);
  return name;
}

function composeSources(wire: WireRequest): string[] {
  if (!wire.bodyComplete) throw new Unrecognised('Cloud Storage compose body too long to read its sources');
  const body = JSON.parse(wire.body.toString('utf8') || '{}') as { sourceObjects?: { name?: unknown }[] };
  const names = (body.sourceObjects ?? []).map((s) => s.name);
  if (names.length === 0 || names.some((n) => typeof n !== 'string')) throw new Unrecognised('Cloud Storage compose names no sources');
  return names as string[];
}

// ---------------------------------------------------------------- Firestore

let firestoreRoot: protobuf.Root | undefined;
/** Firestore's request types, from the protos the SDK ships (its package exports do not expose the file). */
function firestoreType(name: string): protobuf.Type {
  if (!firestoreRoot) {
    const require = createRequire(import.meta.url);
    const sdk = require.resolve('@google-cloud/firestore');
    firestoreRoot = protobuf.Root.fromJSON(require(sdk.replace(/build\/src\/index\.js$/, 'build/protos/v1.json')) as protobuf.INamespace);
  }
  return firestoreRoot.lookupType(`google.firestore.v1.${name}`);
}

function decodeFirestore<T>(wire: WireRequest, method: string): T {
  if (!wire.bodyComplete) throw new Unrecognised(`Firestore ${method} message too long to read`);
  const type = firestoreType(`${method}Request`);
  return type.toObject(type.decode(wire.body), { oneofs: true, defaults: false }) as T;
}

/** The top-level collection of `projects/p/databases/d/documents/<collection>/<doc>/...`. */
function collectionOf(documentPath: string): string | undefined {
  const rest = documentPath.split('/documents/')[1];
  return rest?.split('/')[0] || undefined;
}

function collection(name: string | undefined, what: string): LogicalResource {
  if (name === undefined) throw new Unrecognised(`Firestore ${what} names no collection`);
  return lookup(name, 'Firestore collection', 'table');
}

interface FirestoreWrite {
  readonly operation?: string;
  readonly update?: { readonly name?: string };
  readonly delete?: string;
  readonly transform?: { readonly document?: string };
  readonly currentDocument?: { readonly exists?: boolean; readonly updateTime?: unknown };
}

function firestoreWrite(wire: WireRequest, w: FirestoreWrite): Requirement[] {
  const a = (action: string, doc: string | undefined) => single(access(wire, action, collection(collectionOf(doc ?? ''), 'write')));
  if (w.operation === 'delete') return [a('datastore.entities.delete', w.delete)];
  const doc = w.operation === 'transform' ? w.transform?.document : w.update?.name;
  const pre = w.currentDocument;
  if (pre?.exists === false) return [a('datastore.entities.create', doc)];
  if (pre?.exists === true || pre?.updateTime !== undefined) return [a('datastore.entities.update', doc)];
  return [a('datastore.entities.create', doc), a('datastore.entities.update', doc)];
}

function firestore(wire: WireRequest, method: string): Requirement[] {
  const a = (action: string, col: string | undefined) => single(access(wire, action, collection(col, method)));
  switch (method) {
    case 'GetDocument':
      return [a('datastore.entities.get', collectionOf(decodeFirestore<{ name?: string }>(wire, method).name ?? ''))];
    case 'BatchGetDocuments': {
      const { documents = [] } = decodeFirestore<{ documents?: string[] }>(wire, method);
      if (documents.length === 0) throw new Unrecognised('Firestore BatchGetDocuments names no document');
      return [...new Set(documents.map(collectionOf))].map((c) => a('datastore.entities.get', c));
    }
    case 'RunQuery':
    case 'RunAggregationQuery':
    case 'PartitionQuery': {
      const r = decodeFirestore<{
        parent?: string;
        structuredQuery?: { from?: { collectionId?: string }[] };
        structuredAggregationQuery?: { structuredQuery?: { from?: { collectionId?: string }[] } };
      }>(wire, method);
      const query = r.structuredQuery ?? r.structuredAggregationQuery?.structuredQuery;
      const col = collectionOf(`${r.parent ?? ''}/`) ?? query?.from?.[0]?.collectionId;
      return [a('datastore.entities.get', col), a('datastore.entities.list', col)];
    }
    case 'ListDocuments': {
      const r = decodeFirestore<{ parent?: string; collectionId?: string }>(wire, method);
      const col = collectionOf(`${r.parent ?? ''}/`) ?? r.collectionId;
      return [a('datastore.entities.get', col), a('datastore.entities.list', col)];
    }
    case 'Commit':
    case 'BatchWrite': {
      const { writes = [] } = decodeFirestore<{ writes?: FirestoreWrite[] }>(wire, method);
      if (writes.length === 0)
        throw new Unrecognised(`Firestore ${method} with no writes is a database-level call (datastore.databases.get)`);
      return writes.flatMap((w) => firestoreWrite(wire, w));
    }
    case 'CreateDocument': {
      const r = decodeFirestore<{ parent?: string; collectionId?: string }>(wire, method);
      return [a('datastore.entities.create', collectionOf(`${r.parent ?? ''}/`) ?? r.collectionId)];
    }
    case 'UpdateDocument': {
      const r = decodeFirestore<{ document?: { name?: string }; currentDocument?: FirestoreWrite['currentDocument'] }>(wire, method);
      return firestoreWrite(wire, {
        operation: 'update',
        update: { name: r.document?.name ?? '' },
        currentDocument: r.currentDocument ?? {},
      });
    }
    case 'DeleteDocument':
      return [a('datastore.entities.delete', collectionOf(decodeFirestore<{ name?: string }>(wire, method).name ?? ''))];
    default:
      // BeginTransaction, Rollback, Listen, Write, ListCollectionIds: the adapters make none; name them when they do.
      throw new Unrecognised(`Firestore ${method} is not classified (the adapters make no such call)`);
  }
}

// ---------------------------------------------------------------- Pub/Sub and Secret Manager

/** The routing parameter gax sends for the resource (`x-goog-request-params: topic=projects%2Fp%2Ftopics%2Ft`). */
function routingParam(wire: WireRequest, name: string): string | undefined {
  const params = new URLSearchParams(wire.headers['x-goog-request-params'] ?? '');
  return params.get(name) ?? undefined;
}

/** Field 1 (a string) of a protobuf message: the topic, subscription or name of every request used here. */
export function firstStringField(message: Buffer): string | undefined {
  return stringField(message, 1);
}

/** A top-level string field of a protobuf message (the first occurrence). */
export function stringField(message: Buffer, wanted: number): string | undefined {
  let i = 0;
  const varint = (): number => {
    let value = 0;
    let shift = 0;
    for (;;) {
      const b = message[i++];
      if (b === undefined) throw new Unrecognised('truncated protobuf message');
      value += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return value;
      shift += 7;
    }
  };
  while (i < message.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const type = tag & 7;
    if (type === 2) {
      const length = varint();
      if (field === wanted) return message.toString('utf8', i, i + length);
      i += length;
    } else if (type === 0) varint();
    else if (type === 1) i += 8;
    else if (type === 5) i += 4;
    else return undefined;
  }
  return undefined;
}

const PUBSUB: Readonly<Record<string, { param: 'topic' | 'subscription'; action: string }>> = {
  'Publisher/Publish': { param: 'topic', action: 'pubsub.topics.publish' },
  'Publisher/GetTopic': { param: 'topic', action: 'pubsub.topics.get' },
  'Subscriber/Pull': { param: 'subscription', action: 'pubsub.subscriptions.consume' },
  'Subscriber/StreamingPull': { param: 'subscription', action: 'pubsub.subscriptions.consume' },
  'Subscriber/Acknowledge': { param: 'subscription', action: 'pubsub.subscriptions.consume' },
  'Subscriber/ModifyAckDeadline': { param: 'subscription', action: 'pubsub.subscriptions.consume' },
  'Subscriber/GetSubscription': { param: 'subscription', action: 'pubsub.subscriptions.get' },
  'Subscriber/DeleteSubscription': { param: 'subscription', action: 'pubsub.subscriptions.delete' },
};

const shortName = (full: string | undefined, kind: 'topics' | 'subscriptions') => full?.split(`/${kind}/`)[1];

function pubsub(wire: WireRequest, path: string): Requirement[] {
  const method = path.replace(/^\/google\.pubsub\.v1\./, '');
  if (method === 'Subscriber/CreateSubscription') return createSubscription(wire);
  const known = PUBSUB[method];
  if (known === undefined) throw new Unrecognised(`Pub/Sub ${method} is not classified`);
  const full =
    routingParam(wire, known.param) ??
    (wire.bodyComplete ? firstStringField(wire.body) : undefined) ??
    (wire.firstMessage === undefined ? undefined : firstStringField(wire.firstMessage));
  const short = full?.split(`/${known.param === 'topic' ? 'topics' : 'subscriptions'}/`)[1];
  if (short === undefined) throw new Unrecognised(`Pub/Sub ${method} names no ${known.param}`);
  return [single(access(wire, known.action, lookup(short, `Pub/Sub ${known.param}`, 'queue')))];
}

/**
 * CreateSubscription (verify's taps on the stack's topics): `pubsub.subscriptions.create` and
 * `pubsub.topics.attachSubscription` on the topic. The new subscription is registered as its topic's queue,
 * so its pulls and its deletion are placed too (its name is the caller's, made at run time).
 */
function createSubscription(wire: WireRequest): Requirement[] {
  if (!wire.bodyComplete) throw new Unrecognised('Pub/Sub CreateSubscription message too long to read');
  const subscription = shortName(routingParam(wire, 'name') ?? stringField(wire.body, 1), 'subscriptions');
  const topic = shortName(stringField(wire.body, 2), 'topics');
  if (subscription === undefined || topic === undefined)
    throw new Unrecognised('Pub/Sub CreateSubscription names no subscription or topic');
  const resource = lookup(topic, 'Pub/Sub topic', 'queue');
  registerResource(subscription, resource);
  return [
    single(access(wire, 'pubsub.subscriptions.create', resource)),
    single(access(wire, 'pubsub.topics.attachSubscription', resource)),
  ];
}

function secretManager(wire: WireRequest, path: string): Requirement[] {
  // gRPC: the name in the routing header or field 1; REST: GET /v1/projects/p/secrets/s/versions/v:access.
  const name = path.startsWith('/v1/') ? path.slice(4) : (routingParam(wire, 'name') ?? firstStringField(wire.body));
  const method = path.startsWith('/v1/') ? (path.endsWith(':access') ? 'AccessSecretVersion' : 'other') : path.split('/').pop();
  if (method !== 'AccessSecretVersion') throw new Unrecognised(`Secret Manager ${describeRequest(wire)} is not classified`);
  const secret = /secrets\/([^/]+)/.exec(name ?? '')?.[1];
  if (secret === undefined) throw new Unrecognised('Secret Manager AccessSecretVersion names no secret');
  return [single(access(wire, 'secretmanager.versions.access', lookup(secret, 'Secret Manager secret', 'secret')))];
}
