import { randomBytes } from 'node:crypto';
import { Firestore } from '@google-cloud/firestore';
import { type Message, PubSub, type Subscription } from '@google-cloud/pubsub';
import { Storage } from '@google-cloud/storage';
import type { SceneManifest } from '../../shared/app/scene-manifest.js';
import { toJobMessage } from '../../shared/app/tile-job.js';
import { fanOutJobs } from '../../shared/app/verify/scene-tiles.js';
import type { GcpStackOutputs } from '../../shared/app/verify/stack-outputs.js';
import type { VerifyTarget } from '../../shared/app/verify/verify-stack.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { JobMessage } from '../../shared/ports/job-queue.port.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { JOB_KEY_ATTRIBUTE } from './adapters/pubsub-job-queue.js';
import { composeGcp, FIRESTORE_SETTINGS } from './compose.js';

export interface GcpVerifyOptions {
  /**
   * How long verify watches the tiles and claim rows after its tap saw a
   * message go through the tile topic (Pub/Sub has no backlog count outside
   * Cloud Monitoring). Default 15 s: a push delivery and a duplicate's claim
   * check take well under that on a warm function.
   */
  readonly quietMs?: number | undefined;
}

/** The default quiet period (see {@link GcpVerifyOptions.quietMs}). */
export const GCP_VERIFY_QUIET_MS = 15_000;

/**
 * A deployed GCP stack, from its outputs, for `tessera verify`: the backend is
 * composed by composeGcp (the wiring the tile function uses) with clients on
 * Application Default Credentials (google-github-actions/auth in CI, gcloud
 * auth application-default login, a service account). Only the outputs'
 * `emulator` endpoints (testing only) point the clients elsewhere.
 *
 * Two things differ from AWS and Azure, both for want of an API:
 * - Settling: Pub/Sub reports no backlog but through Cloud Monitoring, so
 *   verify opens a tap, a subscription of its own on the tile topic, which
 *   proves each message it sends went through the topic the stack's trigger
 *   subscribes to, then watches for a quiet period (see Settling in
 *   shared/app/verify/verify-stack.ts). A second tap on the dead-letter topic
 *   is how verify reads dead letters without taking them from the operator's
 *   subscription. Both are deleted at the end; they need roles/pubsub.editor
 *   on the two topics (docs/deploy.md).
 * - The scene replay: Eventarc delivers GCS object events and takes none from
 *   outside, so a duplicate finalized event cannot be sent through the stack's
 *   trigger. verify re-publishes the scene's whole fan-out (every tile job a
 *   duplicate event would publish, pinned as the manifest records) to the
 *   tile topic instead; the scene handler's own duplicate path is covered by
 *   test/gcp/handlers.test.ts.
 */
export function gcpVerifyTarget(
  stack: string,
  outputs: GcpStackOutputs,
  telemetry: Telemetry,
  options: GcpVerifyOptions = {},
): VerifyTarget {
  const e = outputs.emulator;
  const projectId = outputs.project;
  const database = outputs.firestoreDatabase ? { databaseId: outputs.firestoreDatabase } : {};
  const clients = {
    storage: new Storage(e ? { apiEndpoint: e.gcs, projectId } : { projectId }),
    firestore: new Firestore(
      e ? { projectId, host: e.firestore, ssl: false, preferRest: false, ...database } : { ...FIRESTORE_SETTINGS, projectId, ...database },
    ),
    pubsub: new PubSub(e ? { projectId, apiEndpoint: e.pubsub, emulatorMode: true } : { projectId }),
  };
  const env: Record<string, string> = {
    [ENV.platform]: outputs.platform,
    [ENV.claimsTable]: outputs.claimsCollection,
    [ENV.sourceBucket]: outputs.sourceBucket,
    [ENV.outputBucket]: outputs.outputBucket,
    [ENV.tileQueue]: outputs.tileTopic,
    [ENV.deadLetterQueue]: outputs.deadLetterTopic,
    [ENV.functionTimeoutSeconds]: String(outputs.functionTimeoutSeconds),
    [ENV.leaseSeconds]: String(outputs.leaseSeconds),
    [ENV.gcpProject]: projectId,
    ...(outputs.firestoreDatabase ? { [ENV.firestoreDatabase]: outputs.firestoreDatabase } : {}),
  };
  // The tile function's wiring: its claims, buckets and tile topic are what verify reads and sends to.
  const rt = composeGcp(env, { role: 'tile', clients, telemetry, owner: `tessera-verify:${stack}` });
  const run = randomBytes(4).toString('hex');
  const tileTap = new Tap(clients.pubsub, outputs.tileTopic, `tessera-verify-${run}-tiles`);
  const deadTap = new Tap(clients.pubsub, outputs.deadLetterTopic, `tessera-verify-${run}-dead-letters`);
  return {
    stack,
    cloud: 'gcp',
    backend: rt.backend,
    sourcePrefix: outputs.sourcePrefix,
    leaseSeconds: outputs.leaseSeconds,
    settling: {
      kind: 'tap',
      mark: async () => tileTap.seen.length,
      seenSince: async (mark) => tileTap.seen.slice(mark).map((m) => m.jobKey),
      quietMs: options.quietMs ?? GCP_VERIFY_QUIET_MS,
    },
    deadLetters: async () => [...deadTap.seen],
    async removeDeadLetters(match: (m: JobMessage) => boolean) {
      const mine = deadTap.seen.filter(match).length;
      return {
        removed: 0,
        left:
          mine === 0
            ? undefined
            : `dead letters: ${mine} on the dead-letter topic's own subscription (Pub/Sub removes a message only for the ` +
              'subscription that acknowledges it, and verify does not take messages from the operator): they expire with its retention',
      };
    },
    async redeliverSceneEvent(manifest: SceneManifest) {
      // What fan-out publishes: every window of the scene grid (a pyramid's highest zoom; its children enqueue the rest).
      const jobs = fanOutJobs(manifest);
      await rt.backend.queue.sendBatch(jobs.map(toJobMessage));
      return jobs.map((j) => j.jobKey);
    },
    async open() {
      // Both settle before a failure is reported: a tap still opening when verify closes would stay open (its
      // subscription left in the project, its streams pulling) after verify said nothing was created.
      const opened = await Promise.allSettled([tileTap.open(), deadTap.open()]);
      const failed = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected');
      if (failed !== undefined) {
        await Promise.all([tileTap.close(), deadTap.close()]);
        throw failed.reason;
      }
    },
    async close() {
      await Promise.all([tileTap.close(), deadTap.close()]);
      await Promise.all([clients.firestore.terminate(), clients.pubsub.close()]);
    },
  };
}

/**
 * A subscription of verify's own on one of the stack's topics: it receives a
 * copy of every message published after it exists (the stack's own
 * subscriptions keep theirs), acknowledges each, and keeps what it saw.
 */
class Tap {
  readonly seen: JobMessage[] = [];
  #subscription: Subscription | undefined;

  constructor(
    private readonly pubsub: PubSub,
    private readonly topic: string,
    private readonly name: string,
  ) {}

  async open(): Promise<void> {
    const [subscription] = await this.pubsub.topic(this.topic).createSubscription(this.name, { ackDeadlineSeconds: 60 });
    subscription.on('message', (m: Message) => {
      this.seen.push({ jobKey: m.attributes?.[JOB_KEY_ATTRIBUTE] ?? '', body: m.data.toString('utf8') });
      m.ack();
    });
    subscription.on('error', () => {}); // a broken stream is reopened by the client; verify's checks time out if it is not
    this.#subscription = subscription;
  }

  async close(): Promise<void> {
    const s = this.#subscription;
    if (s === undefined) return;
    this.#subscription = undefined;
    s.removeAllListeners('message');
    await s.close().catch(() => undefined);
    // A subscription is control plane, not data: deleting it removes only verify's copies.
    await s.delete().catch(() => undefined);
  }
}
