import { TesseraError } from '../../shared/domain/errors.js';
import { PARITY_PARAMS } from './harness.js';
import { allCommitted, outcome, type Scenario, sceneOutputs } from './scenario-kit.js';

// Issue 25 ("exactly-once, round 3"): one event makes one scene whatever the store does between its deliveries.

export const ROUND3_SCENARIOS: readonly Scenario[] = [
  {
    id: '75',
    title:
      "a source's metadata updated between two deliveries of its event (no event of its own): the redelivery keys by the event's version and makes no second scene",
    async run(ctx) {
      const source = await ctx.stage('incoming/tagged.tif');
      await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      await ctx.drain('w1');
      // Same bytes, new metadata: S3 copies (a new version id), GCS bumps the metageneration, Azure changes the ETag.
      await ctx.updateSourceMetadata(source.key);
      // The event again, as its transport redelivers it: it still names the version it was sent for.
      let again: string;
      try {
        again = (await ctx.fanOut('A', { source, params: PARITY_PARAMS })).manifest;
      } catch (error) {
        if (!(error instanceof TesseraError)) throw error;
        again = `${error.retryable ? 'retry' : 'poison'}:${error.code}`;
      }
      ctx.fact('redelivery', again);
      await ctx.drain('w1');
      const scene = ctx.registerScene('A', source);
      await ctx.mosaic(scene);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'fan-out:already-present': 1, 'ack:written': 4, 'ack:claim-rejected:done': 4, 'mosaic:written': 1 },
      outputs: sceneOutputs('A', true),
      counters: { enqueued: 8, claimed: 4, written: 4, committed: 4, 'claim-rejected': 4 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: { redelivery: 'already-present' },
    }),
  },
];
