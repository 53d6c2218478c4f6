import { fanOutScene } from '../../shared/app/fan-out.js';
import { type RecordFailure, settleRecords } from '../../shared/app/record-batch.js';
import {
  azureHostSchedule,
  localSchedule,
  PUBSUB_DEFAULT_MAX_DELIVERY_ATTEMPTS,
  pubSubSchedule,
  type RedeliverySchedule,
  sqsSchedule,
} from '../../shared/app/redelivery.js';
import { toJobMessage } from '../../shared/app/tile-job.js';
import { TesseraError } from '../../shared/domain/errors.js';
import type { SourceRef } from '../../shared/domain/job-key.js';
import type { Delivery } from '../../shared/ports/job-queue.port.js';
import { asRole } from '../support/function-role.js';
import { PARITY_MAX_RECEIVE_COUNT } from './backends.js';
import { CRASH_VISIBILITY_MS, type DeliverResult, LEASE_MS, PARITY_PARAMS, resultKind, type ScenarioContext } from './harness.js';
import { committed, drainCountingDeliveries, outcome, receiveOne, type Scenario, tiles } from './scenario-kit.js';

/**
 * Each platform's redelivery schedule, scaled so that its real lease becomes
 * the parity lease (LEASE_MS, on the FakeClock), and a model of the gap the
 * platform really leaves before the next delivery (the handler can set it
 * on SQS and locally; Pub/Sub's backoff doubles from its minimum; the
 * Functions host waits its fixed visibilityTimeout). Every backend runs
 * every transport's schedule, so the record never depends on the backend.
 */
interface ScaledTransport {
  readonly label: string;
  /** What the trigger passes (shared/app/redelivery.ts), scaled. */
  readonly schedule: RedeliverySchedule;
  /** How long after the crash the message comes back. */
  readonly crashGapMs: number;
  /** The gap after a failed delivery `attempt` with `verdict`. */
  gapAfter(attempt: number, verdict: DeliverResult): number;
}

const settableGap = (verdict: DeliverResult, fallbackMs: number) =>
  verdict.kind === 'retry' ? (verdict.delayMs ?? fallbackMs) : fallbackMs;

/** Real lease / parity lease, per platform: 1,200 s (Lambda), 840 s (Cloud Functions, event), 900 s (Azure Consumption, local). */
const scale = (realLeaseSec: number) => (ms: number) => Math.round((ms * LEASE_MS) / (realLeaseSec * 1000));
const awsScale = scale(1_200);
const gcpScale = scale(840);
const azureScale = scale(900);

export const SCALED_TRANSPORTS: readonly ScaledTransport[] = [
  {
    // The queue's visibility (6 x 900 s) brings a crashed message back after the lease has lapsed.
    label: 'sqs',
    schedule: sqsSchedule(PARITY_MAX_RECEIVE_COUNT),
    crashGapMs: awsScale(5_400_000),
    gapAfter: (attempt, v) => settableGap(v, awsScale(10_000 * 2 ** (attempt - 1))),
  },
  {
    // The last receive the redrive policy allows (maxReceiveCount 2): no later delivery can wait the lease out.
    label: 'sqs-last-receive',
    schedule: sqsSchedule(2),
    crashGapMs: 0,
    gapAfter: (attempt, v) => settableGap(v, awsScale(10_000 * 2 ** (attempt - 1))),
  },
  {
    // The push fails when the instance dies; the retry policy backs off 10 s, 20 s, 40 s, 80 s (up to 600 s).
    label: 'pubsub',
    schedule: pubSubSchedule(PUBSUB_DEFAULT_MAX_DELIVERY_ATTEMPTS, gcpScale(10_000)),
    crashGapMs: gcpScale(10_000),
    gapAfter: (attempt) => gcpScale(Math.min(600_000, 10_000 * 2 ** (attempt - 1))),
  },
  {
    // The host's in-flight visibility (10 min) brings a crashed message back; each failure waits visibilityTimeout (330 s).
    label: 'azure-queue',
    schedule: azureHostSchedule(5, azureScale(330_000)),
    crashGapMs: azureScale(600_000),
    gapAfter: () => azureScale(330_000),
  },
  {
    // The pool's 30 s visibility brings a crashed message back; a retry is released with the verdict's delay.
    label: 'local',
    schedule: localSchedule(PARITY_MAX_RECEIVE_COUNT),
    crashGapMs: azureScale(30_000),
    gapAfter: (_attempt, v) => settableGap(v, 0),
  },
];

/** Crash right after the claim, then follow `transport`'s schedule until the job is done or the deliveries run out. */
async function crashThenRedeliver(ctx: ScenarioContext, transport: ScaledTransport, source: SourceRef, row: number, col: number) {
  ctx.phase(transport.label);
  const job = ctx.jobFor(transport.label, source, row, col);
  await ctx.send([job]);
  const d1 = await receiveOne(ctx, CRASH_VISIBILITY_MS);
  const answers = [resultKind(await ctx.deliver(d1, 'w1', { fault: { crashAfter: 'claim' } }))];
  let gap = transport.crashGapMs;
  let last: Delivery = d1;
  for (let attempt = 2; attempt <= PARITY_MAX_RECEIVE_COUNT; attempt++) {
    ctx.clock.advance(gap);
    const d = attempt === 2 ? await ctx.redeliver() : await receiveOne(ctx);
    last = d;
    const r = await ctx.deliver(d, `w${attempt}`, { schedule: transport.schedule });
    answers.push(resultKind(r));
    await ctx.settle(d, r);
    if (r.kind === 'ack') break;
    gap = transport.gapAfter(attempt, r);
  }
  ctx.fact(`${transport.label}:answers`, answers);
  ctx.fact(`${transport.label}:sameMessage`, last.deliveryId === d1.deliveryId);
}

/** Fan out without enqueueing: scenario 26 counts fan-outs per scene, not tile jobs. */
const noTileQueue = { name: 'none', sendBatch: async () => {} };

/** The verdict of one failed scene record, as every trigger classifies it. */
function recordFailure(error: unknown): RecordFailure {
  const err = error instanceof Error ? error : new Error(String(error));
  return err instanceof TesseraError && !err.retryable ? { kind: 'poison', error: err } : { kind: 'retry', error: err };
}

export const TRANSPORT_SCENARIOS: readonly Scenario[] = [
  {
    id: '24',
    title: "death after claim, then redeliveries on each transport's own schedule: the job completes and nothing is dead-lettered",
    async run(ctx) {
      // One scene per transport (its own source object), window 0_0 of each.
      for (const transport of SCALED_TRANSPORTS) {
        await crashThenRedeliver(ctx, transport, await ctx.stage(`incoming/${transport.label}.tif`), 0, 0);
      }
      ctx.phase('');
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: {
        'sqs:crashed': 1,
        'sqs:ack:written': 1,
        'sqs-last-receive:crashed': 1,
        'sqs-last-receive:ack:written': 1,
        'pubsub:crashed': 1,
        'pubsub:ack:written': 1,
        'azure-queue:crashed': 1,
        'azure-queue:retry': 1,
        'azure-queue:ack:written': 1,
        'local:crashed': 1,
        'local:retry': 1,
        'local:ack:written': 1,
      },
      outputs: SCALED_TRANSPORTS.flatMap((t) => tiles(t.label, '0_0')).sort(),
      counters: { claimed: 10, 'claim-rejected': 4, 'lease-taken-over': 5, written: 5, committed: 5 },
      // Taken over before the transport ran out of deliveries (pubsub, sqs-last-receive): committed under the earlier
      // attempt's owner (w1). Waited out (azure-queue, local) or back after the lease (sqs): claimed by a later delivery.
      claims: [
        committed('azure-queue/0_0', 'azure-queue/0_0#m1@w3'),
        committed('local/0_0', 'local/0_0#m1@w3'),
        committed('pubsub/0_0', 'pubsub/0_0#m1@w1'),
        committed('sqs-last-receive/0_0', 'sqs-last-receive/0_0#m1@w1'),
        committed('sqs/0_0', 'sqs/0_0#m1@w2'),
      ],
      facts: {
        'sqs:answers': ['crashed', 'ack:written'],
        'sqs:sameMessage': true,
        'sqs-last-receive:answers': ['crashed', 'ack:written'],
        'sqs-last-receive:sameMessage': true,
        'pubsub:answers': ['crashed', 'ack:written'],
        'pubsub:sameMessage': true,
        'azure-queue:answers': ['crashed', 'retry', 'ack:written'],
        'azure-queue:sameMessage': true,
        'local:answers': ['crashed', 'retry', 'ack:written'],
        'local:sameMessage': true,
        deadLetters: [],
      },
    }),
  },
  {
    id: '25',
    title: 'a poison job is dead-lettered by its first delivery, one entry, beside good jobs that complete',
    async run(ctx) {
      const scene = await ctx.stage();
      const readme = await ctx.stage('incoming/readme.tif', new TextEncoder().encode('a text file named like a GeoTIFF'));
      const notJson = 'this is not a tile job';
      ctx.nameBody(notJson, 'not-json');
      await ctx.queue.sendBatch([
        toJobMessage(ctx.jobFor('A', scene, 0, 0)),
        toJobMessage(ctx.jobFor('not-a-raster', readme, 0, 0)),
        { jobKey: 'not-a-tile-job', body: notJson },
        toJobMessage(ctx.jobFor('A', scene, 1, 1)),
      ]);
      await drainCountingDeliveries(ctx, 'w1');
      return ctx.record();
    },
    expected: outcome({
      calls: { 'ack:written': 2, poison: 2 },
      outputs: tiles('A', '0_0', '1_1'),
      counters: { claimed: 3, written: 2, committed: 2, poison: 2 },
      alarms: { 'poison-message': 2 },
      claims: [
        committed('A/0_0', 'A/0_0#m1@w1'),
        committed('A/1_1', 'A/1_1#m1@w1'),
        // The not-a-raster job claimed, failed to read and gave its claim back.
        { job: 'not-a-raster/0_0', state: 'CLAIMED', owner: 'not-a-raster/0_0#m1@w1', lapsed: true },
      ],
      facts: {
        deadLetters: ['not-a-raster/0_0', 'not-json'],
        deliveriesPerMessage: { 'A/0_0#m1': 1, 'A/1_1#m1': 1, 'not-a-raster/0_0#m1': 1, 'not-json#m1': 1 },
      },
    }),
  },
  {
    id: '26',
    title: 'a message of three scene records, one bad: each good scene fans out once, only the bad record is dead-lettered, alone',
    async run(ctx) {
      const good1 = await ctx.stage('incoming/one.tif');
      const bad = await ctx.stage('incoming/readme.tif', new TextEncoder().encode('a text file named like a GeoTIFF'));
      const good2 = await ctx.stage('incoming/two.tif');
      const labels = new Map([
        [good1.key, 'one'],
        [bad.key, 'readme'],
        [good2.key, 'two'],
      ]);
      const batch = JSON.stringify({ records: [good1, bad, good2] });
      ctx.nameBody(batch, 'batch of 3');
      await ctx.queue.sendBatch([{ jobKey: 'scene-batch', body: batch }]);
      const fanOuts = new Map<string, number>();
      const verdicts: string[] = [];
      for (let round = 0; round < 2 * PARITY_MAX_RECEIVE_COUNT; round++) {
        const got = await ctx.queue.receive(1, 30_000);
        if (got.length === 0) break;
        const d = got[0] as Delivery;
        const records = (JSON.parse(d.body) as { records: SourceRef[] }).records;
        const verdict = await settleRecords(
          records,
          async (source) => {
            const label = labels.get(source.key) ?? source.key;
            fanOuts.set(label, (fanOuts.get(label) ?? 0) + 1);
            try {
              const r = await asRole('scene', () => fanOutScene({ ...ctx.backend, queue: noTileQueue }, { source, params: PARITY_PARAMS }));
              ctx.registerScene(label, source, PARITY_PARAMS, r.grid);
              ctx.note(`fan-out:${r.manifest}`);
              return undefined;
            } catch (error) {
              return recordFailure(error);
            }
          },
          {
            // Each failed record alone, as a message of its own: its next delivery settles it as any delivery.
            deadLetter: async (source) => {
              const alone = JSON.stringify({ records: [source] });
              ctx.nameBody(alone, `${labels.get(source.key)} alone`);
              await ctx.queue.sendBatch([{ jobKey: 'scene-record', body: alone }]);
            },
            requeue: async (source) => {
              await ctx.queue.sendBatch([{ jobKey: 'scene-record', body: JSON.stringify({ records: [source] }) }]);
            },
          },
          ctx.backend.telemetry,
        );
        verdicts.push(verdict.kind === 'ack' ? `ack (${verdict.done} done, ${verdict.deadLettered} alone)` : verdict.failure.kind);
        // As a trigger settles it: ack, or the one record's failure (poison: dead-lettered at once).
        if (verdict.kind === 'ack') await ctx.queue.ack(d);
        else await ctx.settle(d, verdict.failure);
      }
      ctx.phase('');
      ctx.fact('verdicts', verdicts);
      ctx.fact('fanOutsPerRecord', Object.fromEntries([...fanOuts].sort(([x], [y]) => (x < y ? -1 : 1))));
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:written': 2 },
      outputs: ['one/scene.json', 'two/scene.json'],
      counters: { enqueued: 8 },
      facts: {
        verdicts: ['ack (2 done, 1 alone)', 'poison'],
        fanOutsPerRecord: { one: 1, readme: 2, two: 1 },
        deadLetters: ['readme alone'],
      },
    }),
  },
  {
    id: '27',
    title: 'a band index beyond the raster is poison: the scene is refused before any claim, a tile job naming it is dead-lettered at once',
    async run(ctx) {
      const source = await ctx.stage();
      // The synthetic scene has two bands; band 3 does not exist.
      const params = { ...PARITY_PARAMS, bands: { B04: 1, B08: 3 } };
      try {
        await ctx.fanOut('scene', { source, params });
        ctx.note('fan-out:accepted');
      } catch (error) {
        ctx.note(`fan-out:refused:${error instanceof TesseraError && !error.retryable ? error.code : 'retryable'}`);
      }
      // A job naming the band anyway (a replay with edited parameters): poison at its first delivery, never a retry.
      await ctx.send([ctx.jobFor('job', source, 0, 0, { kind: 'create' }, params)]);
      const deliveries: number[] = [];
      await ctx.drain('w1', { onResult: (d) => void deliveries.push(d.receiveCount) });
      ctx.fact('deliveries', deliveries);
      ctx.fact('deadLetters', await ctx.deadLetters());
      return ctx.record();
    },
    expected: outcome({
      calls: { 'fan-out:refused:INVALID_PARAMS': 1, poison: 1 },
      counters: { claimed: 1, poison: 1 },
      alarms: { 'poison-message': 1 },
      claims: [{ job: 'job/0_0', state: 'CLAIMED', owner: 'job/0_0#m1@w1', lapsed: true }],
      facts: { deliveries: [1], deadLetters: ['job/0_0'] },
    }),
  },
];
