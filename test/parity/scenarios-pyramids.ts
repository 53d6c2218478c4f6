import { tilesPerZoom } from '../../shared/app/pyramid-grid.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { type DeliverResult, LEASE_MS, PARITY_PARAMS, type ScenarioContext } from './harness.js';
import { committed, logged, outcome, type Scenario, tiles } from './scenario-kit.js';

// Issue 26 section 1: zoom pyramids, every zoom's tile its own job. See docs/pyramids.md and docs/parity.md.

/**
 * The parity scene (640 x 480 m at 51.4 N) on WebMercatorQuad zooms 14-16: six tiles of zoom 16 (columns 33314-33315,
 * rows 21808-21810), two of zoom 15 (the first with four children, the second with the two of row 21810), one of 14.
 */
const PYRAMID: ProcessingParams = { ...PARITY_PARAMS, tile_px: 256, tms: 'WebMercatorQuad', zoom: 16, min_zoom: 14, resampling: 'cubic' };

/** The zoom-16 tile that is the last child of its parent to be written: its worker dies between its write and its parent step. */
const LAST_CHILD = 'A/z16/1_1';

export const PYRAMID_SCENARIOS: readonly Scenario[] = [
  {
    id: '100',
    title:
      "a pyramid of zooms 14-16, every job of zoom 16 delivered twice and the last child of a parent dead between its write and its parent's enqueue: the redelivery enqueues the parent; each tile of each zoom written once, every parent message handled twice",
    async run(ctx: ScenarioContext) {
      const source = await ctx.stage();
      // The scene event twice: two messages per tile of zoom 16.
      const fan = await ctx.fanOut('A', { source, params: PYRAMID });
      await ctx.fanOut('A', { source, params: PYRAMID });
      ctx.fact('tilesPerZoom', Object.fromEntries(tilesPerZoom(fan.grid, 256, 14).map((l) => [`z${l.zoom}`, l.tiles])));
      // The twelve deliveries in a chosen order, the same on every backend: the first message of every tile, the last
      // child of zoom 15's first tile last, then every duplicate (its first message's fate already sealed).
      const all = await ctx.receive(12);
      const label = (d: Delivery) => ctx.messageLabel(d.deliveryId);
      const rank = (d: Delivery) => `${label(d).endsWith('#m1') ? 0 : 1}${label(d).startsWith(LAST_CHILD) ? 1 : 0}${label(d)}`;
      let dead: Delivery | undefined;
      for (const d of [...all].sort((a, b) => (rank(a) < rank(b) ? -1 : 1))) {
        const last = label(d) === `${LAST_CHILD}#m1`;
        const r: DeliverResult = await ctx.deliver(d, 'w1', last ? { fault: { crashAfter: 'write' } } : {});
        if (last) dead = d;
        else await ctx.settle(d, r);
      }
      // The parent of the dead child waits: its three siblings checked before its write, it died before its check.
      ctx.fact('parentsEnqueuedBeforeRedelivery', logged(ctx, 'INFO', 'pyramid-parent-enqueued'));
      // The dead worker's lease lapses, and so does its message's visibility (released here rather than waited for in
      // real seconds: the redelivery finds the same state). Every parent message is handled twice (its ack lost once).
      ctx.clock.advance(LEASE_MS + 1);
      await ctx.settle(dead as Delivery, { kind: 'crashed' }, 'release');
      const handled = new Map<string, number>();
      await ctx.drain('w2', {
        settle: (d) => {
          const n = (handled.get(d.deliveryId) ?? 0) + 1;
          handled.set(d.deliveryId, n);
          return /^A\/z1[45]\//.test(label(d)) && n === 1 ? 'release' : undefined;
        },
      });
      ctx.fact('parentsEnqueued', logged(ctx, 'INFO', 'pyramid-parent-enqueued'));
      ctx.fact('parentChecksWaiting', logged(ctx, 'INFO', 'pyramid-parent-waiting'));
      const m = await ctx.mosaic(fan.sceneKey);
      ctx.fact('mosaic', { manifestCount: m.manifestCount, gridCount: m.gridCount });
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'fan-out:already-present': 1,
        crashed: 1,
        'ack:written': 8,
        'ack:claim-rejected:done': 8,
        'ack:claim-rejected:held': 1,
        'ack:already-present': 1,
        'mosaic:written': 1,
      },
      outputs: [
        'A/mosaic.stac.json',
        'A/mosaic.vrt',
        'A/scene.json',
        ...tiles(
          'A',
          'WebMercatorQuad/14/8328/5452',
          'WebMercatorQuad/15/16657/10904',
          'WebMercatorQuad/15/16657/10905',
          'WebMercatorQuad/16/33314/21808',
          'WebMercatorQuad/16/33314/21809',
          'WebMercatorQuad/16/33314/21810',
          'WebMercatorQuad/16/33315/21808',
          'WebMercatorQuad/16/33315/21809',
          'WebMercatorQuad/16/33315/21810',
        ),
      ],
      // 12 jobs of zoom 16, and each of the three parents enqueued once by its last child.
      counters: {
        enqueued: 15,
        claimed: 10,
        'claim-rejected': 9,
        'lease-taken-over': 1,
        written: 9,
        'write-already-present': 1,
        committed: 9,
      },
      manifestCount: 6,
      claims: [
        committed('A/z14/0_0', 'A/z14/0_0#m1@w2'),
        committed('A/z15/0_0', 'A/z15/0_0#m1@w2'),
        committed('A/z15/1_0', 'A/z15/1_0#m1@w2'),
        committed('A/z16/0_0', 'A/z16/0_0#m1@w1'),
        committed('A/z16/0_1', 'A/z16/0_1#m1@w1'),
        committed('A/z16/1_0', 'A/z16/1_0#m1@w1'),
        committed('A/z16/1_1', 'A/z16/1_1#m1@w2'),
        committed('A/z16/2_0', 'A/z16/2_0#m1@w1'),
        committed('A/z16/2_1', 'A/z16/2_1#m1@w1'),
      ],
      facts: {
        tilesPerZoom: { z16: 6, z15: 2, z14: 1 },
        parentsEnqueuedBeforeRedelivery: 1,
        parentsEnqueued: 3,
        parentChecksWaiting: 5,
        mosaic: { manifestCount: 6, gridCount: 6 },
      },
    }),
  },
];
