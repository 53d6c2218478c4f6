import type { LogicalResource } from './access.js';

/**
 * Physical name -> logical resource, filled where the suites make their fresh names (the parity backends,
 * the soak, the verify stacks). The tests name every bucket, table and queue afresh per run, the program
 * under mocks names them its own way; the recorder meets the grant model on the logical name.
 *
 * One process-wide map: the recorder sees requests from every backend of a run at once, and a fresh name
 * (a random namespace) never belongs to two resources. A name registered twice for two different parts is
 * a bug in the suite, refused at once rather than resolved by whichever came last.
 */
const byName = new Map<string, LogicalResource>();

/** What kind of store a logical resource is: the Azure classifier tells a queue path from a blob path by it. */
export type ResourceKind = 'bucket' | 'table' | 'queue' | 'secret';

const KIND: Readonly<Record<LogicalResource, ResourceKind>> = {
  sourceBucket: 'bucket',
  outputBucket: 'bucket',
  claimsTable: 'table',
  manifestTable: 'table',
  tileQueue: 'queue',
  sceneQueue: 'queue',
  ingestQueue: 'queue',
  deadLetterQueue: 'queue',
  ingestDeadLetterQueue: 'queue',
  sceneDeadLetterQueue: 'queue',
  featureSinkSecret: 'secret',
};

export function kindOf(logical: LogicalResource): ResourceKind {
  return KIND[logical];
}

export class ResourceRegistryError extends Error {
  override readonly name = 'ResourceRegistryError';
  readonly code = 'IAM_RESOURCE_CONFLICT';
}

/**
 * Name the part a physical resource plays: a bucket or container, a DynamoDB table or Firestore
 * collection or Azure table, an SQS queue or Pub/Sub topic or subscription or Storage queue, a secret.
 *
 * @example
 * registerResource(`${ns}-out`, 'outputBucket');
 */
export function registerResource(physicalName: string, logical: LogicalResource): void {
  const known = byName.get(physicalName);
  if (known !== undefined && known !== logical) {
    throw new ResourceRegistryError(
      `[iam:recorder] ${physicalName} is registered as ${known} already and cannot also be ${logical}: give each resource its own fresh name`,
    );
  }
  byName.set(physicalName, logical);
}

/** Several at once: `registerResources({ [src]: 'sourceBucket', [out]: 'outputBucket' })`. */
export function registerResources(names: Readonly<Record<string, LogicalResource>>): void {
  for (const [name, logical] of Object.entries(names)) registerResource(name, logical);
}

/** The logical resource a physical name stands for, if the suite registered it. */
export function logicalResourceOf(physicalName: string): LogicalResource | undefined {
  return byName.get(physicalName);
}
