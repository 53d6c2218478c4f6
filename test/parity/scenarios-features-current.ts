import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { parseTileJob } from '../../shared/app/tile-job.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { PARITY_SOURCE_BUCKET } from './backends.js';
import type { CurrentRollUp } from './feature-sink.js';
import { PARITY_PARAMS, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { allCommitted, committed, outcome, type Scenario, sceneOutputs, tiles } from './scenario-kit.js';
import { withSink } from './scenarios-postgis.js';
import { blockedScene, SCENE_PARAMS } from './scenarios-scenes.js';

// Issue 25 section 2: feature rows that never double count. The sink keeps every row (the history) and
// `tile_features_current` holds one row per source object, window and pipeline: the newest complete scene's
// (docs/postgis.md). Each scenario rolls the view up for one source object, as users are told to, and
// compares it with a clean single run of the same bytes under another name.

/** The source object whose uploads and runs compete for "current", and the clean run's own object. */
const SOURCE = 'incoming/scene.tif';
const CLEAN = 'incoming/clean.tif';
/** The clean run of the re-run's tiling: one 64 px window over the parity scene has other 4326 corners than four 32 px ones. */
const CLEAN_RERUN = 'incoming/clean-rerun.tif';
/** A new pipeline version that also tiles differently: one window over the 64 x 48 parity scene instead of four. */
const RERUN_PARAMS = { ...PARITY_PARAMS, version: 'parity-3', tile_px: 64 };
/** Between two runs: fan-out times (the manifests' createdAt, which rank scenes) that differ, on the FakeClock. */
const MINUTE = 60_000;

const identity = (key: string) => ({ bucket: PARITY_SOURCE_BUCKET, key });

/** The deliveries in window order, so every backend hands the same window to the same step. */
function byWindow(deliveries: readonly Delivery[]): Delivery[] {
  const id = (d: Delivery) => {
    const { row, col } = parseTileJob(d.body).window;
    return `${row}_${col}`;
  };
  return [...deliveries].sort((a, b) => (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0));
}

/** Areas agree to the last digits a float sum in another row order can move (1e-9 relative); integers exactly. */
const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));

/** The view's roll-up of the contested source object, as the record compares it with the clean run's. */
async function currentFact(ctx: ScenarioContext, pipeline: string, clean: CurrentRollUp): Promise<Json> {
  const c = await ctx.features.current(identity(SOURCE), pipeline);
  return {
    rows: c.rows,
    windows: c.distinctWindows,
    scenes: c.sceneKeys.map((k) => ctx.sceneLabel(k)).sort(),
    areaSceneCrs: c.areaSceneCrs,
    areaEqualsCleanRun:
      c.areaSceneCrs === clean.areaSceneCrs && c.areaGeographyM2 === clean.areaGeographyM2 && close(c.area4326, clean.area4326),
  };
}

/** Every scene's state in the sink by label, and the raw table's rows of the contested object's scenes (the history). */
async function historyFacts(ctx: ScenarioContext, scenes: Readonly<Record<string, string>>): Promise<void> {
  const states = await ctx.features.scenes(Object.values(scenes));
  ctx.fact(
    'scenes',
    Object.fromEntries(
      Object.entries(scenes).map(([label, key]) => {
        const s = states.get(key);
        return [
          label,
          s === undefined ? 'never seen' : `${s.rows} ${s.state}${s.supersededBy === null ? '' : ` by ${ctx.sceneLabel(s.supersededBy)}`}`,
        ];
      }),
    ),
  );
  ctx.fact('rawRows', await ctx.features.rawRows(Object.values(scenes)));
}

export const FEATURES_CURRENT_SCENARIOS: readonly Scenario[] = [
  {
    id: '51',
    title:
      'PostGIS current features: an upload replaced mid-scene never counts; the previous complete scene stays current until the newest completes; ST_Area over tile_features_current equals a clean run',
    async run(ctx) {
      const pipeline = SCENE_PARAMS.pipeline;
      // The single-run figure: the last upload's bytes under another name, drained once, cleanly.
      const clean = await ctx.stage(CLEAN, await blockedScene(9));
      await ctx.fanOut('C', { source: clean, params: SCENE_PARAMS });
      await ctx.drain('w0', withSink(ctx));
      const cleanRun = await ctx.features.current(identity(CLEAN), pipeline);
      ctx.fact('cleanRun', { rows: cleanRun.rows, areaSceneCrs: cleanRun.areaSceneCrs });

      // Z: the first upload of the contested object, complete.
      ctx.clock.advance(MINUTE);
      const v0 = await ctx.stage(SOURCE, await blockedScene(7));
      const z = await ctx.fanOut('Z', { source: v0, params: SCENE_PARAMS });
      await ctx.drain('w1', withSink(ctx));

      // A: a second upload; its tile 0_0 runs, then a third upload replaces the object (no old version kept),
      // so A's other tiles settle source-changed and A can never complete.
      ctx.clock.advance(MINUTE);
      const v1 = await ctx.overwriteSource(SOURCE, await blockedScene(8));
      const a = await ctx.fanOut('A', { source: v1, params: SCENE_PARAMS });
      const [first, ...rest] = byWindow(await ctx.receive(4));
      if (!first) throw new Error('no message');
      await ctx.settle(first, await ctx.deliver(first, 'w2', withSink(ctx)));
      ctx.clock.advance(MINUTE);
      const v2 = await ctx.overwriteSource(SOURCE, await blockedScene(9));
      for (const d of rest) await ctx.settle(d, await ctx.deliver(d, 'w2', withSink(ctx)));
      ctx.fact('midScene', await currentFact(ctx, pipeline, cleanRun));

      // B: the third upload's own event makes its scene, which completes and becomes current.
      const b = await ctx.fanOut('B', { source: v2, params: SCENE_PARAMS });
      await ctx.drain('w3', withSink(ctx));
      ctx.fact('end', await currentFact(ctx, pipeline, cleanRun));
      const end = await ctx.features.current(identity(SOURCE), pipeline);
      ctx.fact('rowsEqualCleanRun', JSON.stringify(end.byWindow) === JSON.stringify(cleanRun.byWindow));
      await historyFacts(ctx, { Z: z.sceneKey, A: a.sceneKey, B: b.sceneKey });
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 4, 'ack:written': 13, 'ack:source-changed': 3 },
      outputs: [
        ...sceneOutputs('C', false),
        ...sceneOutputs('Z', false),
        'A/scene.json',
        'A/superseded.json',
        ...tiles('A', '0_0'),
        ...sceneOutputs('B', false),
      ].sort(),
      counters: { enqueued: 16, claimed: 16, written: 13, committed: 13, 'source-changed': 3, 'feature-inserted': 13 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w2'),
        // Given back when their reads met the third upload: never committed, nothing written under them.
        ...['0_1', '1_0', '1_1'].map((w) => ({ job: `A/${w}`, state: 'CLAIMED' as const, owner: `A/${w}#m1@w2`, lapsed: true })),
        ...allCommitted('B', 'w3'),
        ...allCommitted('C', 'w0'),
        ...allCommitted('Z', 'w1'),
      ],
      facts: {
        // 512 x 384 px of 10 m in EPSG:32631.
        cleanRun: { rows: 4, areaSceneCrs: 19_660_800 },
        // A's tile 0_0 is in the sink, but A can never complete: Z stays current, alone. Before (rolled up over
        // tile_features, as docs/postgis.md invited): 5 rows, 26 214 400 m².
        midScene: { rows: 4, windows: 4, scenes: ['Z'], areaSceneCrs: 19_660_800, areaEqualsCleanRun: true },
        // Before: 9 rows, 45 875 200 m² (Z, A's tile and B all counted).
        end: { rows: 4, windows: 4, scenes: ['B'], areaSceneCrs: 19_660_800, areaEqualsCleanRun: true },
        rowsEqualCleanRun: true,
        scenes: { Z: '4/4 retired:newer-scene by B', A: '1/4 retired:source-changed', B: '4/4 current' },
        rawRows: 9,
      },
    }),
  },
  {
    id: '52',
    title:
      'PostGIS current features: a new-key backfill and a re-run under a new pipeline version replace the current scene only once complete; late duplicates of an old scene change nothing; ST_Area over the view equals a clean run',
    async run(ctx) {
      const pipeline = PARITY_PARAMS.pipeline;
      // The single-run figures: the same bytes under other names, drained once each, in each tiling.
      await ctx.fanOut('C', { source: await ctx.stage(CLEAN), params: PARITY_PARAMS });
      await ctx.fanOut('C64', { source: await ctx.stage(CLEAN_RERUN), params: RERUN_PARAMS });
      await ctx.drain('w0', withSink(ctx));
      const cleanRun = await ctx.features.current(identity(CLEAN), pipeline);
      const cleanRerun = await ctx.features.current(identity(CLEAN_RERUN), pipeline);
      ctx.fact('cleanRun', { rows: cleanRun.rows, areaSceneCrs: cleanRun.areaSceneCrs });
      ctx.fact('cleanRerun', { rows: cleanRerun.rows, areaSceneCrs: cleanRerun.areaSceneCrs });

      ctx.clock.advance(MINUTE);
      const source = await ctx.stage(SOURCE);
      const v1 = await ctx.fanOut('v1', { source, params: PARITY_PARAMS });
      await ctx.drain('w1', withSink(ctx));
      ctx.fact('firstRun', await currentFact(ctx, pipeline, cleanRun));

      // `tessera backfill --policy new-key --version parity-2`: from the recorded manifest, half of it first.
      ctx.clock.advance(MINUTE);
      ctx.phase('new-key');
      const manifest = await readSceneManifest(ctx.backend.outputs, v1.sceneKey);
      const v2 = await ctx.fanOut('v2', {
        source: manifest.source,
        params: { ...manifest.params, version: 'parity-2' },
        recorded: manifest,
      });
      const backfill = byWindow(await ctx.receive(4));
      for (const d of backfill.slice(0, 2)) await ctx.settle(d, await ctx.deliver(d, 'w2', withSink(ctx)));
      ctx.fact('backfillHalfway', await currentFact(ctx, pipeline, cleanRun));
      for (const d of backfill.slice(2)) await ctx.settle(d, await ctx.deliver(d, 'w2', withSink(ctx)));
      ctx.fact('backfillDone', await currentFact(ctx, pipeline, cleanRun));

      // The scene event again under a new pipeline version that also tiles differently: one 64 px window, not four.
      ctx.clock.advance(MINUTE);
      ctx.phase('rerun');
      const v3 = await ctx.fanOut('v3', { source, params: RERUN_PARAMS });
      await ctx.drain('w3', withSink(ctx));
      ctx.fact('rerunDone', await currentFact(ctx, pipeline, cleanRerun));

      // v1's tile 0_0 again after its claim row expired (retention): it runs, finds its tile and its row, commits.
      ctx.phase('late');
      await ctx.deleteClaim(ctx.jobFor('v1', source, 0, 0).jobKey);
      await ctx.send([ctx.jobFor('v1', source, 0, 0)], 2);
      await ctx.drain('w4', withSink(ctx));
      ctx.fact('afterLateDuplicates', await currentFact(ctx, pipeline, cleanRerun));
      await historyFacts(ctx, { v1: v1.sceneKey, v2: v2.sceneKey, v3: v3.sceneKey });
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 3,
        'ack:written': 9,
        'new-key:fan-out:written': 1,
        'new-key:ack:written': 4,
        'rerun:fan-out:written': 1,
        'rerun:ack:written': 1,
        // The first copy takes the expired claim's place, finds its tile and its row, commits; the second stops at the claim.
        'late:ack:already-present': 1,
        'late:ack:claim-rejected:done': 1,
      },
      outputs: [
        ...sceneOutputs('C', false),
        'C64/scene.json',
        ...tiles('C64', '0_0'),
        ...sceneOutputs('v1', false),
        ...sceneOutputs('v2', false),
        'v3/scene.json',
        ...tiles('v3', '0_0'),
      ].sort(),
      counters: {
        enqueued: 14,
        claimed: 15,
        written: 14,
        'write-already-present': 1,
        committed: 15,
        'claim-rejected': 1,
        'feature-inserted': 14,
        'feature-already-present': 1,
      },
      claims: [
        ...allCommitted('C', 'w0'),
        committed('C64/0_0', 'C64/0_0#m1@w0'),
        committed('v1/0_0', 'v1/0_0#m2@w4'),
        ...allCommitted('v1', 'w1').slice(1),
        ...allCommitted('v2', 'w2'),
        committed('v3/0_0', 'v3/0_0#m1@w3'),
      ],
      facts: {
        // 64 x 48 px of 10 m in EPSG:32631, in four windows and in one.
        cleanRun: { rows: 4, areaSceneCrs: 307_200 },
        cleanRerun: { rows: 1, areaSceneCrs: 307_200 },
        firstRun: { rows: 4, windows: 4, scenes: ['v1'], areaSceneCrs: 307_200, areaEqualsCleanRun: true },
        // Before (rolled up over tile_features): 6 rows, 512 000 m²; then 8 rows, 614 400 m²; then 9 rows, 921 600 m².
        backfillHalfway: { rows: 4, windows: 4, scenes: ['v1'], areaSceneCrs: 307_200, areaEqualsCleanRun: true },
        backfillDone: { rows: 4, windows: 4, scenes: ['v2'], areaSceneCrs: 307_200, areaEqualsCleanRun: true },
        rerunDone: { rows: 1, windows: 1, scenes: ['v3'], areaSceneCrs: 307_200, areaEqualsCleanRun: true },
        afterLateDuplicates: { rows: 1, windows: 1, scenes: ['v3'], areaSceneCrs: 307_200, areaEqualsCleanRun: true },
        scenes: { v1: '4/4 retired:newer-scene by v2', v2: '4/4 retired:newer-scene by v3', v3: '1/1 current' },
        rawRows: 9,
      },
    }),
  },
];
