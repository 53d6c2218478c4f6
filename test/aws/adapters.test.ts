import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand, S3ServiceException } from '@aws-sdk/client-s3';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  type SendMessageBatchCommandOutput,
} from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { CLAIMS_TTL_ATTRIBUTE, DynamoDbClaimStore, type DynamoDbSender } from '../../functions/aws/adapters/dynamodb-claim-store.js';
import { S3ObjectStore, type S3Sender } from '../../functions/aws/adapters/s3-object-store.js';
import { chunk, SqsJobQueue, type SqsSender } from '../../functions/aws/adapters/sqs-job-queue.js';
import { AdapterError } from '../../shared/domain/errors.js';
import type { JobMessage } from '../../shared/ports/job-queue.port.js';
import { freshJobId, freshPrefix } from '../support/ids.js';
import { dynamoDbClient, freshBucket, freshClaimsTable, freshName, s3Client, sqsClient } from './clients.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const T0 = 1_800_000_000_000;

/** A real client with a hook in front of it: `before` may answer instead of the emulator (fault injection). */
function intercept<C extends { send: (...args: never[]) => unknown }>(real: C, before: (command: unknown) => unknown | undefined): C {
  return {
    send: async (command: unknown) => {
      const injected = before(command);
      if (injected !== undefined) return injected instanceof Error ? Promise.reject(injected) : injected;
      return (real.send as (c: unknown) => Promise<unknown>)(command);
    },
  } as unknown as C;
}

const conflict = () =>
  new S3ServiceException({
    name: 'ConditionalRequestConflict',
    $fault: 'client',
    $metadata: { httpStatusCode: 409 },
    message: 'A conflicting conditional operation is currently in progress against this resource.',
  });

describe('DynamoDbClaimStore', () => {
  it('stores expires_at in epoch seconds for TTL and lease_until in milliseconds', async () => {
    const ddb = dynamoDbClient();
    const table = await freshClaimsTable(ddb);
    const store = new DynamoDbClaimStore(ddb, table);
    const jobId = freshJobId('ttl');
    await store.claim({ jobId, owner: 'w1', now: T0, leaseUntil: T0 + 1_200_000, expiresAt: T0 + 604_800_000 });
    const raw = await ddb.send(new GetItemCommand({ TableName: table, Key: { job_id: { S: jobId } }, ConsistentRead: true }));
    expect(raw.Item?.[CLAIMS_TTL_ATTRIBUTE]).toEqual({ N: String((T0 + 604_800_000) / 1000) });
    expect(raw.Item?.lease_until).toEqual({ N: String(T0 + 1_200_000) });
    expect(raw.Item?.state).toEqual({ S: 'CLAIMED' });
  });

  it('turns a throttled call into a retryable AdapterError naming the adapter', async () => {
    const ddb = dynamoDbClient();
    const table = await freshClaimsTable(ddb);
    const throttled = Object.assign(new Error('Rate of requests exceeds the allowed throughput.'), {
      name: 'ProvisionedThroughputExceededException',
      $metadata: { httpStatusCode: 400 },
    });
    const store = new DynamoDbClaimStore(
      intercept(ddb as DynamoDbSender, () => throttled),
      table,
    );
    const error = await store
      .claim({ jobId: freshJobId('thr'), owner: 'w1', now: T0, leaseUntil: T0 + 1, expiresAt: T0 + 2 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AdapterError);
    expect((error as AdapterError).retryable).toBe(true);
    expect((error as AdapterError).message).toMatch(/^\[claim-store:dynamodb\] claim of job/);
  });

  it('says the table is missing, not retryable, when it does not exist', async () => {
    const store = new DynamoDbClaimStore(dynamoDbClient(), freshName('no-such-table'));
    const error = await store.get(freshJobId('x')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AdapterError);
    expect((error as AdapterError).retryable).toBe(false);
    expect((error as AdapterError).message).toMatch(/does not exist.*TESSERA_CLAIMS_TABLE/);
  });
});

describe('S3ObjectStore', () => {
  it('retries a 409 ConditionalRequestConflict with backoff and then writes', async () => {
    const s3 = s3Client();
    const bucket = await freshBucket(s3);
    let conflicts = 2;
    const delays: number[] = [];
    const store = new S3ObjectStore(
      intercept(s3 as S3Sender, (c) => (c instanceof PutObjectCommand && conflicts-- > 0 ? conflict() : undefined)),
      bucket,
      { random: () => 0.5, sleep: async (ms) => void delays.push(ms) },
    );
    const key = `${freshPrefix()}conflict.tif`;
    const r = await store.putIfAbsent(key, bytes('x'));
    expect(r.kind).toBe('written');
    expect(delays).toEqual([50, 100]); // full jitter at 0.5 of 100 ms, then 200 ms
    expect((await store.head(key))?.size).toBe(1);
  });

  it('after the conflict retries, reports already-present when another writer has landed', async () => {
    const s3 = s3Client();
    const bucket = await freshBucket(s3);
    const key = `${freshPrefix()}landed.tif`;
    await new S3ObjectStore(s3, bucket).putIfAbsent(key, bytes('winner'));
    const store = new S3ObjectStore(
      intercept(s3 as S3Sender, (c) => (c instanceof PutObjectCommand ? conflict() : undefined)),
      bucket,
      { conflictRetries: 2, sleep: async () => {} },
    );
    expect(await store.putIfAbsent(key, bytes('loser'))).toMatchObject({ kind: 'already-present', sameBytes: false });
    expect(new TextDecoder().decode(await store.get(key))).toBe('winner');
  });

  it('after the conflict retries, fails retryably when nothing landed', async () => {
    const s3 = s3Client();
    const bucket = await freshBucket(s3);
    const store = new S3ObjectStore(
      intercept(s3 as S3Sender, (c) => (c instanceof PutObjectCommand ? conflict() : undefined)),
      bucket,
      { conflictRetries: 3, sleep: async () => {} },
    );
    const error = await store.putIfAbsent(`${freshPrefix()}never.tif`, bytes('x')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AdapterError);
    expect((error as AdapterError).retryable).toBe(true);
    expect((error as AdapterError).message).toMatch(/409 ConditionalRequestConflict after 3 retries/);
  });

  it('reports the current ETag on a repair under a stale version', async () => {
    const s3 = s3Client();
    const store = new S3ObjectStore(s3, await freshBucket(s3));
    const key = `${freshPrefix()}repair.tif`;
    const v1 = await store.putIfAbsent(key, bytes('v1'));
    const v2 = v1.kind === 'written' ? await store.putIfMatch(key, bytes('v2'), v1.version) : undefined;
    if (v1.kind !== 'written' || v2?.kind !== 'written') throw new Error('setup failed');
    expect(await store.putIfMatch(key, bytes('v3'), v1.version)).toEqual({ kind: 'version-mismatch', current: v2.version });
    expect(v2.version).toMatch(/^"[0-9a-f]{32}"$/);
  });

  it('lists every object of a prefix across ListObjectsV2 pages', async () => {
    const s3 = s3Client();
    const bucket = await freshBucket(s3);
    const store = new S3ObjectStore(s3, bucket, { listPageSize: 40 });
    const p = freshPrefix();
    const keys = Array.from({ length: 103 }, (_, i) => `${p}${String(i).padStart(4, '0')}.tif`);
    await store.putIfAbsent(`${freshPrefix()}outside.tif`, bytes('o'));
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => store.putIfAbsent(k, bytes('t'))));
    const seen: string[] = [];
    for await (const h of store.list(p)) seen.push(h.key);
    expect(seen.sort()).toEqual(keys);
  });
});

describe('SqsJobQueue', () => {
  const jobs = (n: number): JobMessage[] =>
    Array.from({ length: n }, (_, i) => ({ jobKey: freshJobId(`j${i}`), body: JSON.stringify({ i }) }));

  async function queueWithDlq(maxReceiveCount: number) {
    const sqs = sqsClient();
    const dlq = await sqs.send(new CreateQueueCommand({ QueueName: freshName('dlq') }));
    const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }))).Attributes
      ?.QueueArn;
    const q = await sqs.send(
      new CreateQueueCommand({
        QueueName: freshName('tiles'),
        Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn, maxReceiveCount }) },
      }),
    );
    return { sqs, url: q.QueueUrl as string, dlqUrl: dlq.QueueUrl as string };
  }

  it('chunks a fan-out into SendMessageBatch calls of at most ten, with the job key as a message attribute', async () => {
    const { sqs, url } = await queueWithDlq(3);
    const batchSizes: number[] = [];
    const queue = new SqsJobQueue(
      intercept(sqs as SqsSender, (c) => {
        if (c instanceof SendMessageBatchCommand) batchSizes.push(c.input.Entries?.length ?? 0);
        return undefined;
      }),
      url,
    );
    const sent = jobs(25);
    await queue.sendBatch(sent);
    expect(batchSizes.sort((a, b) => b - a)).toEqual([10, 10, 5]);
    const got = new Map<string, string>();
    for (let i = 0; i < 10 && got.size < 25; i++) {
      for (const d of await queue.receive(10, 30_000)) got.set(d.jobKey, d.body);
    }
    expect(new Map(sent.map((m) => [m.jobKey, m.body]))).toEqual(got);
  });

  it('keeps a batch under 256 KiB', () => {
    const big = Array.from({ length: 10 }, (_, i) => ({ jobKey: `k${i}`, body: 'x'.repeat(40_000) }));
    const groups = chunk(big);
    expect(groups.map((g) => g.length)).toEqual([6, 4]);
  });

  it('sends again only the entries SQS failed on its side', async () => {
    const { sqs, url } = await queueWithDlq(3);
    let calls = 0;
    const wrapped = {
      send: async (command: unknown) => {
        if (command instanceof SendMessageBatchCommand && calls++ === 0) {
          // Let the emulator take the first three entries and report the rest as a service-side failure.
          const entries = command.input.Entries ?? [];
          const ok = (await sqs.send(
            new SendMessageBatchCommand({ ...command.input, Entries: entries.slice(0, 3) }),
          )) as SendMessageBatchCommandOutput;
          return {
            ...ok,
            Failed: entries.slice(3).map((e) => ({ Id: e.Id, SenderFault: false, Code: 'InternalError', Message: 'try again' })),
          };
        }
        return (sqs.send as (c: unknown) => Promise<unknown>)(command);
      },
    } as unknown as SqsSender;
    const queue = new SqsJobQueue(wrapped, url, { sleep: async () => {} });
    const sent = jobs(7);
    await queue.sendBatch(sent);
    const keys = new Set<string>();
    for (let i = 0; i < 5 && keys.size < 7; i++) for (const d of await queue.receive(10, 30_000)) keys.add(d.jobKey);
    expect([...keys].sort()).toEqual(sent.map((m) => m.jobKey).sort());
  });

  it('refuses at once an entry SQS calls the sender fault of', async () => {
    const { sqs, url } = await queueWithDlq(3);
    const queue = new SqsJobQueue(
      intercept(sqs as SqsSender, (c) =>
        c instanceof SendMessageBatchCommand
          ? { Successful: [], Failed: [{ Id: '0', SenderFault: true, Code: 'InvalidMessageContents', Message: 'bad' }] }
          : undefined,
      ),
      url,
    );
    await expect(queue.sendBatch(jobs(1))).rejects.toThrow(/refused job .*InvalidMessageContents/);
  });

  it('redelivers a released message with a higher receive count, and ack removes it', async () => {
    const { sqs, url } = await queueWithDlq(5);
    const queue = new SqsJobQueue(sqs, url);
    const [m] = jobs(1);
    await queue.sendBatch([m as JobMessage]);
    const [first] = await queue.receive(1, 30_000);
    expect(first).toMatchObject({ jobKey: m?.jobKey, receiveCount: 1 });
    expect(await queue.receive(1, 30_000)).toEqual([]);
    await queue.release(first as never, 0);
    const [second] = await queue.receive(1, 30_000);
    expect(second).toMatchObject({ deliveryId: first?.deliveryId, receiveCount: 2 });
    await queue.ack(second as never);
    await queue.release(second as never, 0); // a release after the ack does nothing
    expect(await queue.receive(1, 0)).toEqual([]);
  });

  it('moves a message received maxReceiveCount times to the dead-letter queue, found from the redrive policy', async () => {
    const { sqs, url } = await queueWithDlq(2);
    const queue = new SqsJobQueue(sqs, url);
    const [m] = jobs(1);
    await queue.sendBatch([m as JobMessage]);
    for (let i = 0; i < 2; i++) expect(await queue.receive(1, 0)).toHaveLength(1);
    expect(await queue.receive(1, 0)).toEqual([]);
    expect(await queue.deadLetters()).toEqual([m]);
    // Peeking leaves the dead letters where they are.
    expect(await queue.deadLetters()).toEqual([m]);
  });

  it('refuses a FIFO queue and a queue without a redrive policy for dead letters', async () => {
    const sqs = sqsClient();
    expect(() => new SqsJobQueue(sqs, 'http://127.0.0.1:1/000000000000/tiles.fifo')).toThrow(/FIFO/);
    const plain = await sqs.send(new CreateQueueCommand({ QueueName: freshName('plain') }));
    await expect(new SqsJobQueue(sqs, plain.QueueUrl as string).deadLetters()).rejects.toThrow(/no RedrivePolicy/);
  });
});
