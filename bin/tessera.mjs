#!/usr/bin/env node
// `tessera` on the PATH (npm link, or npx tessera inside the repo): runs the
// TypeScript CLI through tsx without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../functions/local/cli.ts');
process.exitCode = await main(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  cwd: process.cwd(),
});
