import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SceneManifest } from '../../shared/app/scene-manifest.js';
import type { AwsStackOutputs } from '../../shared/app/verify/stack-outputs.js';
import { removeDeadLettersFrom, type VerifyTarget } from '../../shared/app/verify/verify-stack.js';
import { ENV } from '../../shared/domain/runtime-config.js';
import type { JobMessage } from '../../shared/ports/job-queue.port.js';
import type { Telemetry } from '../../shared/ports/telemetry.port.js';
import { SqsJobQueue } from './adapters/sqs-job-queue.js';
import { composeAws } from './compose.js';

/**
 * A deployed AWS stack, from its outputs, for `tessera verify`: the backend
 * is composed by composeAws (the wiring the Lambda functions use) with SDK
 * clients on the default credential provider chain (environment, profile,
 * SSO, web identity in CI). Only the outputs' `emulator` endpoints (testing
 * only) point the clients elsewhere than AWS.
 */
export function awsVerifyTarget(stack: string, outputs: AwsStackOutputs, telemetry: Telemetry): VerifyTarget {
  const e = outputs.emulator;
  const base = { region: outputs.region, maxAttempts: 3 };
  const s3 = new S3Client(e ? { ...base, endpoint: e.s3, forcePathStyle: true } : base);
  const sqs = new SQSClient(e ? { ...base, endpoint: e.sqs } : base);
  const dynamodb = new DynamoDBClient(e ? { ...base, endpoint: e.dynamodb } : base);
  const env: Record<string, string> = {
    [ENV.platform]: 'aws-lambda',
    [ENV.claimsTable]: outputs.claimsTable,
    [ENV.sourceBucket]: outputs.sourceBucket,
    [ENV.outputBucket]: outputs.outputBucket,
    [ENV.tileQueue]: outputs.tileQueueUrl,
    ...(outputs.tileDeadLetterQueueUrl ? { [ENV.deadLetterQueue]: outputs.tileDeadLetterQueueUrl } : {}),
    [ENV.functionTimeoutSeconds]: String(outputs.functionTimeoutSeconds),
    [ENV.leaseSeconds]: String(outputs.leaseSeconds),
  };
  const rt = composeAws(env, { clients: { s3, sqs, dynamodb }, telemetry, owner: `tessera-verify:${stack}` });
  // Visible, in flight and delayed messages on the scene and tile queues (SQS's approximate counts).
  const pendingMessages = async (): Promise<number> => {
    const counts = await Promise.all(
      [outputs.sceneQueueUrl, outputs.tileQueueUrl].map(async (QueueUrl) => {
        const out = await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
          }),
        );
        const a = out.Attributes ?? {};
        return (
          Number(a.ApproximateNumberOfMessages ?? 0) +
          Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
          Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
        );
      }),
    );
    return counts.reduce((x, y) => x + y, 0);
  };
  return {
    stack,
    cloud: 'aws',
    backend: rt.backend,
    sourcePrefix: outputs.sourcePrefix,
    leaseSeconds: outputs.leaseSeconds,
    deadLetters: () => rt.backend.queue.deadLetters(),
    async removeDeadLetters(match: (m: JobMessage) => boolean) {
      if (!outputs.tileDeadLetterQueueUrl)
        return { removed: 0, left: 'dead letters: the outputs name no tileDeadLetterQueueUrl; remove them from the DLQ by hand' };
      // Received, then deleted under the receipt handle of that receive; any other message is made visible again.
      return { removed: await removeDeadLettersFrom(new SqsJobQueue(sqs, outputs.tileDeadLetterQueueUrl), match) };
    },
    settling: { kind: 'backlog', pendingMessages },
    async redeliverSceneEvent(manifest: SceneManifest) {
      const source = manifest.source;
      // The notification S3 sends for the object, as the scene queue receives it: a duplicate delivery.
      const token = source.versionToken;
      const object = token.startsWith('"')
        ? { key: encodeS3EventKey(source.key), eTag: token.slice(1, -1) }
        : { key: encodeS3EventKey(source.key), versionId: token };
      const body = {
        Records: [
          {
            eventVersion: '2.1',
            eventSource: 'aws:s3',
            awsRegion: outputs.region,
            eventName: 'ObjectCreated:Put',
            s3: { s3SchemaVersion: '1.0', bucket: { name: source.bucket }, object },
          },
        ],
      };
      await sqs.send(new SendMessageCommand({ QueueUrl: outputs.sceneQueueUrl, MessageBody: JSON.stringify(body) }));
      return [];
    },
  };
}

/** S3 event keys are form-encoded: `+` for a space. */
function encodeS3EventKey(key: string): string {
  return encodeURIComponent(key).replace(/%20/g, '+').replace(/%2F/g, '/');
}
