import { createRequire } from 'node:module';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import type { FunctionRole } from '../../../shared/domain/key-layout.js';
import { withIamFindings } from '../../parity/matrix.js';
import type { AccessVerdict, RecordedAccess, StackGrants } from '../../support/iam/access.js';
import { AccessCheck, AccessTally, IamAccessDeniedError } from '../../support/iam/access-check.js';
import { classify, needsBody } from '../../support/iam/classify.js';
import { registerResource, registerResources } from '../../support/iam/recorder.js';
import { renderIamReport } from '../../support/iam/report.js';
import { ResourceRegistryError } from '../../support/iam/resources.js';
import type { Classified, RecordedRequest, WireRequest } from '../../support/iam/wire.js';
import { line } from './recorder-support.js';

/**
 * The classifier on request shapes as the SDKs send them (captured by the recorder from the AWS SDK,
 * @google-cloud/storage, Firestore/Pub/Sub gRPC and the Azure SDKs), and the check and report on top.
 */
registerResources({
  'cls-src': 'sourceBucket',
  'cls-out': 'outputBucket',
  'cls-claims': 'claimsTable',
  'cls-manifest': 'manifestTable',
  'cls-tiles': 'tileQueue',
  'cls-tiles-poison': 'deadLetterQueue',
  'cls-sink': 'featureSinkSecret',
});

const SIGV4 = (service: string) =>
  `AWS4-HMAC-SHA256 Credential=tesseratest/20260101/eu-west-1/${service}/aws4_request, SignedHeaders=host, Signature=00`;

function wire(partial: Partial<WireRequest> & Pick<WireRequest, 'method' | 'path'>, role: FunctionRole = 'tile'): WireRequest {
  return {
    transport: 'http1',
    role,
    roleFrom: 'context',
    authority: '127.0.0.1:4566',
    headers: {},
    body: Buffer.alloc(0),
    bodyComplete: true,
    ...partial,
  };
}

const s3 = (method: string, path: string, headers: Record<string, string> = {}, body = '') =>
  wire({ method, path, headers: { authorization: SIGV4('s3'), ...headers }, body: Buffer.from(body) });
const json = (target: string, service: string, body: unknown) =>
  wire({
    method: 'POST',
    path: '/',
    headers: { authorization: SIGV4(service), 'x-amz-target': target },
    body: Buffer.from(JSON.stringify(body)),
  });

/** `role action resource key` per access; alternatives joined by ` | `, both-needed by ` + `. */
function shown(c: Classified): string[] {
  if (c.kind === 'not-cloud') return ['not-cloud'];
  if (c.kind === 'unrecognised') return [`${c.cloud} unrecognised: ${c.why}`];
  return c.required.map((r) => r.anyOf.map((alt) => alt.map(line).join(' + ')).join(' | '));
}

describe('the classifier: AWS', () => {
  it.each([
    ['GET object', s3('GET', '/cls-out/tiles/a%20b/0_0.tif'), ['tile s3:GetObject outputBucket tiles/a b/0_0.tif']],
    [
      'HEAD of a version',
      s3('HEAD', '/cls-src/incoming/s.tif?versionId=3HL4kqtJ'),
      ['tile s3:GetObjectVersion sourceBucket incoming/s.tif'],
    ],
    [
      'PUT',
      s3('PUT', '/cls-out/tiles/s/0_0.tif?x-id=PutObject', { 'if-none-match': '*' }),
      ['tile s3:PutObject outputBucket tiles/s/0_0.tif'],
    ],
    [
      'a copy also reads its source (a version of it)',
      s3('PUT', '/cls-src/incoming/s.tif', { 'x-amz-copy-source': '/cls-src/staging/run-1/s.tif?versionId=v1' }),
      ['tile s3:PutObject sourceBucket incoming/s.tif', 'tile s3:GetObjectVersion sourceBucket staging/run-1/s.tif'],
    ],
    ['DELETE', s3('DELETE', '/cls-out/verify/r/race.bin', { 'if-match': '"e"' }), ['tile s3:DeleteObject outputBucket verify/r/race.bin']],
    ['DELETE a version', s3('DELETE', '/cls-src/incoming/s.tif?versionId=v1'), ['tile s3:DeleteObjectVersion sourceBucket incoming/s.tif']],
    ['ListObjectsV2', s3('GET', '/cls-out?list-type=2&prefix=index%2Fscenes%2F'), ['tile s3:ListBucket outputBucket list:index/scenes/']],
    [
      'ListObjectVersions',
      s3('GET', '/cls-src?versions&prefix=incoming%2Fs.tif'),
      ['tile s3:ListBucketVersions sourceBucket list:incoming/s.tif'],
    ],
    [
      'DeleteObjects, per key',
      s3(
        'POST',
        '/cls-out?delete',
        {},
        '<Delete><Object><Key>a&amp;b</Key></Object><Object><Key>c</Key><VersionId>v</VersionId></Object></Delete>',
      ),
      ['tile s3:DeleteObject outputBucket a&b', 'tile s3:DeleteObjectVersion outputBucket c'],
    ],
    ['multipart part', s3('PUT', '/cls-out/mosaics/m.tif?partNumber=2&uploadId=u'), ['tile s3:PutObject outputBucket mosaics/m.tif']],
    [
      'DynamoDB PutItem',
      json('DynamoDB_20120810.PutItem', 'dynamodb', { TableName: 'cls-claims', Item: {} }),
      ['tile dynamodb:PutItem claimsTable'],
    ],
    [
      'TransactWriteItems, per item',
      json('DynamoDB_20120810.TransactWriteItems', 'dynamodb', {
        TransactItems: [{ Put: { TableName: 'cls-manifest' } }, { ConditionCheck: { TableName: 'cls-claims' } }],
      }),
      ['tile dynamodb:PutItem manifestTable', 'tile dynamodb:ConditionCheckItem claimsTable'],
    ],
    [
      'SQS SendMessageBatch is sqs:SendMessage',
      json('AmazonSQS.SendMessageBatch', 'sqs', { QueueUrl: 'http://127.0.0.1:4566/123456789012/cls-tiles', Entries: [] }),
      ['tile sqs:SendMessage tileQueue'],
    ],
    [
      'SQS GetQueueUrl by name',
      json('AmazonSQS.GetQueueUrl', 'sqs', { QueueName: 'cls-tiles-poison' }),
      ['tile sqs:GetQueueUrl deadLetterQueue'],
    ],
    [
      'SQS over the query protocol',
      wire({
        method: 'POST',
        path: '/',
        headers: { authorization: SIGV4('sqs'), 'content-type': 'application/x-www-form-urlencoded' },
        body: Buffer.from('Action=DeleteMessageBatch&QueueUrl=http%3A%2F%2Fh%2F1%2Fcls-tiles'),
      }),
      ['tile sqs:DeleteMessage tileQueue'],
    ],
    [
      'Secrets Manager by ARN',
      json('secretsmanager.GetSecretValue', 'secretsmanager', {
        SecretId: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:cls-sink-AbC123',
      }),
      ['tile secretsmanager:GetSecretValue featureSinkSecret'],
    ],
  ])('%s', (_, w, expected) => {
    expect(shown(classify(w))).toEqual(expected);
  });

  it('refuses what it cannot place: an unregistered bucket, a table named nowhere', () => {
    expect(shown(classify(s3('GET', '/someone-elses/x')))).toEqual([
      'aws unrecognised: S3 bucket someone-elses is not registered (registerResource where the suite creates it)',
    ]);
    expect(shown(classify(json('DynamoDB_20120810.GetItem', 'dynamodb', {})))).toEqual([
      'aws unrecognised: DynamoDB GetItem names no table',
    ]);
  });
});

let firestoreRoot: protobuf.Root | undefined;
function firestoreMessage(type: string, value: Record<string, unknown>): Buffer {
  if (!firestoreRoot) {
    const require = createRequire(import.meta.url);
    const sdk = require.resolve('@google-cloud/firestore');
    firestoreRoot = protobuf.Root.fromJSON(require(sdk.replace(/build\/src\/index\.js$/, 'build/protos/v1.json')) as protobuf.INamespace);
  }
  const t = firestoreRoot.lookupType(`google.firestore.v1.${type}`);
  return Buffer.from(t.encode(t.fromObject(value)).finish());
}
const grpc = (method: string, body: Buffer, headers: Record<string, string> = {}) =>
  wire({
    transport: 'http2',
    roleFrom: 'grpc-tag',
    method: 'POST',
    path: method,
    headers: { 'content-type': 'application/grpc', ...headers },
    body,
  });
const DOCS = 'projects/p/databases/(default)/documents';
const SUBSCRIPTION = Buffer.from('projects/p/subscriptions/cls-tiles-sub');
registerResource('cls-tiles-sub', 'tileQueue');

describe('the classifier: GCP', () => {
  const gcs = (method: string, path: string, body = '') => wire({ method, path, body: Buffer.from(body) });
  it.each([
    [
      'media download',
      gcs('GET', '/storage/v1/b/cls-src/o/incoming%2Fs.tif?alt=media&generation=7'),
      ['tile storage.objects.get sourceBucket incoming/s.tif'],
    ],
    [
      'list',
      gcs('GET', '/storage/v1/b/cls-out/o?prefix=tiles%2Fk%2F&pageToken=x'),
      ['tile storage.objects.list outputBucket list:tiles/k/'],
    ],
    [
      'create-only upload',
      gcs('POST', '/upload/storage/v1/b/cls-out/o?uploadType=multipart&name=tiles%2Fk%2F0_0.tif&ifGenerationMatch=0'),
      ['tile storage.objects.create outputBucket tiles/k/0_0.tif'],
    ],
    [
      'a replace is create + delete',
      gcs('POST', '/upload/storage/v1/b/cls-out/o?uploadType=multipart&name=index%2Fmosaic-sweep.json&ifGenerationMatch=17'),
      [
        'tile storage.objects.create outputBucket index/mosaic-sweep.json',
        'tile storage.objects.delete outputBucket index/mosaic-sweep.json',
      ],
    ],
    [
      'an upload without a precondition may overwrite: create + delete',
      gcs(
        'POST',
        '/upload/storage/v1/b/cls-out/o?uploadType=multipart',
        '--b\r\nContent-Type: application/json\r\n\r\n{"name":"verify/r/x"}\r\n--b\r\n',
      ),
      ['tile storage.objects.create outputBucket verify/r/x', 'tile storage.objects.delete outputBucket verify/r/x'],
    ],
    [
      'delete',
      gcs('DELETE', '/storage/v1/b/cls-out/o/tiles%2Fk%2F0_0.tif?ifGenerationMatch=3'),
      ['tile storage.objects.delete outputBucket tiles/k/0_0.tif'],
    ],
    ['metadata patch', gcs('PATCH', '/storage/v1/b/cls-out/o/a?ifMetagenerationMatch=1'), ['tile storage.objects.update outputBucket a']],
    [
      'rewrite: get the source, create on the destination',
      gcs('POST', '/storage/v1/b/cls-src/o/staging%2Fr%2Fs.tif/rewriteTo/b/cls-src/o/incoming%2Fs.tif?ifGenerationMatch=0'),
      ['tile storage.objects.get sourceBucket staging/r/s.tif', 'tile storage.objects.create sourceBucket incoming/s.tif'],
    ],
    [
      'compose: every source read',
      gcs(
        'POST',
        '/storage/v1/b/cls-out/o/m.tif/compose?ifGenerationMatch=0',
        JSON.stringify({ sourceObjects: [{ name: 'tiles/a' }, { name: 'tiles/b' }] }),
      ),
      [
        'tile storage.objects.create outputBucket m.tif',
        'tile storage.objects.get outputBucket tiles/a',
        'tile storage.objects.get outputBucket tiles/b',
      ],
    ],
    [
      'Firestore Commit: create() is entities.create, a delete with lastUpdateTime entities.delete',
      grpc(
        '/google.firestore.v1.Firestore/Commit',
        firestoreMessage('CommitRequest', {
          database: 'projects/p/databases/(default)',
          writes: [
            { update: { name: `${DOCS}/cls-claims/j1`, fields: {} }, currentDocument: { exists: false } },
            { delete: `${DOCS}/cls-claims/j2`, currentDocument: { updateTime: { seconds: 1 } } },
            { update: { name: `${DOCS}/cls-manifest/m1`, fields: {} } },
          ],
        }),
      ),
      [
        'tile datastore.entities.create claimsTable',
        'tile datastore.entities.delete claimsTable',
        'tile datastore.entities.create manifestTable',
        'tile datastore.entities.update manifestTable',
      ],
    ],
    [
      'Firestore RunQuery: get + list',
      grpc(
        '/google.firestore.v1.Firestore/RunQuery',
        firestoreMessage('RunQueryRequest', { parent: DOCS, structuredQuery: { from: [{ collectionId: 'cls-manifest' }] } }),
      ),
      ['tile datastore.entities.get manifestTable', 'tile datastore.entities.list manifestTable'],
    ],
    [
      'Firestore BatchGetDocuments',
      grpc(
        '/google.firestore.v1.Firestore/BatchGetDocuments',
        firestoreMessage('BatchGetDocumentsRequest', { database: 'x', documents: [`${DOCS}/cls-claims/j1`] }),
      ),
      ['tile datastore.entities.get claimsTable'],
    ],
    [
      'Pub/Sub Publish, the topic from the routing header',
      grpc('/google.pubsub.v1.Publisher/Publish', Buffer.alloc(0), { 'x-goog-request-params': 'topic=projects%2Fp%2Ftopics%2Fcls-tiles' }),
      ['tile pubsub.topics.publish tileQueue'],
    ],
    [
      'Pub/Sub Pull (a harness pull made as a role), the subscription from field 1 of the message',
      grpc(
        '/google.pubsub.v1.Subscriber/Pull',
        Buffer.concat([Buffer.from([0x0a, SUBSCRIPTION.length]), SUBSCRIPTION, Buffer.from([0x10, 0x0a])]),
      ),
      ['tile pubsub.subscriptions.consume tileQueue'],
    ],
  ])('%s', (_, w, expected) => {
    expect(shown(classify(w))).toEqual(expected);
  });

  it("learns a subscription verify creates on a topic, so its pulls and its deletion are placed on the topic's queue", () => {
    const field = (n: number, text: string) => Buffer.concat([Buffer.from([(n << 3) | 2, Buffer.byteLength(text)]), Buffer.from(text)]);
    const create = grpc(
      '/google.pubsub.v1.Subscriber/CreateSubscription',
      Buffer.concat([field(1, 'projects/p/subscriptions/tessera-verify-x1'), field(2, 'projects/p/topics/cls-tiles')]),
    );
    expect(shown(classify(create))).toEqual([
      'tile pubsub.subscriptions.create tileQueue',
      'tile pubsub.topics.attachSubscription tileQueue',
    ]);
    const remove = grpc('/google.pubsub.v1.Subscriber/DeleteSubscription', Buffer.alloc(0), {
      'x-goog-request-params': 'subscription=projects%2Fp%2Fsubscriptions%2Ftessera-verify-x1',
    });
    expect(shown(classify(remove))).toEqual(['tile pubsub.subscriptions.delete tileQueue']);
  });

  it("places a StreamingPull's later messages (acks, heartbeats) by the subscription its first message named", () => {
    const first = Buffer.concat([Buffer.from([0x0a, SUBSCRIPTION.length]), SUBSCRIPTION]);
    const ack = Buffer.from([0x12, 0x02, 0x61, 0x31]); // field 2 (ack_ids): "a1"
    const later = { ...grpc('/google.pubsub.v1.Subscriber/StreamingPull', ack), firstMessage: first };
    expect(shown(classify(later))).toEqual(['tile pubsub.subscriptions.consume tileQueue']);
    expect(shown(classify(grpc('/google.pubsub.v1.Subscriber/StreamingPull', ack)))).toEqual([
      'gcp unrecognised: Pub/Sub Subscriber/StreamingPull names no subscription',
    ]);
  });

  it('refuses a Firestore call the adapters never make rather than guess its resource', () => {
    expect(shown(classify(grpc('/google.firestore.v1.Firestore/BeginTransaction', Buffer.alloc(0))))).toEqual([
      'gcp unrecognised: Firestore BeginTransaction is not classified (the adapters make no such call)',
    ]);
  });
});

describe('the classifier: Azure', () => {
  const BLOBS = 'Microsoft.Storage/storageAccounts/blobServices/containers/blobs';
  const ENT = 'Microsoft.Storage/storageAccounts/tableServices/tables/entities';
  const MSG = 'Microsoft.Storage/storageAccounts/queueServices/queues/messages';
  const az = (method: string, path: string, headers: Record<string, string> = {}) =>
    wire({ method, path, authority: '127.0.0.1:10000', headers: { 'x-ms-version': '2025-01-05', ...headers } });
  it.each([
    ['Get Blob', az('GET', '/devstoreaccount1/cls-out/tiles/k/0_0.tif'), [`tile ${BLOBS}/read outputBucket tiles/k/0_0.tif`]],
    [
      'List Blobs (Blob.List)',
      az('GET', '/devstoreaccount1/cls-out?restype=container&comp=list&prefix=index%2Fscenes%2F'),
      [`tile ${BLOBS}/read outputBucket list:index/scenes/`],
    ],
    [
      'Put Blob that can only create: write or add/action',
      az('PUT', '/devstoreaccount1/cls-out/tiles/k/0_0.tif', { 'if-none-match': '*' }),
      [`tile ${BLOBS}/write outputBucket tiles/k/0_0.tif | tile ${BLOBS}/add/action outputBucket tiles/k/0_0.tif`],
    ],
    [
      'Put Blob replacing: write',
      az('PUT', '/devstoreaccount1/cls-out/a', { 'if-match': '"0x8"' }),
      [`tile ${BLOBS}/write outputBucket a`],
    ],
    [
      'host-style account (the cloud)',
      wire({ method: 'DELETE', path: '/cls-out/a', authority: 'acct.blob.core.windows.net', headers: { 'x-ms-version': 'v' } }),
      [`tile ${BLOBS}/delete outputBucket a`],
    ],
    [
      'Copy Blob: read on the source',
      az('PUT', '/devstoreaccount1/cls-src/incoming/s.tif', {
        'if-none-match': '*',
        'x-ms-copy-source': 'http://127.0.0.1:10000/devstoreaccount1/cls-src/staging/s.tif',
      }),
      [
        `tile ${BLOBS}/write sourceBucket incoming/s.tif | tile ${BLOBS}/add/action sourceBucket incoming/s.tif`,
        `tile ${BLOBS}/read sourceBucket staging/s.tif`,
      ],
    ],
    [
      'Insert Entity',
      az('POST', '/devstoreaccount1/cls-claims', { dataserviceversion: '3.0' }),
      [`tile ${ENT}/write claimsTable | tile ${ENT}/add/action claimsTable`],
    ],
    [
      'Insert Or Replace (no If-Match): write, or add/action and update/action',
      az('PUT', "/devstoreaccount1/cls-claims(PartitionKey='a',RowKey='b')", { dataserviceversion: '3.0' }),
      [`tile ${ENT}/write claimsTable | tile ${ENT}/add/action claimsTable + tile ${ENT}/update/action claimsTable`],
    ],
    [
      'Merge with If-Match',
      az('PATCH', "/devstoreaccount1/cls-claims(PartitionKey='a',RowKey='b')", { dataserviceversion: '3.0', 'if-match': 'W/"x"' }),
      [`tile ${ENT}/write claimsTable | tile ${ENT}/update/action claimsTable`],
    ],
    [
      'Query Entities',
      az('GET', "/devstoreaccount1/cls-manifest()?$filter=PartitionKey%20eq%20'x'", { dataserviceversion: '3.0' }),
      [`tile ${ENT}/read manifestTable`],
    ],
    [
      'Peek Messages',
      az('GET', '/devstoreaccount1/cls-tiles-poison/messages?peekonly=true&numofmessages=32'),
      [`tile ${MSG}/read deadLetterQueue`],
    ],
    [
      'Update Message',
      az('PUT', '/devstoreaccount1/cls-tiles/messages/id?popreceipt=p&visibilitytimeout=0'),
      [`tile ${MSG}/write tileQueue`],
    ],
    [
      'Key Vault Get Secret',
      wire({ method: 'GET', path: '/secrets/cls-sink/?api-version=7.5', authority: 'kv.vault.azure.net' }),
      ['tile Microsoft.KeyVault/vaults/secrets/getSecret/action featureSinkSecret'],
    ],
  ])('%s', (_, w, expected) => {
    expect(shown(classify(w))).toEqual(expected);
  });
});

describe('the classifier: what is not a cloud call', () => {
  it('an artefact fetched over plain HTTP is nobody’s grant', () => {
    expect(classify(wire({ method: 'GET', path: '/artefacts/s.tif', authority: '127.0.0.1:8080' }))).toEqual({ kind: 'not-cloud' });
  });

  it('keeps only the bodies that name the resource (tiles and scenes are megabytes)', () => {
    expect(needsBody('POST', '/', { 'x-amz-target': 'DynamoDB_20120810.PutItem' })).toBe(true);
    expect(needsBody('PUT', '/b/tiles/x.tif', { 'content-type': 'image/tiff' })).toBe(false);
    expect(needsBody('POST', '/upload/storage/v1/b/x/o?uploadType=multipart&name=a', {})).toBe(false);
    expect(needsBody('POST', '/upload/storage/v1/b/x/o?uploadType=multipart', {})).toBe(true);
  });
});

describe('the resource registry', () => {
  it('refuses one name for two parts', () => {
    registerResource('cls-twice', 'sourceBucket');
    registerResource('cls-twice', 'sourceBucket');
    expect(() => registerResource('cls-twice', 'outputBucket')).toThrow(ResourceRegistryError);
  });
});

/** Grants that allow exactly the listed `role action resource key-prefix` lines, each its own grant. */
function fakeGrants(allowed: readonly [FunctionRole, string, string, string][]): StackGrants {
  return {
    cloud: 'aws',
    check(a: RecordedAccess): AccessVerdict {
      const i = allowed.findIndex(
        ([role, action, resource, prefix]) =>
          a.role === role && a.action === action && a.resource === resource && (a.key ?? '').startsWith(prefix),
      );
      return i < 0 ? { allowed: false } : { allowed: true, grant: `g${i}` };
    },
    grants: (role) =>
      allowed.flatMap(([r, action, resource, prefix], i) =>
        r === role ? [{ id: `g${i}`, role, text: `${action} on ${resource} ${prefix}*` }] : [],
      ),
  };
}

const recorded = (w: WireRequest): RecordedRequest => ({ wire: w, classified: classify(w) });

describe('AccessCheck', () => {
  const grants = fakeGrants([
    ['tile', 's3:PutObject', 'outputBucket', 'tiles/'],
    ['tile', 's3:GetObject', 'outputBucket', ''],
    ['mosaic', 's3:ListBucket', 'outputBucket', 'tiles/'],
  ]);

  it('allows what a grant covers and counts it against that grant', () => {
    const check = new AccessCheck(grants);
    check.add(recorded(s3('PUT', '/cls-out/tiles/k/0_0.tif')));
    check.add(recorded(s3('PUT', '/cls-out/tiles/k/0_1.tif')));
    check.add(recorded(s3('GET', '/cls-out/scenes/k/scene.json')));
    expect(check.tally.clean).toBe(true);
    expect(Object.fromEntries(check.tally.allowedByGrant)).toEqual({ 'tile g0': 2, 'tile g1': 1 });
    expect(() => check.assertAllowed()).not.toThrow();
  });

  it('fails naming role, action and key of each denied access, once per access with its count', () => {
    const check = new AccessCheck(grants);
    for (let i = 0; i < 3; i++) check.add(recorded(s3('PUT', '/cls-out/scenes/k/chunks/0-4.json')));
    check.add(recorded(s3('GET', '/cls-out?list-type=2&prefix=index%2Fscenes%2F')));
    check.add(recorded(s3('GET', '/unregistered/x')));
    const error = (() => {
      try {
        check.assertAllowed();
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(IamAccessDeniedError);
    expect((error as IamAccessDeniedError).findings).toEqual([
      'denied: tile s3:PutObject on outputBucket "scenes/k/chunks/0-4.json" (3 times; first PUT /cls-out/scenes/k/chunks/0-4.json)',
      'denied: tile s3:ListBucket on outputBucket listing "index/scenes/" (once; first GET /cls-out?list-type=2&prefix=index%2Fscenes%2F)',
      'unclassified: tile GET /unregistered/x: S3 bucket unregistered is not registered (registerResource where the suite creates it) (once)',
    ]);
  });

  it('names a denial once per key shape: the same access on many scenes is one line, with its count of keys', () => {
    const check = new AccessCheck(grants);
    const a = 'a'.repeat(64);
    const b = 'b'.repeat(64);
    check.add(recorded(s3('PUT', `/cls-out/index/scenes/2026120100/${a}`)));
    check.add(recorded(s3('PUT', `/cls-out/index/scenes/2026120101/${b}`)));
    check.add(recorded(s3('PUT', `/cls-out/index/scenes/2026120101/${b}`)));
    expect(check.tally.findings()).toEqual([
      `denied: tile s3:PutObject on outputBucket "index/scenes/<hour>/<scene>" (2 keys, 3 times; first PUT /cls-out/index/scenes/2026120100/${a})`,
    ]);
  });

  it("takes any of the cloud's alternatives, and names the others when none is granted", () => {
    const azure: StackGrants = {
      cloud: 'azure',
      check: (a) => (a.action.endsWith('/add/action') ? { allowed: true, grant: 'creator' } : { allowed: false }),
      grants: () => [],
    };
    const check = new AccessCheck(azure);
    const az = (method: string, path: string, headers: Record<string, string>) =>
      recorded(wire({ method, path, authority: '127.0.0.1:10000', headers: { 'x-ms-version': 'v', ...headers } }));
    check.add(az('PUT', '/devstoreaccount1/cls-out/tiles/a', { 'if-none-match': '*' }));
    check.add(az('PUT', '/devstoreaccount1/cls-out/tiles/a', { 'if-match': '"e"' }));
    expect(Object.fromEntries(check.tally.allowedByGrant)).toEqual({ 'tile creator': 1 });
    expect(check.tally.findings()).toEqual([
      'denied: tile Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write on outputBucket "tiles/a" (once; first PUT /devstoreaccount1/cls-out/tiles/a)',
    ]);
  });

  it('ignores the requests of other clouds (each cloud column has its own check)', () => {
    const check = new AccessCheck(grants);
    check.add(recorded(wire({ method: 'GET', path: '/storage/v1/b/cls-out/o/x' })));
    expect(check.tally.requests).toBe(0);
  });

  it('adds tallies of several cells up and reports every grant, unused ones marked', () => {
    const a = new AccessCheck(grants);
    a.add(recorded(s3('PUT', '/cls-out/tiles/k/0_0.tif')));
    const b = new AccessCheck(grants);
    b.add(recorded(s3('PUT', '/cls-out/tiles/k/0_0.tif')));
    b.add(recorded(s3('PUT', '/cls-out/index/x')));
    const total = new AccessTally('aws');
    total.absorb(a.tally);
    total.absorb(b.tally);
    expect(total.allowedBy('tile', 'g0')).toBe(2);
    const md = renderIamReport(
      { aws: { grants, tally: total } },
      { command: 'npm run parity', at: new Date(0), scope: 'the parity matrix' },
    );
    expect(md).toContain('| `g0` | s3:PutObject on outputBucket tiles/* | 2 |');
    expect(md).toContain('| `g1` | s3:GetObject on outputBucket * | 0 (unused) |');
    expect(md).toContain('| tile | `s3:PutObject` | outputBucket | `index/x` | 1 | 1 | `PUT /cls-out/index/x` |');
    expect(md).toContain('| aws | 3 | 3 | 1 | 0 | 2 |');
  });
});

describe('the parity matrix with the IAM check', () => {
  const record = { calls: {} } as never;
  it('fails a cell whose functions made an access outside their grants, whatever its outcome record', () => {
    expect(withIamFindings({ status: 'pass', record }, ['denied: tile s3:PutObject on outputBucket "index/x"'])).toEqual({
      status: 'fail',
      diff: ['iam denied: tile s3:PutObject on outputBucket "index/x"'],
      record,
    });
    expect(withIamFindings({ status: 'fail', diff: ['calls.x: expected 1, got 2'] }, ['unclassified: tile GET /x: why'])).toEqual({
      status: 'fail',
      diff: ['calls.x: expected 1, got 2', 'iam unclassified: tile GET /x: why'],
    });
  });

  it('leaves a cell without findings as it was', () => {
    const cell = { status: 'pass', record } as const;
    expect(withIamFindings(cell, [])).toBe(cell);
  });
});
