/**
 * Runs the infra program on one stack file under mocks, in a plain Node
 * process started the way Pulumi.yaml starts it (`node --import tsx`), and
 * prints a one-line JSON summary. Used by runtime.test.ts: vitest resolves
 * modules its own way, this shows that Node with tsx (what `pulumi up` uses)
 * loads the program, its ESM imports and the SDK submodules too.
 */
import { runStack } from './harness.js';
import { loadStackFile } from './stack-files.js';

const path = process.argv[2];
if (!path) throw new Error('usage: node --import tsx test/infra/tsx-entry.ts Pulumi.<stack>.yaml');
const file = loadStackFile(path);
const run = await runStack(file.stack, file.config);
console.log(JSON.stringify({ stack: file.stack, cloud: run.outputs.cloud, resources: run.resources.filter((r) => r.custom).length }));
