import { PutBucketNotificationConfigurationCommand, type S3Client } from '@aws-sdk/client-s3';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type AwsClients, type AwsRuntime, composeAws } from '../../functions/aws/compose.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import type { FunctionRole } from '../../shared/domain/key-layout.js';
import { DEFAULT_PARAMS, ENV } from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import { asRole } from '../support/function-role.js';
import {
  awsEndpoints,
  dynamoDbClient,
  freshBucket,
  freshClaimsTable,
  freshName,
  operatorS3Client,
  operatorSqsClient,
  s3Client,
  sqsClient,
} from './clients.js';
import { createRoleUsers, type RoleKeys, roleSignedS3 } from './iam.js';

/** Where the test stacks' scenes start (TESSERA_SOURCE_PREFIX); enforced stacks get the policies the program makes for it. */
export const TEST_SOURCE_PREFIX = 'incoming/';

/** Small tiles so a 96 x 80 px scene makes a 2 x 2 grid: fast, and still every edge case of a grid. */
export const TEST_PARAMS: ProcessingParams = {
  ...DEFAULT_PARAMS,
  version: 'aws-test',
  tile_px: 48,
  output: { ...(DEFAULT_PARAMS.output as object), blocksize: 16 },
};

export interface TestQueue {
  readonly url: string;
  readonly arn: string;
  /** A client of the moto server the queue lives on (signed by its operator on the IAM-enforcing one). */
  readonly sqs: SQSClient;
}

/**
 * A standard queue; with `deadLetter`, a DLQ and a redrive policy after `maxReceiveCount` receives.
 * `sqs`: the server's client (default the plain moto; an enforced stack's queues live beside its buckets).
 */
export async function createQueue(
  label: string,
  redrive?: { maxReceiveCount: number },
  sqs: SQSClient = sqsClient(),
): Promise<{ queue: TestQueue; dlq?: TestQueue }> {
  const make = async (name: string, attributes?: Record<string, string>): Promise<TestQueue> => {
    const q = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
    const url = q.QueueUrl as string;
    const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes
      ?.QueueArn as string;
    return { url, arn, sqs };
  };
  if (!redrive) return { queue: await make(freshName(label)) };
  const dlq = await make(freshName(`${label}-dlq`));
  const queue = await make(freshName(label), {
    // As infra/ sets it, scaled down: the real queue hides a message for 6 x the function timeout.
    VisibilityTimeout: '30',
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: redrive.maxReceiveCount }),
  });
  return { queue, dlq };
}

export interface TestStack {
  readonly env: Record<string, string>;
  readonly sourceBucket: string;
  readonly outputBucket: string;
  readonly claimsTable: string;
  readonly tiles: TestQueue;
  readonly tilesDlq: TestQueue;
  readonly scenes: TestQueue;
  readonly scenesDlq: TestQueue;
  /** The operator's S3 and SQS clients on the server the stack lives on: a test's own uploads and checks. */
  readonly s3: S3Client;
  readonly sqs: SQSClient;
  /**
   * Each role's IAM user on the IAM-enforcing moto (enforced stacks; empty otherwise), carrying exactly the
   * policy the Pulumi program deploys for that function (test/aws/iam.ts).
   */
  readonly roleKeys: RoleKeys;
  /**
   * The clients a function of this stack uses. Enforced: S3 signed as the IAM user of the role the calling
   * code runs as (asRole, test/support/function-role.ts; the operator outside any role), SQS as the
   * operator on the same moto (moto's IAM does not match queue ARNs; the access recorder checks SQS).
   */
  clients(): AwsClients;
  /** A runtime composed from `env` like the Lambda one, with clients pointed at the emulators. */
  runtime(options?: { owner?: string; clock?: Clock; logs?: string[] }): TestRuntime;
}

/** A composed runtime whose telemetry keeps counters the tests read. */
export type TestRuntime = AwsRuntime & { readonly backend: { readonly telemetry: JsonTelemetry } };

/**
 * A fresh AWS stack in the emulators, shaped like infra/'s: source and output
 * buckets, a claims table with TTL, a tile queue with a DLQ, and a scene queue
 * the source bucket notifies of every created object (the handler filters on
 * `incoming/` and `.tif`). Like S3, moto puts an `s3:TestEvent` in the scene
 * queue when the notification is configured; tests drain it with the rest.
 *
 * `enforced`: the buckets and queues live on the IAM-enforcing moto, and every S3 request a function makes
 * is signed by its role's IAM user with the deployed policy (docs/iam.md); run each handler as its role
 * ({@link asFunction}) and check `expectNoAccessDenied()` after each test.
 */
export async function createTestStack(
  options: { maxReceiveCount?: number; params?: ProcessingParams; enforced?: boolean } = {},
): Promise<TestStack> {
  const e = awsEndpoints();
  const enforced = options.enforced === true;
  const s3 = enforced ? operatorS3Client(e) : s3Client(e);
  const sqs = enforced ? operatorSqsClient(e) : sqsClient(e);
  const ddb = dynamoDbClient(e);
  const [sourceBucket, outputBucket, claimsTable, tileQueues, sceneQueues] = await Promise.all([
    freshBucket(s3, 'src'),
    freshBucket(s3, 'out'),
    freshClaimsTable(ddb),
    createQueue('tiles', { maxReceiveCount: options.maxReceiveCount ?? 3 }, sqs),
    createQueue('scenes', { maxReceiveCount: 3 }, sqs),
  ]);
  const roleKeys: RoleKeys = enforced
    ? await createRoleUsers(e, { sources: sourceBucket, outputs: outputBucket }, TEST_SOURCE_PREFIX, freshName('stack'))
    : {};
  const functionS3 = enforced ? roleSignedS3(e, roleKeys) : s3;
  await s3.send(
    new PutBucketNotificationConfigurationCommand({
      Bucket: sourceBucket,
      NotificationConfiguration: { QueueConfigurations: [{ QueueArn: sceneQueues.queue.arn, Events: ['s3:ObjectCreated:*'] }] },
    }),
  );
  const env: Record<string, string> = {
    [ENV.platform]: 'aws-lambda',
    [ENV.claimsTable]: claimsTable,
    [ENV.sourceBucket]: sourceBucket,
    [ENV.outputBucket]: outputBucket,
    [ENV.tileQueue]: tileQueues.queue.url,
    [ENV.deadLetterQueue]: (tileQueues.dlq as TestQueue).url,
    [ENV.sourcePrefix]: TEST_SOURCE_PREFIX,
    [ENV.sourceSuffix]: '.tif',
    [ENV.functionTimeoutSeconds]: '900',
    [ENV.params]: JSON.stringify(options.params ?? TEST_PARAMS),
  };
  const clients = (): AwsClients => ({ dynamodb: dynamoDbClient(e), s3: functionS3, sqs });
  return {
    env,
    sourceBucket,
    outputBucket,
    claimsTable,
    tiles: tileQueues.queue,
    tilesDlq: tileQueues.dlq as TestQueue,
    scenes: sceneQueues.queue,
    scenesDlq: sceneQueues.dlq as TestQueue,
    s3,
    sqs,
    roleKeys,
    clients,
    runtime: (o = {}) => createTestRuntime({ env }, clients(), o),
  };
}

/**
 * A handler that runs as `role`, the function of the stack that would run it (test/support/function-role.ts):
 * on an enforced stack its S3 requests are signed by that role's IAM user.
 *
 * @example
 * await drain(stack.scenes, asFunction('scene', createSceneHandler(rt)));
 */
export function asFunction<A extends unknown[], R>(role: FunctionRole, handler: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return (...args) => asRole(role, () => handler(...args));
}

/** Clients pointed at the emulators. */
export function emulatorClients(): AwsClients {
  const e = awsEndpoints();
  return { dynamodb: dynamoDbClient(e), s3: s3Client(e), sqs: sqsClient(e) };
}

/** A runtime composed from the stack's environment like the Lambda one, with the given clients (fault injection). */
export function createTestRuntime(
  stack: Pick<TestStack, 'env'>,
  clients: AwsClients,
  o: { owner?: string; clock?: Clock; logs?: string[] } = {},
): TestRuntime {
  const telemetry = new JsonTelemetry((line) => o.logs?.push(line));
  return composeAws(stack.env, { clients, telemetry, owner: o.owner ?? 'worker-a', ...(o.clock ? { clock: o.clock } : {}) }) as TestRuntime;
}

/** An SQS record exactly as the Lambda event source mapping builds it from a received message. */
export function toSqsRecord(m: Message, queue: TestQueue): SQSRecord {
  const attrs = m.Attributes ?? {};
  return {
    messageId: m.MessageId as string,
    receiptHandle: m.ReceiptHandle as string,
    body: m.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attrs.ApproximateReceiveCount ?? '1',
      SentTimestamp: attrs.SentTimestamp ?? '0',
      SenderId: attrs.SenderId ?? 'tessera',
      ApproximateFirstReceiveTimestamp: attrs.ApproximateFirstReceiveTimestamp ?? '0',
    },
    messageAttributes: Object.fromEntries(
      Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, { stringValue: v.StringValue, dataType: v.DataType ?? 'String' }]),
    ),
    md5OfBody: m.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queue.arn,
    awsRegion: queue.arn.split(':')[3] ?? 'us-east-1',
  };
}

/** Receive up to `max` messages the way the event source mapping does, hidden for the queue's visibility timeout. */
export async function receiveEvent(queue: TestQueue, max = 10): Promise<SQSEvent> {
  const out = await queue.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.url,
      MaxNumberOfMessages: max,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  return { Records: (out.Messages ?? []).map((m) => toSqsRecord(m, queue)) };
}

/**
 * One poll of the event source mapping: receive a batch, invoke the handler,
 * delete every record the response does not list as failed. Returns the event
 * (empty when the queue had nothing visible) and the handler's response.
 */
export async function pollOnce(
  queue: TestQueue,
  handler: (event: SQSEvent) => Promise<SQSBatchResponse | unknown>,
  max = 10,
): Promise<{ event: SQSEvent; response: SQSBatchResponse | undefined }> {
  const event = await receiveEvent(queue, max);
  if (event.Records.length === 0) return { event, response: undefined };
  const response = (await handler(event)) as SQSBatchResponse;
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  const done = event.Records.filter((r) => !failed.has(r.messageId));
  if (done.length > 0) {
    await queue.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queue.url,
        Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
      }),
    );
  }
  return { event, response };
}

/** Poll until the queue yields nothing `emptyPolls` times in a row (or `maxPolls` is reached). */
export async function drain(
  queue: TestQueue,
  handler: (event: SQSEvent) => Promise<SQSBatchResponse | unknown>,
  options: { maxPolls?: number; emptyPolls?: number } = {},
): Promise<{ invocations: number; records: number; events: SQSEvent[]; responses: SQSBatchResponse[] }> {
  let empty = 0;
  let invocations = 0;
  let records = 0;
  const events: SQSEvent[] = [];
  const responses: SQSBatchResponse[] = [];
  for (let i = 0; i < (options.maxPolls ?? 50) && empty < (options.emptyPolls ?? 2); i++) {
    const { event, response } = await pollOnce(queue, handler);
    if (event.Records.length === 0) empty++;
    else {
      empty = 0;
      invocations++;
      records += event.Records.length;
      events.push(event);
      if (response) responses.push(response);
    }
  }
  return { invocations, records, events, responses };
}
