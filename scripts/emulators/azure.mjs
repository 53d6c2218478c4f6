// Azure emulators: Azurite (Blob, Queue, Table) comes from npm as a pinned
// devDependency, so there is nothing to download here. install() only proves
// it is present and is the version the tests were written against, and says
// how to fix it when it is not. See docs/azure.md.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The Azurite version the guard tests were confirmed against. 3.37+ needs Node >= 22. */
export const AZURITE_VERSION = '3.35.0';

/** Absolute path of Azurite's combined (blob + queue + table) entry point, as its package `bin` names it. */
export function azuriteEntry() {
  const require = createRequire(import.meta.url);
  let manifest;
  try {
    manifest = require.resolve('azurite/package.json');
  } catch (cause) {
    throw new Error(`azurite is not installed: run \`npm ci\` (it is a devDependency pinned to ${AZURITE_VERSION})`, { cause });
  }
  const pkg = JSON.parse(readFileSync(manifest, 'utf8'));
  const bin = typeof pkg.bin === 'object' ? pkg.bin.azurite : undefined;
  if (typeof bin !== 'string') throw new Error(`azurite ${pkg.version} has no "azurite" bin entry; reinstall it with \`npm ci\``);
  return { entry: join(dirname(manifest), bin), version: pkg.version };
}

export async function install() {
  const { entry, version } = azuriteEntry();
  if (!existsSync(entry)) throw new Error(`azurite entry point ${entry} is missing: run \`npm ci\``);
  if (version !== AZURITE_VERSION) {
    console.error(
      `[emulators] azure: azurite ${version} is installed but the tests were confirmed against ${AZURITE_VERSION}; ` +
        `pin it back with \`npm install --save-dev azurite@${AZURITE_VERSION}\` if the guard test fails`,
    );
  }
}
