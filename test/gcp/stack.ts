import type { Firestore } from '@google-cloud/firestore';
import type { CloudEvent } from '@google-cloud/functions-framework';
import type { PubSub } from '@google-cloud/pubsub';
import type { Storage } from '@google-cloud/storage';
import { inject } from 'vitest';
import { type ComposeGcpOptions, composeGcp, type GcpFunctionRole, type GcpRuntime } from '../../functions/gcp/compose.js';
import { STORAGE_OBJECT_FINALIZED, type StorageObjectData } from '../../functions/gcp/handlers/scene.handler.js';
import { type MessagePublishedData, PUBSUB_MESSAGE_PUBLISHED } from '../../functions/gcp/handlers/tile.handler.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import { DEFAULT_PARAMS, ENV } from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { GcpEndpoints } from '../support/emulators/types.js';
import { requireEndpoints } from '../support/global-setup.js';
import { freshJobId } from '../support/ids.js';
import { firestoreClient, freshBucket, type PulledMessage, pubsubClient, pullAll, storageClient } from './clients.js';

/** Small tiles so a 96 x 80 px scene makes a 2 x 2 grid: fast, and still every edge case of a grid. */
export const TEST_PARAMS: ProcessingParams = {
  ...DEFAULT_PARAMS,
  version: 'gcp-test',
  tile_px: 48,
  output: { ...(DEFAULT_PARAMS.output as object), blocksize: 16 },
};

export type TestRuntime = GcpRuntime & { readonly backend: { readonly telemetry: JsonTelemetry } };

export interface RuntimeOptions {
  /** Default `tile`, deployed event-driven (`gcf2-event`); `mosaic` is HTTP (`gcf2-http`). The scene handler runs on either event runtime. */
  readonly role?: GcpFunctionRole;
  readonly owner?: string;
  readonly clock?: Clock;
  readonly logs?: string[];
  /** Variables this runtime sees on top of the stack's (a STAC stack's TESSERA_STAC_ASSETS, say). */
  readonly env?: Readonly<Record<string, string>>;
}

export interface GcpTestStack {
  readonly endpoints: GcpEndpoints;
  readonly env: Record<string, string>;
  readonly sourceBucket: string;
  readonly outputBucket: string;
  readonly claimsCollection: string;
  /** The ingest manifest collection (TESSERA_MANIFEST_TABLE). */
  readonly manifestCollection: string;
  /** Pull subscriptions on the tile topic and the dead-letter topic (what the Eventarc push subscriptions would see). */
  readonly tileSubscription: string;
  readonly deadLetterSubscription: string;
  readonly clients: { readonly firestore: Firestore; readonly storage: Storage; readonly pubsub: PubSub };
  /** A runtime composed from `env` as the deployed function composes it, with clients pointed at the emulators. */
  runtime(options?: RuntimeOptions): TestRuntime;
  /** Upload bytes to the source bucket as a user would; returns the finalized event Eventarc would deliver. */
  upload(key: string, bytes: Uint8Array, bucket?: string): Promise<CloudEvent<StorageObjectData>>;
  /** Pull every message waiting on the tile subscription, as CloudEvents the tile function would get. */
  tileEvents(): Promise<CloudEvent<MessagePublishedData>[]>;
  deadLetters(): Promise<PulledMessage[]>;
  close(): Promise<void>;
}

const unique = (label: string) => `${label}-${freshJobId().slice(0, 10)}`;

/**
 * A fresh GCP stack in the emulators, shaped like infra/'s: source and output
 * buckets in fake-gcs-server, a claims collection in Google's Firestore
 * emulator, a tile topic and a dead-letter topic in Google's Pub/Sub emulator,
 * each with a subscription the test pulls from.
 */
export async function createGcpStack(options: { params?: ProcessingParams } = {}): Promise<GcpTestStack> {
  const endpoints = requireEndpoints(inject('emulators'), 'gcp');
  const storage = storageClient(endpoints);
  const firestore = firestoreClient(endpoints);
  const pubsub = pubsubClient(endpoints);
  const [source, output] = await Promise.all([freshBucket(endpoints, 'src'), freshBucket(endpoints, 'out')]);
  const [tileTopic] = await pubsub.createTopic(unique('tiles'));
  const [deadTopic] = await pubsub.createTopic(unique('tiles-dead'));
  const [tileSub] = await tileTopic.createSubscription(unique('tiles-sub'));
  const [deadSub] = await deadTopic.createSubscription(unique('tiles-dead-sub'));
  const claimsCollection = unique('claims');
  // The ingest manifest, as infra/ sets it on the ingest and reconcile functions (one env for every role here).
  const manifestCollection = unique('manifest');
  const env: Record<string, string> = {
    [ENV.platform]: 'gcf2-event',
    [ENV.claimsTable]: claimsCollection,
    [ENV.sourceBucket]: source.name,
    [ENV.outputBucket]: output.name,
    [ENV.tileQueue]: tileTopic.name,
    [ENV.deadLetterQueue]: deadTopic.name,
    [ENV.sourcePrefix]: 'incoming/',
    [ENV.sourceSuffix]: '.tif',
    [ENV.functionTimeoutSeconds]: '540',
    [ENV.params]: JSON.stringify(options.params ?? TEST_PARAMS),
    [ENV.gcpProject]: endpoints.projectId,
    [ENV.manifestTable]: manifestCollection,
  };
  const clients = { firestore, storage, pubsub };
  return {
    endpoints,
    env,
    sourceBucket: source.name,
    outputBucket: output.name,
    claimsCollection,
    manifestCollection,
    tileSubscription: tileSub.name,
    deadLetterSubscription: deadSub.name,
    clients,
    runtime: (o = {}) => {
      const role = o.role ?? 'tile';
      const composeOptions: ComposeGcpOptions = {
        role,
        clients,
        telemetry: new JsonTelemetry((line) => o.logs?.push(line)),
        owner: o.owner ?? 'worker-a',
        ...(o.clock ? { clock: o.clock } : {}),
      };
      // The Cloud Scheduler targets (mosaic sweep, manifest reconcile) are HTTP; the rest event-driven.
      const deployed =
        role === 'mosaic' || role === 'reconcile' ? { platform: 'gcf2-http', timeout: '3600' } : { platform: 'gcf2-event', timeout: '540' };
      return composeGcp(
        { ...env, [ENV.platform]: deployed.platform, [ENV.functionTimeoutSeconds]: deployed.timeout, ...o.env },
        composeOptions,
      ) as TestRuntime;
    },
    upload: async (key, bytes, bucket = source.name) => {
      const file = storage.bucket(bucket).file(key);
      await file.save(Buffer.from(bytes), { resumable: false, preconditionOpts: { ifGenerationMatch: 0 } });
      const [metadata] = await file.getMetadata();
      return storageEvent(metadata as StorageObjectData);
    },
    tileEvents: async () => (await pullAll(pubsub, tileSub.name)).map((m) => pubsubEvent(m, tileSub.name)),
    deadLetters: () => pullAll(pubsub, deadSub.name),
    close: async () => {
      await Promise.all([firestore.terminate(), pubsub.close()]);
    },
  };
}

/**
 * The CloudEvent Eventarc delivers for a new object: `data` is the object
 * resource exactly as the JSON API (here fake-gcs-server) reports it.
 */
export function storageEvent(object: StorageObjectData, type = STORAGE_OBJECT_FINALIZED): CloudEvent<StorageObjectData> {
  return {
    specversion: '1.0',
    id: `${object.bucket}/${object.name}/${object.generation}`,
    type,
    source: `//storage.googleapis.com/projects/_/buckets/${object.bucket}`,
    subject: `objects/${object.name}`,
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    data: object,
  };
}

/** The CloudEvent Eventarc delivers for a Pub/Sub message (its id is the message id, as Eventarc sets it). */
export function pubsubEvent(m: PulledMessage, subscription: string, deliveryAttempt?: number): CloudEvent<MessagePublishedData> {
  return {
    specversion: '1.0',
    id: m.messageId,
    type: PUBSUB_MESSAGE_PUBLISHED,
    source: '//pubsub.googleapis.com/projects/tessera-test/topics/tiles',
    time: new Date().toISOString(),
    datacontenttype: 'application/json',
    data: {
      message: { data: m.data.toString('base64'), attributes: m.attributes, messageId: m.messageId, publishTime: new Date().toISOString() },
      subscription,
      ...(deliveryAttempt === undefined ? {} : { deliveryAttempt }),
    },
  };
}
