import { describe, expect, it } from 'vitest';
import { CEILINGS, resolveLease } from '../../../shared/domain/ceilings.js';
import { LeaseConfigError } from '../../../shared/domain/errors.js';

describe('resolveLease', () => {
  it.each([
    ['aws-lambda', undefined, 900, 1200],
    ['gcf2-event', undefined, 540, 840],
    ['gcf2-http', undefined, 3600, 3900],
    ['azure-consumption', undefined, 600, 900],
    ['azure-flex', 1800, 1800, 2100],
    ['azure-premium', 7200, 7200, 7500],
  ] as const)('%s with timeout %s defaults the lease above the ceiling', (platform, timeout, ceiling, lease) => {
    const r = resolveLease({ platform, functionTimeoutSec: timeout });
    expect(r.ceilingSec).toBe(ceiling);
    expect(r.leaseSec).toBe(lease);
    expect(r.leaseSec).toBeGreaterThan(r.ceilingSec);
  });

  it('every default lease is above its ceiling', () => {
    for (const spec of Object.values(CEILINGS)) {
      if (spec.ceilingSec !== undefined && spec.defaultLeaseSec !== undefined)
        expect(spec.defaultLeaseSec).toBeGreaterThan(spec.ceilingSec);
    }
  });

  it.each([
    [{ platform: 'aws-lambda', leaseSec: 900 }, /lease 900 s must be longer than the platform ceiling of 900 s.*at least 901 s/],
    [{ platform: 'aws-lambda', leaseSec: 600, functionTimeoutSec: 300 }, /must be longer than the platform ceiling of 900 s/],
    [{ platform: 'azure-consumption', functionTimeoutSec: 720 }, /exceeds the platform ceiling of 600 s.*Flex Consumption/],
    [{ platform: 'gcf2-event', functionTimeoutSec: 3600 }, /ceiling of 540 s.*HTTP-triggered/],
    [{ platform: 'azure-flex', functionTimeoutSec: 3600, leaseSec: 3600 }, /longer than the configured function timeout of 3600 s/],
    [
      { platform: 'aws-lambda', functionTimeoutSec: 900, visibilityTimeoutSec: 300 },
      /visibility timeout 300 s is below the function timeout of 900 s.*5400 s/,
    ],
    [{ platform: 'aws-lambda', leaseSec: 1200.5 }, /whole number/],
    [{ platform: 'mainframe' }, /unknown platform/],
  ])('refuses %j with a message that says what to change', (input, message) => {
    expect(() => resolveLease(input as never)).toThrow(LeaseConfigError);
    expect(() => resolveLease(input as never)).toThrow(message);
  });

  it('accepts a visibility timeout at or above the function timeout', () => {
    expect(resolveLease({ platform: 'aws-lambda', functionTimeoutSec: 900, visibilityTimeoutSec: 5400 }).visibilityTimeoutSec).toBe(5400);
  });
});
