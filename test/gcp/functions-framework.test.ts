import type { Server } from 'node:http';
import type { CloudEvent } from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerGcpFunctions } from '../../functions/gcp/handlers/index.js';
import { parseTileJob } from '../../shared/app/tile-job.js';
import { outputKeys } from '../../shared/domain/job-key.js';
import { freshJobId } from '../support/ids.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { createGcpStack, type GcpTestStack, type TestRuntime } from './stack.js';

/**
 * The handlers behind the Functions Framework's own HTTP server, reached over
 * a socket with CloudEvents as Eventarc sends them: binary content mode
 * (`ce-*` headers, the data as the body) and structured mode (the whole event
 * as `application/cloudevents+json`). What Pub/Sub and Eventarc read is the
 * HTTP status: 2xx acknowledges, anything else asks for a redelivery.
 */
const suffix = freshJobId().slice(0, 8);
const names = {
  scene: `scene-${suffix}`,
  tile: `tile-${suffix}`,
  mosaic: `mosaic-${suffix}`,
  ingest: `ingest-${suffix}`,
  reconcile: `reconcile-${suffix}`,
  stream: `stream-${suffix}`,
};
let s: GcpTestStack;
let events: TestRuntime;
let http: TestRuntime;
const servers: Server[] = [];

beforeAll(async () => {
  s = await createGcpStack();
  events = s.runtime({ role: 'tile' });
  http = s.runtime({ role: 'mosaic' });
  registerGcpFunctions(
    {
      scene: s.runtime({ role: 'scene' }),
      tile: events,
      mosaic: http,
      // Composed on first use only: this file drives the tile and mosaic entry points.
      ingest: () => s.runtime({ role: 'ingest' }),
      reconcile: () => s.runtime({ role: 'reconcile' }),
      stream: () => s.runtime({ role: 'stream' }),
    },
    names,
  );
});
afterAll(async () => {
  await Promise.all(servers.map((srv) => new Promise((resolve) => srv.close(resolve))));
  await s.close();
});

/** The registered function's real Functions Framework server, listening on 127.0.0.1. */
async function serve(name: string): Promise<string> {
  const server = getTestServer(name);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/`;
}

/** POST a CloudEvent in binary content mode. */
function postBinary(url: string, event: CloudEvent<unknown>): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'ce-specversion': event.specversion,
      'ce-id': event.id,
      'ce-type': event.type,
      'ce-source': event.source,
      ...(event.subject ? { 'ce-subject': event.subject } : {}),
      ...(event.time ? { 'ce-time': event.time } : {}),
    },
    body: JSON.stringify(event.data),
  });
}

/** POST a CloudEvent in structured content mode. */
function postStructured(url: string, event: CloudEvent<unknown>): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/cloudevents+json' }, body: JSON.stringify(event) });
}

describe('GCP functions through the Functions Framework HTTP server', () => {
  it('fans a scene out from a structured-mode storage event, runs every tile from binary-mode Pub/Sub events, and assembles the mosaic over HTTP', async () => {
    const finalized = await s.upload('incoming/served.tif', await syntheticSceneBytes({ width: 96, height: 80 }));
    const scene = await postStructured(await serve(names.scene), finalized);
    expect(scene.status).toBe(200);
    const fanned = (await scene.json()) as { kind: string; sceneKey: string; enqueued: number };
    expect(fanned).toMatchObject({ kind: 'fanned-out', enqueued: 4 });

    const tileUrl = await serve(names.tile);
    const tiles = await s.tileEvents();
    expect(tiles).toHaveLength(4);
    for (const tile of tiles) {
      const res = await postBinary(tileUrl, tile);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
    }
    // A duplicate delivery is acknowledged (2xx) and changes nothing.
    const again = await postBinary(tileUrl, tiles[0] as CloudEvent<unknown>);
    expect(await again.json()).toMatchObject({ kind: 'ack', outcome: { kind: 'claim-rejected', reason: 'done' } });

    const mosaicUrl = await serve(names.mosaic);
    const post = (body: unknown) =>
      fetch(mosaicUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    // What the Cloud Scheduler job sends: a sweep of every scene with a manifest and no mosaic.
    const swept = await post({});
    expect(swept.status).toBe(200);
    expect(await swept.json()).toMatchObject({
      assembled: [{ sceneKey: fanned.sceneKey, mosaicKey: outputKeys.mosaic(fanned.sceneKey), result: 'written' }],
      pending: [],
      failed: [],
      deferred: 0,
    });
    expect(await (await post({})).json()).toMatchObject({ assembled: [] }); // nothing left to do
    expect(await (await post({ sceneKey: fanned.sceneKey })).json()).toMatchObject({ gridCount: 4, result: 'already-present' });
    expect((await post({ sceneKey: 'not-a-key' })).status).toBe(400);
  });

  it('accepts a raw Pub/Sub push to /projects/<p>/topics/<t> (a push subscription to the function URL) as the same CloudEvent', async () => {
    const finalized = await s.upload('incoming/pushed.tif', await syntheticSceneBytes({ width: 96, height: 80 }));
    expect((await postStructured(await serve(names.scene), finalized)).status).toBe(200);
    const [tile] = await s.tileEvents();
    const message = tile?.data?.message;
    if (!message?.data || !message.messageId) throw new Error('setup failed');
    const url = `${await serve(names.tile)}projects/${s.endpoints.projectId}/topics/tiles`;
    // The body Pub/Sub push sends (no ce-* headers); the framework turns it into a messagePublished CloudEvent.
    const push = {
      message: { data: message.data, attributes: message.attributes, messageId: message.messageId, publishTime: message.publishTime },
      subscription: s.tileSubscription,
    };
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(push) });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
    const job = parseTileJob(Buffer.from(message.data, 'base64').toString('utf8'));
    expect((await events.backend.claims.get(job.jobKey))?.owner).toBe(`${message.messageId}@worker-a`);
  });

  it('answers 500 (a redelivery) while the backoff can outlast the lease of an earlier attempt, 200 once it cannot, and 200 for poison it dead-lettered', async () => {
    const finalized = await s.upload('incoming/held.tif', await syntheticSceneBytes({ width: 96, height: 80 }));
    expect((await postStructured(await serve(names.scene), finalized)).status).toBe(200);
    const [tile, other] = await s.tileEvents();
    if (!tile || !other) throw new Error('setup failed');
    // An earlier attempt of this very message (on another instance) claimed the job and is still running.
    const heldBy = async (event: typeof tile, leaseMs: number, deliveryAttempt: number) => {
      const job = parseTileJob(Buffer.from(event.data?.message?.data ?? '', 'base64').toString('utf8'));
      const now = events.backend.clock.now();
      await events.backend.claims.claim({
        jobId: job.jobKey,
        owner: `${event.id}@other-instance`,
        now,
        leaseUntil: now + leaseMs,
        expiresAt: now + 600_000,
      });
      // The delivery attempt, as the push subscription's dead-letter policy numbers it.
      return { ...event, data: { ...event.data, deliveryAttempt } };
    };
    const tileUrl = await serve(names.tile);
    // A lease just ended, still held for the 30 s clock-skew margin: the 4 attempts still allowed, at least 10 s
    // apart, reach past it, so the delivery waits (500) and a later one claims the lapsed lease normally.
    expect((await postBinary(tileUrl, await heldBy(tile, -1_000, 1))).status).toBe(500);
    // 800 s left: Pub/Sub would dead-letter the message first, so the delivery takes the lease over and writes (200).
    const takenOver = await postBinary(tileUrl, await heldBy(other, 800_000, 2));
    expect(takenOver.status).toBe(200);
    expect(await takenOver.json()).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });

    const poison = {
      ...tile,
      id: 'poison-1',
      data: { ...tile.data, message: { ...tile.data?.message, messageId: 'poison-1', data: Buffer.from('nope').toString('base64') } },
    };
    const dead = await postBinary(tileUrl, poison);
    expect(dead.status).toBe(200);
    expect(await dead.json()).toMatchObject({ kind: 'dead-lettered', reason: 'INVALID_EVENT' });
    expect((await s.deadLetters()).map((m) => m.attributes['tessera-message-id'])).toEqual(['poison-1']);
  });
});
