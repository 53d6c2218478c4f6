import { PutObjectCommand } from '@aws-sdk/client-s3';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { composeAws } from '../../functions/aws/compose.js';
import { createSceneHandler } from '../../functions/aws/handlers/scene.handler.js';
import { createTileHandler } from '../../functions/aws/handlers/tile.handler.js';
import { type OtelSdk, setUpOpenTelemetry } from '../../functions/otel/otel-sdk.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { inSpan, SPAN, SPAN_ATTR } from '../../shared/app/tracing.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import { tileGrid } from '../../shared/domain/tile-grid.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { deliveryTraces, exportedMetricNames, exportedSpans, startOtlpReceiver } from '../support/otel-trace.js';
import { awsEndpoints, freshName } from './clients.js';
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
    // Every span in one delivery's tree, each delivery the root of its own trace.
    expect(deliveryTraces(finished).map((d) => d.tile?.steps)).toEqual(
      Array(TILES).fill(['claim:claimed', 'read', 'render', 'write:written', 'commit:committed']),
    );
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

  it('an otlp exporter with headers (tessera:telemetryHeaders) reads them from Secrets Manager and sends them with every export, never from the environment', async () => {
    const receiver = await startOtlpReceiver();
    try {
      const e = awsEndpoints();
      // moto serves Secrets Manager on the S3/SQS endpoint.
      const secrets = new SecretsManagerClient({
        endpoint: e.moto,
        region: e.region,
        credentials: { accessKeyId: 'tesseratest', secretAccessKey: 'tesseratest' },
      });
      const created = await secrets.send(
        new CreateSecretCommand({ Name: freshName('otel-headers'), SecretString: 'x-api-key=k%3D1,x-team=tiles' }),
      );
      // The tile function's environment as infra/ writes it for an otlp exporter with headers: the endpoint, and where the headers are.
      const env = {
        // A tile function's variables (composing touches none of these resources).
        [ENV.platform]: 'aws-lambda',
        [ENV.claimsTable]: 'claims',
        [ENV.sourceBucket]: 'sources',
        [ENV.outputBucket]: 'outputs',
        [ENV.tileQueue]: `${e.moto}/000000000000/tiles`,
        [ENV.functionTimeoutSeconds]: '900',
        AWS_LAMBDA_FUNCTION_NAME: 'tessera-tile-otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        [ENV.otelHeadersSecret]: created.ARN as string,
        [ENV.otelHeadersSecretVersion]: created.VersionId as string,
      };
      // The SDK's exporters read their endpoint from process.env, as in a deployed function.
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
      const rt = composeAws(env, { clients: { secretsManager: secrets }, telemetry: new JsonTelemetry(), owner: 'worker-a' });
      sdk = rt.otel;
      expect(sdk).toBeDefined();
      // A span and a count, exported as the tile handler exports them: by flushing.
      await inSpan(SPAN.delivery, {}, async () => rt.backend.telemetry.count('written'));
      await sdk?.flush();
      expect(exportedSpans(receiver.requests).map((x) => [x.service, x.name])).toEqual([['tessera-tile-otlp', SPAN.delivery]]);
      expect(exportedMetricNames(receiver.requests)).toContain('tessera.written');
      for (const r of receiver.requests)
        expect({ path: r.path, key: r.headers['x-api-key'], team: r.headers['x-team'] }).toEqual({
          path: r.path,
          key: 'k=1',
          team: 'tiles',
        });
      // Nothing of the headers in the environment the function was given.
      expect(JSON.stringify(env)).not.toContain('k%3D1');
    } finally {
      delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
      // Shut down while the receiver still answers: its last export would otherwise retry a refused connection for seconds.
      await sdk?.shutdown();
      sdk = undefined;
      await receiver.close();
    }
  });
});
