import { assertNever } from '../domain/claim.js';
import type { Cloud, DeployPlatform, LatLon, Region } from './catalog/index.js';
import { costOf, PRICE_TABLES, type PriceItem, type PriceTable, pricesOf, type RegionPrices } from './price-table.js';
import { DAYS_PER_MONTH, type Workload } from './workload.js';

/**
 * The money model of `tessera choose`: what one month of a workload costs on
 * one provider + region + plan, line by line, at list prices.
 *
 * Every quantity is per month (scenes per month x per scene); the cost per
 * scene is the month's cost divided by the scenes. What each line counts,
 * and why, is in the comment above the function that adds it; docs/choose.md
 * ("The money model") says the same in prose, with the model's limits.
 */

/** One priced line: `quantity` units a month at `unitPrice` USD each (an average over tiers), `cost` USD a month. */
export interface CostLine {
  readonly item: string;
  readonly quantity: number;
  readonly unit: string;
  readonly unitPrice: number;
  readonly cost: number;
  /** The price key in the cloud's price file, and the region whose row priced it. */
  readonly price: { readonly cloud: Cloud; readonly key: string; readonly region: string };
  readonly unconfirmed: boolean;
  readonly kind: 'compute' | 'claims' | 'objects' | 'storage' | 'queue' | 'transfer';
}

export interface ChoiceCost {
  readonly lines: readonly CostLine[];
  readonly costPerMonth: number;
  readonly costPerScene: number;
  /** Assumptions and soft spots of this choice's figures, for the user. */
  readonly notes: readonly string[];
}

/** Where the data lives, as far as pricing can tell. */
export type DataSite =
  | { readonly kind: 'known'; readonly region: Region }
  /** Coordinates without a cloud: the transfer from the data cannot be priced. */
  | { readonly kind: 'unknown'; readonly point: LatLon };

export interface CostInput {
  readonly workload: Workload;
  /** Seconds one tile job runs. */
  readonly runtimeSec: number;
  /** Peak memory of one tile job, MB. */
  readonly peakMemoryMb: number;
  readonly cloud: Cloud;
  readonly region: Region;
  readonly platform: DeployPlatform;
  /** The memory the stack configures (the chooser's pick for the platform), MB. */
  readonly memoryMb: number;
  readonly data: DataSite;
  /** Where the outputs must live, resolved; `undefined` keeps them in the compute region. */
  readonly outputs: Region | undefined;
}

const GIB = 1024 ** 3;

/**
 * Claim-store operations of one tile job and of one duplicate delivery,
 * counted from the adapters (functions/<cloud>/adapters/*-claim-store.ts):
 * - DynamoDB: claim = one conditional PutItem, commit = one conditional
 *   UpdateItem (1 write unit each for a row under 1 KB); a duplicate's failed
 *   PutItem still consumes a write unit. Expiry is DynamoDB TTL: free.
 * - Firestore: claim = create(); commit = get() then update() with a
 *   precondition; a duplicate's create fails (counted as a write, which
 *   over-counts if Google does not bill it) and reads the row. The row is
 *   deleted when it expires (one delete).
 * - Table Storage: claim = insert; commit = read + replace with If-Match; a
 *   duplicate's insert fails (409) and reads the row; the sweep deletes the
 *   row when it expires. Each is one transaction.
 * Lease renewals are left out: the lease is renewed every lease/3, and a
 * job shorter than a third of its lease (the chooser's timeouts give
 * minutes) renews never.
 */
const CLAIM_OPS = {
  aws: { tile: { writes: 2, reads: 0, deletes: 0 }, duplicate: { writes: 1, reads: 0 } },
  gcp: { tile: { writes: 2, reads: 1, deletes: 1 }, duplicate: { writes: 1, reads: 1 } },
  azure: { tile: { writes: 2, reads: 1, deletes: 1 }, duplicate: { writes: 1, reads: 1 } },
} as const satisfies Record<Cloud, unknown>;

/** SendMessageBatch carries up to 10 job messages (shared/app/fan-out.ts sends in batches). */
const SQS_SEND_BATCH = 10;
/** Pub/Sub bills at least 1000 bytes per publish and per push request; a job message is smaller. */
const PUBSUB_MIN_REQUEST_BYTES = 1000;
/** Objects listed per LIST request, when the mosaic is assembled. */
const KEYS_PER_LIST = 1000;
/** Objects written per scene besides the tiles: the scene manifest and the mosaic. */
const EXTRA_PUTS_PER_SCENE = 2;

/** vCPU that Cloud Run functions give each memory size (source gcf-memory in prices/gcp.json). */
const GCF2_VCPU_BY_MIB: Readonly<Record<number, number>> = {
  128: 0.083,
  256: 0.167,
  512: 0.333,
  1024: 0.583,
  2048: 1,
  4096: 2,
  8192: 2,
  16384: 4,
  32768: 8,
};

/** Broad areas for transfer pricing: transfer within one costs less than across. */
export type GeoArea = 'north-america' | 'south-america' | 'europe' | 'middle-east-africa' | 'asia' | 'oceania';

/**
 * The area of a region, from its coordinates: coarse boxes, good for the
 * catalog's regions (checked in test/unit/choose/cost-model.test.ts), not a
 * map. Clouds price transfer between their own geographies, which these
 * approximate.
 */
export function geoAreaOf(p: LatLon): GeoArea {
  if (p.lon < -30) return p.lat >= 13 ? 'north-america' : 'south-america';
  if (p.lat < -10 && p.lon > 110) return 'oceania';
  if (p.lon >= 60) return 'asia';
  return p.lat >= 35 ? 'europe' : 'middle-east-africa';
}

interface LineDraft {
  readonly item: string;
  readonly quantity: number;
  readonly key: string;
  readonly prices: RegionPrices;
  readonly kind: CostLine['kind'];
}

function priceLine(draft: LineDraft, freeTier: boolean, table: PriceTable): CostLine {
  const item: PriceItem = draft.prices.item(draft.key);
  const free = freeTier ? (table.free[draft.key]?.quantity ?? 0) : 0;
  const cost = costOf(item, draft.quantity, free);
  const unitPrice = item.kind === 'flat' ? item.price / item.per : draft.quantity > 0 ? cost / draft.quantity : (item.tiers[0]?.price ?? 0);
  return {
    item: draft.item,
    quantity: draft.quantity,
    unit: item.unit,
    unitPrice,
    cost,
    price: { cloud: draft.prices.cloud, key: draft.key, region: draft.prices.region },
    unconfirmed: item.unconfirmed,
    kind: draft.kind,
  };
}

/** Compute: billed seconds are the tile jobs' runtime; a duplicate turned away at the claim bills a request only. */
function computeLines(input: CostInput, prices: RegionPrices): LineDraft[] {
  const w = input.workload;
  const busySeconds = w.scenesPerMonth * w.tiles * input.runtimeSec;
  const invocations = w.scenesPerMonth * w.tiles * (1 + w.duplicateRate);
  const line = (item: string, quantity: number, key: string): LineDraft => ({ item, quantity, key, prices, kind: 'compute' });
  switch (input.platform) {
    case 'aws-lambda':
      // infra/aws/tiling-stack.ts deploys arm64 (Graviton); the x86 figure is a note.
      return [
        line('Lambda arm64 compute', busySeconds * (input.memoryMb / 1024), 'lambda-arm64-gb-s'),
        line('Lambda requests', invocations, 'lambda-requests'),
      ];
    case 'gcf2-event':
    case 'gcf2-http':
      return [
        line('Cloud Run functions CPU', busySeconds * (GCF2_VCPU_BY_MIB[input.memoryMb] ?? 1), 'run-vcpu-s'),
        line('Cloud Run functions memory', busySeconds * (input.memoryMb / 1024), 'run-gib-s'),
        line('Cloud Run functions requests', invocations, 'run-requests'),
      ];
    case 'azure-flex':
      // On demand: the instance memory, while it executes.
      return [
        line('Flex Consumption on-demand compute', busySeconds * (input.memoryMb / 1024), 'flex-gb-s'),
        line('Flex Consumption executions', invocations, 'flex-executions'),
      ];
    case 'azure-consumption':
      // Consumption bills the memory used, rounded up to 128 MB.
      return [
        line('Consumption compute', busySeconds * ((Math.ceil(input.peakMemoryMb / 128) * 128) / 1024), 'consumption-gb-s'),
        line('Consumption executions', invocations, 'consumption-executions'),
      ];
    case 'azure-premium':
      // Not deployable (PlatformSpec.notDeployable), so never a choice; priced like Flex would be wrong.
      return [];
    default:
      return assertNever(input.platform, 'platform');
  }
}

/** The claim store: three gates per tile (claim, write, commit; two touch the store), one claim per duplicate. */
function claimLines(input: CostInput, prices: RegionPrices): LineDraft[] {
  const w = input.workload;
  const tiles = w.scenesPerMonth * w.tiles;
  const duplicates = tiles * w.duplicateRate;
  const ops = CLAIM_OPS[input.cloud];
  const line = (item: string, quantity: number, key: string): LineDraft => ({ item, quantity, key, prices, kind: 'claims' });
  const writes = tiles * ops.tile.writes + duplicates * ops.duplicate.writes;
  const reads = tiles * ops.tile.reads + duplicates * ops.duplicate.reads;
  const deletes = tiles * ops.tile.deletes;
  switch (input.cloud) {
    case 'aws':
      return [line('DynamoDB writes', writes, 'dynamodb-write-units'), line('DynamoDB reads', reads, 'dynamodb-read-units')];
    case 'gcp':
      return [
        line('Firestore writes', writes, 'firestore-writes'),
        line('Firestore reads', reads, 'firestore-reads'),
        line('Firestore deletes', deletes, 'firestore-deletes'),
      ];
    case 'azure':
      return [line('Table transactions', writes + reads + deletes, 'table-transactions')];
    default:
      return assertNever(input.cloud, 'cloud');
  }
}

function storeName(cloud: Cloud): string {
  return cloud === 'aws' ? 'S3' : cloud === 'gcp' ? 'GCS' : 'Blob';
}

/**
 * Object storage: range GETs on the source, billed by the data's store (or
 * the compute region's when the data's cloud is unknown); create-only PUTs of
 * tiles, manifest and mosaic plus the mosaic's LISTs, and the outputs kept
 * for the retention, billed where the outputs live. Storage is the steady
 * state: each month's outputs are held `retention` days.
 */
function objectLines(input: CostInput, source: RegionPrices, outputs: RegionPrices): LineDraft[] {
  const w = input.workload;
  const n = w.scenesPerMonth;
  const gets = n * w.tiles * w.rangesPerTile;
  const puts = n * (w.tiles + EXTRA_PUTS_PER_SCENE + Math.ceil(w.tiles / KEYS_PER_LIST));
  const storedGb = (n * (w.outputBytesPerScene + w.mosaicBytesPerScene) * (w.retentionDays / DAYS_PER_MONTH)) / GIB;
  return [
    { item: `${storeName(source.cloud)} range GETs (source)`, quantity: gets, key: 'object-get', prices: source, kind: 'objects' },
    { item: `${storeName(outputs.cloud)} conditional PUTs and LISTs`, quantity: puts, key: 'object-put', prices: outputs, kind: 'objects' },
    {
      item: `${storeName(outputs.cloud)} storage of tiles and mosaic`,
      quantity: storedGb,
      key: 'object-storage',
      prices: outputs,
      kind: 'storage',
    },
  ];
}

/**
 * Queue messages: one per tile from the fan-out, one delivery per tile and
 * per duplicate. SQS: batched sends, then a receive and a delete per
 * delivery (the stack's batch size is 1). Pub/Sub: at least 1000 bytes per
 * publish and per push. Storage Queues: put, then get and delete per delivery.
 */
function queueLines(input: CostInput, prices: RegionPrices): LineDraft[] {
  const w = input.workload;
  const tiles = w.scenesPerMonth * w.tiles;
  const deliveries = tiles * (1 + w.duplicateRate);
  switch (input.cloud) {
    case 'aws': {
      const sends = w.scenesPerMonth * Math.ceil(w.tiles / SQS_SEND_BATCH);
      return [{ item: 'SQS requests', quantity: sends + 2 * deliveries, key: 'queue-requests', prices, kind: 'queue' }];
    }
    case 'gcp':
      return [
        {
          item: 'Pub/Sub throughput',
          quantity: PUBSUB_MIN_REQUEST_BYTES * (tiles + deliveries),
          key: 'pubsub-throughput',
          prices,
          kind: 'queue',
        },
      ];
    case 'azure':
      return [{ item: 'Queue operations', quantity: tiles + 2 * deliveries, key: 'queue-operations', prices, kind: 'queue' }];
    default:
      return assertNever(input.cloud, 'cloud');
  }
}

/**
 * Bytes moving from one region to another, priced by the sending cloud:
 * nothing within a region, inter-region (or inter-continent) within a cloud,
 * internet egress between clouds.
 */
function transferLine(item: string, bytes: number, from: Region, to: Region): LineDraft | undefined {
  if (from.cloud === to.cloud && from.code === to.code) return undefined;
  const prices = pricesOf(from);
  const gb = bytes / GIB;
  if (from.cloud !== to.cloud)
    return {
      item: `egress of ${item} from ${from.cloud} ${from.code}`,
      quantity: gb,
      key: 'internet-egress',
      prices,
      kind: 'transfer',
    };
  const sameArea = geoAreaOf(from) === geoAreaOf(to);
  return {
    item: `${sameArea ? 'inter-region' : 'inter-continent'} ${item} ${from.code} to ${to.code}`,
    quantity: gb,
    key: sameArea ? 'inter-region' : 'inter-continent',
    prices,
    kind: 'transfer',
  };
}

function usd(x: number): string {
  return `$${x.toFixed(2)}`;
}

/**
 * Price one month of the workload on one choice.
 *
 * @example
 * priceChoice({ workload: normalizeWorkload({ scenesPerMonth: 1000, sceneBytes: 10 * 2 ** 30, tiles: 400 }),
 *   runtimeSec: 20, peakMemoryMb: 2048, cloud: 'azure', region: findRegion('northeurope'), platform: 'azure-flex',
 *   memoryMb: 2048, data: { kind: 'known', region: findRegion('eu-west-1') }, outputs: undefined })
 *   .lines // ..., { item: 'egress of source reads from aws eu-west-1', quantity: 10000, unit: 'GB', cost: 900, ... }
 */
export function priceChoice(input: CostInput, tables: Readonly<Record<Cloud, PriceTable>> = PRICE_TABLES): ChoiceCost {
  const w = input.workload;
  const compute = pricesOf(input.region, tables);
  const sourceRegion = input.data.kind === 'known' ? input.data.region : input.region;
  const outputRegion = input.outputs ?? input.region;
  const source = pricesOf(sourceRegion, tables);
  const outputs = pricesOf(outputRegion, tables);
  const drafts: LineDraft[] = [
    ...computeLines(input, compute),
    ...claimLines(input, compute),
    ...objectLines(input, source, outputs),
    ...queueLines(input, compute),
  ];
  const notes: string[] = [];
  if (input.data.kind === 'known') {
    const read = transferLine('source reads', w.scenesPerMonth * w.sceneBytes, input.data.region, input.region);
    if (read) drafts.push(read);
  } else {
    notes.push("the data's cloud is not known (coordinates only): transfer from it is not priced; give --data CLOUD:REGION");
  }
  if (input.outputs !== undefined) {
    const back = transferLine('outputs', w.scenesPerMonth * (w.outputBytesPerScene + w.mosaicBytesPerScene), input.region, input.outputs);
    if (back) drafts.push(back);
  }
  const lines = drafts.filter((d) => d.quantity > 0).map((d) => priceLine(d, w.freeTier, tables[d.prices.cloud]));
  const costPerMonth = lines.reduce((sum, l) => sum + l.cost, 0);
  if (input.platform === 'aws-lambda') {
    const x86 = costOf(compute.item('lambda-x86-gb-s'), w.scenesPerMonth * w.tiles * input.runtimeSec * (input.memoryMb / 1024));
    notes.push(`priced on arm64, as infra/ deploys; on x86 the compute line would be ${usd(x86)}/month`);
  }
  const assumed = [...new Set([compute, source, outputs].filter((p) => p.assumed).map((p) => `${p.cloud} ${p.region}`))];
  if (assumed.length > 0)
    notes.push(`no price row for ${assumed.join(', ')}: figures assumed from the cloud's reference region (unconfirmed)`);
  const unconfirmed = lines.filter((l) => l.unconfirmed).length;
  if (unconfirmed > 0 && assumed.length === 0) {
    notes.push(
      `${unconfirmed} of ${lines.length} prices unconfirmed (assumed from another region, or not restated by a page read): see shared/placement/prices/`,
    );
  }
  if (w.freeTier) notes.push('free tiers applied as if this workload had them to itself');
  return { lines, costPerMonth, costPerScene: costPerMonth / w.scenesPerMonth, notes };
}
