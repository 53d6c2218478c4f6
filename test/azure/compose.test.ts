import { readFileSync } from 'node:fs';
import { ManagedIdentityCredential } from '@azure/identity';
import { describe, expect, it } from 'vitest';
import {
  azureClients,
  CLEANUP_SCHEDULE,
  composeAzure,
  HOST_JSON_FUNCTION_TIMEOUT_SEC,
  HOST_JSON_MAX_DEQUEUE_COUNT,
  HOST_JSON_RETRY_VISIBILITY_SEC,
  HOST_RETRY_VISIBILITY_SETTING,
  HOST_TIMEOUT_SETTING,
  parseTimeSpan,
  TRIGGER_CONNECTION,
} from '../../functions/azure/compose.js';
import { RECONCILE_SCHEDULE } from '../../functions/azure/handlers/ingest.handler.js';
import { MOSAIC_SCHEDULE } from '../../functions/azure/handlers/mosaic.handler.js';
import { type FunctionRegistrar, registerFunctions } from '../../functions/azure/handlers/register.js';
import { AZURE_FUNCTION_NAMES, AZURE_QUEUES, AZURE_TRIGGER_CONNECTION } from '../../infra/common/packaging.js';
import { LeaseConfigError } from '../../shared/domain/errors.js';
import { DEPLOYED_ROLES } from '../../shared/domain/key-layout.js';
import { AZURE_CLIENT_ID_SETTINGS, ENV } from '../../shared/domain/runtime-config.js';

const HOST_JSON = JSON.parse(readFileSync(new URL('../../functions/azure/host.json', import.meta.url), 'utf8'));

const env = (extra: Record<string, string> = {}): Record<string, string> => ({
  [ENV.platform]: 'azure-consumption',
  [ENV.claimsTable]: 'claims',
  [ENV.sourceBucket]: 'scenes',
  [ENV.outputBucket]: 'outputs',
  [ENV.tileQueue]: 'tiles',
  [ENV.azureStorageAccount]: 'tesseradata',
  ...extra,
});

describe('Azure wiring (compose.ts, host.json)', () => {
  describe('host.json', () => {
    it('sets functionTimeout to the Consumption ceiling the lease default is sized against', () => {
      expect(parseTimeSpan('functionTimeout', HOST_JSON.functionTimeout)).toBe(HOST_JSON_FUNCTION_TIMEOUT_SEC);
      expect(HOST_JSON_FUNCTION_TIMEOUT_SEC).toBe(600);
    });

    it('sets the queue poison threshold, retry pause and base64 encoding the adapters and handlers assume', () => {
      expect(HOST_JSON.extensions.queues.maxDequeueCount).toBe(HOST_JSON_MAX_DEQUEUE_COUNT);
      expect(HOST_JSON_MAX_DEQUEUE_COUNT).toBe(5);
      expect(parseTimeSpan('visibilityTimeout', HOST_JSON.extensions.queues.visibilityTimeout)).toBe(HOST_JSON_RETRY_VISIBILITY_SEC);
      expect(HOST_JSON.extensions.queues.messageEncoding).toBe('base64');
    });
  });

  describe('composeAzure', () => {
    it('gives Consumption a 900 s lease over the 600 s host timeout', () => {
      const rt = composeAzure(env());
      expect(rt.config).toMatchObject({ functionTimeoutSec: 600, leaseSec: 900 });
      expect(rt.host).toEqual({ functionTimeoutSec: 600, maxDequeueCount: 5, retryVisibilitySec: 330 });
      expect(rt.settings.leaseMs).toBe(900_000);
      expect(rt.backend.queue.poisonQueueName).toBe('tiles-poison');
    });

    it('refuses Flex Consumption until the host timeout is raised to match, then sizes the lease above it', () => {
      expect(() => composeAzure(env({ [ENV.platform]: 'azure-flex' }))).toThrow(new RegExp(HOST_TIMEOUT_SETTING));
      const rt = composeAzure(env({ [ENV.platform]: 'azure-flex', [HOST_TIMEOUT_SETTING]: '00:30:00' }));
      expect(rt.config).toMatchObject({ functionTimeoutSec: 1800, leaseSec: 2100 });
    });

    it('refuses a lease so long that a message whose attempt died would reach the poison queue before the lease ends', () => {
      expect(() => composeAzure(env({ [ENV.leaseSeconds]: '3600' }))).toThrow(new RegExp(HOST_RETRY_VISIBILITY_SETTING));
      expect(composeAzure(env({ [ENV.leaseSeconds]: '3600', [HOST_RETRY_VISIBILITY_SETTING]: '00:20:00' })).config.leaseSec).toBe(3600);
    });

    it.each([
      ['another platform', { [ENV.platform]: 'aws-lambda' }, /azure-consumption/],
      ['a dead-letter queue the host would not use', { [ENV.deadLetterQueue]: 'elsewhere' }, /tiles-poison/],
      [
        'a storage setting that is neither an account name nor a connection string',
        { [ENV.azureStorageAccount]: 'Not An Account' },
        /storage account name/,
      ],
      ['a malformed host timeout override', { [HOST_TIMEOUT_SETTING]: '10 minutes' }, /00:10:00/],
    ])('refuses %s with a LeaseConfigError that says what to set', (_label, extra, message) => {
      expect(() => composeAzure(env(extra))).toThrow(LeaseConfigError);
      expect(() => composeAzure(env(extra))).toThrow(message);
    });
  });

  describe("each function's identity", () => {
    it("authenticates each function as its own role identity, named by that role's client id setting", () => {
      const all = Object.fromEntries(DEPLOYED_ROLES.map((r) => [AZURE_CLIENT_ID_SETTINGS[r], `client-of-${r}`]));
      for (const role of DEPLOYED_ROLES) expect(composeAzure(env(all), { role }).identityClientId, role).toBe(`client-of-${role}`);
    });

    it('refuses to start a function whose identity setting is missing, naming the setting, rather than fall back to another identity', () => {
      const others = Object.fromEntries(DEPLOYED_ROLES.filter((r) => r !== 'tile').map((r) => [AZURE_CLIENT_ID_SETTINGS[r], 'x']));
      expect(() => composeAzure(env(others), { role: 'tile' })).toThrow(LeaseConfigError);
      expect(() => composeAzure(env(others), { role: 'tile' })).toThrow(/TESSERA_AZURE_CLIENT_ID_TILE is not set/);
    });

    it('uses no managed identity where none applies: a connection string (Azurite), or no role (an operator running verify)', () => {
      const cs =
        'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;' +
        'QueueEndpoint=http://127.0.0.1:2/devstoreaccount1;TableEndpoint=http://127.0.0.1:3/devstoreaccount1';
      expect(composeAzure(env({ [ENV.azureStorageAccount]: cs }), { role: 'tile' }).identityClientId).toBeUndefined();
      expect(composeAzure(env()).identityClientId).toBeUndefined();
    });

    it('builds the clients on the credential it is given', () => {
      const credential = new ManagedIdentityCredential({ clientId: 'client-of-tile' });
      const c = azureClients('tesseradata', credential);
      // The SDK clients keep the credential they sign with (a protected property: read it as the SDK stores it).
      expect(Reflect.get(c.blob, 'credential')).toBe(credential);
      expect(Reflect.get(c.queue, 'credential')).toBe(credential);
    });
  });

  describe('azureClients', () => {
    it('reaches an account by name over HTTPS with the managed identity', () => {
      const c = azureClients('tesseradata');
      expect(c.blob.url).toBe('https://tesseradata.blob.core.windows.net/');
      expect(c.queue.url).toBe('https://tesseradata.queue.core.windows.net');
      expect(c.table('claims').url).toBe('https://tesseradata.table.core.windows.net');
    });

    it('reaches Azurite through a connection string', () => {
      const cs =
        'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;' +
        'QueueEndpoint=http://127.0.0.1:2/devstoreaccount1;TableEndpoint=http://127.0.0.1:3/devstoreaccount1';
      const c = azureClients(cs);
      expect(c.blob.url).toBe('http://127.0.0.1:1/devstoreaccount1');
      expect(c.table('claims').url).toBe('http://127.0.0.1:3/devstoreaccount1');
    });
  });

  it('registers scene, tile, ingest and stream on the queues and connection infra/ deploys, mosaic, cleanup and reconcile on timers', () => {
    const seen: { kind: string; name: string; options: Record<string, unknown> }[] = [];
    const record =
      (kind: string) =>
      (name: string, options: object): void => {
        seen.push({ kind, name, options: options as Record<string, unknown> });
      };
    registerFunctions({ storageQueue: record('storageQueue'), timer: record('timer') } as FunctionRegistrar);
    expect(seen.map((s) => [s.kind, s.name])).toEqual([
      ['storageQueue', AZURE_FUNCTION_NAMES.scene],
      ['storageQueue', AZURE_FUNCTION_NAMES.tile],
      ['timer', AZURE_FUNCTION_NAMES.mosaic],
      ['timer', 'cleanup'],
      ['storageQueue', AZURE_FUNCTION_NAMES.ingest],
      ['timer', AZURE_FUNCTION_NAMES.reconcile],
      ['storageQueue', AZURE_FUNCTION_NAMES.stream],
    ]);
    expect(seen[0]?.options).toMatchObject({ queueName: AZURE_QUEUES.scene, connection: AZURE_TRIGGER_CONNECTION });
    expect(seen[1]?.options).toMatchObject({ queueName: `%${ENV.tileQueue}%`, connection: AZURE_TRIGGER_CONNECTION });
    // The mosaic is the same scheduled sweep as on AWS and GCP, never a trigger per tile write.
    expect(seen[2]?.options).toMatchObject({ schedule: MOSAIC_SCHEDULE });
    expect(seen[2]?.options).not.toHaveProperty('queueName');
    expect(seen[3]?.options).toMatchObject({ schedule: CLEANUP_SCHEDULE });
    // Ingestion: requests on the ingest queue infra/ creates; the manifest reconcile weekly on a timer.
    expect(seen[4]?.options).toMatchObject({ queueName: AZURE_QUEUES.ingest, connection: AZURE_TRIGGER_CONNECTION });
    expect(seen[5]?.options).toMatchObject({ schedule: RECONCILE_SCHEDULE });
    // Feature streams: BlobCreated events of batch objects under streams/, on their own queue (docs/feature-batches.md).
    expect(seen[6]?.options).toMatchObject({ queueName: AZURE_QUEUES.stream, connection: AZURE_TRIGGER_CONNECTION });
    expect(TRIGGER_CONNECTION).toBe(AZURE_TRIGGER_CONNECTION);
    for (const s of seen) expect(typeof s.options.handler).toBe('function');
  });

  it('parses host.json durations, days included', () => {
    expect(parseTimeSpan('t', '00:05:30')).toBe(330);
    expect(parseTimeSpan('t', '1.02:00:00')).toBe(93_600);
    expect(() => parseTimeSpan('t', '5m')).toThrow(LeaseConfigError);
  });
});
