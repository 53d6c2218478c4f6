import { sceneTiles } from '../../shared/app/assemble-mosaic.js';
import { renderTile } from '../../shared/app/render-tile.js';
import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import type { TileJob } from '../../shared/app/tile-job.js';
import { TesseraError } from '../../shared/domain/errors.js';
import { outputKeys, type ProcessingParams, type SourceRef } from '../../shared/domain/job-key.js';
import { tilingParams } from '../../shared/domain/tiling-params.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { openGeoTiff, parseExpression } from '../../shared/raster/index.js';
import { type DeliverResult, LEASE_MS, PARITY_PARAMS, type ScenarioContext, tileKey } from './harness.js';
import { allCommitted, committed, enqueueOneTile, firstRun, outcome, type Scenario, sceneOutputs, tiles, WINDOWS } from './scenario-kit.js';

// Issue 25, items 5 and 6: a body damaged on its way to the store is a transient failure, never poison (95, 98);
// a re-assembly after a repair replaces the stale COG mosaic and STAC Item conditionally (96); a takeover whose
// answer was lost still counts the lease-taken-over that the zombie's lease-stolen answers (97). docs/parity.md.

const COG_PARAMS: ProcessingParams = { ...PARITY_PARAMS, mosaic: 'cog' };

/** Whether every tile of the scene is there and holds exactly the bytes its job renders (outputs are deterministic). */
async function tilesAreRenders(ctx: ScenarioContext, source: SourceRef, label: string): Promise<boolean> {
  for (const w of WINDOWS) {
    const [row, col] = w.split('_').map(Number) as [number, number];
    const job: TileJob = ctx.jobFor(label, source, row, col);
    const tiling = tilingParams(job.params);
    const want = await renderTile(ctx.backend.sources, job, tiling, parseExpression(tiling.expression, Object.keys(tiling.bands)));
    const there = await ctx.backend.outputs.head(job.outputKey);
    if (there === undefined || !Buffer.from(await ctx.backend.outputs.get(job.outputKey)).equals(Buffer.from(want))) return false;
  }
  return true;
}

/** Drain with `worker`, recording the dead letters and how many deliveries the messages took (sorted: which message met the fault differs by queue order). */
async function drainCounting(ctx: ScenarioContext, worker: string): Promise<void> {
  const deliveries = new Map<string, number>();
  await ctx.drain(worker, {
    onResult: (d: Delivery, _r: DeliverResult) => {
      deliveries.set(d.deliveryId, Math.max(deliveries.get(d.deliveryId) ?? 0, d.receiveCount));
    },
  });
  ctx.fact('deadLetters', await ctx.deadLetters());
  ctx.fact(
    'deliveriesPerMessage',
    [...deliveries.values()].sort((a, b) => a - b),
  );
}

/** Assemble, noting a typed failure as `mosaic:threw:<code>` instead of ending the scenario. */
async function assembleNoting(ctx: ScenarioContext, scene: string): Promise<string> {
  try {
    return (await ctx.mosaic(scene)).result;
  } catch (error) {
    if (!(error instanceof TesseraError)) throw error;
    ctx.note(`mosaic:threw:${error.code}`);
    return `threw:${error.code}`;
  }
}

/** Whether the COG mosaic holds every tile's current pixels at the tile's window. */
async function cogHoldsTiles(ctx: ScenarioContext, sceneKey: string): Promise<boolean> {
  const manifest = await readSceneManifest(ctx.backend.outputs, sceneKey);
  const mosaic = await openGeoTiff(ctx.backend.outputs, outputKeys.cogMosaic(sceneKey));
  for (const tile of sceneTiles(manifest)) {
    const source = await openGeoTiff(ctx.backend.outputs, tile.key);
    const [want] = await source.readWindow({ x: 0, y: 0, width: tile.window.width, height: tile.window.height }, [1]);
    const [got] = await mosaic.readWindow(tile.window, [1]);
    if (!want || !got || want.length !== got.length || want.some((v, i) => !Object.is(v, got[i]))) return false;
  }
  return true;
}

/** The tile versions the output STAC Item says its mosaics were assembled from. */
async function itemTileVersions(ctx: ScenarioContext, sceneKey: string): Promise<unknown> {
  const item = JSON.parse(new TextDecoder().decode(await ctx.backend.outputs.get(outputKeys.stacItem(sceneKey)))) as {
    properties: Record<string, unknown>;
  };
  return item.properties['tessera:tile_versions'];
}

export const INTEGRITY_SCENARIOS: readonly Scenario[] = [
  {
    id: '95',
    title:
      'a tile upload corrupted on the way is refused by the store (nothing stored) and retried, never poison: the next delivery renders and writes it',
    backendOptions: { outputFaults: true },
    async run(ctx) {
      const source = await ctx.stage();
      await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      // Armed after the fan-out, whose manifest is the first write to the outputs: the first tile upload is damaged.
      const corrupted = ctx.outputFaults.corruptNextWrite();
      await drainCounting(ctx, 'w1');
      ctx.fact('corruptedUploads', corrupted.hits);
      ctx.fact('tilesAreRenders', await tilesAreRenders(ctx, source, 'A'));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, retry: 1, 'ack:written': 4 },
      outputs: sceneOutputs('A', false),
      // The refused attempt gave its claim back; its redelivery (the same message on the same worker, so the
      // same owner) claims it again: no takeover from anyone.
      counters: { enqueued: 4, claimed: 5, written: 4, committed: 4, failed: 1 },
      claims: allCommitted('A', 'w1'),
      facts: { deadLetters: [], deliveriesPerMessage: [1, 1, 1, 2], corruptedUploads: 1, tilesAreRenders: true },
    }),
  },
  {
    id: '96',
    title:
      'a re-assembly after a repair replaces the stale COG mosaic and STAC Item conditionally on the versions it read; a duplicate re-assembly is already-present',
    async run(ctx) {
      const source = await ctx.stage();
      const fan = await ctx.fanOut('A', { source, params: COG_PARAMS });
      await ctx.drain('w1');
      const scene = fan.sceneKey;
      const key = tileKey(scene, 0, 0);
      // A bad writer puts another tile's bytes (0_1's: a valid COG of the same size) at 0_0, and the mosaic is
      // assembled over it: its COG holds 0_1's pixels at 0_0, and every reader takes them for the tile.
      ctx.phase('stale');
      const seen = (await ctx.backend.outputs.head(key))?.version as string;
      const bad = await ctx.backend.outputs.putIfMatch(key, await ctx.backend.outputs.get(tileKey(scene, 0, 1)), seen);
      ctx.note(`bad-writer:${bad.kind}`);
      await assembleNoting(ctx, scene);
      const staleVersions = await itemTileVersions(ctx, scene);
      // The operator repairs 0_0 under the version they read.
      ctx.phase('repair');
      await ctx.fanOut('A', {
        source,
        params: COG_PARAMS,
        only: (r, c) => r === 0 && c === 0,
        modeFor: () => ({ kind: 'overwrite', expectedVersion: bad.kind === 'written' ? bad.version : seen }),
      });
      await ctx.drain('w2');
      ctx.phase('reassembly');
      ctx.fact('reassembly', await assembleNoting(ctx, scene));
      ctx.fact('cogHoldsRepairedTiles', await cogHoldsTiles(ctx, scene));
      ctx.fact('itemNamesNewTileVersions', (await itemTileVersions(ctx, scene)) !== staleVersions);
      // The same assembly again (a sweep run, a duplicate request): nothing to replace.
      ctx.phase('duplicate');
      await ctx.checkpoint([outputKeys.mosaic(scene), outputKeys.cogMosaic(scene), outputKeys.stacItem(scene)]);
      ctx.fact('duplicate', await assembleNoting(ctx, scene));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 4,
        'stale:bad-writer:written': 1,
        'stale:mosaic:written': 1,
        'repair:fan-out:already-present': 1,
        'repair:ack:written': 1,
        'reassembly:mosaic:replaced': 1,
        'duplicate:mosaic:already-present': 1,
      },
      outputs: ['A/mosaic.stac.json', 'A/mosaic.tif', 'A/mosaic.vrt', 'A/scene.json', ...tiles('A', ...WINDOWS)].sort(),
      versionsUnchanged: true,
      // The re-assembly: the VRT (tile hrefs only) already-present, the COG and the item replaced; the duplicate: all three present.
      counters: { enqueued: 5, claimed: 5, written: 5, committed: 5, 'mosaic-replaced': 2, 'write-already-present': 4 },
      manifestCount: 4,
      claims: [...allCommitted('A', 'w1'), committed('A/0_0 repair', 'A/0_0 repair#m1@w2')].sort((a, b) => (a.job < b.job ? -1 : 1)),
      facts: { reassembly: 'replaced', cogHoldsRepairedTiles: true, itemNamesNewTileVersions: true, duplicate: 'already-present' },
    }),
  },
  {
    id: '97',
    title:
      'a takeover whose answer is lost (the SDK resends it and meets its own row) still counts lease-taken-over, naming the zombie, whose later lease-stolen it matches',
    async run(ctx) {
      const job = await enqueueOneTile(ctx, 2);
      const [da, db] = (await ctx.receive(2)) as [Delivery, Delivery];
      const lost = { hits: 0 };
      // w1 stalls past its lease; w2 takes the job over, its takeover lands and its answer is lost, and it
      // finishes; then w1, the zombie, wakes up: its write finds w2's tile, its commit is refused.
      const zombie = await ctx.deliver(da, 'w1', {
        hooks: {
          afterClaim: async () => {
            ctx.clock.advance(LEASE_MS + 1);
            // Armed only now: the first claim (w1's) is not a takeover and must not meet the fault.
            const shot = ctx.claimFaults.loseNextAnswer('takeover');
            await ctx.settle(db, await ctx.deliver(db, 'w2'));
            lost.hits = shot.hits;
            await ctx.checkpoint([job.outputKey]);
          },
        },
      });
      await ctx.settle(da, zombie);
      ctx.fact('lostTakeoverAnswers', lost.hits);
      const takeovers = ctx
        .logs()
        .filter((l) => l.level === 'WARN' && l.event === 'lease-taken-over')
        .map((l) => ctx.ownerLabel(String((l as { previousOwner?: unknown }).previousOwner)));
      ctx.fact('takenOverFrom', takeovers);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1, 'ack:lease-stolen': 1 },
      outputs: tiles('A', '0_0'),
      versionsUnchanged: true,
      counters: { claimed: 2, 'lease-taken-over': 1, written: 1, 'write-already-present': 1, 'lease-stolen': 1, committed: 1 },
      alarms: { 'lease-stolen': 1 },
      claims: [committed('A/0_0', 'A/0_0#m2@w2')],
      facts: { lostTakeoverAnswers: 1, takenOverFrom: ['A/0_0#m1@w1'] },
    }),
  },
  {
    id: '98',
    title:
      'a repair upload corrupted on the way is refused by the store and retried, never poison: the next delivery of the repair writes it and commits',
    backendOptions: { outputFaults: true },
    async run(ctx) {
      const { source, fan } = await firstRun(ctx, 'A', false);
      const key = tileKey(fan.sceneKey, 0, 0);
      const good = await ctx.backend.outputs.get(key);
      const seen = (await ctx.backend.outputs.head(key))?.version as string;
      ctx.phase('corrupted');
      const bad = await ctx.backend.outputs.putIfMatch(key, new TextEncoder().encode('a corrupt tile'), seen);
      ctx.note(`bad-writer:${bad.kind}`);
      ctx.phase('repair');
      await ctx.fanOut('A', {
        source,
        params: PARITY_PARAMS,
        only: (r, c) => r === 0 && c === 0,
        modeFor: () => ({ kind: 'overwrite', expectedVersion: bad.kind === 'written' ? bad.version : seen }),
      });
      // Armed after the repair's fan-out (its manifest write is a write too): the repair's overwrite is damaged.
      const corrupted = ctx.outputFaults.corruptNextWrite();
      await drainCounting(ctx, 'w2');
      ctx.fact('corruptedUploads', corrupted.hits);
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
      counters: { enqueued: 5, claimed: 6, written: 5, committed: 5, failed: 1 },
      claims: [...allCommitted('A', 'w1'), committed('A/0_0 repair', 'A/0_0 repair#m1@w2')].sort((a, b) => (a.job < b.job ? -1 : 1)),
      facts: { deadLetters: [], deliveriesPerMessage: [2], corruptedUploads: 1, tileRepaired: true },
    }),
  },
];
