import { QueueServiceClient } from '@azure/storage-queue';
import { type AzureRuntime, azureClients, composeAzure } from '../../functions/azure/compose.js';
import { JsonTelemetry } from '../../shared/app/telemetry.js';
import { canonicalJson } from '../../shared/domain/canonical-json.js';
import type { ProcessingParams } from '../../shared/domain/job-key.js';
import { DEFAULT_PARAMS, ENV } from '../../shared/domain/runtime-config.js';
import type { Clock } from '../../shared/ports/clock.port.js';
import { encodeGeoTiff } from '../../shared/raster/index.js';
import { connectionString, freshContainer, freshName, freshTable } from './azurite.js';

/** Small tiles so a 64 x 48 scene is a 2 x 2 grid (the last row half height). */
export const TEST_PARAMS: ProcessingParams = {
  ...DEFAULT_PARAMS,
  tile_px: 32,
  output: { ...(DEFAULT_PARAMS.output as object), blocksize: 16 },
};

export const SOURCE_PREFIX = 'scenes/';
export const SOURCE_SUFFIX = '.tif';

/** A settable clock shared by every runtime of one test, so leases can lapse on demand. */
export class TestClock implements Clock {
  constructor(private t = Date.now()) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
  /** Timers never fire: time moves only by `advance`, as if every process were frozen meanwhile (FakeClock.advance). */
  every(): () => void {
    return () => {};
  }
}

/** A deployed-looking Azure stack on Azurite: containers, table, queue and poison queue, and its environment. */
export interface TestStack {
  readonly env: Record<string, string>;
  readonly sourceContainer: string;
  readonly outputContainer: string;
  readonly clock: TestClock;
  /** A runtime as a function instance composes it, with captured JSON lines; `extra` on top of the stack's variables. */
  runtime(owner?: string, extra?: Readonly<Record<string, string>>): { rt: AzureRuntime; lines: string[] };
}

export async function testStack(): Promise<TestStack> {
  const [sources, outputs, table] = await Promise.all([freshContainer('src'), freshContainer('out'), freshTable('claims')]);
  const queueName = freshName('tiles');
  const service = QueueServiceClient.fromConnectionString(connectionString());
  await Promise.all([service.getQueueClient(queueName).create(), service.getQueueClient(`${queueName}-poison`).create()]);
  const env: Record<string, string> = {
    [ENV.platform]: 'azure-consumption',
    [ENV.claimsTable]: table.tableName,
    [ENV.sourceBucket]: sources.containerName,
    [ENV.outputBucket]: outputs.containerName,
    [ENV.tileQueue]: queueName,
    [ENV.sourcePrefix]: SOURCE_PREFIX,
    [ENV.sourceSuffix]: SOURCE_SUFFIX,
    [ENV.params]: canonicalJson(TEST_PARAMS),
    [ENV.azureStorageAccount]: connectionString(),
  };
  const clock = new TestClock();
  return {
    env,
    sourceContainer: sources.containerName,
    outputContainer: outputs.containerName,
    clock,
    runtime(owner = 'instance-1', extra = {}) {
      const lines: string[] = [];
      const rt = composeAzure(
        { ...env, ...extra },
        {
          clients: azureClients(connectionString()),
          clock,
          owner,
          telemetry: new JsonTelemetry((line) => lines.push(line), { clock }),
        },
      );
      return { rt, lines };
    },
  };
}

/** A 64 x 48, 2-band (B04, B08) uint16 GeoTIFF in EPSG:32631. */
export function testScene(seed = 1): Uint8Array {
  const width = 64;
  const height = 48;
  const red = new Uint16Array(width * height);
  const nir = new Uint16Array(width * height);
  for (let i = 0; i < red.length; i++) {
    red[i] = 300 + ((i * 7 + seed * 13) % 1500);
    nir[i] = 2000 + ((i * 11 + seed * 17) % 2000);
  }
  return encodeGeoTiff({
    width,
    height,
    dataType: 'uint16',
    bandCount: 2,
    bands: [red, nir],
    geoTransform: [500_000, 10, 0, 5_700_000, 0, -10],
    crs: { epsg: 32631 },
    noData: 0,
    blockSize: 16,
    bandDescriptions: ['B04', 'B08'],
  });
}
