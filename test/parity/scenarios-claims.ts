import type { Backend } from '../../shared/app/backend.js';
import { DEFAULT_CLOCK_SKEW_MARGIN_MS, withClockSkewMargin } from '../../shared/app/clock-skew.js';
import { processTile } from '../../shared/app/process-tile.js';
import { reconcile } from '../../shared/app/reconcile.js';
import { tileJobKey } from '../../shared/domain/job-key.js';
import { asRole } from '../support/function-role.js';
import { deferred, LEASE_MS, PARITY_PARAMS } from './harness.js';
import type { Json } from './outcome.js';
import { at, committed, enqueueOneTile, outcome, type Scenario, tiles } from './scenario-kit.js';

const RETENTION_MS = 7 * 86_400_000;

/** One worker whose clock is `offsetMs` off the true (Fake) clock, claiming through the skew margin as every compose wires it. */
function workerWithClock(backend: Backend, offsetMs: number): Backend {
  return {
    ...backend,
    clock: { now: () => backend.clock.now() + offsetMs, every: (periodMs, task) => backend.clock.every(periodMs, task) },
    claims: withClockSkewMargin(backend.claims, DEFAULT_CLOCK_SKEW_MARGIN_MS),
  };
}

const kindOf = (o: { kind: string; reason?: string }): string => (o.reason === undefined ? o.kind : `${o.kind}:${o.reason}`);

/**
 * The claim store's own faults (issue 12, items 3, 8): answers lost between an
 * SDK and its store, clocks that disagree, and claim rows gone by retention.
 */
export const CLAIM_SCENARIOS: readonly Scenario[] = [
  {
    id: '20',
    title: 'a claim whose answer is lost is taken by its own caller: no wait, no false takeover',
    async run(ctx) {
      await enqueueOneTile(ctx);
      // The claim lands in the store; its answer is lost; the SDK (local: the wrapper) sends it again.
      const lost = ctx.claimFaults.loseNextAnswer('claim');
      const t0 = ctx.clock.now();
      await ctx.drain('w1');
      ctx.fact('lostAnswers', lost.hits);
      ctx.fact('msWaited', ctx.clock.now() - t0);
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 1, written: 1, committed: 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w1')],
      facts: { lostAnswers: 1, msWaited: 0, deadLetters: [] },
    }),
  },
  {
    id: '21',
    title: 'a claim and a commit whose answers are both lost: one write, committed by its own caller, no alarm',
    async run(ctx) {
      await enqueueOneTile(ctx);
      const claimLost = ctx.claimFaults.loseNextAnswer('claim');
      const commitLost = ctx.claimFaults.loseNextAnswer('commit');
      await ctx.drain('w1');
      ctx.fact('lostAnswers', { claim: claimLost.hits, commit: commitLost.hits });
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 1, written: 1, committed: 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w1')],
      facts: { lostAnswers: { claim: 1, commit: 1 }, deadLetters: [] },
    }),
  },
  {
    id: '22',
    title: 'workers 20 s and 300 s apart: inside the skew margin no live lease is taken; beyond it one tile, and an alarm',
    async run(ctx) {
      const source = await ctx.stage();
      const job = ctx.jobFor('A', source, 0, 0);
      const truth = workerWithClock(ctx.backend, 0);
      // w1 (true clock) claims 0_0 and stalls in its render.
      const claimed = deferred();
      const resume = deferred();
      const w1 = asRole('tile', () =>
        processTile(
          truth,
          ctx.settings('w1', {
            afterClaim: async () => {
              claimed.resolve();
              await resume.promise;
            },
          }),
          job,
          'w1',
        ),
      );
      await claimed.promise;
      // 45 s on, w1's lease has 15 s left on its own clock.
      ctx.clock.advance(45_000);
      // w2's clock is 20 s ahead: it reads the lease as lapsed 5 s ago, but 5 s < the 30 s margin.
      const ahead20 = await asRole('tile', () => processTile(workerWithClock(ctx.backend, 20_000), ctx.settings('w2'), job, 'w2'));
      // w3's clock is 300 s ahead, beyond the margin: it takes the live lease over (270 s early).
      const ahead300 = await asRole('tile', () => processTile(workerWithClock(ctx.backend, 300_000), ctx.settings('w3'), job, 'w3'));
      resume.resolve();
      const first = await w1;
      // 0_1: w4 (true clock) claims and dies; w5's clock is 300 s behind.
      const job01 = ctx.jobFor('A', source, 0, 1);
      const died = await ctx.process(job01, 'w4', { fault: { crashAfter: 'claim' } });
      const behind = workerWithClock(ctx.backend, -300_000);
      ctx.clock.advance(LEASE_MS + DEFAULT_CLOCK_SKEW_MARGIN_MS + 1);
      // Lapsed past the margin on the true clock, but not yet on w5's: it waits 300 s longer.
      const behindEarly = await asRole('tile', () => processTile(behind, ctx.settings('w5'), job01, 'w5'));
      ctx.clock.advance(300_000);
      const behindLate = await asRole('tile', () => processTile(behind, ctx.settings('w5'), job01, 'w5'));
      ctx.fact('answers', {
        ahead20s: kindOf(ahead20),
        ahead300s: kindOf(ahead300),
        zombieW1: kindOf(first),
        diedW4: died,
        behind300sAtTrueLapse: kindOf(behindEarly),
        behind300sAfter300sMore: kindOf(behindLate),
      } satisfies Json);
      return ctx.record();
    },
    expected: outcome({
      calls: { crashed: 1 },
      outputs: tiles('A', '0_0', '0_1'),
      counters: {
        claimed: 4,
        'claim-rejected': 2,
        'lease-taken-over': 2,
        written: 2,
        'write-already-present': 1,
        committed: 2,
        'lease-stolen': 1,
      },
      alarms: { 'lease-stolen': 1 },
      claims: [committed('A/0_0', 'w3'), committed('A/0_1', 'w5')],
      facts: {
        answers: {
          ahead20s: 'claim-rejected:held',
          ahead300s: 'written',
          zombieW1: 'lease-stolen',
          diedW4: 'crashed',
          behind300sAtTrueLapse: 'claim-rejected:held',
          behind300sAfter300sMore: 'written',
        },
      },
    }),
  },
  {
    id: '23',
    title: 'reconcile after retention: tiles whose claims expired are told from tiles never claimed',
    async run(ctx) {
      // Object times come from the store's clock: start the FakeClock at the machine's time so they compare.
      ctx.clock.advance(Math.max(0, Date.now() - ctx.clock.now()));
      const source = await ctx.stage();
      const fan = await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      // 1_1's worker dies between its write and its commit: a tile no committed claim points at.
      await ctx.drain('w1', { fault: { crashAfter: 'write', when: at(1, 1) } });
      const summary = async () => {
        const r = await reconcile(ctx.backend, fan.sceneKey, { retentionMs: RETENTION_MS });
        return {
          claimsChecked: r.claimsChecked,
          objectsWithoutClaim: r.objectsWithoutClaim.map((k) => ctx.relative(k)),
          claimExpiredByRetention: r.claimExpiredByRetention.map((k) => ctx.relative(k)),
        };
      };
      ctx.fact('withinRetention', await summary());
      // A day past the retention, TTL has deleted three of the four rows (1_0's is still due: TTL lags).
      ctx.clock.advance(RETENTION_MS + 86_400_000);
      for (const w of [
        { row: 0, col: 0 },
        { row: 0, col: 1 },
        { row: 1, col: 1 },
      ])
        await ctx.deleteClaim(tileJobKey(fan.sceneKey, w));
      ctx.fact('afterRetention', await summary());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'ack:written': 3, crashed: 1 },
      outputs: ['A/scene.json', ...tiles('A', '0_0', '0_1', '1_0', '1_1')],
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 3 },
      claims: [committed('A/1_0', 'A/1_0#m1@w1')],
      facts: {
        withinRetention: { claimsChecked: 3, objectsWithoutClaim: tiles('A', '1_1'), claimExpiredByRetention: [] },
        afterRetention: { claimsChecked: 1, objectsWithoutClaim: [], claimExpiredByRetention: tiles('A', '0_0', '0_1', '1_1') },
      },
    }),
  },
];
