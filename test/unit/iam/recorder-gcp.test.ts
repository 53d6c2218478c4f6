import { connect, createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FirestoreClaimStore } from '../../../functions/gcp/adapters/firestore-claim-store.js';
import { FirestoreManifestStore } from '../../../functions/gcp/adapters/firestore-manifest-store.js';
import { GcsObjectStore } from '../../../functions/gcp/adapters/gcs-object-store.js';
import { PubSubJobQueue } from '../../../functions/gcp/adapters/pubsub-job-queue.js';
import { firestoreClient, freshBucket, pubsubClient, storageClient } from '../../gcp/clients.js';
import { asRole } from '../../support/function-role.js';
import { requireEndpoints } from '../../support/global-setup.js';
import { recorderStats, registerResources } from '../../support/iam/recorder.js';
import { freshJobId } from '../../support/ids.js';
import { collect, lines } from './recorder-support.js';

/**
 * The recorder on GCP: the real adapters, run as a role against fake-gcs-server, Google's Firestore
 * emulator and its Pub/Sub emulator; what the recorder makes of each request is compared whole.
 */
const e = () => requireEndpoints(inject('emulators'), 'gcp');
const ns = `iamgcp${freshJobId().slice(0, 8)}`;
let outputs: GcsObjectStore;
let outputBucket: string;
const closers: (() => Promise<unknown>)[] = [];
/** How long the relay of the queued-calls test holds a new connection's handshake. */
const HOLD_MS = 1_500;

beforeAll(async () => {
  const bucket = await freshBucket(e(), 'iam-out');
  outputBucket = bucket.name;
  outputs = new GcsObjectStore(storageClient(e()).bucket(bucket.name));
  registerResources({
    [bucket.name]: 'outputBucket',
    [`${ns}-claims`]: 'claimsTable',
    [`${ns}-manifest`]: 'manifestTable',
    [ns]: 'tileQueue',
  });
});
afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
});

/**
 * A TCP relay to `target` (host:port) that holds each connection's bytes for `holdMs` before it opens its own to the
 * target. grpc-js marks a channel ready only once the server's HTTP/2 SETTINGS arrive, so every call made in that
 * time is queued on the connecting channel, however busy the machine (without it, a call could find the channel
 * ready and the queued path went untested: seen once in a CI run on a loaded machine).
 */
async function slowHandshakeRelay(target: string, holdMs: number): Promise<{ readonly host: string; stop(): Promise<void> }> {
  const at = target.lastIndexOf(':');
  const [host, port] = [target.slice(0, at), Number(target.slice(at + 1))];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    const held: Buffer[] = [];
    let upstream: Socket | undefined;
    client.on('data', (chunk: Buffer) => (upstream ? upstream.write(chunk) : held.push(chunk)));
    const timer = setTimeout(() => {
      const up = connect(port, host);
      upstream = up;
      sockets.add(up);
      for (const chunk of held) up.write(chunk);
      up.pipe(client);
      up.on('error', () => client.destroy());
      up.on('close', () => client.destroy());
    }, holdMs);
    const close = () => {
      clearTimeout(timer);
      upstream?.destroy();
    };
    client.on('error', close);
    client.on('close', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the relay has no TCP address');
  return {
    host: `127.0.0.1:${address.port}`,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('the access recorder on GCP (real adapters as a role, against the emulators)', () => {
  it('GCS: a create-only write is storage.objects.create; a replace is create + delete; reads, listings and deletes their own permission', async () => {
    const rec = collect();
    try {
      const first = await asRole('tile', () => outputs.putIfAbsent('tiles/s/0_0.tif', new Uint8Array([1, 2, 3])));
      if (first.kind !== 'written') throw new Error(`expected written, got ${first.kind}`);
      const replaced = await asRole('tile', () => outputs.putIfMatch('tiles/s/0_0.tif', new Uint8Array([4, 5]), first.version));
      if (replaced.kind !== 'written') throw new Error(`expected written, got ${replaced.kind}`);
      await asRole('mosaic', async () => {
        await outputs.get('tiles/s/0_0.tif');
        await outputs.head('tiles/s/0_0.tif');
        for await (const _ of outputs.list('tiles/s/')) void _;
      });
      await asRole('verify', () => outputs.deleteIfVersion('tiles/s/0_0.tif', replaced.version));
    } finally {
      rec.stop();
    }
    const mine = lines(rec.seen.filter((r) => r.wire.path.includes(outputBucket)));
    expect(mine).toEqual([
      'tile storage.objects.create outputBucket tiles/s/0_0.tif',
      'tile storage.objects.create outputBucket tiles/s/0_0.tif',
      'tile storage.objects.delete outputBucket tiles/s/0_0.tif',
      'mosaic storage.objects.get outputBucket tiles/s/0_0.tif',
      'mosaic storage.objects.get outputBucket tiles/s/0_0.tif',
      'mosaic storage.objects.list outputBucket list:tiles/s/',
      'verify storage.objects.delete outputBucket tiles/s/0_0.tif',
    ]);
    // Only what the adapters asked for: every request on the bucket was a role's, over node:http.
    expect(rec.seen.every((r) => r.wire.transport === 'http1' && r.wire.roleFrom === 'context')).toBe(true);
  });

  it('Firestore: a claim is an entity create, a commit an update (lastUpdateTime precondition), a read a get; the manifest is its own collection', async () => {
    const firestore = firestoreClient(e());
    closers.push(() => firestore.terminate());
    const claims = new FirestoreClaimStore(firestore.collection(`${ns}-claims`));
    const manifest = new FirestoreManifestStore(firestore.collection(`${ns}-manifest`));
    const jobId = freshJobId('claim');
    const rec = collect();
    try {
      await asRole('tile', async () => {
        await claims.claim({ jobId, owner: 'w1', now: 1_000, leaseUntil: 61_000, expiresAt: 999_999 });
        await claims.commit({ jobId, owner: 'w1', outputUri: 'gs://x/y', now: 2_000 });
      });
      await asRole('reconcile', () => manifest.find('src', 'item-1'));
    } finally {
      rec.stop();
    }
    expect(lines(rec.seen)).toEqual([
      'tile datastore.entities.create claimsTable',
      'tile datastore.entities.get claimsTable',
      'tile datastore.entities.update claimsTable',
      'reconcile datastore.entities.get manifestTable',
      'reconcile datastore.entities.list manifestTable',
    ]);
    expect(rec.seen.every((r) => r.wire.transport === 'http2' && r.wire.roleFrom === 'grpc-tag')).toBe(true);
  });

  it('gRPC calls of two roles queued while the channel connects each keep their own role', async () => {
    // A fresh client: its channel connects on the first call, and grpc-js opens the streams of the
    // calls queued meanwhile from the connection's callback, in the first call's async context. The relay holds
    // the connection's handshake for a while, so the calls that follow the first are queued.
    const relay = await slowHandshakeRelay(e().firestore, HOLD_MS);
    closers.push(() => relay.stop());
    const firestore = firestoreClient({ ...e(), firestore: relay.host });
    closers.push(() => firestore.terminate());
    const claims = new FirestoreClaimStore(firestore.collection(`${ns}-claims`));
    const manifest = new FirestoreManifestStore(firestore.collection(`${ns}-manifest`));
    const before = recorderStats.grpcContextDisagreements;
    const rec = collect();
    const started = performance.now();
    try {
      await Promise.all([
        asRole('tile', () => claims.get(freshJobId('a'))),
        asRole('reconcile', () => manifest.find('src', 'item-2')),
        asRole('tile', () => claims.get(freshJobId('b'))),
        asRole('reconcile', () => manifest.find('src', 'item-3')),
      ]);
    } finally {
      rec.stop();
    }
    const got = lines(rec.seen).sort();
    expect(got).toEqual(
      [
        'tile datastore.entities.get claimsTable',
        'tile datastore.entities.get claimsTable',
        'reconcile datastore.entities.get manifestTable',
        'reconcile datastore.entities.list manifestTable',
        'reconcile datastore.entities.get manifestTable',
        'reconcile datastore.entities.list manifestTable',
      ].sort(),
    );
    // The calls waited for the held connection (they were queued on it).
    expect(performance.now() - started).toBeGreaterThanOrEqual(HOLD_MS - 50);
    // What the tag is for: the async context at the streams' creation named the wrong role for some (grpc-js
    // opened the queued calls' streams from the connection's callback). Were it ever 0 with the calls queued,
    // grpc-js would have changed how it opens them, and the reason for the tag would need looking at again.
    expect(recorderStats.grpcContextDisagreements - before).toBeGreaterThan(0);
  });

  it('Pub/Sub: fan-out publishes to the tile topic (pubsub.topics.publish)', async () => {
    const pubsub = pubsubClient(e());
    closers.push(() => pubsub.close());
    const [topic] = await pubsub.createTopic(ns);
    const queue = new PubSubJobQueue(topic);
    const rec = collect();
    try {
      await asRole('scene', () => queue.sendBatch([{ jobKey: freshJobId(), body: '{}' }]));
    } finally {
      rec.stop();
    }
    expect(lines(rec.seen)).toEqual(['scene pubsub.topics.publish tileQueue']);
  });

  it('records nothing outside a role (a test staging its inputs is the operator)', async () => {
    const rec = collect();
    try {
      await outputs.putIfAbsent(`tiles/op/${freshJobId()}.tif`, new Uint8Array([9]));
    } finally {
      rec.stop();
    }
    expect(rec.seen).toEqual([]);
  });
});
