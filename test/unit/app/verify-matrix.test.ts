import { describe, expect, it } from 'vitest';
import { formatMatrix, LIVE_SCENARIOS, NOT_RUN_LIVE, type VerifyReport, verifyPassed } from '../../../shared/app/verify/verify-stack.js';

const report = (stack: string, cloud: string, failing?: string): VerifyReport => ({
  stack,
  cloud,
  smoke: { pass: true, detail: 'ok' },
  replay: { pass: failing !== 'replay', detail: failing === 'replay' ? 'tiles/x/0_0.tif changed' : 'ok' },
  parity: LIVE_SCENARIOS.map((s) => ({ scenario: s.name, pass: true, detail: 'ok' })),
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
  });

  it('passes a stack only when smoke, replay and every scenario passed', () => {
    expect(verifyPassed(report('a', 'aws'))).toBe(true);
    expect(verifyPassed(report('a', 'aws', 'replay'))).toBe(false);
    const r = report('a', 'aws');
    expect(verifyPassed({ ...r, parity: [...r.parity.slice(1), { scenario: 'x', pass: false, detail: 'no' }] })).toBe(false);
  });
});
