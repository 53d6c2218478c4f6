#!/usr/bin/env node
// `tessera` on the PATH (npm link, or npx tessera inside the repo): runs the
// TypeScript CLI through tsx without a build step.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { nodeFor } from '../scripts/node.mjs';

// Run on the main Node (scripts/node.mjs: the newest major Tessera deploys): re-exec under the pinned one if this is another.
const node = nodeFor();
if (node !== process.execPath) {
  const child = spawnSync(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(child.status ?? 1);
}
register();
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  cwd: process.cwd(),
});
