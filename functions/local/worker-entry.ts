// The default entry of a local worker process: one worker, no wrapped ports (see worker-child.ts).
import { runWorkerChild } from './worker-child.js';

await runWorkerChild();
