import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { IngestEnqueuer, IngestStackOutputs } from '../../shared/app/ingest-outputs.js';
import { AdapterError } from '../../shared/domain/errors.js';

/**
 * `tessera ingest --cloud aws`: one SendMessage on the stack's ingest queue,
 * with the default credential provider chain (environment, profile, SSO, web
 * identity in CI). The SDK retries a throttled or lost send (standard mode,
 * 3 attempts); a resent request is harmless: the second delivery finds the
 * manifest row and is "already published".
 */
export function awsIngestEnqueuer(outputs: Extract<IngestStackOutputs, { cloud: 'aws' }>): IngestEnqueuer {
  const e = outputs.emulator;
  const sqs = new SQSClient({ region: outputs.region, maxAttempts: 3, ...(e ? { endpoint: e.sqs } : {}) });
  return {
    name: `sqs:${outputs.ingestQueueUrl}`,
    async enqueue(body) {
      try {
        const out = await sqs.send(new SendMessageCommand({ QueueUrl: outputs.ingestQueueUrl, MessageBody: body }));
        return { messageId: out.MessageId ?? '' };
      } catch (cause) {
        throw new AdapterError(
          `[ingest:sqs] SendMessage to ${outputs.ingestQueueUrl} failed (${(cause as Error).message}); check the AWS credentials and the stack's region`,
          { cause, retryable: true },
        );
      } finally {
        sqs.destroy();
      }
    },
  };
}
