import { describe, expect, it } from 'vitest';
import { composeGcp, FIRESTORE_SETTINGS, type GcpTrigger } from '../../../functions/gcp/compose.js';
import { LeaseConfigError } from '../../../shared/domain/errors.js';
import { ENV } from '../../../shared/domain/runtime-config.js';

const env = (platform: string, timeout?: number): Record<string, string> => ({
  [ENV.platform]: platform,
  [ENV.claimsTable]: 'tessera-claims',
  [ENV.sourceBucket]: 'scenes',
  [ENV.outputBucket]: 'tiles',
  [ENV.tileQueue]: 'tessera-tiles',
  [ENV.gcpProject]: 'tessera-unit',
  ...(timeout === undefined ? {} : { [ENV.functionTimeoutSeconds]: String(timeout) }),
});

describe('composeGcp', () => {
  it.each<[GcpTrigger, string, number, number]>([
    ['event', 'gcf2-event', 540, 840_000],
    ['http', 'gcf2-http', 3600, 3_900_000],
    ['event', 'gcf1', 540, 840_000],
  ])('gives a %s function on %s (timeout %i s) a lease of %i ms', (trigger, platform, timeout, leaseMs) => {
    const rt = composeGcp(env(platform, timeout), { trigger, owner: 'unit' });
    expect(rt.settings.leaseMs).toBe(leaseMs);
    expect(rt.settings.leaseMs).toBeGreaterThan(timeout * 1000);
  });

  it('refuses the 65-minute HTTP lease for an event-driven function, naming the platform to set', () => {
    expect(() => composeGcp(env('gcf2-http', 3600), { trigger: 'event' })).toThrow(LeaseConfigError);
    expect(() => composeGcp(env('gcf2-http', 3600), { trigger: 'event' })).toThrow(
      /TESSERA_PLATFORM=gcf2-event.*540 s ceiling.*65-minute lease fits HTTP functions only/,
    );
  });

  it('refuses an event-driven timeout above the 540 s ceiling', () => {
    expect(() => composeGcp(env('gcf2-event', 900), { trigger: 'event' })).toThrow(
      /exceeds the platform ceiling of 540 s.*HTTP-triggered function/,
    );
  });

  it('refuses a non-GCP platform', () => {
    expect(() => composeGcp(env('aws-lambda', 900), { trigger: 'event' })).toThrow(/does not fit this event-driven function/);
  });

  it('wires no dead-letter topic unless one is configured', () => {
    expect(composeGcp(env('gcf2-event'), { trigger: 'event' }).deadLetters).toBeUndefined();
    const rt = composeGcp({ ...env('gcf2-event'), [ENV.deadLetterQueue]: 'tessera-tiles-dead' }, { trigger: 'event' });
    expect(rt.deadLetters?.name).toBe('projects/tessera-unit/topics/tessera-tiles-dead');
  });

  it('talks to Firestore over gRPC with retries bounded well under the event-driven ceiling', () => {
    expect(FIRESTORE_SETTINGS.preferRest).toBe(false);
    const retry = FIRESTORE_SETTINGS.clientConfig.interfaces['google.firestore.v1.Firestore'].retry_params.default;
    expect(retry.total_timeout_millis).toBeLessThan(540_000 / 4);
  });
});
