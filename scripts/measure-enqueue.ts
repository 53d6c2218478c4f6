/**
 * `node scripts/node.mjs tsx scripts/measure-enqueue.ts [local aws gcp azure] [--messages N]`
 *
 * Measures how fast one sender puts tile jobs on each backend's queue, the
 * way fan-out does (shared/app/fan-out.ts: `sendBatch` in slices of 500,
 * each adapter batching as its service allows: SQS 10 per call, Pub/Sub
 * publish batching, one Storage Queue call per message), against the
 * emulators the tests use. Prints messages per second per queue; the figures
 * feed ENQUEUE_MESSAGES_PER_SEC in shared/app/fan-out.ts, which derives the
 * chunk size and the grid limit of each platform (docs/architecture.md).
 *
 * Bodies are real tile-job messages of the parity scene (about 1 KB each).
 */
import { makeTileJob, toJobMessage } from '../shared/app/tile-job.js';
import { sceneKey } from '../shared/domain/job-key.js';
import { tileGrid, windows } from '../shared/domain/tile-grid.js';
import { type BackendName, createParityBackend } from '../test/parity/backends.js';
import { PARITY_PARAMS } from '../test/parity/harness.js';
import type { Started } from '../test/support/emulators/process.js';
import type { EmulatorEndpoints } from '../test/support/emulators/types.js';

const SLICE = 500;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const at = args.indexOf('--messages');
  const count = at >= 0 ? Number(args[at + 1]) : 2000;
  const names = (args.filter((a, i) => !a.startsWith('--') && i !== at + 1) as BackendName[]).filter(Boolean);
  const backends: BackendName[] = names.length > 0 ? names : ['local', 'aws', 'gcp', 'azure'];
  const stops: Started[] = [];
  const endpoints: Record<string, unknown> = {};
  for (const cloud of backends.filter((b) => b !== 'local')) {
    const started = await import(`../test/support/emulators/${cloud}.js`).then(
      (m: { start(): Promise<{ endpoints: unknown; stops: Started[] }> }) => m.start(),
    );
    endpoints[cloud] = started.endpoints;
    stops.push(...started.stops);
  }
  const source = { bucket: 'tessera-measure', key: 'incoming/scene.tif', versionToken: '"measure-1"' };
  const side = Math.ceil(Math.sqrt(count)) * 32;
  const grid = tileGrid(side, side, 32);
  const scene = sceneKey(source, PARITY_PARAMS);
  const messages = [...windows(grid)].slice(0, count).map((w) => toJobMessage(makeTileJob(scene, source, PARITY_PARAMS, grid, w)));
  const bytes = messages.reduce((n, m) => n + m.body.length, 0) / messages.length;
  try {
    for (const name of backends) {
      const pb = await createParityBackend(name, endpoints as EmulatorEndpoints, 'measure');
      try {
        const t0 = performance.now();
        for (let i = 0; i < messages.length; i += SLICE) await pb.backend.queue.sendBatch(messages.slice(i, i + SLICE));
        const seconds = (performance.now() - t0) / 1000;
        process.stdout.write(
          `${name.padEnd(6)} ${pb.backend.queue.name.padEnd(14)} ${messages.length} messages of ${Math.round(bytes)} B in ${seconds.toFixed(2)} s: ` +
            `${Math.round(messages.length / seconds)} messages/s\n`,
        );
      } finally {
        await pb.close();
      }
    }
  } finally {
    for (const s of stops.reverse()) await s.stop();
  }
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(2);
});
