import { describe, expect, it } from 'vitest';
import { composeGcp, FIRESTORE_SETTINGS, type GcpFunctionRole } from '../../../functions/gcp/compose.js';
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
  it.each<[GcpFunctionRole, string, number, number]>([
    ['scene', 'gcf2-event', 540, 840_000],
    ['tile', 'gcf2-event', 540, 840_000],
    ['tile', 'gcf2-http', 3600, 3_900_000],
    ['mosaic', 'gcf2-http', 3600, 3_900_000],
    ['tile', 'gcf1', 540, 840_000],
  ])('gives the %s function on %s (timeout %i s) a lease of %i ms', (role, platform, timeout, leaseMs) => {
    const rt = composeGcp(env(platform, timeout), { role, owner: 'unit' });
    expect(rt.settings.leaseMs).toBe(leaseMs);
    expect(rt.settings.leaseMs).toBeGreaterThan(timeout * 1000);
  });

  it('refuses the 65-minute HTTP lease for the Eventarc-triggered scene function, naming the platform to set', () => {
    expect(() => composeGcp(env('gcf2-http', 3600), { role: 'scene' })).toThrow(LeaseConfigError);
    expect(() => composeGcp(env('gcf2-http', 3600), { role: 'scene' })).toThrow(
      /TESSERA_PLATFORM=gcf2-event.*540 s ceiling.*65-minute lease fits HTTP functions only/,
    );
  });

  it("opens the stack's own Firestore database named by TESSERA_FIRESTORE_DATABASE, and (default) without it", () => {
    const named = composeGcp(
      { ...env('gcf2-event', 540), [ENV.firestoreDatabase]: 'tessera-gcp-europe-west1' },
      { role: 'tile', owner: 'unit' },
    );
    expect(named.clients.firestore.databaseId).toBe('tessera-gcp-europe-west1');
    expect(composeGcp(env('gcf2-event', 540), { role: 'tile', owner: 'unit' }).clients.firestore.databaseId).toBe('(default)');
  });

  it('refuses an event-driven platform for the HTTP mosaic function', () => {
    expect(() => composeGcp(env('gcf2-event', 540), { role: 'mosaic' })).toThrow(
      /mosaic function, which is HTTP: set TESSERA_PLATFORM=gcf2-http/,
    );
  });

  it('refuses an event-driven timeout above the 540 s ceiling', () => {
    expect(() => composeGcp(env('gcf2-event', 900), { role: 'tile' })).toThrow(
      /exceeds the platform ceiling of 540 s.*HTTP-triggered function/,
    );
  });

  it('refuses a non-GCP platform', () => {
    expect(() => composeGcp(env('aws-lambda', 900), { role: 'tile' })).toThrow(/does not fit the tile function/);
  });

  it('wires no dead-letter topic unless one is configured', () => {
    expect(composeGcp(env('gcf2-event'), { role: 'tile' }).deadLetters).toBeUndefined();
    const rt = composeGcp({ ...env('gcf2-event'), [ENV.deadLetterQueue]: 'tessera-tiles-dead' }, { role: 'tile' });
    expect(rt.deadLetters?.name).toBe('projects/tessera-unit/topics/tessera-tiles-dead');
  });

  it('talks to Firestore over gRPC with retries bounded well under the event-driven ceiling', () => {
    expect(FIRESTORE_SETTINGS.preferRest).toBe(false);
    const retry = FIRESTORE_SETTINGS.clientConfig.interfaces['google.firestore.v1.Firestore'].retry_params.default;
    expect(retry.total_timeout_millis).toBeLessThan(540_000 / 4);
  });
});
