import { PutBucketNotificationConfigurationCommand } from '@aws-sdk/client-s3';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type AwsClients, type AwsRuntime, composeAws } from '../../functions/aws/compose.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import { DEFAULT_PARAMS, ENV } from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import { awsEndpoints, dynamoDbClient, freshBucket, freshClaimsTable, freshName, s3Client, sqsClient } from './clients.js';

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
}

/** A standard queue; with `deadLetter`, a DLQ and a redrive policy after `maxReceiveCount` receives. */
export async function createQueue(label: string, redrive?: { maxReceiveCount: number }): Promise<{ queue: TestQueue; dlq?: TestQueue }> {
  const sqs = sqsClient();
  const make = async (name: string, attributes?: Record<string, string>): Promise<TestQueue> => {
    const q = await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
    const url = q.QueueUrl as string;
    const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))).Attributes
      ?.QueueArn as string;
    return { url, arn };
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
 */
export async function createTestStack(options: { maxReceiveCount?: number; params?: ProcessingParams } = {}): Promise<TestStack> {
  const s3 = s3Client();
  const ddb = dynamoDbClient();
  const [sourceBucket, outputBucket, claimsTable, tileQueues, sceneQueues] = await Promise.all([
    freshBucket(s3, 'src'),
    freshBucket(s3, 'out'),
    freshClaimsTable(ddb),
    createQueue('tiles', { maxReceiveCount: options.maxReceiveCount ?? 3 }),
    createQueue('scenes', { maxReceiveCount: 3 }),
  ]);
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
    [ENV.sourcePrefix]: 'incoming/',
    [ENV.sourceSuffix]: '.tif',
    [ENV.functionTimeoutSeconds]: '900',
    [ENV.params]: JSON.stringify(options.params ?? TEST_PARAMS),
  };
  return {
    env,
    sourceBucket,
    outputBucket,
    claimsTable,
    tiles: tileQueues.queue,
    tilesDlq: tileQueues.dlq as TestQueue,
    scenes: sceneQueues.queue,
    scenesDlq: sceneQueues.dlq as TestQueue,
    runtime: (o = {}) => createTestRuntime({ env }, emulatorClients(), o),
  };
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
  const out = await sqsClient().send(
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
    await sqsClient().send(
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
