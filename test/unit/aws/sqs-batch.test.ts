import { describe, expect, it } from 'vitest';
import { outOfTime, queueUrlOf, requeueDelaySeconds } from '../../../functions/aws/handlers/sqs-batch.js';

describe('requeueDelaySeconds', () => {
  const retry = (delayMs?: number) => ({ kind: 'retry' as const, error: new Error('x'), ...(delayMs === undefined ? {} : { delayMs }) });

  it.each([
    [1, 10],
    [2, 20],
    [3, 40],
    [7, 640],
    [8, 900],
    [50, 900],
  ])('backs a retry off exponentially: receive %i waits %i s', (receiveCount, seconds) => {
    expect(requeueDelaySeconds(retry(), receiveCount)).toBe(seconds);
  });

  it('waits out the lease an earlier attempt holds, rounded up to whole seconds', () => {
    expect(requeueDelaySeconds(retry(1_200_001), 1)).toBe(1201);
  });

  it('makes poison visible at once so it reaches the dead-letter queue without waiting', () => {
    expect(requeueDelaySeconds({ kind: 'poison', error: new Error('bad') }, 1)).toBe(0);
  });
});

describe('queueUrlOf', () => {
  it('builds the regional queue URL from an event source ARN', () => {
    expect(queueUrlOf('arn:aws:sqs:eu-west-1:123456789012:tessera-tiles')).toBe(
      'https://sqs.eu-west-1.amazonaws.com/123456789012/tessera-tiles',
    );
    expect(queueUrlOf('arn:aws-cn:sqs:cn-north-1:123456789012:q')).toBe('https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q');
  });

  it('refuses an ARN that is not an SQS queue', () => {
    expect(() => queueUrlOf('arn:aws:sns:eu-west-1:123456789012:topic')).toThrow(/not an SQS queue ARN/);
  });
});

describe('outOfTime', () => {
  it('is true only when a Lambda context has less than the margin left', () => {
    expect(outOfTime(undefined)).toBe(false);
    expect(outOfTime({ getRemainingTimeInMillis: () => 29_999 })).toBe(true);
    expect(outOfTime({ getRemainingTimeInMillis: () => 30_000 })).toBe(false);
  });
});
