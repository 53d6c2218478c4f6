import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLocalBackend } from '../../../functions/local/compose.js';
import { withClockSkewMargin } from '../../../shared/app/clock-skew.js';
import { handleTileDelivery } from '../../../shared/app/deliveries.js';
import { fanOutScene } from '../../../shared/app/fan-out.js';
import {
  azureHostSchedule,
  LEASE_END_MARGIN_MS,
  localSchedule,
  ownLeaseAnswer,
  PUBSUB_DEFAULT_MAX_DELIVERY_ATTEMPTS,
  pubSubSchedule,
  SQS_MAX_VISIBILITY_MS,
  sqsSchedule,
} from '../../../shared/app/redelivery.js';
import { readSceneManifest } from '../../../shared/app/scene-manifest.js';
import { JsonTelemetry } from '../../../shared/app/telemetry.js';
import { makeTileJob, toJobMessage } from '../../../shared/app/tile-job.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { windowAt } from '../../../shared/domain/tile-grid.js';
import { FakeClock } from '../../support/fake-clock.js';
import { putSyntheticScene } from '../../support/local-scene.js';

const s = 1000;

describe('ownLeaseAnswer: a lease held by an earlier attempt of the same message', () => {
  describe('Pub/Sub push (backoff 10-600 s, not settable; dead-letter after maxDeliveryAttempts)', () => {
    it('takes over at the first redelivery: 3 more attempts at least 10 s apart cannot outlast an 840 s lease', () => {
      expect(ownLeaseAnswer(pubSubSchedule(PUBSUB_DEFAULT_MAX_DELIVERY_ATTEMPTS), 2, 830 * s)).toEqual({ kind: 'take-over' });
    });
    it('waits when the lease ends before the remaining attempts can (the next one claims it normally)', () => {
      expect(ownLeaseAnswer(pubSubSchedule(5), 2, 20 * s)).toEqual({ kind: 'wait' });
    });
    it('waits with 100 attempts allowed: 98 x 10 s reach past the lease', () => {
      expect(ownLeaseAnswer(pubSubSchedule(100), 2, 830 * s)).toEqual({ kind: 'wait' });
    });
    it('waits without a dead-letter policy (Pub/Sub retries until retention)', () => {
      expect(ownLeaseAnswer(pubSubSchedule(undefined), undefined, 830 * s)).toEqual({ kind: 'wait' });
    });
    it('reads an unknown attempt number as possibly the last one, and takes over', () => {
      expect(ownLeaseAnswer(pubSubSchedule(5), undefined, 830 * s)).toEqual({ kind: 'take-over' });
    });
  });

  describe('SQS + Lambda (the handler sets the visibility, up to 12 h; redrive after maxReceiveCount)', () => {
    it('waits out the lease with one visibility change while a later receive is allowed', () => {
      expect(ownLeaseAnswer(sqsSchedule(3), 2, 1_190 * s)).toEqual({ kind: 'wait', delayMs: 1_190 * s + LEASE_END_MARGIN_MS });
    });
    it('takes over on the last receive the redrive policy allows', () => {
      expect(ownLeaseAnswer(sqsSchedule(3), 3, 1_190 * s)).toEqual({ kind: 'take-over' });
    });
    it('never asks for more than SQS allows, and takes over when even that cannot reach the lease end', () => {
      expect(ownLeaseAnswer(sqsSchedule(3), 2, SQS_MAX_VISIBILITY_MS)).toEqual({ kind: 'take-over' });
      expect(ownLeaseAnswer(sqsSchedule(4), 2, SQS_MAX_VISIBILITY_MS)).toEqual({ kind: 'wait', delayMs: SQS_MAX_VISIBILITY_MS });
    });
  });

  describe('Storage Queue + Functions host (fixed visibilityTimeout, maxDequeueCount)', () => {
    const host = azureHostSchedule(5, 330 * s);
    it('waits while the host retries, 330 s apart, reach past the lease (what compose.ts checks at start)', () => {
      expect(ownLeaseAnswer(host, 2, 300 * s)).toEqual({ kind: 'wait' });
    });
    it('takes over when the remaining retries end before the lease, and always on the last dequeue', () => {
      expect(ownLeaseAnswer(host, 4, 400 * s)).toEqual({ kind: 'take-over' });
      expect(ownLeaseAnswer(host, 5, 1 * s)).toEqual({ kind: 'take-over' });
    });
  });

  describe('the local SQLite queue (the pool sets the delay; dead-letter after maxReceiveCount)', () => {
    it('waits out the lease, then takes over on the last receive', () => {
      expect(ownLeaseAnswer(localSchedule(3), 1, 5 * s)).toEqual({ kind: 'wait', delayMs: 5 * s + LEASE_END_MARGIN_MS });
      expect(ownLeaseAnswer(localSchedule(3), 3, 5 * s)).toEqual({ kind: 'take-over' });
    });
  });

  it('a lease already over needs only the margin', () => {
    expect(ownLeaseAnswer(sqsSchedule(3), 1, -5 * s)).toEqual({ kind: 'wait', delayMs: LEASE_END_MARGIN_MS });
  });
});

describe('handleTileDelivery with a transport schedule, on the local backend', () => {
  const LEASE = 60_000;
  async function crashedAfterClaim(marginMs: number) {
    const clock = new FakeClock();
    const telemetry = new JsonTelemetry(() => {});
    const local = createLocalBackend(mkdtempSync(join(tmpdir(), 'tessera-redelivery-')), { clock, telemetry });
    const b = { ...local, claims: withClockSkewMargin(local.claims, marginMs) };
    const source = await putSyntheticScene(b.sources, 'local-sources', 'scenes/s.tif', { width: 64, height: 48 });
    const params = { ...DEFAULT_PARAMS, tile_px: 32 };
    const fan = await fanOutScene(b, { source, params });
    const manifest = await readSceneManifest(b.outputs, fan.sceneKey);
    const job = makeTileJob(fan.sceneKey, source, params, manifest.grid, windowAt(manifest.grid, 0, 0));
    const settings = (owner: string) => ({ owner, leaseMs: LEASE, retentionMs: 3_600_000 });
    const now = clock.now();
    await b.claims.claim({ jobId: job.jobKey, owner: 'msg-1@dead', now, leaseUntil: now + LEASE, expiresAt: now + 3_600_000 });
    return { b, clock, telemetry, job, settings, close: () => local.close() };
  }

  it('takes a live lease of its own message over when the transport would dead-letter first, and writes under that owner', async () => {
    const { b, job, settings, telemetry, close } = await crashedAfterClaim(0);
    const v = await handleTileDelivery(b, settings('w2'), {
      body: toJobMessage(job).body,
      deliveryId: 'msg-1',
      receiveCount: 2,
      schedule: pubSubSchedule(5),
    });
    expect(v).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'msg-1@dead' });
    expect(telemetry.counters()).toMatchObject({ 'lease-taken-over': 1, written: 1 });
    close();
  });

  it('takes over a lease that lapsed but is still held for the clock-skew margin, never acks it', async () => {
    const { b, clock, job, settings, close } = await crashedAfterClaim(30_000);
    clock.advance(LEASE + 10_000); // lapsed 10 s ago, inside the 30 s margin: the claim still answers `held`
    const v = await handleTileDelivery(b, settings('w5'), {
      body: toJobMessage(job).body,
      deliveryId: 'msg-1',
      receiveCount: 5,
      schedule: pubSubSchedule(5),
    });
    expect(v).toMatchObject({ kind: 'ack', outcome: { kind: 'written' } });
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'COMMITTED', owner: 'msg-1@dead' });
    close();
  });

  it('waits, with the delay a settable transport allows, while a later delivery comes after the lease', async () => {
    const { b, job, settings, close } = await crashedAfterClaim(0);
    const v = await handleTileDelivery(b, settings('w2'), {
      body: toJobMessage(job).body,
      deliveryId: 'msg-1',
      receiveCount: 2,
      schedule: localSchedule(3),
    });
    expect(v).toMatchObject({ kind: 'retry', delayMs: LEASE + LEASE_END_MARGIN_MS });
    expect(await b.claims.get(job.jobKey)).toMatchObject({ state: 'CLAIMED', owner: 'msg-1@dead' });
    close();
  });
});
