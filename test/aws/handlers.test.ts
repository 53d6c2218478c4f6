import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { Context, S3Event, SQSEvent } from 'aws-lambda';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMosaicHandler } from '../../functions/aws/handlers/mosaic.handler.js';
import { createSceneHandler } from '../../functions/aws/handlers/scene.handler.js';
import { createTileHandler } from '../../functions/aws/handlers/tile.handler.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { parseTileJob, type TileJob } from '../../shared/app/tile-job.js';
import { outputKeys, sceneKey, tileJobKey } from '../../shared/domain/job-key.js';
import { decodeEventKey } from '../../shared/domain/object-key.js';
import { clockSkewMarginMs, ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid, windows } from '../../shared/domain/tile-grid.js';
import { FakeClock } from '../support/fake-clock.js';
import { asRole } from '../support/function-role.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { dynamoDbClient } from './clients.js';
import { expectNoAccessDenied } from './iam.js';
import { asFunction, createTestRuntime, createTestStack, drain, pollOnce, receiveEvent, TEST_PARAMS, type TestStack } from './stack.js';

const SCENE = { width: 96, height: 80 } as const; // tile_px 48: a 2 x 2 grid
const GRID = tileGrid(SCENE.width, SCENE.height, 48);
let sceneBytes: Uint8Array;

beforeAll(async () => {
  sceneBytes = await syntheticSceneBytes(SCENE);
});
// Every stack here is enforced: each function's S3 requests are signed by its role's IAM user (docs/iam.md).
// A denied request may end as a verdict (poison, retry) the assertions below do not pin on IAM: this names it.
afterEach(expectNoAccessDenied);

/** Upload a scene as a user would; moto then notifies the scene queue, as S3 does. */
async function upload(stack: TestStack, key: string): Promise<string> {
  const out = await stack.s3.send(new PutObjectCommand({ Bucket: stack.sourceBucket, Key: key, Body: sceneBytes }));
  return out.ETag as string;
}

/** Every tile job waiting in the tile queue (received and left hidden). */
async function tileJobsIn(stack: TestStack, expected: number): Promise<TileJob[]> {
  const jobs: TileJob[] = [];
  for (let i = 0; i < 10 && jobs.length < expected; i++)
    for (const r of (await receiveEvent(stack.tiles)).Records) jobs.push(parseTileJob(r.body));
  return jobs;
}

const logsOf = (lines: string[]) => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

describe('AWS handlers against DynamoDB Local and moto', () => {
  describe('scene handler', () => {
    it.each([
      ['a space and a plus', 'incoming/T31 UDQ+B08.tif'],
      ['a literal %2F', 'incoming/a%2Fb/scene.tif'],
      ['unicode', 'incoming/Zürich/日本/é.tif'],
    ])('decodes a key with %s from a real S3 notification into the job keys the shared derivation gives', async (_label, key) => {
      const stack = await createTestStack({ enforced: true });
      const etag = await upload(stack, key);
      const rt = stack.runtime();
      const { events, responses } = await drain(stack.scenes, asFunction('scene', createSceneHandler(rt)));
      expect(responses.every((r) => r.batchItemFailures.length === 0)).toBe(true);
      const notifications = events.flatMap((e) => e.Records).flatMap((r) => JSON.parse(r.body).Records ?? []);
      expect(notifications).toHaveLength(1);
      // The notification really is form-encoded (moto, like S3, encodes the key).
      expect(notifications[0].s3.object.key).not.toBe(key);
      expect(rt.backend.telemetry.counters()).toMatchObject({ 'event-ignored': 1, enqueued: GRID.count }); // the configuration's test event

      const source = { bucket: stack.sourceBucket, key, versionToken: etag };
      const scene = sceneKey(source, TEST_PARAMS);
      const jobs = await tileJobsIn(stack, GRID.count);
      expect(jobs.map((j) => j.jobKey).sort()).toEqual([...windows(GRID)].map((w) => tileJobKey(scene, w)).sort());
      for (const j of jobs) expect(j.source).toEqual(source);
      expect((await readSceneManifest(rt.backend.outputs, scene)).source.key).toBe(key);
    });

    it('checks the event token against the stored object: a notification for an overwritten upload is ignored, the newer one fans out', async () => {
      const stack = await createTestStack({ enforced: true });
      const key = 'incoming/overwritten.tif';
      const first = await upload(stack, key);
      // A second upload of the same name (other bytes, so another ETag) lands before the scene handler runs.
      const other = await syntheticSceneBytes({ ...SCENE, seed: 8 });
      const second = (await stack.s3.send(new PutObjectCommand({ Bucket: stack.sourceBucket, Key: key, Body: other }))).ETag as string;
      expect(second).not.toBe(first);
      const logs: string[] = [];
      const rt = stack.runtime({ logs });
      const { responses } = await drain(stack.scenes, asFunction('scene', createSceneHandler(rt)));
      expect(responses.every((r) => r.batchItemFailures.length === 0)).toBe(true);
      // The test event and the stale notification are ignored; only the live version is fanned out.
      expect(rt.backend.telemetry.counters()).toMatchObject({ 'event-ignored': 2, enqueued: GRID.count, poison: 0 });
      const ignored = logsOf(logs).filter((l) => l.event === 'event-ignored' && l.reason === 'source-changed');
      expect(ignored).toHaveLength(1);
      const jobs = await tileJobsIn(stack, GRID.count);
      expect(new Set(jobs.map((j) => j.source.versionToken))).toEqual(new Set([second]));
      // Every job carries the pin fan-out resolved for that version.
      for (const j of jobs) expect(j.pin?.version).toBe(second);
    });

    it('ignores and counts objects outside the prefix or suffix, and S3 test events', async () => {
      const stack = await createTestStack({ enforced: true });
      await upload(stack, 'elsewhere/scene.tif');
      await upload(stack, 'incoming/readme.txt');
      const rt = stack.runtime();
      const { records } = await drain(stack.scenes, asFunction('scene', createSceneHandler(rt)));
      expect(records).toBe(3); // two uploads and the test event S3 sends when the notification is configured
      expect(rt.backend.telemetry.counters()).toMatchObject({ 'event-ignored': 3, enqueued: 0, poison: 0 });
      expect((await receiveEvent(stack.tiles)).Records).toEqual([]);
    });

    it('hands back, visible at once, the scene events it has no time left to fan out', async () => {
      const stack = await createTestStack({ enforced: true });
      await upload(stack, 'incoming/late.tif');
      const rt = stack.runtime();
      const event = await receiveEvent(stack.scenes, 10);
      expect(event.Records.length).toBeGreaterThan(0);
      const response = await asFunction('scene', createSceneHandler(rt))(event, { getRemainingTimeInMillis: () => 1_000 } as Context);
      expect(response).toEqual({ batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })) });
      expect(rt.backend.telemetry.counters()).toMatchObject({ enqueued: 0, 'event-ignored': 0 });
      expect((await receiveEvent(stack.scenes, 10)).Records.map((r) => r.messageId).sort()).toEqual(
        event.Records.map((r) => r.messageId).sort(),
      );
    });

    it('settles a message of three S3 records per record: the good two fan out once, the bad one alone into the DLQ, the message acked', async () => {
      const stack = await createTestStack({ enforced: true });
      await upload(stack, 'incoming/one.tif');
      await stack.s3.send(new PutObjectCommand({ Bucket: stack.sourceBucket, Key: 'incoming/readme.tif', Body: 'not a raster' }));
      await upload(stack, 'incoming/two.tif');
      // The three notifications moto sent (and its configuration test event), folded into one message, as S3 may batch them.
      const received = [];
      for (let i = 0; i < 10 && received.length < 4; i++) received.push(...(await receiveEvent(stack.scenes)).Records);
      const s3Records = received.flatMap((r) => JSON.parse(r.body).Records ?? []);
      expect(s3Records).toHaveLength(3);
      const template = received[0];
      if (!template) throw new Error('setup failed');
      const message = { ...template, body: JSON.stringify({ Records: s3Records }) };
      const rt = createTestRuntime({ env: { ...stack.env, [ENV.deadLetterQueue]: stack.scenesDlq.url } }, stack.clients());

      expect(await asFunction('scene', createSceneHandler(rt))({ Records: [message] })).toEqual({ batchItemFailures: [] });
      expect(rt.backend.telemetry.counters()).toMatchObject({ enqueued: 2 * GRID.count, poison: 1 });
      expect(await tileJobsIn(stack, 2 * GRID.count)).toHaveLength(2 * GRID.count);
      const dlq = await stack.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: stack.scenesDlq.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      expect(dlq.Messages).toHaveLength(1);
      const alone = JSON.parse(dlq.Messages?.[0]?.Body ?? '{}').Records;
      expect(alone.map((r: { s3: { object: { key: string } } }) => decodeEventKey(r.s3.object.key))).toEqual(['incoming/readme.tif']);
    });

    it('fans out a direct S3 invocation and throws, for the on-failure destination, on a record it cannot read', async () => {
      const stack = await createTestStack({ enforced: true });
      const etag = await upload(stack, 'incoming/direct.tif');
      const rt = stack.runtime();
      const record = (key: string, eTag: string) => ({
        eventVersion: '2.1',
        eventSource: 'aws:s3',
        awsRegion: 'us-east-1',
        eventTime: '2026-01-01T00:00:00.000Z',
        eventName: 'ObjectCreated:Put',
        userIdentity: { principalId: 'x' },
        requestParameters: { sourceIPAddress: '127.0.0.1' },
        responseElements: { 'x-amz-request-id': 'r', 'x-amz-id-2': 'i' },
        s3: {
          s3SchemaVersion: '1.0',
          configurationId: 'c',
          bucket: { name: stack.sourceBucket, ownerIdentity: { principalId: 'x' }, arn: `arn:aws:s3:::${stack.sourceBucket}` },
          object: { key, size: sceneBytes.byteLength, eTag, sequencer: '0' },
        },
      });
      const handler = asFunction('scene', createSceneHandler(rt));
      const ok = await handler({ Records: [record('incoming/direct.tif', etag.replaceAll('"', ''))] } satisfies S3Event);
      expect(ok).toMatchObject({ outcomes: [{ kind: 'fanned-out', enqueued: GRID.count, source: { versionToken: etag } }] });
      await expect(handler({ Records: [record('incoming/%E0%A4%A.tif', 'abc')] } satisfies S3Event)).rejects.toThrow(
        /could not be fanned out.*URL encoding/,
      );
      expect(rt.backend.telemetry.counters().poison).toBe(1);
    });
  });

  describe('tile handler', () => {
    async function stackWithJobs(maxReceiveCount = 3) {
      const stack = await createTestStack({ enforced: true, maxReceiveCount });
      await upload(stack, 'incoming/scene.tif');
      await drain(stack.scenes, asFunction('scene', createSceneHandler(stack.runtime())));
      return stack;
    }

    it('dispatches a fan-out chunk on the tile queue: it enqueues its windows once, and they are written', async () => {
      const stack = await createTestStack({ enforced: true });
      const key = 'incoming/chunked.tif';
      const etag = await upload(stack, key);
      const rt = stack.runtime();
      const source = { bucket: stack.sourceBucket, key, versionToken: etag };
      // Two chunk messages of two windows each on the tile queue, as a grid too big for one invocation would get.
      expect(await asRole('scene', () => fanOutScene(rt.backend, { source, params: TEST_PARAMS, chunkWindows: 2 }))).toMatchObject({
        enqueued: 0,
        chunks: 2,
      });
      const { responses } = await drain(stack.tiles, asFunction('tile', createTileHandler(rt)));
      expect(responses.every((r) => r.batchItemFailures.length === 0)).toBe(true);
      expect(rt.backend.telemetry.counters()).toMatchObject({
        enqueued: GRID.count,
        written: GRID.count,
        committed: GRID.count,
        poison: 0,
      });
      const scene = sceneKey(source, TEST_PARAMS);
      for (const w of windows(GRID)) expect(await rt.backend.outputs.head(outputKeys.tile(scene, w))).toBeDefined();
    });

    it('replays an event without touching the output: ETag and LastModified unchanged', async () => {
      const stack = await stackWithJobs();
      const rt = stack.runtime();
      const handler = asFunction('tile', createTileHandler(rt));
      const event = await receiveEvent(stack.tiles, 1);
      const job = parseTileJob(event.Records[0]?.body ?? '');
      expect(await handler(event)).toEqual({ batchItemFailures: [] });
      const head = () => stack.s3.send(new HeadObjectCommand({ Bucket: stack.outputBucket, Key: job.outputKey }));
      const first = await head();
      await new Promise((r) => setTimeout(r, 1100)); // a rewrite would show a later LastModified
      expect(await handler(event)).toEqual({ batchItemFailures: [] });
      const second = await head();
      expect(second.ETag).toBe(first.ETag);
      expect(second.LastModified).toEqual(first.LastModified);
      expect(rt.backend.telemetry.counters()).toMatchObject({ written: 1, committed: 1, 'claim-rejected': 1 });
    });

    it('a lease that lapses mid-job is taken over: the first commit is LeaseStolen (ERROR), one object, COMMITTED by the second', async () => {
      const stack = await stackWithJobs();
      const clock = new FakeClock(Date.now());
      const logsA: string[] = [];
      const logsB: string[] = [];
      const a = stack.runtime({ owner: 'worker-a', clock, logs: logsA });
      const b = stack.runtime({ owner: 'worker-b', clock, logs: logsB });
      const event = await receiveEvent(stack.tiles, 1);
      const job = parseTileJob(event.Records[0]?.body ?? '');
      let bResponse: unknown;
      const slowA = asFunction(
        'tile',
        createTileHandler({
          ...a,
          settings: {
            ...a.settings,
            hooks: {
              afterClaim: async () => {
                // Worker A stalls past its lease; SQS redelivers the message to worker B meanwhile.
                // Past the lease and the clock skew margin a takeover waits for (shared/app/clock-skew.ts).
                clock.advance(a.settings.leaseMs + clockSkewMarginMs(a.config) + 1);
                const redelivered = {
                  Records: event.Records.map((r) => ({ ...r, attributes: { ...r.attributes, ApproximateReceiveCount: '2' } })),
                };
                bResponse = await asFunction('tile', createTileHandler(b))(redelivered);
              },
            },
          },
        }),
      );
      expect(await slowA(event)).toEqual({ batchItemFailures: [] });
      expect(bResponse).toEqual({ batchItemFailures: [] });

      expect(a.backend.telemetry.counters()).toMatchObject({ 'lease-stolen': 1, 'write-already-present': 1, committed: 0 });
      expect(b.backend.telemetry.counters()).toMatchObject({ 'lease-taken-over': 1, written: 1, committed: 1 });
      expect(logsOf(logsA).find((l) => l.event === 'lease-stolen')).toMatchObject({ level: 'ERROR', jobKey: job.jobKey });
      const row = await dynamoDbClient().send(
        new GetItemCommand({ TableName: stack.claimsTable, Key: { job_id: { S: job.jobKey } }, ConsistentRead: true }),
      );
      expect(row.Item?.state?.S).toBe('COMMITTED');
      expect(row.Item?.owner?.S).toMatch(/@worker-b$/);
      const objects = [];
      for await (const h of a.backend.outputs.list(outputKeys.tilePrefix(job.sceneKey))) objects.push(h.key);
      expect(objects).toEqual([job.outputKey]);
    });

    it('settles the poison record of a batch at once: into the DLQ by the handler, not reported; nothing written or claimed for it', async () => {
      const stack = await stackWithJobs();
      const rt = stack.runtime();
      const event = await receiveEvent(stack.tiles, 4);
      expect(event.Records).toHaveLength(GRID.count);
      // A job whose window was altered in flight: its keys no longer match its fields.
      const victim = event.Records[2];
      if (!victim) throw new Error('setup failed');
      const tampered = JSON.parse(victim.body) as { window: { row: number } };
      tampered.window.row += 7;
      const poisoned: SQSEvent = { Records: event.Records.map((r) => (r === victim ? { ...r, body: JSON.stringify(tampered) } : r)) };
      const poisonJob = JSON.parse(victim.body) as TileJob;

      expect(await asFunction('tile', createTileHandler(rt))(poisoned)).toEqual({ batchItemFailures: [] });
      expect(rt.backend.telemetry.counters()).toMatchObject({ poison: 1, written: GRID.count - 1, committed: GRID.count - 1 });
      // One entry, the tampered body exactly as it came, with why it is poison.
      expect(await rt.backend.queue.deadLetters()).toEqual([{ jobKey: poisonJob.jobKey, body: JSON.stringify(tampered) }]);
      expect(await rt.backend.claims.get(poisonJob.jobKey)).toBeUndefined();
      expect(await rt.backend.outputs.head(poisonJob.outputKey)).toBeUndefined();
      for (const r of event.Records.filter((x) => x !== victim)) {
        expect(await rt.backend.outputs.head(parseTileJob(r.body).outputKey)).toBeDefined();
      }
    });

    it('a poison message ends in the real dead-letter queue after one receive, not maxReceiveCount; the good ones are done', async () => {
      const stack = await stackWithJobs(2);
      const logs: string[] = [];
      const rt = stack.runtime({ logs });
      await rt.backend.queue.sendBatch([{ jobKey: 'not-a-job', body: '{"v":1,"this":"is not a tile job"}' }]);
      const { records } = await drain(stack.tiles, asFunction('tile', createTileHandler(rt)));
      expect(records).toBe(GRID.count + 1); // four good jobs once, the poison once (it was received at most twice before)
      expect(rt.backend.telemetry.counters()).toMatchObject({ poison: 1, written: GRID.count, committed: GRID.count });
      expect(await rt.backend.queue.deadLetters()).toEqual([{ jobKey: 'not-a-job', body: '{"v":1,"this":"is not a tile job"}' }]);
      expect((await receiveEvent(stack.tiles)).Records).toEqual([]);
      expect(logsOf(logs).filter((l) => l.event === 'poison-dead-lettered')).toHaveLength(1);
    });

    it('without a dead-letter queue configured, poison falls back to the redrive policy: reported, visible at once', async () => {
      const stack = await stackWithJobs(2);
      const rt = createTestRuntime({ env: { ...stack.env, [ENV.deadLetterQueue]: '' } }, stack.clients());
      await rt.backend.queue.sendBatch([{ jobKey: 'not-a-job', body: 'not json' }]);
      const { records } = await drain(stack.tiles, asFunction('tile', createTileHandler(rt)));
      expect(records).toBe(GRID.count + 2); // the poison received maxReceiveCount (2) times, then redriven by SQS
      expect(await rt.backend.queue.deadLetters()).toEqual([{ jobKey: 'not-a-job', body: 'not json' }]);
    });

    describe("a delivery that meets the live lease of its own message's earlier attempt (it died after its claim)", () => {
      async function heldByEarlierAttempt(stack: TestStack, rt: ReturnType<TestStack['runtime']>) {
        const event = await receiveEvent(stack.tiles, 1);
        const record = event.Records[0];
        if (!record) throw new Error('setup failed');
        const job = parseTileJob(record.body);
        const now = Date.now();
        // What the dead attempt left: its claim, owned by this message's id and another instance, lease live.
        await rt.backend.claims.claim({
          jobId: job.jobKey,
          owner: `${record.messageId}@dead-instance`,
          now,
          leaseUntil: now + rt.settings.leaseMs,
          expiresAt: now + rt.settings.retentionMs,
        });
        return { record, job };
      }

      it('waits while a later receive can come after the lease: reported, hidden by SQS for the rest of the lease', async () => {
        const stack = await stackWithJobs(3);
        const rt = stack.runtime();
        const { record } = await heldByEarlierAttempt(stack, rt);
        const redelivery = { ...record, attributes: { ...record.attributes, ApproximateReceiveCount: '2' } };
        expect(await asFunction('tile', createTileHandler(rt))({ Records: [redelivery] })).toEqual({
          batchItemFailures: [{ itemIdentifier: record.messageId }],
        });
        // moto applied the handler's ChangeMessageVisibility: the message stays hidden (the lease has ~1,200 s left).
        const attrs = await stack.sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: stack.tiles.url, AttributeNames: ['ApproximateNumberOfMessagesNotVisible'] }),
        );
        expect(attrs.Attributes?.ApproximateNumberOfMessagesNotVisible).toBe('1');
        expect(rt.backend.telemetry.counters()).toMatchObject({ written: 0, 'claim-rejected': 1 });
      });

      it('on the last receive the redrive policy allows, takes the stale lease over and writes, instead of dead-lettering', async () => {
        const stack = await stackWithJobs(3);
        const rt = createTestRuntime({ env: { ...stack.env, [ENV.maxDeliveries]: '3' } }, stack.clients());
        const { record, job } = await heldByEarlierAttempt(stack, rt);
        const last = { ...record, attributes: { ...record.attributes, ApproximateReceiveCount: '3' } };
        expect(await asFunction('tile', createTileHandler(rt))({ Records: [last] })).toEqual({ batchItemFailures: [] });
        expect(rt.backend.telemetry.counters()).toMatchObject({ written: 1, committed: 1, 'lease-taken-over': 1 });
        // The job ran under the earlier attempt's owner, so that attempt, were it alive, would commit without an alarm.
        expect(await rt.backend.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: `${record.messageId}@dead-instance` });
      });
    });

    it('reports a record that failed transiently, releases its claim, and the redelivery writes it', async () => {
      const stack = await stackWithJobs();
      const healthy = stack.runtime();
      let failPuts = true;
      const s3 = healthy.clients.s3;
      const flaky = {
        send: (command: unknown) => {
          if (failPuts && command instanceof PutObjectCommand) {
            return Promise.reject(
              Object.assign(new Error('We encountered an internal error.'), { name: 'InternalError', $metadata: { httpStatusCode: 500 } }),
            );
          }
          return (s3.send as (c: unknown) => Promise<unknown>)(command);
        },
      } as unknown as typeof s3;
      const rt = createTestRuntime(stack, { ...healthy.clients, s3: flaky });
      const event = await receiveEvent(stack.tiles, 1);
      const job = parseTileJob(event.Records[0]?.body ?? '');
      expect(await asFunction('tile', createTileHandler(rt))(event)).toEqual({
        batchItemFailures: [{ itemIdentifier: event.Records[0]?.messageId }],
      });
      expect(rt.backend.telemetry.counters()).toMatchObject({ failed: 1, poison: 0, written: 0 });
      const released = await rt.backend.claims.get(job.jobKey);
      expect(released?.state).toBe('CLAIMED');
      expect(released?.leaseUntil).toBeLessThan(Date.now());

      failPuts = false;
      const redelivered = { Records: event.Records.map((r) => ({ ...r, attributes: { ...r.attributes, ApproximateReceiveCount: '2' } })) };
      expect(await asFunction('tile', createTileHandler(rt))(redelivered)).toEqual({ batchItemFailures: [] });
      expect(await rt.backend.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED' });
    });

    it('hands back, unprocessed, the records it has no time left to start', async () => {
      const stack = await stackWithJobs();
      const rt = stack.runtime();
      const event = await receiveEvent(stack.tiles, 2);
      expect(event.Records).toHaveLength(2);
      const nearTimeout = { getRemainingTimeInMillis: () => 5_000 } as Context;
      const response = await asFunction('tile', createTileHandler(rt))(event, nearTimeout);
      expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(event.Records.map((r) => r.messageId).sort());
      expect(rt.backend.telemetry.counters()).toMatchObject({ claimed: 0, failed: 0, poison: 0 });
      // Handed back visible at once: another invocation can take them now.
      expect((await receiveEvent(stack.tiles, 10)).Records.map((r) => r.messageId)).toEqual(
        expect.arrayContaining(event.Records.map((r) => r.messageId)),
      );
    });
  });

  describe('mosaic handler', () => {
    it('leaves a scene pending until every tile is written, then assembles it once with a create-only VRT', async () => {
      const stack = await createTestStack({ enforced: true });
      const etag = await upload(stack, 'incoming/mosaic.tif');
      const rt = stack.runtime();
      await drain(stack.scenes, asFunction('scene', createSceneHandler(rt)));
      const scene = sceneKey({ bucket: stack.sourceBucket, key: 'incoming/mosaic.tif', versionToken: etag }, TEST_PARAMS);
      const mosaic = asFunction('mosaic', createMosaicHandler(rt));
      const tick = { 'detail-type': 'Scheduled Event', source: 'aws.events' } as never;

      await pollOnce(stack.tiles, asFunction('tile', createTileHandler(rt)), 1);
      expect(await mosaic(tick)).toMatchObject({ assembled: [], pending: [{ sceneKey: scene, missing: GRID.count - 1 }], failed: [] });

      await drain(stack.tiles, asFunction('tile', createTileHandler(rt)));
      expect(await mosaic(tick)).toMatchObject({
        assembled: [{ sceneKey: scene, mosaicKey: outputKeys.mosaic(scene), result: 'written' }],
        pending: [],
      });
      const vrt = new TextDecoder().decode(await rt.backend.outputs.get(outputKeys.mosaic(scene)));
      expect(vrt.match(/<SourceFilename/g)).toHaveLength(GRID.count);
      expect(await mosaic(tick)).toMatchObject({ assembled: [], pending: [], failed: [] });
      expect(await mosaic({ sceneKey: scene })).toMatchObject({ assembled: [{ sceneKey: scene, result: 'already-present' }] });
    });
  });
});
