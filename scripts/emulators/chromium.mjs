// Chromium (Debian's chromium package): the browser test/e2e/view-browser.test.ts drives with playwright-core to
// load `tessera view`'s page (WebGL on SwiftShader, headless, --no-sandbox as root). Like GDAL: installed with
// apt-get when this runs as root on a machine without it (npm test's pretest and .ci/run), else only checked,
// failing with the command to run. playwright-core downloads no browser of its own: it is pointed at this one.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export const CHROMIUM_INSTALL_HINT =
  'install Chromium as root: apt-get update && apt-get install -y chromium (or set TESSERA_CHROMIUM to a Chromium binary)';

/** The binary the browser test launches: TESSERA_CHROMIUM, else Debian's. */
export function chromiumPath() {
  return process.env.TESSERA_CHROMIUM ?? '/usr/bin/chromium';
}

function chromiumReady() {
  if (!existsSync(chromiumPath())) return false;
  try {
    execFileSync(chromiumPath(), ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function install() {
  if (chromiumReady()) return;
  if (process.env.TESSERA_CHROMIUM === undefined && process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    console.error('[emulators] installing chromium with apt-get');
    execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], { stdio: ['ignore', 'ignore', 'inherit'], env });
  }
  if (!chromiumReady()) throw new Error(`no Chromium at ${chromiumPath()}: ${CHROMIUM_INSTALL_HINT}`);
}
