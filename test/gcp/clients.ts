import { Firestore } from '@google-cloud/firestore';
import { PubSub, v1 } from '@google-cloud/pubsub';
import { type Bucket, Storage } from '@google-cloud/storage';
import type { GcpEndpoints } from '../support/emulators/types.js';
import { freshPrefix } from '../support/ids.js';

// No GCE metadata server here: tell google-auth-library not to probe for one
// (each probe fails after a timeout and prints a MetadataLookupWarning).
process.env.METADATA_SERVER_DETECTION ??= 'none';

/** An SDK Storage client for fake-gcs-server (no credentials: a custom endpoint skips auth). */
export function storageClient(e: GcpEndpoints): Storage {
  return new Storage({ apiEndpoint: e.gcs, projectId: e.projectId });
}

/** A new, empty bucket on fake-gcs-server (names: 3-63 lowercase characters). */
export async function freshBucket(e: GcpEndpoints, label = 'b'): Promise<Bucket> {
  const name = `${label}-${freshPrefix('t').slice(2, -1)}`;
  const [bucket] = await storageClient(e).createBucket(name);
  return bucket;
}

/** A gRPC (never REST: see docs/gcp.md) Firestore client for the emulator. */
export function firestoreClient(e: GcpEndpoints): Firestore {
  return new Firestore({ projectId: e.projectId, host: e.firestore, ssl: false, preferRest: false });
}

/** A Pub/Sub client for Google's emulator; fails with a clear message where the machine has none. */
export function pubsubClient(e: GcpEndpoints): PubSub {
  if (!e.pubsub) {
    throw new Error(
      "Google's Pub/Sub emulator is not running: install the google-cloud-cli-pubsub-emulator package or point " +
        'TESSERA_PUBSUB_EMULATOR at its launcher (docs/emulator-fidelity.md, GCP / Firestore)',
    );
  }
  return new PubSub({ projectId: e.projectId, apiEndpoint: e.pubsub, emulatorMode: true });
}

/** A message pulled from a subscription: its text, attributes and id. */
export interface PulledMessage {
  /** The message bytes, and the same decoded as UTF-8. */
  readonly data: Buffer;
  readonly text: string;
  readonly attributes: Record<string, string>;
  readonly messageId: string;
}

/**
 * Pull (and acknowledge) what a subscription holds, with one synchronous Pull
 * RPC per round, until a round returns nothing or `max` messages came back.
 */
export async function pullAll(pubsub: PubSub, subscription: string, max = 1000): Promise<PulledMessage[]> {
  // The PubSub client's options hold the emulator's address and insecure credentials.
  const { servicePath, port, sslCreds } = pubsub.options;
  const client = new v1.SubscriberClient({
    ...(servicePath ? { servicePath } : {}),
    ...(port ? { port: Number(port) } : {}),
    ...(sslCreds ? { sslCreds } : {}),
  });
  const path = subscription.includes('/') ? subscription : `projects/${pubsub.projectId}/subscriptions/${subscription}`;
  const out: PulledMessage[] = [];
  try {
    while (out.length < max) {
      // returnImmediately: an empty subscription answers at once instead of holding the pull open.
      const [response] = await client.pull({ subscription: path, maxMessages: Math.min(1000, max - out.length), returnImmediately: true });
      const received = response.receivedMessages ?? [];
      if (received.length === 0) break;
      for (const m of received) {
        const data = Buffer.from(m.message?.data ?? new Uint8Array());
        out.push({
          data,
          text: data.toString('utf8'),
          attributes: { ...(m.message?.attributes ?? {}) },
          messageId: m.message?.messageId ?? '',
        });
      }
      await client.acknowledge({ subscription: path, ackIds: received.map((m) => m.ackId ?? '') });
    }
  } finally {
    await client.close();
  }
  return out;
}
