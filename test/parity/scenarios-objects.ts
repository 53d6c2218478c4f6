import type { Backend } from '../../shared/app/backend.js';
import { renderTile } from '../../shared/app/render-tile.js';
import type { TileJob } from '../../shared/app/tile-job.js';
import { AdapterError } from '../../shared/domain/errors.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { parseExpression } from '../../shared/raster/index.js';
import { CRASH_VISIBILITY_MS, LEASE_MS, PARITY_PARAMS, type ScenarioContext, tileKey } from './harness.js';
import { at, committed, firstRun, outcome, receiveOne, type Scenario, sceneOutputs, tiles } from './scenario-kit.js';

// The object store's own faults (issue 12, items 3 and 8): a repair write that landed but whose answer was
// lost, or that died before its commit, meets its own bytes on the retry; an object at a tile key that is
// not the job's output (foreign, truncated) is an alarm and never committed as the tile.

/**
 * The outputs store of one worker whose first repair write of `key` lands and then loses its answer: the
 * network failed after the store applied it, the SDK gave up, the delivery is retried. `lost` counts it.
 */
function losingFirstRepairAnswer(backend: Backend, key: string, lost: { hits: number }): Backend {
  const inner = backend.outputs;
  const outputs: ObjectStore = {
    name: inner.name,
    putIfAbsent: (...a) => inner.putIfAbsent(...a),
    putIfMatch: async (k, body, expected, options) => {
      const r = await inner.putIfMatch(k, body, expected, options);
      if (k === key && lost.hits === 0) {
        lost.hits++;
        throw new AdapterError(`[object-store:${inner.name}] the connection broke after the repair of ${k} landed (injected)`, {
          retryable: true,
        });
      }
      return r;
    },
    deleteIfVersion: (...a) => inner.deleteIfVersion(...a),
    pin: (...a) => inner.pin(...a),
    getRange: (...a) => inner.getRange(...a),
    get: (k) => inner.get(k),
    head: (k) => inner.head(k),
    list: (p) => inner.list(p),
  };
  return { ...backend, outputs };
}

/** The bytes a tile job makes (outputs are deterministic: every worker renders exactly these). */
async function tileBytes(ctx: ScenarioContext, job: TileJob): Promise<Uint8Array> {
  const tiling = tilingParams(job.params);
  return renderTile(ctx.backend.sources, job, tiling, parseExpression(tiling.expression, Object.keys(tiling.bands)));
}

/** A first run, then tile 0_0 replaced by a bad writer; the operator reads that version and backfills 0_0 with overwrite. */
async function corruptedThenRepair(ctx: ScenarioContext): Promise<{ key: string; expected: string; good: Uint8Array }> {
  const { source, fan } = await firstRun(ctx, 'A', false);
  const key = tileKey(fan.sceneKey, 0, 0);
  const good = await ctx.backend.outputs.get(key);
  const seen = (await ctx.backend.outputs.head(key))?.version as string;
  ctx.phase('corrupted');
  const bad = await ctx.backend.outputs.putIfMatch(key, new TextEncoder().encode('a corrupt tile'), seen);
  ctx.note(`bad-writer:${bad.kind}`);
  const expected = bad.kind === 'written' ? bad.version : seen;
  ctx.phase('repair');
  await ctx.fanOut('A', {
    source,
    params: PARITY_PARAMS,
    only: (r, c) => r === 0 && c === 0,
    modeFor: () => ({ kind: 'overwrite', expectedVersion: expected }),
  });
  return { key, expected, good };
}

const REPAIRED_CLAIMS = [
  committed('A/0_0', 'A/0_0#m1@w1'),
  committed('A/0_1', 'A/0_1#m1@w1'),
  committed('A/1_0', 'A/1_0#m1@w1'),
  committed('A/1_1', 'A/1_1#m1@w1'),
];

export const OBJECT_SCENARIOS: readonly Scenario[] = [
  {
    id: '16',
    title:
      'a repair write that landed but whose answer was lost is retried and recognised as its own: written, committed, no false version-mismatch',
    async run(ctx) {
      const { key, good } = await corruptedThenRepair(ctx);
      const lost = { hits: 0 };
      await ctx.drain('w2', { ports: (b) => losingFirstRepairAnswer(b, key, lost) });
      ctx.fact('lostAnswers', lost.hits);
      ctx.fact('deadLetters', await ctx.deadLetters());
      ctx.fact('tileRepaired', Buffer.from(await ctx.backend.outputs.get(key)).equals(Buffer.from(good)));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 4,
        'corrupted:bad-writer:written': 1,
        'repair:fan-out:already-present': 1,
        'repair:retry': 1,
        'repair:ack:written': 1,
      },
      outputs: sceneOutputs('A', false),
      // The failed attempt gave its claim back (lease in the past); the redelivery (the same message on the same
      // worker, so the same owner) claims it again: no takeover from anyone (issue 25 item 6).
      counters: { enqueued: 5, claimed: 6, written: 5, committed: 5, failed: 1 },
      claims: [...REPAIRED_CLAIMS, committed('A/0_0 repair', 'A/0_0 repair#m1@w2')].sort((a, b) => (a.job < b.job ? -1 : 1)),
      facts: { lostAnswers: 1, deadLetters: [], tileRepaired: true },
    }),
  },
  {
    id: '17',
    title: 'a repair that died after its write, before its commit: the redelivery meets its own bytes, commits, no false version-mismatch',
    async run(ctx) {
      const { key, good } = await corruptedThenRepair(ctx);
      const d1 = await receiveOne(ctx, CRASH_VISIBILITY_MS);
      await ctx.deliver(d1, 'w2', { fault: { crashAfter: 'write' } });
      ctx.clock.advance(LEASE_MS);
      const d2 = await ctx.redeliver();
      await ctx.settle(d2, await ctx.deliver(d2, 'w3'));
      ctx.fact('sameMessage', d1.deliveryId === d2.deliveryId);
      ctx.fact('deadLetters', await ctx.deadLetters());
      ctx.fact('tileRepaired', Buffer.from(await ctx.backend.outputs.get(key)).equals(Buffer.from(good)));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 4,
        'corrupted:bad-writer:written': 1,
        'repair:fan-out:already-present': 1,
        'repair:crashed': 1,
        'repair:ack:written': 1,
      },
      outputs: sceneOutputs('A', false),
      counters: { enqueued: 5, claimed: 6, 'lease-taken-over': 1, written: 6, committed: 5 },
      claims: [...REPAIRED_CLAIMS, committed('A/0_0 repair', 'A/0_0 repair#m1@w3')].sort((a, b) => (a.job < b.job ? -1 : 1)),
      facts: { sameMessage: true, deadLetters: [], tileRepaired: true },
    }),
  },
  {
    id: '18',
    title: 'a foreign object at a tile key is an alarm (write-occupied, ERROR), never committed as the tile; the other tiles complete',
    async run(ctx) {
      const source = await ctx.stage();
      const fan = await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      const key = tileKey(fan.sceneKey, 0, 1);
      const foreign = new TextEncoder().encode('another tool wrote this');
      ctx.note(`foreign:${(await ctx.backend.outputs.putIfAbsent(key, foreign)).kind}`);
      await ctx.drain('w1');
      ctx.fact('deadLetters', await ctx.deadLetters());
      ctx.fact('foreignKept', Buffer.from(await ctx.backend.outputs.get(key)).equals(Buffer.from(foreign)));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'foreign:written': 1, 'ack:written': 3, poison: 1 },
      outputs: [`A/scene.json`, ...tiles('A', '0_0', '0_1', '1_0', '1_1')].sort(),
      counters: { enqueued: 4, claimed: 4, written: 3, committed: 3, 'write-occupied': 1, poison: 1 },
      alarms: { 'write-occupied': 1, 'poison-message': 1 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        { job: 'A/0_1', state: 'CLAIMED', owner: 'A/0_1#m1@w1', lapsed: true },
        committed('A/1_0', 'A/1_0#m1@w1'),
        committed('A/1_1', 'A/1_1#m1@w1'),
      ],
      facts: { deadLetters: ['A/0_1'], foreignKept: true },
    }),
  },
  {
    id: '19',
    title: 'a truncated copy of the tile at its key is an alarm, never committed; the whole tile in place (its own earlier write) commits',
    async run(ctx) {
      const source = await ctx.stage();
      const fan = await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      const truncatedJob = ctx.jobFor('A', source, 0, 1);
      const wholeJob = ctx.jobFor('A', source, 1, 0);
      const whole = await tileBytes(ctx, truncatedJob);
      ctx.note(`truncated:${(await ctx.backend.outputs.putIfAbsent(truncatedJob.outputKey, whole.slice(0, whole.byteLength - 64))).kind}`);
      ctx.note(`whole:${(await ctx.backend.outputs.putIfAbsent(wholeJob.outputKey, await tileBytes(ctx, wholeJob))).kind}`);
      await ctx.drain('w1');
      ctx.fact('sceneKeyMatches', fan.sceneKey === truncatedJob.sceneKey && at(1, 0)(wholeJob));
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'truncated:written': 1, 'whole:written': 1, 'ack:written': 2, 'ack:already-present': 1, poison: 1 },
      outputs: [`A/scene.json`, ...tiles('A', '0_0', '0_1', '1_0', '1_1')].sort(),
      counters: { enqueued: 4, claimed: 4, written: 2, 'write-already-present': 1, committed: 3, 'write-occupied': 1, poison: 1 },
      alarms: { 'write-occupied': 1, 'poison-message': 1 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        { job: 'A/0_1', state: 'CLAIMED', owner: 'A/0_1#m1@w1', lapsed: true },
        committed('A/1_0', 'A/1_0#m1@w1'),
        committed('A/1_1', 'A/1_1#m1@w1'),
      ],
      facts: { sceneKeyMatches: true, deadLetters: ['A/0_1'] },
    }),
  },
];
