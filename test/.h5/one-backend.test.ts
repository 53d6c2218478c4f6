// H5 scratch: run chosen parity scenarios on chosen backends (TESSERA_H5_BACKENDS, TESSERA_H5_IDS). Not part of the suite.
import { expect, inject, it } from 'vitest';
import type { BackendName } from '../parity/backends.js';
import { runScenario } from '../parity/matrix.js';
import { SCENARIOS } from '../parity/scenarios.js';

const backends = (process.env.TESSERA_H5_BACKENDS ?? 'local').split(',') as BackendName[];
const ids = (process.env.TESSERA_H5_IDS ?? '24,25,26,27').split(',');
for (const s of SCENARIOS.filter((x) => ids.includes(x.id))) {
  it(`${s.id} on ${backends.join(',')}`, async () => {
    const { cells } = await runScenario(s, { endpoints: inject('emulators') }, backends);
    for (const b of backends) {
      const c = cells[b];
      if (c.status !== 'pass') console.log(s.id, b, JSON.stringify(c, null, 1).slice(0, 6000));
      expect(c.status, `${s.id} ${b}`).toBe('pass');
    }
  }, 300_000);
}
