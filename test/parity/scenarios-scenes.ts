import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Backend } from '../../shared/app/backend.js';
import { fanOutScene } from '../../shared/app/fan-out.js';
import { type MosaicSweepOptions, type MosaicSweepResult, sweepMosaics } from '../../shared/app/mosaic-sweep.js';
import { renderTile } from '../../shared/app/render-tile.js';
import { manifestPin, readSceneManifest, sceneLifecycleKeys } from '../../shared/app/scene-manifest.js';
import { makeTileJob, parseTileJob } from '../../shared/app/tile-job.js';
import { outputKeys } from '../../shared/domain/job-key.js';
import { windowAt } from '../../shared/domain/tile-grid.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { ObjectStore } from '../../shared/ports/object-store.port.js';
import { parseExpression, SENTINEL_LIKE_SCENE, writeSyntheticScene } from '../../shared/raster/index.js';
import { asRole } from '../support/function-role.js';
import { MemoryObjectStore } from '../support/memory-object-store.js';
import { PARITY_PARAMS, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { allCommitted, committed, outcome, type Scenario, sceneOutputs, tiles, WINDOWS } from './scenario-kit.js';

// The scene lifecycle (28-32): version-pinned reads from fan-out to backfill, a source that changes
// under its jobs, the mosaic sweep that always comes, and a fan-out that resumes.

const sceneCache = new Map<string, Promise<Uint8Array>>();
/**
 * A scene of 512 x 384 px in 64 px DEFLATE blocks (about 500 KB), tiled at 256 px: a 2 x 2 grid
 * like the parity scene's. Its pixel data lies mostly beyond the first range read (64 KiB, which
 * a reader keeps with the header), and a tile decodes only its own blocks: when the source
 * changes, what a warm worker holds of the old version is its header (block offsets), and every
 * tile not yet run must read blocks from the store.
 */
const BLOCKED_SIZE = { width: 512, height: 384 } as const;
export const SCENE_PARAMS = { ...PARITY_PARAMS, version: 'parity-scenes-1', tile_px: 256 };
export function blockedScene(seed: number): Promise<Uint8Array> {
  const id = String(seed);
  let bytes = sceneCache.get(id);
  if (!bytes) {
    bytes = (async () => {
      const dir = mkdtempSync(join(tmpdir(), 'tessera-parity-scene-'));
      try {
        const path = join(dir, 'scene.tif');
        await writeSyntheticScene(path, { ...BLOCKED_SIZE, ...SENTINEL_LIKE_SCENE, seed, blockSize: 64, compression: 'DEFLATE' });
        return new Uint8Array(await readFile(path));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    })();
    sceneCache.set(id, bytes);
  }
  return bytes;
}
/** The scene as first uploaded. */
const originalScene = () => blockedScene(7);
/** Other bytes under the same name, same size: other pixels, and blocks at other offsets. */
const overwrittenScene = () => blockedScene(8);

/**
 * A sweep's result as the record compares it: assembled scenes by label; pending and closed
 * scenes by count and reason (which of several equal scenes a run picks follows their keys,
 * and keys hash each backend's own version token).
 */
function sweepFact(ctx: ScenarioContext, r: MosaicSweepResult): Json {
  return {
    assembled: r.assembled.map((x) => ctx.sceneLabel(x.sceneKey)).sort(),
    pending: r.pending.length,
    closed: r.closed.map((c) => `${c.reason}:${c.missing}`).sort(),
    failed: r.failed.length,
    deferred: r.deferred,
  };
}

async function sweep(ctx: ScenarioContext, options: MosaicSweepOptions = {}): Promise<MosaicSweepResult> {
  const r = await asRole('mosaic', () => sweepMosaics(ctx.backend, options));
  ctx.note('sweep');
  return r;
}

/** The close-out report of a scene, as a fact: its reason and every missing window. */
async function closedReport(ctx: ScenarioContext, sceneKey: string): Promise<Json> {
  const r = JSON.parse(new TextDecoder().decode(await ctx.backend.outputs.get(sceneLifecycleKeys.closedOut(sceneKey)))) as {
    reason: string;
    missingWindows: string[];
    gridCount: number;
  };
  return { reason: r.reason, missingWindows: [...r.missingWindows].sort(), gridCount: r.gridCount };
}

/** A store wrapper whose create-only write of matching keys dies once (the process is killed there). */
function dyingOn(store: ObjectStore, matches: (key: string) => boolean): ObjectStore {
  let died = false;
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'putIfAbsent') {
        return async (key: string, ...rest: unknown[]) => {
          if (!died && matches(key)) {
            died = true;
            throw new Error(`killed before writing ${key}`);
          }
          return (target.putIfAbsent as (...a: unknown[]) => unknown).call(target, key, ...rest);
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/**
 * Whether every tile of a scene equals the tile rendered afresh from `bytes`: a cold store that
 * holds only those bytes (no cached header, no pin: it answers every read with them).
 */
async function tilesMatchFreshRender(ctx: ScenarioContext, sceneKey: string, bytes: Uint8Array): Promise<boolean> {
  const manifest = await readSceneManifest(ctx.backend.outputs, sceneKey);
  const held = new MemoryObjectStore();
  await held.putIfAbsent(manifest.source.key, bytes);
  const cold = new Proxy(held, {
    get(target, prop, receiver) {
      if (prop === 'getRange') return (key: string, start: number, end: number) => target.getRange(key, start, end);
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  const tiling = tilingParams(manifest.params);
  const expression = parseExpression(tiling.expression, Object.keys(tiling.bands));
  let n = 0;
  for await (const head of ctx.backend.outputs.list(outputKeys.tilePrefix(sceneKey))) {
    const [row, col] = (/\/(\d+)_(\d+)\.tif$/.exec(head.key) ?? []).slice(1).map(Number);
    const job = makeTileJob(
      manifest.sceneKey,
      manifest.source,
      manifest.params,
      manifest.grid,
      windowAt(manifest.grid, row as number, col as number),
    );
    const fresh = await renderTile(cold, job, tiling, expression);
    if (Buffer.compare(Buffer.from(await ctx.backend.outputs.get(head.key)), Buffer.from(fresh)) !== 0) return false;
    n++;
  }
  return n > 0;
}

export const SCENE_SCENARIOS: readonly Scenario[] = [
  {
    id: '28',
    title:
      'a source overwritten between its event and the tile reads: every old-key tile settles source-changed once, nothing is written, the scene is closed out, the new event makes the new scene',
    async run(ctx) {
      const first = await ctx.stage(undefined, await originalScene());
      const fan = await ctx.fanOut('A', { source: first, params: SCENE_PARAMS });
      // A new upload under the same name lands before any tile job runs; the store keeps no old version.
      const second = await ctx.overwriteSource(first.key, await overwrittenScene());
      await ctx.drain('w1');
      ctx.fact('deadLetters', await ctx.deadLetters());
      ctx.fact(
        'readsBytesOfNewVersionUnderOldKey',
        (await ctx.outputs()).some((k) => k.startsWith('A/tiles/')),
      );
      // The sweep closes the superseded scene out at once, naming every window that never came.
      ctx.fact('sweep1', sweepFact(ctx, await sweep(ctx)));
      ctx.fact('report', await closedReport(ctx, fan.sceneKey));
      // The new version's own event makes the new scene, which completes.
      const next = await ctx.fanOut('B', { source: second, params: SCENE_PARAMS });
      await ctx.drain('w1');
      ctx.fact('sweep2', sweepFact(ctx, await sweep(ctx)));
      ctx.fact('newSceneTilesAreTheNewBytes', await tilesMatchFreshRender(ctx, next.sceneKey, await overwrittenScene()));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 2, 'ack:source-changed': 4, 'ack:written': 4, sweep: 2 },
      outputs: [...sceneOutputs('B', true), 'A/mosaic.closed.json', 'A/scene.json', 'A/superseded.json'].sort(),
      counters: { enqueued: 8, claimed: 8, 'source-changed': 4, 'mosaic-closed-out': 1, written: 4, committed: 4 },
      alarms: { 'mosaic-missing-tiles': 1 },
      manifestCount: null,
      // The old-key claims were given back (lease in the past), never committed: nothing was written under them.
      claims: [
        ...WINDOWS.map((w) => ({ job: `A/${w}`, state: 'CLAIMED' as const, owner: `A/${w}#m1@w1`, lapsed: true })),
        ...allCommitted('B', 'w1'),
      ],
      facts: {
        deadLetters: [],
        readsBytesOfNewVersionUnderOldKey: false,
        sweep1: { assembled: [], pending: 0, closed: ['superseded:4'], failed: 0, deferred: 0 },
        report: { reason: 'superseded', missingWindows: [...WINDOWS], gridCount: 4 },
        sweep2: { assembled: ['B'], pending: 0, closed: [], failed: 0, deferred: 0 },
        newSceneTilesAreTheNewBytes: true,
      },
    }),
  },
  {
    id: '29',
    title:
      'a warm header cache never serves the old offsets for new bytes: old-key tiles after an overwrite settle source-changed, the new scene reads its own header',
    async run(ctx) {
      const first = await ctx.stage(undefined, await originalScene());
      const fan = await ctx.fanOut('A', { source: first, params: SCENE_PARAMS });
      const all = await ctx.receive(4);
      const windowOf = (body: string) => `${parseTileJob(body).window.row}_${parseTileJob(body).window.col}`;
      const [warm, ...rest] = [...all].sort((a, b) => (windowOf(a.body) < windowOf(b.body) ? -1 : 1));
      if (!warm) throw new Error('no message');
      // One tile of the old version: the worker now holds the old header (block offsets) in its cache.
      await ctx.settle(warm, await ctx.deliver(warm, 'w1'));
      // Overwritten with other bytes of the same name and size, whose blocks sit at other offsets.
      const second = await ctx.overwriteSource(first.key, await overwrittenScene());
      for (const d of rest) await ctx.settle(d, await ctx.deliver(d, 'w1'));
      ctx.fact('deadLetters', await ctx.deadLetters());
      const next = await ctx.fanOut('B', { source: second, params: SCENE_PARAMS });
      await ctx.drain('w1');
      ctx.fact('newSceneTilesAreTheNewBytes', await tilesMatchFreshRender(ctx, next.sceneKey, await overwrittenScene()));
      ctx.fact('oldTileIsTheOldBytes', await tilesMatchFreshRender(ctx, fan.sceneKey, await originalScene()));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 2, 'ack:written': 5, 'ack:source-changed': 3 },
      outputs: ['A/scene.json', 'A/superseded.json', ...tiles('A', '0_0'), ...sceneOutputs('B', false)].sort(),
      counters: { enqueued: 8, claimed: 8, written: 5, committed: 5, 'source-changed': 3 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        ...['0_1', '1_0', '1_1'].map((w) => ({ job: `A/${w}`, state: 'CLAIMED' as const, owner: `A/${w}#m1@w1`, lapsed: true })),
        ...allCommitted('B', 'w1'),
      ],
      facts: { deadLetters: [], newSceneTilesAreTheNewBytes: true, oldTileIsTheOldBytes: true },
    }),
  },
  {
    id: '30',
    title:
      'scenes that stay pending never block a newer scene: the sweep tries the newer one first, backs the pending ones off and closes them out with a report',
    async run(ctx) {
      const source = await ctx.stage();
      // More pending scenes than one sweep tries (4 > maxScenes 3; production: 50+ > 50): their tiles never come,
      // as if every tile job had gone to the dead-letter queue.
      const pending = ['P1', 'P2', 'P3', 'P4'];
      const keys: string[] = [];
      for (const label of pending) {
        const f = await ctx.fanOut(label, { source, params: { ...PARITY_PARAMS, version: `pending-${label}` }, only: () => false });
        keys.push(f.sceneKey);
      }
      const options = { maxScenes: 3 };
      ctx.fact('sweep1', sweepFact(ctx, await sweep(ctx, options)));
      // A newer scene completes after them (a second later: the old sweep ordered by manifest time).
      await new Promise((r) => setTimeout(r, 1100));
      const fan = await ctx.fanOut('N', { source, params: PARITY_PARAMS });
      await ctx.drain('w1');
      ctx.fact('sweep2', sweepFact(ctx, await sweep(ctx, options)));
      // Pending scenes back off after their free retries instead of being tried on every run.
      const runs: Json[] = [];
      for (let i = 0; i < 8; i++) {
        ctx.clock.advance(5 * 60_000);
        runs.push(sweepFact(ctx, await sweep(ctx, options)));
      }
      ctx.fact('laterRuns', runs);
      // Two days on, every one is closed out with a report naming its missing windows.
      ctx.clock.advance(48 * 3_600_000);
      ctx.fact('closing1', sweepFact(ctx, await sweep(ctx, options)));
      ctx.fact('closing2', sweepFact(ctx, await sweep(ctx, options)));
      ctx.fact('reports', await Promise.all(keys.map((k) => closedReport(ctx, k))));
      ctx.fact('newSceneMosaic', (await ctx.backend.outputs.head(outputKeys.mosaic(fan.sceneKey))) !== undefined);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 5, 'ack:written': 4, sweep: 12 },
      outputs: [
        ...sceneOutputs('N', true),
        ...['P1', 'P2', 'P3', 'P4'].flatMap((p) => [`${p}/mosaic.closed.json`, `${p}/scene.json`]),
      ].sort(),
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 4, 'mosaic-closed-out': 4 },
      // Each try of a pending scene names its missing tiles; each close-out of an incomplete scene is an alarm.
      alarms: { 'mosaic-missing-tiles': 28, 'mosaic-closed-out': 4 },
      claims: allCommitted('N', 'w1'),
      facts: {
        sweep1: { assembled: [], pending: 3, closed: [], failed: 0, deferred: 1 },
        // The newer scene is tried first (fewest attempts), though four older scenes wait.
        sweep2: { assembled: ['N'], pending: 2, closed: [], failed: 0, deferred: 2 },
        // Three free retries each, then exponential backoff: later runs try fewer of them.
        laterRuns: [
          ...Array.from({ length: 4 }, () => ({ assembled: [], pending: 3, closed: [], failed: 0, deferred: 1 })),
          { assembled: [], pending: 3, closed: [], failed: 0, deferred: 0 },
          { assembled: [], pending: 1, closed: [], failed: 0, deferred: 0 },
          { assembled: [], pending: 3, closed: [], failed: 0, deferred: 0 },
          { assembled: [], pending: 0, closed: [], failed: 0, deferred: 0 },
        ],
        closing1: { assembled: [], pending: 0, closed: ['incomplete:4', 'incomplete:4', 'incomplete:4'], failed: 0, deferred: 1 },
        closing2: { assembled: [], pending: 0, closed: ['incomplete:4'], failed: 0, deferred: 0 },
        reports: Array.from({ length: 4 }, () => ({ reason: 'incomplete', missingWindows: [...WINDOWS], gridCount: 4 })),
        newSceneMosaic: true,
      },
    }),
  },
  {
    id: '31',
    title: 'a fan-out killed mid-way resumes from its chunks: finished chunks are not enqueued again, every window is enqueued once',
    async run(ctx) {
      const source = await ctx.stage();
      const request = { source, params: PARITY_PARAMS, chunkWindows: 1 };
      // The scene invocation sends its chunk messages and is killed before it records that it did.
      const dying: Backend = { ...ctx.backend, outputs: dyingOn(ctx.backend.outputs, (k) => k.endsWith('/fanned-out.json')) };
      const killed = await asRole('scene', () => fanOutScene(dying, request)).then(
        () => 'completed',
        (e: Error) => e.message.replace(/[0-9a-f]{64}/, '<scene>'),
      );
      ctx.registerScene('A', source);
      ctx.fact('firstAttempt', killed);
      // Two chunks run before the scene event comes back.
      for (const d of await ctx.receive(2)) await ctx.settle(d, await ctx.deliver(d, 'w1'));
      // The scene event is delivered again (its invocation timed out): it sends the chunks again.
      const again = await ctx.fanOut('A', request);
      ctx.fact('secondAttempt', { enqueued: again.enqueued, chunks: again.chunks });
      const third = await ctx.fanOut('A', request);
      ctx.fact('thirdAttempt', { enqueued: third.enqueued, chunks: third.chunks });
      await ctx.drain('w1');
      await ctx.mosaic(again.sceneKey);
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'ack:chunk-enqueued': 4,
        'ack:chunk-already-done': 4,
        'fan-out:already-present': 2,
        'ack:written': 4,
        'mosaic:written': 1,
      },
      outputs: [
        ...sceneOutputs('A', true),
        'A/fanned-out.json',
        'A/chunks/0-1.json',
        'A/chunks/1-1.json',
        'A/chunks/2-1.json',
        'A/chunks/3-1.json',
      ].sort(),
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 4 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: {
        firstAttempt: 'killed before writing scenes/<scene>/fanned-out.json',
        secondAttempt: { enqueued: 0, chunks: 4 },
        thirdAttempt: { enqueued: 0, chunks: 0 },
      },
    }),
  },
  {
    id: '32',
    title:
      'a backfill after an overwrite reads the version pinned in the manifest, never the live object: its jobs settle source-changed and write nothing',
    async run(ctx) {
      const source = await ctx.stage(undefined, await originalScene());
      // Tile 1_1's job was lost the first time (a gap for a backfill to fill).
      const fan = await ctx.fanOut('A', { source, params: SCENE_PARAMS, only: (row, col) => !(row === 1 && col === 1) });
      await ctx.drain('w1');
      await ctx.overwriteSource(source.key, await overwrittenScene());
      // `tessera backfill --policy skip`: the scene as its manifest records it (pin, size), the source not read.
      const manifest = await readSceneManifest(ctx.backend.outputs, fan.sceneKey);
      const pin = manifestPin(manifest);
      await ctx.fanOut('A', {
        source: manifest.source,
        params: manifest.params,
        recorded: manifest,
        only: (row, col) => row === 1 && col === 1,
      });
      const [d] = await ctx.receive(1);
      if (!d) throw new Error('no backfill message');
      ctx.fact('backfillJobPinnedToManifest', JSON.stringify(parseTileJob(d.body).pin) === JSON.stringify(pin));
      await ctx.settle(d, await ctx.deliver(d, 'w1'));
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'fan-out:already-present': 1, 'ack:written': 3, 'ack:source-changed': 1 },
      outputs: ['A/scene.json', 'A/superseded.json', ...tiles('A', '0_0', '0_1', '1_0')].sort(),
      counters: { enqueued: 4, claimed: 4, written: 3, committed: 3, 'source-changed': 1 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        committed('A/0_1', 'A/0_1#m1@w1'),
        committed('A/1_0', 'A/1_0#m1@w1'),
        { job: 'A/1_1', state: 'CLAIMED', owner: 'A/1_1#m1@w1', lapsed: true },
      ],
      facts: { backfillJobPinnedToManifest: true, deadLetters: [] },
    }),
  },
];
