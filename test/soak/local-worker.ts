/**
 * A local worker as an OS process, for the soak's crashes on the local
 * backend: it opens its own SQLite connections and filesystem store on the
 * data folder (argv[2]) and its own feature sink on the soak's PostGIS schema
 * (argv[3], a connection URL), takes one delivery at a time from stdin (JSON lines,
 * `WorkerOrder`), runs it through the trigger's code (handleQueueDelivery)
 * and, at the crash point it was given, says so on stdout and waits: the soak
 * then kills it with SIGKILL. Nothing after that point ever runs; whatever
 * the process wrote to SQLite or the filesystem before it is all that is left.
 *
 * stdout: JSON lines, `{"ready":true}` once open, `{"at":point}` at the crash
 * point, `{"log":line}` for each of its log lines and `{"landed":key}` for each
 * write the store applied (the soak's oracle reads them with its own).
 */
import { createInterface } from 'node:readline';
import { createLocalBackend } from '../../functions/local/compose.js';
import { PostgisFeatureSink } from '../../functions/postgres/postgis-feature-sink.js';
import type { WorkerHooks } from '../../shared/app/backend.js';
import { handleQueueDelivery } from '../../shared/app/queue-delivery.js';
import { localSchedule } from '../../shared/app/redelivery.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import type { Clock } from '../../shared/ports/clock.port.js';

export interface WorkerOrder {
  readonly body: string;
  readonly deliveryId: string;
  readonly receiveCount: number;
  readonly owner: string;
  /** The soak's FakeClock time: this process's clock, frozen (it dies before a timer could matter). */
  readonly nowMs: number;
  readonly leaseMs: number;
  readonly retentionMs: number;
  readonly maxReceiveCount: number;
  /** Where it dies: right after its claim, its output write or its feature row, or after its commit, before the ack. */
  readonly crashAt: 'claim' | 'write' | 'feature' | 'commit';
}

const say = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`);
const forever = () => new Promise<never>(() => {});

let now = 0;
const clock: Clock = { now: () => now, every: () => () => {} };
const telemetry = new JsonTelemetry((line) => say({ log: line }), { clock });
const dir = process.argv[2];
const sinkUrl = process.argv[3];
if (!dir || !sinkUrl) throw new Error('usage: local-worker.ts <data folder> <feature sink URL>');
const local = createLocalBackend(dir, { clock });
// Each write the store applied is reported before the worker goes on (so before any crash point after it):
// the soak's "written once" counts this process's writes with its own.
const outputs = new Proxy(local.outputs, {
  get(target, prop) {
    if (prop === 'putIfAbsent' || prop === 'putIfMatch') {
      return async (...args: unknown[]) => {
        const r = (await (target[prop] as (...a: unknown[]) => Promise<{ kind: string }>).apply(target, args)) as { kind: string };
        if (r.kind === 'written') say({ landed: args[0] });
        return r;
      };
    }
    const value: unknown = Reflect.get(target, prop, target);
    return typeof value === 'function' ? value.bind(target) : value;
  },
});
// As a deployed worker with `--sink`: every tile it commits has its feature row first.
const sink = PostgisFeatureSink.fromUrl(sinkUrl);
const backend = { claims: local.claims, sources: local.sources, outputs, queue: local.queue, clock, telemetry, sink };

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const order = JSON.parse(line) as WorkerOrder;
  now = order.nowMs;
  const stop = (point: WorkerOrder['crashAt']) => async () => {
    if (order.crashAt !== point) return;
    say({ at: point });
    await forever();
  };
  const hooks: WorkerHooks = { afterClaim: stop('claim'), afterWrite: stop('write'), afterFeature: stop('feature') };
  void handleQueueDelivery(
    backend,
    { owner: order.owner, leaseMs: order.leaseMs, retentionMs: order.retentionMs, hooks },
    { body: order.body, deliveryId: order.deliveryId, receiveCount: order.receiveCount, schedule: localSchedule(order.maxReceiveCount) },
  ).then((verdict) => {
    // Finished (a commit, or an answer before any crash point): it dies before its ack either way.
    say({ at: 'commit', verdict: verdict.kind });
  });
});
say({ ready: true });
