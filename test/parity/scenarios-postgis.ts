import type { Backend } from '../../shared/app/backend.js';
import { CRASH_VISIBILITY_MS, type DeliverOptions, LEASE_MS, PARITY_PARAMS, type ScenarioContext } from './harness.js';
import { committed, outcome, receiveOne, type Scenario, tiles, WINDOWS } from './scenario-kit.js';

/** Deliveries whose worker writes feature rows into the shared PostGIS (issue 16 section 5). */
export const withSink = (ctx: ScenarioContext, options: DeliverOptions = {}): DeliverOptions => ({
  ...options,
  ports: (b: Backend) => ({ ...b, sink: ctx.features.sink }),
});

/**
 * The PostGIS feature sink (docs/postgis.md): one row per tile job, inserted
 * `ON CONFLICT (job_id) DO NOTHING` after the tile write and before the commit.
 */
export const POSTGIS_SCENARIOS: readonly Scenario[] = [
  {
    id: '50',
    title:
      'PostGIS sink: crashes after the write and after the insert, then a storm of duplicates, leave one row per tile; the ST_Area roll-up equals a clean run',
    async run(ctx) {
      // The single-run figure: the same scene bytes under another key, drained once, cleanly.
      const clean = await ctx.stage('incoming/clean.tif');
      const cleanFan = await ctx.fanOut('B', { source: clean, params: PARITY_PARAMS });
      await ctx.drain('w0', withSink(ctx));

      // Tile 0_0 of scene A dies twice: after its write (no row yet), then, taken over, after its insert (row, no commit).
      const source = await ctx.stage();
      const jobs = WINDOWS.map((w) => ctx.jobFor('A', source, Number(w[0]), Number(w[2])));
      await ctx.send(jobs.slice(0, 1));
      const d1 = await receiveOne(ctx, CRASH_VISIBILITY_MS);
      await ctx.deliver(d1, 'w1', withSink(ctx, { fault: { crashAfter: 'write' } }));
      ctx.clock.advance(LEASE_MS);
      const d2 = await ctx.redeliver(CRASH_VISIBILITY_MS);
      await ctx.deliver(d2, 'w2', withSink(ctx, { fault: { crashAfter: 'feature' } }));
      ctx.clock.advance(LEASE_MS);
      const d3 = await ctx.redeliver();
      await ctx.settle(d3, await ctx.deliver(d3, 'w3', withSink(ctx)));

      // The storm: every tile of A delivered three more times, one worker after another.
      await ctx.send(jobs, 3);
      await ctx.drain('w4', withSink(ctx));

      const a = await ctx.features.rollUp(jobs[0]?.sceneKey as string);
      const b = await ctx.features.rollUp(cleanFan.sceneKey);
      ctx.fact('rows', { storm: a.rows, distinctJobs: a.distinctJobs, clean: b.rows });
      ctx.fact('areaSceneCrs', a.areaSceneCrs);
      ctx.fact('areaEqualsCleanRun', a.areaSceneCrs === b.areaSceneCrs && a.areaGeographyM2 === b.areaGeographyM2);
      ctx.fact('rowsEqualCleanRun', JSON.stringify(a.byWindow) === JSON.stringify(b.byWindow));
      ctx.fact('epsg', [...new Set(a.byWindow.map((r) => r.epsg))]);
      ctx.fact(
        'validPixels',
        a.byWindow.reduce((n, r) => n + r.count, 0),
      );
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'ack:written': 7, crashed: 2, 'ack:already-present': 1, 'ack:claim-rejected:done': 9 },
      outputs: [...tiles('A', ...WINDOWS), 'B/scene.json', ...tiles('B', ...WINDOWS)],
      counters: {
        enqueued: 4,
        claimed: 10,
        written: 8,
        'lease-taken-over': 2,
        'write-already-present': 2,
        committed: 8,
        'claim-rejected': 9,
        // B's 4, A/0_0's second attempt, A's other 3; A/0_0's third attempt found its own row (success, counted).
        'feature-inserted': 8,
        'feature-already-present': 1,
      },
      claims: [
        ...WINDOWS.map((w) => committed(`A/${w}`, w === '0_0' ? 'A/0_0#m1@w3' : `A/${w}#m1@w4`)),
        ...WINDOWS.map((w) => committed(`B/${w}`, `B/${w}#m1@w0`)),
      ],
      facts: {
        rows: { storm: 4, distinctJobs: 4, clean: 4 },
        // 64 x 48 pixels of 10 m: 307 200 m² in EPSG:32631, whatever the storm did.
        areaSceneCrs: 307_200,
        areaEqualsCleanRun: true,
        rowsEqualCleanRun: true,
        epsg: [32631],
        validPixels: 3072,
      },
    }),
  },
];
