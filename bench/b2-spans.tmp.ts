// TEMPORARY (helper B2): wall-clock spans of the timed tiles, per port method. Deleted before the report.
import { createLocalBackend, LOCAL_SOURCE_BUCKET } from '../functions/local/compose.js';
import { handleTileDelivery } from '../shared/app/deliveries.js';
import { toJobMessage } from '../shared/app/tile-job.js';
import { jobsFor, sceneSize, sourceRef } from './lib/jobs.js';
const input = JSON.parse(process.argv[2] as string);
const backend = createLocalBackend(input.dir);
const spans = new Map<string, { ms: number; n: number }>();
let on = false;
function wrap(name: string, o: any) {
  for (const k of Object.getOwnPropertyNames(Object.getPrototypeOf(o))) {
    if (k === 'constructor' || typeof o[k] !== 'function') continue;
    const f = o[k].bind(o);
    o[k] = (...a: unknown[]) => {
      const t = performance.now();
      const r = f(...a);
      const done = () => { if (!on) return; const s = spans.get(`${name}.${k}`) ?? { ms: 0, n: 0 }; s.ms += performance.now() - t; s.n++; spans.set(`${name}.${k}`, s); };
      if (r && typeof r.then === 'function') return r.finally(done);
      done();
      return r;
    };
  }
}
await backend.sources.importFile('scenes/bench.tif', input.scenePath);
const source = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, 'scenes/bench.tif');
const size = await sceneSize(backend.sources, 'scenes/bench.tif');
const jobs = jobsFor(source, input.params, size, input.windows);
await backend.queue.sendBatch(jobs.map(toJobMessage));
const settings = { owner: 'bench-worker', leaseMs: 600_000, retentionMs: 7 * 86_400_000 };
await backend.sources.importFile('scenes/warmup.tif', input.scenePath);
const ws = await sourceRef(backend.sources, LOCAL_SOURCE_BUCKET, 'scenes/warmup.tif');
const [warm] = jobsFor(ws, input.params, size, input.windows.slice(0, 1));
await handleTileDelivery(backend, settings, { body: toJobMessage(warm as never).body, deliveryId: 'warmup', receiveCount: 1 });
for (const [n, o] of Object.entries({ sources: backend.sources, outputs: backend.outputs, claims: backend.claims, queue: backend.queue, manifest: (backend as any).manifest })) if (o) wrap(n, o);
on = true;
const t0 = performance.now(); const c0 = process.cpuUsage();
let tiles = 0;
for (;;) {
  const [d] = await backend.queue.receive(1, 600_000);
  if (!d) break;
  const v = await handleTileDelivery(backend, settings, d);
  if (v.kind !== 'ack') throw new Error(JSON.stringify(v));
  await backend.queue.ack(d);
  tiles++;
}
const wall = (performance.now() - t0) / tiles; const cu = process.cpuUsage(c0);
console.log(`tiles ${tiles} wall/tile ${wall.toFixed(1)} cpu/tile ${((cu.user + cu.system) / 1000 / tiles).toFixed(1)} (user ${(cu.user/1000/tiles).toFixed(1)} sys ${(cu.system/1000/tiles).toFixed(1)})`);
for (const [k, s] of [...spans].sort((a, b) => b[1].ms - a[1].ms)) console.log(`${k.padEnd(28)} ${(s.ms / tiles).toFixed(2)} ms/tile  ${(s.n / tiles).toFixed(1)} calls/tile`);
backend.close();
