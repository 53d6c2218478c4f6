import { PutObjectCommand } from '@aws-sdk/client-s3';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { createSceneHandler } from '../../functions/aws/handlers/scene.handler.js';
import { createTileHandler } from '../../functions/aws/handlers/tile.handler.js';
import { type OtelSdk, setUpOpenTelemetry } from '../../functions/otel/otel-sdk.js';
import { SPAN, SPAN_ATTR } from '../../shared/app/tracing.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { asFunction, createTestStack, drain } from './stack.js';

const SCENE = { width: 96, height: 80 } as const; // tile_px 48: a 2 x 2 grid
const TILES = tileGrid(SCENE.width, SCENE.height, 48).count;

const childrenOf = (spans: readonly ReadableSpan[], parent: ReadableSpan) =>
  spans
    .filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId)
    .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);

let sdk: OtelSdk | undefined;
afterEach(async () => {
  await sdk?.shutdown();
  sdk = undefined;
});

describe('AWS tile handler on DynamoDB Local and moto, traced', () => {
  it('exports a delivery span per SQS record, its tile span carrying job key, owner, lease deadline and outcome, the steps below it', async () => {
    const spans = new InMemorySpanExporter();
    sdk = setUpOpenTelemetry({}, { serviceName: 'tessera-tile', spanExporter: spans });
    const stack = await createTestStack({ enforced: true });
    await stack.s3.send(
      new PutObjectCommand({ Bucket: stack.sourceBucket, Key: 'incoming/scene.tif', Body: await syntheticSceneBytes(SCENE) }),
    );
    await drain(stack.scenes, asFunction('scene', createSceneHandler(stack.runtime())));
    const rt = stack.runtime();
    // composeAws found the SDK set up: the runtime carries it, and the handler flushes it before it answers.
    expect(rt.otel).toBe(sdk);
    const { responses } = await drain(stack.tiles, asFunction('tile', createTileHandler(rt)));
    expect(responses.every((r) => r.batchItemFailures.length === 0)).toBe(true);

    const finished = spans.getFinishedSpans();
    const deliveries = finished.filter((s) => s.name === SPAN.delivery);
    expect(deliveries).toHaveLength(TILES);
    for (const delivery of deliveries) {
      expect(delivery.attributes).toMatchObject({ [SPAN_ATTR.verdict]: 'ack', [SPAN_ATTR.outcome]: 'written' });
      const [tile] = childrenOf(finished, delivery);
      expect(tile?.name).toBe(SPAN.tile);
      if (!tile) continue;
      expect(tile.attributes[SPAN_ATTR.jobKey]).toBe(delivery.attributes[SPAN_ATTR.jobKey]);
      expect(tile.attributes[SPAN_ATTR.claimOwner]).toBe(`${String(delivery.attributes[SPAN_ATTR.deliveryId])}@worker-a`);
      expect(tile.attributes[SPAN_ATTR.leaseDeadline]).toBeGreaterThan(Date.now());
      expect(tile.attributes[SPAN_ATTR.outcome]).toBe('written');
      expect(childrenOf(finished, tile).map((s) => s.name)).toEqual([SPAN.claim, SPAN.read, SPAN.render, SPAN.write, SPAN.commit]);
    }
  });
});
