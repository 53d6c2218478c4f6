import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../shared/domain/runtime-config.js';
import { writeChosenStack } from '../unit/choose/write-stack.js';
import { envOf, runStack } from './harness.js';
import { loadStackFile } from './stack-files.js';

/**
 * A stack file written by `tessera choose --write-stack` deploys as written:
 * the whole infra program runs on it under Pulumi mocks, and the tile worker
 * it declares has the timeout, lease and memory the chooser promised.
 * (test/unit/choose/stack-file.test.ts checks the same files against the
 * config parser alone, without the Pulumi runtime.)
 */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-choose-stack-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Timeout and memory of the tile worker as the program declared them, per cloud. */
function tileWorker(
  run: Awaited<ReturnType<typeof runStack>>,
  cloud: string,
): { timeout: number; memory: number | undefined; env: Record<string, string> } {
  switch (cloud) {
    case 'aws': {
      const fn = run.one('aws:lambda/function:Function', 'tile');
      return {
        timeout: fn.inputs.timeout as number,
        memory: fn.inputs.memorySize as number,
        env: envOf((fn.inputs.environment as { variables: unknown }).variables),
      };
    }
    case 'gcp': {
      const fn = run.one('gcp:cloudfunctionsv2/function:Function', 'tile');
      const sc = fn.inputs.serviceConfig as {
        timeoutSeconds: number;
        availableMemory: string;
        environmentVariables: Record<string, string>;
      };
      return { timeout: sc.timeoutSeconds, memory: Number.parseInt(sc.availableMemory, 10), env: envOf(sc.environmentVariables) };
    }
    default: {
      // Azure: one function app; the tile worker's settings are app settings, its memory the Flex instance size.
      const app = run.one('azure-native:web:WebApp', 'app');
      const site = app.inputs.siteConfig as { appSettings: { name: string; value: string }[] };
      const env = Object.fromEntries(site.appSettings.map((s) => [s.name, String(s.value)]));
      const flex = app.inputs.functionAppConfig as { scaleAndConcurrency: { instanceMemoryMB: number } } | undefined;
      return { timeout: Number(env[ENV.functionTimeoutSeconds]), memory: flex?.scaleAndConcurrency.instanceMemoryMB, env };
    }
  }
}

describe('tessera choose --write-stack > the infra program deploys the chosen stack (Pulumi mocks)', () => {
  it.each<{ name: string; argv: string[]; stack: string; outputs: Record<string, unknown>; memory: number }>([
    {
      name: 'AWS Lambda for a 12 min job',
      argv: ['eu-west-1', '--runtime', '12m', '--memory', '3GB'],
      stack: 'aws-eu-west-1',
      outputs: { cloud: 'aws', platform: 'aws-lambda', functionTimeoutSeconds: 900, leaseSeconds: 1200, tileQueueVisibilitySeconds: 5400 },
      memory: 3072,
    },
    {
      name: 'Cloud Functions HTTP for a 40 min job',
      argv: ['europe-west1', '--runtime', '40m', '--memory', '3GB', '--trigger', 'http', '--gcp-project', 'tessera-choose-1'],
      stack: 'gcp-europe-west1',
      outputs: { cloud: 'gcp', platform: 'gcf2-http', project: 'tessera-choose-1', functionTimeoutSeconds: 3600, leaseSeconds: 3900 },
      memory: 4096,
    },
    {
      name: 'Cloud Functions event for a 5 min job',
      argv: ['us-central1', '--runtime', '5m', '--memory', '1GB', '--clouds', 'gcp', '--gcp-project', 'tessera-choose-1'],
      stack: 'gcp-us-central1',
      outputs: { cloud: 'gcp', platform: 'gcf2-event', functionTimeoutSeconds: 540, leaseSeconds: 840, tileAckDeadlineSeconds: 600 },
      memory: 1024,
    },
    {
      name: 'Azure Flex Consumption for a 70 min job',
      argv: ['--lat', '60.7', '--lon', '17.1', '--runtime', '70m', '--memory', '3GB'],
      stack: 'azure-swedencentral',
      outputs: { cloud: 'azure', plan: 'flex', platform: 'azure-flex', functionTimeoutSeconds: 6300, leaseSeconds: 6600 },
      memory: 4096,
    },
    {
      name: 'Azure Consumption for a 5 min job',
      argv: ['westeurope', '--runtime', '5m', '--memory', '1GB'],
      stack: 'azure-westeurope',
      outputs: { cloud: 'azure', plan: 'consumption', platform: 'azure-consumption', functionTimeoutSeconds: 600, leaseSeconds: 900 },
      memory: 1536,
    },
  ])('$name', async ({ argv, stack, outputs, memory }) => {
    const file = loadStackFile((await writeChosenStack(dir, argv)).path);
    expect(file.stack).toBe(stack);
    expect(file.config['tessera:memoryMb']).toBe(String(memory));
    const run = await runStack(file.stack, file.config);
    expect(run.outputs).toMatchObject(outputs);
    const tile = tileWorker(run, String(outputs.cloud));
    expect(tile.timeout).toBe(outputs.functionTimeoutSeconds);
    // Azure Consumption has one fixed size, nothing to configure.
    if (outputs.platform !== 'azure-consumption') expect(tile.memory).toBe(memory);
    expect(Number(tile.env[ENV.leaseSeconds])).toBe(outputs.leaseSeconds);
    expect(tile.env[ENV.platform]).toBe(outputs.platform);
  });
});
