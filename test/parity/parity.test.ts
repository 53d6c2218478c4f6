import { describe, expect, inject, it } from 'vitest';
import { parityBackends, runScenario } from './matrix.js';
import { SCENARIOS } from './scenarios.js';

/** Four backends at once on two loaded cores: a generous bound per scenario. */
const SCENARIO_TIMEOUT_MS = 180_000;

/** All four unless TESSERA_PARITY_BACKENDS names a subset (scripts/test.mjs: the Azure column again on Azure's Node). */
const BACKENDS = parityBackends(process.env.TESSERA_PARITY_BACKENDS);

describe(`cross-cloud parity: every scenario has the same observable outcome on ${BACKENDS.join(', ')}`, () => {
  for (const scenario of SCENARIOS) {
    it(
      `${scenario.id} ${scenario.title}`,
      async () => {
        const { cells } = await runScenario(scenario, { endpoints: inject('emulators') }, BACKENDS);
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
});
