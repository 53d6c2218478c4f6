import type { FunctionRole } from '../../../shared/domain/key-layout.js';

/**
 * The shared vocabulary of the enforced-IAM checks (docs/iam.md): the access recorder
 * (test/support/iam/recorder.ts) turns every request a role's code sends at the SDK boundary into
 * RecordedAccess values, one per permission the cloud checks for it (a GCS overwrite is two:
 * `storage.objects.create` and `storage.objects.delete`); the grant model
 * (test/support/iam/grants.ts) answers, from the grants the Pulumi program under mocks deploys for
 * that role, whether each is allowed.
 */
export type Cloud = 'aws' | 'gcp' | 'azure';

/**
 * A stack resource by its part in the stack, not its physical name: the tests make fresh names per run
 * (the recorder maps them back), the program under mocks has its own; both sides meet here.
 */
export type LogicalResource =
  | 'sourceBucket'
  | 'outputBucket'
  | 'claimsTable'
  | 'manifestTable'
  | 'tileQueue'
  | 'sceneQueue'
  | 'ingestQueue'
  | 'deadLetterQueue'
  | 'ingestDeadLetterQueue'
  | 'sceneDeadLetterQueue'
  | 'featureSinkSecret';

export interface RecordedAccess {
  readonly cloud: Cloud;
  readonly role: FunctionRole;
  /** The cloud's own permission name: `s3:PutObject`, `storage.objects.delete`, `Microsoft.Storage/.../blobs/write`. */
  readonly action: string;
  readonly resource: LogicalResource;
  /** The object key (object stores), or the listing prefix for a list; absent for tables and queues. */
  readonly key?: string | undefined;
  /** True for a listing (key is then the prefix asked for). */
  readonly list?: boolean | undefined;
  /** The request as sent (method and path), for the failure message. */
  readonly request: string;
}

export interface AccessVerdict {
  readonly allowed: boolean;
  /** The grant that allows it (its id as reports/iam.md lists it), when allowed. */
  readonly grant?: string | undefined;
}

/** One grant of one role, as the deployed program states it (an AWS statement, a GCP binding, an Azure assignment). */
export interface GrantDescription {
  readonly id: string;
  readonly role: FunctionRole;
  /** Human-readable: actions and scope. */
  readonly text: string;
}

/** The grants of every role of one cloud's stack, read from the program under mocks. */
export interface StackGrants {
  readonly cloud: Cloud;
  check(access: RecordedAccess): AccessVerdict;
  grants(role: FunctionRole): readonly GrantDescription[];
}
