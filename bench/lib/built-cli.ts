import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { buildPackage } from '../../scripts/build-package.js';
import { REPO_ROOT } from './child.js';

/** The CLI as the package installs it, built into a folder of a section's own. */
export interface BuiltCli {
  /** The package folder (`<dir>/tessera`). */
  readonly root: string;
  /** Its `bin/tessera.mjs`, which imports `lib/cli.js`; its worker processes run `lib/worker-entry.js`. */
  readonly bin: string;
  readonly build: Awaited<ReturnType<typeof buildPackage>>;
}

/**
 * The package folder as `npm run package` builds it (no types or archives: the CLI needs neither), with the
 * repository's node_modules for its dependencies: an installed package's layout, without npm. What a user of the
 * package runs, as the start-up and scaling sections measure it.
 */
export async function buildCli(dir: string): Promise<BuiltCli> {
  const root = join(dir, 'tessera');
  const build = await buildPackage({
    root: REPO_ROOT,
    outDir: root,
    types: false,
    archives: false,
    entries: ['cli', 'index', 'worker-entry'],
  });
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
  return { root, bin: join(root, 'bin', 'tessera.mjs'), build };
}
