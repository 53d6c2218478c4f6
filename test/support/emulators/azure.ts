import type { Started } from './process.js';
import type { AzureEndpoints } from './types.js';

/** Starts the azure emulators on 127.0.0.1 (owned by the azure issue; filled in by that work). */
export async function start(): Promise<{ endpoints: AzureEndpoints | undefined; stops: Started[] }> {
  return { endpoints: undefined, stops: [] };
}
