import { randomUUID } from 'node:crypto';
import { type EventGridEvent, InvocationContext, type LogLevel, type StorageQueueHandler, type Timer } from '@azure/functions';
import type { AzureDelivery, AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { AZURITE_ACCOUNT } from '../support/emulators/azure.js';

/**
 * What the Azure Functions host and the v4 Node.js library hand a function,
 * built here so handlers run with real trigger payloads against Azurite.
 * No Functions host runs in the tests (it is a .NET binary); these follow the
 * host's and the library's documented and source-visible behaviour.
 */

/** Log lines an invocation wrote, per level. */
export interface CapturedLog {
  readonly level: LogLevel;
  readonly text: string;
}

export function invocationContext(
  functionName: string,
  triggerType: string,
  triggerMetadata?: Record<string, unknown>,
  /** The trigger binding's `queueName`, as the host passes it in `options.trigger`. */
  queueName?: string,
) {
  const logs: CapturedLog[] = [];
  const context = new InvocationContext({
    invocationId: randomUUID(),
    functionName,
    logHandler: (level, ...args) => logs.push({ level, text: args.map(String).join(' ') }),
    ...(triggerMetadata === undefined ? {} : { triggerMetadata }),
    options: {
      trigger: { type: triggerType, name: triggerType === 'queueTrigger' ? 'queueItem' : 'event', ...(queueName ? { queueName } : {}) },
    },
  });
  return { context, logs };
}

/** The library's `tryJsonParse`: trigger strings that are JSON arrive parsed. */
function tryJsonParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The library's `toCamelCaseValue`, applied to every trigger-metadata value. */
function camelCaseKeys(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(camelCaseKeys);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k.charAt(0).toLowerCase() + k.slice(1), camelCaseKeys(v)]));
}

/**
 * The queue trigger's arguments for one dequeued message: the base64-decoded
 * text (parsed if JSON), and trigger metadata as the host sends it
 * (QueueTrigger, DequeueCount, Id, PopReceipt, InsertionTime, ExpirationTime,
 * NextVisibleTime) after the library's camel-casing.
 */
export function queueTriggerArgs(d: AzureDelivery): { entry: unknown; metadata: Record<string, unknown> } {
  const hostMetadata: Record<string, unknown> = {
    QueueTrigger: tryJsonParse(d.body),
    DequeueCount: d.receiveCount,
    Id: d.deliveryId,
    PopReceipt: d.popReceipt,
    InsertionTime: d.insertedOn.toISOString(),
    ExpirationTime: d.expiresOn.toISOString(),
    NextVisibleTime: d.nextVisibleOn.toISOString(),
  };
  const metadata = Object.fromEntries(
    Object.entries(hostMetadata).map(([k, v]) => [k.charAt(0).toLowerCase() + k.slice(1), camelCaseKeys(v)]),
  );
  return { entry: tryJsonParse(d.body), metadata };
}

export interface QueueHostRun {
  /** Invocations, in order, with what each came to. */
  readonly invocations: {
    readonly deliveryId: string;
    readonly dequeueCount: number;
    readonly result: 'succeeded' | 'failed';
    readonly error?: unknown;
  }[];
  readonly logs: CapturedLog[];
}

/**
 * Drive a queue-triggered function the way the host's queue listener does,
 * until the queue is empty: a handler that returns deletes the message; one
 * that throws makes it visible again (host.json `visibilityTimeout`, here 0 so
 * tests do not wait 330 s), and the failure of the `maxDequeueCount`-th
 * dequeue moves it to `<queue>-poison` (AzureQueueJobQueue.release applies the
 * host's rule; Azurite itself never moves a message).
 */
export async function runQueueHost(
  queue: AzureQueueJobQueue,
  handler: StorageQueueHandler<unknown>,
  options: { batchSize?: number; functionName?: string } = {},
): Promise<QueueHostRun> {
  const run: QueueHostRun = { invocations: [], logs: [] };
  for (;;) {
    const batch = await queue.receive(options.batchSize ?? 4, 60_000);
    if (batch.length === 0) return run;
    await Promise.all(
      batch.map(async (d) => {
        const { entry, metadata } = queueTriggerArgs(d);
        const { context, logs } = invocationContext(options.functionName ?? 'tile', 'queueTrigger', metadata, queue.queueName);
        try {
          await handler(entry, context);
          run.invocations.push({ deliveryId: d.deliveryId, dequeueCount: d.receiveCount, result: 'succeeded' });
          await queue.ack(d);
        } catch (error) {
          run.invocations.push({ deliveryId: d.deliveryId, dequeueCount: d.receiveCount, result: 'failed', error });
          await queue.release(d, 0);
        } finally {
          run.logs.push(...logs);
        }
      }),
    );
  }
}

/**
 * A `Microsoft.Storage.BlobCreated` event in the Event Grid schema, as a
 * storage account's system topic sends it. The subject carries the blob name
 * as stored; `data.eTag` is the ETag without the header's quotes; `data.url`
 * is the blob URL with the name percent-encoded.
 */
export function blobCreatedEvent(
  blobEndpoint: string,
  container: string,
  key: string,
  etag: string,
  contentLength: number,
  api = 'PutBlob',
): EventGridEvent {
  const url = `${blobEndpoint}/${container}/${key.split('/').map(encodeURIComponent).join('/')}`;
  return {
    topic: `/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/tessera/providers/Microsoft.Storage/storageAccounts/${AZURITE_ACCOUNT}`,
    subject: `/blobServices/default/containers/${container}/blobs/${key}`,
    eventType: 'Microsoft.Storage.BlobCreated',
    eventTime: new Date().toISOString(),
    id: randomUUID(),
    data: {
      api,
      clientRequestId: randomUUID(),
      requestId: randomUUID(),
      eTag: etag.replace(/^"|"$/g, ''),
      contentType: 'image/tiff',
      contentLength,
      blobType: 'BlockBlob',
      url,
      sequencer: '00000000000004420000000000028963',
      storageDiagnostics: { batchId: randomUUID() },
    },
    dataVersion: '',
    metadataVersion: '1',
  };
}

/** A timer trigger's payload. */
export function timerPayload(isPastDue = false): Timer {
  const now = new Date().toISOString();
  return { isPastDue, schedule: { adjustForDST: false }, scheduleStatus: { last: now, next: now, lastUpdated: now } };
}
