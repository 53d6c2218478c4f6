import { CEILINGS, type Platform, type PlatformCeiling } from '../../domain/ceilings.js';

/** The clouds `tessera choose` can place a stack on. */
export type Cloud = 'aws' | 'gcp' | 'azure';

export const CLOUDS: readonly Cloud[] = ['aws', 'gcp', 'azure'];

/**
 * Whether a service is offered in a region: `unconfirmed` where the catalog's
 * sources did not settle it (the chooser still proposes the region, with a warning).
 */
export type Offer = 'yes' | 'no' | 'unconfirmed';

/** Per-region offerings, one shape per cloud: compute plans and the claim store. */
export interface AwsOffers {
  readonly lambda: Offer;
  readonly dynamodb: Offer;
}
export interface GcpOffers {
  /** Cloud Functions 2nd gen (Cloud Run functions). */
  readonly gcf2: Offer;
  readonly firestore: Offer;
}
export interface AzureOffers {
  readonly consumption: Offer;
  readonly flex: Offer;
  readonly premium: Offer;
  readonly tableStorage: Offer;
}

interface RegionBase {
  /** The provider's own region code: `eu-west-1`, `europe-west1`, `westeurope`. */
  readonly code: string;
  /** Where the region is, as the provider names it. */
  readonly name: string;
  /** Decimal degrees (WGS 84) of the region's metro area; see {@link CATALOG_SOURCES} for how precise. */
  readonly lat: number;
  readonly lon: number;
}
export interface AwsRegion extends RegionBase {
  readonly cloud: 'aws';
  readonly offers: AwsOffers;
}
export interface GcpRegion extends RegionBase {
  readonly cloud: 'gcp';
  readonly offers: GcpOffers;
}
export interface AzureRegion extends RegionBase {
  readonly cloud: 'azure';
  readonly offers: AzureOffers;
}
export type Region = AwsRegion | GcpRegion | AzureRegion;

/** Offering keys of every cloud, so a platform can name the one that gates it. */
export type OfferKey = keyof AwsOffers | keyof GcpOffers | keyof AzureOffers;

/** The platforms `tessera choose` proposes (the deployable subset of {@link Platform}). */
export type DeployPlatform = Exclude<Platform, 'gcf1' | 'local'>;

export type Trigger = 'event' | 'http';

/**
 * What the chooser needs to know about one deployable platform beyond its
 * ceiling. Ceilings and memory limits are NOT repeated here: {@link ceiling}
 * is the entry of shared/domain/ceilings.ts.
 */
export interface PlatformSpec {
  readonly platform: DeployPlatform;
  readonly cloud: Cloud;
  /** Short plan name for tables: `Lambda`, `Flex Consumption`. */
  readonly plan: string;
  readonly ceiling: PlatformCeiling;
  /** The region offering that must be present for this platform (besides the claim store). */
  readonly compute: OfferKey;
  /** The claim store Tessera uses on this cloud. */
  readonly claimStore: OfferKey;
  /** Triggers this platform can serve the tile worker with. */
  readonly triggers: readonly Trigger[];
  /**
   * Memory sizes the platform accepts, ascending, in MB; `undefined` where any
   * whole MB from {@link minMemoryMb} to the ceiling's `maxMemoryMb` is accepted.
   */
  readonly memoryStepsMb: readonly number[] | undefined;
  readonly minMemoryMb: number;
  /**
   * Longest HTTP-triggered execution the platform's front end waits for, in
   * seconds, where it is shorter than the compute ceiling (Azure: 230 s).
   */
  readonly httpResponseCapSec: number | undefined;
  /**
   * Where the delivering queue gives up waiting and redelivers while the
   * function still runs, in seconds (Pub/Sub push: the ack deadline, at most
   * 600 s, is also the request timeout). The lease turns the redelivery away.
   */
  readonly redeliveryAfterSec: number | undefined;
  /**
   * Rough relative cost of running a mostly idle, bursty tile workload
   * (1 = pay-per-use with scale to zero). Not a price and no longer a ranking
   * weight (the ranking uses the priced month, shared/placement/cost-model.ts):
   * it only flags plans billed while idle (above 1.5) in the warnings.
   */
  readonly costIndex: number;
  /**
   * Why Tessera's own infra/ cannot deploy this platform yet, or `undefined`
   * when it can. The chooser proposes only platforms it could write a working
   * stack file for; this says why one that would fit is left out.
   */
  readonly notDeployable: string | undefined;
}

/** Cloud Functions 2nd gen memory sizes (MiB), 128Mi..32Gi. */
const GCF2_MEMORY_STEPS = [128, 256, 512, 1_024, 2_048, 4_096, 8_192, 16_384, 32_768] as const;

/**
 * The deployable platforms. Sources for the non-ceiling facts (memory steps,
 * the 230 s HTTP cap) are in {@link CATALOG_SOURCES}.
 */
export const PLATFORM_SPECS: Readonly<Record<DeployPlatform, PlatformSpec>> = {
  'aws-lambda': {
    platform: 'aws-lambda',
    cloud: 'aws',
    plan: 'Lambda',
    ceiling: CEILINGS['aws-lambda'],
    compute: 'lambda',
    claimStore: 'dynamodb',
    triggers: ['event', 'http'],
    memoryStepsMb: undefined,
    minMemoryMb: 128,
    httpResponseCapSec: undefined,
    redeliveryAfterSec: undefined,
    costIndex: 1,
    notDeployable: undefined,
  },
  'gcf2-event': {
    platform: 'gcf2-event',
    cloud: 'gcp',
    plan: 'Cloud Functions 2nd gen, event',
    ceiling: CEILINGS['gcf2-event'],
    compute: 'gcf2',
    claimStore: 'firestore',
    triggers: ['event'],
    memoryStepsMb: GCF2_MEMORY_STEPS,
    minMemoryMb: 128,
    httpResponseCapSec: undefined,
    redeliveryAfterSec: undefined,
    costIndex: 1,
    notDeployable: undefined,
  },
  'gcf2-http': {
    platform: 'gcf2-http',
    cloud: 'gcp',
    plan: 'Cloud Functions 2nd gen, HTTP',
    ceiling: CEILINGS['gcf2-http'],
    compute: 'gcf2',
    claimStore: 'firestore',
    triggers: ['http'],
    memoryStepsMb: GCF2_MEMORY_STEPS,
    minMemoryMb: 128,
    httpResponseCapSec: undefined,
    redeliveryAfterSec: 600,
    costIndex: 1,
    notDeployable: undefined,
  },
  'azure-consumption': {
    platform: 'azure-consumption',
    cloud: 'azure',
    plan: 'Consumption',
    ceiling: CEILINGS['azure-consumption'],
    compute: 'consumption',
    claimStore: 'tableStorage',
    triggers: ['event', 'http'],
    memoryStepsMb: [CEILINGS['azure-consumption'].maxMemoryMb],
    minMemoryMb: CEILINGS['azure-consumption'].maxMemoryMb,
    httpResponseCapSec: 230,
    redeliveryAfterSec: undefined,
    costIndex: 1,
    notDeployable: undefined,
  },
  'azure-flex': {
    platform: 'azure-flex',
    cloud: 'azure',
    plan: 'Flex Consumption',
    ceiling: CEILINGS['azure-flex'],
    compute: 'flex',
    claimStore: 'tableStorage',
    triggers: ['event', 'http'],
    memoryStepsMb: [512, 2_048, 4_096],
    minMemoryMb: 512,
    httpResponseCapSec: 230,
    redeliveryAfterSec: undefined,
    costIndex: 1.1,
    notDeployable: undefined,
  },
  'azure-premium': {
    platform: 'azure-premium',
    cloud: 'azure',
    plan: 'Premium',
    ceiling: CEILINGS['azure-premium'],
    compute: 'premium',
    claimStore: 'tableStorage',
    triggers: ['event', 'http'],
    // EP1 3.5 GB, EP2 7 GB, EP3 14 GB.
    memoryStepsMb: [3_584, 7_168, 14_336],
    minMemoryMb: 3_584,
    httpResponseCapSec: 230,
    redeliveryAfterSec: undefined,
    // Premium keeps at least one instance warm: billed while idle.
    costIndex: 3,
    // infra/common/config.ts refuses tessera:azurePlan premium: the plan needs an Azure Files content share.
    notDeployable: "Tessera's infra does not deploy the Premium plan yet (it needs an Azure Files content share)",
  },
};

export const DEPLOY_PLATFORMS = Object.keys(PLATFORM_SPECS) as DeployPlatform[];

/** Platforms of one cloud, in the order the chooser tries them (cheapest first). */
export function platformsOf(cloud: Cloud): PlatformSpec[] {
  return DEPLOY_PLATFORMS.map((p) => PLATFORM_SPECS[p]).filter((s) => s.cloud === cloud);
}

/** The offer a region makes for a key of its own cloud (`no` for another cloud's key). */
export function offerOf(region: Region, key: OfferKey): Offer {
  const offers = region.offers as unknown as Partial<Record<OfferKey, Offer>>;
  return offers[key] ?? 'no';
}

/** Human name of an offering key, for messages. */
export const OFFER_LABELS: Readonly<Record<OfferKey, string>> = {
  lambda: 'AWS Lambda',
  dynamodb: 'DynamoDB',
  gcf2: 'Cloud Functions 2nd gen',
  firestore: 'Firestore',
  consumption: 'Azure Functions Consumption',
  flex: 'Azure Functions Flex Consumption',
  premium: 'Azure Functions Premium',
  tableStorage: 'Azure Table Storage',
};

/** Where a catalog fact came from. */
export interface CatalogSource {
  readonly id: string;
  readonly url: string;
  /** The date the source was read (ISO), and for repositories the commit. */
  readonly read: string;
  readonly covers: string;
}
