import type { Started } from './process.js';
import type { AwsEndpoints } from './types.js';

/** Starts the aws emulators on 127.0.0.1 (owned by the aws issue; filled in by that work). */
export async function start(): Promise<{ endpoints: AwsEndpoints | undefined; stops: Started[] }> {
  return { endpoints: undefined, stops: [] };
}
