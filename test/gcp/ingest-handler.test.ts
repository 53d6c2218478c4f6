import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Request, Response } from '@google-cloud/functions-framework';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIngestHandler } from '../../functions/gcp/handlers/ingest.handler.js';
import { createReconcileHandler } from '../../functions/gcp/handlers/reconcile.handler.js';
import { toIngestMessage } from '../../shared/app/ingest.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { freshJobId } from '../support/ids.js';
import { notARaster, validArtefact } from '../support/ingest-fixtures.js';
import { pullAll } from './clients.js';
import { createGcpStack, type GcpTestStack, pubsubEvent, type TestRuntime } from './stack.js';

/**
 * The GCP ingest function (functions/gcp/handlers/ingest.handler.ts) driven as
 * the ingest push subscription drives it: a message published to an ingest
 * topic in the Pub/Sub emulator, pulled and handed over as the
 * messagePublished CloudEvent; staging and promoted keys in fake-gcs-server,
 * the manifest in the Firestore emulator.
 */

const SOURCE = 'sentinel-2-l2a';
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

let s: GcpTestStack;
let rt: TestRuntime;
let ingestTopic: string;
let ingestSub: string;
let artefact: Uint8Array;
const servers: Server[] = [];

beforeAll(async () => {
  s = await createGcpStack();
  const [topic] = await s.clients.pubsub.createTopic(`ingest-${freshJobId().slice(0, 10)}`);
  const [sub] = await topic.createSubscription(`ingest-sub-${freshJobId().slice(0, 10)}`);
  ingestTopic = topic.name;
  ingestSub = sub.name;
  // The test's HTTP origin listens on 127.0.0.1, which an ingest refuses unless told otherwise (docs/ingest.md).
  rt = s.runtime({ role: 'ingest', env: { [ENV.ingestAllowPrivateAddresses]: '127.0.0.1' } });
  artefact = await validArtefact(21);
});
afterAll(async () => {
  await Promise.all(servers.map((srv) => new Promise((resolve) => srv.close(resolve))));
  await s.close();
});

/** Publish a request to the ingest topic and pull it back as the CloudEvent the push subscription delivers. */
async function deliver(body: string, deliveryAttempt = 1) {
  await s.clients.pubsub.topic(ingestTopic).publishMessage({ data: Buffer.from(body) });
  const [m] = await pullAll(s.clients.pubsub, ingestSub);
  if (!m) throw new Error('the ingest message did not arrive');
  return pubsubEvent(m, ingestSub, deliveryAttempt);
}

async function keysUnder(prefix: string): Promise<string[]> {
  const [files] = await s.clients.storage.bucket(s.sourceBucket).getFiles({ prefix });
  return files.map((f) => f.name).sort();
}

async function origin(status: number, body: Uint8Array): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(status, { 'content-type': 'image/tiff', 'content-length': String(body.length) });
    res.end(Buffer.from(body));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/scene.tif`;
}

describe('the GCP ingest function against the Pub/Sub, Firestore and fake-gcs-server emulators', () => {
  it('publishes an object:KEY artefact once; a duplicate delivery is already published and copies nothing', async () => {
    await s.clients.storage.bucket(s.sourceBucket).file('uploads/T31UDQ.tif').save(Buffer.from(artefact), { resumable: false });
    const body = toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'S2B_T31UDQ', href: 'object:uploads/T31UDQ.tif' });
    const first = await createIngestHandler(rt)(await deliver(body));
    expect(first.kind).toBe('ack');
    const outcome = first.kind === 'ack' ? first.outcomes[0] : undefined;
    expect(outcome).toMatchObject({ published: true, reason: 'published', checksum: sha(artefact) });
    expect(outcome?.key?.startsWith('incoming/')).toBe(true);
    const rows = await rt.manifest?.find(SOURCE, 'S2B_T31UDQ');
    expect(rows?.map((r) => r.key)).toEqual([outcome?.key]);
    expect(await keysUnder('incoming/')).toEqual([outcome?.key]);

    const again = await createIngestHandler(rt)(await deliver(body, 2));
    expect(again).toMatchObject({ kind: 'ack', outcomes: [{ published: false, reason: 'already-published', key: outcome?.key }] });
    expect(await keysUnder('incoming/')).toEqual([outcome?.key]);
    expect(await rt.manifest?.find(SOURCE, 'S2B_T31UDQ')).toHaveLength(1);
    expect(await s.deadLetters()).toEqual([]);
  });

  it('settles a malformed request and a refused artefact in the dead-letter topic at once, acknowledged', async () => {
    const malformed = await createIngestHandler(rt)(await deliver('{"type":"tessera.ingest","v":1}'));
    expect(malformed).toMatchObject({ kind: 'dead-lettered', reason: 'INVALID_INGEST_REQUEST' });
    const refused = await createIngestHandler(rt)(
      await deliver(toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'README', href: await origin(200, notARaster()) })),
    );
    expect(refused).toMatchObject({ kind: 'dead-lettered', reason: 'ARTEFACT_REFUSED' });
    const dead = await s.deadLetters();
    expect(dead.map((m) => m.attributes['tessera-reason']).sort()).toEqual(['ARTEFACT_REFUSED', 'INVALID_INGEST_REQUEST']);
    expect(dead.some((m) => m.text === '{"type":"tessera.ingest","v":1}')).toBe(true);
    expect(await rt.manifest?.find(SOURCE, 'README')).toEqual([]);
  });

  it('throws on a transient failure (a 503 origin), so Pub/Sub redelivers after its backoff', async () => {
    const event = await deliver(
      toIngestMessage({ kind: 'artefact', source: SOURCE, externalId: 'FLAKY', href: await origin(503, new Uint8Array(4)) }),
    );
    await expect(createIngestHandler(rt)(event)).rejects.toThrow(/503/);
    expect(await s.deadLetters()).toEqual([]);
  });

  it('answers Cloud Scheduler with the reconcile report: the promoted prefix against the manifest, both ways', async () => {
    const orphan = `incoming/${SOURCE}/S2B_ORPHAN/${sha(artefact)}/data.tif`;
    await s.clients.storage.bucket(s.sourceBucket).file(orphan).save(Buffer.from(artefact), { resumable: false });
    let status = 0;
    let json: unknown;
    const res = {
      status(code: number) {
        status = code;
        return this;
      },
      set() {
        return this;
      },
      json(body: unknown) {
        json = body;
        return this;
      },
    } as unknown as Response;
    await createReconcileHandler(s.runtime({ role: 'reconcile' }))({ method: 'POST', body: {} } as Request, res);
    expect(status).toBe(200);
    expect(json).toMatchObject({ rowsChecked: 1, objectsWithoutRow: [orphan], rowsWithoutObject: [] });
  });
});
