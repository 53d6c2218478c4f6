import { LeaseConfigError } from './errors.js';

/**
 * Compute platforms Tessera deploys to, with the hard ceiling on one
 * invocation (../PROVIDER-FACTS.md, from each provider's quota pages).
 * A lease must outlive the longest an invocation can run, or a live worker
 * loses its job to a redelivery.
 */
export type Platform = 'aws-lambda' | 'gcf2-http' | 'gcf2-event' | 'gcf1' | 'azure-consumption' | 'azure-flex' | 'azure-premium' | 'local';

export interface PlatformCeiling {
  readonly platform: Platform;
  readonly label: string;
  /** Default function timeout in seconds. */
  readonly defaultTimeoutSec: number;
  /** Hard ceiling in seconds; `undefined` where the platform has none (the configured timeout is the ceiling). */
  readonly ceilingSec: number | undefined;
  /** Largest memory one invocation may have, in MB. */
  readonly maxMemoryMb: number;
  /** Default lease, in seconds, above the ceiling. */
  readonly defaultLeaseSec: number | undefined;
}

/**
 * Lease defaults: Lambda 900 s -> 1,200 s and Azure Consumption 600 s ->
 * 900 s as in the design notes; Cloud Functions 2nd gen 3,600 s (HTTP) ->
 * 3,900 s (the notes' 65 minutes) and 540 s (event-driven) -> 840 s. On the
 * unbounded plans the lease is the configured timeout plus {@link UNBOUNDED_LEASE_MARGIN_SEC}.
 */
export const CEILINGS: Readonly<Record<Platform, PlatformCeiling>> = {
  'aws-lambda': {
    platform: 'aws-lambda',
    label: 'AWS Lambda',
    defaultTimeoutSec: 3,
    ceilingSec: 900,
    maxMemoryMb: 10_240,
    defaultLeaseSec: 1_200,
  },
  'gcf2-http': {
    platform: 'gcf2-http',
    label: 'Cloud Functions 2nd gen (HTTP trigger)',
    defaultTimeoutSec: 60,
    ceilingSec: 3_600,
    maxMemoryMb: 32_768,
    defaultLeaseSec: 3_900,
  },
  'gcf2-event': {
    platform: 'gcf2-event',
    label: 'Cloud Functions 2nd gen (event trigger)',
    defaultTimeoutSec: 60,
    ceilingSec: 540,
    maxMemoryMb: 32_768,
    defaultLeaseSec: 840,
  },
  gcf1: {
    platform: 'gcf1',
    label: 'Cloud Functions 1st gen',
    defaultTimeoutSec: 60,
    ceilingSec: 540,
    maxMemoryMb: 8_192,
    defaultLeaseSec: 840,
  },
  'azure-consumption': {
    platform: 'azure-consumption',
    label: 'Azure Functions Consumption',
    defaultTimeoutSec: 300,
    ceilingSec: 600,
    maxMemoryMb: 1_536,
    defaultLeaseSec: 900,
  },
  'azure-flex': {
    platform: 'azure-flex',
    label: 'Azure Functions Flex Consumption',
    defaultTimeoutSec: 1_800,
    ceilingSec: undefined,
    maxMemoryMb: 4_096,
    defaultLeaseSec: undefined,
  },
  'azure-premium': {
    platform: 'azure-premium',
    label: 'Azure Functions Premium',
    defaultTimeoutSec: 1_800,
    ceilingSec: undefined,
    maxMemoryMb: 14_336,
    defaultLeaseSec: undefined,
  },
  local: {
    platform: 'local',
    label: 'local backend',
    defaultTimeoutSec: 600,
    ceilingSec: undefined,
    maxMemoryMb: Number.POSITIVE_INFINITY,
    defaultLeaseSec: undefined,
  },
};

export const UNBOUNDED_LEASE_MARGIN_SEC = 300;

export const PLATFORMS = Object.keys(CEILINGS) as Platform[];

export function isPlatform(value: unknown): value is Platform {
  return typeof value === 'string' && Object.hasOwn(CEILINGS, value);
}

export interface LeaseConfigInput {
  readonly platform: Platform;
  /** The function timeout as configured; defaults to the ceiling (or the platform default where unbounded). */
  readonly functionTimeoutSec?: number | undefined;
  readonly leaseSec?: number | undefined;
  /** Queue visibility timeout / ack deadline, where the trigger has one. */
  readonly visibilityTimeoutSec?: number | undefined;
}

export interface LeaseConfig {
  readonly platform: Platform;
  readonly functionTimeoutSec: number;
  /** What the lease must exceed: the hard ceiling, or the configured timeout where there is none. */
  readonly ceilingSec: number;
  readonly leaseSec: number;
  readonly visibilityTimeoutSec: number | undefined;
}

function wholeSeconds(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0) {
    throw new LeaseConfigError(`${name} must be a positive whole number of seconds, got ${JSON.stringify(value)}`);
  }
  return value;
}

/**
 * Resolve and validate a lease configuration. Refuses a lease at or below the
 * ceiling, a timeout above the ceiling, and a visibility timeout below the
 * function timeout, each with a message that says what to change.
 *
 * @example
 * resolveLease({ platform: 'aws-lambda', functionTimeoutSec: 900 }).leaseSec // 1200
 */
export function resolveLease(input: LeaseConfigInput): LeaseConfig {
  const spec = CEILINGS[input.platform];
  if (!spec) throw new LeaseConfigError(`unknown platform ${JSON.stringify(input.platform)}; use one of ${PLATFORMS.join(', ')}`);
  const timeout = wholeSeconds('function timeout', input.functionTimeoutSec ?? spec.ceilingSec ?? spec.defaultTimeoutSec);
  if (spec.ceilingSec !== undefined && timeout > spec.ceilingSec) {
    throw new LeaseConfigError(
      `${spec.label}: function timeout ${timeout} s exceeds the platform ceiling of ${spec.ceilingSec} s; set it to ${spec.ceilingSec} s or less` +
        (input.platform === 'azure-consumption' ? ', or use the Flex Consumption or Premium plan' : '') +
        (input.platform === 'gcf2-event' ? ', or use an HTTP-triggered function (3,600 s ceiling)' : ''),
    );
  }
  const ceiling = spec.ceilingSec ?? timeout;
  const lease = wholeSeconds('lease', input.leaseSec ?? spec.defaultLeaseSec ?? timeout + UNBOUNDED_LEASE_MARGIN_SEC);
  if (lease <= ceiling) {
    throw new LeaseConfigError(
      `${spec.label}: lease ${lease} s must be longer than the ${spec.ceilingSec === undefined ? 'configured function timeout' : 'platform ceiling'} of ${ceiling} s, ` +
        `or a worker still running could lose its job to a redelivery; set the lease to at least ${ceiling + 1} s (default ${spec.defaultLeaseSec ?? ceiling + UNBOUNDED_LEASE_MARGIN_SEC} s)`,
    );
  }
  let visibility: number | undefined;
  if (input.visibilityTimeoutSec !== undefined) {
    visibility = wholeSeconds('queue visibility timeout', input.visibilityTimeoutSec);
    if (visibility < timeout) {
      throw new LeaseConfigError(
        `${spec.label}: queue visibility timeout ${visibility} s is below the function timeout of ${timeout} s, so every slow job would be redelivered while it runs; ` +
          `set it to at least ${timeout} s (AWS recommends ${6 * timeout} s, six times the timeout)`,
      );
    }
  }
  return { platform: input.platform, functionTimeoutSec: timeout, ceilingSec: ceiling, leaseSec: lease, visibilityTimeoutSec: visibility };
}
