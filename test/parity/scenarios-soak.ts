import type { Backend } from '../../shared/app/backend.js';
import { AdapterError } from '../../shared/domain/errors.js';
import type { ClaimStore } from '../../shared/ports/claim-store.port.js';
import type { ObjectStore, PutIfMatchResult, PutOptions } from '../../shared/ports/object-store.port.js';
import { PARITY_PARAMS, tileKey } from './harness.js';
import { committed, enqueueOneTile, firstRun, outcome, receiveOne, type Scenario, sceneOutputs, tiles } from './scenario-kit.js';

// What the randomized fault soak (issue 13, test/soak/, docs/soak.md) found: each row pins one fix on every
// backend, named by the soak seed that found it.

/**
 * The outputs store of one worker whose repair writes each land and then lose their answer, so the
 * request is sent again as an SDK resends it after a dropped response. `sent` counts repair writes.
 */
function resendingRepairs(backend: Backend, sent: { writes: number }): Backend {
  const outputs = new Proxy(backend.outputs, {
    get(target, prop) {
      if (prop === 'putIfMatch')
        return async (key: string, body: Uint8Array, expected: string, options?: PutOptions): Promise<PutIfMatchResult> => {
          sent.writes++;
          await target.putIfMatch(key, body, expected, options);
          return target.putIfMatch(key, body, expected, options);
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as ObjectStore;
  return { ...backend, outputs };
}

/**
 * A worker whose first commit fails with the store's transient error after the SDK gave up retrying it
 * (throttling that outlasted the retries), before anything was applied: a retryable AdapterError.
 */
function failingFirstCommit(backend: Backend, failed: { hits: number }): Backend {
  const claims = new Proxy(backend.claims, {
    get(target, prop) {
      if (prop === 'commit')
        return (...args: Parameters<ClaimStore['commit']>) => {
          if (failed.hits++ === 0)
            throw new AdapterError(`[claim-store:${target.name}] commit throttled past the SDK's retries (injected)`, { retryable: true });
          return target.commit(...args);
        };
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as ClaimStore;
  return { ...backend, claims };
}

export const SOAK_SCENARIOS: readonly Scenario[] = [
  {
    id: '60',
    title:
      'a repair whose render is already the tile at its expected version writes nothing, so no lost-answer resend can replace the tile twice (soak seed 1)',
    async run(ctx) {
      const { source, fan } = await firstRun(ctx, 'A', false);
      const key = tileKey(fan.sceneKey, 0, 0);
      await ctx.checkpoint([key]);
      const expectedVersion = (await ctx.backend.outputs.head(key))?.version as string;
      ctx.phase('repair');
      await ctx.fanOut('A', {
        source,
        params: PARITY_PARAMS,
        only: (r, c) => r === 0 && c === 0,
        modeFor: () => ({ kind: 'overwrite', expectedVersion }),
      });
      const sent = { writes: 0 };
      await ctx.drain('w2', { ports: (b) => resendingRepairs(b, sent) });
      // Before the fix: one repair write sent and resent; on S3 (the ETag is the body's MD5) and locally
      // (the version is the content hash) the resend passed If-Match again and replaced the tile twice.
      ctx.fact('repairWritesSent', sent.writes);
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 4,
        'repair:fan-out:already-present': 1,
        'repair:ack:already-present': 1,
      },
      outputs: sceneOutputs('A', false),
      versionsUnchanged: true,
      counters: { enqueued: 5, claimed: 5, written: 4, 'write-already-present': 1, committed: 5 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        committed('A/0_0 repair', 'A/0_0 repair#m1@w2'),
        committed('A/0_1', 'A/0_1#m1@w1'),
        committed('A/1_0', 'A/1_0#m1@w1'),
        committed('A/1_1', 'A/1_1#m1@w1'),
      ],
      facts: { repairWritesSent: 0, deadLetters: [] },
    }),
  },
  {
    id: '61',
    title:
      'a commit that fails transiently gives its claim back: the redelivery claims at once and commits, without spending a delivery waiting out the lease (soak seed 16)',
    async run(ctx) {
      await enqueueOneTile(ctx);
      const first = await receiveOne(ctx);
      const failed = { hits: 0 };
      const r1 = await ctx.deliver(first, 'w1', { ports: (b) => failingFirstCommit(b, failed) });
      await ctx.settle(first, r1);
      // The same message again, at once (a queue's immediate redelivery), to another worker.
      const second = await receiveOne(ctx);
      const r2 = await ctx.deliver(second, 'w2');
      await ctx.settle(second, r2);
      ctx.fact('commitFailures', failed.hits > 0 ? 1 : 0);
      return ctx.record();
    },
    expected: outcome({
      // Before the fix: the failed attempt kept its live lease, so the redelivery met it (`retry`, waiting).
      calls: { retry: 1, 'ack:already-present': 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 2, 'lease-taken-over': 1, written: 1, 'write-already-present': 1, committed: 1, failed: 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w2')],
      facts: { commitFailures: 1 },
    }),
  },
];
