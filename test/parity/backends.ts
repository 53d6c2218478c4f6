import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { rm, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteItemCommand } from '@aws-sdk/client-dynamodb';
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteObjectCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
} from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { v1 } from '@google-cloud/pubsub';
import { CLAIMS_PARTITION_KEY, DynamoDbClaimStore } from '../../functions/aws/adapters/dynamodb-claim-store.js';
import { S3ObjectStore } from '../../functions/aws/adapters/s3-object-store.js';
import { SqsJobQueue } from '../../functions/aws/adapters/sqs-job-queue.js';
import { AzureBlobObjectStore } from '../../functions/azure/adapters/azure-blob-object-store.js';
import { AzureQueueJobQueue, poisonQueueName } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { AzureTableClaimStore, PARTITION_PREFIX_LENGTH } from '../../functions/azure/adapters/azure-table-claim-store.js';
import { azureClients } from '../../functions/azure/compose.js';
import { FirestoreClaimStore } from '../../functions/gcp/adapters/firestore-claim-store.js';
import { GcsObjectStore } from '../../functions/gcp/adapters/gcs-object-store.js';
import { PubSubDeadLetterTopic } from '../../functions/gcp/adapters/pubsub-dead-letter-topic.js';
import { PubSubJobQueue, TILE_TOPIC_BATCHING } from '../../functions/gcp/adapters/pubsub-job-queue.js';
import { openSqlite } from '../../functions/local/adapters/sqlite-database.js';
import { createLocalBackend } from '../../functions/local/compose.js';
import type { Backend } from '../../shared/app/backend.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import type { ClaimStore } from '../../shared/ports/claim-store.port.js';
import type { PullQueue } from '../../shared/ports/job-queue.port.js';
import type { ManifestStore } from '../../shared/ports/manifest-store.port.js';
import type {
  DeleteIfVersionResult,
  ObjectHead,
  ObjectStore,
  PutIfAbsentResult,
  PutIfMatchResult,
  PutOptions,
  ReadPin,
} from '../../shared/ports/object-store.port.js';
import { dynamoDbClient, freshClaimsTable, operatorS3Client, sqsClient } from '../aws/clients.js';
import { createRoleUsers, describeDenial, roleSignedS3 } from '../aws/iam.js';
import { firestoreClient, freshBucket as freshGcsBucket, pubsubClient, storageClient } from '../gcp/clients.js';
import {
  AZURE_TABLE_CLAIM_WIRE,
  type ClaimStoreFaults,
  DYNAMODB_CLAIM_WIRE,
  FIRESTORE_CLAIM_WIRE,
  proxiedClaimFaults,
  withClaimFaults,
} from '../support/claim-faults.js';
import { azuriteConnectionString } from '../support/emulators/azure.js';
import type { EmulatorEndpoints } from '../support/emulators/types.js';
import { FakeClock } from '../support/fake-clock.js';
import { FaultProxy, type RecordedRequest, storeFaults } from '../support/fault-proxy.js';
import { registerResources } from '../support/iam/resources.js';
import { type ObjectStoreFaults, proxiedObjectFaults, withObjectFaults } from '../support/object-faults.js';
import { type ParityFeatures, parityFeatures } from './feature-sink.js';
import { parityManifest } from './manifest-backends.js';
import { PubSubPullQueue } from './pubsub-pull-queue.js';

/** The four backends, in matrix order. */
export const BACKEND_NAMES = ['local', 'aws', 'gcp', 'azure'] as const;
export type BackendName = (typeof BACKEND_NAMES)[number];

/**
 * The bucket name every backend's SourceRef carries. Bucket, container and
 * local folder names differ per run and per cloud; the job key hashes this
 * logical name instead, so the same object gives the same keys everywhere.
 */
export const PARITY_SOURCE_BUCKET = 'tessera-parity-sources';

/**
 * Deliveries before a message is dead-lettered, the same on every backend:
 * SQS maxReceiveCount, Pub/Sub maxDeliveryAttempts (whose minimum is 5),
 * the Functions host's maxDequeueCount (whose default is 5), the local queue's count.
 */
export const PARITY_MAX_RECEIVE_COUNT = 5;

/**
 * A source store that counts what is read from it, so a scenario can prove a
 * rejected delivery read nothing. Writes and listings pass straight through.
 */
export class CountingObjectStore implements ObjectStore {
  readonly name: string;
  reads = 0;
  bytesRead = 0;

  constructor(private readonly inner: ObjectStore) {
    this.name = inner.name;
  }

  uriOf(key: string): string {
    if (this.inner.uriOf === undefined) throw new Error(`${this.inner.name} has no uriOf`);
    return this.inner.uriOf(key);
  }

  putIfAbsent(key: string, body: Uint8Array, options?: PutOptions): Promise<PutIfAbsentResult> {
    return this.inner.putIfAbsent(key, body, options);
  }

  putIfMatch(key: string, body: Uint8Array, expectedVersion: string, options?: PutOptions): Promise<PutIfMatchResult> {
    return this.inner.putIfMatch(key, body, expectedVersion, options);
  }

  deleteIfVersion(key: string, version: string): Promise<DeleteIfVersionResult> {
    return this.inner.deleteIfVersion(key, version);
  }

  pin(key: string, version: string): Promise<ReadPin> {
    return this.inner.pin(key, version);
  }

  async getRange(key: string, start: number, end: number, pin?: ReadPin): Promise<Uint8Array> {
    const bytes = await this.inner.getRange(key, start, end, pin);
    this.reads++;
    this.bytesRead += bytes.byteLength;
    return bytes;
  }

  async get(key: string): Promise<Uint8Array> {
    const bytes = await this.inner.get(key);
    this.reads++;
    this.bytesRead += bytes.byteLength;
    return bytes;
  }

  head(key: string): Promise<ObjectHead | undefined> {
    return this.inner.head(key);
  }

  list(prefix: string): AsyncIterable<ObjectHead> {
    return this.inner.list(prefix);
  }
}

/** One backend in a fresh namespace: its own table or collection, buckets or containers, queue and dead-letter queue. */
export interface ParityBackend {
  readonly name: BackendName;
  /** The Backend the use cases run on. Its clock is `clock`, its telemetry `telemetry`, its sources `sources`. */
  readonly backend: Backend;
  /** Shared by every claim request, the telemetry and (local) the queue's visibility. */
  readonly clock: FakeClock;
  /** Counters and the captured JSON log lines (`logs`). */
  readonly telemetry: JsonTelemetry;
  readonly logs: readonly string[];
  readonly sources: CountingObjectStore;
  /** The backend's own ingest manifest (SQLite, DynamoDB, Firestore, Table Storage), fresh per namespace: the ingest scenarios. */
  readonly manifest: ManifestStore;
  /** The PostGIS feature sink (shared by every backend; undefined when no PostgreSQL runs): the sink scenarios. */
  readonly features: ParityFeatures | undefined;
  /** The backend's real queue, pulled by hand; the same queue `backend.queue` fans out to. */
  readonly pullQueue: PullQueue;
  /** Deletes an output object behind the ports' back (Tessera itself never deletes: this plays a lifecycle rule or an operator). */
  deleteOutput(key: string): Promise<void>;
  /** Lost answers and transient errors between the claim store and its backend (a fault proxy; local: a wrapper). */
  readonly claimFaults: ClaimStoreFaults;
  /** Deletes a claim row behind the ports' back: what TTL (or the Table sweep) does after the retention. */
  deleteClaim(jobId: string): Promise<void>;
  /**
   * Drops every kept older version of a source object (S3 noncurrent versions, GCS noncurrent
   * generations, Azure snapshots; nothing on the local store, which keeps none): what a lifecycle
   * rule does, so a pinned read of an overwritten source has nothing left to read on any backend.
   */
  expireSourceVersions(key: string): Promise<void>;
  /**
   * Changes a source object's metadata, not its bytes, as a user or a tool does (no event follows): S3 copies the
   * object onto itself with new metadata (a new version id), GCS patches it (a new metageneration, the same
   * generation), Azure sets its metadata (a new ETag). The local store has no object metadata: nothing changes.
   */
  updateSourceMetadata(key: string): Promise<void>;
  /**
   * Lost answers and transient errors between the output store and its backend (a fault proxy; local: a
   * wrapper). Only with `{ outputFaults: true }` (the soak); otherwise each call throws.
   */
  readonly outputFaults: ObjectStoreFaults;
  /** Every request the fault proxies saw so far (claims, and outputs with `outputFaults`), for the wire guard. */
  wire(): readonly RecordedRequest[];
  /** The local backend's data folder, where a worker process opens its own connections (the soak's SIGKILLs); clouds: undefined. */
  readonly dataDir?: string | undefined;
  /**
   * Requests the deployed IAM policies refused so far, `role: action on key` (aws: S3 on the IAM-enforcing
   * moto, signed per role; empty elsewhere). Any at all fails the scenario (ScenarioContext.record).
   */
  accessDenials(): readonly string[];
  close(): Promise<void>;
}

/** Options of {@link createParityBackend}: the soak's extra faults; the parity matrix uses none. */
export interface ParityBackendOptions {
  /** Put the output store's client behind a fault proxy too (local: a wrapper), so `outputFaults` works. */
  readonly outputFaults?: boolean;
}

/** Thrown when a backend's emulators are not running: the parity cell is an emulator limitation, never a pass. */
export class EmulatorUnavailableError extends Error {
  override readonly name = 'EmulatorUnavailableError';
}

/** A name valid for every resource kind on every cloud: lowercase letters and digits, starting with a letter, 3-63 long. */
export function namespaceName(label: string): string {
  return `tp${label.toLowerCase().replace(/[^a-z0-9]/g, '')}${randomBytes(5).toString('hex')}`;
}

interface Parts {
  readonly claims: ClaimStore;
  readonly sources: ObjectStore;
  readonly outputs: ObjectStore;
  readonly queue: Backend['queue'];
  readonly pullQueue: PullQueue;
  deleteOutput(key: string): Promise<void>;
  expireSourceVersions(key: string): Promise<void>;
  updateSourceMetadata(key: string): Promise<void>;
  readonly claimFaults: ClaimStoreFaults;
  deleteClaim(jobId: string): Promise<void>;
  readonly outputFaults?: ObjectStoreFaults | undefined;
  readonly proxies: readonly FaultProxy[];
  readonly dataDir?: string | undefined;
  accessDenials?(): readonly string[];
  close(): Promise<void>;
}

const NO_OUTPUT_FAULTS: ObjectStoreFaults = {
  loseNextWriteAnswer: () => {
    throw new Error('output faults need createParityBackend(..., { outputFaults: true })');
  },
  failNextWriteTransiently: () => {
    throw new Error('output faults need createParityBackend(..., { outputFaults: true })');
  },
  landedWrites: () => {
    throw new Error('output faults need createParityBackend(..., { outputFaults: true })');
  },
  corruptNextWrite: () => {
    throw new Error('output faults need createParityBackend(..., { outputFaults: true }) (a scenario: backendOptions)');
  },
};

/**
 * A fresh namespace on one backend. `label` goes into every resource name
 * (the scenario id), so a failed run can be found in the emulators.
 *
 * @example
 * const pb = await createParityBackend('aws', inject('emulators'), 's01');
 * try { await fanOutScene(pb.backend, { source, params }); } finally { await pb.close(); }
 */
export async function createParityBackend(
  name: BackendName,
  endpoints: EmulatorEndpoints,
  label: string,
  options: ParityBackendOptions = {},
): Promise<ParityBackend> {
  const clock = new FakeClock();
  const logs: string[] = [];
  const telemetry = new JsonTelemetry((line) => logs.push(line), { clock });
  const ns = namespaceName(label);
  const parts = await createParts(name, endpoints, ns, clock, options);
  const manifest = await parityManifest(name, endpoints, ns);
  const features = await parityFeatures(endpoints);
  const sources = new CountingObjectStore(parts.sources);
  return {
    name,
    backend: { claims: parts.claims, sources, outputs: parts.outputs, queue: parts.queue, clock, telemetry },
    clock,
    telemetry,
    logs,
    sources,
    manifest: manifest.store,
    features,
    pullQueue: parts.pullQueue,
    deleteOutput: (key) => parts.deleteOutput(key),
    expireSourceVersions: (key) => parts.expireSourceVersions(key),
    updateSourceMetadata: (key) => parts.updateSourceMetadata(key),
    claimFaults: parts.claimFaults,
    deleteClaim: (jobId) => parts.deleteClaim(jobId),
    outputFaults: parts.outputFaults ?? NO_OUTPUT_FAULTS,
    wire: () => parts.proxies.flatMap((p) => p.requests),
    dataDir: parts.dataDir,
    accessDenials: () => parts.accessDenials?.() ?? [],
    close: async () => {
      await parts.close();
      await manifest.close();
      await features?.close();
    },
  };
}

function createParts(
  name: BackendName,
  endpoints: EmulatorEndpoints,
  ns: string,
  clock: FakeClock,
  options: ParityBackendOptions,
): Promise<Parts> {
  switch (name) {
    case 'local':
      return localParts(ns, clock, options);
    case 'aws':
      return awsParts(endpoints, ns, options);
    case 'gcp':
      return gcpParts(endpoints, ns, options);
    case 'azure':
      return azureParts(endpoints, ns, options);
    default: {
      const never: never = name;
      throw new Error(`unknown backend ${String(never)}`);
    }
  }
}

/** SQLite claims and queue (its visibility runs on the FakeClock), filesystem objects, in a temporary folder. */
async function localParts(ns: string, clock: FakeClock, options: ParityBackendOptions): Promise<Parts> {
  const dir = mkdtempSync(join(tmpdir(), `tessera-${ns}-`));
  const local = createLocalBackend(dir, { clock, maxReceiveCount: PARITY_MAX_RECEIVE_COUNT });
  // No wire: the wrapper applies an armed write, loses its answer and resends it, as an SDK would.
  const faulty = withClaimFaults(local.claims, { resend: true });
  const faultyOutputs = options.outputFaults ? withObjectFaults(local.outputs) : undefined;
  return {
    claims: faulty.store,
    claimFaults: faulty.faults,
    deleteClaim: async (jobId) => {
      const db = openSqlite(join(dir, 'claims.db'), 5_000);
      try {
        db.prepare('DELETE FROM claims WHERE job_id = ?').run(jobId);
      } finally {
        db.close();
      }
    },
    sources: local.sources,
    outputs: faultyOutputs?.store ?? local.outputs,
    outputFaults: faultyOutputs?.faults,
    proxies: [],
    dataDir: dir,
    queue: local.queue,
    pullQueue: local.queue,
    deleteOutput: (key) => unlink(local.outputs.pathOf(key)),
    // A file replaced by rename(2) is gone: there is no older version to drop.
    expireSourceVersions: async () => {},
    // A file has no object metadata (and its content hash, the version token, cannot change without its bytes).
    updateSourceMetadata: async () => {},
    close: async () => {
      local.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The source prefix of the parity scenes (ScenarioContext.stage puts them under `incoming/`): the aws column's
 * IAM users carry the policies the Pulumi program makes for a stack with this prefix.
 */
export const PARITY_SOURCE_PREFIX = 'incoming/';

/**
 * DynamoDB Local claims, S3 buckets on the IAM-enforcing moto and an SQS queue (plain moto) whose redrive
 * policy moves a message to its DLQ after the count. Every S3 request runs as the role of the code making it
 * (the harness runs each use case as its function, test/support/function-role.ts), signed by that role's IAM
 * user, which carries exactly the policy the Pulumi program deploys for the function (test/aws/iam.ts); the
 * scenario's own set-up and checks run as the operator. SQS and DynamoDB stay unenforced here: moto's IAM does
 * not match their ARNs (the access recorder checks those requests against the grants).
 */
async function awsParts(endpoints: EmulatorEndpoints, ns: string, options: ParityBackendOptions): Promise<Parts> {
  const e = endpoints.aws;
  if (!e) throw new EmulatorUnavailableError('the AWS emulators (DynamoDB Local, moto) are not running');
  const ddb = dynamoDbClient(e);
  const s3 = operatorS3Client(e);
  const sqs = sqsClient(e);
  // The claim store's client goes through a fault proxy (lost answers, throttling): the SDK's own retry runs.
  const claimsProxy = await FaultProxy.start({ target: e.dynamodb });
  const claimsDdb = dynamoDbClient({ ...e, dynamodb: claimsProxy.url });
  const [table, , , queues] = await Promise.all([
    freshClaimsTable(ddb, ns),
    // Versioned, as every stack's source bucket is (infra/aws): a version id per upload, kept versions readable.
    s3
      .send(new CreateBucketCommand({ Bucket: `${ns}-src` }))
      .then(() => s3.send(new PutBucketVersioningCommand({ Bucket: `${ns}-src`, VersioningConfiguration: { Status: 'Enabled' } }))),
    s3.send(new CreateBucketCommand({ Bucket: `${ns}-out` })),
    sqsQueueWithDlq(sqs, ns),
  ]);
  const outputBucket = `${ns}-out`;
  // The access recorder maps these fresh names back to the stack's parts (docs/iam.md).
  registerResources({
    [`${ns}-src`]: 'sourceBucket',
    [outputBucket]: 'outputBucket',
    [table]: 'claimsTable',
    [ns]: 'tileQueue',
    [`${ns}-dlq`]: 'deadLetterQueue',
  });
  const keys = await createRoleUsers(e, { sources: `${ns}-src`, outputs: outputBucket }, PARITY_SOURCE_PREFIX, ns);
  const roleS3 = roleSignedS3(e, keys);
  // The soak's output faults: the output store's own S3 client through a proxy (503 SlowDown, lost answers);
  // the proxy forwards the Host header as sent, so the roles' signatures hold.
  const outputsProxy = options.outputFaults ? await FaultProxy.start({ target: e.motoIam }) : undefined;
  const roleS3Out = outputsProxy ? roleSignedS3(e, keys, outputsProxy.url) : roleS3;
  return {
    claims: new DynamoDbClaimStore(claimsDdb, table),
    claimFaults: proxiedClaimFaults(claimsProxy, DYNAMODB_CLAIM_WIRE),
    deleteClaim: async (jobId) => {
      await ddb.send(new DeleteItemCommand({ TableName: table, Key: { [CLAIMS_PARTITION_KEY]: { S: jobId } } }));
    },
    sources: new S3ObjectStore(roleS3, `${ns}-src`),
    outputs: new S3ObjectStore(roleS3Out, outputBucket),
    outputFaults: outputsProxy
      ? // moto stores a body whatever its x-amz-checksum-sha256 says: the proxy answers S3's BadDigest instead.
        proxiedObjectFaults(
          outputsProxy,
          { method: 'PUT', path: `/${outputBucket}/` },
          () => storeFaults.s3SlowDown(),
          () => storeFaults.s3BadDigest(),
        )
      : undefined,
    proxies: outputsProxy ? [claimsProxy, outputsProxy] : [claimsProxy],
    queue: queues.queue,
    pullQueue: queues.queue,
    deleteOutput: async (key) => {
      await s3.send(new DeleteObjectCommand({ Bucket: outputBucket, Key: key }));
    },
    updateSourceMetadata: async (key) => {
      await s3.send(
        new CopyObjectCommand({
          Bucket: `${ns}-src`,
          Key: key,
          CopySource: `${ns}-src/${encodeURIComponent(key)}`,
          MetadataDirective: 'REPLACE',
          Metadata: { reviewed: 'yes' },
        }),
      );
    },
    expireSourceVersions: async (key) => {
      const listed = await s3.send(new ListObjectVersionsCommand({ Bucket: `${ns}-src`, Prefix: key }));
      for (const v of listed.Versions ?? []) {
        if (v.Key === key && !v.IsLatest && v.VersionId && v.VersionId !== 'null') {
          await s3.send(new DeleteObjectCommand({ Bucket: `${ns}-src`, Key: key, VersionId: v.VersionId }));
        }
      }
    },
    accessDenials: () => [...roleS3.denials, ...(roleS3Out === roleS3 ? [] : roleS3Out.denials)].map(describeDenial),
    close: async () => {
      ddb.destroy();
      claimsDdb.destroy();
      await claimsProxy.stop();
      if (roleS3Out !== roleS3) roleS3Out.destroy();
      await outputsProxy?.stop();
      roleS3.destroy();
      s3.destroy();
      sqs.destroy();
    },
  };
}

async function sqsQueueWithDlq(sqs: SQSClient, ns: string): Promise<{ queue: SqsJobQueue }> {
  const dlq = await sqs.send(new CreateQueueCommand({ QueueName: `${ns}-dlq` }));
  const dlqUrl = dlq.QueueUrl as string;
  const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }))).Attributes?.QueueArn;
  const q = await sqs.send(
    new CreateQueueCommand({
      QueueName: ns,
      Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn, maxReceiveCount: PARITY_MAX_RECEIVE_COUNT }) },
    }),
  );
  return { queue: new SqsJobQueue(sqs, q.QueueUrl as string, { deadLetterQueueUrl: dlqUrl }) };
}

/** Firestore emulator claims, fake-gcs-server buckets, Pub/Sub emulator topic + subscription with a dead-letter policy. */
async function gcpParts(endpoints: EmulatorEndpoints, ns: string, options: ParityBackendOptions): Promise<Parts> {
  const e = endpoints.gcp;
  if (!e) throw new EmulatorUnavailableError('the GCP emulators (fake-gcs-server, Firestore) are not running');
  if (!e.pubsub) {
    throw new EmulatorUnavailableError(
      "Google's Pub/Sub emulator is not installed on this machine (google-cloud-cli-pubsub-emulator): GCP has no queue to drive",
    );
  }
  const firestore = firestoreClient(e);
  // The claim store's client goes through an HTTP/2 fault proxy (lost answers, ABORTED).
  const claimsProxy = await FaultProxy.start({ target: `http://${e.firestore}`, protocol: 'http2' });
  const claimsFirestore = firestoreClient({ ...e, firestore: claimsProxy.host });
  const storage = storageClient(e);
  const pubsub = pubsubClient(e);
  const [sources, outputs] = await Promise.all([freshGcsBucket(e, `${ns}-src`), freshGcsBucket(e, `${ns}-out`)]);
  const [deadTopic] = await pubsub.createTopic(`${ns}-dead`);
  const [deadSub] = await deadTopic.createSubscription(`${ns}-dead-sub`);
  const [tileTopic] = await pubsub.createTopic(ns);
  const [tileSub] = await tileTopic.createSubscription(`${ns}-sub`, {
    ackDeadlineSeconds: 10,
    deadLetterPolicy: { deadLetterTopic: deadTopic.name, maxDeliveryAttempts: PARITY_MAX_RECEIVE_COUNT },
  });
  const { servicePath, port, sslCreds } = pubsub.options;
  const subscriber = new v1.SubscriberClient({
    ...(servicePath ? { servicePath } : {}),
    ...(port ? { port: Number(port) } : {}),
    ...(sslCreds ? { sslCreds } : {}),
  });
  const fanOut = new PubSubJobQueue(pubsub.topic(tileTopic.name, { batching: TILE_TOPIC_BATCHING }));
  // The access recorder maps these fresh names back to the stack's parts (docs/iam.md); a subscription is its topic's queue.
  registerResources({
    [sources.name]: 'sourceBucket',
    [outputs.name]: 'outputBucket',
    [`${ns}-claims`]: 'claimsTable',
    [ns]: 'tileQueue',
    [`${ns}-sub`]: 'tileQueue',
    [`${ns}-dead`]: 'deadLetterQueue',
    [`${ns}-dead-sub`]: 'deadLetterQueue',
  });
  // The soak's output faults: the output store's own Storage client through a proxy (429/503, lost answers).
  const outputsProxy = options.outputFaults ? await FaultProxy.start({ target: e.gcs }) : undefined;
  const storageOut = outputsProxy ? storageClient({ ...e, gcs: outputsProxy.url }) : storage;
  return {
    claims: new FirestoreClaimStore(claimsFirestore.collection(`${ns}-claims`)),
    claimFaults: proxiedClaimFaults(claimsProxy, FIRESTORE_CLAIM_WIRE),
    deleteClaim: async (jobId) => {
      await firestore.collection(`${ns}-claims`).doc(jobId).delete();
    },
    sources: new GcsObjectStore(storage.bucket(sources.name)),
    outputs: new GcsObjectStore(storageOut.bucket(outputs.name)),
    outputFaults: outputsProxy
      ? proxiedObjectFaults(outputsProxy, { method: 'POST', path: `/b/${outputs.name}/o` }, () => storeFaults.gcs(429))
      : undefined,
    proxies: outputsProxy ? [claimsProxy, outputsProxy] : [claimsProxy],
    queue: fanOut,
    pullQueue: new PubSubPullQueue(fanOut, subscriber, tileSub.name, deadSub.name, new PubSubDeadLetterTopic(pubsub.topic(deadTopic.name))),
    deleteOutput: async (key) => {
      await storage.bucket(outputs.name).file(key).delete();
    },
    updateSourceMetadata: async (key) => {
      await storage
        .bucket(sources.name)
        .file(key)
        .setMetadata({ metadata: { reviewed: 'yes' } });
    },
    expireSourceVersions: async (key) => {
      const bucket = storage.bucket(sources.name);
      const [live] = await bucket.file(key).getMetadata();
      const [files] = await bucket.getFiles({ prefix: key, versions: true });
      for (const f of files) {
        if (f.name === key && String(f.metadata.generation) !== String(live.generation)) {
          await bucket.file(key, { generation: String(f.metadata.generation) }).delete();
        }
      }
    },
    close: async () => {
      await Promise.all([subscriber.close(), pubsub.close(), firestore.terminate(), claimsFirestore.terminate()]);
      await claimsProxy.stop();
      await outputsProxy?.stop();
    },
  };
}

/** Azurite: Table claims, Blob containers, a Storage Queue and its `-poison` queue with the host's dequeue rules. */
async function azureParts(endpoints: EmulatorEndpoints, ns: string, options: ParityBackendOptions): Promise<Parts> {
  const e = endpoints.azure;
  if (!e) throw new EmulatorUnavailableError('Azurite is not running');
  const clients = azureClients(e.connectionString);
  const table = clients.table(`${ns}claims`);
  // The claim store's TableClient goes through a fault proxy (lost answers, 503 ServerBusy).
  const claimsProxy = await FaultProxy.start({ target: e.table });
  const claimsTable = azureClients(azuriteConnectionString(e.blob, e.queue, claimsProxy.url)).table(`${ns}claims`);
  const src = clients.blob.getContainerClient(`${ns}-src`);
  const out = clients.blob.getContainerClient(`${ns}-out`);
  await Promise.all([
    table.createTable(),
    src.create(),
    out.create(),
    clients.queue.getQueueClient(ns).create(),
    clients.queue.getQueueClient(poisonQueueName(ns)).create(),
  ]);
  const queue = AzureQueueJobQueue.onAccount(clients.queue, ns, PARITY_MAX_RECEIVE_COUNT);
  // The access recorder maps these fresh names back to the stack's parts (docs/iam.md).
  registerResources({
    [`${ns}-src`]: 'sourceBucket',
    [`${ns}-out`]: 'outputBucket',
    [`${ns}claims`]: 'claimsTable',
    [ns]: 'tileQueue',
    [poisonQueueName(ns)]: 'deadLetterQueue',
  });
  // The soak's output faults: the output container's own client through a proxy (503 ServerBusy, lost answers).
  const outputsProxy = options.outputFaults ? await FaultProxy.start({ target: e.blob }) : undefined;
  const outProxied = outputsProxy
    ? azureClients(azuriteConnectionString(outputsProxy.url, e.queue, e.table)).blob.getContainerClient(`${ns}-out`)
    : out;
  return {
    claims: new AzureTableClaimStore(claimsTable),
    claimFaults: proxiedClaimFaults(claimsProxy, AZURE_TABLE_CLAIM_WIRE),
    deleteClaim: async (jobId) => {
      await table.deleteEntity(jobId.slice(0, PARTITION_PREFIX_LENGTH), jobId);
    },
    sources: new AzureBlobObjectStore(src),
    outputs: new AzureBlobObjectStore(outProxied),
    outputFaults: outputsProxy
      ? // Azurite refuses a damaged body, but as 400 InvalidOperation: the proxy answers the service's Md5Mismatch instead.
        proxiedObjectFaults(
          outputsProxy,
          { method: 'PUT', path: `/${ns}-out/` },
          () => storeFaults.azureServerBusy('blob'),
          () => storeFaults.azureMd5Mismatch(),
        )
      : undefined,
    proxies: outputsProxy ? [claimsProxy, outputsProxy] : [claimsProxy],
    queue,
    pullQueue: queue,
    deleteOutput: async (key) => {
      await out.getBlobClient(key).delete();
    },
    updateSourceMetadata: async (key) => {
      await src.getBlobClient(key).setMetadata({ reviewed: 'yes' });
    },
    expireSourceVersions: async (key) => {
      for await (const b of src.listBlobsFlat({ prefix: key, includeSnapshots: true })) {
        if (b.name === key && b.snapshot) await src.getBlobClient(key).withSnapshot(b.snapshot).delete();
      }
    },
    close: async () => {
      await claimsProxy.stop();
      await outputsProxy?.stop();
    },
  };
}
