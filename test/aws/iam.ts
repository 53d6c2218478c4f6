import { CreateAccessKeyCommand, CreateUserCommand, IAMClient, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import { S3Client } from '@aws-sdk/client-s3';
import type { S3Sender } from '../../functions/aws/adapters/s3-object-store.js';
import { FUNCTION_ROLES, type FunctionRole } from '../../shared/domain/key-layout.js';
import type { AwsEndpoints, AwsKey } from '../support/emulators/types.js';
import { currentRole } from '../support/function-role.js';
import { runStack } from '../infra/harness.js';
import { loadStackFile } from '../infra/stack-files.js';

/**
 * The enforced-IAM plumbing of the AWS suites (docs/iam.md): every S3 request a function's code makes
 * is signed as an IAM user on the IAM-enforcing moto (test/support/emulators/aws.ts), and that user
 * carries exactly the policy document the Pulumi program deploys for the function, read from the
 * program run under mocks. Nothing here re-types a statement: the documents come from infra/aws as
 * the program emits them, with the mock's bucket ARNs swapped for the test's buckets.
 *
 * moto evaluates the Action and Resource of every S3 request against those statements (a condition
 * operator it does not know, such as the StringLike on `s3:prefix`, it ignores: the listing prefix is
 * checked by the access recorder instead, docs/iam.md). A request it refuses is recorded here with the
 * role, the action and the key, and the error the adapter sees says the same, so a denial is never
 * mistaken for poison and dead-lettered in silence: {@link expectNoAccessDenied} fails the test.
 */

/** The shipped AWS stack file: the program runs on it, with the test's source prefix. */
const STACK_FILE = 'Pulumi.aws-eu-west-1.yaml';

export interface PolicyStatement {
  readonly Sid?: string;
  readonly Effect: string;
  readonly Action: string | readonly string[];
  readonly Resource?: string | readonly string[];
  readonly Condition?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
}
export interface PolicyDocument {
  readonly Version: string;
  readonly Statement: readonly PolicyStatement[];
}

/** What the program deploys: per role, the policy document, with the ARNs of the mock's two buckets. */
export interface DeployedPolicies {
  readonly sourcePrefix: string;
  readonly sourceBucketArn: string;
  readonly outputBucketArn: string;
  /** The functions' inline role policies, and `verify`'s managed policy (absent where the program makes none). */
  readonly documents: Readonly<Partial<Record<FunctionRole, PolicyDocument>>>;
}

const deployed = new Map<string, Promise<DeployedPolicies>>();

/**
 * The policy documents of the AWS stack whose source prefix is `sourcePrefix`, as the program emits them
 * under mocks (once per process and prefix: the mock run takes a few seconds, and Pulumi's mock runtime
 * is one per process, so runs must not overlap).
 */
export function deployedPolicies(sourcePrefix: string): Promise<DeployedPolicies> {
  let p = deployed.get(sourcePrefix);
  if (p === undefined) {
    p = readPolicies(sourcePrefix);
    deployed.set(sourcePrefix, p);
  }
  return p;
}

async function readPolicies(sourcePrefix: string): Promise<DeployedPolicies> {
  const file = loadStackFile(STACK_FILE);
  const run = await runStack(file.stack, { ...file.config, 'tessera:sourcePrefix': sourcePrefix });
  const arn = (suffix: string) => run.one('aws:s3/bucket:Bucket', suffix).state.arn as string;
  const documents: Partial<Record<FunctionRole, PolicyDocument>> = {};
  for (const role of FUNCTION_ROLES) {
    // The functions' inline RolePolicy `<stack>-<role>`, and verify's managed Policy (an operator attaches it).
    const found = [
      ...run.ofType('aws:iam/rolePolicy:RolePolicy').filter((r) => r.name.endsWith(`-${role}`)),
      ...run.ofType('aws:iam/policy:Policy').filter((r) => r.name.endsWith(`-${role}`)),
    ];
    if (found.length > 1) throw new Error(`the program declares ${found.length} policies for the ${role} role; expected one`);
    const policy = found[0]?.inputs.policy;
    if (policy !== undefined) documents[role] = JSON.parse(String(policy)) as PolicyDocument;
  }
  return { sourcePrefix, sourceBucketArn: arn('-sources'), outputBucketArn: arn('-outputs'), documents };
}

/** The document with the mock's bucket ARNs replaced by the test's buckets; every other resource as deployed. */
export function forBuckets(doc: PolicyDocument, policies: DeployedPolicies, buckets: TestBuckets): PolicyDocument {
  const swaps: [string, string][] = [
    [policies.sourceBucketArn, `arn:aws:s3:::${buckets.sources}`],
    [policies.outputBucketArn, `arn:aws:s3:::${buckets.outputs}`],
  ];
  const swap = (r: string): string => {
    for (const [from, to] of swaps) if (r === from || r.startsWith(`${from}/`)) return `${to}${r.slice(from.length)}`;
    return r;
  };
  return {
    ...doc,
    Statement: doc.Statement.map((s) =>
      s.Resource === undefined ? s : { ...s, Resource: typeof s.Resource === 'string' ? swap(s.Resource) : s.Resource.map(swap) },
    ),
  };
}

export interface TestBuckets {
  readonly sources: string;
  readonly outputs: string;
}

/** One access key per role the program deploys a policy for. */
export type RoleKeys = Readonly<Partial<Record<FunctionRole, AwsKey>>>;

/** The IAM API of the IAM-enforcing moto, signed by its operator. */
export function iamAdmin(e: AwsEndpoints): IAMClient {
  return new IAMClient({ endpoint: e.motoIam, region: e.region, credentials: e.motoIamAdmin, maxAttempts: 3 });
}

/**
 * On the IAM-enforcing moto, one user per role the program deploys a policy for, each with that
 * policy (for `buckets`) as its only inline policy. `label` makes the user names unique (the buckets'
 * names do: a stack per test).
 */
export async function createRoleUsers(e: AwsEndpoints, buckets: TestBuckets, policies: DeployedPolicies, label: string): Promise<RoleKeys> {
  const iam = iamAdmin(e);
  try {
    const entries = await Promise.all(
      (Object.entries(policies.documents) as [FunctionRole, PolicyDocument][]).map(async ([role, doc]) => {
        const UserName = `${label}-${role}`.slice(0, 64);
        await iam.send(new CreateUserCommand({ UserName }));
        await iam.send(
          new PutUserPolicyCommand({
            UserName,
            PolicyName: `tessera-${role}`,
            PolicyDocument: JSON.stringify(forBuckets(doc, policies, buckets)),
          }),
        );
        const key = (await iam.send(new CreateAccessKeyCommand({ UserName }))).AccessKey;
        if (!key?.AccessKeyId || !key.SecretAccessKey) throw new Error(`moto created no access key for ${UserName}`);
        return [role, { accessKeyId: key.AccessKeyId, secretAccessKey: key.SecretAccessKey }] as const;
      }),
    );
    return Object.fromEntries(entries);
  } finally {
    iam.destroy();
  }
}

/** An S3 client of the IAM-enforcing moto signed with `key` (path-style, as moto needs). `endpoint`: a fault proxy in front of it. */
export function iamS3Client(e: AwsEndpoints, key: AwsKey, endpoint: string = e.motoIam): S3Client {
  return new S3Client({ endpoint, region: e.region, credentials: key, forcePathStyle: true, maxAttempts: 3 });
}

/** One request the IAM-enforcing moto refused: who, what, where. */
export interface AccessDenial {
  /** The role the request ran as; `operator` for a test's own set-up and checks. */
  readonly role: FunctionRole | 'operator';
  /** The permission moto checked, e.g. `s3:PutObject`. */
  readonly action: string;
  readonly bucket: string;
  /** The object key; for a listing the prefix asked for, followed by `*`. */
  readonly key: string;
}

export function describeDenial(d: AccessDenial): string {
  return `${d.role}: ${d.action} on s3://${d.bucket}/${d.key}`;
}

/** Every denial of this process not yet claimed by {@link expectNoAccessDenied} / {@link takeAccessDenials}. */
const unclaimed: AccessDenial[] = [];

/** The denials recorded since the last call, removed from the record. */
export function takeAccessDenials(): AccessDenial[] {
  return unclaimed.splice(0, unclaimed.length);
}

/**
 * Fails with every denial recorded since the last call (role, action, key). Call it after each test of an
 * enforced suite: a denied request may have been turned into a verdict (poison, retry) that the test's own
 * assertions would not pin on IAM.
 */
export function expectNoAccessDenied(): void {
  const denied = takeAccessDenials();
  if (denied.length > 0) {
    throw new Error(
      `the deployed IAM policies refused ${denied.length} request(s) the code made (role: action on key):\n${denied.map((d) => `  ${describeDenial(d)}`).join('\n')}`,
    );
  }
}

/** S3's permission for a command, as moto checks it (a HEAD is `s3:GetObject` there; AWS also wants GetObjectVersion for a versioned HEAD). */
function s3Action(command: { readonly constructor: { readonly name: string }; readonly input?: unknown }): {
  action: string;
  bucket: string;
  key: string;
} {
  const input = (command.input ?? {}) as { Bucket?: string; Key?: string; Prefix?: string; VersionId?: string };
  const op = command.constructor.name.replace(/Command$/, '');
  const versioned = input.VersionId !== undefined;
  const action =
    {
      HeadObject: 'GetObject',
      GetObject: versioned ? 'GetObjectVersion' : 'GetObject',
      PutObject: 'PutObject',
      CopyObject: 'PutObject',
      DeleteObject: versioned ? 'DeleteObjectVersion' : 'DeleteObject',
      ListObjectsV2: 'ListBucket',
      ListObjects: 'ListBucket',
      ListObjectVersions: 'ListBucketVersions',
    }[op] ?? op;
  const key = input.Key ?? (input.Prefix !== undefined ? `${input.Prefix}*` : '');
  return { action: `s3:${action}`, bucket: input.Bucket ?? '', key };
}

/** True for moto's (and S3's) refusal of a request by IAM. */
function isAccessDenied(e: unknown): boolean {
  const err = e as { name?: unknown; $metadata?: { httpStatusCode?: unknown } };
  return err?.$metadata?.httpStatusCode === 403 && err.name === 'AccessDenied';
}

/**
 * An S3 sender that signs each request as the IAM user of the role the calling code runs as
 * (currentRole(), test/support/function-role.ts), and as `operator` outside any role. A refusal is
 * recorded and re-thrown with the same name and status (the adapter maps it as it maps S3's own) and a
 * message naming the role, the action and the key.
 */
export function roleSignedS3(e: AwsEndpoints, keys: RoleKeys, endpoint: string = e.motoIam): S3Sender & { destroy(): void } {
  const clients = new Map<FunctionRole | 'operator', S3Client>([['operator', iamS3Client(e, e.motoIamAdmin, endpoint)]]);
  for (const [role, key] of Object.entries(keys) as [FunctionRole, AwsKey][]) clients.set(role, iamS3Client(e, key, endpoint));
  const send = async (command: { readonly constructor: { readonly name: string }; readonly input?: unknown }): Promise<unknown> => {
    const role = currentRole() ?? 'operator';
    const client = clients.get(role);
    if (client === undefined) {
      throw new Error(
        `[iam] code running as the ${role} role sent ${command.constructor.name}, but the Pulumi program deploys no IAM policy for ${role}: it has no identity to sign with`,
      );
    }
    try {
      return await (client.send as (c: unknown) => Promise<unknown>)(command);
    } catch (e) {
      if (!isAccessDenied(e)) throw e;
      const denial = { role, ...s3Action(command) };
      unclaimed.push(denial);
      const err = e as Error & { $metadata?: unknown; $fault?: unknown };
      throw Object.assign(
        new Error(
          `[iam] the ${role} role was denied ${denial.action} on s3://${denial.bucket}/${denial.key} by the IAM-enforcing moto: its deployed policy does not grant it (${err.message})`,
        ),
        { name: err.name, $metadata: err.$metadata, $fault: err.$fault, cause: e },
      );
    }
  };
  return {
    send: send as unknown as S3Sender['send'],
    destroy: () => {
      for (const c of clients.values()) c.destroy();
    },
  };
}
