import { readSceneManifest } from '../../shared/app/scene-manifest.js';
import { fanOutStacSceneEvent, type StacEventDelivery } from '../../shared/app/stac-scene.js';
import { TesseraError } from '../../shared/domain/errors.js';
import type { SourceRef } from '../../shared/domain/job-key.js';
import { asRole } from '../support/function-role.js';
import { syntheticSceneBytes } from '../support/local-scene.js';
import { RED_ASSET, stacItemBytes } from '../support/stac-fixtures.js';
import { PARITY_MAX_RECEIVE_COUNT } from './backends.js';
import { PARITY_PARAMS, parityScene, SCENE_SIZE, type ScenarioContext } from './harness.js';
import type { Json } from './outcome.js';
import { allCommitted, outcome, type Scenario, sceneOutputs, WINDOWS } from './scenario-kit.js';

// Issue 14 section 1: multi-file scenes start on their STAC Item (shared/app/stac-scene.ts,
// docs/multi-file-scenes.md). The trigger's rule, run against each backend's own store and queue:
// each cloud's handler maps its event onto it (test/aws|gcp|azure/stac-scene.test.ts).

const DIR = 'incoming/S2B_T31UDQ_20240601';
const SELECTION = { B04: 'red', B08: 'nir' } as const;
const STAC_PARAMS = { ...PARITY_PARAMS, version: 'parity-stac-1' };
const CONFIG = { selection: SELECTION, params: STAC_PARAMS, platform: 'local', functionTimeoutSec: 900 } as const;

/** The test Item, with `extra` assets beside `red` (a one-band COG) and `pair` (a two-band file whose band 2 is the only `nir`, picked by common name). */
function itemBytes(extra: Record<string, unknown> = {}): Uint8Array {
  return stacItemBytes({
    red: RED_ASSET,
    pair: {
      href: './B04+B08.tif',
      type: 'image/tiff; application=geotiff',
      'eo:bands': [
        { name: 'B04', common_name: 'red' },
        { name: 'B08', common_name: 'nir' },
      ],
    },
    ...extra,
  });
}

/** The parity scene as the band files: B04.tif and B04+B08.tif (its two bands), optionally only the first. */
async function stageBands(ctx: ScenarioContext, which: readonly ('red' | 'nir')[] = ['red', 'nir']): Promise<void> {
  for (const band of which) await ctx.stage(`${DIR}/${band === 'red' ? 'B04.tif' : 'B04+B08.tif'}`, await parityScene());
}

/**
 * One delivery of the item's event to the scene trigger's rule. Noted as `stac:fanned-out:<manifest>`,
 * `stac:retry:<code>` or `stac:poison:<code>` (what every cloud's handler then does: retry on its
 * schedule, or settle in its dead-letter queue at once); a fanned-out scene is registered as `label`.
 */
async function itemEvent(ctx: ScenarioContext, label: string, item: SourceRef, delivery: StacEventDelivery = {}): Promise<string> {
  let kind: string;
  try {
    const fan = await asRole('scene', () => fanOutStacSceneEvent(ctx.backend, item, CONFIG, delivery));
    if (fan.kind === 'fanned-out') {
      const manifest = await readSceneManifest(ctx.backend.outputs, fan.result.sceneKey);
      ctx.registerScene(label, manifest.source, manifest.params, fan.result.grid);
      kind = `fanned-out:${fan.result.manifest}`;
    } else kind = fan.kind;
  } catch (error) {
    if (!(error instanceof TesseraError)) throw error;
    kind = `${error.retryable ? 'retry' : 'poison'}:${error.code}`;
  }
  ctx.note(`stac:${kind}`);
  return kind;
}

/** The scene a fan-out made, in backend-neutral terms: its band objects (keys, no version tokens) and band indexes. */
async function sceneFact(ctx: ScenarioContext, label: string, sceneKey: string): Promise<Json> {
  const m = await readSceneManifest(ctx.backend.outputs, sceneKey);
  return {
    label: ctx.sceneLabel(sceneKey) === label,
    anchor: m.source.key,
    assets: Object.fromEntries(Object.entries(m.source.assets ?? {}).map(([band, a]) => [band, a.key])),
    bands: m.params.bands as Json,
    // Each band read is pinned to the version its key names.
    pinned: Object.keys(m.pins ?? {}).sort(),
  };
}

const sceneKeyOf = async (ctx: ScenarioContext, label: string): Promise<string> => {
  for await (const h of ctx.backend.outputs.list('scenes/'))
    if (h.key.endsWith('/scene.json') && ctx.sceneLabel(h.key.split('/')[1] as string) === label) return h.key.split('/')[1] as string;
  throw new Error(`no scene ${label}`);
};

const ASSETS = { B04: `${DIR}/B04.tif`, B08: `${DIR}/B04+B08.tif` };

export const STAC_SCENARIOS: readonly Scenario[] = [
  {
    id: '74',
    title:
      'a band re-uploaded after its item fanned out (no item event) and then a duplicate item event: the same item version never makes a second scene',
    async run(ctx) {
      await stageBands(ctx);
      const item = await ctx.stage(`${DIR}/item.json`, itemBytes());
      await itemEvent(ctx, 'A', item);
      await ctx.drain('w1');
      // The red band is uploaded again: S3, GCS and Blob send a band event, which is no scene trigger on a STAC stack;
      // the store keeps no old version (a lifecycle rule ran), so the item version's recorded band version is gone.
      await ctx.overwriteSource(ASSETS.B04, await syntheticSceneBytes({ ...SCENE_SIZE, seed: 11 }));
      // The item's event again, as a redelivery: the band pins recorded for this item version decide the scene key.
      await itemEvent(ctx, 'A', item);
      await ctx.drain('w1');
      const scene = await sceneKeyOf(ctx, 'A');
      await ctx.mosaic(scene);
      let manifests = 0;
      for await (const h of ctx.backend.outputs.list('scenes/')) if (h.key.endsWith('/scene.json')) manifests++;
      ctx.fact('manifests', manifests);
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'stac:fanned-out:written': 1,
        'ack:written': 4,
        'stac:stale': 1,
        'mosaic:written': 1,
      },
      outputs: sceneOutputs('A', true),
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 4, 'event-stale': 1 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: { manifests: 1 },
    }),
  },
  {
    id: '70',
    title: 'a STAC item fans its multi-file scene out once under duplicate item events: one manifest, every tile written once, the mosaic',
    async run(ctx) {
      await stageBands(ctx);
      const item = await ctx.stage(`${DIR}/item.json`, itemBytes());
      await itemEvent(ctx, 'A', item);
      await itemEvent(ctx, 'A', item);
      await ctx.drain('w1');
      const scene = await sceneKeyOf(ctx, 'A');
      await ctx.mosaic(scene);
      ctx.fact('scene', await sceneFact(ctx, 'A', scene));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'stac:fanned-out:written': 1,
        'stac:fanned-out:already-present': 1,
        'ack:written': 4,
        'ack:claim-rejected:done': 4,
        'mosaic:written': 1,
      },
      outputs: sceneOutputs('A', true),
      counters: { enqueued: 8, claimed: 4, written: 4, committed: 4, 'claim-rejected': 4 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: { scene: { label: true, anchor: `${DIR}/item.json`, assets: ASSETS, bands: { B04: 1, B08: 2 }, pinned: ['B04', 'B08'] } },
    }),
  },
  {
    id: '71',
    title:
      'an item before its last band is retried (SCENE_INCOMPLETE, transient) and fans out once the band lands; one whose band never lands is poison at its last delivery',
    async run(ctx) {
      await stageBands(ctx, ['red']);
      const item = await ctx.stage(`${DIR}/item.json`, itemBytes());
      const verdicts = [await itemEvent(ctx, 'A', item, { attempt: 1, maxDeliveries: PARITY_MAX_RECEIVE_COUNT })];
      await stageBands(ctx, ['nir']);
      verdicts.push(await itemEvent(ctx, 'A', item, { attempt: 2, maxDeliveries: PARITY_MAX_RECEIVE_COUNT }));
      await ctx.drain('w1');
      // Another item naming a band that never comes: retried until the transport's last delivery, then poison.
      const lone = await ctx.stage('incoming/lone/item.json', itemBytes());
      await ctx.stage('incoming/lone/B04.tif', await parityScene());
      for (let attempt = 1; attempt <= PARITY_MAX_RECEIVE_COUNT; attempt++)
        verdicts.push(await itemEvent(ctx, 'L', lone, { attempt, maxDeliveries: PARITY_MAX_RECEIVE_COUNT }));
      ctx.fact('verdicts', verdicts);
      ctx.fact('scene', await sceneFact(ctx, 'A', await sceneKeyOf(ctx, 'A')));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'stac:retry:SCENE_INCOMPLETE': PARITY_MAX_RECEIVE_COUNT,
        'stac:fanned-out:written': 1,
        'ack:written': 4,
        'stac:poison:SCENE_INCOMPLETE': 1,
      },
      outputs: [...sceneOutputs('A', false)],
      counters: { 'scene-incomplete': PARITY_MAX_RECEIVE_COUNT + 1, enqueued: 4, claimed: 4, written: 4, committed: 4 },
      claims: allCommitted('A', 'w1'),
      facts: {
        verdicts: [
          'retry:SCENE_INCOMPLETE',
          'fanned-out:written',
          ...Array(PARITY_MAX_RECEIVE_COUNT - 1).fill('retry:SCENE_INCOMPLETE'),
          'poison:SCENE_INCOMPLETE',
        ],
        scene: { label: true, anchor: `${DIR}/item.json`, assets: ASSETS, bands: { B04: 1, B08: 2 }, pinned: ['B04', 'B08'] },
      },
    }),
  },
  {
    id: '72',
    title:
      'a band overwritten after its scene fanned out: every tile of the old scene settles source-changed, nothing written; the item uploaded again makes the new scene',
    async run(ctx) {
      await stageBands(ctx);
      const item = await ctx.stage(`${DIR}/item.json`, itemBytes());
      await itemEvent(ctx, 'A', item);
      // A corrected B04+B08.tif replaces the old one before any tile runs; the store keeps no old version.
      await ctx.overwriteSource(`${DIR}/B04+B08.tif`, await syntheticSceneBytes({ ...SCENE_SIZE, seed: 8 }));
      await ctx.drain('w1');
      ctx.fact('deadLetters', await ctx.deadLetters());
      // A band's own upload starts no scene; the publisher re-uploads the item, whose new version makes the new scene.
      const again = await ctx.overwriteSource(item.key, itemBytes({ note: { href: './README.md', type: 'text/markdown' } }));
      await itemEvent(ctx, 'B', again);
      // The old item's late event is stale: its version is gone.
      await itemEvent(ctx, 'A', item);
      await ctx.drain('w1');
      ctx.fact('differentScenes', (await sceneKeyOf(ctx, 'A')) !== (await sceneKeyOf(ctx, 'B')));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'stac:fanned-out:written': 2, 'ack:source-changed': 4, 'ack:written': 4, 'stac:source-changed': 1 },
      outputs: ['A/scene.json', 'A/superseded.json', ...sceneOutputs('B', false)].sort(),
      counters: { enqueued: 8, claimed: 8, 'source-changed': 4, written: 4, committed: 4 },
      claims: [
        ...WINDOWS.map((w) => ({ job: `A/${w}`, state: 'CLAIMED' as const, owner: `A/${w}#m1@w1`, lapsed: true })),
        ...allCommitted('B', 'w1'),
      ],
      facts: { deadLetters: [], differentScenes: true },
    }),
  },
  {
    id: '73',
    title:
      'a malformed item, or one whose asset climbs above the store root or lives on the web, is poison at its first delivery: nothing fanned out',
    async run(ctx) {
      await stageBands(ctx);
      const verdicts: string[] = [];
      const collection = await ctx.stage(`${DIR}/collection.json`, new TextEncoder().encode('{"type":"Collection","id":"s2","links":[]}'));
      verdicts.push(await itemEvent(ctx, 'X', collection, { attempt: 1, maxDeliveries: PARITY_MAX_RECEIVE_COUNT }));
      const truncated = await ctx.stage(`${DIR}/truncated.json`, itemBytes().slice(0, 100));
      verdicts.push(await itemEvent(ctx, 'X', truncated, { attempt: 1, maxDeliveries: PARITY_MAX_RECEIVE_COUNT }));
      // Inside the source prefix (a trigger filters anything else out), one level down, with an href two levels up.
      const climbing = await ctx.stage('incoming/top.json', itemBytes({ red: { href: '../../B04.tif', type: 'image/tiff' } }));
      verdicts.push(await itemEvent(ctx, 'X', climbing, { attempt: 1, maxDeliveries: PARITY_MAX_RECEIVE_COUNT }));
      const remote = await ctx.stage(`${DIR}/remote.json`, itemBytes({ red: { href: 's3://other-bucket/B04.tif', type: 'image/tiff' } }));
      verdicts.push(await itemEvent(ctx, 'X', remote, { attempt: 1, maxDeliveries: PARITY_MAX_RECEIVE_COUNT }));
      ctx.fact('verdicts', verdicts);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'stac:poison:INVALID_EVENT': 4 },
      facts: { verdicts: Array(4).fill('poison:INVALID_EVENT') },
    }),
  },
];
