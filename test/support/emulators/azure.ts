import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort, httpAnswers, type Started, startProcess } from './process.js';
import type { AzureEndpoints } from './types.js';

/** Azurite's well-known development account (public, documented by Microsoft; not a secret). */
export const AZURITE_ACCOUNT = 'devstoreaccount1';
export const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

/** The absolute path of Azurite's combined entry point, read from its package `bin` so a layout change fails loudly. */
function azuriteEntry(): string {
  const require = createRequire(import.meta.url);
  const manifest = require.resolve('azurite/package.json');
  const pkg = require(manifest) as { bin?: Record<string, string> };
  const bin = pkg.bin?.azurite;
  if (!bin) throw new Error('azurite has no "azurite" bin entry: reinstall it with `npm ci`');
  return join(dirname(manifest), bin);
}

/** A connection string addressing each Azurite service by its own port (path-style URLs, account in the path). */
export function azuriteConnectionString(blob: string, queue: string, table: string): string {
  return [
    'DefaultEndpointsProtocol=http',
    `AccountName=${AZURITE_ACCOUNT}`,
    `AccountKey=${AZURITE_KEY}`,
    `BlobEndpoint=${blob}`,
    `QueueEndpoint=${queue}`,
    `TableEndpoint=${table}`,
  ].join(';');
}

/**
 * Starts Azurite (Blob, Queue and Table in one process) on 127.0.0.1 with
 * in-memory persistence and telemetry off (the machines have no internet).
 * `--skipApiVersionCheck` because Azurite 3.35 refuses the newer x-ms-version
 * headers the current SDKs send. Its working directory is a scratch folder so
 * nothing lands in the repository.
 */
export async function start(): Promise<{ endpoints: AzureEndpoints | undefined; stops: Started[] }> {
  const [blobPort, queuePort, tablePort] = [await freePort(), await freePort(), await freePort()];
  const workdir = await mkdtemp(join(tmpdir(), 'tessera-azurite-'));
  const url = (port: number) => `http://127.0.0.1:${port}/${AZURITE_ACCOUNT}`;
  const endpoints: AzureEndpoints = {
    blob: url(blobPort),
    queue: url(queuePort),
    table: url(tablePort),
    connectionString: azuriteConnectionString(url(blobPort), url(queuePort), url(tablePort)),
  };
  const azurite = await startProcess(
    'azurite',
    process.execPath,
    [
      azuriteEntry(),
      '--silent',
      '--disableTelemetry',
      '--skipApiVersionCheck',
      '--inMemoryPersistence',
      '--blobHost',
      '127.0.0.1',
      '--blobPort',
      String(blobPort),
      '--queueHost',
      '127.0.0.1',
      '--queuePort',
      String(queuePort),
      '--tableHost',
      '127.0.0.1',
      '--tablePort',
      String(tablePort),
    ],
    async () => (await httpAnswers(endpoints.blob)) && (await httpAnswers(endpoints.queue)) && (await httpAnswers(endpoints.table)),
    { cwd: workdir, timeoutMs: 60_000 },
  );
  return {
    endpoints,
    stops: [
      {
        name: azurite.name,
        stop: async () => {
          await azurite.stop();
          await rm(workdir, { recursive: true, force: true });
        },
      },
    ],
  };
}
