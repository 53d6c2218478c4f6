import { dynamoDbLocalPaths, install, motoServerPath } from '../../../scripts/emulators/aws.mjs';
import { freePort, httpAnswers, type Started, startProcess } from './process.js';
import type { AwsEndpoints } from './types.js';

/** How long either emulator may take to answer HTTP before the run fails with its output. */
const START_TIMEOUT_MS = 120_000;

/** The region every AWS client in the tests uses; the emulators accept any. */
export const AWS_TEST_REGION = 'us-east-1';

/**
 * Starts DynamoDB Local and moto server (S3 + SQS) side by side on free ports
 * of 127.0.0.1 and waits until both answer HTTP. DynamoDB Local binds every
 * interface whatever we ask, so the endpoints handed to tests name 127.0.0.1.
 *
 * Installs them first if needed (idempotent, ~0.6 s when already installed),
 * so `npx vitest run` works without `npm pretest`.
 */
export async function start(): Promise<{ endpoints: AwsEndpoints | undefined; stops: Started[] }> {
  await install();
  const ddb = dynamoDbLocalPaths();
  const [ddbPort, motoPort] = await Promise.all([freePort(), freePort()]);
  const dynamodb = `http://127.0.0.1:${ddbPort}`;
  const moto = `http://127.0.0.1:${motoPort}`;
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
  ]);
  const stops = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
  if (failed.length > 0) {
    await Promise.all(stops.map((s) => s.stop()));
    throw new Error(`the AWS emulators did not start: ${failed.map((e) => e.message).join('\n')}`);
  }
  return { endpoints: { dynamodb, moto, region: AWS_TEST_REGION }, stops };
}
