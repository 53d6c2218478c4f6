import { describe, expect, it } from 'vitest';
import type { Backend } from '../../../shared/app/backend.js';
import {
  ENQUEUE_MESSAGES_PER_SEC,
  FAN_OUT_TIME_SHARE,
  fanOutPlan,
  fanOutScene,
  handleFanOutChunk,
  isFanOutChunkBody,
  parseFanOutChunk,
  toChunkMessage,
} from '../../../shared/app/fan-out.js';
import { handleQueueDelivery } from '../../../shared/app/queue-delivery.js';
import { indexHourOf, indexHourStart, readSceneManifest } from '../../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob, parseTileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { InvalidEventError, InvalidParamsError, SourceChangedError } from '../../../shared/domain/errors.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { tileGrid, windowAt } from '../../../shared/domain/tile-grid.js';
import type { ClaimStore } from '../../../shared/ports/claim-store.port.js';
import type { JobMessage, JobQueue } from '../../../shared/ports/job-queue.port.js';
import { FakeClock } from '../../support/fake-clock.js';
import { syntheticSceneBytes } from '../../support/local-scene.js';
import { MemoryObjectStore } from '../../support/memory-object-store.js';

class Capture implements JobQueue {
  readonly name = 'capture';
  readonly messages: JobMessage[] = [];
  async sendBatch(messages: readonly JobMessage[]): Promise<void> {
    this.messages.push(...messages);
  }
}

const PARAMS = { ...DEFAULT_PARAMS, version: 'lifecycle-1', tile_px: 32 };

async function backendWithScene() {
  const clock = new FakeClock();
  const queue = new Capture();
  const backend: Backend = {
    claims: undefined as unknown as ClaimStore, // fan-out and chunks never claim
    sources: new MemoryObjectStore(() => clock.now()),
    outputs: new MemoryObjectStore(() => clock.now()),
    queue,
    clock,
    telemetry: new JsonTelemetry(() => {}, { clock }),
  };
  const put = await backend.sources.putIfAbsent('in/s.tif', await syntheticSceneBytes({ width: 64, height: 48 }));
  if (put.kind !== 'written') throw new Error('setup');
  return { backend, queue, source: { bucket: 'b', key: 'in/s.tif', versionToken: put.version } };
}

describe('fanOutPlan: chunk size and grid limit from measured enqueue throughput and the function timeout', () => {
  it('sends at most rate x timeout x the time share per invocation, and squares it for the grid limit (at most MAX_WINDOWS)', () => {
    const lambda = fanOutPlan('aws-lambda', 900);
    expect(lambda.chunkWindows).toBe(Math.floor(ENQUEUE_MESSAGES_PER_SEC.aws * 900 * FAN_OUT_TIME_SHARE));
    expect(lambda).toEqual({ chunkWindows: 13_500, maxChunks: 13_500, maxWindows: 1_000_000 });
    // A Lambda left at 60 s fans out in smaller chunks, and a much shorter one caps the grid.
    expect(fanOutPlan('aws-lambda', 60).chunkWindows).toBe(900);
    expect(fanOutPlan('aws-lambda', 6)).toEqual({ chunkWindows: 90, maxChunks: 90, maxWindows: 8_100 });
    expect(fanOutPlan('azure-consumption', 600).chunkWindows).toBe(60_000);
    expect(fanOutPlan('gcf2-event', 540).chunkWindows).toBe(1_080_000);
  });

  it('refuses a plan that allows no message per invocation', () => {
    expect(() => fanOutPlan('aws-lambda', 900, { aws: 0, gcp: 1, azure: 1, local: 1 })).toThrow(InvalidParamsError);
  });
});

describe('fanOutScene: pinned, indexed, chunked', () => {
  it('pins the source version once and puts the pin in every tile job and in the manifest', async () => {
    const { backend, queue, source } = await backendWithScene();
    const r = await fanOutScene(backend, { source, params: PARAMS });
    expect(r).toMatchObject({ enqueued: 4, chunks: 0, manifest: 'written' });
    const manifest = await readSceneManifest(backend.outputs, r.sceneKey);
    expect(manifest.pin?.version).toBe(source.versionToken);
    for (const m of queue.messages) expect(parseTileJob(m.body).pin).toEqual(manifest.pin);
  });

  it('refuses, as SourceChangedError, an event whose version is no longer the stored one (nothing written)', async () => {
    const { backend, source } = await backendWithScene();
    await expect(fanOutScene(backend, { source: { ...source, versionToken: 'm999' }, params: PARAMS })).rejects.toBeInstanceOf(
      SourceChangedError,
    );
    const written: string[] = [];
    for await (const h of backend.outputs.list('')) written.push(h.key);
    expect(written).toEqual([]);
  });

  it('refuses a grid larger than the platform limit, naming tile_px', async () => {
    const { backend, source } = await backendWithScene();
    await expect(fanOutScene(backend, { source, params: PARAMS, maxWindows: 3 })).rejects.toThrow(/more than the 3 .* raise tile_px/);
  });

  it('sends chunk messages instead of tile jobs above chunkWindows; each chunk enqueues its windows once', async () => {
    const { backend, queue, source } = await backendWithScene();
    const r = await fanOutScene(backend, { source, params: PARAMS, chunkWindows: 3 });
    expect(r).toMatchObject({ enqueued: 0, chunks: 2 });
    const chunks = queue.messages.map((m) => parseFanOutChunk(m.body));
    expect(chunks.map((c) => [c.first, c.count])).toEqual([
      [0, 3],
      [3, 1],
    ]);
    queue.messages.length = 0;
    for (const c of chunks) expect(await handleFanOutChunk(backend, c)).toMatchObject({ kind: 'chunk-enqueued' });
    expect(queue.messages.map((m) => parseTileJob(m.body).window).map((w) => `${w.row}_${w.col}`)).toEqual(['0_0', '0_1', '1_0', '1_1']);
    // Redelivered: the markers make them no-ops; the scene event again: every chunk was sent, nothing to send.
    for (const c of chunks) expect(await handleFanOutChunk(backend, c)).toMatchObject({ kind: 'chunk-already-done', enqueued: 0 });
    expect(await fanOutScene(backend, { source, params: PARAMS, chunkWindows: 3 })).toMatchObject({
      chunks: 0,
      manifest: 'already-present',
    });
    expect(queue.messages).toHaveLength(4);
  });

  it('adds the scene to the pending index under the UTC hour of its fan-out', async () => {
    const { backend, source } = await backendWithScene();
    const r = await fanOutScene(backend, { source, params: PARAMS });
    const hour = indexHourOf(backend.clock.now());
    expect(hour).toBe('2026120100');
    expect(indexHourStart(hour)).toBe(Date.UTC(2026, 11, 1));
    expect(await backend.outputs.head(`index/scenes/${hour}/${r.sceneKey}`)).toBeDefined();
  });
});

describe('the tile queue carries two kinds of message', () => {
  it('tells a chunk from a tile job, and dispatches each to its own handler', async () => {
    const { backend, source } = await backendWithScene();
    const r = await fanOutScene(backend, { source, params: PARAMS });
    const grid = tileGrid(64, 48, 32);
    const tile = toJobMessage(makeTileJob(r.sceneKey, source, PARAMS, grid, windowAt(grid, 0, 0)));
    const chunk = toChunkMessage({ v: 1, kind: 'fan-out-chunk', sceneKey: r.sceneKey, first: 0, count: 4 });
    expect(isFanOutChunkBody(tile.body)).toBe(false);
    expect(isFanOutChunkBody(chunk.body)).toBe(true);
    const settings = { owner: 'w', leaseMs: 60_000, retentionMs: 1 };
    expect(await handleQueueDelivery(backend, settings, { body: chunk.body, deliveryId: 'd1' })).toMatchObject({
      kind: 'ack',
      outcome: { kind: 'chunk-enqueued', enqueued: 4 },
    });
  });

  it('settles a malformed chunk as poison at once, never as a retry', async () => {
    const { backend } = await backendWithScene();
    expect(() => parseFanOutChunk('{"v":1,"kind":"fan-out-chunk","sceneKey":"nope","first":0,"count":1}')).toThrow(InvalidEventError);
    const v = await handleQueueDelivery(
      backend,
      { owner: 'w', leaseMs: 60_000, retentionMs: 1 },
      { body: '{"v":1,"kind":"fan-out-chunk","sceneKey":"nope","first":0,"count":1}', deliveryId: 'd1' },
    );
    expect(v.kind).toBe('poison');
  });
});
