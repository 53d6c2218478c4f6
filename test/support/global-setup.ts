import type { TestProject } from 'vitest/node';
import type { EmulatorEndpoints } from './emulators/types.js';

declare module 'vitest' {
  export interface ProvidedContext {
    emulators: EmulatorEndpoints;
  }
}

/**
 * Starts every emulator once for the whole run, on 127.0.0.1, and stops them
 * afterwards. `TESSERA_EMULATORS=aws,gcp` starts a subset (handy while working
 * on one cloud); CI starts all of them and a test that needs a missing one fails.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const wanted = new Set(
    (process.env.TESSERA_EMULATORS ?? 'aws,gcp,azure,postgres')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  const t0 = Date.now();
  const [aws, gcp, azure, postgres] = await Promise.all([
    // Imported lazily so a run without a cloud does not load its emulator code.
    wanted.has('aws') ? import('./emulators/aws.js').then((m) => m.start()) : undefined,
    wanted.has('gcp') ? import('./emulators/gcp.js').then((m) => m.start()) : undefined,
    wanted.has('azure') ? import('./emulators/azure.js').then((m) => m.start()) : undefined,
    wanted.has('postgres') ? import('./emulators/postgres.js').then((m) => m.start()) : undefined,
  ]);
  const endpoints: EmulatorEndpoints = {};
  if (aws?.endpoints) endpoints.aws = aws.endpoints;
  if (gcp?.endpoints) endpoints.gcp = gcp.endpoints;
  if (azure?.endpoints) endpoints.azure = azure.endpoints;
  if (postgres?.endpoints) endpoints.postgres = postgres.endpoints;
  project.provide('emulators', endpoints);
  console.error(`[emulators] started ${Object.keys(endpoints).join(', ') || 'none'} in ${Date.now() - t0} ms`);
  const stops = [aws, gcp, azure, postgres].flatMap((s) => s?.stops ?? []);
  return async () => {
    await Promise.all(stops.map((s) => s.stop()));
  };
}

/** For a test that needs a cloud's emulators: fails (never skips) when they are not running. */
export function requireEndpoints<K extends keyof EmulatorEndpoints>(all: EmulatorEndpoints, cloud: K): NonNullable<EmulatorEndpoints[K]> {
  const e = all[cloud];
  if (!e) {
    throw new Error(
      `the ${cloud} emulators are not running: run the tests with \`npm test\` (TESSERA_EMULATORS=${process.env.TESSERA_EMULATORS ?? ''})`,
    );
  }
  return e as NonNullable<EmulatorEndpoints[K]>;
}
