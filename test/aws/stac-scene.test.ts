import { PutObjectCommand } from '@aws-sdk/client-s3';
import { ChangeMessageVisibilityCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSceneHandler } from '../../functions/aws/handlers/scene.handler.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { parseTileJob } from '../../shared/app/tile-job.js';
import { decodeEventKey } from '../../shared/domain/object-key.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { expectNoAccessDenied } from './iam.js';
import { asFunction, createTestRuntime, createTestStack, receiveEvent, type TestStack } from './stack.js';

// The S3 scene trigger of a STAC stack (shared/app/stac-scene.ts, docs/multi-file-scenes.md), against moto:
// real S3 notifications into a real SQS scene queue, the handler as the event source mapping runs it.

const SCENE = { width: 96, height: 80 } as const; // tile_px 48: a 2 x 2 grid
const GRID = tileGrid(SCENE.width, SCENE.height, 48);
const DIR = 'incoming/S2B_T31UDQ_20240601';
let bandBytes: Uint8Array;

beforeAll(async () => {
  bandBytes = await syntheticSceneBytes(SCENE);
});
// The scene function's S3 requests are signed by its IAM user with the deployed policy (docs/iam.md).
afterEach(expectNoAccessDenied);

function item(id: string): string {
  return JSON.stringify({
    type: 'Feature',
    stac_version: '1.1.0',
    id,
    properties: { datetime: '2024-06-01T10:56:29Z' },
    assets: {
      red: { href: './B04.tif', type: 'image/tiff; application=geotiff', bands: [{ name: 'B04', 'eo:common_name': 'red' }] },
      nir: { href: 'B08+nir.tif', type: 'image/tiff; application=geotiff', bands: [{ name: 'B08', 'eo:common_name': 'nir' }] },
    },
  });
}

const put = async (stack: TestStack, key: string, body: Uint8Array | string): Promise<string> =>
  (await stack.s3.send(new PutObjectCommand({ Bucket: stack.sourceBucket, Key: key, Body: body }))).ETag as string;

/** A STAC stack: items are the scenes (`.json`), bands picked by common name, poison settled in the scene DLQ. */
async function stacStack(): Promise<{ stack: TestStack; env: Record<string, string> }> {
  const stack = await createTestStack({ enforced: true });
  const env = {
    ...stack.env,
    [ENV.sourceSuffix]: '.json',
    [ENV.stacAssets]: '{"B04":"red","B08":"nir"}',
    [ENV.deadLetterQueue]: stack.scenesDlq.url,
    [ENV.maxDeliveries]: '3',
  };
  return { stack, env };
}

/** Every record the scene queue holds now (received, hidden for its visibility timeout). */
async function sceneRecords(stack: TestStack, atLeast: number): Promise<SQSRecord[]> {
  const out: SQSRecord[] = [];
  for (let i = 0; i < 10 && out.length < atLeast; i++) out.push(...(await receiveEvent(stack.scenes)).Records);
  return out;
}
const keyOf = (r: SQSRecord): string | undefined => {
  const records = JSON.parse(r.body).Records as { s3: { object: { key: string } } }[] | undefined;
  return records?.[0] === undefined ? undefined : decodeEventKey(records[0].s3.object.key);
};

describe('AWS scene handler on a STAC stack (moto)', () => {
  it('retries an item whose band has not landed, then fans the scene out once it has; band uploads start nothing', async () => {
    const { stack, env } = await stacStack();
    await put(stack, `${DIR}/B04.tif`, bandBytes);
    const itemEtag = await put(stack, `${DIR}/item.json`, item('S2B_T31UDQ_20240601'));
    const rt = createTestRuntime({ env }, stack.clients());
    const handler = asFunction('scene', createSceneHandler(rt));

    // The configuration's test event, the band (filtered out: not .json) and the item, as moto delivered them.
    const first = await sceneRecords(stack, 3);
    expect(first.map(keyOf).sort()).toEqual([`${DIR}/B04.tif`, `${DIR}/item.json`, undefined].sort());
    const itemRecord = first.find((r) => keyOf(r) === `${DIR}/item.json`) as SQSRecord;
    const response = await handler({ Records: first });
    // Only the item is handed back (B08.tif is missing): the queue retries it on its backoff.
    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: itemRecord.messageId }] });
    expect(rt.backend.telemetry.counters()).toMatchObject({ 'scene-incomplete': 1, 'event-ignored': 2, enqueued: 0, poison: 0 });

    await put(stack, `${DIR}/B08+nir.tif`, bandBytes);
    // The backoff (10 s on a first retry) passes: the item's message is visible again.
    await stack.sqs.send(
      new ChangeMessageVisibilityCommand({ QueueUrl: stack.scenes.url, ReceiptHandle: itemRecord.receiptHandle, VisibilityTimeout: 0 }),
    );
    const again = await sceneRecords(stack, 2); // the retried item and the notification of B08's upload
    expect(again.map(keyOf).sort()).toEqual([`${DIR}/B08+nir.tif`, `${DIR}/item.json`]);
    expect(await handler({ Records: again })).toEqual({ batchItemFailures: [] });
    expect(rt.backend.telemetry.counters()).toMatchObject({ 'scene-incomplete': 1, enqueued: GRID.count, poison: 0 });

    const jobs = (await tileBodies(stack)).map((b) => parseTileJob(b));
    expect(jobs).toHaveLength(GRID.count);
    const manifest = await readSceneManifest(rt.backend.outputs, jobs[0]?.sceneKey as string);
    expect(manifest.source).toMatchObject({
      key: `${DIR}/item.json`,
      versionToken: itemEtag,
      assets: { B04: { key: `${DIR}/B04.tif` }, B08: { key: `${DIR}/B08+nir.tif` } },
    });
    expect(manifest.params.bands).toEqual({ B04: 1, B08: 1 });
  });

  it('dead-letters an item still incomplete at the last delivery the queue allows, with SCENE_INCOMPLETE and the missing key', async () => {
    const { stack, env } = await stacStack();
    await put(stack, `${DIR}/B04.tif`, bandBytes);
    await put(stack, `${DIR}/item.json`, item('S2B_T31UDQ_20240601'));
    const rt = createTestRuntime({ env }, stack.clients());
    const handler = asFunction('scene', createSceneHandler(rt));
    // Each receive, real: the handler hands the item back, its backoff passes, SQS delivers it again (receive 1, 2, 3).
    const receives: string[] = [];
    let pending = (await sceneRecords(stack, 2)).filter((r) => keyOf(r) === `${DIR}/item.json`);
    while (pending.length > 0) {
      const [record] = pending as [SQSRecord];
      receives.push(record.attributes.ApproximateReceiveCount);
      const { batchItemFailures } = (await handler({ Records: [record] })) as { batchItemFailures: unknown[] };
      if (batchItemFailures.length === 0) break;
      await stack.sqs.send(
        new ChangeMessageVisibilityCommand({ QueueUrl: stack.scenes.url, ReceiptHandle: record.receiptHandle, VisibilityTimeout: 0 }),
      );
      pending = await sceneRecords(stack, 1);
    }
    // At the third receive of the three the redrive policy allows (TESSERA_MAX_DELIVERIES) the handler dead-letters it itself.
    expect(receives).toEqual(['1', '2', '3']);
    expect(rt.backend.telemetry.counters()).toMatchObject({ 'scene-incomplete': 3, poison: 1, enqueued: 0 });
    const dlq = await stack.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: stack.scenesDlq.url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
      }),
    );
    expect(dlq.Messages).toHaveLength(1);
    const attrs = dlq.Messages?.[0]?.MessageAttributes ?? {};
    expect(attrs['tessera-reason']?.StringValue).toBe('SCENE_INCOMPLETE');
    expect(attrs['tessera-error']?.StringValue).toMatch(/B08\+nir\.tif.*still missing at delivery 3 of 3/);
  });

  it('dead-letters a malformed item at its first delivery', async () => {
    const { stack, env } = await stacStack();
    await put(stack, `${DIR}/item.json`, '{"type":"FeatureCollection","features":[]}');
    const rt = createTestRuntime({ env }, stack.clients());
    const records = await sceneRecords(stack, 2);
    expect(await asFunction('scene', createSceneHandler(rt))({ Records: records })).toEqual({ batchItemFailures: [] });
    expect(rt.backend.telemetry.counters()).toMatchObject({ poison: 1, enqueued: 0, 'scene-incomplete': 0 });
    const dlq = await stack.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: stack.scenesDlq.url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
      }),
    );
    expect(dlq.Messages?.map((m) => m.MessageAttributes?.['tessera-reason']?.StringValue)).toEqual(['INVALID_EVENT']);
  });
});

/** The tile job bodies waiting in the tile queue. */
async function tileBodies(stack: TestStack): Promise<string[]> {
  const bodies: string[] = [];
  for (let i = 0; i < 10 && bodies.length < GRID.count; i++) for (const r of (await receiveEvent(stack.tiles)).Records) bodies.push(r.body);
  return bodies;
}
