import { describe, expect, it } from 'vitest';
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
