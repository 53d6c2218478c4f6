import { afterAll, describe, expect, inject, it } from 'vitest';
import { IamRun } from '../support/iam/run.js';
import { PARITY_SOURCE_PREFIX } from './backends.js';
import { parityBackends, parityScenarios, runScenario } from './matrix.js';
import { SCENARIOS } from './scenarios.js';

/** Four backends at once on two loaded cores: a generous bound per scenario. */
const SCENARIO_TIMEOUT_MS = 180_000;

/** All four unless TESSERA_PARITY_BACKENDS names a subset (scripts/test.mjs: the Azure column again on Azure's Node). */
const BACKENDS = parityBackends(process.env.TESSERA_PARITY_BACKENDS);
/** Every scenario unless TESSERA_PARITY_SCENARIOS names some by id (`51,52`): a focused run while working on them. */
const RUN = parityScenarios(SCENARIOS, process.env.TESSERA_PARITY_SCENARIOS);
/** Every cloud cell's requests against its stack's grants (the program under mocks, for the parity scenes' source prefix). */
const IAM = new IamRun({ config: { 'tessera:sourcePrefix': PARITY_SOURCE_PREFIX } });

describe(`cross-cloud parity: every scenario has the same observable outcome on ${BACKENDS.join(', ')}`, () => {
  for (const scenario of RUN) {
    it(
      `${scenario.id} ${scenario.title}`,
      async () => {
        const { cells } = await runScenario(scenario, { endpoints: inject('emulators'), iam: IAM }, BACKENDS);
        for (const backend of BACKENDS) {
          const cell = cells[backend];
          const declared = scenario.limitations?.[backend];
          if (declared) {
            // A declared limitation must still show, exactly as declared; once it is gone the table must be revisited.
            expect(cell, `${backend}: ${declared.reason}`).toMatchObject({ status: 'limitation', declared: true });
            continue;
          }
          // A missing emulator is not a pass: CI runs every cell.
          expect(cell.status === 'limitation' ? cell.reason : undefined, `${backend} did not run`).toBeUndefined();
          expect(cell.status === 'fail' ? cell.diff : [], `${backend} differs from the expected outcome`).toEqual([]);
          if (cell.status === 'pass') expect(cell.record, backend).toEqual(scenario.expected);
        }
        // Identical to each other, not only each to the expectation.
        const records = BACKENDS.flatMap((b) => {
          const c = cells[b];
          return c.status === 'limitation' ? [] : [JSON.stringify(c.status === 'pass' ? c.record : (c.record ?? null))];
        });
        // (A run of one backend whose cell is a declared limitation has no record to compare.)
        expect(new Set(records).size).toBe(Math.min(records.length, 1));
      },
      SCENARIO_TIMEOUT_MS,
    );
  }

  // An IAM check over no requests proves nothing: every cloud column's functions must have been seen.
  it("the access recorder saw every cloud column's functions at work (the IAM check above was not vacuous)", () => {
    const totals = IAM.totals();
    for (const cloud of BACKENDS.filter((b) => b !== 'local')) {
      expect(totals[cloud]?.tally.requests ?? 0, `requests recorded for ${cloud}'s roles`).toBeGreaterThan(0);
    }
  });
});

afterAll(() => {
  for (const line of IAM.summary()) process.stderr.write(`[parity] iam ${line}\n`);
});
