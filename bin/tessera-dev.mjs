// `tessera` from a checkout of the repository (bin/tessera.mjs imports this when the TypeScript sources are
// beside it: npm link, or npx tessera inside the repo): runs cli/main.ts through tsx without a build step, on
// the pinned Node (scripts/node.mjs: the newest major Tessera deploys). Not shipped: the package's `files`
// leave it out, and an installed package runs the built CLI (docs/packages.md).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';
import { nodeFor } from '../scripts/node.mjs';

const node = nodeFor();
if (node !== process.execPath) {
  const bin = fileURLToPath(new URL('./tessera.mjs', import.meta.url));
  const child = spawnSync(node, [bin, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(child.status ?? 1);
}
register();
const { main } = await import('../cli/main.ts');
process.exitCode = await main(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  cwd: process.cwd(),
});
