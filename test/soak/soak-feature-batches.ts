import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import avro from 'avsc';
import { postgresPool } from '../../functions/postgres/connection.js';
import { PostgisFeatureBatchSink } from '../../functions/postgres/postgis-feature-batch-sink.js';
import { withClockSkewMargin } from '../../shared/app/clock-skew.js';
import { type BatchBackend, type BatchHooks, type BatchVerdict, handleBatchDelivery } from '../../shared/app/feature-batch.js';
import { poisonReason } from '../../shared/app/poison.js';
import type { RedeliverySchedule } from '../../shared/app/redelivery.js';
import { TesseraError } from '../../shared/domain/errors.js';
import { batchEventBody, batchJobKey, batchOutputUri, DEFAULT_BATCH_PARAMS, type RejectReason } from '../../shared/domain/feature-batch.js';
import type { SourceRef } from '../../shared/domain/job-key.js';
import { streamKeys } from '../../shared/domain/key-layout.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import type { FeatureBatchSink } from '../../shared/ports/feature-batch-sink.port.js';
import type { Delivery, JobMessage } from '../../shared/ports/job-queue.port.js';
import type { BackendName } from '../parity/backends.js';
import { deferred, LEASE_MS, type ScenarioContext } from '../parity/harness.js';
import type { PostgresEndpoints } from '../support/emulators/types.js';
import { asRole, bindRole } from '../support/function-role.js';
import { firehoseParquet } from '../support/parquet-batch.js';
import { PgFaultProxy } from '../support/pg-fault-proxy.js';
import { type FaultKind, type FaultSchedule, FORCE_DELIVERIES_FROM } from './fault-schedule.js';

/**
 * Feature batches under the soak (issue 28, docs/feature-batches.md, docs/soak.md "Feature batches"): generated AIS-like
 * batch objects landed under `streams/` of the backend's source store, one batch event per object on the backend's
 * own queue, each delivery run through `handleBatchDelivery` as the `stream` role with the backend's claim store
 * (and, on a cloud, the clock-skew margin its compose wires) and a PostGIS batch sink behind a wire fault proxy: the
 * path parity rows 85-89 drive. The faults are the ones a batch can meet (below); the oracle (`judge`) reads the
 * backend's own PostGIS schema record by record, its claim rows, its dead letters and its alarms.
 *
 * What is generated (seeded, one PRNG stream per event): 2-4 consecutive objects of one stream (15-40 lines each)
 * in the formats the backend's cloud lands (NDJSON, Firehose's gzip or its Parquet; Pub/Sub's text or Avro `data`; Capture's
 * Avro `Body`, deflate or null codec), with bad lines (no position, out of range, unparsable, epoch seconds),
 * blank lines, records repeated from the object before (a producer's retry: byte for byte, or re-serialised with
 * other key order, spacing and number spelling; a record with a given id sometimes with another speed), and as
 * drawn a poison object (a broken or truncated gzip stream, an Avro container cut short or with a wrong sync marker,
 * a Parquet file cut short in its footer).
 * The oracle computes every record's identity itself (SHA-256 of the pipeline and the given id, or of the sorted-key
 * JSON the generator built), never with the product's code.
 */

/** The pipeline every backend's stream function runs (streamSettings): the soak runs it as deployed. */
const PARAMS = DEFAULT_BATCH_PARAMS;
const RETENTION_MS = 7 * 86_400_000;

/** A transport's schedule and gaps as the driver scales them (soak-driver.ts `transportOf`). */
export interface BatchTransport {
  readonly schedule: RedeliverySchedule;
  readonly retryGapMs: number;
  readonly crashGapMs: number;
}

/** The batch fault kinds that ride one delivery, drawn with these cumulative probabilities (about a third of deliveries). */
const DELIVERY_FAULTS: readonly [FaultKind, number][] = [
  ['batch-crash-after-claim', 0.05],
  ['batch-crash-after-insert', 0.06],
  ['batch-zombie', 0.04],
  ['batch-lost-insert-answer', 0.05],
  ['batch-connection-lost', 0.05],
  ['batch-lost-commit-answer', 0.05],
];

/** Every way the record-level oracle can find the end state wrong: each one a count in the report, each must be 0. */
export const BATCH_ANOMALY_KINDS = [
  'missing-record',
  'duplicate-record',
  'foreign-record',
  'poison-record',
  'misattributed-record',
  'record-count',
  'view-count',
  'unexplained-reject',
  'missing-reject',
  'batch-not-done',
  'batch-done-twice',
  'batch-row-wrong',
  'unknown-batch',
  'poison-done',
  'poison-not-dead-lettered',
  'good-batch-dead-lettered',
  'wrong-verdict',
  'false-alarm',
] as const;
export type BatchAnomalyKind = (typeof BATCH_ANOMALY_KINDS)[number];

/** One backend's feature batches in reports/soak.json. */
export interface FeatureBatchReport {
  /** Batch events of the plan (each a few consecutive objects of one stream). */
  readonly events: number;
  /** Readable batch objects landed, and unreadable (poison) ones. */
  readonly objects: number;
  readonly poisonObjects: number;
  /** Objects by the format they were landed in. */
  readonly formats: Readonly<Record<string, number>>;
  /** Deliveries of batch events (first deliveries, duplicates and redeliveries), and of those the redeliveries. */
  readonly deliveries: number;
  readonly redeliveries: number;
  /** Lines (NDJSON) or records (Avro) of the readable objects, by what they are. */
  readonly validLines: number;
  readonly badLines: number;
  readonly blankLines: number;
  /** Distinct valid records (by identity), and valid lines that repeat a record another line carried. */
  readonly distinctRecords: number;
  readonly repeatedLines: number;
  /** What PostGIS holds afterwards. */
  readonly recordRows: number;
  readonly rejectRows: number;
  readonly batchRows: number;
  readonly deadLettered: number;
  readonly anomalies: Readonly<Record<BatchAnomalyKind, number>>;
}

export interface SoakBatchHooks {
  fired(kind: FaultKind, n?: number): void;
  /** Messages put on the queue, and messages settled for good (acked or dead-lettered): the driver's size accounting. */
  sent(n: number): void;
  finished(): void;
  /** Deliveries made so far on the backend (every path's). */
  deliveries(): number;
}

export interface SoakBatchOptions {
  readonly name: BackendName;
  readonly ctx: ScenarioContext;
  readonly postgres: PostgresEndpoints;
  readonly transport: BatchTransport;
  /** The clock-skew margin the backend's compose wires on its claim store (0 locally). */
  readonly skewMarginMs: number;
  readonly schedule: FaultSchedule;
  /** A PRNG stream of the run's seed per purpose (soak-driver.ts `prng`). */
  readonly random: (stream: string) => () => number;
  readonly enabled: (kind: FaultKind) => boolean;
  readonly hooks: SoakBatchHooks;
  /** Progress and trace lines (TESSERA_SOAK_TRACE=B12 prints every delivery of the batches whose label starts so). */
  readonly say: (line: string) => void;
  /** A deliberately broken sink (the oracle's own test). Never set by `npm run soak`. */
  readonly mutant?: ((sink: FeatureBatchSink) => FeatureBatchSink) | undefined;
}

type Format = 'ndjson' | 'ndjson+gzip' | 'avro-capture' | 'avro-pubsub' | 'parquet';
type PoisonVariant = 'broken-gzip' | 'truncated-gzip' | 'avro-cut-short' | 'avro-bad-sync' | 'parquet-cut-short';

/** One batch object the soak landed: what every line of it is, and what became of its deliveries. */
interface BatchObject {
  readonly label: string;
  readonly source: SourceRef;
  readonly batchKey: string;
  readonly body: string;
  readonly format: Format;
  readonly poison: PoisonVariant | undefined;
  /** Valid records: identity -> the lines carrying it. */
  readonly records: Map<string, number[]>;
  readonly validLines: number;
  /** Bad lines: line -> the reason it must be rejected with. */
  readonly bad: Map<number, RejectReason>;
  readonly blankLines: number;
  readonly deliveryIds: Set<string>;
  /** Each answer its deliveries gave (a zombie's included): `inserted`, `already-done`, `poison:CODE`, ... */
  readonly verdicts: string[];
}

/** A worker frozen mid-batch past its lease, whose message was handed out again; it resumes later. */
interface Zombie {
  readonly resumeAt: number;
  readonly object: BatchObject;
  resume(): void;
  readonly done: Promise<BatchVerdict>;
}

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
const int = (rnd: () => number, lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));
const pick = <T>(rnd: () => number, items: readonly T[]): T => items[Math.floor(rnd() * items.length)] as T;

/** JSON with sorted keys: RFC 8785 for the plain values the generator makes (ASCII keys, strings, short decimals). */
const sortedJson = (record: Readonly<Record<string, unknown>>): string =>
  JSON.stringify(Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1))));

/** A record's identity by the rule of docs/feature-batches.md, computed here from what the generator made. */
function identity(record: Readonly<Record<string, unknown>>): string {
  const id = record.id;
  return sha256(`${PARAMS.pipeline}\n${id === undefined ? `record\n${sortedJson(record)}` : `id\n${String(id)}`}`);
}

/** The same record as another writer spells it: keys in another order, spaces, decimals with a trailing zero. */
function reserialised(record: Readonly<Record<string, unknown>>, rnd: () => number): string {
  const entries = Object.entries(record);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [entries[i], entries[j]] = [entries[j] as [string, unknown], entries[i] as [string, unknown]];
  }
  const value = (v: unknown): string => (typeof v === 'number' && !Number.isInteger(v) ? `${String(v)}0` : JSON.stringify(v));
  return `{ ${entries.map(([k, v]) => `${JSON.stringify(k)}: ${value(v)}`).join(', ')} }`;
}

/** The Avro schema Event Hubs Capture writes (the event in `Body`), as test/unit/app/batch-decode.test.ts has it. */
const CAPTURE_SCHEMA = avro.Type.forSchema({
  type: 'record',
  name: 'EventData',
  namespace: 'Microsoft.ServiceBus.Messaging',
  fields: [
    { name: 'SequenceNumber', type: 'long' },
    { name: 'Offset', type: 'string' },
    { name: 'EnqueuedTimeUtc', type: 'string' },
    { name: 'SystemProperties', type: { type: 'map', values: ['long', 'double', 'string', 'bytes'] } },
    { name: 'Properties', type: { type: 'map', values: ['long', 'double', 'string', 'bytes', 'null'] } },
    { name: 'Body', type: ['null', 'bytes'] },
  ],
} as avro.Schema);

/** A Pub/Sub Cloud Storage subscription's Avro records (the message in `data`). */
const PUBSUB_SCHEMA = avro.Type.forSchema({
  type: 'record',
  name: 'PubsubMessage',
  fields: [
    { name: 'subscription_name', type: 'string' },
    { name: 'message_id', type: 'string' },
    { name: 'publish_time', type: 'long' },
    { name: 'attributes', type: { type: 'map', values: 'string' } },
    { name: 'data', type: 'bytes' },
  ],
} as avro.Schema);

async function avroContainer(type: avro.Type, records: readonly object[], codec: 'null' | 'deflate'): Promise<Uint8Array> {
  // Small blocks, so a container has several and a cut lands inside one.
  const encoder = new avro.streams.BlockEncoder(type, { codec, blockSize: 512 });
  const chunks: Buffer[] = [];
  encoder.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<void>((resolve, reject) => {
    encoder.on('end', resolve);
    encoder.on('error', reject);
  });
  for (const r of records) encoder.write(r);
  encoder.end();
  await done;
  return new Uint8Array(Buffer.concat(chunks));
}

/** What each backend's cloud lands a stream as (docs/feature-batches.md, "Formats"), with the odds of each. */
const FORMATS: Readonly<Record<BackendName, readonly [Format, number][]>> = {
  local: [
    ['ndjson', 0.4],
    ['ndjson+gzip', 0.4],
    ['parquet', 0.2],
  ],
  // Firehose: NDJSON, gzip'd or not, or Parquet with record format conversion.
  aws: [
    ['ndjson', 0.3],
    ['ndjson+gzip', 0.4],
    ['parquet', 0.3],
  ],
  gcp: [
    ['ndjson', 0.6],
    ['avro-pubsub', 0.4],
  ],
  azure: [
    ['avro-capture', 0.8],
    ['ndjson', 0.2],
  ],
};

/** The ways an object is not a batch at all, in the order a backend's poison objects take them. */
const POISON: Readonly<Record<BackendName, readonly PoisonVariant[]>> = {
  local: ['broken-gzip', 'parquet-cut-short', 'truncated-gzip'],
  aws: ['parquet-cut-short', 'broken-gzip', 'truncated-gzip'],
  gcp: ['avro-cut-short', 'broken-gzip', 'avro-bad-sync'],
  azure: ['avro-cut-short', 'avro-bad-sync', 'truncated-gzip'],
};

/** One line of a generated object before it is encoded. */
type Line =
  | { readonly kind: 'record'; readonly text: string; readonly id: string }
  | { readonly kind: 'bad'; readonly text: string | null; readonly reason: RejectReason }
  | { readonly kind: 'blank'; readonly text: string };

export class SoakFeatureBatches {
  readonly #o: SoakBatchOptions;
  readonly #ctx: ScenarioContext;
  readonly #proxy: PgFaultProxy;
  readonly #pool: ReturnType<typeof postgresPool>;
  readonly #sink: PostgisFeatureBatchSink;
  readonly #backend: BatchBackend;
  readonly #draw: () => number;
  readonly #objects: BatchObject[] = [];
  readonly #byBody = new Map<string, BatchObject>();
  readonly #byKey = new Map<string, BatchObject>();
  readonly #dueAt = new Map<string, number>();
  /** Messages whose worker died once already (a worker dies at most once per message, on its first delivery). */
  readonly #crashed = new Set<string>();
  readonly #zombies: Zombie[] = [];
  readonly #zombieBatches = new Set<string>();
  readonly #delayed: { at: number; message: JobMessage }[] = [];
  #events = 0;
  #workers = 0;
  #poisons = 0;
  #sent = 0;
  #settled = 0;
  #deliveries = 0;
  #redeliveries = 0;

  private constructor(o: SoakBatchOptions, proxy: PgFaultProxy, directUrl: string) {
    this.#o = o;
    this.#ctx = o.ctx;
    this.#proxy = proxy;
    this.#draw = o.random(`batch-deliveries:${o.name}`);
    // The pool a deployed stream function makes (its error listener included), through the wire fault proxy.
    this.#pool = postgresPool(proxy.urlFor(directUrl), { telemetry: o.ctx.backend.telemetry });
    this.#sink = new PostgisFeatureBatchSink(this.#pool, { migrateOnFirstUse: true });
    const claims = bindRole(o.ctx.backend.claims, 'stream');
    // Every delivery runs in no FakeClock time, so a lease keeper never has a renewal due; a frozen zombie renews nothing.
    const clock: Clock = { now: () => o.ctx.clock.now(), every: () => () => {} };
    this.#backend = {
      claims: o.skewMarginMs > 0 ? withClockSkewMargin(claims, o.skewMarginMs) : claims,
      sources: bindRole(o.ctx.sources, 'stream'),
      batches: o.mutant ? o.mutant(this.#sink) : this.#sink,
      clock,
      telemetry: o.ctx.backend.telemetry,
    };
  }

  /** The backend's batch path: a sink on its PostGIS schema (the parity one) behind a fault proxy of its own. */
  static async start(o: SoakBatchOptions): Promise<SoakFeatureBatches> {
    const directUrl = o.ctx.features.pool.options.connectionString;
    if (directUrl === undefined) throw new Error('the parity feature pool has no connection string');
    const proxy = await PgFaultProxy.start({ host: '127.0.0.1', port: o.postgres.port });
    const b = new SoakFeatureBatches(o, proxy, directUrl);
    await b.#sink.migrate();
    return b;
  }

  async close(): Promise<void> {
    await this.#pool.end();
    await this.#proxy.stop();
  }

  /** Whether a message body is one of this soak's batch events (the driver hands those deliveries here). */
  owns(body: string): boolean {
    return this.#byBody.has(body);
  }

  /** Whether a claim row is a batch's (judged here, not as a tile's). */
  ownsClaim(jobId: string): boolean {
    return this.#byKey.has(jobId);
  }

  /** Whether a log line is the batch path's (its alarms are judged here). */
  ownsLog(l: { readonly batchKey?: unknown; readonly key?: unknown }): boolean {
    return (
      (typeof l.batchKey === 'string' && this.#byKey.has(l.batchKey)) || (typeof l.key === 'string' && l.key.startsWith(streamKeys.root()))
    );
  }

  /** A dead letter the batch path explains: a poison object's event. */
  explainsDeadLetter(body: string): boolean {
    return this.#byBody.get(body)?.poison !== undefined;
  }

  /**
   * Whether the plan should make a batch event now: a batch delivery kind has not fired yet and no batch message is
   * out (its deliveries would carry it), so that every kind fires in a short run too.
   */
  wantsEvent(): boolean {
    return this.#o.schedule.pendingBatchDeliveryKinds().length > 0 && this.#sent === this.#settled && this.#delayed.length === 0;
  }

  /** When the next delayed duplicate or zombie is due (in deliveries). */
  nextAt(): number {
    return Math.min(...this.#delayed.map((x) => x.at), ...this.#zombies.map((z) => z.resumeAt), Number.POSITIVE_INFINITY);
  }

  /** Send the delayed duplicates and resume the zombies due by `limit` deliveries. */
  async fireDue(limit: number): Promise<boolean> {
    let fired = false;
    for (const x of this.#delayed.filter((y) => y.at <= limit)) {
      this.#delayed.splice(this.#delayed.indexOf(x), 1);
      await this.#send([x.message]);
      fired = true;
    }
    for (const z of this.#zombies.filter((y) => y.resumeAt <= limit)) {
      this.#zombies.splice(this.#zombies.indexOf(z), 1);
      z.resume();
      // Its message is no longer its own (handed out again): its answer is recorded, never settled.
      z.object.verdicts.push(`zombie:${verdictOf(await z.done)}`);
      fired = true;
    }
    return fired;
  }

  /**
   * A batch event of the plan: 2-4 consecutive objects of one stream landed under `streams/`, one event each on the
   * queue; as drawn (or forced by the schedule) some events sent again (`duplicate-batch-event`), now or later, and a
   * poison object beside them (`poison-batch`).
   */
  async event(label: string, want: (k: FaultKind, p: number) => boolean): Promise<void> {
    this.#events++;
    const rnd = this.#o.random(`batch-event:${this.#o.name}:${label}`);
    const duplicates = want('duplicate-batch-event', 0.35);
    const poison = want('poison-batch', 0.25);
    const base = Date.UTC(2025, 5, 1) + this.#events * 3_600_000;
    let seq = 0;
    const fresh = (): Record<string, unknown> => {
      seq++;
      const r: Record<string, unknown> = {
        [rnd() < 0.85 ? 'vessel' : 'mmsi']: 219_000_000 + int(rnd, 0, 40),
        // Unique per record of the backend (an hour per event, a second per record): distinct canonical JSON.
        time: rnd() < 0.5 ? new Date(base + seq * 1_000).toISOString() : base + seq * 1_000,
        lon: Math.round((3 + rnd() * 9) * 1e4) / 1e4,
        lat: Math.round((53 + rnd() * 5) * 1e4) / 1e4,
      };
      if (rnd() < 0.7) r.speed = Math.round(rnd() * 250) / 10;
      if (rnd() < 0.3) r.id = `${label}-${seq}`;
      return r;
    };
    // Larger while a batch delivery kind has not fired: more first deliveries to carry it.
    const k = this.#o.schedule.pendingBatchDeliveryKinds().length > 0 ? int(rnd, 3, 4) : int(rnd, 2, 4);
    const made: { name: string; lines: Line[]; format: Format; poison?: PoisonVariant }[] = [];
    let before: Record<string, unknown>[] = [];
    for (let j = 1; j <= k + (poison ? 1 : 0); j++) {
      const isPoison = poison && j === k + 1;
      const format = pickWeighted(rnd, FORMATS[this.#o.name]);
      const avro = format === 'avro-capture' || format === 'avro-pubsub';
      // Records, not lines: no blank ones (a Parquet row or an Avro record is never blank).
      const framed = avro || format === 'parquet';
      const lines: Line[] = [];
      const mine: Record<string, unknown>[] = [];
      const n = int(rnd, 15, 40);
      for (let i = 0; i < n; i++) {
        const roll = rnd();
        if (roll < 0.09) lines.push(badLine(rnd, base + i, avro && format === 'avro-capture'));
        else if (roll < 0.12 && !framed) lines.push({ kind: 'blank', text: pick(rnd, ['', '  ', '\r']) });
        else if (roll < 0.24 && before.length > 0 && !isPoison) {
          // The producer's retry: a record of the object before, again (as is, or re-serialised; an id'd one maybe changed).
          const r = pick(rnd, before);
          const changed = r.id !== undefined && rnd() < 0.5 ? { ...r, speed: ((r.speed as number | undefined) ?? 0) + 0.5 } : r;
          lines.push({ kind: 'record', text: rnd() < 0.5 ? JSON.stringify(changed) : reserialised(changed, rnd), id: identity(r) });
          mine.push(r);
        } else if (roll < 0.26 && mine.length > 0) {
          // The same record twice in one object.
          const r = pick(rnd, mine);
          lines.push({ kind: 'record', text: JSON.stringify(r), id: identity(r) });
        } else {
          const r = fresh();
          lines.push({ kind: 'record', text: JSON.stringify(r), id: identity(r) });
          mine.push(r);
        }
      }
      const ext =
        format === 'ndjson'
          ? pick(rnd, ['.ndjson', ''])
          : format === 'ndjson+gzip'
            ? pick(rnd, ['.gz', ''])
            : format === 'parquet'
              ? pick(rnd, ['.parquet', ''])
              : '.avro';
      const variants = POISON[this.#o.name];
      made.push({
        name: `soak/${label}/part-${String(j).padStart(4, '0')}${isPoison ? '-p' : ''}${ext}`,
        lines,
        format,
        ...(isPoison ? { poison: variants[this.#poisons++ % variants.length] as PoisonVariant } : {}),
      });
      if (!isPoison) before = mine;
    }
    const messages: JobMessage[] = [];
    let copies = 0;
    for (const [j, m] of made.entries()) {
      const bytes = await encode(m.format, m.lines, m.poison, rnd);
      const o = await this.#land(`${label}.${m.poison === undefined ? j + 1 : 'p'}`, streamKeys.batch(m.name), bytes, m);
      const message = { jobKey: o.batchKey, body: o.body };
      messages.push(message);
      if (m.poison !== undefined) {
        this.#o.hooks.fired('poison-batch');
        continue;
      }
      // At-least-once notifications: the same object's event again, at once (racing) or later. The schedule's forced
      // kind rides the first object; a poison object is never duplicated (its dead letter is judged one by one).
      const extra = duplicates && (j === 0 || rnd() < 0.4) ? int(rnd, 1, 2) : 0;
      for (let c = 0; c < extra; c++) {
        if (rnd() < 0.5) messages.push(message);
        else this.#delayed.push({ at: this.#o.hooks.deliveries() + int(rnd, 0, 20), message });
      }
      copies += extra;
    }
    if (copies > 0) this.#o.hooks.fired('duplicate-batch-event', copies);
    await this.#send(messages);
  }

  /** Stage one object (the operator's upload: what Firehose, a subscription or Capture does) and remember what it is. */
  async #land(
    label: string,
    key: string,
    bytes: Uint8Array,
    m: { lines: readonly Line[]; format: Format; poison?: PoisonVariant },
  ): Promise<BatchObject> {
    const source = await this.#ctx.stage(key, bytes);
    const batchKey = batchJobKey(source, PARAMS);
    const body = batchEventBody(source);
    const records = new Map<string, number[]>();
    const bad = new Map<number, RejectReason>();
    let validLines = 0;
    let blankLines = 0;
    m.lines.forEach((l, i) => {
      const line = i + 1;
      if (l.kind === 'record') {
        validLines++;
        records.set(l.id, [...(records.get(l.id) ?? []), line]);
      } else if (l.kind === 'bad') bad.set(line, l.reason);
      else blankLines++;
    });
    const o: BatchObject = {
      label,
      source,
      batchKey,
      body,
      format: m.format,
      poison: m.poison,
      records,
      validLines,
      bad,
      blankLines,
      deliveryIds: new Set(),
      verdicts: [],
    };
    this.#objects.push(o);
    this.#byBody.set(body, o);
    this.#byKey.set(batchKey, o);
    this.#ctx.labelJob(batchKey, label);
    this.#ctx.nameBody(body, label);
    return o;
  }

  #trace(o: BatchObject, line: string): void {
    const want = process.env.TESSERA_SOAK_TRACE;
    if (want && o.label.startsWith(want)) this.#o.say(`${this.#o.name} ${o.label}: ${line}`);
  }

  async #send(messages: readonly JobMessage[]): Promise<void> {
    if (messages.length === 0) return;
    await this.#ctx.queue.sendBatch(messages);
    this.#sent += messages.length;
    this.#o.hooks.sent(messages.length);
  }

  /** One delivery of a batch event, with this draw's fault, settled as its platform settles it. */
  async deliver(d: Delivery): Promise<void> {
    const ctx = this.#ctx;
    const { transport, schedule, enabled, hooks } = this.#o;
    const due = this.#dueAt.get(d.deliveryId);
    // The transport's gap runs on the FakeClock: the message is not seen before it.
    if (due !== undefined && due > ctx.clock.now()) ctx.clock.advance(due - ctx.clock.now());
    const o = this.#byBody.get(d.body);
    if (o === undefined) throw new Error('not a batch event of this soak');
    this.#deliveries++;
    if (d.receiveCount > 1) this.#redeliveries++;
    o.deliveryIds.add(d.deliveryId);
    // A name no other owner contains: the PostgreSQL faults find this delivery's transaction by it (its batch row's owner).
    const worker = `bw${++this.#workers}z`;
    const first = d.receiveCount <= 1 && !this.#crashed.has(d.deliveryId);
    // A poison object meets no fault: it must be dead-lettered at its first delivery, which the oracle checks.
    const eligible = (k: FaultKind): boolean => {
      if (o.poison !== undefined) return false;
      switch (k) {
        case 'batch-crash-after-claim':
        case 'batch-crash-after-insert':
        case 'batch-zombie':
          return first;
        case 'batch-lost-insert-answer':
        case 'batch-connection-lost':
          return d.receiveCount <= 2;
        case 'batch-lost-commit-answer':
          return true;
        default:
          return false;
      }
    };
    let fault = fromTable(DELIVERY_FAULTS, this.#draw());
    if (fault !== undefined && !(enabled(fault) && eligible(fault))) fault = undefined;
    if (fault === undefined && hooks.deliveries() >= FORCE_DELIVERIES_FROM) fault = schedule.pendingBatchDeliveryKinds().find(eligible);
    const release = async (gapMs: number): Promise<void> => {
      this.#dueAt.set(d.deliveryId, ctx.clock.now() + gapMs);
      await ctx.queue.release(d, 0);
    };
    const run = (batchHooks?: BatchHooks): Promise<BatchVerdict> =>
      asRole('stream', () =>
        handleBatchDelivery(
          this.#backend,
          { owner: worker, leaseMs: LEASE_MS, retentionMs: RETENTION_MS, params: PARAMS, hooks: batchHooks },
          { source: o.source, deliveryId: d.deliveryId, receiveCount: d.receiveCount, schedule: transport.schedule },
        ),
      );

    this.#trace(o, `${d.deliveryId.slice(0, 8)} receive ${d.receiveCount} worker ${worker} fault ${fault ?? '-'}`);
    if (fault === 'batch-crash-after-claim' || fault === 'batch-crash-after-insert') {
      // The function dies there: nothing after it runs, its message comes back after the platform's visibility.
      const died = deferred<'died'>();
      const die = async (): Promise<void> => {
        died.resolve('died');
        await new Promise<never>(() => {});
      };
      const r = await Promise.race([run(fault === 'batch-crash-after-claim' ? { afterClaim: die } : { afterInsert: die }), died.promise]);
      if (r === 'died') {
        hooks.fired(fault);
        this.#crashed.add(d.deliveryId);
        o.verdicts.push('crashed');
        return release(transport.crashGapMs);
      }
      return this.#settle(d, o, r, release);
    }
    if (fault === 'batch-zombie') {
      // Frozen after its claim or after its insert, past its lease (a timed-out invocation that keeps running): the
      // platform hands the message out again, a later delivery takes the lapsed lease over, and the zombie resumes.
      const gate = deferred();
      const reached = deferred<'reached'>();
      const stall = async (): Promise<void> => {
        reached.resolve('reached');
        await gate.promise;
      };
      const done = run(this.#draw() < 0.5 ? { afterClaim: stall } : { afterInsert: stall });
      const r = await Promise.race([reached.promise, done]);
      if (r !== 'reached') return this.#settle(d, o, r, release);
      hooks.fired(fault);
      this.#crashed.add(d.deliveryId);
      this.#zombieBatches.add(o.batchKey);
      this.#zombies.push({ resumeAt: hooks.deliveries() + int(this.#draw, 1, 15), object: o, resume: () => gate.resolve(), done });
      ctx.clock.advance(LEASE_MS + this.#o.skewMarginMs + 1);
      return release(0);
    }
    let disarm: (() => boolean) | undefined;
    if (fault === 'batch-lost-insert-answer' || fault === 'batch-connection-lost') {
      // On the PostgreSQL wire, in the session of this delivery's batch transaction: its COMMIT's answer lost (the batch
      // is in; the redelivery finds its row), or the connection cut instead of the COMMIT (rolled back; it inserts).
      const shot =
        fault === 'batch-lost-insert-answer'
          ? this.#proxy.loseNextCommitAnswer(`@${worker}`)
          : this.#proxy.cutBeforeNextCommit(`@${worker}`);
      disarm = () => {
        if (shot.hits > 0) return true;
        this.#proxy.disarm(shot);
        return false;
      };
    } else if (fault === 'batch-lost-commit-answer') {
      // The claim store applies the claim's commit and its answer is lost: the SDK's resend must be recognised as its own.
      const shot = this.#o.ctx.claimFaults.loseNextAnswer('commit');
      disarm = () => {
        if (shot.hits > 0) return true;
        shot.remove?.();
        return false;
      };
    }
    let r: BatchVerdict;
    try {
      r = await run();
    } finally {
      // A fault fired if it hit; one this delivery never reached (a duplicate stops at its claim) must not hit a later one.
      if (disarm !== undefined && fault !== undefined && disarm()) hooks.fired(fault);
    }
    return this.#settle(d, o, r, release);
  }

  /** As the platform settles the function's answer: ack, give back after the transport's gap, dead-letter poison at once. */
  async #settle(d: Delivery, o: BatchObject, r: BatchVerdict, release: (gapMs: number) => Promise<void>): Promise<void> {
    o.verdicts.push(verdictOf(r, d.receiveCount));
    this.#trace(
      o,
      `${d.deliveryId.slice(0, 8)} receive ${d.receiveCount} at ${this.#ctx.clock.now()}: ${verdictOf(r)}${r.kind === 'ack' ? '' : ` ${r.error.message}`}`,
    );
    switch (r.kind) {
      case 'ack':
        this.#settled++;
        this.#o.hooks.finished();
        return this.#ctx.queue.ack(d);
      case 'retry':
        return release(r.delayMs ?? this.#o.transport.retryGapMs);
      case 'poison':
        this.#settled++;
        this.#o.hooks.finished();
        return this.#ctx.queue.deadLetter(d, poisonReason(r.error));
      default: {
        const never: never = r;
        throw new Error(`unknown batch verdict ${JSON.stringify(never)}`);
      }
    }
  }

  /**
   * The record-level oracle, after the drain, from the backend's own PostGIS schema, claim store, dead letters and logs:
   * - every valid record generated (by identity) exactly once in `feature_records`, the row count (and the H3 view's
   *   total) equal to the distinct valid records, each row naming a batch and line that carry its record, no record of
   *   a poison object;
   * - every `feature_rejects` row a generated bad line (batch key, line, reason), every bad line rejected once;
   * - every readable object done exactly once: one batch row with its counts, format and version, its claim COMMITTED,
   *   at most one delivery that inserted it; a poison object never done, dead-lettered once, poison
   *   (`BATCH_UNREADABLE`) at its first delivery, and no readable object dead-lettered;
   * - no alarm but a zombie's `lease-stolen` (another owner holds the row) and a poison object's `poison-batch`.
   */
  async judge(deadLetters: readonly JobMessage[]): Promise<{ report: FeatureBatchReport; anomalies: string[] }> {
    const pool = this.#ctx.features.pool;
    const anomalies: string[] = [];
    const counts = Object.fromEntries(BATCH_ANOMALY_KINDS.map((k) => [k, 0])) as Record<BatchAnomalyKind, number>;
    const flag = (kind: BatchAnomalyKind, line: string) => {
      counts[kind]++;
      anomalies.push(`feature-batches ${kind}: ${line}`);
    };
    const good = this.#objects.filter((o) => o.poison === undefined);
    const poison = this.#objects.filter((o) => o.poison !== undefined);
    const expected = new Map<string, { batchKey: string; line: number }[]>();
    for (const o of good)
      for (const [id, lines] of o.records)
        expected.set(id, [...(expected.get(id) ?? []), ...lines.map((line) => ({ batchKey: o.batchKey, line }))]);
    const poisonIds = new Map<string, string>();
    for (const o of poison) for (const id of o.records.keys()) if (!expected.has(id)) poisonIds.set(id, o.label);
    const label = (batchKey: string) => this.#byKey.get(batchKey)?.label ?? `batch ${batchKey.slice(0, 12)}`;

    const rows = (
      await pool.query<{ id: string; batch_key: string; line: number }>(
        "SELECT encode(record_id, 'hex') AS id, batch_key, line FROM feature_records",
      )
    ).rows;
    const seen = new Map<string, number>();
    for (const r of rows) {
      seen.set(r.id, (seen.get(r.id) ?? 0) + 1);
      const from = poisonIds.get(r.id);
      if (from !== undefined) flag('poison-record', `record ${r.id.slice(0, 12)} of poison object ${from} is in the table`);
      else if (!expected.has(r.id))
        flag('foreign-record', `record ${r.id.slice(0, 12)} (${label(r.batch_key)}:${r.line}) was never generated as valid`);
      else if (!(expected.get(r.id) ?? []).some((x) => x.batchKey === r.batch_key && x.line === r.line))
        flag('misattributed-record', `record ${r.id.slice(0, 12)} names ${label(r.batch_key)}:${r.line}, which does not carry it`);
    }
    for (const [id, n] of seen) if (n > 1) flag('duplicate-record', `record ${id.slice(0, 12)} is in the table ${n} times`);
    for (const [id, at] of expected)
      if (!seen.has(id))
        flag(
          'missing-record',
          `record ${id.slice(0, 12)} (${at.map((x) => `${label(x.batchKey)}:${x.line}`).join(', ')}) is not in the table`,
        );
    if (rows.length !== expected.size) flag('record-count', `${rows.length} record rows for ${expected.size} distinct valid records`);
    const view = await pool.query<{ n: string | null }>('SELECT sum(records) AS n FROM feature_counts_h3_minute WHERE pipeline = $1', [
      PARAMS.pipeline,
    ]);
    const viewTotal = Number(view.rows[0]?.n ?? 0);
    if (viewTotal !== expected.size) flag('view-count', `the H3 view counts ${viewTotal} records, not ${expected.size}`);

    const rejects = (
      await pool.query<{ batch_key: string; line: number; reason: string }>('SELECT batch_key, line, reason FROM feature_rejects')
    ).rows;
    const rejected = new Set<string>();
    for (const r of rejects) {
      const o = this.#byKey.get(r.batch_key);
      rejected.add(`${r.batch_key}\n${r.line}`);
      if (o?.poison !== undefined) flag('poison-done', `a reject of poison object ${o.label} (line ${r.line})`);
      else if (o === undefined || o.bad.get(r.line) !== r.reason)
        flag(
          'unexplained-reject',
          `${label(r.batch_key)}:${r.line} rejected as ${r.reason}; the soak generated ${o === undefined ? 'no such batch' : (o.bad.get(r.line) ?? 'a valid or blank line')} there`,
        );
    }
    for (const o of good)
      for (const [line, reason] of o.bad)
        if (!rejected.has(`${o.batchKey}\n${line}`)) flag('missing-reject', `${o.label}:${line} (${reason}) is not in the rejects table`);

    const batchRows = (
      await pool.query<{
        batch_key: string;
        owner: string;
        pipeline: string;
        source_key: string;
        source_version: string;
        format: string;
        records: number;
        rejects: number;
        blank_lines: number;
      }>('SELECT batch_key, owner, pipeline, source_key, source_version, format, records, rejects, blank_lines FROM feature_batches')
    ).rows;
    const byKey = new Map(batchRows.map((r) => [r.batch_key, r]));
    for (const r of batchRows)
      if (!this.#byKey.has(r.batch_key)) flag('unknown-batch', `a batch row for ${r.source_key}, which the soak never landed`);
    for (const o of good) {
      const row = byKey.get(o.batchKey);
      const claim = await this.#ctx.backend.claims.get(o.batchKey);
      if (row === undefined) flag('batch-not-done', `${o.label} has no batch row (its deliveries answered ${o.verdicts.join(', ')})`);
      else {
        const want = {
          pipeline: PARAMS.pipeline,
          source_key: o.source.key,
          source_version: o.source.versionToken,
          format: o.format.startsWith('avro') ? 'avro' : o.format,
          records: o.validLines,
          rejects: o.bad.size,
          blank_lines: o.blankLines,
        };
        const got = {
          pipeline: row.pipeline,
          source_key: row.source_key,
          source_version: row.source_version,
          format: row.format,
          records: row.records,
          rejects: row.rejects,
          blank_lines: row.blank_lines,
        };
        if (JSON.stringify(got) !== JSON.stringify(want))
          flag('batch-row-wrong', `${o.label}: its row says ${JSON.stringify(got)}, not ${JSON.stringify(want)}`);
        const by = row.owner.slice(0, row.owner.lastIndexOf('@'));
        if (!o.deliveryIds.has(by))
          flag('batch-row-wrong', `${o.label}: its row names owner ${row.owner}, not an attempt of one of its messages`);
      }
      if (claim?.state !== 'COMMITTED' || (claim.outputUri !== undefined && claim.outputUri !== batchOutputUri(o.batchKey)))
        flag('batch-not-done', `${o.label}: its claim is ${claim === undefined ? 'absent' : `${claim.state} ${claim.outputUri ?? ''}`}`);
      const inserted = o.verdicts.filter((v) => v.endsWith(':inserted')).length;
      if (inserted > 1) flag('batch-done-twice', `${o.label}: ${inserted} deliveries inserted it (${o.verdicts.join(', ')})`);
      for (const v of o.verdicts)
        if (v.includes('poison') || v.endsWith(':source-changed'))
          flag('wrong-verdict', `${o.label}, a readable object, answered ${v} (${o.verdicts.join(', ')})`);
      const dead = deadLetters.filter((m) => m.body === o.body).length;
      if (dead > 0) flag('good-batch-dead-lettered', `${o.label} was dead-lettered ${dead} time(s) (${o.verdicts.join(', ')})`);
    }
    for (const o of poison) {
      if (byKey.has(o.batchKey)) flag('poison-done', `poison object ${o.label} (${o.poison}) has a batch row`);
      const claim = await this.#ctx.backend.claims.get(o.batchKey);
      if (claim?.state === 'COMMITTED') flag('poison-done', `poison object ${o.label} (${o.poison}) has a committed claim`);
      const dead = deadLetters.filter((m) => m.body === o.body).length;
      if (dead !== 1)
        flag('poison-not-dead-lettered', `poison object ${o.label} (${o.poison}) is in the dead letters ${dead} times, not once`);
      if (o.verdicts[0] !== 'r1:poison:BATCH_UNREADABLE')
        flag(
          'wrong-verdict',
          `poison object ${o.label} (${o.poison}) answered ${o.verdicts.join(', ') || 'nothing'}, not BATCH_UNREADABLE at its first delivery`,
        );
    }

    const poisonKeys = new Set(poison.map((o) => o.source.key));
    for (const l of this.#ctx.logs() as {
      level?: string;
      event?: string;
      batchKey?: string;
      key?: string;
      owner?: string;
      holder?: string;
      message?: string;
    }[]) {
      if (l.level !== 'ERROR' || !this.ownsLog(l)) continue;
      if (
        l.event === 'lease-stolen' &&
        l.batchKey !== undefined &&
        this.#zombieBatches.has(l.batchKey) &&
        l.holder !== undefined &&
        l.holder !== l.owner
      )
        continue;
      if (l.event === 'poison-batch' && l.key !== undefined && poisonKeys.has(l.key)) continue;
      flag('false-alarm', `${l.event ?? 'ERROR'} on ${l.batchKey === undefined ? (l.key ?? '?') : label(l.batchKey)}: ${l.message ?? ''}`);
    }

    const formats: Record<string, number> = {};
    for (const o of this.#objects) formats[o.format] = (formats[o.format] ?? 0) + 1;
    const validLines = good.reduce((n, o) => n + o.validLines, 0);
    return {
      report: {
        events: this.#events,
        objects: good.length,
        poisonObjects: poison.length,
        formats: Object.fromEntries(Object.entries(formats).sort(([a], [b]) => (a < b ? -1 : 1))),
        deliveries: this.#deliveries,
        redeliveries: this.#redeliveries,
        validLines,
        badLines: good.reduce((n, o) => n + o.bad.size, 0),
        blankLines: good.reduce((n, o) => n + o.blankLines, 0),
        distinctRecords: expected.size,
        repeatedLines: validLines - expected.size,
        recordRows: rows.length,
        rejectRows: rejects.length,
        batchRows: batchRows.length,
        deadLettered: deadLetters.filter((m) => this.#byBody.has(m.body)).length,
        anomalies: counts,
      },
      anomalies,
    };
  }
}

/** A delivery's answer as the oracle reads it: `r1:inserted`, `r2:already-done`, `r1:poison:BATCH_UNREADABLE`, ... */
function verdictOf(r: BatchVerdict, receiveCount?: number): string {
  const at = receiveCount === undefined ? '' : `r${receiveCount}:`;
  switch (r.kind) {
    case 'ack':
      return `${at}${r.outcome.kind === 'claim-rejected' ? `claim-rejected-${r.outcome.reason}` : r.outcome.kind}`;
    case 'retry':
      return `${at}retry`;
    case 'poison':
      return `${at}poison:${r.error instanceof TesseraError ? r.error.code : r.error.name}`;
    default: {
      const never: never = r;
      throw new Error(`unknown batch verdict ${JSON.stringify(never)}`);
    }
  }
}

/** A line that is not a position, with the reason the stream function must reject it with. */
function badLine(rnd: () => number, timeMs: number, capture: boolean): Line {
  const time = new Date(timeMs).toISOString();
  const vessel = 219_000_000 + int(rnd, 0, 40);
  switch (pick(rnd, ['no-position', 'out-of-range', 'unparsable', 'bad-time'] as const)) {
    case 'no-position':
      return {
        kind: 'bad',
        reason: 'no-position',
        text: rnd() < 0.5 ? JSON.stringify({ vessel, time }) : JSON.stringify({ vessel, time, lon: '4.5', lat: 55.1 }),
      };
    case 'out-of-range':
      // AIS's "not available" (181 / 91), or a latitude past the pole.
      return {
        kind: 'bad',
        reason: 'out-of-range',
        text: JSON.stringify({ vessel, time, lon: rnd() < 0.5 ? 181 : 4.5, lat: rnd() < 0.5 ? 91 : -95.5 }),
      };
    case 'unparsable': {
      const texts = [
        '!AIVDM,1,1,,A,13u?etPv2;0n:dDPwUM1U1Cb069D,0*24',
        `{"vessel":${vessel},"time":"${time}","lon":4.5,"la`,
        `{vessel: ${vessel}}`,
      ];
      // Capture: an event with no body is a record that is not text.
      return { kind: 'bad', reason: 'unparsable', text: capture && rnd() < 0.3 ? null : pick(rnd, texts) };
    }
    case 'bad-time':
      // Epoch seconds where milliseconds are meant: 1970.
      return { kind: 'bad', reason: 'bad-time', text: JSON.stringify({ vessel, time: Math.floor(timeMs / 1000), lon: 4.5, lat: 55.1 }) };
    default:
      throw new Error('unreachable');
  }
}

/** The object's bytes in its format; a poison object's made unreadable as its variant says. */
async function encode(format: Format, lines: readonly Line[], poison: PoisonVariant | undefined, rnd: () => number): Promise<Uint8Array> {
  const ndjson = () => new TextEncoder().encode(`${lines.map((l) => l.text ?? '').join('\n')}\n`);
  const avroOf = async (codec: 'null' | 'deflate'): Promise<Uint8Array> =>
    format === 'avro-pubsub'
      ? avroContainer(
          PUBSUB_SCHEMA,
          lines.map((l, i) => ({
            subscription_name: 'projects/soak/subscriptions/ais-positions',
            message_id: String(i + 1),
            publish_time: 1_748_779_200_000_000 + i,
            attributes: {},
            data: Buffer.from(l.text ?? '', 'utf8'),
          })),
          codec,
        )
      : avroContainer(
          CAPTURE_SCHEMA,
          lines.map((l, i) => ({
            SequenceNumber: i,
            Offset: String(i * 100),
            EnqueuedTimeUtc: '6/1/2025 12:00:00 PM',
            SystemProperties: {},
            Properties: {},
            Body: l.text === null ? null : Buffer.from(l.text, 'utf8'),
          })),
          codec,
        );
  switch (poison) {
    case undefined:
      switch (format) {
        case 'ndjson':
          return ndjson();
        case 'ndjson+gzip':
          return gzipSync(ndjson());
        case 'avro-capture':
          return avroOf(rnd() < 0.7 ? 'deflate' : 'null');
        case 'avro-pubsub':
          return avroOf('null');
        case 'parquet':
          return parquetOf(lines, rnd);
        default: {
          const never: never = format;
          throw new Error(`unknown format ${String(never)}`);
        }
      }
    case 'broken-gzip':
      return new Uint8Array([0x1f, 0x8b, 0x08, 0x00, ...new TextEncoder().encode('not a deflate stream at all')]);
    case 'truncated-gzip': {
      const whole = gzipSync(ndjson());
      return whole.subarray(0, Math.floor(whole.length * 0.6));
    }
    case 'avro-cut-short': {
      // Cut inside the last block's sync marker: a cut at a block boundary would be a shorter valid container.
      const whole = await avroOf('deflate');
      return whole.subarray(0, whole.length - int(rnd, 1, 15));
    }
    case 'parquet-cut-short': {
      // Cut inside the footer (its length and the closing PAR1): the rows are all there, the table of contents is not.
      const whole = parquetOf(lines, rnd);
      return whole.subarray(0, whole.length - int(rnd, 1, 8));
    }
    case 'avro-bad-sync': {
      const whole = new Uint8Array(await avroOf('null'));
      const at = whole.length - int(rnd, 1, 16);
      whole[at] = (whole[at] as number) ^ 0xff;
      return whole;
    }
    default: {
      const never: never = poison;
      throw new Error(`unknown poison ${String(never)}`);
    }
  }
}

/**
 * A Parquet file of the lines ({@link firehoseParquet}), SNAPPY or GZIP pages, row groups of 16. A readable Parquet
 * object is drawn without blank lines; a poison one (cut short) may be drawn from any format's, and leaves them out.
 */
function parquetOf(lines: readonly Line[], rnd: () => number): Uint8Array {
  return firehoseParquet(
    lines.map((l) => l.text),
    { codec: rnd() < 0.7 ? 'SNAPPY' : 'GZIP', rowGroupSize: 16 },
  );
}

function pickWeighted<T>(rnd: () => number, table: readonly [T, number][]): T {
  const roll = rnd();
  let acc = 0;
  for (const [item, p] of table) {
    acc += p;
    if (roll < acc) return item;
  }
  return (table.at(-1) as [T, number])[0];
}

function fromTable(table: readonly [FaultKind, number][], roll: number): FaultKind | undefined {
  let acc = 0;
  for (const [kind, p] of table) {
    acc += p;
    if (roll < acc) return kind;
  }
  return undefined;
}
