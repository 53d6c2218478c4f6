import { CreateAccessKeyCommand, CreateUserCommand, IAMClient, PutUserPolicyCommand } from '@aws-sdk/client-iam';
import { dynamoDbLocalPaths, install, motoServerPath } from '../../../scripts/emulators/aws.mjs';
import { freePort, httpAnswers, type Started, startProcess } from './process.js';
import type { AwsEndpoints, AwsKey } from './types.js';

/** How long either emulator may take to answer HTTP before the run fails with its output. */
const START_TIMEOUT_MS = 120_000;

/** The region every AWS client in the tests uses; the emulators accept any. */
export const AWS_TEST_REGION = 'us-east-1';

/** The IAM-enforcing moto's operator: a user allowed everything, for the tests' own set-up and checks. */
export const IAM_MOTO_ADMIN = 'tessera-operator';

/**
 * Starts DynamoDB Local and moto server (S3 + SQS) side by side on free ports
 * of 127.0.0.1 and waits until both answer HTTP. DynamoDB Local binds every
 * interface whatever we ask, so the endpoints handed to tests name 127.0.0.1.
 *
 * Beside them runs a second moto server that enforces IAM (`motoIam`): the
 * enforced-IAM suites (docs/iam.md) sign each function's S3 requests as an IAM
 * user that carries exactly the policy the Pulumi program gives that function.
 * The plain moto keeps serving every other suite unchanged: on it any
 * credentials may do anything.
 *
 * Installs them first if needed (idempotent, ~0.6 s when already installed),
 * so `npx vitest run` works without `npm pretest`.
 */
export async function start(): Promise<{ endpoints: AwsEndpoints | undefined; stops: Started[] }> {
  await install();
  const ddb = dynamoDbLocalPaths();
  const [ddbPort, motoPort, motoIamPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const dynamodb = `http://127.0.0.1:${ddbPort}`;
  const moto = `http://127.0.0.1:${motoPort}`;
  const motoIam = `http://127.0.0.1:${motoIamPort}`;
  const t0 = Date.now();
  const timed = async <T>(name: string, p: Promise<T>): Promise<T> => {
    const r = await p;
    if (process.env.TESSERA_EMULATOR_TIMINGS) console.error(`[emulators] ${name} ready in ${Date.now() - t0} ms`);
    return r;
  };
  const results = await Promise.allSettled([
    timed(
      'DynamoDB Local',
      startProcess(
        'DynamoDB Local',
        'java',
        [`-Djava.library.path=${ddb.lib}`, '-jar', ddb.jar, '-inMemory', '-port', String(ddbPort), '-disableTelemetry'],
        () => httpAnswers(dynamodb),
        // ~5 s alone; 17 s was seen with every emulator starting at once on two busy cores.
        { cwd: ddb.dir, timeoutMs: START_TIMEOUT_MS },
      ),
    ),
    timed(
      'moto server',
      startProcess('moto server', motoServerPath(), ['-H', '127.0.0.1', '-p', String(motoPort)], () => httpAnswers(`${moto}/moto-api/`), {
        // moto reads these for its fake account; they must never reach a real AWS endpoint anyway.
        env: { AWS_DEFAULT_REGION: AWS_TEST_REGION, MOTO_ALLOW_NONEXISTENT_REGION: 'true' },
        timeoutMs: START_TIMEOUT_MS,
      }),
    ),
    timed(
      'moto server (IAM enforced)',
      startProcess(
        'moto server (IAM enforced)',
        motoServerPath(),
        ['-H', '127.0.0.1', '-p', String(motoIamPort)],
        () => httpAnswers(`${motoIam}/moto-api/`),
        {
          // Free until the operator exists (enforceIam below turns the check on for every later request).
          env: { AWS_DEFAULT_REGION: AWS_TEST_REGION, MOTO_ALLOW_NONEXISTENT_REGION: 'true', INITIAL_NO_AUTH_ACTION_COUNT: 'inf' },
          timeoutMs: START_TIMEOUT_MS,
        },
      ),
    ),
  ]);
  const stops = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
  let motoIamAdmin: AwsKey | undefined;
  if (failed.length === 0) {
    try {
      motoIamAdmin = await enforceIam(motoIam);
    } catch (e) {
      failed.push(e as Error);
    }
  }
  if (failed.length > 0 || motoIamAdmin === undefined) {
    await Promise.all(stops.map((s) => s.stop()));
    throw new Error(`the AWS emulators did not start: ${failed.map((e) => e.message).join('\n')}`);
  }
  return { endpoints: { dynamodb, moto, motoIam, motoIamAdmin, region: AWS_TEST_REGION }, stops };
}

/**
 * Create the operator (an inline policy allowing every action on every resource), then turn IAM on.
 * moto checks a request against its caller's IAM policies once INITIAL_NO_AUTH_ACTION_COUNT requests
 * were served; the server starts with that count infinite and `/moto-api/reset-auth` sets it to 0 after
 * the three set-up calls, so the switch does not depend on counting them (an SDK retry would shift a count).
 * From then on a request signed by an unknown key is refused, and a known key may do what its user's
 * policies allow: test/aws/iam.test.ts proves both before any suite relies on them.
 */
async function enforceIam(endpoint: string): Promise<AwsKey> {
  const iam = new IAMClient({ endpoint, region: AWS_TEST_REGION, credentials: { accessKeyId: 'setup', secretAccessKey: 'setup' } });
  try {
    await iam.send(new CreateUserCommand({ UserName: IAM_MOTO_ADMIN }));
    await iam.send(
      new PutUserPolicyCommand({
        UserName: IAM_MOTO_ADMIN,
        PolicyName: 'operator',
        PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }] }),
      }),
    );
    const key = (await iam.send(new CreateAccessKeyCommand({ UserName: IAM_MOTO_ADMIN }))).AccessKey;
    if (!key?.AccessKeyId || !key.SecretAccessKey) throw new Error('moto created no access key for the operator');
    const reset = await fetch(`${endpoint}/moto-api/reset-auth`, { method: 'POST', body: '0' });
    if (!reset.ok) throw new Error(`moto refused to enforce IAM: POST /moto-api/reset-auth answered ${reset.status}`);
    return { accessKeyId: key.AccessKeyId, secretAccessKey: key.SecretAccessKey };
  } finally {
    iam.destroy();
  }
}
