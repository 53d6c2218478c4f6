import { azureHostSchedule, ownLeaseAnswer, pubSubSchedule, type RedeliverySchedule, sqsSchedule } from '../../shared/app/redelivery.js';
import { CEILINGS } from '../../shared/domain/ceilings.js';
import { assertNever } from '../../shared/domain/claim.js';
import { PUBSUB_MAX_ACK_DEADLINE_SEC, parseStackConfig, type StackConfig, StackConfigError } from '../common/config.js';
import { archivesFor, MissingArchiveError } from '../common/packaging.js';

/**
 * The checks `tessera preflight` runs before `pulumi up`, without the Pulumi
 * CLI or a cloud account: each is a value (level, what was checked, what to
 * fix), so the command prints them and a test asserts them.
 *
 * - config: the program's own validation (infra/common/config.ts), which
 *   also refuses a runtime past its block date (shared/domain/runtimes.ts);
 * - runtime: the deployed runtime's dates against `today`;
 * - lease: timeout within the platform ceiling, lease above it;
 * - visibility: the trigger keeps a running job invisible for its timeout;
 * - retry: what a redelivery does when an earlier attempt died holding the
 *   lease (shared/app/redelivery.ts, the rule the handlers apply), and
 *   whether the dead-letter count is the one the platform advises;
 * - archives: the build output `pulumi up` uploads exists;
 * - placeholders: values the example stacks ship that must be replaced.
 */

export type CheckLevel = 'ok' | 'warn' | 'error';

export interface Check {
  readonly level: CheckLevel;
  /** Short name: config, runtime, lease, visibility, retry, archives, project. */
  readonly check: string;
  readonly message: string;
  /** What to do about a warn or an error: a command or a setting. */
  readonly fix?: string;
}

export interface PreflightInput {
  readonly stack: string;
  /** The flat `namespace:key` map of the stack file. */
  readonly config: Readonly<Record<string, string>>;
  readonly defaultArchiveDir: string;
  /** The day runtime dates are checked against (a Clock's now, or `--today`). */
  readonly today: Date;
}

export interface ConfigChecks {
  readonly checks: readonly Check[];
  /** The parsed configuration, when it is deployable. */
  readonly config: StackConfig | undefined;
  /** True when the archives are missing: the plan is drawn with placeholders. */
  readonly archivesMissing: boolean;
}

/** The `gcp:project` the example stack file ships with. */
export const EXAMPLE_GCP_PROJECT = 'my-tessera-project';

/** Every check that needs only the stack file, in the order they are printed. */
export function checkStack(input: PreflightInput): ConfigChecks {
  let cfg: StackConfig;
  try {
    cfg = parseStackConfig(input.config, { stack: input.stack, defaultArchiveDir: input.defaultArchiveDir, today: input.today });
  } catch (e) {
    if (!(e instanceof StackConfigError)) throw e;
    const checks = e.problems.map(
      (p): Check => ({ level: 'error', check: p.includes('tessera:runtime') ? 'runtime' : 'config', message: p }),
    );
    return { checks, config: undefined, archivesMissing: false };
  }
  const keys = Object.keys(input.config).filter((k) => k.startsWith('tessera:')).length;
  const checks: Check[] = [
    {
      level: 'ok',
      check: 'config',
      message: `${keys} tessera: keys parse; ${cfg.cloud} in ${cfg.region}, tile worker on ${CEILINGS[cfg.platform].label}`,
    },
    runtimeCheck(cfg),
    leaseCheck(cfg),
    visibilityCheck(cfg),
    ...retryChecks(cfg),
  ];
  let archivesMissing = false;
  try {
    archivesFor(cfg.cloud, cfg.archiveDir);
    checks.push({ level: 'ok', check: 'archives', message: `function archives found in ${cfg.archiveDir}` });
  } catch (e) {
    if (!(e instanceof MissingArchiveError)) throw e;
    archivesMissing = true;
    checks.push({
      level: 'warn',
      check: 'archives',
      message: `${e.missing.join(', ')} not built yet; the plan below uses placeholders`,
      fix: 'npm run build:functions (before pulumi up)',
    });
  }
  if (cfg.cloud === 'gcp' && cfg.project === EXAMPLE_GCP_PROJECT) {
    checks.push({
      level: 'warn',
      check: 'project',
      message: `gcp:project is the example's ${EXAMPLE_GCP_PROJECT}`,
      fix: 'pulumi config set gcp:project <your-project-id>',
    });
  }
  return { checks, config: cfg, archivesMissing };
}

function runtimeCheck(cfg: StackConfig): Check {
  const { check } = cfg.runtime;
  switch (check.level) {
    case 'ok':
      return { level: 'ok', check: 'runtime', message: check.message };
    case 'warn': {
      const instead = check.row.replacement;
      return {
        level: 'warn',
        check: 'runtime',
        message: check.message,
        fix: instead === undefined ? 'update shared/domain/runtimes.ts' : `pulumi config set tessera:runtime ${instead}`,
      };
    }
    case 'refuse':
      // parseStackConfig refuses these; kept for exhaustiveness.
      return { level: 'error', check: 'runtime', message: check.message };
    default:
      return assertNever(check, 'runtime check');
  }
}

function leaseCheck(cfg: StackConfig): Check {
  const { functionTimeoutSec: timeout, ceilingSec: ceiling, leaseSec: lease } = cfg.lease;
  const spec = CEILINGS[cfg.platform];
  const bound = spec.ceilingSec === undefined ? `the configured timeout (${spec.label} has no ceiling)` : `the ${spec.label} ceiling`;
  return {
    level: 'ok',
    check: 'lease',
    message: `tile timeout ${timeout} s <= ${bound} ${ceiling} s < lease ${lease} s: a worker that is still running never loses its claim`,
  };
}

function visibilityCheck(cfg: StackConfig): Check {
  const timeout = cfg.lease.functionTimeoutSec;
  switch (cfg.cloud) {
    case 'aws':
      return {
        level: 'ok',
        check: 'visibility',
        message: `tile queue visibility ${cfg.tileQueueVisibilitySec} s (6 x timeout, 12 h cap) >= timeout ${timeout} s; at most ${cfg.tileMaxConcurrency} tile workers at once`,
      };
    case 'gcp':
      return cfg.tileTrigger === 'event'
        ? {
            level: 'ok',
            check: 'visibility',
            message: `push ack deadline ${cfg.ackDeadlineSec} s >= tile timeout ${timeout} s`,
          }
        : {
            level: 'warn',
            check: 'visibility',
            message: `an HTTP tile worker runs up to ${timeout} s, but Pub/Sub holds a push at most ${PUBSUB_MAX_ACK_DEADLINE_SEC} s: a longer job is redelivered while it runs, and the lease (${cfg.lease.leaseSec} s) turns the copy away`,
            fix: 'keep tile jobs under 600 s, or accept the redelivery (docs/gcp.md)',
          };
    case 'azure':
      return {
        level: 'ok',
        check: 'visibility',
        message: `the Functions host renews a queue message's visibility while the function runs (timeout ${timeout} s)`,
      };
    default:
      return assertNever(cfg, 'cloud');
  }
}

/** The tile trigger's redelivery schedule, as infra/ deploys it. */
function scheduleOf(cfg: StackConfig): RedeliverySchedule {
  switch (cfg.cloud) {
    case 'aws':
      return sqsSchedule(cfg.maxReceiveCount);
    case 'gcp':
      return pubSubSchedule(cfg.maxReceiveCount);
    case 'azure':
      return azureHostSchedule(cfg.maxReceiveCount, cfg.retryVisibilitySec * 1000);
    default:
      return assertNever(cfg, 'cloud');
  }
}

function retryChecks(cfg: StackConfig): Check[] {
  const { leaseSec, functionTimeoutSec } = cfg.lease;
  const schedule = scheduleOf(cfg);
  // The worst case: the first attempt claimed, then died at once; its message comes back when the platform
  // gives up on it (at its timeout), with the rest of the lease still to run.
  const leftMs = (leaseSec - functionTimeoutSec) * 1000;
  const answer = ownLeaseAnswer(schedule, 2, leftMs);
  const count = `${cfg.maxReceiveCount} deliveries before the dead-letter path`;
  const what =
    answer.kind === 'wait'
      ? `the second delivery of a job whose first attempt died holding the lease waits out the ${leaseSec - functionTimeoutSec} s left of it${answer.delayMs === undefined ? '' : ` (hidden ${Math.ceil(answer.delayMs / 1000)} s)`}`
      : `the redeliveries cannot outlast the ${leaseSec - functionTimeoutSec} s left of a dead attempt's lease, so the second delivery takes the lease over (safe: every write is create-only)`;
  const checks: Check[] = [{ level: 'ok', check: 'retry', message: `${count}; ${what}` }];
  if (cfg.cloud === 'aws' && cfg.maxReceiveCount < 5) {
    checks.push({
      level: 'warn',
      check: 'retry',
      message: `maxReceiveCount ${cfg.maxReceiveCount} is below the 5 AWS advises for a queue feeding Lambda: receives made while the function is throttled count, and can dead-letter a healthy job`,
      fix: 'pulumi config set tessera:maxReceiveCount 5',
    });
  }
  if (cfg.cloud === 'azure') {
    checks.push({
      level: 'ok',
      check: 'retry',
      message: `host retry pause ${cfg.retryVisibilitySec} s x ${cfg.maxReceiveCount - 2} later deliveries > ${leaseSec - functionTimeoutSec} s of lease left after a timed-out attempt`,
    });
  }
  return checks;
}
