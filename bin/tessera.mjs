#!/usr/bin/env node
// The `tessera` command (package.json bin).
//
// Installed from the package (npm pack, npm install): runs the built CLI, lib/cli.js, on the Node
// that started it, with no TypeScript loader and no other Node (docs/packages.md). The bundle targets the
// Node majors package.json's engines names, so an older one is refused here, before anything else loads.
//
// In a checkout of the repository (the TypeScript sources beside this file: npm link, npx tessera inside
// the repo), tessera-dev.mjs runs the sources through tsx on the pinned Node instead, as `npm run tessera`.
import { existsSync } from 'node:fs';

/** package.json engines: `>=22`. */
const MIN_NODE_MAJOR = 22;

if (existsSync(new URL('../cli/main.ts', import.meta.url))) {
  await import('./tessera-dev.mjs');
} else {
  const major = Number(process.versions.node.split('.')[0]);
  if (!(major >= MIN_NODE_MAJOR)) {
    process.stderr.write(
      `tessera: needs Node.js ${MIN_NODE_MAJOR} or newer (package.json engines), but this is Node ${process.versions.node} ` +
        `(${process.execPath}). Install Node ${MIN_NODE_MAJOR} or newer, put it first on PATH, and run tessera again.\n`,
    );
    process.exit(1);
  }
  const { main } = await import('../lib/cli.js');
  process.exitCode = await main(process.argv.slice(2), {
    stdout: (s) => process.stdout.write(s),
    stderr: (s) => process.stderr.write(s),
    cwd: process.cwd(),
  });
}
