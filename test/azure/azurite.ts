import { randomBytes } from 'node:crypto';
import { TableClient } from '@azure/data-tables';
import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';
import { inject } from 'vitest';
import { AzureQueueJobQueue } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { requireEndpoints } from '../support/global-setup.js';

/** The Azurite connection string of this run; fails (never skips) when Azurite is not running. */
export const connectionString = (): string => requireEndpoints(inject('emulators'), 'azure').connectionString;

/** A unique lowercase name valid for a container, a queue and a table (letters and digits, starts with a letter). */
export const freshName = (label: string): string => `${label}${randomBytes(5).toString('hex')}`;

export async function freshTable(label = 'claims'): Promise<TableClient> {
  const table = TableClient.fromConnectionString(connectionString(), freshName(label), { allowInsecureConnection: true });
  await table.createTable();
  return table;
}

export async function freshContainer(label = 'objects'): Promise<ContainerClient> {
  const container = BlobServiceClient.fromConnectionString(connectionString()).getContainerClient(freshName(label));
  await container.create();
  return container;
}

/** A fresh queue and its `-poison` sibling (created, as infra/ does, so peeking an empty one works). */
export async function freshQueue(
  label = 'tiles',
  maxDequeueCount?: number,
): Promise<{ queue: AzureQueueJobQueue; service: QueueServiceClient }> {
  const service = QueueServiceClient.fromConnectionString(connectionString());
  const name = freshName(label);
  await service.getQueueClient(name).create();
  await service.getQueueClient(`${name}-poison`).create();
  return { queue: AzureQueueJobQueue.onAccount(service, name, maxDequeueCount), service };
}
