import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { TableClient } from '@azure/data-tables';
import { BlobServiceClient } from '@azure/storage-blob';
import { Firestore } from '@google-cloud/firestore';
import { DynamoDbClaimStore } from '../../functions/aws/adapters/dynamodb-claim-store.js';
import { S3ObjectStore } from '../../functions/aws/adapters/s3-object-store.js';
import { AzureBlobObjectStore } from '../../functions/azure/adapters/azure-blob-object-store.js';
import { AzureTableClaimStore } from '../../functions/azure/adapters/azure-table-claim-store.js';
import { FirestoreClaimStore } from '../../functions/gcp/adapters/firestore-claim-store.js';
import { GcsObjectStore } from '../../functions/gcp/adapters/gcs-object-store.js';
import type { Backend } from '../../shared/app/backend.js';
import { JsonTelemetry, systemClock } from '../../shared/app/telemetry.js';
import type { SourceRef } from '../../shared/domain/job-key.js';
import { dynamoDbClient, freshClaimsTable, freshBucket as freshS3Bucket, s3Client } from '../../test/aws/clients.js';
import { freshBucket as freshGcsBucket } from '../../test/gcp/clients.js';
import type { Started } from '../../test/support/emulators/process.js';
import { CapturingQueue, sourceRef } from './jobs.js';
import { hostOf, type WireCounter } from './wire.js';

export const CLOUDS = ['aws', 'gcp', 'azure'] as const;
export type CloudName = (typeof CLOUDS)[number];

/** One cloud's adapters wired to its emulators, with fresh tables and buckets. */
export interface BenchCloud {
  readonly name: CloudName;
  /** What runs on it: `DynamoDB Local + moto`, etc. */
  readonly label: string;
  readonly backend: Backend;
  /** Destinations (`host:port`, or the gRPC counter name) of the claim store's requests. */
  readonly claimTargets: readonly string[];
  /** Counter labels of the requests to the sources bucket and to the outputs bucket (see WireCounter.route). */
  readonly sourceTargets: readonly string[];
  readonly outputTargets: readonly string[];
  /** Upload a scene into the sources store, as a producer would. */
  stage(scenePath: string, key: string): Promise<SourceRef>;
  stop(): Promise<void>;
}

const suffix = () => randomBytes(4).toString('hex');
const telemetry = () => new JsonTelemetry();

/**
 * Start a cloud's emulators with the project's own start functions
 * (test/support/emulators/<cloud>.ts, the ones the test suite uses) and wire
 * that cloud's adapters to them. The job queue is a capturing one: the
 * duplicate benchmark plays the trigger itself.
 */
export async function startCloud(name: CloudName, wire: WireCounter): Promise<BenchCloud> {
  switch (name) {
    case 'aws':
      return startAws(wire);
    case 'gcp':
      return startGcp(wire);
    case 'azure':
      return startAzure(wire);
    default: {
      const never: never = name;
      throw new Error(`unknown cloud ${String(never)}`);
    }
  }
}

async function stopAll(stops: readonly Started[]): Promise<void> {
  await Promise.all(stops.map((s) => s.stop()));
}

/** Count the requests to the two buckets of one endpoint apart, by the bucket name in their path. */
function bucketTargets(wire: WireCounter, cloud: CloudName, host: string, sourcePath: string, outputPath: string) {
  wire.route(host, sourcePath, `${cloud}:sources`);
  wire.route(host, outputPath, `${cloud}:outputs`);
  return { sourceTargets: [`${cloud}:sources`], outputTargets: [`${cloud}:outputs`] };
}

/** Stage by one create-only upload of the whole file (scenes here are a few MB). */
async function uploadScene(backend: Backend, bucket: string, scenePath: string, key: string): Promise<SourceRef> {
  await backend.sources.putIfAbsent(key, new Uint8Array(await readFile(scenePath)), { contentType: 'image/tiff' });
  return sourceRef(backend.sources, bucket, key);
}

async function startAws(wire: WireCounter): Promise<BenchCloud> {
  const { start } = await import('../../test/support/emulators/aws.js');
  const { endpoints, stops } = await start();
  if (!endpoints) throw new Error('[bench] the AWS emulators did not report endpoints');
  try {
    const ddb = dynamoDbClient(endpoints);
    const s3 = s3Client(endpoints);
    const [table, sourceBucket, outputBucket] = await Promise.all([
      freshClaimsTable(ddb, 'bench-claims'),
      freshS3Bucket(s3, 'bench-src'),
      freshS3Bucket(s3, 'bench-out'),
    ]);
    const backend: Backend = {
      claims: new DynamoDbClaimStore(ddb, table),
      sources: new S3ObjectStore(s3, sourceBucket),
      outputs: new S3ObjectStore(s3, outputBucket),
      queue: new CapturingQueue(),
      clock: systemClock,
      telemetry: telemetry(),
    };
    return {
      name: 'aws',
      label: 'DynamoDB Local + moto (S3)',
      backend,
      claimTargets: [hostOf(endpoints.dynamodb)],
      ...bucketTargets(wire, 'aws', hostOf(endpoints.moto), `/${sourceBucket}/`, `/${outputBucket}/`),
      stage: (scenePath, key) => uploadScene(backend, sourceBucket, scenePath, key),
      stop: () => stopAll(stops),
    };
  } catch (error) {
    await stopAll(stops);
    throw error;
  }
}

async function startGcp(wire: WireCounter): Promise<BenchCloud> {
  const { install } = await import('../../scripts/emulators/gcp.mjs');
  await install();
  const { start } = await import('../../test/support/emulators/gcp.js');
  const { endpoints, stops } = await start();
  if (!endpoints) throw new Error('[bench] the GCP emulators did not report endpoints');
  try {
    const [sourceBucket, outputBucket] = await Promise.all([
      freshGcsBucket(endpoints, 'bench-src'),
      freshGcsBucket(endpoints, 'bench-out'),
    ]);
    // Over gRPC as in production (see functions/gcp/compose.ts); the hook counts every call, retries included.
    const firestore = new Firestore({
      projectId: endpoints.projectId,
      host: endpoints.firestore,
      ssl: false,
      preferRest: false,
      'grpc.callInvocationTransformer': wire.grpcHook('firestore'),
    });
    const backend: Backend = {
      claims: new FirestoreClaimStore(firestore.collection(`bench-claims-${suffix()}`)),
      sources: new GcsObjectStore(sourceBucket),
      outputs: new GcsObjectStore(outputBucket),
      queue: new CapturingQueue(),
      clock: systemClock,
      telemetry: telemetry(),
    };
    return {
      name: 'gcp',
      label: 'Firestore emulator (patched, in-process) + fake-gcs-server',
      backend,
      claimTargets: ['firestore'],
      ...bucketTargets(wire, 'gcp', hostOf(endpoints.gcs), `/b/${sourceBucket.name}/`, `/b/${outputBucket.name}/`),
      stage: (scenePath, key) => uploadScene(backend, sourceBucket.name, scenePath, key),
      stop: async () => {
        await firestore.terminate();
        await stopAll(stops);
      },
    };
  } catch (error) {
    await stopAll(stops);
    throw error;
  }
}

async function startAzure(wire: WireCounter): Promise<BenchCloud> {
  // Azurite is an npm devDependency: start() fails with what to do when it is missing.
  const { start } = await import('../../test/support/emulators/azure.js');
  const { endpoints, stops } = await start();
  if (!endpoints) throw new Error('[bench] Azurite did not report endpoints');
  try {
    const cs = endpoints.connectionString;
    const table = TableClient.fromConnectionString(cs, `benchclaims${suffix()}`, { allowInsecureConnection: true });
    const blobs = BlobServiceClient.fromConnectionString(cs);
    const sourceContainer = blobs.getContainerClient(`bench-src-${suffix()}`);
    const outputContainer = blobs.getContainerClient(`bench-out-${suffix()}`);
    await Promise.all([table.createTable(), sourceContainer.create(), outputContainer.create()]);
    const backend: Backend = {
      claims: new AzureTableClaimStore(table),
      sources: new AzureBlobObjectStore(sourceContainer),
      outputs: new AzureBlobObjectStore(outputContainer),
      queue: new CapturingQueue(),
      clock: systemClock,
      telemetry: telemetry(),
    };
    return {
      name: 'azure',
      label: 'Azurite (Table + Blob)',
      backend,
      claimTargets: [hostOf(endpoints.table)],
      ...bucketTargets(wire, 'azure', hostOf(endpoints.blob), `/${sourceContainer.containerName}/`, `/${outputContainer.containerName}/`),
      stage: (scenePath, key) => uploadScene(backend, sourceContainer.containerName, scenePath, key),
      stop: () => stopAll(stops),
    };
  } catch (error) {
    await stopAll(stops);
    throw error;
  }
}
