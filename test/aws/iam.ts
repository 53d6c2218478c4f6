import { CreateAccessKeyCommand, CreateUserCommand, IAMClient, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import { S3Client } from '@aws-sdk/client-s3';
import type { S3Sender } from '../../functions/aws/adapters/s3-object-store.js';
import { FUNCTION_ROLES, type FunctionRole } from '../../shared/domain/key-layout.js';
import type { AwsEndpoints, AwsKey } from '../support/emulators/types.js';
import { currentRole } from '../support/function-role.js';
import { awsPolicyDocumentsFor, type NamedAwsPolicy } from '../support/iam/grants.js';

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

export interface TestBuckets {
  readonly sources: string;
  readonly outputs: string;
}

/**
 * Each role's IAM policy documents as the program deploys them for a stack whose source prefix is
 * `sourcePrefix` (the shipped AWS stack file otherwise), with the mock's bucket ARNs replaced by `buckets`:
 * the loader of the access recorder's grant model (test/support/iam/grants.ts), so both check against the
 * same program run, and runs of the mock program take turns (its runtime is one per process).
 */
export async function deployedDocuments(
  buckets: TestBuckets,
  sourcePrefix: string,
): Promise<ReadonlyMap<FunctionRole, readonly NamedAwsPolicy[]>> {
  const names = { sourceBucket: buckets.sources, outputBucket: buckets.outputs };
  const config = { 'tessera:sourcePrefix': sourcePrefix };
  const entries = await Promise.all(
    FUNCTION_ROLES.map(async (role) => [role, await awsPolicyDocumentsFor(role, names, { config })] as const),
  );
  return new Map(entries.filter(([, docs]) => docs.length > 0));
}

/** One access key per role the program deploys a policy for. */
export type RoleKeys = Readonly<Partial<Record<FunctionRole, AwsKey>>>;

/** The IAM API of the IAM-enforcing moto, signed by its operator. */
export function iamAdmin(e: AwsEndpoints): IAMClient {
  return new IAMClient({ endpoint: e.motoIam, region: e.region, credentials: e.motoIamAdmin, maxAttempts: 3 });
}

/**
 * On the IAM-enforcing moto, one user per role the program deploys a policy for, each with exactly that
 * role's policy documents (for `buckets`) as its inline policies. `label` makes the user names unique (a
 * stack per test).
 */
export async function createRoleUsers(e: AwsEndpoints, buckets: TestBuckets, sourcePrefix: string, label: string): Promise<RoleKeys> {
  const documents = await deployedDocuments(buckets, sourcePrefix);
  const iam = iamAdmin(e);
  try {
    const entries = await Promise.all(
      [...documents].map(async ([role, docs]) => {
        const UserName = `${label}-${role}`.slice(0, 64);
        await iam.send(new CreateUserCommand({ UserName }));
        for (const [i, doc] of docs.entries()) {
          await iam.send(
            new PutUserPolicyCommand({
              UserName,
              // IAM policy names: letters, digits and +=,.@_- only.
              PolicyName: `${i}-${doc.name}`.replace(/[^\w+=,.@-]/g, '_').slice(0, 128),
              PolicyDocument: JSON.stringify(doc.document),
            }),
          );
        }
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

/** Refusals of the credentials themselves, not of the request by a policy. */
const NOT_A_POLICY = new Set(['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'InvalidToken']);

/**
 * True for moto's (and S3's) refusal of a request by IAM: 403 AccessDenied, or a bare 403 `Forbidden` where
 * the answer has no body to name it (a HEAD).
 */
function isAccessDenied(e: unknown): boolean {
  const err = e as { name?: unknown; $metadata?: { httpStatusCode?: unknown } };
  return err?.$metadata?.httpStatusCode === 403 && !NOT_A_POLICY.has(String(err.name));
}

/**
 * `TESSERA_IAM_RECORD_ONLY=1` measures a policy instead of enforcing it: a refused request is recorded and
 * then sent again as the operator, so a run goes on past the first refusal and lists every access the
 * policy misses (how the accesses issue 24 names were measured on the old policies, docs/iam.md). The
 * denials still fail the test at its end; never set in `npm test`.
 */
const RECORD_ONLY = process.env.TESSERA_IAM_RECORD_ONLY === '1';

/** An S3 sender signed per role, and the denials it met. */
export interface RoleSignedS3 extends S3Sender {
  /** Every request it had refused, in order. */
  readonly denials: readonly AccessDenial[];
  destroy(): void;
}

/**
 * An S3 sender that signs each request as the IAM user of the role the calling code runs as
 * (currentRole(), test/support/function-role.ts), and as `operator` outside any role. A refusal is
 * recorded and re-thrown with the same name and status (the adapter maps it as it maps S3's own) and a
 * message naming the role, the action and the key.
 */
export function roleSignedS3(e: AwsEndpoints, keys: RoleKeys, endpoint: string = e.motoIam): RoleSignedS3 {
  const denials: AccessDenial[] = [];
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
      const denial: AccessDenial = { role, ...s3Action(command) };
      unclaimed.push(denial);
      denials.push(denial);
      const operator = clients.get('operator') as S3Client;
      if (RECORD_ONLY) return (operator.send as (c: unknown) => Promise<unknown>)(command);
      const err = e as Error & { $metadata: { httpStatusCode: number; requestId?: string }; $fault?: unknown };
      // Name and status as S3 sent them (the adapter maps them as S3's own); not the SDK error itself as the
      // cause, whose raw HTTP response would bury the message in a test report.
      throw Object.assign(
        new Error(
          `[iam] the ${role} role was denied ${denial.action} on s3://${denial.bucket}/${denial.key} by the IAM-enforcing moto: its deployed policy does not grant it (${err.message})`,
        ),
        {
          name: err.name,
          $metadata: { httpStatusCode: err.$metadata.httpStatusCode, requestId: err.$metadata.requestId },
          $fault: err.$fault,
        },
      );
    }
  };
  return {
    send: send as unknown as S3Sender['send'],
    denials,
    destroy: () => {
      for (const c of clients.values()) c.destroy();
    },
  };
}
