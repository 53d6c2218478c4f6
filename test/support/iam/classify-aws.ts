import type { LogicalResource, RecordedAccess } from './access.js';
import { kindOf, logicalResourceOf } from './resources.js';
import { type Classified, describeRequest, type Requirement, single, type WireRequest } from './wire.js';

/**
 * AWS requests to IAM actions, with IAM's own semantics (the Service Authorization Reference):
 * - S3: GET/HEAD object `s3:GetObject`, with `versionId` `s3:GetObjectVersion`; PUT `s3:PutObject` (a copy
 *   also needs `s3:GetObject(Version)` on its source); DELETE `s3:DeleteObject(Version)`; a ListObjectsV2
 *   (or v1, or HEAD bucket) `s3:ListBucket` with its prefix; `?versions` `s3:ListBucketVersions`; multipart
 *   parts are `s3:PutObject`.
 * - DynamoDB: `dynamodb:<Operation>` on the TableName of the JSON body; a transaction needs the item
 *   action of each item (`PutItem`, `UpdateItem`, `DeleteItem`, `ConditionCheckItem`, `GetItem`).
 * - SQS: `sqs:<Operation>`, the batch operations authorised by their single form (`SendMessageBatch` is
 *   `sqs:SendMessage`), on the queue of QueueUrl (or QueueName).
 * - Secrets Manager / SSM: `secretsmanager:GetSecretValue`, `ssm:GetParameter(s)` on the secret's name.
 */

/** The service of a SigV4 request: `Credential=<key>/<date>/<region>/<service>/aws4_request`. */
export function sigV4Service(headers: Readonly<Record<string, string>>, path: string): string | undefined {
  const auth = headers.authorization ?? '';
  const fromHeader = /Credential=[^/]+\/\d{8}\/[^/]+\/([^/]+)\/aws4_request/.exec(auth)?.[1];
  if (fromHeader !== undefined) return fromHeader;
  // A presigned URL carries the same scope in its query.
  const q = new URLSearchParams(path.split('?')[1] ?? '');
  return /^[^/]+\/\d{8}\/[^/]+\/([^/]+)\/aws4_request$/.exec(q.get('X-Amz-Credential') ?? '')?.[1];
}

/** Whether this is an AWS API request at all: signed with SigV4, or a JSON-protocol target. */
export function isAws(wire: WireRequest): boolean {
  return (
    (wire.headers.authorization ?? '').startsWith('AWS4-HMAC-SHA256') ||
    wire.headers['x-amz-target'] !== undefined ||
    new URLSearchParams(wire.path.split('?')[1] ?? '').has('X-Amz-Credential')
  );
}

class Unrecognised extends Error {}

function lookup(name: string, what: string, expected: 'bucket' | 'table' | 'queue' | 'secret'): LogicalResource {
  const logical = logicalResourceOf(name);
  if (logical === undefined) throw new Unrecognised(`${what} ${name} is not registered (registerResource where the suite creates it)`);
  if (kindOf(logical) !== expected) throw new Unrecognised(`${what} ${name} is registered as ${logical}, which is not a ${expected}`);
  return logical;
}

export function classifyAws(wire: WireRequest): Classified {
  const service = wire.headers['x-amz-target'] === undefined ? sigV4Service(wire.headers, wire.path) : targetService(wire);
  try {
    switch (service) {
      case 's3':
        return { kind: 'accesses', cloud: 'aws', required: s3(wire) };
      case 'dynamodb':
        return { kind: 'accesses', cloud: 'aws', required: dynamodb(wire) };
      case 'sqs':
        return { kind: 'accesses', cloud: 'aws', required: sqs(wire) };
      case 'secretsmanager':
      case 'ssm':
        return { kind: 'accesses', cloud: 'aws', required: secret(wire, service) };
      default:
        return { kind: 'unrecognised', cloud: 'aws', why: `AWS service ${service ?? '(unsigned, no target)'} is not classified` };
    }
  } catch (error) {
    if (error instanceof Unrecognised) return { kind: 'unrecognised', cloud: 'aws', why: error.message };
    throw error;
  }
}

function targetService(wire: WireRequest): string | undefined {
  const target = wire.headers['x-amz-target'] ?? '';
  if (target.startsWith('DynamoDB_')) return 'dynamodb';
  if (target.startsWith('AmazonSQS.')) return 'sqs';
  if (target.startsWith('secretsmanager.')) return 'secretsmanager';
  if (target.startsWith('AmazonSSM.')) return 'ssm';
  return sigV4Service(wire.headers, wire.path);
}

const access = (wire: WireRequest, action: string, resource: LogicalResource, key?: string, list?: boolean): RecordedAccess => ({
  cloud: 'aws',
  role: wire.role,
  action,
  resource,
  ...(key === undefined ? {} : { key }),
  ...(list ? { list: true } : {}),
  request: describeRequest(wire),
});

/** Path-style (`/bucket/key`, what the suites use against moto) or virtual-hosted (`bucket.s3...`). */
function s3Target(wire: WireRequest): { bucket: string; key: string | undefined } {
  const [rawPath = '/'] = wire.path.split('?');
  const host = wire.authority.split(':')[0] ?? '';
  const firstLabel = host.split('.')[0] ?? '';
  if (host.includes('.') && !/^\d+\.\d+\.\d+\.\d+$/.test(host) && logicalResourceOf(firstLabel) !== undefined) {
    const key = decodeURIComponent(rawPath.slice(1));
    return { bucket: firstLabel, key: key === '' ? undefined : key };
  }
  const rest = rawPath.slice(1);
  const slash = rest.indexOf('/');
  if (slash < 0) return { bucket: decodeURIComponent(rest), key: undefined };
  const key = decodeURIComponent(rest.slice(slash + 1));
  return { bucket: decodeURIComponent(rest.slice(0, slash)), key: key === '' ? undefined : key };
}

function s3(wire: WireRequest): Requirement[] {
  const q = new URLSearchParams(wire.path.split('?')[1] ?? '');
  const { bucket, key } = s3Target(wire);
  if (bucket === '') throw new Unrecognised(`S3 ${describeRequest(wire)} names no bucket (ListBuckets is not a function's call)`);
  const resource = lookup(bucket, 'S3 bucket', 'bucket');
  const a = (action: string, k?: string, list?: boolean) => single(access(wire, action, resource, k, list));
  const method = wire.method.toUpperCase();
  if (key === undefined) {
    // Bucket-level calls.
    if (method === 'GET' && q.has('versions')) return [a('s3:ListBucketVersions', q.get('prefix') ?? '', true)];
    if (method === 'GET' && q.has('uploads')) return [a('s3:ListBucketMultipartUploads', q.get('prefix') ?? '', true)];
    if (method === 'GET' && q.has('location')) return [a('s3:GetBucketLocation')];
    if (method === 'GET' && q.has('versioning')) return [a('s3:GetBucketVersioning')];
    if (method === 'POST' && q.has('delete')) return deleteObjects(wire, resource);
    // ListObjectsV2 (list-type=2), ListObjects (v1) and HeadBucket are all s3:ListBucket.
    if (method === 'GET' || method === 'HEAD') return [a('s3:ListBucket', q.get('prefix') ?? '', true)];
    throw new Unrecognised(`S3 bucket call ${describeRequest(wire)} is not classified`);
  }
  const versioned = q.has('versionId');
  switch (method) {
    case 'GET':
    case 'HEAD':
      if (q.has('tagging')) return [a(versioned ? 's3:GetObjectVersionTagging' : 's3:GetObjectTagging', key)];
      if (q.has('uploadId')) return [a('s3:ListMultipartUploadParts', key)];
      if (q.has('attributes')) return [a(versioned ? 's3:GetObjectVersion' : 's3:GetObject', key), a('s3:GetObjectAttributes', key)];
      return [a(versioned ? 's3:GetObjectVersion' : 's3:GetObject', key)];
    case 'PUT': {
      if (q.has('tagging')) return [a(versioned ? 's3:PutObjectVersionTagging' : 's3:PutObjectTagging', key)];
      const put = a('s3:PutObject', key);
      const tagging = wire.headers['x-amz-tagging'] === undefined ? [] : [a('s3:PutObjectTagging', key)];
      const source = wire.headers['x-amz-copy-source'];
      return source === undefined ? [put, ...tagging] : [put, ...tagging, copySource(wire, source)];
    }
    case 'POST':
      // CreateMultipartUpload (?uploads) and CompleteMultipartUpload (?uploadId) are s3:PutObject.
      if (q.has('uploads') || q.has('uploadId')) return [a('s3:PutObject', key)];
      throw new Unrecognised(`S3 object POST ${describeRequest(wire)} is not classified`);
    case 'DELETE':
      if (q.has('uploadId')) return [a('s3:AbortMultipartUpload', key)];
      if (q.has('tagging')) return [a(versioned ? 's3:DeleteObjectVersionTagging' : 's3:DeleteObjectTagging', key)];
      return [a(versioned ? 's3:DeleteObjectVersion' : 's3:DeleteObject', key)];
    default:
      throw new Unrecognised(`S3 ${describeRequest(wire)} is not classified`);
  }
}

/** `x-amz-copy-source: /bucket/key?versionId=v` (URL-encoded): the read the copy makes of its source. */
function copySource(wire: WireRequest, header: string): Requirement {
  const [path = '', query = ''] = header.split('?');
  const trimmed = decodeURIComponent(path).replace(/^\//, '');
  const slash = trimmed.indexOf('/');
  if (slash < 0) throw new Unrecognised(`S3 copy source ${header} names no key`);
  const bucket = trimmed.slice(0, slash);
  const resource = lookup(bucket, 'S3 copy-source bucket', 'bucket');
  const versioned = new URLSearchParams(query).has('versionId');
  return single(access(wire, versioned ? 's3:GetObjectVersion' : 's3:GetObject', resource, trimmed.slice(slash + 1)));
}

/** DeleteObjects: `s3:DeleteObject(Version)` for each `<Object><Key>..</Key>[<VersionId>..]</Object>` of the XML body. */
function deleteObjects(wire: WireRequest, resource: LogicalResource): Requirement[] {
  if (!wire.bodyComplete) throw new Unrecognised('S3 DeleteObjects body too long to read its keys');
  const xml = wire.body.toString('utf8');
  const objects = [...xml.matchAll(/<Object>([\s\S]*?)<\/Object>/g)].map((m) => m[1] ?? '');
  if (objects.length === 0) throw new Unrecognised('S3 DeleteObjects with no <Object> in its body');
  return objects.map((o) => {
    const key = unescapeXml(/<Key>([\s\S]*?)<\/Key>/.exec(o)?.[1] ?? '');
    return single(access(wire, /<VersionId>/.test(o) ? 's3:DeleteObjectVersion' : 's3:DeleteObject', resource, key));
  });
}

function unescapeXml(s: string): string {
  return s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
}

function jsonBody(wire: WireRequest, what: string): Record<string, unknown> {
  if (!wire.bodyComplete) throw new Unrecognised(`${what} body too long to read its resource`);
  try {
    const parsed: unknown = JSON.parse(wire.body.toString('utf8') || '{}');
    if (typeof parsed !== 'object' || parsed === null) throw new Unrecognised(`${what} body is not a JSON object`);
    return parsed as Record<string, unknown>;
  } catch (error) {
    if (error instanceof Unrecognised) throw error;
    throw new Unrecognised(`${what} body is not JSON: ${(error as Error).message}`);
  }
}

/** TransactWriteItems / TransactGetItems item kinds and the IAM action each needs. */
const TRANSACT_ITEM_ACTION: Readonly<Record<string, string>> = {
  Put: 'dynamodb:PutItem',
  Update: 'dynamodb:UpdateItem',
  Delete: 'dynamodb:DeleteItem',
  ConditionCheck: 'dynamodb:ConditionCheckItem',
  Get: 'dynamodb:GetItem',
};

function dynamodb(wire: WireRequest): Requirement[] {
  const op = (wire.headers['x-amz-target'] ?? '').replace(/^DynamoDB_\d+\./, '');
  if (op === '') throw new Unrecognised('DynamoDB request without X-Amz-Target');
  const body = jsonBody(wire, `DynamoDB ${op}`);
  const table = (name: unknown) => {
    if (typeof name !== 'string') throw new Unrecognised(`DynamoDB ${op} names no table`);
    return lookup(name, 'DynamoDB table', 'table');
  };
  switch (op) {
    case 'TransactWriteItems':
    case 'TransactGetItems': {
      const items = Array.isArray(body.TransactItems) ? (body.TransactItems as Record<string, { TableName?: unknown }>[]) : [];
      if (items.length === 0) throw new Unrecognised(`DynamoDB ${op} with no TransactItems`);
      return items.flatMap((item) =>
        Object.entries(item).map(([kind, spec]) => {
          const action = TRANSACT_ITEM_ACTION[kind];
          if (action === undefined) throw new Unrecognised(`DynamoDB ${op} item kind ${kind} is not classified`);
          return single(access(wire, action, table(spec.TableName)));
        }),
      );
    }
    case 'BatchGetItem':
    case 'BatchWriteItem': {
      const names = Object.keys((body.RequestItems as Record<string, unknown> | undefined) ?? {});
      if (names.length === 0) throw new Unrecognised(`DynamoDB ${op} with no RequestItems`);
      return names.map((n) => single(access(wire, `dynamodb:${op}`, table(n))));
    }
    case 'ListTables':
    case 'DescribeLimits':
    case 'DescribeEndpoints':
      throw new Unrecognised(`DynamoDB ${op} is account-wide, not a function's call`);
    default:
      return [single(access(wire, `dynamodb:${op}`, table(body.TableName)))];
  }
}

/** The batch forms are authorised by their single action (SQS API reference, "Permissions"). */
const SQS_ACTION: Readonly<Record<string, string>> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

function sqs(wire: WireRequest): Requirement[] {
  const target = wire.headers['x-amz-target'];
  let op: string;
  let queueUrl: unknown;
  let queueName: unknown;
  if (target !== undefined) {
    op = target.replace(/^AmazonSQS\./, '');
    const body = jsonBody(wire, `SQS ${op}`);
    queueUrl = body.QueueUrl;
    queueName = body.QueueName;
  } else {
    // The query protocol (older SDKs): Action=...&QueueUrl=... in a form body.
    if (!wire.bodyComplete) throw new Unrecognised('SQS query body too long to read');
    const form = new URLSearchParams(wire.body.toString('utf8'));
    op = form.get('Action') ?? '';
    queueUrl = form.get('QueueUrl') ?? undefined;
    queueName = form.get('QueueName') ?? undefined;
  }
  if (op === '') throw new Unrecognised('SQS request names no operation');
  if (op === 'ListQueues') throw new Unrecognised("SQS ListQueues is account-wide, not a function's call");
  const name =
    typeof queueUrl === 'string'
      ? (queueUrl.split('?')[0]?.split('/').filter(Boolean).pop() ?? '')
      : typeof queueName === 'string'
        ? queueName
        : '';
  if (name === '') throw new Unrecognised(`SQS ${op} names no queue`);
  return [single(access(wire, `sqs:${SQS_ACTION[op] ?? op}`, lookup(name, 'SQS queue', 'queue')))];
}

function secret(wire: WireRequest, service: 'secretsmanager' | 'ssm'): Requirement[] {
  const target = wire.headers['x-amz-target'] ?? '';
  const op = target.split('.').pop() ?? '';
  const body = jsonBody(wire, `${service} ${op}`);
  const ids: unknown[] =
    service === 'secretsmanager' ? [body.SecretId] : Array.isArray(body.Names) ? (body.Names as unknown[]) : [body.Name];
  return ids.map((id) => {
    if (typeof id !== 'string') throw new Unrecognised(`${service} ${op} names no secret`);
    return single(access(wire, `${service}:${op}`, lookup(secretName(id), `${service} secret`, 'secret')));
  });
}

/** A secret named by name or ARN (`arn:aws:secretsmanager:r:a:secret:name-AbCdEf`, `arn:aws:ssm:r:a:parameter/name`). */
function secretName(id: string): string {
  if (logicalResourceOf(id) !== undefined) return id;
  const secretArn = /^arn:[^:]+:secretsmanager:[^:]*:[^:]*:secret:(.+)$/.exec(id)?.[1];
  if (secretArn !== undefined) return logicalResourceOf(secretArn) !== undefined ? secretArn : secretArn.replace(/-[A-Za-z0-9]{6}$/, '');
  const parameterArn = /^arn:[^:]+:ssm:[^:]*:[^:]*:parameter(\/.+)$/.exec(id)?.[1];
  if (parameterArn !== undefined) return logicalResourceOf(parameterArn) !== undefined ? parameterArn : parameterArn.slice(1);
  return id;
}
