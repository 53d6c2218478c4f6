import { runScenario } from './test/parity/matrix.js';
import { SCENARIOS } from './test/parity/scenarios.js';
import type { BackendName } from './test/parity/backends.js';

const ids = (process.env.IDS ?? '28,29,30,31,32').split(',');
const backends = (process.env.BACKENDS ?? 'local').split(',') as BackendName[];
const stops: { stop(): Promise<void> }[] = [];
const endpoints: Record<string, unknown> = {};
for (const c of backends.filter((b) => b !== 'local')) {
  const m = await import(`./test/support/emulators/${c}.js`);
  const s = await m.start();
  endpoints[c] = s.endpoints;
  stops.push(...s.stops);
}
try {
  for (const sc of SCENARIOS.filter((s) => ids.includes(s.id))) {
    const t0 = Date.now();
    const r = await runScenario(sc, { endpoints: endpoints as never }, backends);
    for (const b of backends) {
      const c = r.cells[b];
      console.log(`${sc.id} ${b} ${c.status} (${Date.now() - t0} ms)`);
      if (c.status !== 'pass') console.log(JSON.stringify({ diff: (c as { diff?: unknown }).diff, reason: (c as { reason?: unknown }).reason, record: process.env.RECORD ? (c as { record?: unknown }).record : undefined }, null, 1));
    }
  }
} finally {
  for (const s of stops) await s.stop();
}
