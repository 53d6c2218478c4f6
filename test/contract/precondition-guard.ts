import { createRequire } from 'node:module';
import protobuf from 'protobufjs';
import type { RecordedRequest } from '../support/fault-proxy.js';

/**
 * The wire guard: every write or delete that reached a store must carry its
 * precondition, including the requests an SDK makes on an adapter's behalf
 * (retries, and side effects such as the delete `@google-cloud/storage`
 * sends after a failed upload validation). The contract suites run every
 * adapter through a fault proxy (test/support/fault-proxy.ts) that records
 * each request; this reads those records, store by store, by the request's
 * own shape, so a new SDK call path cannot slip past by being unknown: an
 * unrecognised write is a finding too.
 */
export interface Finding {
  readonly request: string;
  readonly why: string;
}

const header = (r: RecordedRequest, name: string): string | undefined => {
  const v = r.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
};
const query = (r: RecordedRequest): URLSearchParams => new URLSearchParams(r.path.split('?')[1] ?? '');
const pathname = (r: RecordedRequest): string => r.path.split('?')[0] ?? '';
const describe = (r: RecordedRequest): string => `${r.method} ${r.path.slice(0, 160)}${r.fault ? ` [${r.fault}]` : ''}`;

/** Control-plane calls of test setup and of adapters that create their own resources: not writes of data. */
const DYNAMODB_CONTROL = new Set(['CreateTable', 'UpdateTimeToLive', 'DescribeTable', 'DescribeTimeToLive']);
const DYNAMODB_READS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem']);

function dynamoDb(r: RecordedRequest, op: string): string | undefined {
  if (DYNAMODB_CONTROL.has(op) || DYNAMODB_READS.has(op)) return undefined;
  const body = JSON.parse(r.text || '{}') as {
    ConditionExpression?: string;
    TransactItems?: Record<string, { ConditionExpression?: string }>[];
  };
  switch (op) {
    case 'PutItem':
    case 'UpdateItem':
    case 'DeleteItem':
      return body.ConditionExpression ? undefined : `${op} without a ConditionExpression`;
    case 'TransactWriteItems':
      return (body.TransactItems ?? []).every((item) => Object.values(item).every((w) => w.ConditionExpression))
        ? undefined
        : 'TransactWriteItems with an item that has no ConditionExpression';
    default:
      return `DynamoDB ${op} is not a known read or conditional write`;
  }
}

function sqs(r: RecordedRequest, target: string | undefined): string | undefined {
  const action = target?.replace(/^AmazonSQS\./, '') ?? new URLSearchParams(r.text).get('Action') ?? '';
  // Deleting or hiding a message needs the receipt handle of the current receive: that is its precondition.
  if (/^(DeleteMessage|ChangeMessageVisibility)(Batch)?$/.test(action)) {
    return /ReceiptHandle/.test(r.text) ? undefined : `${action} without a ReceiptHandle`;
  }
  if (/^(PurgeQueue|DeleteQueue)$/.test(action)) return `${action} deletes messages without any precondition`;
  return undefined; // sends, receives and queue setup
}

function s3(r: RecordedRequest): string | undefined {
  const segments = pathname(r).split('/').filter(Boolean);
  const q = query(r);
  const onObject = segments.length >= 2;
  if (r.method === 'PUT' && !onObject) return undefined; // CreateBucket, bucket configuration: setup
  if (r.method === 'POST' && q.has('delete')) return 'DeleteObjects (multi-object delete) carries no precondition';
  if (r.method === 'PUT' && onObject) {
    if (q.has('uploadId') && q.has('partNumber')) return undefined; // an upload part is invisible until completed
    const conditional = header(r, 'if-none-match') !== undefined || header(r, 'if-match') !== undefined;
    return conditional ? undefined : `PutObject${header(r, 'x-amz-copy-source') ? ' (copy)' : ''} without If-None-Match or If-Match`;
  }
  if (r.method === 'POST' && onObject && q.has('uploadId')) {
    return header(r, 'if-none-match') !== undefined || header(r, 'if-match') !== undefined
      ? undefined
      : 'CompleteMultipartUpload without If-None-Match or If-Match';
  }
  if (r.method === 'DELETE' && onObject && !q.has('uploadId')) {
    return header(r, 'if-match') !== undefined ? undefined : 'DeleteObject without If-Match';
  }
  return undefined;
}

function gcs(r: RecordedRequest): string | undefined {
  const path = pathname(r);
  const q = query(r);
  const generation = q.has('ifGenerationMatch');
  if (path.startsWith('/upload/storage/v1/b/')) {
    if (q.get('uploadType') === 'media') return 'a media upload (fake-gcs-server ignores its precondition; never use it)';
    return generation ? undefined : `upload (${q.get('uploadType')}) without ifGenerationMatch`;
  }
  const object = /^\/storage\/v1\/b\/[^/]+\/o\/.+/.test(path);
  if (!object) return undefined; // bucket setup and listings
  if (r.method === 'DELETE')
    return generation ? undefined : 'object DELETE without ifGenerationMatch (the SDK validation delete looks like this)';
  if (r.method === 'PATCH' || r.method === 'PUT') {
    return generation || q.has('ifMetagenerationMatch') ? undefined : 'metadata update without ifMetagenerationMatch';
  }
  if (r.method === 'POST') {
    return generation ? undefined : 'copy, rewrite or compose without ifGenerationMatch on the destination';
  }
  return undefined;
}

function azureBlob(r: RecordedRequest): string | undefined {
  const q = query(r);
  if (q.get('restype') === 'container' || q.get('restype') === 'service') return undefined; // setup
  // /<account>/<container>/<blob>: fewer segments is an account or container (or queue) call, not a blob.
  if (pathname(r).split('/').filter(Boolean).length < 3) return undefined;
  const comp = q.get('comp');
  if (r.method === 'PUT') {
    if (comp === 'block' || comp === 'appendblock') return undefined; // uncommitted blocks: invisible until Put Block List
    if (comp === 'snapshot') return header(r, 'if-match') ? undefined : 'Snapshot Blob without If-Match';
    const conditional = header(r, 'if-none-match') !== undefined || (header(r, 'if-match') ?? '*') !== '*';
    return conditional ? undefined : `${comp ? `comp=${comp}` : 'Put Blob'} without If-None-Match or an If-Match ETag`;
  }
  if (r.method === 'DELETE') return (header(r, 'if-match') ?? '*') !== '*' ? undefined : 'Delete Blob without an If-Match ETag';
  return undefined;
}

function azureTable(r: RecordedRequest): string | undefined {
  const path = pathname(r);
  if (/\/Tables(\(|$)/.test(path)) return undefined; // create/delete table: setup
  const entity = /\(PartitionKey=.*RowKey=.*\)$/.test(decodeURIComponent(path));
  // Insert Entity (POST to the table) fails on an existing row: create-only by nature.
  if (r.method === 'POST' && !entity) return undefined;
  if (r.method === 'PUT' || r.method === 'MERGE' || r.method === 'PATCH' || r.method === 'DELETE') {
    const etag = header(r, 'if-match');
    if (etag === undefined) return `${r.method} of an entity without If-Match (an upsert)`;
    return etag === '*' ? `${r.method} of an entity with If-Match: * (no version)` : undefined;
  }
  return undefined;
}

function azureQueue(r: RecordedRequest): string | undefined {
  const q = query(r);
  // Deleting or updating a message needs the pop receipt of the current dequeue: that is its precondition.
  if ((r.method === 'DELETE' || r.method === 'PUT') && /\/messages\/[^/]+$/.test(pathname(r))) {
    return q.has('popreceipt') ? undefined : `${r.method} of a message without its popreceipt`;
  }
  if (r.method === 'DELETE' && /\/messages$/.test(pathname(r))) return 'Clear Messages carries no precondition';
  return undefined;
}

let commitRequest: protobuf.Type | undefined;
/** Firestore's CommitRequest type, from the protos the SDK ships (its package exports do not expose the file). */
function firestoreCommit(): protobuf.Type {
  if (!commitRequest) {
    const require = createRequire(import.meta.url);
    const sdk = require.resolve('@google-cloud/firestore');
    const json = require(sdk.replace(/build\/src\/index\.js$/, 'build/protos/v1.json')) as protobuf.INamespace;
    commitRequest = protobuf.Root.fromJSON(json).lookupType('google.firestore.v1.CommitRequest');
  }
  return commitRequest;
}

interface FirestoreWrite {
  readonly operation?: string;
  readonly currentDocument?: { readonly exists?: boolean; readonly updateTime?: unknown };
}

function firestore(r: RecordedRequest): string | undefined {
  const method = r.path.split('/').pop();
  if (method === 'BatchWrite') return 'BatchWrite (BulkWriter): writes that the claim protocol never makes';
  if (method !== 'Commit') return undefined;
  // One gRPC message: 1 byte compressed flag, 4 bytes length, then the protobuf.
  const message = r.body.subarray(5, 5 + r.body.readUInt32BE(1));
  const decoded = firestoreCommit().toObject(firestoreCommit().decode(message), { oneofs: true }) as { writes?: FirestoreWrite[] };
  const bare = (decoded.writes ?? []).filter(
    (w) => w.operation !== 'transform' && w.currentDocument?.exists === undefined && w.currentDocument?.updateTime === undefined,
  );
  return bare.length === 0 ? undefined : `Commit with ${bare.length} ${bare[0]?.operation ?? 'write'} without a precondition`;
}

/** Which store a recorded request went to, told from its own shape (one proxy fronts one store, but the guard need not know which). */
export type Wire = 's3' | 'sqs' | 'dynamodb' | 'gcs' | 'firestore' | 'azure-blob' | 'azure-table' | 'azure-queue';

export function wireOf(r: RecordedRequest): Wire | undefined {
  const target = header(r, 'x-amz-target');
  if (r.path.startsWith('/google.firestore.')) return 'firestore';
  if (target?.startsWith('DynamoDB_')) return 'dynamodb';
  if (target?.startsWith('AmazonSQS') || (pathname(r) === '/' && /(^|&)Action=/.test(r.text))) return 'sqs';
  if (r.path.startsWith('/upload/storage/v1/') || r.path.startsWith('/storage/v1/')) return 'gcs';
  if (header(r, 'dataserviceversion') !== undefined) return 'azure-table';
  if (header(r, 'x-ms-version') !== undefined) return /\/messages(\/|$|\?)/.test(r.path) ? 'azure-queue' : 'azure-blob';
  if (header(r, 'authorization')?.startsWith('AWS4') || header(r, 'x-amz-content-sha256') !== undefined) return 's3';
  return undefined;
}

/** The requests among `requests` that write or delete without a precondition (or go to a store the guard does not know). */
export function unconditionalWrites(requests: readonly RecordedRequest[]): Finding[] {
  const findings: Finding[] = [];
  for (const r of requests) {
    const wire = wireOf(r);
    let why: string | undefined;
    switch (wire) {
      case 'dynamodb':
        why = dynamoDb(r, header(r, 'x-amz-target')?.replace(/^DynamoDB_\d+\./, '') ?? '');
        break;
      case 'sqs':
        why = sqs(r, header(r, 'x-amz-target'));
        break;
      case 's3':
        why = s3(r);
        break;
      case 'gcs':
        why = gcs(r);
        break;
      case 'firestore':
        why = firestore(r);
        break;
      case 'azure-blob':
        why = azureBlob(r);
        break;
      case 'azure-table':
        why = azureTable(r);
        break;
      case 'azure-queue':
        why = azureQueue(r);
        break;
      case undefined:
        why = r.method === 'GET' || r.method === 'HEAD' ? undefined : 'a request to a store the guard does not recognise';
        break;
      default: {
        const never: never = wire;
        throw new Error(`unknown wire ${String(never)}`);
      }
    }
    if (why !== undefined) findings.push({ request: describe(r), why });
  }
  return findings;
}

/** How many requests in `requests` are writes or deletes at all: a guard over none proves nothing. */
export function writesSeen(requests: readonly RecordedRequest[]): number {
  return requests.filter(
    (r) =>
      r.method === 'PUT' ||
      r.method === 'DELETE' ||
      r.method === 'PATCH' ||
      r.method === 'MERGE' ||
      r.path.endsWith('/Commit') ||
      (r.method === 'POST' && r.body.byteLength > 0),
  ).length;
}

/**
 * The wire guard for PostgreSQL (the SQL each session sent, recorded by
 * test/support/pg-fault-proxy.ts): a manifest row or a feature row is only
 * ever written by `INSERT ... ON CONFLICT ... DO NOTHING`, and never updated
 * or deleted. The precondition of a SQL write is its unique constraint plus
 * ON CONFLICT: an INSERT without it would fail loudly on a duplicate instead of
 * answering, and an UPDATE or DELETE would be a blind write.
 *
 * Every write in a statement is checked on its own, wherever it stands: a
 * statement may carry several (a `WITH` whose parts each insert, as a feature
 * batch's does), and each INSERT must have its own ON CONFLICT before the next
 * write begins; one clause at the end must not cover the others.
 */
export function unconditionalSql(
  statements: readonly string[],
  tables: readonly string[] = ['ingest_manifest', 'tile_features'],
): Finding[] {
  const findings: Finding[] = [];
  const names = tables.join('|');
  const write = new RegExp(`\\b(?:INSERT\\s+INTO|UPDATE|DELETE\\s+FROM)\\s+(?:${names})\\b`, 'gi');
  const anyWrite = /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+[a-z_."]+/gi;
  for (const sql of statements) {
    // Where each write of any table begins: a write's clause ends where the next one starts.
    const starts = [...sql.matchAll(anyWrite)].map((m) => m.index);
    for (const m of sql.matchAll(write)) {
      const end = starts.find((at) => at > m.index) ?? sql.length;
      const part = sql.slice(m.index, end);
      if (/^(?:UPDATE|DELETE)/i.test(part)) {
        findings.push({ request: part.slice(0, 160), why: 'an UPDATE or DELETE of a create-only table' });
      } else if (!/\bON CONFLICT\b.*\bDO NOTHING\b/is.test(part)) {
        findings.push({ request: part.slice(0, 160), why: 'INSERT without ON CONFLICT ... DO NOTHING' });
      }
    }
  }
  return findings;
}
