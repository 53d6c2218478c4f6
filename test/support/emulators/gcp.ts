import type { Started } from './process.js';
import type { GcpEndpoints } from './types.js';

/** Starts the gcp emulators on 127.0.0.1 (owned by the gcp issue; filled in by that work). */
export async function start(): Promise<{ endpoints: GcpEndpoints | undefined; stops: Started[] }> {
  return { endpoints: undefined, stops: [] };
}
