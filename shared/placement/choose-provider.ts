import { type LeaseConfig, resolveLease } from '../domain/ceilings.js';
import { assertNever } from '../domain/claim.js';
import { InvalidParamsError } from '../domain/errors.js';
import { DEFAULT_SOURCE_PREFIX } from '../domain/key-layout.js';
import { DEFAULT_PARAMS } from '../domain/runtime-config.js';
import {
  ALL_REGIONS,
  CLOUDS,
  type Cloud,
  type DeployPlatform,
  findRegion,
  formatDuration,
  formatKm,
  formatMemory,
  haversineKm,
  type LatLon,
  OFFER_LABELS,
  type Offer,
  type OfferKey,
  offerOf,
  type PlatformSpec,
  platformsOf,
  type Region,
  type Trigger,
  validateLatLon,
} from './catalog/index.js';
import { type ChoiceCost, type DataSite, priceChoice } from './cost-model.js';
import { normalizeWorkload, type PricedLocation, type Workload, type WorkloadInput } from './workload.js';

/**
 * `tessera choose`: given where the data is and what the job needs, rank the
 * provider + region + plan combinations that can run it, say why the others
 * cannot, and render the Pulumi stack file for a pick.
 *
 * Pure: the catalog comes in as data, nothing is read from the environment,
 * the clock or the disk.
 */

/**
 * Where the source data sits: a provider region code, or a point. `cloud`
 * says whose store holds it: implied by a region code (and checked against
 * it), needed with coordinates for the transfer from the data to be priced.
 */
export type DataLocation =
  | { readonly kind: 'region'; readonly code: string; readonly cloud?: Cloud | undefined }
  | { readonly kind: 'coordinates'; readonly lat: number; readonly lon: number; readonly cloud?: Cloud | undefined };

export interface ChooseRequest {
  readonly data: DataLocation;
  /** Expected runtime of one tile job, seconds. */
  readonly runtimeSec: number;
  /** Peak memory of one tile job, MB. */
  readonly memoryMb: number;
  /** How the tile worker is invoked: from a queue/event source, or over HTTP (push). */
  readonly trigger: Trigger;
  /** 0 ranks by distance only, 1 by cost only; default {@link DEFAULT_COST_WEIGHT}. */
  readonly costWeight?: number | undefined;
  /** Clouds to consider; default all. */
  readonly clouds?: readonly Cloud[] | undefined;
  /** What is priced: scenes a month, their size and tiles, duplicates, retention; default the demo scene once a month. */
  readonly workload?: WorkloadInput | undefined;
}

/**
 * Default weight of cost against distance in the score (see {@link score}).
 * At 0.2 a choice costing twice the cheapest (cost term 0.5) weighs like
 * 0.5 x 0.2 / 0.8 x 20,015 km = ~2,500 km: a region next door that costs
 * double loses to one across a continent at the cheapest price.
 */
export const DEFAULT_COST_WEIGHT = 0.2;

/** Half the Earth's circumference: the longest possible distance, to normalise by. */
const MAX_DISTANCE_KM = 20_015;
/** A job using more than this share of its timeout is flagged: runtimes vary with input. */
const TIGHT_SHARE = 0.8;
/** On plans without a ceiling the timeout is the runtime times this, rounded up to a minute. */
const UNBOUNDED_TIMEOUT_FACTOR = 1.5;
/** SQS visibility timeout as a multiple of the function timeout (AWS's recommendation). */
const SQS_VISIBILITY_FACTOR = 6;

/** A request after validation, with defaults filled in. */
export interface NormalizedRequest {
  readonly data: DataLocation;
  readonly runtimeSec: number;
  readonly memoryMb: number;
  readonly trigger: Trigger;
  readonly costWeight: number;
  readonly clouds: readonly Cloud[];
  readonly workload: Workload;
}

/**
 * The data's place: `site` is what pricing reads (the region whose store
 * holds the data; for coordinates with a cloud, that cloud's nearest region).
 */
export type ResolvedLocation =
  | { readonly kind: 'region'; readonly region: Region; readonly point: LatLon; readonly site: DataSite }
  | { readonly kind: 'coordinates'; readonly point: LatLon; readonly site: DataSite };

/** Stack settings that differ by platform (stack-config contract: tessera:azurePlan, tessera:gcpTileTrigger). */
export type PlatformStackSettings =
  | { readonly cloud: 'aws' }
  | { readonly cloud: 'gcp'; readonly gcpTileTrigger: Trigger }
  | { readonly cloud: 'azure'; readonly azurePlan: 'consumption' | 'flex' | 'premium' };

/** One feasible provider + region + plan. */
export interface Choice {
  /** 1-based position in the ranking. */
  readonly rank: number;
  readonly cloud: Cloud;
  readonly region: Region;
  readonly platform: DeployPlatform;
  readonly plan: string;
  /** True for the data's own region on its own cloud. */
  readonly sameRegion: boolean;
  readonly distanceKm: number;
  /** The lease and timeouts the stack would use, validated by resolveLease. */
  readonly lease: LeaseConfig;
  /** The memory the stack would configure: the smallest size the platform accepts that holds the peak. */
  readonly memoryMb: number;
  /** Lower is better: distance and cost blended by the cost weight. */
  readonly score: number;
  /** The month's cost, line by line, at list prices (shared/placement/cost-model.ts). */
  readonly cost: ChoiceCost;
  /** Things to check before deploying (unconfirmed availability, a tight timeout, idle cost). */
  readonly warnings: readonly string[];
  readonly settings: PlatformStackSettings;
}

/** Why a platform (everywhere) or a platform in one region cannot run the job. */
export interface Rejection {
  readonly cloud: Cloud;
  readonly platform: DeployPlatform;
  /** Set when only this region is ruled out; absent when the platform is ruled out everywhere. */
  readonly region?: string;
  readonly reason: string;
}

export interface ChooseResult {
  readonly request: NormalizedRequest;
  readonly location: ResolvedLocation;
  /** Where the outputs must live, when the workload says. */
  readonly outputs: Region | undefined;
  readonly choices: readonly Choice[];
  readonly rejections: readonly Rejection[];
}

function validateRequest(req: ChooseRequest): NormalizedRequest {
  const problems: string[] = [];
  if (!Number.isInteger(req.runtimeSec) || req.runtimeSec <= 0)
    problems.push(`runtime must be a positive whole number of seconds, got ${req.runtimeSec}`);
  if (!Number.isInteger(req.memoryMb) || req.memoryMb <= 0)
    problems.push(`memory must be a positive whole number of MB, got ${req.memoryMb}`);
  if (req.trigger !== 'event' && req.trigger !== 'http') problems.push(`trigger must be event or http, got ${JSON.stringify(req.trigger)}`);
  const costWeight = req.costWeight ?? DEFAULT_COST_WEIGHT;
  if (!Number.isFinite(costWeight) || costWeight < 0 || costWeight > 1) problems.push(`cost weight must be within 0..1, got ${costWeight}`);
  const clouds = req.clouds ?? CLOUDS;
  const unknown = clouds.filter((c) => !CLOUDS.includes(c));
  if (unknown.length > 0) problems.push(`unknown cloud ${unknown.map((c) => JSON.stringify(c)).join(', ')}; use ${CLOUDS.join(', ')}`);
  if (clouds.length === 0) problems.push(`no cloud to choose from; name at least one of ${CLOUDS.join(', ')}`);
  if (req.data.cloud !== undefined && !CLOUDS.includes(req.data.cloud))
    problems.push(`unknown data cloud ${JSON.stringify(req.data.cloud)}; use ${CLOUDS.join(', ')}`);
  if (problems.length > 0) throw new InvalidParamsError(problems.join('; '));
  return {
    data: req.data,
    runtimeSec: req.runtimeSec,
    memoryMb: req.memoryMb,
    trigger: req.trigger,
    costWeight,
    clouds: [...new Set(clouds)],
    workload: normalizeWorkload(req.workload),
  };
}

function nearestOf(cloud: Cloud, point: LatLon, regions: readonly Region[]): Region | undefined {
  return regions
    .filter((r) => r.cloud === cloud)
    .reduce<Region | undefined>(
      (best, r) => (best === undefined || haversineKm(point, r) < haversineKm(point, best) ? r : best),
      undefined,
    );
}

/** A `CLOUD:REGION` the catalog knows, on that cloud. */
function resolvePriced(location: PricedLocation, flag: string, regions: readonly Region[]): Region {
  const region = findRegion(location.region, regions);
  if (region.cloud !== location.cloud) {
    throw new InvalidParamsError(
      `${flag} ${location.cloud}:${location.region}: ${region.code} is a ${region.cloud} region; write ${region.cloud}:${region.code}`,
    );
  }
  return region;
}

function resolveLocation(data: DataLocation, regions: readonly Region[]): ResolvedLocation {
  if (data.kind === 'coordinates') {
    const point = validateLatLon(data.lat, data.lon);
    // The data's store is taken to be its cloud's region nearest the point.
    const nearest = data.cloud === undefined ? undefined : nearestOf(data.cloud, point, regions);
    return { kind: 'coordinates', point, site: nearest ? { kind: 'known', region: nearest } : { kind: 'unknown', point } };
  }
  const region =
    data.cloud === undefined ? findRegion(data.code, regions) : resolvePriced({ cloud: data.cloud, region: data.code }, '--data', regions);
  return { kind: 'region', region, point: { lat: region.lat, lon: region.lon }, site: { kind: 'known', region } };
}

function joinOr(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}

function fits(spec: PlatformSpec, runtimeSec: number, memoryMb: number): boolean {
  return (spec.ceiling.ceilingSec === undefined || runtimeSec <= spec.ceiling.ceilingSec) && memoryMb <= spec.ceiling.maxMemoryMb;
}

/** What to use instead: the cloud's other plans that hold the job, phrased as an instruction. */
function alternativesFor(spec: PlatformSpec, req: NormalizedRequest): string {
  const others = platformsOf(spec.cloud).filter(
    (o) => o.platform !== spec.platform && o.notDeployable === undefined && fits(o, req.runtimeSec, req.memoryMb),
  );
  const sameTrigger = others.filter((o) => o.triggers.includes(req.trigger) && !blockedByHttpCap(o, req));
  if (sameTrigger.length > 0) return `; use ${joinOr(sameTrigger.map((o) => o.plan))}`;
  const otherTrigger = others.find((o) => !o.triggers.includes(req.trigger));
  if (otherTrigger) {
    const ceiling = otherTrigger.ceiling.ceilingSec;
    return `; use --trigger ${otherTrigger.triggers.join('|')} (${otherTrigger.plan}${ceiling === undefined ? '' : `, ${formatDuration(ceiling)} ceiling`})`;
  }
  return '';
}

function blockedByHttpCap(spec: PlatformSpec, req: NormalizedRequest): boolean {
  return req.trigger === 'http' && spec.httpResponseCapSec !== undefined && req.runtimeSec > spec.httpResponseCapSec;
}

/** Reasons a platform cannot run the job anywhere, or none. */
function platformProblems(spec: PlatformSpec, req: NormalizedRequest): string[] {
  const label = spec.ceiling.label;
  const problems: string[] = [];
  const ceiling = spec.ceiling.ceilingSec;
  if (ceiling !== undefined && req.runtimeSec > ceiling) {
    problems.push(
      `${label}: ${formatDuration(req.runtimeSec)} job exceeds the ${formatDuration(ceiling)} ceiling${alternativesFor(spec, req)}`,
    );
  } else if (blockedByHttpCap(spec, req)) {
    problems.push(
      `${label}: an HTTP-triggered execution must answer within ${spec.httpResponseCapSec} s; a ${formatDuration(req.runtimeSec)} job needs --trigger event (queue trigger)`,
    );
  }
  if (req.memoryMb > spec.ceiling.maxMemoryMb) {
    problems.push(
      `${label}: ${formatMemory(req.memoryMb)} peak memory exceeds the ${formatMemory(spec.ceiling.maxMemoryMb)} limit${alternativesFor(spec, req)}`,
    );
  }
  return problems;
}

/** The smallest memory size the platform accepts that holds the peak. */
function stackMemory(spec: PlatformSpec, peakMb: number): number {
  if (spec.memoryStepsMb === undefined) return Math.max(spec.minMemoryMb, peakMb);
  const step = spec.memoryStepsMb.find((s) => s >= peakMb);
  // platformProblems already refused a peak above the largest size.
  return step ?? spec.ceiling.maxMemoryMb;
}

/**
 * The timeout the stack would set: the ceiling where there is one (billing is
 * per use, so the headroom is free), else the runtime with 50 % headroom,
 * rounded up to a minute and never below the platform default.
 */
function stackTimeout(spec: PlatformSpec, runtimeSec: number): number {
  if (spec.ceiling.ceilingSec !== undefined) return spec.ceiling.ceilingSec;
  const padded = Math.ceil((runtimeSec * UNBOUNDED_TIMEOUT_FACTOR) / 60) * 60;
  return Math.max(spec.ceiling.defaultTimeoutSec, padded);
}

function stackSettings(spec: PlatformSpec): PlatformStackSettings {
  switch (spec.platform) {
    case 'aws-lambda':
      return { cloud: 'aws' };
    case 'gcf2-event':
      return { cloud: 'gcp', gcpTileTrigger: 'event' };
    case 'gcf2-http':
      return { cloud: 'gcp', gcpTileTrigger: 'http' };
    case 'azure-consumption':
      return { cloud: 'azure', azurePlan: 'consumption' };
    case 'azure-flex':
      return { cloud: 'azure', azurePlan: 'flex' };
    case 'azure-premium':
      return { cloud: 'azure', azurePlan: 'premium' };
    default:
      return assertNever(spec.platform, 'platform');
  }
}

/**
 * The ranking score, lower is better:
 * `(1 - w) * distance / 20,015 km + w * (1 - cheapest / cost)`.
 * The cost term is the share of this choice's monthly cost above the
 * cheapest feasible choice's: 0 for the cheapest, 0.5 at twice its cost,
 * towards 1 for far dearer ones. It is scale-free, so the same weight means
 * the same for a one-scene trial and a thousand scenes a month.
 */
function score(distanceKm: number, costPerMonth: number, cheapest: number, costWeight: number): number {
  const distance = Math.min(1, distanceKm / MAX_DISTANCE_KM);
  const cost = costPerMonth <= 0 ? 0 : 1 - Math.max(0, cheapest) / costPerMonth;
  return (1 - costWeight) * distance + costWeight * cost;
}

type Draft = Omit<Choice, 'rank'>;

function missingOffers(region: Region, keys: readonly OfferKey[], value: Offer): OfferKey[] {
  return keys.filter((k) => offerOf(region, k) === value);
}

function regionDraft(
  spec: PlatformSpec,
  region: Region,
  req: NormalizedRequest,
  location: ResolvedLocation,
  outputs: Region | undefined,
): Draft {
  const lease = resolveLease({
    platform: spec.platform,
    functionTimeoutSec: stackTimeout(spec, req.runtimeSec),
    visibilityTimeoutSec: spec.cloud === 'aws' ? SQS_VISIBILITY_FACTOR * stackTimeout(spec, req.runtimeSec) : undefined,
  });
  const distanceKm = haversineKm(location.point, region);
  const warnings: string[] = [];
  for (const key of missingOffers(region, [spec.compute, spec.claimStore], 'unconfirmed')) {
    warnings.push(`${OFFER_LABELS[key]} in ${region.code} is unconfirmed: check with the provider before deploying`);
  }
  if (req.runtimeSec > TIGHT_SHARE * lease.functionTimeoutSec) {
    warnings.push(
      `tight: the ${formatDuration(req.runtimeSec)} job uses over ${TIGHT_SHARE * 100} % of the ${formatDuration(lease.functionTimeoutSec)} timeout`,
    );
  }
  if (spec.redeliveryAfterSec !== undefined && req.runtimeSec > spec.redeliveryAfterSec) {
    warnings.push(
      `the queue redelivers after ${spec.redeliveryAfterSec} s while the ${formatDuration(req.runtimeSec)} job still runs: expect duplicate deliveries (the lease turns them away)`,
    );
  }
  if (spec.costIndex > 1.5) warnings.push(`${spec.plan} keeps an instance warm: billed while idle`);
  const memoryMb = stackMemory(spec, req.memoryMb);
  const cost = priceChoice({
    workload: req.workload,
    runtimeSec: req.runtimeSec,
    peakMemoryMb: req.memoryMb,
    cloud: spec.cloud,
    region,
    platform: spec.platform,
    memoryMb,
    data: location.site,
    outputs,
  });
  return {
    cloud: spec.cloud,
    region,
    platform: spec.platform,
    plan: spec.plan,
    sameRegion: location.kind === 'region' && location.region.cloud === region.cloud && location.region.code === region.code,
    distanceKm,
    lease,
    memoryMb,
    // Set once every draft is priced: the cost term compares with the cheapest.
    score: 0,
    cost,
    warnings,
    settings: stackSettings(spec),
  };
}

/** Regions whose own refusals are worth reporting: the data's region, else each cloud's nearest. */
function regionsOfInterest(location: ResolvedLocation, regions: readonly Region[], clouds: readonly Cloud[]): Region[] {
  if (location.kind === 'region') return clouds.includes(location.region.cloud) ? [location.region] : [];
  return clouds.flatMap((cloud) => {
    const own = regions.filter((r) => r.cloud === cloud);
    const nearest = own.reduce<Region | undefined>(
      (best, r) => (best === undefined || haversineKm(location.point, r) < haversineKm(location.point, best) ? r : best),
      undefined,
    );
    return nearest ? [nearest] : [];
  });
}

function regionRejection(spec: PlatformSpec, region: Region, absent: readonly OfferKey[], feasible: readonly Draft[]): Rejection {
  const nearest = feasible
    .filter((d) => d.platform === spec.platform)
    .reduce<Draft | undefined>((best, d) => {
      const km = haversineKm(region, d.region);
      return best === undefined || km < haversineKm(region, best.region) ? d : best;
    }, undefined);
  const elsewhere = nearest ? `; nearest region with it: ${nearest.region.code} (${formatKm(haversineKm(region, nearest.region))})` : '';
  const missing = absent.includes(spec.compute)
    ? `${spec.ceiling.label} is not offered in ${region.code}${absent.includes(spec.claimStore) ? `, nor ${OFFER_LABELS[spec.claimStore]}` : ''}`
    : `${spec.ceiling.label}: its claim store ${OFFER_LABELS[spec.claimStore]} is not offered in ${region.code}`;
  return { cloud: spec.cloud, platform: spec.platform, region: region.code, reason: `${missing} (per the catalog)${elsewhere}` };
}

function compareDrafts(a: Draft, b: Draft): number {
  return (
    Number(b.sameRegion) - Number(a.sameRegion) ||
    a.score - b.score ||
    a.distanceKm - b.distanceKm ||
    a.cost.costPerMonth - b.cost.costPerMonth ||
    a.cloud.localeCompare(b.cloud) ||
    a.region.code.localeCompare(b.region.code) ||
    a.platform.localeCompare(b.platform)
  );
}

/**
 * Rank every feasible provider + region + plan for a job, with the reason
 * each other plan (or plan in the data's region) cannot run it.
 *
 * @param regions the catalog to choose from (default: the built-in one).
 * @throws UnknownRegionError for a region code the catalog does not know.
 * @throws InvalidCoordinatesError / InvalidParamsError for out-of-range input.
 * @example
 * chooseProvider({ data: { kind: 'region', code: 'westeurope' }, runtimeSec: 720, memoryMb: 3072, trigger: 'event' })
 *   .choices[0] // Azure Flex Consumption in westeurope; Consumption rejected: 12 min exceeds its 10 min ceiling
 */
export function chooseProvider(request: ChooseRequest, regions: readonly Region[] = ALL_REGIONS): ChooseResult {
  const req = validateRequest(request);
  const location = resolveLocation(req.data, regions);
  const outputs = req.workload.outputs === undefined ? undefined : resolvePriced(req.workload.outputs, '--outputs', regions);
  const rejections: Rejection[] = [];
  const drafts: Draft[] = [];
  const viable: PlatformSpec[] = [];
  for (const cloud of req.clouds) {
    for (const spec of platformsOf(cloud)) {
      if (!spec.triggers.includes(req.trigger)) continue;
      const problems = platformProblems(spec, req);
      if (problems.length === 0 && spec.notDeployable !== undefined) {
        problems.push(`${spec.ceiling.label} could run this job, but ${spec.notDeployable}${alternativesFor(spec, req)}`);
      }
      for (const reason of problems) rejections.push({ cloud, platform: spec.platform, reason });
      if (problems.length === 0) viable.push(spec);
    }
  }
  for (const spec of viable) {
    for (const region of regions) {
      if (region.cloud !== spec.cloud) continue;
      if (missingOffers(region, [spec.compute, spec.claimStore], 'no').length === 0)
        drafts.push(regionDraft(spec, region, req, location, outputs));
    }
  }
  for (const region of regionsOfInterest(location, regions, req.clouds)) {
    for (const spec of viable.filter((s) => s.cloud === region.cloud)) {
      const absent = missingOffers(region, [spec.compute, spec.claimStore], 'no');
      if (absent.length > 0) rejections.push(regionRejection(spec, region, absent, drafts));
    }
  }
  const cheapest = Math.min(...drafts.map((d) => d.cost.costPerMonth));
  const scored = drafts.map((d) => ({ ...d, score: score(d.distanceKm, d.cost.costPerMonth, cheapest, req.costWeight) }));
  const choices = scored.sort(compareDrafts).map((d, i) => ({ ...d, rank: i + 1 }));
  return { request: req, location, outputs, choices, rejections };
}

// ---------------------------------------------------------------------------
// Stack file (contract: /work/briefs/stack-config.md, mirrored in docs/choose.md)
// ---------------------------------------------------------------------------

/** Settings of the stack file that are not derived from the choice; defaults match DEFAULT_PARAMS. */
export interface StackFileOptions {
  /** Required for a GCP choice: the project the stack deploys into. */
  readonly gcpProject?: string | undefined;
  readonly sourcePrefix?: string | undefined;
  readonly sourceSuffix?: string | undefined;
  readonly maxReceiveCount?: number | undefined;
}

/** A default processing parameter, checked: DEFAULT_PARAMS is typed loosely (`unknown` values). */
function defaultParam<K extends 'string' | 'number'>(name: string, kind: K): K extends 'string' ? string : number {
  const value = DEFAULT_PARAMS[name];
  if (typeof value !== kind) throw new Error(`DEFAULT_PARAMS.${name} is not a ${kind}: ${JSON.stringify(value)}`);
  return value as K extends 'string' ? string : number;
}

/** Stack file defaults: the example values of the stack-config contract, and the default processing parameters. */
export const STACK_DEFAULTS = {
  sourcePrefix: DEFAULT_SOURCE_PREFIX,
  sourceSuffix: '.tif',
  /**
   * Deliveries before dead-lettering: 5 everywhere, as infra/common/config.ts
   * defaults it: AWS's advice for an SQS queue feeding Lambda (throttled
   * receives count), Pub/Sub's minimum maxDeliveryAttempts (5..100), and the
   * Azure host's own maxDequeueCount default.
   */
  maxReceiveCount: { aws: 5, gcp: 5, azure: 5 } satisfies Record<Cloud, number>,
  tilePx: defaultParam('tile_px', 'number'),
  pipelineVersion: DEFAULT_PARAMS.version,
  expression: defaultParam('expression', 'string'),
} as const;

/** `Pulumi.<cloud>-<region>.yaml`, the stack name being `<cloud>-<region>`. */
export function stackFileName(choice: Pick<Choice, 'cloud' | 'region'>): string {
  return `Pulumi.${choice.cloud}-${choice.region.code}.yaml`;
}

const GCP_PROJECT_ID = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/;

/**
 * The stack config entries for a choice, in file order. Values are strings or
 * numbers as Pulumi config holds them.
 *
 * @throws InvalidParamsError for a GCP choice without a valid project id.
 */
export function stackConfig(choice: Choice, options: StackFileOptions = {}): Array<readonly [string, string | number]> {
  const entries: Array<readonly [string, string | number]> = [
    ['tessera:cloud', choice.cloud],
    ['tessera:region', choice.region.code],
  ];
  const settings = choice.settings;
  switch (settings.cloud) {
    case 'aws':
      entries.push(['aws:region', choice.region.code]);
      break;
    case 'gcp': {
      const project = options.gcpProject;
      if (project === undefined || !GCP_PROJECT_ID.test(project)) {
        throw new InvalidParamsError(
          `a GCP stack needs its project: pass --gcp-project <id> (6-30 lowercase letters, digits or hyphens, starting with a letter)${project === undefined ? '' : `; got ${JSON.stringify(project)}`}`,
        );
      }
      entries.push(['gcp:region', choice.region.code], ['gcp:project', project]);
      break;
    }
    case 'azure':
      entries.push(['azure-native:location', choice.region.code]);
      break;
    default:
      return assertNever(settings, 'stack settings');
  }
  entries.push(
    ['tessera:functionTimeoutSeconds', choice.lease.functionTimeoutSec],
    ['tessera:leaseSeconds', choice.lease.leaseSec],
    ['tessera:memoryMb', choice.memoryMb],
  );
  if (settings.cloud === 'azure') entries.push(['tessera:azurePlan', settings.azurePlan]);
  if (settings.cloud === 'gcp') entries.push(['tessera:gcpTileTrigger', settings.gcpTileTrigger]);
  entries.push(
    ['tessera:sourcePrefix', options.sourcePrefix ?? STACK_DEFAULTS.sourcePrefix],
    ['tessera:sourceSuffix', options.sourceSuffix ?? STACK_DEFAULTS.sourceSuffix],
    ['tessera:tilePx', STACK_DEFAULTS.tilePx],
    ['tessera:pipelineVersion', STACK_DEFAULTS.pipelineVersion],
    ['tessera:expression', STACK_DEFAULTS.expression],
    ['tessera:maxReceiveCount', options.maxReceiveCount ?? STACK_DEFAULTS.maxReceiveCount[choice.cloud]],
  );
  return entries;
}

/** YAML scalars that a plain (unquoted) string would turn into something else. */
const YAML_AMBIGUOUS =
  /^(?:true|false|yes|no|on|off|y|n|null|~|[-+]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?|0x[\da-f]+|0o[0-7]+|\.inf|\.nan)$/i;

function yamlScalar(value: string | number): string {
  if (typeof value === 'number') return String(value);
  // Plain only when unambiguous; otherwise a JSON string, which YAML reads as a double-quoted scalar.
  return /^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(value) && !YAML_AMBIGUOUS.test(value) ? value : JSON.stringify(value);
}

/** One line saying what a choice was made for, for the stack file's header. */
export function describeRequest(req: NormalizedRequest): string {
  const where = req.data.kind === 'region' ? `data in ${req.data.code}` : `data at ${req.data.lat}, ${req.data.lon}`;
  return `${formatDuration(req.runtimeSec)} job, ${formatMemory(req.memoryMb)} peak, ${req.trigger} trigger, ${where}`;
}

/**
 * The text of `Pulumi.<cloud>-<region>.yaml` for a choice.
 *
 * @throws InvalidParamsError for a GCP choice without a valid project id.
 */
export function renderStackFile(result: Pick<ChooseResult, 'request'>, choice: Choice, options: StackFileOptions = {}): string {
  const lines = [
    `# Generated by \`tessera choose\` (${describeRequest(result.request)}).`,
    `# ${choice.plan} in ${choice.region.code} (${choice.region.name}): timeout ${choice.lease.functionTimeoutSec} s, lease ${choice.lease.leaseSec} s.`,
    ...choice.warnings.map((w) => `# Check: ${w}.`),
    'config:',
    ...stackConfig(choice, options).map(([key, value]) => `  ${key}: ${yamlScalar(value)}`),
  ];
  return `${lines.join('\n')}\n`;
}
