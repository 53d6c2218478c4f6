import { describe, expect, it } from 'vitest';
import { parseStackOutputs } from '../../../shared/app/verify/stack-outputs.js';
import {
  backfillScenarioName,
  formatMatrix,
  LIVE_SCENARIOS,
  NOT_RUN_LIVE,
  type VerifyReport,
  verifyPassed,
} from '../../../shared/app/verify/verify-stack.js';
import { BACKFILL_POLICIES } from '../../../shared/domain/backfill-policy.js';

const report = (stack: string, cloud: string, failing?: string): VerifyReport => ({
  stack,
  cloud,
  smoke: { pass: true, detail: 'ok' },
  replay: { pass: failing !== 'replay', detail: failing === 'replay' ? 'tiles/x/0_0.tif changed' : 'ok' },
  parity: LIVE_SCENARIOS.map((s) => ({ scenario: s.name, pass: true, detail: 'ok' })),
  cleanup:
    failing === 'cleanup'
      ? {
          pass: false,
          detail: 'left: tiles/x/0_0.tif: now at "b", not the "a" verify read',
          objects: 3,
          claimRows: 1,
          deadLetters: 0,
          left: ['x'],
          faults: [],
        }
      : {
          pass: true,
          detail: 'deleted 3 objects, 1 claim rows, 1 dead letters',
          objects: 3,
          claimRows: 1,
          deadLetters: 1,
          left: [],
          faults: [],
        },
  seconds: 1,
});

describe('tessera verify matrix', () => {
  it('prints one column per stack, a row per check, the failures with their detail, and what was not run live', () => {
    const text = formatMatrix([report('prod-eu', 'aws'), report('prod-weu', 'azure', 'replay')]);
    const lines = text.split('\n');
    expect(lines[0]).toMatch(/^scenario\s+prod-eu \(aws\)\s+prod-weu \(azure\)$/);
    expect(lines[1]).toMatch(/^smoke\s+ok\s+ok$/);
    expect(lines[2]).toMatch(/^replay \(tile message, scene event\)\s+ok\s+FAIL$/);
    expect(lines.slice(3, 3 + LIVE_SCENARIOS.length).every((l) => /\sok\s+ok$/.test(l))).toBe(true);
    expect(text).toContain('prod-weu: replay: tiles/x/0_0.tif changed');
    for (const n of NOT_RUN_LIVE) expect(text).toContain(n);
    expect(lines[3 + LIVE_SCENARIOS.length]).toMatch(/^cleanup \(conditional deletes\)\s+ok\s+ok$/);
    expect(text).toContain('prod-eu: deleted 3 objects, 1 claim rows, 1 dead letters');
  });

  it('has a row for each backfill policy and a GCP column like any other', () => {
    for (const policy of BACKFILL_POLICIES) expect(LIVE_SCENARIOS.map((s) => s.name)).toContain(backfillScenarioName(policy));
    const text = formatMatrix([report('a', 'aws'), report('g', 'gcp', 'cleanup'), report('z', 'azure')]);
    expect(text.split('\n')[0]).toMatch(/^scenario\s+a \(aws\)\s+g \(gcp\)\s+z \(azure\)$/);
    expect(text).toMatch(/^cleanup \(conditional deletes\)\s+ok\s+FAIL\s+ok$/m);
    expect(verifyPassed(report('g', 'gcp', 'cleanup'))).toBe(false);
  });

  it('reads the outputs of a GCP stack, and refuses one without its topics', () => {
    const gcp = {
      cloud: 'gcp',
      region: 'europe-west1',
      platform: 'gcf2-event',
      project: 'p',
      leaseSeconds: 840,
      functionTimeoutSeconds: 540,
      sourcePrefix: 'scenes/',
      sourceBucket: 's',
      outputBucket: 'o',
      claimsCollection: 'claims',
      firestoreDatabase: 'tessera-prod',
      tileTopic: 'projects/p/topics/tiles',
      deadLetterTopic: 'projects/p/topics/dead',
    };
    expect(parseStackOutputs(JSON.stringify(gcp), 'prod')).toMatchObject({
      cloud: 'gcp',
      firestoreDatabase: 'tessera-prod',
      emulator: undefined,
    });
    const { deadLetterTopic: _, ...noDead } = gcp;
    expect(() => parseStackOutputs(JSON.stringify(noDead), 'prod')).toThrow(/has no deadLetterTopic/);
    expect(() => parseStackOutputs(JSON.stringify({ ...gcp, emulator: { gcs: 'x' } }), 'prod')).toThrow(
      /emulator must be \{ gcs, firestore, pubsub \}/,
    );
  });

  it('passes a stack only when smoke, replay and every scenario passed', () => {
    expect(verifyPassed(report('a', 'aws'))).toBe(true);
    expect(verifyPassed(report('a', 'aws', 'replay'))).toBe(false);
    const r = report('a', 'aws');
    expect(verifyPassed({ ...r, parity: [...r.parity.slice(1), { scenario: 'x', pass: false, detail: 'no' }] })).toBe(false);
  });
});
