import type { Backend } from '../../shared/app/backend.js';
import type { ObjectStore, PutIfMatchResult, PutOptions } from '../../shared/ports/object-store.port.js';
import { PARITY_PARAMS, tileKey } from './harness.js';
import { committed, firstRun, outcome, type Scenario, sceneOutputs } from './scenario-kit.js';

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
];
