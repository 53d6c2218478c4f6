import { gzipSync } from 'node:zlib';
import { PostgisFeatureBatchSink } from '../../functions/postgres/postgis-feature-batch-sink.js';
import {
  type BatchBackend,
  type BatchHooks,
  type BatchSettings,
  type BatchVerdict,
  batchSourceOf,
  handleBatchDelivery,
} from '../../shared/app/feature-batch.js';
import { poisonReason } from '../../shared/app/poison.js';
import { batchEventBody, batchJobKey, DEFAULT_BATCH_PARAMS } from '../../shared/domain/feature-batch.js';
import type { SourceRef } from '../../shared/domain/job-key.js';
import { streamKeys } from '../../shared/domain/key-layout.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { asRole, bindRole } from '../support/function-role.js';
import { CRASH_VISIBILITY_MS, DRAIN_VISIBILITY_MS, deferred, LEASE_MS, type ScenarioContext } from './harness.js';
import type { ClaimFact, Json } from './outcome.js';
import { outcome, type Scenario } from './scenario-kit.js';

/**
 * Feature streams (docs/feature-batches.md): one claim per batch object, all its records into PostGIS in one transaction
 * with the batch marked done, records keyed by their identity. Each backend's own claim store, source store and
 * queue carry the batch events; every backend writes into a PostGIS schema of its own (feature-sink.ts).
 */

const PARAMS = DEFAULT_BATCH_PARAMS;
const RETENTION_MS = 7 * 86_400_000;

/** B1: 7 lines: 4 positions (one named `r-2`), AIS's 181/91, a blank line, a line that is not JSON. */
const B1 = [
  '{"vessel":219000001,"time":"2025-06-01T12:00:00Z","lon":4.5,"lat":55.1,"speed":11.2}',
  '{"vessel":219000002,"time":"2025-06-01T12:00:05Z","lon":4.6,"lat":55.2,"speed":9,"id":"r-2"}',
  '{"vessel":219000003,"time":"2025-06-01T12:00:30Z","lon":181,"lat":91}',
  '',
  '{"vessel":219000001,"time":"2025-06-01T12:01:00Z","lon":4.51,"lat":55.11,"speed":11}',
  'AIVDM,1,1,,A,13u?etPv2;0n:dDPwUM1U1Cb069D,0*24',
  '{"vessel":219000004,"time":1748779290000,"lon":-3.2,"lat":48.4}',
];
/**
 * B2, gzip (Firehose's GZIP): B1's first record re-serialised (keys reordered, spaces, 11.20), a record with B1's
 * given id `r-2` (the id decides), and 2 new positions (one by `mmsi`).
 */
const B2 = [
  '{ "lat": 55.1, "lon": 4.5, "speed": 11.20, "time": "2025-06-01T12:00:00Z", "vessel": 219000001 }',
  '{"id":"r-2","vessel":219000002,"time":"2025-06-01T12:00:05Z","lon":4.6,"lat":55.2,"speed":9.5}',
  '{"vessel":219000005,"time":"2025-06-01T12:02:10Z","lon":10.2,"lat":57.7,"speed":14.1}',
  '{"mmsi":219000006,"time":"2025-06-01T12:02:40Z","lon":10.3,"lat":57.8}',
];

const bytesOf = (lines: readonly string[]): Uint8Array => new TextEncoder().encode(`${lines.join('\n')}\n`);

/** What every scenario here runs against: the backend's ports as the `stream` role, its PostGIS schema. */
interface Streams {
  readonly batches: PostgisFeatureBatchSink;
  /** Stage a batch object under streams/, label its events and its claim row; returns its source. */
  stage(label: string, name: string, bytes: Uint8Array): Promise<SourceRef>;
  /** Put `copies` events of the batch on the backend's queue. */
  send(source: SourceRef, copies?: number): Promise<void>;
  /** One delivery through `handleBatchDelivery`, as every cloud's stream function runs it; `crashAfter` never returns. */
  deliver(d: Delivery, worker: string, crashAfter?: keyof BatchHooks): Promise<BatchVerdict | { kind: 'crashed' }>;
  /** Settle as the trigger does: ack, dead-letter poison at once, give a retry back; a crashed worker's message stays hidden. */
  settle(d: Delivery, r: BatchVerdict | { kind: 'crashed' }): Promise<void>;
  /** Receive `count` messages and run each, settled by its verdict; returns each message's label and delivery count. */
  run(count: number, worker: string): Promise<void>;
  /** The PostGIS facts every scenario records: batch rows, records per batch, rejects, the H3 view's total. */
  facts(): Promise<Record<string, Json>>;
}

const sinks = new WeakMap<object, PostgisFeatureBatchSink>();

function streams(ctx: ScenarioContext): Streams {
  const features = ctx.features;
  let batches = sinks.get(features);
  if (batches === undefined) {
    batches = new PostgisFeatureBatchSink(features.pool, { migrateOnFirstUse: true });
    sinks.set(features, batches);
  }
  const sink = batches;
  const labels = new Map<string, string>();
  const backend: BatchBackend = {
    // The stream function's own identity: the deployed grants of the `stream` role are checked on every request.
    claims: bindRole(ctx.backend.claims, 'stream'),
    sources: bindRole(ctx.sources, 'stream'),
    batches: sink,
    clock: ctx.clock,
    telemetry: ctx.backend.telemetry,
  };
  const kindOf = (r: BatchVerdict | { kind: 'crashed' }): string => {
    if (r.kind !== 'ack') return r.kind;
    const o = r.outcome;
    return o.kind === 'claim-rejected' ? `ack:claim-rejected:${o.reason}` : `ack:${o.kind}`;
  };
  const self: Streams = {
    batches: sink,
    async stage(label, name, bytes) {
      const source = await ctx.stage(streamKeys.batch(name), bytes);
      const key = batchJobKey(source, PARAMS);
      ctx.labelJob(key, label);
      labels.set(key, label);
      ctx.nameBody(batchEventBody(source), label);
      return source;
    },
    async send(source, copies = 1) {
      const body = batchEventBody(source);
      await ctx.queue.sendBatch(Array.from({ length: copies }, () => ({ jobKey: batchJobKey(source, PARAMS), body })));
    },
    async deliver(d, worker, crashAfter) {
      const crashed = deferred<{ kind: 'crashed' }>();
      const die = async (): Promise<void> => {
        crashed.resolve({ kind: 'crashed' });
        // The process is gone: nothing after this point ever runs.
        await new Promise<never>(() => {});
      };
      const settings: BatchSettings = {
        owner: worker,
        leaseMs: LEASE_MS,
        retentionMs: RETENTION_MS,
        params: PARAMS,
        hooks: crashAfter === undefined ? undefined : { [crashAfter]: die },
      };
      const run = async (): Promise<BatchVerdict> => {
        let source: SourceRef;
        try {
          source = batchSourceOf(d.body);
        } catch (error) {
          return { kind: 'poison', error: error as Error };
        }
        return handleBatchDelivery(backend, settings, { source, deliveryId: d.deliveryId, receiveCount: d.receiveCount });
      };
      const r = await Promise.race([asRole('stream', run), crashed.promise]);
      ctx.note(kindOf(r));
      return r;
    },
    async settle(d, r) {
      switch (r.kind) {
        case 'ack':
          return ctx.queue.ack(d);
        case 'poison':
          return ctx.queue.deadLetter(d, poisonReason(r.error));
        case 'retry':
          return ctx.queue.release(d, 0);
        case 'crashed':
          return;
        default: {
          const never: never = r;
          throw new Error(`unknown verdict ${JSON.stringify(never)}`);
        }
      }
    },
    async run(count, worker) {
      const deliveries = new Map<string, number>();
      for (const d of await ctx.receive(count, DRAIN_VISIBILITY_MS)) {
        const label = ctx.messageLabel(d.deliveryId);
        deliveries.set(label, Math.max(deliveries.get(label) ?? 0, d.receiveCount));
        await self.settle(d, await self.deliver(d, worker));
      }
      ctx.fact('deliveriesPerMessage', Object.fromEntries([...deliveries].sort(([a], [b]) => (a < b ? -1 : 1))));
    },
    async facts() {
      const label = (key: string) => labels.get(key) ?? `unknown batch ${key.slice(0, 12)}`;
      const q = async <T extends Record<string, unknown>>(sql: string): Promise<T[]> => (await features.pool.query<T>(sql)).rows;
      await sink.migrate();
      const rows = await q<{ batch_key: string; owner: string; records: number; rejects: number; blank_lines: number; format: string }>(
        'SELECT batch_key, owner, records, rejects, blank_lines, format FROM feature_batches',
      );
      const byBatch = await q<{ batch_key: string; n: string }>('SELECT batch_key, count(*) AS n FROM feature_records GROUP BY batch_key');
      const rejects = await q<{ batch_key: string; line: number; reason: string }>('SELECT batch_key, line, reason FROM feature_rejects');
      const view = await q<{ records: string | null; cells: string; minutes: string }>(
        'SELECT sum(records) AS records, count(DISTINCT h3_cell) AS cells, count(DISTINCT minute_utc) AS minutes FROM feature_counts_h3_minute',
      );
      const sorted = <T>(xs: T[], key: (x: T) => string): T[] => xs.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      return {
        batchRows: sorted(
          rows.map((r) => ({
            batch: label(r.batch_key),
            owner: ctx.ownerLabel(r.owner),
            records: r.records,
            rejects: r.rejects,
            blankLines: r.blank_lines,
            format: r.format,
          })),
          (r) => r.batch,
        ),
        recordsByBatch: Object.fromEntries(sorted(byBatch, (r) => label(r.batch_key)).map((r) => [label(r.batch_key), Number(r.n)])),
        rejects: sorted(
          rejects.map((r) => `${label(r.batch_key)}:${r.line}:${r.reason}`),
          (x) => x,
        ),
        countsView: { records: Number(view[0]?.records ?? 0), cells: Number(view[0]?.cells ?? 0), minutes: Number(view[0]?.minutes ?? 0) },
        sourceReads: ctx.sources.reads,
      };
    },
  };
  return self;
}

const committed = (job: string, owner: string): ClaimFact => ({ job, state: 'COMMITTED', owner });
/** B1 alone, done once: what every scenario below compares its PostGIS with. */
const B1_DONE = (owner: string) => ({
  batchRows: [{ batch: 'B1', owner, records: 4, rejects: 2, blankLines: 1, format: 'ndjson' }],
  recordsByBatch: { B1: 4 },
  rejects: ['B1:3:out-of-range', 'B1:6:unparsable'],
  // 4 positions in 3 H3 cells (vessel 219000001's two, a minute and 1.3 km apart, share one) and 2 UTC minutes.
  countsView: { records: 4, cells: 3, minutes: 2 },
});
const B1_COUNTERS = { 'batch-inserted': 1, 'records-inserted': 4, 'records-rejected': 2 } as const;

export const FEATURE_BATCH_SCENARIOS: readonly Scenario[] = [
  {
    id: '85',
    title: 'feature batch delivered three times: one claim wins, its 4 records go in once, the 2 others stop at the claim reading nothing',
    async run(ctx) {
      const s = streams(ctx);
      await s.send(await s.stage('B1', 'ais/2025/06/01/12/part-0001.ndjson', bytesOf(B1)), 3);
      await s.run(3, 'w1');
      for (const [k, v] of Object.entries(await s.facts())) ctx.fact(k, v);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:inserted': 1, 'ack:claim-rejected:done': 2 },
      counters: { claimed: 1, committed: 1, 'claim-rejected': 2, ...B1_COUNTERS },
      claims: [committed('B1', 'B1#m1@w1')],
      facts: {
        deliveriesPerMessage: { 'B1#m1': 1, 'B1#m2': 1, 'B1#m3': 1 },
        ...B1_DONE('B1#m1@w1'),
        sourceReads: 1,
      },
    }),
  },
  {
    id: '86',
    title:
      "feature batch: a crash after the PostGIS insert, before the claim's commit; the takeover finds the batch done, commits, inserts and reads nothing",
    async run(ctx) {
      const s = streams(ctx);
      await s.send(await s.stage('B1', 'ais/2025/06/01/12/part-0001.ndjson', bytesOf(B1)));
      const [d1] = await ctx.receive(1, CRASH_VISIBILITY_MS);
      await s.settle(d1 as Delivery, await s.deliver(d1 as Delivery, 'w1', 'afterInsert'));
      const readsBefore = ctx.sources.reads;
      ctx.clock.advance(LEASE_MS);
      const d2 = await ctx.redeliver();
      await s.settle(d2, await s.deliver(d2, 'w2'));
      ctx.fact('receiveCount', d2.receiveCount);
      ctx.fact('readsByTheTakeover', ctx.sources.reads - readsBefore);
      for (const [k, v] of Object.entries(await s.facts())) ctx.fact(k, v);
      return ctx.record();
    },
    expected: outcome({
      calls: { crashed: 1, 'ack:already-done': 1 },
      counters: { claimed: 2, 'lease-taken-over': 1, committed: 1, 'batch-already-done': 1, ...B1_COUNTERS },
      claims: [committed('B1', 'B1#m1@w2')],
      facts: {
        receiveCount: 2,
        readsByTheTakeover: 0,
        // The batch row names the attempt whose transaction inserted it: the one that died before its commit.
        ...B1_DONE('B1#m1@w1'),
        sourceReads: 1,
      },
    }),
  },
  {
    id: '87',
    title:
      'the same records in two batch objects (a producer retry): each counts once, by its canonical JSON or its given id; the H3 view counts 6',
    async run(ctx) {
      const s = streams(ctx);
      await s.send(await s.stage('B1', 'ais/2025/06/01/12/part-0001.ndjson', bytesOf(B1)));
      await s.run(1, 'w1');
      await s.send(await s.stage('B2', 'ais/2025/06/01/12/part-0002.ndjson.gz', gzipSync(bytesOf(B2))));
      await s.run(1, 'w1');
      for (const [k, v] of Object.entries(await s.facts())) ctx.fact(k, v);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:inserted': 2 },
      counters: {
        claimed: 2,
        committed: 2,
        'batch-inserted': 2,
        'records-inserted': 6,
        'records-duplicate': 2,
        'records-rejected': 2,
      },
      claims: [committed('B1', 'B1#m1@w1'), committed('B2', 'B2#m1@w1')],
      facts: {
        deliveriesPerMessage: { 'B2#m1': 1 },
        batchRows: [
          { batch: 'B1', owner: 'B1#m1@w1', records: 4, rejects: 2, blankLines: 1, format: 'ndjson' },
          { batch: 'B2', owner: 'B2#m1@w1', records: 4, rejects: 0, blankLines: 0, format: 'ndjson+gzip' },
        ],
        recordsByBatch: { B1: 4, B2: 2 },
        rejects: ['B1:3:out-of-range', 'B1:6:unparsable'],
        countsView: { records: 6, cells: 5, minutes: 3 },
        sourceReads: 2,
      },
    }),
  },
  {
    id: '88',
    title: "feature batch whose claim commit's answer is lost: the store's resend is recognised as its own commit, one batch row, no alarm",
    async run(ctx) {
      const s = streams(ctx);
      await s.send(await s.stage('B1', 'ais/2025/06/01/12/part-0001.ndjson', bytesOf(B1)));
      const lost = ctx.claimFaults.loseNextAnswer('commit');
      await s.run(1, 'w1');
      ctx.fact('lostAnswers', lost.hits);
      ctx.fact('deadLetters', await ctx.deadLetters());
      for (const [k, v] of Object.entries(await s.facts())) ctx.fact(k, v);
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:inserted': 1 },
      counters: { claimed: 1, committed: 1, ...B1_COUNTERS },
      claims: [committed('B1', 'B1#m1@w1')],
      facts: {
        deliveriesPerMessage: { 'B1#m1': 1 },
        lostAnswers: 1,
        deadLetters: [],
        ...B1_DONE('B1#m1@w1'),
        sourceReads: 1,
      },
    }),
  },
  {
    id: '89',
    title:
      'a poison batch (a broken gzip object) is dead-lettered at its first delivery, its claim given back, nothing of it in PostGIS; the good batch beside it goes in',
    async run(ctx) {
      const s = streams(ctx);
      const broken = new Uint8Array([0x1f, 0x8b, 0x08, 0x00, ...new TextEncoder().encode('not a deflate stream')]);
      await s.send(await s.stage('P1', 'ais/2025/06/01/12/part-0009.ndjson.gz', broken));
      await s.send(await s.stage('B1', 'ais/2025/06/01/12/part-0001.ndjson', bytesOf(B1)));
      await s.run(2, 'w1');
      ctx.fact('deadLetters', await ctx.deadLetters());
      for (const [k, v] of Object.entries(await s.facts())) ctx.fact(k, v);
      return ctx.record();
    },
    expected: outcome({
      calls: { poison: 1, 'ack:inserted': 1 },
      counters: { claimed: 2, committed: 1, poison: 1, ...B1_COUNTERS },
      alarms: { 'poison-batch': 1 },
      claims: [committed('B1', 'B1#m1@w1'), { job: 'P1', state: 'CLAIMED', owner: 'P1#m1@w1', lapsed: true }],
      facts: {
        deliveriesPerMessage: { 'B1#m1': 1, 'P1#m1': 1 },
        deadLetters: ['P1'],
        ...B1_DONE('B1#m1@w1'),
        sourceReads: 2,
      },
    }),
  },
];
