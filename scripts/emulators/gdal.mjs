// GDAL 3 (Debian's gdal-bin and python3-gdal): the reference the raster tests compare our reader and writer
// with (test/unit/raster/gdal-reference.py, geotiff-layouts.test.ts) and the benchmarks' baseline. Like
// PostgreSQL: installed with apt-get when this runs as root on a machine without it (npm test's pretest and
// .ci/run), else only checked, failing with the command to run. Not an emulator, but the same kind of
// test prerequisite, so it is installed in the same place.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const PACKAGES = ['gdal-bin', 'python3-gdal'];
export const GDAL_INSTALL_HINT = `install GDAL as root: apt-get update && apt-get install -y ${PACKAGES.join(' ')}`;

/** The Python that has osgeo (Debian's /usr/bin/python3 where python3-gdal installs), as the tests pick it. */
export function gdalPython() {
  return process.env.TESSERA_GDAL_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');
}

function gdalReady() {
  try {
    execFileSync('gdal_translate', ['--version'], { stdio: 'ignore' });
    execFileSync(gdalPython(), ['-c', 'from osgeo import gdal'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function install() {
  if (gdalReady()) return;
  if (process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    console.error(`[emulators] installing ${PACKAGES.join(' ')} with apt-get`);
    execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
    execFileSync('apt-get', ['install', '-y', '-qq', ...PACKAGES], { stdio: ['ignore', 'ignore', 'inherit'], env });
  }
  if (!gdalReady()) throw new Error(`GDAL's tools or its Python bindings are missing: ${GDAL_INSTALL_HINT}`);
}
