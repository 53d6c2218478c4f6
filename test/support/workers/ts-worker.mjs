// Runs a TypeScript module inside a worker thread: registers tsx, then imports
// `workerData.entry`. (`execArgv: ['--import', 'tsx']` does not reach workers'
// entry resolution on Node 20.)
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
