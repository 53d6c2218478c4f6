import { describe, expect, it } from 'vitest';
import { EmulatorUnavailableError } from './backends.js';
import { judge, parityBackends, parityScenarios, renderMarkdown, renderMatrix, reportJson, type ScenarioResult } from './matrix.js';
import { diffRecords, type OutcomeRecord } from './outcome.js';
import type { Scenario } from './scenarios.js';

const expected: OutcomeRecord = {
  calls: { 'ack:written': 4 },
  outputs: ['A/tiles/0_0.tif'],
  versionsUnchanged: true,
  counters: { written: 4 },
  alarms: {},
  manifestCount: 4,
  claims: [{ job: 'A/0_0', state: 'COMMITTED', owner: 'A/0_0#m1@w1' }],
  facts: { keys: ['a', 'b'] },
};

const scenario = (limitations?: Scenario['limitations']): Scenario => ({
  id: '99',
  title: 'a scenario for the judge',
  run: async () => expected,
  expected,
  ...(limitations ? { limitations } : {}),
});

describe('diffRecords', () => {
  it('names every differing fact by its path, including facts present on one side only', () => {
    const actual = { ...expected, counters: { written: 5, poison: 1 }, claims: [{ ...expected.claims[0], owner: 'A/0_0#m2@w1' }] };
    expect(diffRecords(expected, actual)).toEqual([
      'claims[0].owner: expected "A/0_0#m1@w1", got "A/0_0#m2@w1"',
      'counters.poison: expected (absent), got 1',
      'counters.written: expected 4, got 5',
    ]);
  });

  it('compares arrays in order and reports a length change as one difference', () => {
    expect(diffRecords({ a: [1, 2] }, { a: [2, 1] })).toEqual(['a[0]: expected 1, got 2', 'a[1]: expected 2, got 1']);
    expect(diffRecords({ a: [1] }, { a: [1, 1] })).toEqual(['a: expected [1], got [1,1]']);
  });

  it('finds nothing between equal records', () => {
    expect(diffRecords(expected, structuredClone(expected))).toEqual([]);
  });
});

describe('judge', () => {
  it('passes a record equal to the expected one', () => {
    expect(judge(scenario(), 'aws', { record: expected })).toMatchObject({ status: 'pass' });
  });

  it('fails a record that differs, listing the differing facts', () => {
    const cell = judge(scenario(), 'gcp', { record: { ...expected, manifestCount: 3 } });
    expect(cell).toEqual({ status: 'fail', diff: ['manifestCount: expected 4, got 3'], record: { ...expected, manifestCount: 3 } });
  });

  it('fails a cell whose run threw, with the error', () => {
    expect(judge(scenario(), 'azure', { error: new TypeError('boom') })).toEqual({ status: 'fail', diff: ['threw TypeError: boom'] });
  });

  it('marks a missing emulator as an undeclared limitation, never a pass', () => {
    expect(judge(scenario(), 'gcp', { error: new EmulatorUnavailableError('no Pub/Sub emulator') })).toEqual({
      status: 'limitation',
      reason: 'no Pub/Sub emulator',
      declared: false,
      diff: [],
    });
  });

  it('marks a declared limitation when only the declared facts differ', () => {
    const s = scenario({ gcp: { reason: 'the emulator X', differs: ['counters'] } });
    expect(judge(s, 'gcp', { record: { ...expected, counters: { written: 5 } } })).toEqual({
      status: 'limitation',
      reason: 'the emulator X',
      declared: true,
      diff: ['counters.written: expected 4, got 5'],
    });
  });

  it('fails a declared limitation when another fact differs too', () => {
    const s = scenario({ gcp: { reason: 'the emulator X', differs: ['counters'] } });
    const cell = judge(s, 'gcp', { record: { ...expected, counters: { written: 5 }, outputs: [] } });
    expect(cell).toMatchObject({ status: 'fail', diff: ['outputs: expected ["A/tiles/0_0.tif"], got []'] });
  });

  it('fails a declared limitation that no longer shows, so the table gets revisited', () => {
    const s = scenario({ azure: { reason: 'the emulator Y', differs: ['alarms'] } });
    const cell = judge(s, 'azure', { record: expected });
    expect(cell.status).toBe('fail');
    if (cell.status === 'fail') expect(cell.diff[0]).toMatch(/declared emulator limitation no longer shows \(the emulator Y\)/);
  });
});

describe('the matrix reports', () => {
  const s = scenario();
  const results: ScenarioResult[] = [
    {
      scenario: s,
      cells: {
        local: { status: 'pass', record: expected },
        aws: { status: 'fail', diff: ['counters.written: expected 4, got 5'] },
        gcp: { status: 'limitation', reason: 'no Pub/Sub emulator', declared: false, diff: [] },
        azure: { status: 'pass', record: expected },
      },
    },
  ];

  it('print one mark per cell and the reason of every cell that is not a pass', () => {
    const text = renderMatrix(results);
    expect(text).toMatch(/99 a scenario for the judge\s+✓\s+✗\s+⚠\s+✓/);
    expect(text).toContain('✗ 99 aws: counters.written: expected 4, got 5');
    expect(text).toContain('⚠ 99 gcp: no Pub/Sub emulator');
    expect(text).toContain('1 scenarios x 4 backends: 2 ✓ pass, 1 ✗ fail, 1 ⚠ emulator limitation');
    expect(renderMarkdown(results, new Date(0))).toContain('| 99 | a scenario for the judge | ✓ | ✗ | ⚠ | ✓ |');
  });

  it('write pass, diff and limitation per backend into the JSON report', () => {
    expect(reportJson(results)).toEqual([
      {
        scenario: '99',
        title: 'a scenario for the judge',
        backends: {
          local: { pass: true },
          aws: { pass: false, diff: ['counters.written: expected 4, got 5'] },
          gcp: { pass: false, limitation: 'no Pub/Sub emulator', diff: [] },
          azure: { pass: true },
        },
      },
    ]);
  });
});

describe('parityBackends (TESSERA_PARITY_BACKENDS)', () => {
  it('is all four backends when unset or empty, else the named ones in matrix order', () => {
    expect(parityBackends(undefined)).toEqual(['local', 'aws', 'gcp', 'azure']);
    expect(parityBackends(' ')).toEqual(['local', 'aws', 'gcp', 'azure']);
    expect(parityBackends('azure')).toEqual(['azure']);
    expect(parityBackends('azure, local,azure')).toEqual(['local', 'azure']);
  });

  it('refuses an unknown name instead of running nothing', () => {
    expect(() => parityBackends('azure,lambda')).toThrow(
      /unknown backend\(s\) lambda; use a comma-separated subset of local, aws, gcp, azure/,
    );
  });
});

describe('parityScenarios (TESSERA_PARITY_SCENARIOS)', () => {
  const table = ['01', '50', '51'].map((id) => ({ id }) as Scenario);
  it('is every scenario when unset or empty, else the named ones in table order', () => {
    expect(parityScenarios(table, undefined)).toBe(table);
    expect(parityScenarios(table, ' ')).toBe(table);
    expect(parityScenarios(table, '51, 01').map((s) => s.id)).toEqual(['01', '51']);
  });

  it('refuses an id that names no scenario instead of running nothing', () => {
    expect(() => parityScenarios(table, '51,5')).toThrow(/no scenario with id 5;/);
  });
});
