/**
 * The Azure app's entry point (infra/common/packaging.ts HANDLER_ENTRIES.azure):
 * loading it registers every function with the v4 programming model.
 */
import { registerFunctions } from './register.js';

registerFunctions();
