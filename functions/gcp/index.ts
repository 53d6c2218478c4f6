/**
 * The Cloud Functions (2nd gen) entry module: `--entry-point tesseraScene |
 * tesseraTile | tesseraMosaic` (see functions/gcp/handlers/index.ts). Each
 * runtime is composed from the function's environment on its first request.
 */
import { functionRuntime } from './compose.js';
import { registerGcpFunctions } from './handlers/index.js';

registerGcpFunctions({ event: () => functionRuntime('event'), http: () => functionRuntime('http') });
