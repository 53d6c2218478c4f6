import type { Cloud, Region } from './catalog/index.js';
import AWS_PRICES from './prices/aws.json' with { type: 'json' };
import AZURE_PRICES from './prices/azure.json' with { type: 'json' };
import GCP_PRICES from './prices/gcp.json' with { type: 'json' };

/**
 * Price tables: list prices per cloud and region, as data files
 * (shared/placement/prices/<cloud>.json). Each figure names its source and
 * the date it was read; `unconfirmed` marks a figure no page read confirmed,
 * or one assumed from another region. A region without a row of its own
 * takes the cloud's `reference` region, every figure then unconfirmed.
 *
 * Checked once when loaded: a malformed file is a programming error caught by
 * the unit tests, not a user's problem, so it throws a plain
 * {@link PriceTableError} naming the file and the item.
 */

/** One step of a tiered price: `upTo` is the monthly quantity where the step ends, `null` for the last. */
export interface PriceTier {
  readonly upTo: number | null;
  readonly price: number;
  readonly unconfirmed?: boolean;
}

/** A flat price of `price` USD per `per` units, or a tiered one (per unit, by monthly volume). */
export type PriceItem =
  | {
      readonly kind: 'flat';
      readonly price: number;
      readonly per: number;
      readonly unit: string;
      readonly source: string;
      readonly unconfirmed: boolean;
      readonly note: string | undefined;
    }
  | {
      readonly kind: 'tiered';
      readonly tiers: readonly PriceTier[];
      readonly unit: string;
      readonly source: string;
      readonly unconfirmed: boolean;
      readonly note: string | undefined;
    };

export interface PriceSource {
  readonly url: string;
  readonly read: string;
  readonly covers: string;
}

export interface FreeAllowance {
  /** Per month, in the item's unit (bytes for Pub/Sub throughput). */
  readonly quantity: number;
  readonly unconfirmed: boolean;
  readonly note: string | undefined;
}

export interface PriceTable {
  readonly cloud: Cloud;
  readonly read: string;
  readonly sources: Readonly<Record<string, PriceSource>>;
  /** The region whose figures stand in for a region without its own row. */
  readonly reference: string;
  readonly regions: Readonly<Record<string, Readonly<Record<string, PriceItem>>>>;
  readonly free: Readonly<Record<string, FreeAllowance>>;
}

/** The prices of one region, with where they came from. */
export interface RegionPrices {
  readonly cloud: Cloud;
  readonly region: string;
  /** True when the cloud's table has no row for the region and the reference region's figures stand in. */
  readonly assumed: boolean;
  readonly table: PriceTable;
  /** @throws PriceTableError when the item is missing: every region row carries the full set. */
  item(key: string): PriceItem;
}

/** A price file that does not have the shape the model reads. */
export class PriceTableError extends Error {
  override readonly name = 'PriceTableError';
  readonly code = 'PRICE_TABLE';
}

function fail(file: string, where: string, why: string): never {
  throw new PriceTableError(`[placement:prices] ${file}: ${where} ${why}; fix the price file (docs/choose.md, "Price tables")`);
}

function record(value: unknown, file: string, where: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(file, where, 'is not an object');
  return value as Record<string, unknown>;
}

function positive(value: unknown, file: string, where: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    fail(file, where, `must be a number >= 0, got ${JSON.stringify(value)}`);
  return value;
}

function text(value: unknown, file: string, where: string): string {
  if (typeof value !== 'string' || value === '') fail(file, where, 'must be a non-empty string');
  return value;
}

function optionalText(value: unknown, file: string, where: string): string | undefined {
  return value === undefined ? undefined : text(value, file, where);
}

function parseItem(raw: unknown, file: string, where: string, sources: Record<string, PriceSource>): PriceItem {
  const r = record(raw, file, where);
  const source = text(r.source, file, `${where}.source`);
  if (sources[source] === undefined) fail(file, `${where}.source`, `names ${JSON.stringify(source)}, which is not under "sources"`);
  const unit = text(r.unit, file, `${where}.unit`);
  const unconfirmed = r.unconfirmed === true;
  const note = optionalText(r.note, file, `${where}.note`);
  if (r.tiers !== undefined) {
    if (!Array.isArray(r.tiers) || r.tiers.length === 0) fail(file, `${where}.tiers`, 'must be a non-empty list');
    let previous = 0;
    const tiers = r.tiers.map((t, i): PriceTier => {
      const tier = record(t, file, `${where}.tiers[${i}]`);
      const last = i === (r.tiers as unknown[]).length - 1;
      const upTo = tier.upTo === null ? null : positive(tier.upTo, file, `${where}.tiers[${i}].upTo`);
      if (last !== (upTo === null)) fail(file, `${where}.tiers[${i}].upTo`, 'must be null on the last tier only');
      if (upTo !== null && upTo <= previous) fail(file, `${where}.tiers[${i}].upTo`, 'must grow from tier to tier');
      previous = upTo ?? previous;
      return { upTo, price: positive(tier.price, file, `${where}.tiers[${i}].price`), unconfirmed: tier.unconfirmed === true };
    });
    return { kind: 'tiered', tiers, unit, source, unconfirmed: unconfirmed || tiers.some((t) => t.unconfirmed), note };
  }
  const per = positive(r.per, file, `${where}.per`);
  if (per === 0) fail(file, `${where}.per`, 'must be more than zero');
  return { kind: 'flat', price: positive(r.price, file, `${where}.price`), per, unit, source, unconfirmed, note };
}

/**
 * Check a price file's content and give it its typed shape.
 *
 * @throws PriceTableError naming the file and the first malformed entry.
 */
export function parsePriceTable(raw: unknown, file: string): PriceTable {
  const r = record(raw, file, 'the file');
  const cloud = text(r.cloud, file, 'cloud');
  if (cloud !== 'aws' && cloud !== 'gcp' && cloud !== 'azure')
    fail(file, 'cloud', `must be aws, gcp or azure, got ${JSON.stringify(cloud)}`);
  if (r.currency !== 'USD') fail(file, 'currency', 'must be USD');
  const sources: Record<string, PriceSource> = {};
  for (const [id, s] of Object.entries(record(r.sources, file, 'sources'))) {
    const source = record(s, file, `sources.${id}`);
    sources[id] = {
      url: text(source.url, file, `sources.${id}.url`),
      read: text(source.read, file, `sources.${id}.read`),
      covers: text(source.covers, file, `sources.${id}.covers`),
    };
  }
  const regions: Record<string, Record<string, PriceItem>> = {};
  for (const [code, items] of Object.entries(record(r.regions, file, 'regions'))) {
    const parsed: Record<string, PriceItem> = {};
    for (const [key, item] of Object.entries(record(items, file, `regions.${code}`))) {
      parsed[key] = parseItem(item, file, `regions.${code}.${key}`, sources);
    }
    regions[code] = parsed;
  }
  const reference = text(r.reference, file, 'reference');
  const referenceRow = regions[reference];
  if (referenceRow === undefined) fail(file, 'reference', `names ${JSON.stringify(reference)}, which has no row under "regions"`);
  for (const [code, row] of Object.entries(regions)) {
    const missing = Object.keys(referenceRow).filter((k) => row[k] === undefined);
    if (missing.length > 0) fail(file, `regions.${code}`, `lacks ${missing.join(', ')} (every row carries the reference row's items)`);
  }
  const free: Record<string, FreeAllowance> = {};
  for (const [key, f] of Object.entries(record(r.free ?? {}, file, 'free'))) {
    const allowance = record(f, file, `free.${key}`);
    if (referenceRow[key] === undefined) fail(file, `free.${key}`, 'names an item the regions do not price');
    free[key] = {
      quantity: positive(allowance.quantity, file, `free.${key}.quantity`),
      unconfirmed: allowance.unconfirmed === true,
      note: optionalText(allowance.note, file, `free.${key}.note`),
    };
  }
  return { cloud, read: text(r.read, file, 'read'), sources, reference, regions, free };
}

/** The built-in price tables, checked when this module loads. */
export const PRICE_TABLES: Readonly<Record<Cloud, PriceTable>> = {
  aws: parsePriceTable(AWS_PRICES, 'shared/placement/prices/aws.json'),
  gcp: parsePriceTable(GCP_PRICES, 'shared/placement/prices/gcp.json'),
  azure: parsePriceTable(AZURE_PRICES, 'shared/placement/prices/azure.json'),
};

/**
 * The prices of a region: its own row, or the cloud's reference row with
 * every figure marked unconfirmed ("assumed from <reference>").
 */
export function pricesOf(region: Pick<Region, 'cloud' | 'code'>, tables: Readonly<Record<Cloud, PriceTable>> = PRICE_TABLES): RegionPrices {
  const table = tables[region.cloud];
  const own = table.regions[region.code];
  const row = own ?? table.regions[table.reference];
  if (row === undefined)
    throw new PriceTableError(`[placement:prices] ${region.cloud} has no reference row; fix shared/placement/prices/${region.cloud}.json`);
  const assumed = own === undefined;
  return {
    cloud: region.cloud,
    region: region.code,
    assumed,
    table,
    item(key: string): PriceItem {
      const item = row[key];
      if (item === undefined) {
        throw new PriceTableError(
          `[placement:prices] ${region.cloud} has no price "${key}"; add it to shared/placement/prices/${region.cloud}.json`,
        );
      }
      if (!assumed) return item;
      return { ...item, unconfirmed: true, note: `assumed from ${table.reference}${item.note === undefined ? '' : `; ${item.note}`}` };
    },
  };
}

/**
 * The cost of a monthly quantity at an item's price, after a free allowance.
 * Tiers apply to the monthly quantity, step by step.
 */
export function costOf(item: PriceItem, monthlyQuantity: number, free = 0): number {
  const billable = Math.max(0, monthlyQuantity - free);
  if (item.kind === 'flat') return (billable * item.price) / item.per;
  let cost = 0;
  let from = 0;
  for (const tier of item.tiers) {
    const to = tier.upTo ?? Number.POSITIVE_INFINITY;
    const inTier = Math.max(0, Math.min(billable, to) - from);
    cost += inTier * tier.price;
    from = to;
    if (billable <= to) break;
  }
  return cost;
}
