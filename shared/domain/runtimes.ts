/**
 * The Node.js runtimes the clouds accept, as read from each provider's own
 * runtime table on {@link RUNTIMES_READ_ON}. One dated table, so that infra
 * (which runtime id a function gets), the build (esbuild `target`, the
 * package's `engines`), the test launcher (which Node the tests run on) and
 * config validation (`tessera:runtime`, `tessera preflight`) cannot disagree.
 *
 * Dates are ISO calendar dates (UTC). A block date is the first day on which
 * the platform refuses the operation. Where a fact could not be confirmed from
 * the provider's page the row says `unconfirmed: true` and names the fact in
 * `note`; the value chosen is the one that refuses or warns earlier.
 *
 * Pure: no clock, no environment. Callers pass `today` (a Clock's now).
 */

import type { Platform } from './ceilings.js';
import { assertNever } from './claim.js';

/** The day the dates below were read from the providers' pages. */
export const RUNTIMES_READ_ON = '2026-12-01';

/** A place a function's code runs, as the runtime tables distinguish them. */
export const RUNTIME_PLATFORMS = ['aws-lambda', 'gcp-functions', 'azure-functions-flex', 'azure-functions-consumption'] as const;
export type RuntimePlatform = (typeof RUNTIME_PLATFORMS)[number];

/** The runtime table a tile-worker platform (shared/domain/ceilings.ts) reads; `undefined` for ones Tessera does not deploy. */
export function runtimePlatformOf(platform: Platform): RuntimePlatform | undefined {
  switch (platform) {
    case 'aws-lambda':
      return 'aws-lambda';
    case 'gcf2-http':
    case 'gcf2-event':
      return 'gcp-functions';
    case 'azure-flex':
      return 'azure-functions-flex';
    case 'azure-consumption':
      return 'azure-functions-consumption';
    case 'gcf1':
    case 'azure-premium':
    case 'local':
      return undefined;
    default:
      return assertNever(platform, 'platform');
  }
}

export const RUNTIME_PLATFORM_LABEL: Readonly<Record<RuntimePlatform, string>> = {
  'aws-lambda': 'AWS Lambda',
  'gcp-functions': 'Cloud Run functions',
  'azure-functions-flex': 'Azure Functions (Flex Consumption)',
  'azure-functions-consumption': 'Azure Functions (Linux Consumption)',
};

export interface RuntimeRow {
  readonly platform: RuntimePlatform;
  /**
   * The id the platform's API takes: Lambda `runtime`, Cloud Functions
   * `buildConfig.runtime`, Flex `functionAppConfig.runtime.version`, Linux
   * Consumption `siteConfig.linuxFxVersion`.
   */
  readonly runtimeId: string;
  readonly nodeMajor: number;
  /** `ga`: fully supported for production; `preview`: the provider says not yet supported. */
  readonly stage: 'ga' | 'preview';
  /** First day of general availability, where the provider's page gives it. */
  readonly ga: string | undefined;
  /** Deprecation (end of support): no more security patches from here on. */
  readonly deprecated: string | undefined;
  /** From this day the platform refuses to create a function on this runtime. */
  readonly createBlocked: string | undefined;
  /** From this day the platform refuses to update a function on this runtime. */
  readonly updateBlocked: string | undefined;
  /** The runtime id to move to on the same platform. */
  readonly replacement: string | undefined;
  readonly sourceUrl: string;
  readonly readOn: typeof RUNTIMES_READ_ON;
  readonly unconfirmed?: true;
  readonly note?: string;
}

const AWS_URL = 'https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html';
const GCP_URL = 'https://docs.cloud.google.com/run/docs/runtimes/function-runtimes';
const AZURE_URL = 'https://learn.microsoft.com/azure/azure-functions/supported-languages?pivots=programming-language-javascript';
const AZURE_CONSUMPTION_URL = 'https://learn.microsoft.com/azure/azure-functions/functions-versions';
const READ_ON = RUNTIMES_READ_ON;

export const RUNTIMES: readonly RuntimeRow[] = [
  // AWS Lambda: deprecation, then "block function create", then "block function update".
  {
    platform: 'aws-lambda',
    runtimeId: 'nodejs24.x',
    nodeMajor: 24,
    stage: 'ga',
    ga: '2025-11-25',
    deprecated: '2028-04-30',
    createBlocked: '2028-06-01',
    updateBlocked: '2028-07-01',
    replacement: undefined,
    sourceUrl: AWS_URL,
    readOn: READ_ON,
    unconfirmed: true,
    note: 'deprecation and block-update dates from copies of the AWS table (endoflife.date); the block-create date follows the pattern of nodejs22.x (deprecation + 1 month); GA date from endoflife.date',
  },
  {
    platform: 'aws-lambda',
    runtimeId: 'nodejs22.x',
    nodeMajor: 22,
    stage: 'ga',
    ga: '2024-11-22',
    deprecated: '2027-04-30',
    createBlocked: '2027-06-01',
    updateBlocked: '2027-07-01',
    replacement: 'nodejs24.x',
    sourceUrl: AWS_URL,
    readOn: READ_ON,
    unconfirmed: true,
    note: 'the AWS table was read through copies of it (endoflife.date, a dated brief quoting it); both give these dates; GA date from endoflife.date',
  },
  {
    platform: 'aws-lambda',
    runtimeId: 'nodejs20.x',
    nodeMajor: 20,
    stage: 'ga',
    ga: undefined,
    deprecated: '2026-04-30',
    createBlocked: '2026-08-31',
    updateBlocked: '2026-09-30',
    replacement: 'nodejs22.x',
    sourceUrl: AWS_URL,
    readOn: READ_ON,
    unconfirmed: true,
    note: 'one secondary source gives block dates in early June / early July 2026; both are past, so the outcome (refused) is the same',
  },
  // Cloud Run functions: deprecation, then decommission (no create, no update).
  {
    platform: 'gcp-functions',
    runtimeId: 'nodejs24',
    nodeMajor: 24,
    stage: 'ga',
    ga: undefined,
    deprecated: '2028-04-30',
    createBlocked: '2028-10-31',
    updateBlocked: '2028-10-31',
    replacement: undefined,
    sourceUrl: GCP_URL,
    readOn: READ_ON,
  },
  {
    platform: 'gcp-functions',
    runtimeId: 'nodejs22',
    nodeMajor: 22,
    stage: 'ga',
    ga: undefined,
    deprecated: '2027-04-30',
    createBlocked: '2027-10-31',
    updateBlocked: '2027-10-31',
    replacement: 'nodejs24',
    sourceUrl: GCP_URL,
    readOn: READ_ON,
  },
  {
    platform: 'gcp-functions',
    runtimeId: 'nodejs20',
    nodeMajor: 20,
    stage: 'ga',
    ga: undefined,
    deprecated: '2026-04-30',
    createBlocked: '2026-10-30',
    updateBlocked: '2026-10-30',
    replacement: 'nodejs22',
    sourceUrl: GCP_URL,
    readOn: READ_ON,
  },
  // Azure Functions: no block dates. A retired version can still be created and
  // deployed, it only stops getting patches (language-support-policy), so
  // checkRuntime refuses it past its end of support: nothing else would.
  {
    platform: 'azure-functions-flex',
    runtimeId: '24',
    nodeMajor: 24,
    stage: 'preview',
    ga: undefined,
    deprecated: '2028-04-30',
    createBlocked: undefined,
    updateBlocked: undefined,
    replacement: '22',
    sourceUrl: AZURE_URL,
    readOn: READ_ON,
    unconfirmed: true,
    note: 'listed as Preview; GA on Flex Consumption not confirmed, so Tessera does not deploy it',
  },
  {
    platform: 'azure-functions-flex',
    runtimeId: '22',
    nodeMajor: 22,
    stage: 'ga',
    ga: undefined,
    deprecated: '2027-04-30',
    createBlocked: undefined,
    updateBlocked: undefined,
    replacement: undefined,
    sourceUrl: AZURE_URL,
    readOn: READ_ON,
  },
  {
    platform: 'azure-functions-flex',
    runtimeId: '20',
    nodeMajor: 20,
    stage: 'ga',
    ga: undefined,
    deprecated: '2026-04-30',
    createBlocked: undefined,
    updateBlocked: undefined,
    replacement: '22',
    sourceUrl: AZURE_URL,
    readOn: READ_ON,
  },
  // Linux Consumption "isn't getting any new features or language versions"
  // (it retires 2028-09-30): no Node 24 row exists for it.
  {
    platform: 'azure-functions-consumption',
    runtimeId: 'Node|22',
    nodeMajor: 22,
    stage: 'ga',
    ga: undefined,
    deprecated: '2027-04-30',
    createBlocked: undefined,
    updateBlocked: undefined,
    replacement: undefined,
    sourceUrl: AZURE_CONSUMPTION_URL,
    readOn: READ_ON,
    note: 'the last Node version Linux Consumption gets; move to Flex Consumption for later ones',
  },
  {
    platform: 'azure-functions-consumption',
    runtimeId: 'Node|20',
    nodeMajor: 20,
    stage: 'ga',
    ga: undefined,
    deprecated: '2026-04-30',
    createBlocked: undefined,
    updateBlocked: undefined,
    replacement: 'Node|22',
    sourceUrl: AZURE_CONSUMPTION_URL,
    readOn: READ_ON,
  },
];

/**
 * The clouds Tessera deploys to, and the platforms (plans) each may run its
 * functions on. One archive per cloud serves every plan of that cloud
 * (scripts/build-functions.ts), so a cloud runs one Node major on all of them.
 */
export const RUNTIME_CLOUDS = ['aws', 'gcp', 'azure'] as const;
export type RuntimeCloud = (typeof RUNTIME_CLOUDS)[number];

export const CLOUD_RUNTIME_PLATFORMS: Readonly<Record<RuntimeCloud, readonly RuntimePlatform[]>> = {
  aws: ['aws-lambda'],
  gcp: ['gcp-functions'],
  azure: ['azure-functions-flex', 'azure-functions-consumption'],
};

/** The cloud a runtime platform belongs to. */
export function cloudOfRuntimePlatform(platform: RuntimePlatform): RuntimeCloud {
  switch (platform) {
    case 'aws-lambda':
      return 'aws';
    case 'gcp-functions':
      return 'gcp';
    case 'azure-functions-flex':
    case 'azure-functions-consumption':
      return 'azure';
    default:
      return assertNever(platform, 'runtime platform');
  }
}

/** Node's long-term-support lines are its even majors. */
const isLts = (nodeMajor: number): boolean => nodeMajor % 2 === 0;

/**
 * The newest Node LTS major that is GA, in this table, on every plan Tessera
 * deploys on the cloud. Derived, never chosen by hand: a table edit that makes
 * a newer LTS GA on all of a cloud's plans moves that cloud to it; infra and
 * the build follow, and test/unit/node-runtime.test.ts fails until package.json
 * pins a Node of that major for the tests.
 */
function newestLtsGaOnEveryPlan(cloud: RuntimeCloud): number {
  const plans = CLOUD_RUNTIME_PLATFORMS[cloud];
  const gaOn = (platform: RuntimePlatform, nodeMajor: number) =>
    RUNTIMES.some((r) => r.platform === platform && r.nodeMajor === nodeMajor && r.stage === 'ga');
  const majors = [...new Set(RUNTIMES.map((r) => r.nodeMajor))].filter((m) => isLts(m) && plans.every((p) => gaOn(p, m)));
  if (majors.length === 0) {
    // A table edit that leaves a cloud without a common GA LTS; caught by the unit tests.
    throw new Error(`[runtimes] no Node LTS is GA on every ${cloud} plan (${plans.join(', ')}); fix RUNTIMES in shared/domain/runtimes.ts`);
  }
  return Math.max(...majors);
}

/**
 * The Node major each cloud runs, as of the table read on {@link RUNTIMES_READ_ON}:
 * AWS 24 (`nodejs24.x` is GA on Lambda), GCP 24 (`nodejs24` is GA on Cloud
 * Run functions), Azure 22 (24 is only Preview on Flex Consumption, and Linux
 * Consumption gets no new language versions at all).
 */
export const DEPLOYED_NODE_MAJORS: Readonly<Record<RuntimeCloud, number>> = {
  aws: newestLtsGaOnEveryPlan('aws'),
  gcp: newestLtsGaOnEveryPlan('gcp'),
  azure: newestLtsGaOnEveryPlan('azure'),
};

/** The Node major Tessera deploys on a cloud, and therefore the one that cloud's handler, contract and parity tests run on. */
export function deployedNodeMajor(cloud: RuntimeCloud): number {
  return DEPLOYED_NODE_MAJORS[cloud];
}

/**
 * Every Node major the project runs on, newest first (24, 22): the test
 * launcher (scripts/node.mjs) pins one Node of each in the lockfile, and
 * package.json's `engines` is `>=` the oldest.
 */
export const PROJECT_NODE_MAJORS: readonly number[] = [...new Set(RUNTIME_CLOUDS.map(deployedNodeMajor))].sort((a, b) => b - a);

/**
 * The newest of them: the Node the local backend, the CLI, the benchmarks and
 * the main test pass (every suite, every emulator) run on. The clouds on an
 * older major get a second pass of their own suites on it (scripts/test.mjs).
 */
export const MAIN_NODE_MAJOR: number = PROJECT_NODE_MAJORS[0] ?? deployedNodeMajor('aws');

/** The Node major the tests of a cloud, or of the local backend, must run on. */
export function testNodeMajor(target: RuntimeCloud | 'local'): number {
  return target === 'local' ? MAIN_NODE_MAJOR : deployedNodeMajor(target);
}

/** How many days before a deprecation checkRuntime starts to warn. */
export const DEPRECATION_WARNING_DAYS = 90;

/** The row of the runtime Tessera deploys on a platform. */
export function deployedRuntime(platform: RuntimePlatform): RuntimeRow {
  const nodeMajor = deployedNodeMajor(cloudOfRuntimePlatform(platform));
  const row = RUNTIMES.find((r) => r.platform === platform && r.nodeMajor === nodeMajor && r.stage === 'ga');
  if (row === undefined) {
    // Cannot happen while DEPLOYED_NODE_MAJORS is derived from this table; kept so the type says "a row".
    throw new Error(`[runtimes] no GA Node ${nodeMajor} row for ${platform}; fix RUNTIMES in shared/domain/runtimes.ts`);
  }
  return row;
}

/** The runtime ids the table knows for a platform, newest first. */
export function knownRuntimeIds(platform: RuntimePlatform): readonly string[] {
  return RUNTIMES.filter((r) => r.platform === platform)
    .sort((a, b) => b.nodeMajor - a.nodeMajor)
    .map((r) => r.runtimeId);
}

export type RuntimeCheck =
  | { readonly level: 'ok'; readonly message: string; readonly row: RuntimeRow }
  | { readonly level: 'warn'; readonly message: string; readonly row: RuntimeRow }
  | { readonly level: 'refuse'; readonly message: string; readonly row: RuntimeRow | undefined };

const DAY_MS = 86_400_000;

/** Whole days from `today` (its UTC calendar day) to an ISO date; negative once the date has passed. */
function daysUntil(isoDate: string, today: Date): number {
  const todayUtc = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate());
  return Math.round((Date.parse(`${isoDate}T00:00:00Z`) - todayUtc) / DAY_MS);
}

/**
 * Can a function be deployed on `runtimeId` on `platform` today?
 * - `refuse`: an unknown id (the message lists the known ones); a create or
 *   update block that has begun (the message gives the date and the
 *   replacement); on Azure, which never blocks, an end of support that has passed.
 * - `warn`: a deprecation that has passed or is at most
 *   {@link DEPRECATION_WARNING_DAYS} days away, naming the replacement; a Preview runtime.
 * - `ok` otherwise.
 *
 * @example
 * checkRuntime('gcp-functions', 'nodejs20', new Date('2026-12-01')).level // 'refuse'
 */
export function checkRuntime(platform: RuntimePlatform, runtimeId: string, today: Date): RuntimeCheck {
  const label = RUNTIME_PLATFORM_LABEL[platform];
  const row = RUNTIMES.find((r) => r.platform === platform && r.runtimeId === runtimeId);
  if (row === undefined) {
    return {
      level: 'refuse',
      row: undefined,
      message: `${label} has no runtime ${JSON.stringify(runtimeId)} in Tessera's table (read ${RUNTIMES_READ_ON}); known: ${knownRuntimeIds(platform).join(', ')}`,
    };
  }
  const instead = row.replacement === undefined ? '' : `; use ${row.replacement}`;
  const source = ` (${row.sourceUrl}, read ${row.readOn})`;
  const block = [
    { what: 'creating', date: row.createBlocked },
    { what: 'updating', date: row.updateBlocked },
  ].find((b) => b.date !== undefined && daysUntil(b.date, today) <= 0);
  if (block?.date !== undefined) {
    return {
      level: 'refuse',
      row,
      message: `${label} refuses ${block.what} functions on ${runtimeId} since ${block.date}${instead}${source}`,
    };
  }
  if (row.deprecated !== undefined) {
    const days = daysUntil(row.deprecated, today);
    const neverBlocked = row.createBlocked === undefined && row.updateBlocked === undefined;
    if (days <= 0 && neverBlocked) {
      return {
        level: 'refuse',
        row,
        message: `${runtimeId} on ${label} is past its end of support (${row.deprecated}): the platform still deploys it, but without security patches${instead}${source}`,
      };
    }
    if (days <= DEPRECATION_WARNING_DAYS) {
      const when = days <= 0 ? `was deprecated on ${row.deprecated}` : `is deprecated on ${row.deprecated} (in ${days} days)`;
      const next = row.createBlocked === undefined ? '' : `; creating functions is refused from ${row.createBlocked}`;
      return { level: 'warn', row, message: `${runtimeId} on ${label} ${when}${next}${instead}${source}` };
    }
  }
  if (row.stage === 'preview') {
    return {
      level: 'warn',
      row,
      message: `${runtimeId} on ${label} is in Preview, which the provider does not support for production${instead}${source}`,
    };
  }
  return {
    level: 'ok',
    row,
    message: `${runtimeId} on ${label} is supported until ${row.deprecated ?? 'a date not yet announced'}${source}`,
  };
}
