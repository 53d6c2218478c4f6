// TEMPORARY (issue 25 items 5-6 helper): prints every backend's cell for scenarios 95-98; deleted after use.
import { inject, it } from 'vitest';
import { IamRun } from '../support/iam/run.js';
import { PARITY_SOURCE_PREFIX } from './backends.js';
import { parityBackends, runScenario } from './matrix.js';
import { SCENARIOS } from './scenarios.js';

const IAM = new IamRun({ config: { 'tessera:sourcePrefix': PARITY_SOURCE_PREFIX } });
it('cells', async () => {
  for (const s of SCENARIOS.filter((x) => (process.env.CELLS ?? '95,96,97,98').split(',').includes(x.id))) {
    const t0 = Date.now();
    const { cells } = await runScenario(s, { endpoints: inject('emulators'), iam: IAM }, parityBackends('local,aws,gcp,azure'));
    for (const [b, c] of Object.entries(cells)) {
      const cell = c as { status: string; diff?: string[]; reason?: string };
      process.stderr.write(`CELL ${s.id} ${b} ${cell.status} ${cell.diff ? `${cell.diff.length} diffs` : ''} (${Date.now() - t0} ms)\n`);
      for (const d of cell.diff ?? []) process.stderr.write(`   ${d}\n`);
      if (cell.reason) process.stderr.write(`   ${cell.reason}\n`);
    }
  }
}, 600_000);
