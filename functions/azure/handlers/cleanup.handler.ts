import type { InvocationContext, Timer, TimerHandler } from '@azure/functions';
import type { CleanupReport } from '../adapters/azure-table-claim-store.js';
import { type AzureRuntime, azureRuntime, invocationBackend } from '../compose.js';

/**
 * The claim-row retention sweep, on a timer (Table Storage has no TTL).
 * Deletes rows past `expires_at`, each conditional on the ETag it was read
 * with, so a row re-claimed meanwhile survives. Correctness never depends on
 * it: the claim logic compares `lease_until` with the clock itself. A failed
 * run throws and the next run picks up where it left off.
 */
// The claims table is the tile function's: the cleanup runs as the tile identity, which holds it.
export function makeCleanupHandler(rt: () => AzureRuntime = () => azureRuntime('tile')): TimerHandler {
  return async (timer: Timer, context: InvocationContext): Promise<CleanupReport> => {
    const runtime = rt();
    const backend = invocationBackend(runtime, context);
    const report = await backend.claims.deleteExpired(backend.clock.now());
    backend.telemetry.log('INFO', 'claims-cleaned', { ...report, pastDue: timer.isPastDue });
    return report;
  };
}
