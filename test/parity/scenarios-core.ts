import { reconcile } from '../../shared/app/reconcile.js';
import { parseTileJob, toJobMessage } from '../../shared/app/tile-job.js';
import { decodeEventKey } from '../../shared/domain/object-key.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { CRASH_VISIBILITY_MS, type DeliverResult, deferred, LEASE_MS, PARITY_PARAMS, resultKind, tileKey } from './harness.js';

import {
  allCommitted,
  at,
  committed,
  derivedKeys,
  drainCountingDeliveries,
  enqueueOneTile,
  firstRun,
  KEY_CASES,
  logged,
  outcome,
  receiveOne,
  type Scenario,
  s3EventKey,
  sceneOutputs,
  tiles,
  WINDOWS,
} from './scenario-kit.js';

// The first wave's fifteen scenarios (01-15).
/**
 * THE scenario table. Each scenario runs unchanged on every backend, against a
 * fresh namespace, and returns its OutcomeRecord; `expected` is what the
 * three gates promise. See docs/parity.md for what each one proves.
 */
export const CORE_SCENARIOS: readonly Scenario[] = [
  {
    id: '01',
    title: 'first delivery writes every window once; manifest count equals grid count',
    async run(ctx) {
      const { fan } = await firstRun(ctx);
      ctx.fact('gridCount', fan.grid.count);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'ack:written': 4, 'mosaic:written': 1 },
      outputs: sceneOutputs('A', true),
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 4 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: { gridCount: 4 },
    }),
  },
  {
    id: '02',
    title: 'every message delivered twice, one after the other, has the effect of one',
    async run(ctx) {
      const source = await ctx.stage();
      // The scene event arrives twice: two fan-outs, two messages per tile.
      const fan = await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      // And every tile message comes back once after its first handling: the ack was lost.
      const handled = new Map<string, number>();
      await ctx.drain('w1', {
        onResult: async (d, r) => {
          handled.set(d.deliveryId, (handled.get(d.deliveryId) ?? 0) + 1);
          if (r.kind === 'ack' && r.outcome.kind === 'written') await ctx.checkpoint([r.outcome.outputKey]);
        },
        settle: (d) => (handled.get(d.deliveryId) === 1 ? 'release' : undefined),
      });
      await ctx.mosaic(fan.sceneKey);
      ctx.fact('messages', handled.size);
      ctx.fact('handlingsPerMessage', [...new Set(handled.values())]);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'fan-out:already-present': 1, 'ack:written': 4, 'ack:claim-rejected:done': 12, 'mosaic:written': 1 },
      outputs: sceneOutputs('A', true),
      versionsUnchanged: true,
      counters: { enqueued: 8, claimed: 4, written: 4, committed: 4, 'claim-rejected': 12 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
      facts: { messages: 8, handlingsPerMessage: [2] },
    }),
  },
  {
    id: '03',
    title: 'one tile delivered to 16 workers at once is written once; the other 15 find it held',
    async run(ctx) {
      await enqueueOneTile(ctx, 16);
      const deliveries = await ctx.receive(16);
      // The winner waits, after its claim, until the 15 others have answered, so every loser meets a
      // live lease ('held') rather than a finished job; should two ever win, both wait out the deadline.
      const othersAnswered = deferred();
      const deadline = new Promise<void>((r) => setTimeout(r, 60_000).unref());
      let answered = 0;
      const results = await Promise.all(
        deliveries.map(async (d, i) => {
          const r = await ctx.deliver(d, `w${i + 1}`, {
            hooks: { afterClaim: () => Promise.race([othersAnswered.promise, deadline]) },
          });
          if (++answered === deliveries.length - 1) othersAnswered.resolve();
          return r;
        }),
      );
      await Promise.all(deliveries.map((d, i) => ctx.settle(d, results[i] as DeliverResult)));
      deliveries.forEach((d, i) => {
        if (resultKind(results[i] as DeliverResult) === 'ack:written')
          ctx.aliasOwner(`${d.deliveryId}@w${i + 1}`, 'the delivery that wrote');
      });
      ctx.fact('distinctMessages', new Set(deliveries.map((d) => d.deliveryId)).size);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1, 'ack:claim-rejected:held': 15 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 1, 'claim-rejected': 15, written: 1, committed: 1 },
      claims: [committed('A/0_0', 'the delivery that wrote')],
      facts: { distinctMessages: 16 },
    }),
  },
  {
    id: '04',
    title: 'death after claim: the redelivery waits out the lease, takes it over and completes',
    async run(ctx) {
      const job = await enqueueOneTile(ctx);
      const d1 = await receiveOne(ctx, CRASH_VISIBILITY_MS);
      await ctx.deliver(d1, 'w1', { fault: { crashAfter: 'claim' } });
      // The message comes back while the dead attempt's lease is still live: retry after the lease, do not ack.
      const d2 = await ctx.redeliver();
      const early = await ctx.deliver(d2, 'w2');
      const row = await ctx.backend.claims.get(job.jobKey);
      const remaining = (row?.leaseUntil ?? 0) - ctx.clock.now();
      ctx.fact('retryWaitsOutLease', early.kind === 'retry' && (early.delayMs ?? 0) > remaining);
      await ctx.settle(d2, early);
      ctx.clock.advance(LEASE_MS);
      const d3 = await receiveOne(ctx);
      await ctx.settle(d3, await ctx.deliver(d3, 'w3'));
      ctx.fact('sameMessage', d1.deliveryId === d2.deliveryId && d2.deliveryId === d3.deliveryId);
      ctx.fact('receiveCounts', [d1.receiveCount, d2.receiveCount, d3.receiveCount]);
      return ctx.record();
    },
    expected: outcome({
      calls: { crashed: 1, retry: 1, 'ack:written': 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 2, 'claim-rejected': 1, 'lease-taken-over': 1, written: 1, committed: 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w3')],
      facts: { retryWaitsOutLease: true, sameMessage: true, receiveCounts: [1, 2, 3] },
    }),
  },
  {
    id: '05',
    title: 'death after write, before commit: the redelivery finds already-present and commits',
    async run(ctx) {
      const job = await enqueueOneTile(ctx);
      const d1 = await receiveOne(ctx, CRASH_VISIBILITY_MS);
      await ctx.deliver(d1, 'w1', { fault: { crashAfter: 'write' } });
      await ctx.checkpoint([job.outputKey]);
      ctx.clock.advance(LEASE_MS);
      const d2 = await ctx.redeliver();
      await ctx.settle(d2, await ctx.deliver(d2, 'w2'));
      ctx.fact('sameMessage', d1.deliveryId === d2.deliveryId);
      ctx.fact('receiveCounts', [d1.receiveCount, d2.receiveCount]);
      return ctx.record();
    },
    expected: outcome({
      calls: { crashed: 1, 'ack:already-present': 1 },
      outputs: tiles('A', '0_0'),
      versionsUnchanged: true,
      counters: { claimed: 2, 'lease-taken-over': 1, written: 1, 'write-already-present': 1, committed: 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w2')],
      facts: { sameMessage: true, receiveCounts: [1, 2] },
    }),
  },
  {
    id: '06',
    title: 'death after commit, before ack: the redelivery stops at the claim and reads nothing',
    async run(ctx) {
      const job = await enqueueOneTile(ctx);
      const d1 = await receiveOne(ctx, CRASH_VISIBILITY_MS);
      // The worker finishes (claim, write, commit) and dies before it can ack.
      await ctx.settle(d1, await ctx.deliver(d1, 'w1'), 'leave');
      await ctx.checkpoint([job.outputKey]);
      const before = { reads: ctx.sources.reads, bytes: ctx.sources.bytesRead };
      const d2 = await ctx.redeliver();
      await ctx.settle(d2, await ctx.deliver(d2, 'w2'));
      ctx.fact('firstDeliveryReadSource', before.reads > 0 && before.bytes > 0);
      ctx.fact('sourceReadsByRedelivery', ctx.sources.reads - before.reads);
      ctx.fact('sourceBytesByRedelivery', ctx.sources.bytesRead - before.bytes);
      ctx.fact('sameMessage', d1.deliveryId === d2.deliveryId);
      ctx.fact('receiveCounts', [d1.receiveCount, d2.receiveCount]);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1, 'ack:claim-rejected:done': 1 },
      outputs: tiles('A', '0_0'),
      versionsUnchanged: true,
      counters: { claimed: 1, written: 1, committed: 1, 'claim-rejected': 1 },
      claims: [committed('A/0_0', 'A/0_0#m1@w1')],
      facts: {
        firstDeliveryReadSource: true,
        sourceReadsByRedelivery: 0,
        sourceBytesByRedelivery: 0,
        sameMessage: true,
        receiveCounts: [1, 2],
      },
    }),
  },
  {
    id: '07',
    title: 'lease lapses mid-job, a second worker takes over: first commit lease-stolen, one output',
    async run(ctx) {
      await enqueueOneTile(ctx, 2);
      const [da, db] = (await ctx.receive(2)) as [Delivery, Delivery];
      const firstFinished = deferred();
      const secondClaimed = deferred();
      let second: Promise<DeliverResult> | undefined;
      // A stalls after its claim past its lease; B takes the job over and stalls after its own claim until A is done.
      const first = await ctx.deliver(da, 'w1', {
        hooks: {
          afterClaim: async () => {
            ctx.clock.advance(LEASE_MS + 1);
            second = ctx.deliver(db, 'w2', {
              hooks: {
                afterClaim: async () => {
                  secondClaimed.resolve();
                  await firstFinished.promise;
                },
              },
            });
            await Promise.race([secondClaimed.promise, second]);
          },
        },
      });
      firstFinished.resolve();
      await ctx.settle(da, first);
      await ctx.settle(db, await (second as Promise<DeliverResult>));
      ctx.fact('heartbeatLostWarnings', logged(ctx, 'WARN', 'heartbeat-lost'));
      ctx.fact('takeoverWarnings', logged(ctx, 'WARN', 'lease-taken-over'));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:lease-stolen': 1, 'ack:already-present': 1 },
      outputs: tiles('A', '0_0'),
      counters: { claimed: 2, 'lease-taken-over': 1, written: 1, 'write-already-present': 1, 'lease-stolen': 1, committed: 1 },
      alarms: { 'lease-stolen': 1 },
      claims: [committed('A/0_0', 'A/0_0#m2@w2')],
      facts: { heartbeatLostWarnings: 1, takeoverWarnings: 1 },
    }),
  },
  {
    id: '08',
    title: 'a zombie finishing after the takeover and the commit cannot replace the output',
    async run(ctx) {
      const job = await enqueueOneTile(ctx, 2);
      const [da, db] = (await ctx.receive(2)) as [Delivery, Delivery];
      // A stalls past its lease; meanwhile B takes over and finishes; then A, the zombie, wakes up.
      const zombie = await ctx.deliver(da, 'w1', {
        hooks: {
          afterClaim: async () => {
            ctx.clock.advance(LEASE_MS + 1);
            await ctx.settle(db, await ctx.deliver(db, 'w2'));
            await ctx.checkpoint([job.outputKey]);
          },
        },
      });
      await ctx.settle(da, zombie);
      ctx.fact('heartbeatLostWarnings', logged(ctx, 'WARN', 'heartbeat-lost'));
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 1, 'ack:lease-stolen': 1 },
      outputs: tiles('A', '0_0'),
      versionsUnchanged: true,
      counters: { claimed: 2, 'lease-taken-over': 1, written: 1, 'write-already-present': 1, 'lease-stolen': 1, committed: 1 },
      alarms: { 'lease-stolen': 1 },
      claims: [committed('A/0_0', 'A/0_0#m2@w2')],
      facts: { heartbeatLostWarnings: 1 },
    }),
  },
  {
    id: '09',
    title: 'backfill skip over a partly complete scene fills only the gaps',
    async run(ctx) {
      const source = await ctx.stage();
      // A first run that got half-way: row 0 committed, 1_0 claimed by a worker that died, 1_1 never ran.
      const fan = await ctx.fanOut('A', { source, params: PARITY_PARAMS, only: (row) => row === 0 });
      await ctx.drain('w1');
      await ctx.process(ctx.jobFor('A', source, 1, 0), 'first-run@w1', { fault: { crashAfter: 'claim' } });
      await ctx.checkpoint();
      ctx.clock.advance(LEASE_MS + 1);
      ctx.phase('backfill');
      const before = new Set(await ctx.outputs());
      // skip: the same job keys again; committed jobs stop at the claim.
      await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      await ctx.drain('w2');
      ctx.fact(
        'filled',
        (await ctx.outputs()).filter((k) => !before.has(k)),
      );
      await ctx.mosaic(fan.sceneKey);
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 2,
        crashed: 1,
        'backfill:fan-out:already-present': 1,
        'backfill:ack:claim-rejected:done': 2,
        'backfill:ack:written': 2,
        'backfill:mosaic:written': 1,
      },
      outputs: sceneOutputs('A', true),
      versionsUnchanged: true,
      counters: { enqueued: 6, claimed: 5, 'lease-taken-over': 1, written: 4, committed: 4, 'claim-rejected': 2 },
      manifestCount: 4,
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        committed('A/0_1', 'A/0_1#m1@w1'),
        committed('A/1_0', 'A/1_0#m1@w2'),
        committed('A/1_1', 'A/1_1#m1@w2'),
      ],
      facts: { filled: tiles('A', '1_0', '1_1') },
    }),
  },
  {
    id: '10',
    title: 'backfill new-key writes new outputs beside the old ones; the old stay untouched',
    async run(ctx) {
      const { source, fan: v1 } = await firstRun(ctx, 'v1');
      await ctx.checkpoint();
      ctx.phase('new-key');
      const v2 = await ctx.fanOut('v2', { source, params: { ...PARITY_PARAMS, version: 'parity-2' } });
      await ctx.drain('w2');
      await ctx.mosaic(v2.sceneKey);
      ctx.fact('newSceneKey', v2.sceneKey !== v1.sceneKey);
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 4,
        'mosaic:written': 1,
        'new-key:fan-out:written': 1,
        'new-key:ack:written': 4,
        'new-key:mosaic:written': 1,
      },
      outputs: [...sceneOutputs('v1', true), ...sceneOutputs('v2', true)].sort(),
      versionsUnchanged: true,
      counters: { enqueued: 8, claimed: 8, written: 8, committed: 8 },
      manifestCount: 4,
      claims: [...allCommitted('v1', 'w1'), ...allCommitted('v2', 'w2')],
      facts: { newSceneKey: true },
    }),
  },
  {
    id: '11',
    title: 'backfill overwrite succeeds at the right version, dead-letters if the object changed',
    async run(ctx) {
      const { source, fan } = await firstRun(ctx, 'A', false);
      const overwrite = async (row: number, col: number, expectedVersion: string, worker: string) => {
        await ctx.fanOut('A', {
          source,
          params: PARITY_PARAMS,
          only: (r, c) => r === row && c === col,
          modeFor: () => ({ kind: 'overwrite', expectedVersion }),
        });
        await ctx.drain(worker);
      };
      ctx.phase('repair');
      const seen00 = (await ctx.backend.outputs.head(tileKey(fan.sceneKey, 0, 0)))?.version as string;
      await overwrite(0, 0, seen00, 'w2');
      ctx.phase('changed');
      // The operator reads 0_1's version; before the repair runs, another writer replaces the object.
      const key01 = tileKey(fan.sceneKey, 0, 1);
      const seen01 = (await ctx.backend.outputs.head(key01))?.version as string;
      const foreign = new TextEncoder().encode('replaced by another writer');
      ctx.note(`other-writer:${(await ctx.backend.outputs.putIfMatch(key01, foreign, seen01)).kind}`);
      await overwrite(0, 1, seen01, 'w3');
      ctx.fact('deadLetters', await ctx.deadLetters());
      ctx.fact('changedObjectKept', Buffer.from(await ctx.backend.outputs.get(key01)).equals(Buffer.from(foreign)));
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 4,
        'repair:fan-out:already-present': 1,
        // Its render is the tile at the expected version, byte for byte: in place, nothing written (soak seed 1).
        'repair:ack:already-present': 1,
        'changed:other-writer:written': 1,
        'changed:fan-out:already-present': 1,
        'changed:poison': 1,
      },
      outputs: sceneOutputs('A', false),
      // The repair meets the changed object once: poison, settled at once into the dead-letter queue (shared/app/poison.ts).
      counters: { enqueued: 6, claimed: 6, written: 4, 'write-already-present': 1, committed: 5, 'version-mismatch': 1, poison: 1 },
      alarms: { 'version-mismatch': 1 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        committed('A/0_0 repair', 'A/0_0 repair#m1@w2'),
        committed('A/0_1', 'A/0_1#m1@w1'),
        { job: 'A/0_1 repair', state: 'CLAIMED', owner: 'A/0_1 repair#m1@w3', lapsed: true },
        committed('A/1_0', 'A/1_0#m1@w1'),
        committed('A/1_1', 'A/1_1#m1@w1'),
      ],
      facts: { deadLetters: ['A/0_1 repair'], changedObjectKept: true },
    }),
  },
  {
    id: '12',
    title: 'replay of a finished scene changes no version token or modification time',
    async run(ctx) {
      const { source, fan } = await firstRun(ctx);
      await ctx.checkpoint();
      ctx.phase('replay');
      await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      await ctx.drain('w2');
      await ctx.mosaic(fan.sceneKey);
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'fan-out:written': 1,
        'ack:written': 4,
        'mosaic:written': 1,
        'replay:fan-out:already-present': 1,
        'replay:ack:claim-rejected:done': 4,
        'replay:mosaic:already-present': 1,
      },
      outputs: sceneOutputs('A', true),
      versionsUnchanged: true,
      // The replayed assembly finds the VRT and the STAC Item in place, byte for byte: two already-present writes.
      counters: { enqueued: 8, claimed: 4, written: 4, committed: 4, 'claim-rejected': 4, 'write-already-present': 2 },
      manifestCount: 4,
      claims: allCommitted('A', 'w1'),
    }),
  },
  {
    id: '13',
    title: 'keys with +, %2F, spaces and unicode give the same job and output keys everywhere',
    async run(ctx) {
      const received = new Map<string, { fromQueue: string[]; fromBody: string[] }>();
      const scenes = new Map<string, string>();
      const versions = new Map<string, string>();
      for (const { label, name } of KEY_CASES) {
        const decoded = decodeEventKey(s3EventKey(name));
        const source = await ctx.stage(decoded);
        const fan = await ctx.fanOut(label, { source, params: PARITY_PARAMS });
        scenes.set(fan.sceneKey, label);
        versions.set(label, source.versionToken);
        received.set(label, { fromQueue: [], fromBody: [] });
      }
      await ctx.drain('w1', {
        onResult: (d) => {
          const job = parseTileJob(d.body);
          const keys = received.get(scenes.get(job.sceneKey) ?? '?');
          keys?.fromQueue.push(d.jobKey);
          keys?.fromBody.push(job.jobKey);
        },
      });
      const stored: string[] = [];
      for await (const head of ctx.sources.list('incoming/')) stored.push(head.key);
      const published: string[] = [];
      for await (const head of ctx.backend.outputs.list('')) published.push(head.key);
      for (const { label, name } of KEY_CASES) {
        const decoded = decodeEventKey(s3EventKey(name));
        const scene = [...scenes].find(([, l]) => l === label)?.[0] ?? '';
        const keys = received.get(label) ?? { fromQueue: [], fromBody: [] };
        const derived = derivedKeys(name, versions.get(label) ?? '', PARITY_PARAMS);
        // Published outputs of this scene (the sweep's pending index under index/ is bookkeeping, not an output).
        const mine = published.filter((k) => !k.startsWith('index/') && k.includes(scene)).sort();
        const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((k, i) => k === b[i]);
        ctx.fact(`keys:${label}`, {
          eventKeyDecodes: decoded === name,
          sourceStoredAs: stored.includes(name) ? ((await ctx.sources.head(name))?.key ?? '(no head)') : '(not listed)',
          sceneKeyDerivedFromName: scene === derived.scene,
          jobKeysFromQueueDerived: same(keys.fromQueue.sort(), derived.jobs),
          jobKeysFromBodyDerived: same(keys.fromBody.sort(), derived.jobs),
          outputKeysDerived: same(mine, derived.outputs),
          outputKeys: mine.map((k) => ctx.relative(k)).sort(),
        });
      }
      ctx.fact('sourcesListed', stored.sort());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 3, 'ack:written': 12 },
      outputs: KEY_CASES.flatMap(({ label }) => [`${label}/scene.json`, ...tiles(label, ...WINDOWS)]).sort(),
      counters: { enqueued: 12, claimed: 12, written: 12, committed: 12 },
      claims: KEY_CASES.flatMap(({ label }) => allCommitted(label, 'w1')).sort((a, b) => (a.job < b.job ? -1 : 1)),
      facts: {
        ...Object.fromEntries(
          KEY_CASES.map(({ label, name }) => [
            `keys:${label}`,
            {
              eventKeyDecodes: true,
              sourceStoredAs: name,
              sceneKeyDerivedFromName: true,
              jobKeysFromQueueDerived: true,
              jobKeysFromBodyDerived: true,
              outputKeysDerived: true,
              outputKeys: [`${label}/scene.json`, ...tiles(label, ...WINDOWS)].sort(),
            },
          ]),
        ),
        sourcesListed: KEY_CASES.map(({ name }) => name).sort(),
      },
    }),
  },
  {
    id: '14',
    title: 'a poison message reaches the dead-letter queue at its first delivery; nothing written',
    async run(ctx) {
      const notJson = 'this is not a tile job';
      ctx.nameBody(notJson, 'not-json');
      // A well-formed job whose source is not a raster: it claims, fails to read, releases its claim.
      const readme = await ctx.stage('incoming/readme.tif', new TextEncoder().encode('a text file named like a GeoTIFF'));
      const job = ctx.jobFor('not-a-raster', readme, 0, 0);
      await ctx.queue.sendBatch([{ jobKey: 'not-a-tile-job', body: notJson }, toJobMessage(job)]);
      await drainCountingDeliveries(ctx, 'w1');
      return ctx.record();
    },
    expected: outcome({
      calls: { poison: 2 },
      // Poison is settled at once (shared/app/poison.ts): the not-a-raster job claims once, fails to read, gives the claim back.
      counters: { claimed: 1, poison: 2 },
      alarms: { 'poison-message': 2 },
      claims: [{ job: 'not-a-raster/0_0', state: 'CLAIMED', owner: 'not-a-raster/0_0#m1@w1', lapsed: true }],
      facts: { deadLetters: ['not-a-raster/0_0', 'not-json'], deliveriesPerMessage: { 'not-a-raster/0_0#m1': 1, 'not-json#m1': 1 } },
    }),
  },
  {
    id: '15',
    title: 'reconcile reports an object without a claim and a claim without an object',
    async run(ctx) {
      const source = await ctx.stage();
      const fan = await ctx.fanOut('A', { source, params: PARITY_PARAMS });
      // 1_1's worker dies between its write and its commit: an object no committed claim points at.
      await ctx.drain('w1', { fault: { crashAfter: 'write', when: at(1, 1) } });
      // Someone deletes a published tile: a committed claim whose object is gone.
      await ctx.deleteOutput(tileKey(fan.sceneKey, 0, 0));
      ctx.clock.advance(LEASE_MS + 1);
      const report = await reconcile(ctx.backend, fan.sceneKey);
      ctx.fact('reconcile', {
        objectsChecked: report.objectsChecked,
        claimsChecked: report.claimsChecked,
        objectsWithoutClaim: report.objectsWithoutClaim.map((k) => ctx.relative(k)),
        claimsWithoutObject: report.claimsWithoutObject.map((c) => ({ job: ctx.jobLabel(c.jobId), output: ctx.relative(c.outputUri) })),
        lapsedClaims: report.lapsedClaims.map((c) => ({ job: ctx.jobLabel(c.jobId), owner: ctx.ownerLabel(c.owner) })),
      });
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 1, 'ack:written': 3, crashed: 1 },
      outputs: ['A/scene.json', ...tiles('A', '0_1', '1_0', '1_1')],
      counters: { enqueued: 4, claimed: 4, written: 4, committed: 3 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        committed('A/0_1', 'A/0_1#m1@w1'),
        committed('A/1_0', 'A/1_0#m1@w1'),
        { job: 'A/1_1', state: 'CLAIMED', owner: 'A/1_1#m1@w1', lapsed: true },
      ],
      facts: {
        reconcile: {
          objectsChecked: 3,
          claimsChecked: 3,
          objectsWithoutClaim: tiles('A', '1_1'),
          claimsWithoutObject: [{ job: 'A/0_0', output: 'A/tiles/0_0.tif' }],
          lapsedClaims: [{ job: 'A/1_1', owner: 'A/1_1#m1@w1' }],
        },
      },
    }),
  },
];
